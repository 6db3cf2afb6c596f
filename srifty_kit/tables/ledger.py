"""Usage ledgers read where they are: local CSV/Parquet files through an embedded DuckDB
(``DuckDBLedger``) or a table in Amazon Athena (``tables.athena``), summarised by the SQL of
``tables.usage_sql`` into a week of usage (``weekly_usage``).

No ledger is ever loaded into pandas; only the engines' small aggregated results are. Rows are
counted, never dropped silently: every line item ends in ``WeeklyUsage.quality`` as used,
excluded (not EC2 instance usage; commitment fees and negations, whose covered lines carry the
effective cost), unusable (with the reason and a few examples) or dated after the week.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pandas as pd

from srifty_kit.errors import InputError
from srifty_kit.tables.usage_sql import (
    DUCKDB,
    EXCLUDED,
    WEEK_KEYS,
    Dialect,
    LedgerFormat,
    SourceColumns,
    detect_format,
    examples_sql,
    literal,
    normalise_sql,
    overview_sql,
    reason_column,
    week_sql,
)

AFTER_WEEK = "dated after the week (left for later reports)"


# --------------------------------------------------------------------------- engines


class LedgerEngine(Protocol):
    """Where the ledger lives and what runs the SQL: ``DuckDBLedger`` or ``AthenaLedger``."""

    dialect: Dialect
    label: str  # the file, folder or table, for messages

    def relation(self) -> str:
        """The FROM target of the normalising query."""

    def columns(self) -> SourceColumns:
        """The ledger's columns and types."""

    def query(self, sql: str) -> pd.DataFrame:
        """Run ``sql`` and return its (small) result."""


LEDGER_SUFFIXES = (".parquet", ".csv", ".csv.gz")


def ledger_files(path: str | os.PathLike) -> list[Path]:
    """The files of a ledger: one CSV (optionally gzip) or Parquet file, or every such file
    under a folder (monthly parts, CUR 2.0 ``BILLING_PERIOD=...`` folders); one kind only."""
    root = Path(path)
    if not root.exists():
        raise InputError("no such file or folder", source=str(root), fix="check the --ledger path")
    if root.is_dir():
        files = sorted(
            p for p in root.rglob("*") if p.is_file() and p.name.lower().endswith(LEDGER_SUFFIXES)
        )
        if not files:
            raise InputError(
                "the folder holds no .csv, .csv.gz or .parquet file",
                source=str(root),
                fix="point --ledger at the export's folder or one of its files",
            )
    else:
        if not root.name.lower().endswith(LEDGER_SUFFIXES):
            raise InputError(
                f"unsupported ledger file type '{''.join(root.suffixes) or root.name}'",
                source=str(root),
                fix="give a .csv, .csv.gz or .parquet file or a folder of them",
            )
        files = [root]
    kinds = {_file_kind(p) for p in files}
    if len(kinds) > 1:
        raise InputError(
            "the folder mixes CSV and Parquet parts",
            source=str(root),
            fix="point --ledger at one export (one format)",
        )
    return files


def _file_kind(path: Path) -> str:
    return "parquet" if path.name.lower().endswith(".parquet") else "csv"


class DuckDBLedger:
    """A ledger in local files, queried in place by an embedded DuckDB (nothing is loaded
    into pandas; only query results are)."""

    dialect = DUCKDB

    def __init__(self, path: str | os.PathLike, threads: int | None = None) -> None:
        import duckdb

        self.path = Path(path)
        self.label = str(self.path)
        self.files = ledger_files(self.path)
        self._con = duckdb.connect(":memory:")
        self._con.execute("SET TimeZone = 'UTC'")
        if threads:
            self._con.execute(f"SET threads = {int(threads)}")

    def relation(self) -> str:
        """read_parquet / read_csv over the ledger's files (CSV read as text, then cast)."""
        files = "[" + ", ".join(literal(p) for p in self.files) + "]"
        if _file_kind(self.files[0]) == "parquet":
            return f"read_parquet({files}, union_by_name = true, filename = true)"
        return (
            f"read_csv({files}, header = true, all_varchar = true, union_by_name = true, "
            "filename = true)"
        )

    def columns(self) -> SourceColumns:
        """Column names and DuckDB types, without reading the data."""
        rows = self._run(f"DESCRIBE SELECT * FROM {self.relation()}").fetchall()
        return SourceColumns.from_types((r[0], r[1]) for r in rows if r[0] != "filename")

    def query(self, sql: str) -> pd.DataFrame:
        """Run ``sql`` in DuckDB; a file it cannot read is an InputError."""
        return self._run(sql).df()

    def _run(self, sql: str):
        import duckdb

        try:
            return self._con.execute(sql)
        except (
            duckdb.IOException,
            duckdb.InvalidInputException,
            duckdb.ConversionException,
        ) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise InputError(f"cannot be read: {first}", source=self.label) from err


