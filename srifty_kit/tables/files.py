"""Reading and writing tables: CSV, Parquet or JSON by suffix, and atomic writes.

Every output of the kit goes through ``atomic_write``: an existing file is replaced whole or
not at all. Commands call ``check_writable`` before their work starts, so a path that cannot
be written is refused before anything is measured (``probe_folder`` makes and removes a file
there: permission bits do not tell, e.g. under ``/sys``); if the write still fails at the end (the
disk filled, permissions changed), the content is kept in a recovery file and the error says
where.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from srifty_kit.errors import InputError

TABLE_SUFFIXES = (".csv", ".parquet", ".json")

_READERS: dict[str, Callable[[Path], pd.DataFrame]] = {
    ".csv": lambda p: pd.read_csv(p),
    ".parquet": lambda p: pd.read_parquet(p),
    ".json": lambda p: pd.read_json(p, orient="records"),
}


TABLE_FIX = "give a table: a .csv with a header line, a .parquet, or a .json list of records"


def read_table(path: str | os.PathLike, fix: str = TABLE_FIX) -> pd.DataFrame:
    """Read a CSV, Parquet or JSON-records table; the frame remembers its file in ``attrs``
    (``source``: the path; ``from_file``: its suffix, which says how its rows are numbered:
    ``tables.contracts.row_labels``).

    ``fix``: what to do when the file is there but is no table (empty, or a JSON document of
    another kind), said in the caller's words (e.g. which table a command wants).

    Raises:
        InputError: ``path`` is not a path or names a folder, its suffix is not a table's,
            the file is missing, or it cannot be read as its suffix says.
    """
    path = not_a_directory(as_path(path, "the table's file"))
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise InputError(
            f"unsupported file type '{path.suffix}'",
            source=str(path),
            fix="give a .csv, .parquet or .json file",
        )
    if not path.is_file():
        raise InputError("file not found", source=str(path), fix="check the path")
    try:
        table = reader(path)
    except (ValueError, OSError, UnicodeDecodeError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(
            f"cannot be read as {path.suffix[1:]}: {first}", source=str(path), fix=fix
        ) from err
    _refuse_duplicate_header(path, table)
    table.attrs["source"] = str(path)
    table.attrs["from_file"] = path.suffix.lower()
    return table


def _refuse_duplicate_header(path: Path, table: pd.DataFrame) -> None:
    """pandas renames a repeated CSV header ('x', 'x.1'): say so instead of picking one."""
    names = [str(c) for c in table.columns]
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8", errors="replace") as handle:
            names = next(csv.reader(handle), names)
    seen: set[str] = set()
    for name in (n.strip() for n in names):
        if name in seen:
            raise InputError(
                f"the column {name!r} appears more than once in the header",
                source=str(path),
                column=name,
                fix="keep one column of each name",
            )
        seen.add(name)


def not_a_directory(path: Path, suffixes: tuple[str, ...] | None = None) -> Path:
    """``path``, or an InputError when it is a directory (checked before a suffix: a folder
    has none, and that is not what is wrong; writing over one fails with advice about disk
    space, and reading one said "unsupported file type ''" or "not found" of a folder
    that is there).

    Args:
        path: a file to read or write.
        suffixes: the accepted suffixes; the first names the example in the fix.

    Returns:
        ``path``.

    Raises:
        InputError: ``path`` is a directory.
    """
    if path.is_dir():
        name = f"NAME{suffixes[0]}" if suffixes else "NAME"
        raise InputError(
            "is a directory, not a file",
            source=str(path),
            fix=f"give a file name, e.g. {path / name}",
        )
    return path


def check_writable(path: str | os.PathLike, suffixes: tuple[str, ...] | None = None) -> Path:
    """Refuse an output path that cannot be written, before any work is done.

    Args:
        path: the file a command will write (it may exist: it is then replaced whole).
        suffixes: the accepted suffixes (lower case, with the dot); None accepts any.

    Returns:
        The path.

    Raises:
        InputError: the path is a directory, the suffix is not accepted, a parent is a file, or
            the folder that would hold it cannot be written; the message says what to change.
    """
    path = not_a_directory(as_path(path, "the output"), suffixes)
    if suffixes is not None and path.suffix.lower() not in suffixes:
        raise InputError(
            f"cannot write this kind of file ({path.suffix or 'no suffix'})",
            source=str(path),
            fix="name the output " + ", ".join(suffixes[:-1]) + f" or {suffixes[-1]}"
            if len(suffixes) > 1
            else f"name the output {suffixes[0]}",
        )
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # atomic_write creates the missing folders below this one
    if not folder.is_dir():
        raise InputError(
            f"{folder} is a file, so no folder can be made there",
            source=str(path),
            fix="choose another output path",
        )
    probe_folder(folder, source=str(path))
    return path


def probe_folder(folder: str | os.PathLike, source: str | None = None) -> None:
    """Create and remove a temporary file in ``folder``: can a file be written there?

    ``os.access`` answers from the permission bits, and for root it says yes to folders that
    take no file (``/sys``, a read-only mount); only a real write tells. The probe is what
    ``atomic_write`` will do at the end (a temporary file beside the output, renamed over).

    Args:
        folder: an existing folder.
        source: the output path named in the error (default: the folder).

    Raises:
        InputError: no file can be made there; the message gives the system's reason.
    """
    try:
        fd, tmp = tempfile.mkstemp(prefix=".srifty-probe-", dir=folder)
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise InputError(
            f"no file can be written in the folder {folder} ({reason})",
            source=source or str(folder),
            fix="choose a writable folder or change its permissions",
        ) from None
    os.close(fd)
    os.unlink(tmp)


def same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two paths name one file: equal once symlinks and ``..`` are resolved, or two
    hard links to the same inode. A path that does not exist yet is compared by name."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet): the names differ, so not the same
        return False


def partial_path(path: str | os.PathLike, run: int = 1) -> Path:
    """Where an unfinished run keeps its rows beside an older output: ``p.csv`` ->
    ``p.partial.csv`` (``run`` 1), ``p.partial.2.csv``, ``p.partial.3.csv``, ... (the older
    file stays as it was until the run finishes)."""
    path = Path(path)
    tag = "partial" if run == 1 else f"partial.{run}"
    return path.with_name(f"{path.stem}.{tag}{path.suffix}")


def _partial_runs(path: Path) -> list[int]:
    """The run numbers of the partial files beside ``path`` (``p.partial.csv`` is run 1)."""
    name = re.compile(re.escape(path.stem) + r"\.partial(?:\.(\d+))?" + re.escape(path.suffix))
    runs = []
    if path.parent.is_dir():
        for entry in path.parent.iterdir():
            found = name.fullmatch(entry.name)
            if found and partial_path(path, int(found.group(1) or 1)).name == entry.name:
                runs.append(int(found.group(1) or 1))
    return sorted(runs)


def earlier_partials(path: str | os.PathLike) -> list[Path]:
    """The partial files earlier unfinished runs left beside ``path`` (``partial_path`` with
    any run number), oldest run first."""
    return [partial_path(path, n) for n in _partial_runs(Path(path))]


def next_partial(
    path: str | os.PathLike, companions: Callable[[Path], list[Path]] = lambda p: []
) -> Path:
    """The partial file a new unfinished run writes beside ``path``: ``p.partial.csv`` when no
    earlier run left one, else the run number after the last (``p.partial.2.csv``), never a
    name that is there already (or whose companions are): an earlier run's rows are kept."""
    return _after(Path(path), _partial_runs(Path(path)), companions)


