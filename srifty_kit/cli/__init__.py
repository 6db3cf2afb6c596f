"""The ``srifty`` command's entry point: the console script and ``python -m srifty_kit``
import ``main`` from here.

This module is kept small on purpose. In the command's own process it holds SIGINT and
SIGTERM from its first lines (records them in ``_held``; ``main`` raises them once the
arguments are known), and only then imports the command (``command.py``: argparse, pandas,
the subcommands). Python compiles a module whole before its first line runs: when the
handling sat at the top of the command's ~300-line module, the ~9 ms of compiling it (more
on a busy machine) were a window in which Ctrl-C ended in a KeyboardInterrupt traceback.
What is left before the handling is Python's own start-up (``site``), which no code of the
kit's can reach.
"""

from __future__ import annotations

import os
import signal
import sys

# Signals held until the command knows its arguments (``main`` raises them then, so that the
# command's last line can say what it left: ``at_start``). The ``srifty`` command starts
# recording them here, before the command's module is even compiled (its imports take a
# second; pandas alone a third): Ctrl-C during start-up would otherwise end in Python's
# KeyboardInterrupt traceback, or be lost where the shell started the command with SIGINT
# ignored.
_held: list[int] = []


def _record_interrupt(signum: int, frame: object = None) -> None:
    """Until the command line is parsed: record the signal only (``_held``)."""
    _held.append(signum)


def _started_as_the_command() -> bool:
    """Whether this process is the ``srifty`` command (its console script, or ``python -m
    srifty_kit``), not a program or a notebook that imports this module: only the command's
    own process may have its signal handling set on import."""
    started = sys.modules.get("__main__")
    spec = getattr(started, "__spec__", None)
    if spec is not None:
        return spec.name == "srifty_kit.__main__"
    script = os.path.basename(getattr(started, "__file__", None) or "")
    return script.removesuffix(".exe") == "srifty"


_THE_COMMAND = _started_as_the_command()
if _THE_COMMAND:
    signal.signal(signal.SIGINT, _record_interrupt)
    signal.signal(signal.SIGTERM, _record_interrupt)

from srifty_kit.cli.command import build_parser, main  # noqa: E402

__all__ = ["build_parser", "main"]
