"""The ``srifty`` command: one subcommand per module of this package, each thin."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from srifty_kit.errors import InputError

# Each module defines ``register(subparsers)``, adding its subcommands with ``func`` set to a
# callable taking the parsed arguments and returning an exit code (None means 0).
_SUBCOMMAND_MODULES: tuple[str, ...] = ("catalog", "model", "profile", "search", "demo")


def comma_list(text: str | None) -> tuple[str, ...] | None:
    """'g5, p4d' -> ('g5', 'p4d'): a flag's comma list, blanks dropped; None when not given."""
    return None if text is None else tuple(t.strip() for t in text.split(",") if t.strip())


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="srifty",
        description="Pick the EC2 configuration for a training job: profile, fit, search.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in _SUBCOMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``srifty`` command; bad input exits 2 with one line on stderr."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except InputError as err:
        print(f"srifty {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"srifty {args.command}: interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
