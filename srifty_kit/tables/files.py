"""Reading and writing tables: CSV, Parquet or JSON by suffix, and atomic writes."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from srifty_kit.errors import InputError

_READERS: dict[str, Callable[[Path], pd.DataFrame]] = {
    ".csv": lambda p: pd.read_csv(p),
    ".parquet": lambda p: pd.read_parquet(p),
    ".json": lambda p: pd.read_json(p, orient="records"),
}


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read a CSV, Parquet or JSON-records table; the frame remembers its file in ``attrs``."""
    path = Path(path)
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
        raise InputError(f"cannot be read as {path.suffix[1:]}: {first}", source=str(path)) from err
    table.attrs["source"] = str(path)
    table.attrs["from_file"] = True
    return table


def _umask() -> int:
    mask = os.umask(0)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Write to a temporary file beside ``path`` and rename it over: readers never see half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        # mkstemp makes the file private (0600); give it the mode any new file would get
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_table(table: pd.DataFrame, path: str | os.PathLike) -> Path:
    """Write a table atomically, CSV, Parquet or JSON records by suffix."""
    path = Path(path)
    suffix = path.suffix.lower()
    writers: dict[str, Callable[[Path], None]] = {
        ".csv": lambda p: table.to_csv(p, index=False),
        ".parquet": lambda p: table.to_parquet(p, index=False),
        ".json": lambda p: table.to_json(p, orient="records", indent=1),
    }
    if suffix not in writers:
        raise InputError(
            f"unsupported output type '{path.suffix}'",
            source=str(path),
            fix="name the output .csv, .parquet or .json",
        )
    atomic_write(path, writers[suffix])
    return path


def write_json(obj: object, path: str | os.PathLike) -> Path:
    """Write a JSON document atomically."""
    path = Path(path)
    atomic_write(path, lambda p: p.write_text(json.dumps(obj, indent=1, sort_keys=False)))
    return path
