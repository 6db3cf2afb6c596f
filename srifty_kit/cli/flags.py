"""Flag values for every subcommand: one validation of numbers, lists, URLs and output paths.

Each function here is an argparse ``type``: it returns the parsed value or raises
``argparse.ArgumentTypeError`` with what to give instead, which the parser prints as one line
and exit code 2 before any work starts. Numbers are never NaN or infinite.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from urllib.parse import urlparse

from srifty_kit.tables.files import TABLE_SUFFIXES


def comma_list(text: str | None) -> tuple[str, ...] | None:
    """'g5, p4d' -> ('g5', 'p4d'): a flag's comma list, blanks dropped; None when not given."""
    return None if text is None else tuple(t.strip() for t in text.split(",") if t.strip())


def _parse(text: str, whole: bool) -> float | int:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a {'whole number' if whole else 'number'}, got {text!r}"
        ) from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    if whole:
        if value != int(value):
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
        return int(value)
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
        whole: the value must be a whole number (returned as int).
        open_low, open_high: exclude the bound itself.

    Returns:
        A function from the flag's text to the number; it raises ArgumentTypeError naming the
        range when the value is outside it.
    """

    def parse(text: str) -> float | int:
        value = _parse(text, whole)
        below = low is not None and (value <= low if open_low else value < low)
        above = high is not None and (value >= high if open_high else value > high)
        if below or above:
            wanted = _range(low, high, open_low, open_high)
            raise argparse.ArgumentTypeError(f"{text} is not {wanted}")
        return value

    parse.__name__ = "whole number" if whole else "number"
    return parse


def _range(low, high, open_low, open_high) -> str:
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
    """'4,8,16' -> [4, 8, 16]: positive whole numbers, comma-separated."""
    parts = comma_list(text) or ()
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


def output(*suffixes: str) -> Callable[[str], str]:
    """An argparse type for an output file: checked writable (and its suffix) before any work.

    Args:
        suffixes: accepted suffixes with the dot (default: any table suffix).

    Returns:
        A function from the flag's text to the same text.
    """
    from srifty_kit.errors import InputError
    from srifty_kit.tables.files import check_writable

    accepted = suffixes or TABLE_SUFFIXES

    def parse(text: str) -> str:
        try:
            check_writable(text, accepted)
        except InputError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return text

    parse.__name__ = "output file"
    return parse


def output_folder(text: str) -> str:
    """An output folder: it may not exist yet; it must not be a file and must be writable."""
    from srifty_kit.errors import InputError
    from srifty_kit.tables.files import check_writable

    try:
        check_writable(f"{text.rstrip('/')}/index.html")
    except InputError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text
