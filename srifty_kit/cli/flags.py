"""Flag values for every subcommand: one validation of numbers, lists, URLs and file paths.

Each function here is an argparse ``type``: it returns the parsed value or raises
``argparse.ArgumentTypeError`` with what to give instead, which the parser prints as one line
and exit code 2 before any work starts. Numbers are never NaN or infinite.

File flags are typed too: ``input_file`` marks a file the command reads (a folder is refused
while parsing), ``input_path`` a file or folder, ``output`` and ``output_folder`` a path it
writes (probed writable while parsing). ``check_paths``, called by
``srifty``'s ``main`` before any subcommand runs, refuses an output that is one of the
command's inputs or another of its outputs, so no command can write over what it reads.
``for_command_line`` words a library error's "to fix" in the command's flags.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

from srifty_kit.errors import InputError, is_whole
from srifty_kit.tables.files import TABLE_SUFFIXES, same_file


def _items(text: str, example: str) -> tuple[str, ...]:
    parts = [t.strip() for t in text.split(",")]
    if "" in parts and text.strip():
        raise ValueError(f"an empty item in {text!r}; give a comma list like {example}")
    return tuple(p for p in parts if p)


def name_list(text: str) -> tuple[str, ...]:
    """An argparse type: 'g5,p4d' -> ('g5', 'p4d'); an empty item ('a,,b') is refused."""
    try:
        names = _items(text, "g5,p4d")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if not names:
        raise argparse.ArgumentTypeError(f"expected names like g5,p4d, got {text!r}")
    return names


def region(text: str) -> str:
    """An argparse type: a region name; a catalog file given in its place is refused with the
    flag that takes one, and so is an empty name (a script's unset ``--region "$REGION"``
    was taken as no flag: the default region's rows, without a word)."""
    from srifty_kit.catalog.query import names_a_file

    if not text.strip():
        raise argparse.ArgumentTypeError("expected a region name such as us-east-1, got ''")
    if names_a_file(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} names a file, not a region; give the file as --catalog {text}"
        )
    return text


