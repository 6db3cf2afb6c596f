"""The srifty command as a whole: --help everywhere, one line and exit 2 on bad input."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from srifty_kit.cli import build_parser, main
from tests.builders import SRIFTY, run_srifty_into_a_closed_pipe


def _commands(parser: argparse.ArgumentParser, prefix=()):
    """Every command path of the parser, nested subcommands included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from _commands(sub, (*prefix, name))


COMMANDS = list(_commands(build_parser()))


def test_the_design_commands_exist():
    names = {" ".join(c) for c in COMMANDS}
    for expected in ("fit", "predict", "profile", "search", "catalog show", "catalog refresh"):
        assert expected in names


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([*command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: srifty " + " ".join(command))


def _srifty() -> str:
    assert Path(SRIFTY).is_file(), "the srifty console script is not installed next to this python"
    return SRIFTY


def test_console_script_reports_bad_input_in_one_line_with_exit_2(tmp_path):
    bad = tmp_path / "measurements.csv"
    bad.write_text("model,instance_type\nbert,g4dn.12xlarge\n")
    done = subprocess.run(
        [_srifty(), "fit", "--measurements", str(bad), "--out", str(tmp_path / "m.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "num_nodes" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "m.json").exists()


def test_unknown_subcommand_exits_2(capsys):
    with pytest.raises(SystemExit) as done:
        main(["fitt"])
    assert done.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_output_into_a_pipe_that_closes_ends_quietly_like_cat(fmt):
    code, err = run_srifty_into_a_closed_pipe("catalog", "show", "--format", fmt)
    assert err == ""  # no BrokenPipeError traceback, no "Exception ignored" at exit
    assert code == 141  # 128 + SIGPIPE: what the shell reports for `cat big | head`


def test_an_existing_directory_as_out_is_told_to_name_a_file(tmp_path):
    (tmp_path / "reports").mkdir()
    (tmp_path / "m.csv").write_text("model\n")
    done = subprocess.run(
        [_srifty(), "fit", "--measurements", "m.csv", "--out", "reports"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "reports: is a directory, not a file" in line
    assert "give a file name, e.g. reports/NAME.json" in line and "suffix" not in line