# --------------------------------------------------------------------------- the week


_TEXT, _FLOAT, _INT, _TIME = "text", "float", "int", "time"
_OVERVIEW = {
    "usage_date": _TIME,
    "reason": _TEXT,
    "line_items": _INT,
    "cost_usd": _FLOAT,
    "node_hours": _FLOAT,
}
LINE_SCHEMA = {
    **{k: _TEXT for k in WEEK_KEYS},
    "line_items": _INT,
    "cost_usd": _FLOAT,
    "list_cost_usd": _FLOAT,
    "unlisted_hours": _FLOAT,
    "node_hours": _FLOAT,
    "num_nodes": _FLOAT,
    "resources": _INT,
    "local_bsz": _FLOAT,
    "util_hours": _FLOAT,
    "util_known_hours": _FLOAT,
    "first_start": _TIME,
    "last_start": _TIME,
}
_EXAMPLES = {c: _TEXT for c in ("reason", "source_file", "raw_start", "raw_cost", "job")} | {
    "instance_type": _TEXT
}


def canonical(frame: pd.DataFrame, schema: dict[str, str]) -> pd.DataFrame:
    """A query result with the schema's columns and one dtype per kind, whichever engine
    answered (DuckDB's typed frame or Athena's text)."""
    out = pd.DataFrame(index=range(len(frame)))
    for name, kind in schema.items():
        values = (
            frame[name].reset_index(drop=True) if name in frame else pd.Series([None] * len(frame))
        )
        if kind == _TEXT:
            values = values.astype(object).where(values.notna(), None)
        elif kind == _TIME:
            values = pd.to_datetime(values).astype("datetime64[ns]")
        elif kind == _INT:
            values = pd.to_numeric(values).fillna(0).astype("int64")
        else:
            values = pd.to_numeric(values).astype("float64")
        out[name] = values
    return out


@dataclass
class WeeklyUsage:
    """A week of usage and the history before it, aggregated where the ledger lives."""

    source: str
    format: str  # a LedgerFormat name
    week_start: dt.date
    week_end: dt.date  # exclusive
    lines: pd.DataFrame  # the week by job, team, instance type, pricing, model (LINE_SCHEMA)
    daily: pd.DataFrame  # usable cost and instance-hours per day up to the week's end
    quality: pd.DataFrame  # reason, kind (used | excluded | unusable | later), rows, cost
    examples: pd.DataFrame = field(default_factory=lambda: canonical(pd.DataFrame(), _EXAMPLES))

    @property
    def empty(self) -> bool:
        """No usable usage in the week."""
        return self.lines.empty


def _quality(overview: pd.DataFrame, end: dt.date) -> pd.DataFrame:
    later = overview["usage_date"].notna() & (overview["usage_date"] >= pd.Timestamp(end))
    used = overview["reason"].isna()
    reason = overview["reason"].where(~used, "usable EC2 instance usage").where(~later, AFTER_WEEK)
    kind = pd.Series("unusable", index=overview.index)
    kind[overview["reason"].isin(EXCLUDED)] = "excluded"
    kind[used] = "used"
    kind[later] = "later"
    table = pd.DataFrame(
        {
            "kind": kind,
            "reason": reason,
            "rows": overview["line_items"],
            "cost_usd": overview["cost_usd"],
        }
    )
    out = table.groupby(["kind", "reason"], as_index=False).agg(
        rows=("rows", "sum"), cost_usd=("cost_usd", "sum")
    )
    out["order"] = out["kind"].map({"used": 0, "excluded": 1, "unusable": 2, "later": 3})
    out = out.sort_values(["order", "rows"], ascending=[True, False])
    return out.drop(columns="order").reset_index(drop=True)


def _daily(overview: pd.DataFrame, end: dt.date) -> pd.DataFrame:
    usable = overview[overview["reason"].isna() & (overview["usage_date"] < pd.Timestamp(end))]
    days = usable.groupby("usage_date")[["cost_usd", "node_hours"]].sum()
    if days.empty:
        return pd.DataFrame({"cost_usd": [], "node_hours": []}, index=pd.DatetimeIndex([]))
    index = pd.date_range(days.index.min(), pd.Timestamp(end) - pd.Timedelta(days=1), freq="D")
    days = days.reindex(index, fill_value=0.0)
    days.index.name = "usage_date"
    return days