def _after(path: Path, runs: list[int], companions: Callable[[Path], list[Path]]) -> Path:
    """``next_partial`` given the run numbers already beside ``path``."""
    return partial_path(path, _next_run(path, runs, companions))


def _next_run(path: Path, runs: list[int], companions: Callable[[Path], list[Path]]) -> int:
    """The run number after ``runs`` whose partial file (and companions) is not there."""

    def taken(table: Path) -> bool:
        return any(os.path.lexists(p) for p in (table, *companions(table)))

    run = max(runs, default=0) + 1
    while taken(partial_path(path, run)):
        run += 1
    return run


def _second_name(src: Path, dst: Path) -> None:
    """``dst`` as a second name of the file ``src`` (a hard link: the file stays as it is
    when ``src`` is replaced), or an atomic copy where the file system has no hard links."""
    try:
        os.link(src, dst)
    except OSError:
        atomic_write(dst, lambda tmp: shutil.copyfile(src, tmp))


def staged_outputs(
    path: str | os.PathLike, companions: Callable[[Path], list[Path]] = lambda p: []
) -> list[Path]:
    """Every file a run staged at ``path`` (``Staging``) may write besides ``path`` itself:
    its companions, and the partial table it would take now (or the one after, where it sets
    an unfinished run's output aside under the first) and the first run's, with theirs: what
    a command must not be given as an input."""
    path = Path(path)
    runs = _partial_runs(path)
    first = _next_run(path, runs, companions)
    after = _after(path, [*runs, first], companions)
    tables = dict.fromkeys([partial_path(path), partial_path(path, first), after])
    return [*companions(path), *(f for t in tables for f in (t, *companions(t)))]


