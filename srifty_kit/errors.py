"""The one exception for "what you gave me is wrong", the helpers that word it, and the
record of the signals that interrupt a command.

**Interrupts.** The ``srifty`` command turns SIGINT and SIGTERM into an exception raised
wherever Python happens to be when the signal arrives (``on_interrupt``). A library can
swallow it there: numpy re-raises an interrupt that lands inside an extension module's import
as ``ImportError``, and a ``try: import x`` / ``except ImportError`` carries on without the
module; a loop that catches ``Exception`` to keep going after one bad item may catch that
``ImportError`` too. The handler therefore also records the signal (``interrupted_by``), and
every long loop (timing steps, world sizes, online profiling) calls ``check_interrupt``
between units of work, so that a swallowed interrupt still ends the command at the next step,
with what was measured kept. The measuring and deciding loops read the record, the command
line writes it. Only the first signal is raised: after it the command is finishing, and
later ones are recorded only (``record_interrupt``).
"""

from __future__ import annotations

import difflib
import itertools
import math
import numbers
import os
import signal
import sys
import warnings
from collections.abc import Iterable, Sized

from srifty_kit.tables.redact import redact

KEPT_ROWS = 20  # bad rows an InputError keeps (it shows five and counts the rest)


class InputError(ValueError):
    """Bad user input: names the source, the column, the first bad rows, and the fix.

    The CLI turns it into exit code 2 and one line; notebooks and widgets show ``str(err)``.
    Anything that is not an InputError is a bug and keeps its traceback. The line is redacted
    (``srifty_kit.tables.redact``): a message quoting AWS never carries a credential.
    """

    def __init__(
        self,
        problem: str,
        *,
        source: str | None = None,
        column: str | None = None,
        rows: Iterable[int] | None = None,
        fix: str | None = None,
        n_rows: int | None = None,
    ) -> None:
        """``rows``: the bad rows as the user numbers them (all of them, or the first few
        with ``n_rows`` saying how many there are); the first ``KEPT_ROWS`` are kept. An
        ``IndexLabels`` (a DataFrame's own labels) is said as "index 17, 40"."""
        self.problem = problem
        self.source = source
        self.column = column
        given = [] if rows is None else rows
        kept = list(itertools.islice(given, KEPT_ROWS))
        counted = len(given) if isinstance(given, Sized) else None
        plain_rows = [r.item() if hasattr(r, "item") else r for r in kept]  # numpy ints too
        # a DataFrame's labels stay labels through ``but``: the message says "index 17"
        self.rows = IndexLabels(plain_rows) if isinstance(given, IndexLabels) else plain_rows
        # "(+N more)" counts every bad row, not only those kept
        self.n_rows = max(n_rows or 0, counted if counted is not None else len(kept))
        self.fix = fix
        super().__init__(self._one_line())

    def but(self, **changes: object) -> InputError:
        """The same error with ``changes`` (``source``, ``fix``, ``rows``, ...): one field
        said another way (a library's fix in a command's flags, the file a caller read). New
        ``rows`` are counted afresh unless ``n_rows`` comes with them."""
        fields = {
            "source": self.source,
            "column": self.column,
            "rows": self.rows,
            "fix": self.fix,
            "n_rows": None if "rows" in changes else self.n_rows,
        }
        fields.update(changes)
        return InputError(self.problem, **fields)

    def _one_line(self) -> str:
        where = []
        if self.source:
            where.append(str(self.source))
        if self.column:
            where.append(f"column '{self.column}'")
        if self.rows:
            where.append(rows_named(self.rows, self.n_rows, self.source))
        text = (": ".join([", ".join(where), self.problem]) if where else self.problem).strip()
        if self.fix:
            text += f"; to fix: {self.fix}"
        return redact(text.replace("\n", " "))


class CommandFailed(RuntimeError):
    """A command that ran and failed (a report's cell raised, a worker died): ``srifty``
    prints it as one line and exits 1; whatever the command had written is kept. Its message
    is redacted like an InputError's."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


def did_you_mean(name: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ' (did you mean X or Y?)' for the closest choices, or '' when none is close.

    Letter case does not count against a choice ('CNN' finds 'cnn', 'a10g' finds 'A10G'):
    difflib alone finds nothing alike between 'CNN' and 'cnn'.

    Args:
        name: what the user gave.
        choices: the names it may have meant, as they are to be written.
        n: at most this many suggestions.

    Returns:
        The parenthesised hint with a leading space, or ''.
    """
    spelt: dict[str, str] = {}
    for choice in (str(c) for c in choices):
        spelt.setdefault(choice.lower(), choice)
    close = difflib.get_close_matches(str(name).lower(), list(spelt), n=n, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(spelt[c]) for c in close) + "?)"