def _no_usable_rows(
    quality: pd.DataFrame, examples: pd.DataFrame, fmt: LedgerFormat, source: str
) -> InputError:
    bad = quality[quality["kind"] == "unusable"].sort_values("rows", ascending=False)
    top = bad.iloc[0]
    total = int(quality.loc[quality["kind"] != "later", "rows"].sum())
    shown = examples[examples["reason"] == top["reason"]].head(3)
    said = "; ".join(
        f"start {r.raw_start!r}, cost {r.raw_cost!r}, job {r.job!r}" for r in shown.itertuples()
    )
    column = reason_column(fmt, top["reason"])
    return InputError(
        f"no usable rows: {int(top['rows'])} of {total} have {top['reason']}"
        + (f" (e.g. {said})" if said else ""),
        source=source,
        column=column,
        fix="correct those rows (dates as ISO 8601, costs as non-negative numbers)",
    )


def weekly_usage(ledger: LedgerEngine, week_start: dt.date) -> WeeklyUsage:
    """The week starting ``week_start`` (7 days) and the daily history before it.

    Raises:
        InputError: the ledger is not one this reads, lacks a required column, has no rows,
            or none of its rows is usable (the reason and examples are in the message).
    """
    end = week_start + dt.timedelta(days=7)
    cols = ledger.columns()
    fmt = detect_format(cols, ledger.label)
    usage = normalise_sql(fmt, cols, ledger.dialect, ledger.relation())
    overview = canonical(ledger.query(overview_sql(usage)), _OVERVIEW)
    if overview["line_items"].sum() == 0:
        raise InputError("the ledger has no rows", source=ledger.label, fix="check the export")
    quality = _quality(overview, end)
    examples = canonical(pd.DataFrame(), _EXAMPLES)
    if (quality["kind"] == "unusable").any():
        examples = canonical(ledger.query(examples_sql(usage)), _EXAMPLES)
        examples["source_file"] = [
            Path(f).name if isinstance(f, str) else f for f in examples["source_file"]
        ]
    if overview["reason"].notna().all() and (quality["kind"] == "unusable").any():
        raise _no_usable_rows(quality, examples, fmt, ledger.label)
    lines = canonical(ledger.query(week_sql(usage, week_start, end)), LINE_SCHEMA)
    return WeeklyUsage(
        source=ledger.label,
        format=fmt.name,
        week_start=week_start,
        week_end=end,
        lines=lines,
        daily=_daily(overview, end),
        quality=quality,
        examples=examples,
    )


JOB_COLUMNS = (
    "job",
    "team",
    "model",
    "instance_type",
    "pricing",
    "num_nodes",
    "local_bsz",
    "wall_hours",
    "node_hours",
    "cost_usd",
    "gpu_util",
    "line_items",
    "first_start",
    "last_start",
)


def jobs_of_week(lines: pd.DataFrame) -> pd.DataFrame:
    """One row per job of the week, most expensive first: what it cost in all, and the
    configuration it mostly ran on (the instance type and pricing with the most instance-hours;
    its nodes from the ledger, or a CUR's distinct resource ids; wall hours = its instance-hours
    over its nodes)."""
    if lines.empty:
        return pd.DataFrame(columns=list(JOB_COLUMNS))
    table = lines.copy()
    table["nodes"] = table["num_nodes"].where(
        table["num_nodes"].notna(), table["resources"].where(table["resources"] > 0)
    )
    main = table.sort_values(["node_hours", "cost_usd"], ascending=False).drop_duplicates("job")
    main = main[["job", "team", "model", "instance_type", "pricing", "nodes", "local_bsz"]].assign(
        main_hours=main["node_hours"]
    )
    totals = table.groupby("job", as_index=False).agg(
        node_hours=("node_hours", "sum"),
        cost_usd=("cost_usd", "sum"),
        util_hours=("util_hours", "sum"),
        util_known_hours=("util_known_hours", "sum"),
        line_items=("line_items", "sum"),
        first_start=("first_start", "min"),
        last_start=("last_start", "max"),
    )
    out = main.merge(totals, on="job").rename(columns={"nodes": "num_nodes"})
    out["wall_hours"] = out["main_hours"] / out["num_nodes"]
    known = out["util_known_hours"] > 0
    out["gpu_util"] = (out["util_hours"] / out["util_known_hours"]).where(known)
    out = out.sort_values(["cost_usd", "job"], ascending=[False, True]).reset_index(drop=True)
    return out[list(JOB_COLUMNS)]
