"""Every count flag takes what the Python API takes as a count, and refuses the rest alike.

The API counts by ``errors.is_whole`` (3.0 is 3); a flag that refused '3.0', or said '0 is
not >= 1' where another said 'expected a whole number', would teach two rules for one thing.
"""

from __future__ import annotations

import argparse

import pytest

from srifty_kit.cli import build_parser, main
from srifty_kit.cli.flags import whole_list
from tests.builders import run_srifty

# (command, flag, smallest accepted): the flags whose values are counts
WHOLE_FLAGS = {
    ("catalog refresh", "--max-attempts"): 1,
    ("profile", "--batch-sizes"): 1,
    ("profile", "--noise-batch-sizes"): 1,
    ("profile-dist", "--batch-sizes"): 1,
    ("profile-dist", "--world-sizes"): 1,
    ("report weekly", "--top"): 1,
    ("search", "--dataset-size"): 1,
    ("search", "--fallback-after"): 1,
    ("search", "--global-bsz-max"): 1,
    ("search", "--local-bsz"): 1,
    ("search", "--max-nodes"): 1,
    ("search", "--reference-bsz"): 1,
    ("search", "--suggest-probes"): 1,
    ("search", "--top"): 1,
    ("search", "--vcpu-quota"): 1,
}
ACCEPTED = {"3": 3, "3.0": 3, "1e1": 10, " 4 ": 4}
REFUSED = ["2.5", "0", "-1", "nan", "inf", "three", ""]


def _actions(parser: argparse.ArgumentParser, prefix: str = ""):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _actions(sub, f"{prefix} {name}".strip())
        elif action.option_strings:
            yield prefix, action


def _count_flags() -> dict[tuple[str, str], argparse.Action]:
    """Every flag typed as a count or a list of counts, by (command, flag)."""
    return {
        (command, action.option_strings[-1]): action
        for command, action in _actions(build_parser())
        if action.type is whole_list or getattr(action.type, "__name__", "") == "whole number"
    }


def test_the_table_covers_every_count_flag():
    assert set(_count_flags()) == set(WHOLE_FLAGS)


@pytest.mark.parametrize("key", list(WHOLE_FLAGS), ids=" ".join)
def test_a_count_flag_takes_a_whole_valued_number_as_the_api_does(key):
    parse = _count_flags()[key].type
    for text, value in ACCEPTED.items():
        got = parse(text)
        listed = got if parse is whole_list else [got]
        assert listed == [value] and all(type(v) is int for v in listed), text
    if parse is whole_list:
        assert parse("4,8.0,1e1") == [4, 8, 10]


@pytest.mark.parametrize("key", list(WHOLE_FLAGS), ids=" ".join)
def test_a_count_flag_refuses_the_rest_in_one_line_naming_it_and_the_fix(key, capsys):
    command, flag = key
    for text in REFUSED:
        if text == "" and _count_flags()[key].type is whole_list:
            continue  # an empty list has its own line, 'expected numbers like 4,8,16'
        with pytest.raises(SystemExit) as done:
            main([*command.split(), flag, text, "--help"])
        assert done.value.code == 2, text
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert f"srifty {command}: error: argument {flag}: expected a whole number " in line, line
        assert f"got {text!r}" in line, line


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["search", "--top", "0"], "argument --top: expected a whole number >= 1, got '0'"),
        (
            ["profile", "--batch-sizes", "4,2.5"],
            "argument --batch-sizes: expected a whole number >= 1, got '2.5'",
        ),
    ],
)
def test_the_command_refuses_a_count_before_any_work(args, said):
    done = run_srifty(*args, timeout=120)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert said in line
