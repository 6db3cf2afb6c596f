"""Usage ledgers read where they are: local CSV/Parquet files through an embedded DuckDB
(``DuckDBLedger``) or a table in Amazon Athena (``tables.athena``), summarised by the SQL of
``tables.usage_sql`` into a week of usage (``weekly_usage``).

No ledger is ever loaded into pandas; only the engines' small aggregated results are. Rows are
counted, never dropped silently: every line item of the week is in
``WeeklyUsage.reconciliation`` (by currency, charge category, reason, provider and service)
and in ``WeeklyUsage.quality`` as used (instance usage in the job tables), excluded (another
service, tax, a credit, a commitment's purchase or unused part) or unusable (with the reason
and a few examples); the rows of other weeks, and those without a readable date, are counted
in ``WeeklyUsage.outside``.
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
    RECONCILE_KEYS,
    UNUSABLE,
    WEEK_KEYS,
    Dialect,
    LedgerFormat,
    SourceColumns,
    detect_format,
    examples_sql,
    literal,
    negations_sql,
    normalise_sql,
    overview_sql,
    reason_column,
    reconciliation_sql,
    tag_map,
    week_sql,
)

AFTER_WEEK = "dated after the week (left for later reports)"
BEFORE_WEEK = "dated before the week (earlier reports)"
UNDATED = "no readable date (in no week)"
USED = "instance usage (in the job tables)"


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
    if root.is_symlink() and not root.exists():
        raise InputError(
            "is a symbolic link that leads to no file (a loop, or its target is gone)",
            source=str(root),
            fix="point --ledger at the export itself",
        )
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
    "currency": _TEXT,
    "reason": _TEXT,
    "line_items": _INT,
    "effective_cost": _FLOAT,
    "billed_cost": _FLOAT,
    "instance_hours": _FLOAT,
}
LINE_SCHEMA = {
    **{k: _TEXT for k in WEEK_KEYS},
    "line_items": _INT,
    "effective_cost": _FLOAT,
    "billed_cost": _FLOAT,
    "list_cost": _FLOAT,
    "unlisted_hours": _FLOAT,
    "instance_hours": _FLOAT,
    "num_nodes": _FLOAT,
    "resources": _INT,
    "local_bsz": _FLOAT,
    "util_hours": _FLOAT,
    "util_known_hours": _FLOAT,
    "first_start": _TIME,
    "last_start": _TIME,
}
RECONCILE_SCHEMA = {
    **{k: _TEXT for k in RECONCILE_KEYS},
    "line_items": _INT,
    "billed_cost": _FLOAT,
    "effective_cost": _FLOAT,
    "list_cost": _FLOAT,
    "contracted_cost": _FLOAT,
    "listed_rows": _INT,
    "listed_effective": _FLOAT,
    "instance_hours": _FLOAT,
    "above_list_rows": _INT,
    "above_list_cost": _FLOAT,
    "negative_quantity_rows": _INT,
    "bad_tags_rows": _INT,
    "bad_sku_rows": _INT,
    "bad_cost_rows": _INT,
    "whole_effective": _INT,
    "nonzero_effective": _INT,
    "whole_billed": _INT,
    "nonzero_billed": _INT,
}
NEGATION_SCHEMA = {
    "currency": _TEXT,
    "job": _TEXT,
    "team": _TEXT,
    "instance_type": _TEXT,  # NULL: the resource's usage had no one instance type
    "pricing": _TEXT,  # NULL: ... no one pricing
    "line_items": _INT,
    "billed_cost": _FLOAT,
    "effective_cost": _FLOAT,
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
    """A week of a ledger, and the daily history before it, aggregated where the ledger lives.

    ``reconciliation`` holds every row of the week (``RECONCILE_SCHEMA``); ``lines`` the
    week's usable instance usage (``LINE_SCHEMA``); ``quality`` the week's rows by what
    happened to them (kind used | excluded | unusable, reason, currency: rows and cost; its
    rows add up to the week's); ``outside`` the ledger's other rows (before or after the week,
    or with no readable date); ``daily`` the used instance usage's effective cost and
    instance-hours per day in ``currency`` (the one with the most of the week's cost);
    ``negations`` the week's credits, refunds and commitment negations by the job, team,
    instance type and pricing they can be attributed to (``NEGATION_SCHEMA``;
    ``usage_sql.negations_sql``).
    """

    source: str
    format: str  # a LedgerFormat name
    week_start: dt.date
    week_end: dt.date  # exclusive
    lines: pd.DataFrame
    daily: pd.DataFrame
    quality: pd.DataFrame
    reconciliation: pd.DataFrame
    outside: pd.DataFrame
    currency: str = "USD"
    tags: dict = field(default_factory=dict)
    examples: pd.DataFrame = field(default_factory=lambda: canonical(pd.DataFrame(), _EXAMPLES))
    negations: pd.DataFrame = field(
        default_factory=lambda: canonical(pd.DataFrame(), NEGATION_SCHEMA)
    )

    @property
    def empty(self) -> bool:
        """No usable instance usage in the week."""
        return self.lines.empty

    @property
    def rows(self) -> int:
        """How many line items the week has."""
        return int(self.reconciliation["line_items"].sum())


def _kind(reason: pd.Series) -> pd.Series:
    kind = pd.Series("unusable", index=reason.index)
    kind[reason.isin(EXCLUDED)] = "excluded"
    kind[reason.isna()] = "used"
    return kind


def _quality(reconciliation: pd.DataFrame) -> pd.DataFrame:
    """The week's rows by kind, reason and currency; the rows add up to the week's."""
    r = reconciliation
    table = pd.DataFrame(
        {
            "kind": _kind(r["reason"]),
            "reason": r["reason"].where(r["reason"].notna(), USED),
            "currency": r["currency"],
            "rows": r["line_items"],
            "effective_cost": r["effective_cost"],
            "billed_cost": r["billed_cost"],
        }
    )
    out = table.groupby(["kind", "reason", "currency"], as_index=False, dropna=False).agg(
        rows=("rows", "sum"),
        effective_cost=("effective_cost", lambda s: s.sum(min_count=1)),
        billed_cost=("billed_cost", lambda s: s.sum(min_count=1)),
    )
    out["order"] = out["kind"].map({"used": 0, "excluded": 1, "unusable": 2})
    out = out.sort_values(["order", "rows"], ascending=[True, False])
    return out.drop(columns="order").reset_index(drop=True)


def _outside(overview: pd.DataFrame, start: dt.date, end: dt.date) -> pd.DataFrame:
    """The ledger's rows that are not the week's, by where they fall and currency."""
    day = overview["usage_date"]
    where = pd.Series(None, index=overview.index, dtype=object)
    where[day.isna()] = UNDATED
    where[day.notna() & (day < pd.Timestamp(start))] = BEFORE_WEEK
    where[day.notna() & (day >= pd.Timestamp(end))] = AFTER_WEEK
    table = overview.assign(where=where).dropna(subset=["where"])
    out = table.groupby(["where", "currency"], as_index=False, dropna=False).agg(
        rows=("line_items", "sum"),
        effective_cost=("effective_cost", lambda s: s.sum(min_count=1)),
        billed_cost=("billed_cost", lambda s: s.sum(min_count=1)),
    )
    return out.rename(columns={"where": "reason"}).reset_index(drop=True)


def _daily(overview: pd.DataFrame, end: dt.date, currency: str) -> pd.DataFrame:
    usable = overview[
        overview["reason"].isna()
        & (overview["currency"] == currency)
        & (overview["usage_date"] < pd.Timestamp(end))
    ]
    days = usable.groupby("usage_date")[["effective_cost", "instance_hours"]].sum()
    days = days.rename(columns={"effective_cost": "cost"})
    if days.empty:
        return pd.DataFrame({"cost": [], "instance_hours": []}, index=pd.DatetimeIndex([]))
    index = pd.date_range(days.index.min(), pd.Timestamp(end) - pd.Timedelta(days=1), freq="D")
    days = days.reindex(index, fill_value=0.0)
    days.index.name = "usage_date"
    return days


def _no_usable_rows(
    overview: pd.DataFrame, examples: pd.DataFrame, fmt: LedgerFormat, source: str
) -> InputError:
    bad = overview.groupby("reason")["line_items"].sum().sort_values(ascending=False)
    reason, rows = bad.index[0], int(bad.iloc[0])
    total = int(overview["line_items"].sum())
    shown = examples[examples["reason"] == reason].head(3)
    said = "; ".join(
        f"start {r.raw_start!r}, cost {r.raw_cost!r}, job {r.job!r}" for r in shown.itertuples()
    )
    return InputError(
        f"no usable rows: {rows} of {total} have {reason}" + (f" (e.g. {said})" if said else ""),
        source=source,
        column=reason_column(fmt, reason),
        fix="correct those rows (dates as ISO 8601, costs as numbers)",
    )


def _main_currency(reconciliation: pd.DataFrame, overview: pd.DataFrame) -> str:
    """The currency most of the week's instance usage (else of the ledger) is billed in."""
    for frame, cost in ((reconciliation, "effective_cost"), (overview, "effective_cost")):
        used = frame[frame["reason"].isna()]
        if len(used):
            return str(used.groupby("currency")[cost].sum().abs().idxmax())
    return "USD"


def weekly_usage(
    ledger: LedgerEngine, week_start: dt.date, tags: dict | None = None
) -> WeeklyUsage:
    """The week starting ``week_start`` (7 days) and the daily history before it.

    Args:
        ledger: the engine holding the ledger.
        week_start: the week's first day.
        tags: logical tag -> the ledger's tag keys (``usage_sql.tag_map``); None: the defaults.

    Returns:
        The week's ``WeeklyUsage``.

    Raises:
        InputError: the ledger is not one this reads, lacks a required column, has no rows,
            or every row is unusable (the reason and examples are in the message).
    """
    end = week_start + dt.timedelta(days=7)
    tags = tag_map(tags)
    cols = ledger.columns()
    fmt = detect_format(cols, ledger.label)
    usage = normalise_sql(fmt, cols, ledger.dialect, ledger.relation(), tags)
    overview = canonical(ledger.query(overview_sql(usage)), _OVERVIEW)
    if overview["line_items"].sum() == 0:
        raise InputError("the ledger has no rows", source=ledger.label, fix="check the export")
    unusable = overview["reason"].isin(list(UNUSABLE))
    examples = canonical(pd.DataFrame(), _EXAMPLES)
    if unusable.any():
        examples = canonical(ledger.query(examples_sql(usage, week_start, end)), _EXAMPLES)
        examples["source_file"] = [
            Path(f).name if isinstance(f, str) else f for f in examples["source_file"]
        ]
    if unusable.all():
        raise _no_usable_rows(overview, examples, fmt, ledger.label)
    reconciliation = canonical(
        ledger.query(reconciliation_sql(usage, week_start, end)), RECONCILE_SCHEMA
    )
    lines = canonical(ledger.query(week_sql(usage, week_start, end)), LINE_SCHEMA)
    negations = canonical(ledger.query(negations_sql(usage, week_start, end)), NEGATION_SCHEMA)
    currency = _main_currency(reconciliation, overview)
    return WeeklyUsage(
        source=ledger.label,
        format=fmt.name,
        week_start=week_start,
        week_end=end,
        lines=lines,
        daily=_daily(overview, end, currency),
        quality=_quality(reconciliation),
        reconciliation=reconciliation,
        outside=_outside(overview, week_start, end),
        currency=currency,
        tags=dict(tags),
        examples=examples,
        negations=negations,
    )


JOB_COLUMNS = (
    "job",
    "team",
    "model",
    "currency",
    "provider",
    "service",
    "instance_type",
    "pricing",
    "num_nodes",
    "local_bsz",
    "wall_hours",
    "instance_hours",
    "effective_cost",
    "billed_cost",
    "gpu_util",
    "line_items",
    "first_start",
    "last_start",
)


def jobs_of_week(lines: pd.DataFrame) -> pd.DataFrame:
    """One row per job (and currency) of the week, most expensive first: what it cost in all
    (effective and billed), and the configuration it mostly ran on (the instance type and
    pricing with the most instance-hours; its nodes from the ledger, or a CUR's distinct
    resource ids; wall hours = its instance-hours over its nodes). Untagged usage is no job:
    it is left out here (the breakdowns show it as untagged)."""
    from srifty_kit.tables.usage_sql import UNTAGGED

    lines = lines[lines["job"] != UNTAGGED]
    if lines.empty:
        return pd.DataFrame(columns=list(JOB_COLUMNS))
    table = lines.copy()
    table["nodes"] = table["num_nodes"].where(
        table["num_nodes"].notna(), table["resources"].where(table["resources"] > 0)
    )
    keys = ["job", "currency"]
    main = table.sort_values(["instance_hours", "effective_cost"], ascending=False).drop_duplicates(
        keys
    )
    main = main[
        [*keys, "team", "model", "provider", "service", "instance_type", "pricing", "nodes"]
        + ["local_bsz"]
    ].assign(main_hours=main["instance_hours"])
    totals = table.groupby(keys, as_index=False).agg(
        instance_hours=("instance_hours", "sum"),
        effective_cost=("effective_cost", "sum"),
        billed_cost=("billed_cost", "sum"),
        util_hours=("util_hours", "sum"),
        util_known_hours=("util_known_hours", "sum"),
        line_items=("line_items", "sum"),
        first_start=("first_start", "min"),
        last_start=("last_start", "max"),
    )
    out = main.merge(totals, on=keys).rename(columns={"nodes": "num_nodes"})
    out["wall_hours"] = out["main_hours"] / out["num_nodes"]
    known = out["util_known_hours"] > 0
    out["gpu_util"] = (out["util_hours"] / out["util_known_hours"]).where(known)
    out = out.sort_values(["effective_cost", "job"], ascending=[False, True]).reset_index(drop=True)
    return out[list(JOB_COLUMNS)]