def duration(seconds: float, digits: int = 3) -> str:
    """A duration as people say it, in the unit that fits it: '40 ms', '1.01 s', '12 min',
    '53.7 min', '2.5 h', '1,234 h' (never '1.01e+03 ms'), to ``digits`` significant digits
    (4: '202.6 ms', '14.76 s', where two close times must read apart). The one formatter of
    the kit's messages and lessons."""
    s = float(seconds)
    g = f".{int(digits)}g"
    shown = float(format(s, g))  # the unit of the value as shown: 0.9996 s is '1 s', not '1e+03 ms'
    if shown >= 3600:
        hours = s / 3600
        return f"{hours:,.0f} h" if hours >= 100 else f"{format(hours, g)} h"
    if shown >= 60:
        return f"{format(s / 60, g)} min"
    if shown >= 1:
        return f"{format(s, g)} s"
    return f"{format(s * 1000, g)} ms"


def hours(h: float) -> str:
    """Hours as people say them: '102 h', '2.5 h', '30 min', '45 s' (``duration``)."""
    return duration(h * 3600)


class IndexLabels(list):
    """The bad rows of a DataFrame given in Python, as its own index labels (17, 40 of a
    filtered frame; 'a', 'b'; dates): a user finds them with ``df.loc``, where the positions
    from 0 of a filtered frame ("row 2") point at no label it shows. A file's rows are said
    by its line numbers instead (``tables.contracts.row_labels``)."""


def rows_said(rows: Iterable[object], count: int | None = None) -> str:
    """'2, 3, 4, 5, 6 (+20 more)': the first five of ``rows`` and how many others there are
    of ``count`` in all (default: as many as given). Text labels are quoted ('a', 'b'): a
    label '3' is not the row 3."""
    rows = list(rows)
    count = len(rows) if count is None else count
    more = f" (+{count - 5} more)" if count > 5 else ""
    return ", ".join(repr(r) if isinstance(r, str) else str(r) for r in rows[:5]) + more


# files whose rows have no line numbers: their rows are said as pandas reads them, from 0
_ROWS_FROM_0 = {".parquet": "Parquet", ".json": "JSON"}


def rows_named(rows: Iterable[object], count: int | None = None, source: object = None) -> str:
    """Rows as a message names them: 'rows 3, 7' (a CSV's line numbers, header line 1),
    'rows 1, 5 of the Parquet file, counted from 0' when ``source`` is a Parquet or JSON
    file, which has no lines to number its rows by, or 'index 17, 40' for ``IndexLabels``
    (a DataFrame given in Python, named by its own index labels).

    Args:
        rows: the labels (``tables.contracts.row_labels``), the first five shown.
        count: how many there are in all (default: as many as given).
        source: the file or table they are rows of, as an InputError names it.

    Returns:
        The phrase, without a trailing colon.
    """
    if isinstance(rows, IndexLabels):
        return f"index {rows_said(rows, count)}"
    shown = f"rows {rows_said(rows, count)}"
    kind = _ROWS_FROM_0.get(os.path.splitext(str(source or ""))[1].lower())
    return f"{shown} of the {kind} file, counted from 0" if kind else shown


