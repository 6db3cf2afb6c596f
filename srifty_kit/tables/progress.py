"""Progress bars: tqdm's own on a terminal or in a notebook, a few whole lines in a log.

tqdm redraws its bar in place with carriage returns, as often as its callers refresh it;
written to a file or a pipe (a cron log, CI, ``srifty profile ... 2> log``) that is a frame
per refresh, all on one line, and tqdm has no line mode of its own (tqdm issue #750: its
answer is ``disable=True``). Off a terminal, ``progress_bar`` gives a tqdm bar that writes
whole lines instead: one when a stage ends (the count moves) or begins (the first postfix
after that: a batch size, a world size, a catalog step), otherwise at most one every
``LOG_INTERVAL_S``. The user's own ``TQDM_*`` variables win over the kit's settings (tqdm reads
them as its defaults, which arguments passed to it would override): ``TQDM_MININTERVAL`` is
that interval in a log, ``TQDM_DISABLE=1`` silences every bar, as ``--quiet`` does one
command's.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from tqdm import std
from tqdm.auto import tqdm as auto_tqdm

LOG_INTERVAL_S = 30.0  # in a log, between the lines a stage's end or start writes


class _Lines:
    """The stream under a log's bar: tqdm's cursor moves (a bare '\\r' or '\\n') dropped."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        # tqdm draws with unicode blocks only where the stream's encoding can say them
        self.encoding = getattr(stream, "encoding", None)

    def write(self, text: str) -> None:
        """Pass ``text`` on unless it only moves a terminal's cursor (blank, '\\r', '\\n')."""
        if text.strip():
            self._stream.write(text)

    def flush(self) -> None:
        """Flush the stream under it, where it can be."""
        getattr(self._stream, "flush", lambda: None)()


class _LogBar(std.tqdm):
    """A tqdm bar for a stream that is not a terminal: whole lines, never a redraw in place.

    A line when the count moves (a stage ended), at the first postfix after that (what the
    next stage is doing), else at most one every ``interval`` seconds. Created with
    ``mininterval=0`` so that every update reaches ``display``, which decides. Nested bars are
    not placed on rows: each writes its own lines.
    """

    def __init__(self, *args: Any, interval: float, **kwargs: Any) -> None:
        self._interval = interval
        self._postfix_n: float | None = None  # the count when the postfix was last set
        self._said: tuple[Any, bool, float] = (None, False, -math.inf)  # count, began, when
        super().__init__(*args, **kwargs)

    @staticmethod
    def status_printer(file):
        """What writes a bar to ``file``: the bar as one whole line (tqdm's redraws it)."""

        def line(text: str) -> None:
            file.write(text.rstrip() + "\n")
            getattr(file, "flush", lambda: None)()

        return line

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        """Write the bar as a line if a stage ended or began or the interval passed; True.

        ``msg`` (tqdm's blank to clear a terminal's line) and ``pos`` (a nested bar's row)
        have no meaning in a log: a blank writes nothing, every bar writes its own lines.
        """
        if msg is not None:  # close() and clear() blank a terminal's line: nothing drawn here
            return True
        now = self._time()
        mark = (self.n, self._postfix_n == self.n)
        if mark == self._said[:2] and now - self._said[2] < self._interval:
            return True
        self._said = (*mark, now)
        self.sp(self.__str__())
        return True

    def set_postfix(self, ordered_dict=None, refresh: bool = True, **kwargs: Any) -> None:
        """tqdm's ``set_postfix``, each one weighed for a line whatever ``refresh`` says."""
        # refresh=False spares a terminal a redraw per call; here display() keeps the lines
        # few, and a stage's first postfix (a world size's) is the line that says it began;
        # none before tqdm's __init__ has made its printer (a postfix= given to it)
        self._postfix_n = self.n
        super().set_postfix(ordered_dict, refresh=hasattr(self, "sp"), **kwargs)

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        """tqdm's ``set_postfix_str``, weighed for a line as ``set_postfix`` is."""
        self._postfix_n = self.n
        super().set_postfix_str(s, refresh=hasattr(self, "sp"))


def _on_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _in_notebook() -> bool:
    # imported here, after tqdm.auto has imported it with its TqdmExperimentalWarning silenced:
    # imported first, at the top, it printed that warning into every notebook using the kit
    from tqdm import autonotebook

    return autonotebook.tqdm is not std.tqdm  # tqdm.auto draws a widget in a kernel


def redraws_in_place() -> bool:
    """Whether a tqdm bar made with ``tqdm.auto`` (as a library's own, papermill's) redraws in
    place here: on a terminal's stderr or as a notebook's widget; not in a file or a pipe,
    where it would leave a frame per refresh on one line.

    Returns:
        True on a terminal or in a notebook kernel.
    """
    return _in_notebook() or _on_terminal(sys.stderr)


def progress_bar(
    iterable: Iterable | None = None,
    *,
    desc: str,
    total: float | None = None,
    show: bool | None = True,
) -> std.tqdm:
    """A progress bar on stderr for a long operation, readable on a terminal and in a log.

    Args:
        iterable: the steps to iterate over, one count each; None to count with ``update()``.
        desc: what is in progress, said first on every line (``"profiling mlp"``).
        total: the number of steps; by default ``len(iterable)``.
        show: True: tqdm's bar on a terminal or in a notebook, whole lines when stderr is
            a file or a pipe; False: nothing (a command's ``--quiet``); None: tqdm's bar on a
            terminal only (tqdm's ``disable=None``).

    Returns:
        A tqdm bar (a context manager; ``set_postfix``, ``update`` as tqdm's). Off a terminal
        it writes a line when its count moves and at the first postfix after that, and
        otherwise at most one every ``LOG_INTERVAL_S`` seconds (``TQDM_MININTERVAL`` where the
        user set it); each line ends in '\\n', none redraws another.

    Raises:
        Nothing of its own (a ``TQDM_*`` value tqdm cannot read fails as tqdm is imported).
    """
    options: dict[str, Any] = {"desc": desc, "total": total}
    if show is False:
        options["disable"] = True
    elif show is None and "TQDM_DISABLE" not in os.environ:
        options["disable"] = None
    # otherwise tqdm's default decides: False, or the user's TQDM_DISABLE
    if show is not True or redraws_in_place():
        return auto_tqdm(iterable, **options)
    interval = float(os.environ.get("TQDM_MININTERVAL", LOG_INTERVAL_S))
    return _LogBar(iterable, interval=interval, file=_Lines(sys.stderr), mininterval=0, **options)