class Staging:
    """Where a long run (a profile) keeps what it measured while it runs.

    When nothing is at the output yet, the run writes there as it goes. When an older file
    is there (the output or one of its ``companions``, e.g. the facts JSON beside a
    profile), the run writes beside it, to ``next_partial`` (``p.partial.csv``), and only a
    run that finishes replaces the older file (then ``finish`` drops its partial one): an
    interrupted or failed run leaves it byte-identical and its rows in the partial file. A
    partial file an earlier unfinished run left is never overwritten or dropped: the new run
    takes the next name (``p.partial.2.csv``), and ``kept`` names both.

    An unfinished run that found nothing at the output left its rows in the output itself.
    Where ``unfinished`` says the older output is such a run's, a finished run keeps it: the
    partial name is reserved for it (``aside``; this run writes to the next one), and
    ``set_aside`` puts the older files there before the finished run replaces them.

    Args:
        path: the output the run was asked to write.
        companions: a function from an output path to the files written with it.
        unfinished: whether the file at an output path holds an unfinished run's rows.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        companions: Callable[[Path], list[Path]] = lambda p: [],
        unfinished: Callable[[Path], bool] = lambda p: False,
    ) -> None:
        self.final = Path(path)
        self.companions = companions
        older = [self.final, *companions(self.final)]
        self.older = any(os.path.lexists(p) for p in older)  # decided once, before the work
        # an earlier unfinished run's rows, kept: this run writes beside them, never over them
        runs = _partial_runs(self.final)  # one look at the folder for both
        self.earlier = [partial_path(self.final, n) for n in runs]
        self.aside: Path | None = None  # where an unfinished run's rows at the output go
        self.set = False  # whether they went there (``set_aside``)
        if self.older and unfinished(self.final):
            taken = _next_run(self.final, runs, companions)
            self.aside = partial_path(self.final, taken)
            runs = [*runs, taken]
        self.working = _after(self.final, runs, companions) if self.older else self.final

    def set_aside(self) -> None:
        """The run finished: before its write replaces ``final``, give the unfinished run's
        files there a second name, ``aside`` (a hard link, or a copy where the file system has
        none); ``note`` says where they are from then on. Nothing to do without one."""
        if self.aside is None:
            return
        for src, dst in zip(
            (self.final, *self.companions(self.final)),
            (self.aside, *self.companions(self.aside)),
            strict=True,
        ):
            if os.path.lexists(src):
                _second_name(src, dst)
        self.set = True

    def finish(self) -> None:
        """The run completed and its result is written to ``final``: drop its partial files
        (call it after that write, so a failing write still leaves them); an earlier run's
        stay."""
        if self.working != self.final:
            for stale in (self.working, *self.companions(self.working)):
                Path(stale).unlink(missing_ok=True)

    def note(self) -> str:
        """Where an earlier unfinished run's rows still are ('' when none): 'an earlier
        unfinished run's rows stay in p.partial.csv', '2 earlier unfinished runs' rows stay
        in p.partial.csv, p.partial.2.csv', and once ``set_aside``: 'the unfinished run's rows
        that p.csv held are now in p.partial.csv'."""
        said = []
        if self.set:
            said.append(f"the unfinished run's rows that {self.final} held are now in {self.aside}")
        if self.earlier:
            runs = (
                "an earlier unfinished run's"
                if len(self.earlier) == 1
                else f"{len(self.earlier)} earlier unfinished runs'"
            )
            said.append(f"{runs} rows stay in " + ", ".join(str(p) for p in self.earlier))
        return "; ".join(said)

    def kept(self) -> str:
        """Where an unfinished run's rows are, for the message: 'in p.partial.csv; p.csv is as
        it was' or 'in p.csv', then where an earlier unfinished run's rows are, if any."""
        where = (
            f"in {self.final}"
            if self.working == self.final
            else f"in {self.working}; {self.final} is as it was"
        )
        return "; ".join(filter(None, [where, self.note()]))