def _parse(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def number(
    low: float | None = None,
    high: float | None = None,
    *,
    whole: bool = False,
    open_low: bool = False,
    open_high: bool = False,
) -> Callable[[str], float | int]:
    """An argparse type for a finite number within [low, high] (open ends where asked).

    Args:
        low, high: the bounds (None: unbounded on that side).
        whole: the value must be a whole number (returned as int), by the rule the Python
            API holds counts to (``errors.is_whole``): '3.0' and '1e3' are counts, '2.5' is
            not.
        open_low, open_high: exclude the bound itself.

    Returns:
        A function from the flag's text to the number; it raises ArgumentTypeError naming the
        range when the value is outside it (for a whole number, whatever was wrong with it:
        'expected a whole number >= 1, got '2.5'', one wording for every count flag).
    """

    def parse(text: str) -> float | int:
        try:
            value = _parse(text)
        except argparse.ArgumentTypeError:
            if not whole:
                raise
            value = math.nan  # 'nan' and 'three' get the range too: what to give instead
        below = low is not None and (value <= low if open_low else value < low)
        above = high is not None and (value >= high if open_high else value > high)
        if whole and (below or above or not is_whole(value, least=-math.inf)):
            wanted = _range(low, high, open_low, open_high)
            raise argparse.ArgumentTypeError(f"expected a whole number {wanted}, got {text!r}")
        if below or above:
            raise argparse.ArgumentTypeError(
                f"{text} is not {_range(low, high, open_low, open_high)}"
            )
        return int(value) if whole else value

    parse.__name__ = "whole number" if whole else "number"
    return parse


def _range(low, high, open_low, open_high) -> str:
    if low is None and high is None:
        return "(any sign)"
    if high is None:
        return f"{'>' if open_low else '>='} {low:g}"
    if low is None:
        return f"{'<' if open_high else '<='} {high:g}"
    return f"in {'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"


positive = number(0, open_low=True)
non_negative = number(0)
positive_int = number(1, whole=True)
probability = number(0, 1, open_low=True, open_high=True)


def whole_list(text: str) -> list[int]:
    """'4,8,16' -> [4, 8, 16]: positive whole numbers, comma-separated (no empty item)."""
    try:
        parts = _items(text, "4,8,16")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if not parts:
        raise argparse.ArgumentTypeError(f"expected numbers like 4,8,16, got {text!r}")
    return [positive_int(p) for p in parts]


def url(text: str) -> str:
    """An http(s) URL with a host, e.g. http://127.0.0.1:5000."""
    parts = urlparse(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(
            f"expected an http(s) URL such as https://ec2.us-east-1.amazonaws.com, got {text!r}"
        )
    return text


class InputPath(str):
    """A flag's value that names a file (or folder) the command reads."""


class OutputPath(str):
    """A flag's value that names a file the command writes."""


class OutputFolder(str):
    """A flag's value that names a folder the command writes its files into."""


def input_path(text: str) -> InputPath:
    """An argparse type for a file or folder the command reads (``--ledger``: a file or a
    folder of parts): marked, so that ``check_paths`` keeps every output off it (whether it
    exists is the reader's to say, with the path named).

    Raises:
        argparse.ArgumentTypeError: an empty path.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file path, got an empty one")
    return InputPath(text)


def input_file(text: str) -> InputPath:
    """An argparse type for a file the command reads, marked as ``input_path`` marks it.

    Raises:
        argparse.ArgumentTypeError: an empty path, or a folder (each reader said it its own
            way: 'model file not found', "unsupported file type ''", 'Is a directory').
    """
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(
            str(
                InputError(
                    "is a folder, not a file",
                    source=text,
                    fix="name the file itself, e.g. one of the files in that folder",
                )
            )
        )
    return input_path(text)


def output(*suffixes: str) -> Callable[[str], OutputPath]:
    """An argparse type for an output file: checked writable (and its suffix) before any work.

    The folder that will hold it is probed (a temporary file made and removed there), so a
    folder that takes no file (``/sys``) is refused while parsing, not after the work.

    Args:
        suffixes: accepted suffixes with the dot (default: any table suffix).

    Returns:
        A function from the flag's text to the same text, marked as an ``OutputPath``.
    """
    from srifty_kit.tables.files import check_writable

    accepted = suffixes or TABLE_SUFFIXES

    def parse(text: str) -> OutputPath:
        try:
            check_writable(text, accepted)
        except InputError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return OutputPath(text)

    parse.__name__ = "output file"
    return parse


def output_folder(text: str) -> OutputFolder:
    """An output folder (``--out`` of ``srifty demo`` and ``srifty report weekly``): it may
    not exist yet; it must not be a file and must be writable (probed: a temporary file is
    made and removed in it, or in the folder that will hold it) and not empty. Errors name the
    path given."""
    from srifty_kit.tables.files import check_writable

    if not text.strip():  # a script's unset "$DIR": the probe below would try '/', not here
        raise argparse.ArgumentTypeError("expected a folder path, got an empty one")
    if os.path.lexists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(
            str(
                InputError(
                    "is a file, but --out must be a folder (the command writes several files "
                    "into it)",
                    source=text,
                    fix="name a folder, new or existing, e.g. "
                    + (str(Path(text).with_suffix("")) if Path(text).suffix else f"{text}.d"),
                )
            )
        )
    try:
        check_writable(f"{text.rstrip('/')}/index.html")
    except InputError as err:  # said of the folder given, not of a file in it
        raise argparse.ArgumentTypeError(str(err.but(source=text))) from None
    return OutputFolder(text)


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _paths(args: argparse.Namespace, kind: type) -> list[tuple[str, str]]:
    """(flag, path) of every value of ``kind`` in the parsed arguments (lists included)."""
    found = []
    for dest, value in sorted(vars(args).items()):
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, kind):
                found.append((_flag(dest), str(item)))
    return found


def check_paths(args: argparse.Namespace) -> None:
    """Refuse, before any work, an output that would overwrite an input or another output.

    Every flag typed ``input_file`` is an input, every ``output`` / ``output_folder`` an
    output (``args.derived_outputs``, when a subcommand sets it, maps an output flag to the
    files it also writes beside it, e.g. a profile's ``.facts.json``). Paths are compared
    after resolving symlinks and ``..``, and hard links to one file count as the same file.

    Raises:
        InputError: naming both flags and the path.
    """
    inputs = _paths(args, InputPath)
    outputs = _paths(args, OutputPath) + _paths(args, OutputFolder)
    derive = getattr(args, "derived_outputs", None) or {}
    for flag, path in list(outputs):
        for extra in derive.get(flag, lambda p: ())(path):
            outputs.append((f"{flag} (its {Path(extra).name})", str(extra)))
    for i, (out_flag, out) in enumerate(outputs):
        for in_flag, given in inputs:
            if same_file(out, given):
                raise InputError(
                    f"{out_flag} {out} is the same file as {in_flag} {given}: writing it "
                    "would destroy what the command reads",
                    fix=f"give {out_flag.split()[0]} another path",
                )
        for other_flag, other in outputs[i + 1 :]:
            if same_file(out, other):
                raise InputError(
                    f"{out_flag} {out} and {other_flag} {other} are the same file: one "
                    "would overwrite the other",
                    fix=f"give {other_flag.split()[0]} another path",
                )


_NAMED = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")
# an argument name written bare: with an underscore it is never an English word
_BARE = re.compile(r"(?<![\w.'\"`-])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?![\w'\"`(=])")


def for_command_line(err: InputError, args: argparse.Namespace | None) -> str:
    """``err``'s one line with its "to fix" in the command's flags.

    The library names the arguments a user can change in backticks (`` `dataset_size` ``),
    or bare where the name has an underscore (``reference_bsz``); on the command line each
    becomes its flag (``--dataset-size``) when the subcommand has one: the flag named after
    the argument, or ``args.api_flags`` (argument -> flag dest) where they differ
    (``spot_fallback_after`` -> ``--fallback-after``). Other names are left as they are;
    Python code in the hint (``Job(dataset_size=...)``) is not rewritten.
    """
    if args is None or not err.fix:
        return str(err)
    dests = set(vars(args))
    aliases = getattr(args, "api_flags", None) or {}

    def word(match: re.Match) -> str:
        name = match.group(1)
        dest = aliases.get(name, name)
        return _flag(dest) if dest in dests else match.group(0)

    fix = _BARE.sub(word, _NAMED.sub(word, err.fix))
    return str(err) if fix == err.fix else str(err.but(fix=fix))
