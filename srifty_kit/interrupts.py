"""The signals that interrupted this process, for the loops that must not outlive them.

The ``srifty`` command turns SIGINT and SIGTERM into an exception raised wherever Python happens
to be when the signal arrives. A library can swallow it there: numpy re-raises an interrupt that
lands inside an extension module's import as ``ImportError``, and a ``try: import x`` / ``except
ImportError`` carries on without the module; a loop that catches ``Exception`` to keep going
after one bad item may catch that ``ImportError`` too. The handler therefore also records the
signal here, and every long loop (timing steps, world sizes, online profiling) calls
:func:`check` between units of work, so that a swallowed interrupt still ends the command at the
next step, with what was measured kept.

This module sits below every layer: the measuring and deciding loops read it, the command line
writes it.
"""

from __future__ import annotations

import signal

received: list[int] = []  # the signals that interrupted this process, in order


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so that every command keeps what it measured."""


def interrupt(signum: int, frame: object = None) -> None:
    """Signal handler: record ``signum`` and raise it as an interrupt.

    Args:
        signum: the signal received (SIGINT or SIGTERM).
        frame: the interrupted frame (unused; the signal module passes it).

    Raises:
        Terminated: for SIGTERM.
        KeyboardInterrupt: for any other signal.
    """
    received.append(signum)
    _raise(signum)


def check() -> None:
    """Raise again an interrupt that was received, in case something swallowed it.

    Returns:
        None when no signal was received.

    Raises:
        Terminated or KeyboardInterrupt: as :func:`interrupt` raised them, for the last signal.
    """
    if received:
        _raise(received[-1])


def _raise(signum: int) -> None:
    raise Terminated(signum) if signum == signal.SIGTERM else KeyboardInterrupt