def _umask() -> int:
    mask = os.umask(0)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def _mode_of(path: Path) -> int:
    """The permission bits a rewrite of ``path`` keeps: the existing file's, else those the
    umask gives a new file."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~_umask()


def as_path(path: object, what: str) -> Path:
    """``path`` as a ``Path``, or an InputError naming ``what`` it should have been (a
    ``None`` or a number where a file name belongs)."""
    if not isinstance(path, (str, os.PathLike)) or not str(path):
        raise InputError(
            f"{what} must be a file path, got {path!r}", fix="pass a file name, e.g. 'model.json'"
        )
    return Path(path)


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Write to a temporary file beside ``path`` and rename it over: readers never see half.
    A file replaced keeps its permissions; a new one gets those the umask gives.

    Args:
        path: the file to write; missing parent folders are created.
        write: writes the content to the temporary path it is given.

    Raises:
        InputError: ``path`` is not a path or is a directory, or the file system refused the
            write (permissions, a full disk, a parent that is a file); the content was then
            kept in a recovery file in the temporary folder, and the message says where. An
            existing ``path`` is never touched by a failure.
    """
    path = not_a_directory(as_path(path, "the file to write"))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
        os.close(fd)
    except OSError as err:
        _recover(path, write, err)
    try:
        write(Path(tmp))
        # mkstemp makes the file private (0600): give it the mode of the file it replaces (a
        # private model or catalog stays private), else the mode any new file would get
        os.chmod(tmp, _mode_of(path))
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        _recover(path, write, err)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _recover(path: Path, write: Callable[[Path], None], err: OSError) -> None:
    """Keep what could not be written to ``path`` in the temporary folder; raise saying where."""
    fd, kept = tempfile.mkstemp(prefix=f"srifty-recovered-{path.stem}-", suffix=path.suffix)
    os.close(fd)
    write(Path(kept))
    reason = err.strerror or type(err).__name__
    raise InputError(
        f"could not write the file ({reason}); its content is kept in {kept}",
        source=str(path),
        fix="free space or fix permissions, then copy the kept file into place",
    ) from err


def write_table(table: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write a table atomically, CSV, Parquet or JSON records by suffix."""
    path = as_path(path, "the table's file")
    suffix = path.suffix.lower()
    writers: dict[str, Callable[[Path], None]] = {
        ".csv": lambda p: table.to_csv(p, index=False),
        ".parquet": lambda p: table.to_parquet(p, index=False),
        ".json": lambda p: p.write_text(json.dumps(json_records(table), indent=1, allow_nan=False)),
    }
    if suffix not in writers:
        raise InputError(
            f"unsupported output type '{path.suffix}'",
            source=str(path),
            fix="name the output .csv, .parquet or .json",
        )
    atomic_write(path, writers[suffix])
    return path


def json_records(table: pd.DataFrame) -> list[dict]:
    """A table's rows as JSON-ready dicts, one per row.

    Every float is exactly as the table holds it (pandas' ``to_json`` keeps 10 decimals, so a
    JSON result disagreed with the same result's CSV and with the Python API); dates and
    times are ISO 8601 text ('2024-06-01', '2024-06-01T12:30:05', with its offset when the
    time has a zone: ``to_json`` writes epoch milliseconds, which no reader takes for a
    date); missing values (NaN, NaT, None) and infinities are null; other values are as
    ``to_json`` writes them.

    Args:
        table: any table (its index is not written).

    Returns:
        One dict per row, keyed by column.
    """
    # dates are rewritten below; "iso" is pandas' coming default, asked for to say so
    records = json.loads(table.to_json(orient="records", date_format="iso"))
    for record, row in zip(records, table.itertuples(index=False, name=None), strict=True):
        for key, value in zip(list(record), row, strict=True):
            if isinstance(value, float | np.floating):
                record[key] = float(value) if math.isfinite(value) else None
            elif isinstance(value, dt.date | np.datetime64):
                record[key] = json_safe(value)
    return records


def write_json(obj: object, path: str | os.PathLike) -> Path:
    """Write a JSON document atomically; NaN and infinities become null (standard JSON has
    neither, and other readers refuse ``Infinity``)."""
    path = as_path(path, "the JSON file")
    text = json.dumps(json_safe(obj), indent=1, sort_keys=False, allow_nan=False)
    atomic_write(path, lambda p: p.write_text(text))
    return path


def json_safe(obj: object) -> object:
    """``obj`` (nested dicts and lists) made what standard JSON can hold.

    Every non-finite float becomes None; dates and times become ISO 8601 text (a date,
    ``Timestamp`` or ``numpy.datetime64``; NaT is None: a datetime64's ``item()`` is an int
    of nanoseconds, and a date is no JSON value); other numpy scalars become plain Python.

    Args:
        obj: a JSON-like value.

    Returns:
        A copy ``json.dumps(..., allow_nan=False)`` writes.
    """
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(v) for v in obj]
    if isinstance(obj, dt.date | np.datetime64):
        if pd.isna(obj):  # NaT
            return None
        return pd.Timestamp(obj).isoformat() if isinstance(obj, np.datetime64) else obj.isoformat()
    item = getattr(obj, "item", None)
    if callable(item) and not isinstance(obj, str | bytes):
        try:
            obj = item()
        except (TypeError, ValueError):
            return obj
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
