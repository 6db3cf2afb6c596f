"""The srifty command as a whole: --help everywhere, one line and exit 2 on bad input."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from srifty_kit.cli import build_parser, main
from tests.builders import REPO, SRIFTY, run_srifty, run_srifty_into_a_closed_pipe


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


def _catalog_show(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_srifty(), "catalog", "show", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_another_region_is_not_taken_for_a_typo_and_the_fix_names_flags(tmp_path):
    done = _catalog_show("--region", "eu-west-1", cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "no embedded EC2 catalog for region 'eu-west-1'" in line
    assert "did you mean" not in line  # eu-west-1 is a region of its own, not a misspelling
    assert "give that file as --catalog" in line and "path=" not in line


def test_a_misspelt_region_gets_did_you_mean(tmp_path):
    done = _catalog_show("--region", "us-east1", cwd=tmp_path)
    assert done.returncode == 2 and "(did you mean 'us-east-1'?)" in done.stderr


def test_a_region_a_catalog_file_lacks_is_told_the_flag(tmp_path):
    from srifty_kit.catalog.query import load_catalog

    load_catalog().to_csv(tmp_path / "c.csv", index=False)
    done = _catalog_show("--catalog", "c.csv", "--region", "eu-west-1", cwd=tmp_path)
    assert done.returncode == 2
    assert "give --region us-east-1" in done.stderr and "region=" not in done.stderr


def test_a_catalog_file_given_as_the_region_is_told_the_flag_that_takes_it(tmp_path):
    from srifty_kit.catalog.query import load_catalog

    load_catalog().to_csv(tmp_path / "c.csv", index=False)
    done = _catalog_show("--region", "c.csv", cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "give the file as --catalog c.csv" in line and "path=" not in line


@pytest.mark.parametrize(
    "command",
    [
        ["demo"],
        ["report", "weekly", "--week", "2026-11-23", "--ledger", "data/sample_cur_usage.parquet"],
    ],
    ids=["demo", "report-weekly"],
)
def test_an_output_folder_given_as_a_file_says_out_must_be_a_folder(tmp_path, command):
    given = tmp_path / "p.csv"
    given.write_text("mine\n")
    done = subprocess.run(
        [SRIFTY, *command, "--out", str(given)],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"{given}: is a file, but --out must be a folder" in lines[0], lines[0]
    assert "index.html" not in lines[0]  # a path the user never gave
    assert given.read_text() == "mine\n"


def test_catalog_show_json_holds_every_float_as_the_table_does(tmp_path):
    from srifty_kit.catalog.query import load_catalog

    table = load_catalog().head(3)
    # a price of 17 significant digits: pandas' to_json would write 0.123456789
    table.loc[table.index[0], "spot_usd_per_hr"] = 0.1234567890123456
    table.to_csv(tmp_path / "c.csv", index=False)
    done = _catalog_show("--catalog", "c.csv", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    rows = json.loads(done.stdout)
    assert rows[0]["spot_usd_per_hr"] == 0.1234567890123456
    shown = pd.read_csv(
        io.StringIO(_catalog_show("--catalog", "c.csv", "--format", "csv", cwd=tmp_path).stdout)
    )
    for row, (_, line) in zip(rows, shown.iterrows(), strict=True):
        for column in ("ondemand_usd_per_hr", "spot_usd_per_hr", "gpu_memory_gib"):
            assert row[column] == line[column]  # JSON and CSV agree to the last bit


@pytest.mark.parametrize(
    ("command", "said", "meant"),
    [
        (["catalog", "show", "--fromat", "json"], "srifty catalog show", "--format"),
        (["catalog", "show", "--fromat=json"], "srifty catalog show", "--format"),
        (
            ["fit", "--measurements", "m.csv", "--out", "m.json", "--levle", "0.5"],
            "srifty fit",
            "--level",
        ),
        (["report", "weekly", "--wek", "2026-11-23"], "srifty report weekly", "--week"),
    ],
)
def test_a_misspelt_flag_is_said_by_its_subcommand_with_the_flag_meant(
    capsys, command, said, meant
):
    with pytest.raises(SystemExit) as done:
        main(command)
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    misspelt = next(arg for arg in command if arg.startswith(meant[:3]) and meant not in arg)
    assert line.startswith(f"{said}: error: unrecognized arguments: {misspelt}")
    assert f"(did you mean '{meant}'?)" in line and f"see `{said} --help`" in line


@pytest.mark.parametrize(
    ("command", "meant"),
    [
        (["fitt"], "fit"),
        (["catalog", "shwo"], "show"),
        (["catalog", "show", "--format", "jsn"], "json"),
        (["demo", "--model", "mlpp"], "mlp"),
    ],
)
def test_a_misspelt_choice_gets_did_you_mean_in_one_line(capsys, command, meant):
    with pytest.raises(SystemExit) as done:
        main(command)
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"invalid choice: '{command[-1]}'" in line and f"(did you mean '{meant}'?)" in line


def test_a_choice_near_nothing_gets_no_guess(capsys):
    with pytest.raises(SystemExit):
        main(["catalog", "show", "--format", "yaml"])
    assert (
        "invalid choice: 'yaml'" in (err := capsys.readouterr().err) and "did you mean" not in err
    )


@pytest.mark.parametrize(
    "command",
    [
        ["fit", "--measurements", "given", "--out", "m.json"],
        ["predict", "--model", "given", "--configs", "c.csv", "--out", "p.csv"],
        ["search", "--model", "given", "--workload", "cnn", "--samples", "1e6"],
        ["catalog", "show", "--catalog", "given"],
        ["report", "weekly", "--week", "2026-11-23", "--tag-file", "given", "--out", "r"],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_a_folder_given_for_a_file_is_told_so_in_one_line(tmp_path, monkeypatch, capsys, command):
    (tmp_path / "given").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(command)
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    flag = command[command.index("given") - 1]
    assert f"argument {flag}: given: is a folder, not a file; to fix: name the file itself" in line
    assert not (tmp_path / "m.json").exists() and not (tmp_path / "r").exists()


def test_a_ledger_folder_is_still_read_as_its_parts(tmp_path):
    (tmp_path / "cur").mkdir()
    done = run_srifty("report", "weekly", "--ledger", "cur", "--out", "r", "--quiet", cwd=tmp_path)
    assert done.returncode == 2
    assert "the folder holds no .csv, .csv.gz or .parquet file" in done.stderr


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        (["catalog", "show", "--gpu", "T4,"], "--gpu"),
        (["catalog", "show", "--family", "g5,,p4d"], "--family"),
        (
            ["catalog", "refresh", "--region", "us-east-1", "--out", "c.csv", "--families", ","],
            "--families",
        ),
    ],
)
def test_an_empty_item_in_a_catalog_list_names_its_flag(
    tmp_path, monkeypatch, capsys, command, flag
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(command)
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"error: argument {flag}: an empty item in" in line and "--help" in line
    assert not (tmp_path / "c.csv").exists()  # refused while parsing, before AWS is asked


@pytest.mark.parametrize(
    "command",
    [
        ["catalog", "show", "--format", "csv"],
        ["search", "--model", "m.json", "--workload", "cnn", "--samples", "1e6"],
        ["catalog", "refresh", "--out", "c.csv"],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_an_empty_region_is_refused_not_taken_for_the_default(
    tmp_path, monkeypatch, capsys, command
):
    # a script's `--region "$REGION"` with REGION unset must not list us-east-1's rows
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        main([*command, "--region", ""])
    assert done.value.code == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert "argument --region: expected a region name such as us-east-1, got ''" in line
    assert captured.out == ""


@pytest.mark.parametrize(
    "command",
    [
        ["demo"],
        [
            "report",
            "weekly",
            "--week",
            "2026-11-23",
            "--ledger",
            str(REPO / "data/sample_cur_usage.parquet"),
        ],
    ],
    ids=["demo", "report-weekly"],
)
def test_an_empty_output_folder_is_refused_before_any_work(tmp_path, monkeypatch, capsys, command):
    # a script's `--out "$DIR"` with DIR unset: nothing may be written into the current folder
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        main([*command, "--out", ""])
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "argument --out: expected a folder path, got an empty one" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("command", "meant"),
    [
        (["profile", "--model", "CNN", "--batch-sizes", "8", "--out", "q.csv"], "cnn"),
        (["demo", "--model", "MLP"], "mlp"),
    ],
)
def test_a_name_in_another_letter_case_gets_did_you_mean(
    tmp_path, monkeypatch, capsys, command, meant
):
    monkeypatch.chdir(tmp_path)
    try:
        code = main(command)
    except SystemExit as done:
        code = done.code
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"(did you mean '{meant}'?)" in line
    assert not (tmp_path / "q.csv").exists()


@pytest.mark.parametrize(
    ("command", "misspelt", "meant"),
    [
        (["fit", "--measurment", "p.csv", "--out", "m.json"], "--measurment", "--measurements"),
        (["fit", "--out=m.json", "--measurment=p.csv"], "--measurment=p.csv", "--measurements"),
        (["catalog", "refresh", "--regoin", "us-east-1", "--out", "c.csv"], "--regoin", "--region"),
    ],
)
def test_a_misspelt_required_flag_is_named_beside_the_missing_one(
    tmp_path, monkeypatch, capsys, command, misspelt, meant
):
    # argparse says the flag is missing: the user gave it, misspelt, and must see which
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(command)
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"the following arguments are required: {meant}" in line
    assert f"unrecognized arguments: {misspelt} (did you mean '{meant}'?)" in line
    assert list(tmp_path.iterdir()) == []


def test_a_missing_flag_alone_is_said_without_a_guess(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--measurements", "p.csv"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert (
        line
        == "srifty fit: error: the following arguments are required: --out; see `srifty fit --help`"
    )