def ratio_said(ratio: float) -> str:
    """A ratio in two digits ('1.3', '0.77'), three where two would say '1' of one that is
    not 1: 1.04 is '1.04' and 0.996 is '0.996', never '1' (which would say it is no ratio
    at all). The one rule of the kit's 'Nx faster', 'Nx as much', 'steps Nx the fit'."""
    text = f"{ratio:.2g}"
    return f"{ratio:.3g}" if text == "1" else text


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun, singular or plural as the count wants: '1 step', '0 steps',
    '1,234 steps', '2 instance types'; ``plural`` when adding 's' is wrong ('1 batch',
    '2 batches')."""
    n = int(n)
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def callers_level() -> int:
    """The ``stacklevel`` for ``warnings.warn``, called beside it, that names the user's own
    line (a notebook cell, a script) rather than one inside srifty_kit: the first frame
    outside the package. A fixed level names whichever library line happened to call."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn as ``warnings.warn`` does, naming the user's own line (``callers_level``): in a
    script or a test its file and line, as ever; in a notebook cell the cell as IPython names
    it in a traceback ('Cell In[3]:2: UserWarning: ...'), where ``warnings.warn`` would name
    the kernel's temporary file of the cell ('/tmp/ipykernel_1234/567.py:2: ...'). The
    warnings filters, the once-per-line registry and ``catch_warnings`` work as for
    ``warnings.warn``; other libraries' warnings are left as they show.

    Args:
        message: the warning's text.
        category: its class (``UserWarning``, or one of the kit's subclasses).

    Returns:
        None.

    Raises:
        category: where a warnings filter turns it into an error.
    """
    level = callers_level()  # counted from this function, as warnings.warn counts
    try:
        frame = sys._getframe(level - 1)
    except ValueError:  # the stack ends inside the package: warnings.warn says where
        frame = None
    cell = _cell_name(frame.f_code.co_filename) if frame is not None else None
    if cell is None:
        warnings.warn(message, category, stacklevel=level)
        return
    user = frame.f_globals
    warnings.warn_explicit(
        message,
        category,
        cell,
        frame.f_lineno,
        module=user.get("__name__"),
        registry=user.setdefault("__warningregistry__", {}),
    )


def _cell_name(filename: str) -> str | None:
    """'Cell In[3]' for the file IPython compiled a cell into, None for any other file."""
    ipython = sys.modules.get("IPython")  # never imported here: only where a shell runs
    shell = getattr(ipython, "get_ipython", lambda: None)()
    name = getattr(getattr(shell, "compile", None), "format_code_name", None)
    said = name(filename) if callable(name) else None
    return " ".join(said) if said else None


def first_line(err: BaseException, limit: int = 300) -> str:
    """``"TypeName: the message's first line"`` of a user's exception, for a one-line error:
    redacted whole before it is cut to ``limit`` characters (a credential cut in two is
    masked by neither half)."""
    said = (redact(str(err)).strip().splitlines() or [""])[0][:limit]
    return f"{type(err).__name__}: {said}"


def is_number(value: object) -> bool:
    """Whether ``value`` is a number as an argument means one: a Python or numpy int or float
    (``np.float32(0.9)`` from a table's cell included), never a bool, which Python counts
    as an int but nobody gives as a level or a count.

    Args:
        value: an argument as the caller gave it.

    Returns:
        True for a real number (NaN and infinities included: the caller bounds it).
    """
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_whole(value: object, least: int = 1) -> bool:
    """Whether ``value`` is a whole number (``is_number``; 8.0 counts) of at least ``least``.

    Args:
        value: an argument as the caller gave it.
        least: the smallest value accepted.

    Returns:
        True for a finite whole number >= ``least``.
    """
    return (
        is_number(value)
        and math.isfinite(float(value))
        and float(value) == int(value)
        and value >= least
    )


def check_level(level: object, fix: str = "e.g. 0.9", column: str | None = None) -> float:
    """A level (the probability an interval or a promise holds) as a float, or one line
    saying what to give: the one rule and wording for every ``level`` argument.

    Args:
        level: the caller's value (``is_number``; a bool or text is refused).
        fix: what to give instead, said in the error.
        column: the parameter's name where the caller is a notebook or command (said in the
            error's column field), else None.

    Returns:
        ``float(level)``.

    Raises:
        InputError: ``level`` is not a number strictly between 0 and 1.
    """
    if not (is_number(level) and 0.0 < float(level) < 1.0):
        raise InputError(
            f"level must be a probability between 0 and 1, got {level!r}", column=column, fix=fix
        )
    return float(level)


def plain(value: object) -> str:
    """A value as a person reads it in a message: ``8.5`` not ``np.float64(8.5)``, ``16`` not
    ``16.0``, strings quoted."""
    item = getattr(value, "item", None)
    if callable(item):  # a numpy scalar
        try:
            value = item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, str) else str(value)


interrupted_by: list[int] = []  # the signals that interrupted this command, in order


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered like Ctrl-C so that every command keeps what it measured."""


def on_interrupt(signum: int, frame: object = None) -> None:
    """Signal handler: record ``signum`` and raise it as an interrupt, once.

    From the first signal on, the command is finishing: saving what it measured, saying where
    it is. A further signal (GNU ``timeout`` sends its signal to the process and then to its
    process group; an impatient second Ctrl-C) is only recorded (``record_interrupt``): raised
    there, it would cut the saving or the last line short with a traceback.

    Args:
        signum: the signal received (SIGINT or SIGTERM).
        frame: the interrupted frame (unused; the signal module passes it).

    Raises:
        Terminated: for SIGTERM.
        KeyboardInterrupt: for any other signal.
    """
    interrupted_by.append(signum)
    for s in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(s) is on_interrupt:
            signal.signal(s, record_interrupt)
    _raise_interrupt(signum)


def record_interrupt(signum: int, frame: object = None) -> None:
    """Signal handler of a command that is finishing on a signal: record ``signum`` only (the
    exit status says the last one)."""
    interrupted_by.append(signum)


def check_interrupt() -> None:
    """Raise again an interrupt that was received, in case something swallowed it.

    Returns:
        None when no signal was received.

    Raises:
        Terminated or KeyboardInterrupt: as ``on_interrupt`` raised them, for the last signal.
    """
    if interrupted_by:
        _raise_interrupt(interrupted_by[-1])


def _raise_interrupt(signum: int) -> None:
    raise Terminated(signum) if signum == signal.SIGTERM else KeyboardInterrupt
