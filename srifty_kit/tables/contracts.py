"""Table contracts of the design (measurements, configurations, predictions, catalog, ledgers).

Every table is checked where it enters: a bad one raises one ``InputError`` naming the file,
the column, the first offending rows and what was expected. Extra columns pass through.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from srifty_kit.errors import (
    IndexLabels,
    InputError,
    counted,
    did_you_mean,
    plain,
    warn,
)

# a catalog table, or a function that loads one when a row needs it (see _fill_gpus_per_node)
CatalogSource = pd.DataFrame | Callable[[], pd.DataFrame] | None


@dataclass(frozen=True)
class Column:
    """One column of a contract: its kind and the values it admits."""

    name: str
    kind: str  # "str" | "int" | "float" | "bool" | "datetime"
    required: bool = True  # the column must be present
    nullable: bool = False  # empty cells are allowed (unknown, never guessed)
    minimum: float | None = None
    strict: bool = False  # minimum is exclusive (> instead of >=)
    choices: tuple[str, ...] | None = None
    maximum: float | None = None  # the plausible top (inclusive); a value above it is a typo
    why_maximum: str = ""  # what the top is, said in the error


# A step (or its all-reduce) longer than a day is no measurement of a training step: a unit
# mix-up (ms as s) or a placeholder such as 1e308, which overflows every later sum.
MAX_STEP_S = 86_400.0
# No cluster has a million nodes or workers (the largest EC2 UltraClusters hold some 20,000
# GPUs); beyond it a count is a typo, and near 2**63 it no longer fits an integer.
MAX_COUNT = 1_000_000
# a local batch must stay exact as a float (2**53); a huge one is kept to be warned about
MAX_BATCH = 2**53


_CONFIG_COLUMNS = (
    Column("model", "str"),
    Column("instance_type", "str"),
    Column("num_nodes", "int", minimum=1, maximum=MAX_COUNT, why_maximum="a million nodes"),
    Column("num_workers", "int", minimum=1, maximum=MAX_COUNT, why_maximum="a million workers"),
    Column("local_bsz", "int", minimum=1, maximum=MAX_BATCH, why_maximum="2**53"),
    Column("gpus_per_node", "int", required=False, nullable=True, minimum=1, maximum=1024),
    Column("placement", "str", required=False, nullable=True),
)
_STEP = Column(
    "step_time_s", "float", minimum=0, strict=True, maximum=MAX_STEP_S, why_maximum="one day"
)
_MEASUREMENT_EXTRAS = (
    Column(
        "sync_time_s",
        "float",
        required=False,
        nullable=True,
        minimum=0,
        maximum=MAX_STEP_S,
        why_maximum="one day",
    ),
    Column("repeat", "int", required=False, nullable=True, minimum=0),
    Column("timestamp", "str", required=False, nullable=True),
    Column("host", "str", required=False, nullable=True),
)

MEASUREMENTS = (*_CONFIG_COLUMNS, _STEP, *_MEASUREMENT_EXTRAS)
CONFIGS = _CONFIG_COLUMNS
# what `srifty search --candidates` reads: configurations to decide among, for the job's
# model (so no model column); pricing (on-demand or spot) is checked by the search
CANDIDATES = (
    *(c for c in _CONFIG_COLUMNS if c.name not in ("model", "placement")),
    Column("pricing", "str", required=False, nullable=True),
)
PREDICTIONS = (
    *_CONFIG_COLUMNS,
    _STEP,
    Column("step_time_lo", "float", minimum=0),
    Column("step_time_hi", "float", minimum=0),
)

INTERRUPTION_BUCKETS = ("<5%", "5-10%", "10-15%", "15-20%", ">20%")

CATALOG = (
    Column("instance_type", "str"),
    Column("region", "str"),
    Column("vcpus", "int", minimum=1),
    Column("memory_gib", "float", minimum=0, strict=True),
    Column("gpu_count", "int", nullable=True, minimum=0),
    Column("gpu_model", "str", nullable=True),
    Column("gpu_memory_gib", "float", nullable=True, minimum=0),
    Column("network_gbps", "float", nullable=True, minimum=0),
    Column("efa_supported", "bool", nullable=True),
    Column("ondemand_usd_per_hr", "float", nullable=True, minimum=0),
    Column("spot_usd_per_hr", "float", nullable=True, minimum=0),
    Column("spot_interruption_bucket", "str", nullable=True, choices=INTERRUPTION_BUCKETS),
    # per accelerator, from the vendor's datasheet: dense (no sparsity) peak throughput
    Column("gpu_fp16_tflops", "float", nullable=True, minimum=0),
    Column("gpu_fp32_tflops", "float", nullable=True, minimum=0),
    Column("gpu_mem_bw_gbps", "float", nullable=True, minimum=0),
    # dense tensor-core TF32 and BF16 TFLOP/s (empty: no such tensor cores, or unknown) and
    # the streaming-multiprocessor count; the document behind each figure in the last column
    Column("gpu_tf32_tflops", "float", required=False, nullable=True, minimum=0),
    Column("gpu_bf16_tflops", "float", required=False, nullable=True, minimum=0),
    Column("gpu_sm_count", "int", required=False, nullable=True, minimum=1),
    Column("gpu_figures_source", "str", required=False, nullable=True),
    Column("source", "str"),
)

PRICING = ("on-demand", "spot")

JOBS_LEDGER = (
    Column("job", "str"),
    Column("team", "str"),
    Column("instance_type", "str"),
    Column("pricing", "str", choices=PRICING),
    Column("start", "datetime"),
    Column("end", "datetime", required=False, nullable=True),
    Column("hours", "float", required=False, nullable=True, minimum=0),
    Column("num_nodes", "int", minimum=1),
    Column("cost_usd", "float", minimum=0),
)

# AWS Cost and Usage Report: the legacy CSV header names and the CUR 2.0 (Data Exports) names.
# The instance type and pricing come from the usage type (e.g. "SpotUsage:g5.xlarge").
CUR_LEGACY = (
    Column("lineItem/UsageStartDate", "datetime"),
    Column("lineItem/UsageEndDate", "datetime", required=False, nullable=True),
    Column("lineItem/UsageType", "str"),
    Column("lineItem/UsageAmount", "float", minimum=0),
    Column("lineItem/UnblendedCost", "float"),
    Column("product/instanceType", "str", required=False, nullable=True),
)
CUR_2 = (
    Column("line_item_usage_start_date", "datetime"),
    Column("line_item_usage_end_date", "datetime", required=False, nullable=True),
    Column("line_item_usage_type", "str"),
    Column("line_item_usage_amount", "float", minimum=0),
    Column("line_item_unblended_cost", "float"),
    Column("product_instance_type", "str", required=False, nullable=True),
)


def _source(table: pd.DataFrame, source: str | None, what: str) -> str:
    return source or table.attrs.get("source") or f"{what} table"


def row_labels(table: pd.DataFrame, mask: np.ndarray) -> list:
    """The rows ``mask`` marks as the user finds them: line numbers of the CSV file the table
    was read from (``attrs['from_file']`` is ``'.csv'``; the header is line 1), rows from 0
    of a Parquet or JSON file (as pandas reads them; an InputError naming such a file says
    so: ``errors.rows_named``), else the DataFrame's own index labels (``IndexLabels``, said
    "index 17, 40"), which a filtered frame's positions would not match. All of them:
    InputError keeps the first few and counts the rest.

    Args:
        table: the table as read (``tables.files.read_table`` marks a file's).
        mask: one bool per row.

    Returns:
        The labels: a list of ints for a file's rows, ``IndexLabels`` for a DataFrame's.
    """
    at = np.flatnonzero(mask)
    kind = table.attrs.get("from_file")
    if kind is None:
        return IndexLabels(table.index[at].tolist())
    offset = 2 if kind == ".csv" else 0  # header is line 1 of a CSV
    return (at + offset).tolist()


def _bool_cells(values: pd.Series) -> np.ndarray:
    """Which cells hold a bool (a bool column, or True/False among an object column's)."""
    if pd.api.types.is_bool_dtype(values.dtype):
        return values.notna().to_numpy()
    if values.dtype == object:
        return values.map(lambda v: isinstance(v, bool | np.bool_)).to_numpy(dtype=bool)
    return np.zeros(len(values), bool)


def _coerce(values: pd.Series, kind: str) -> tuple[pd.Series, np.ndarray]:
    """Convert a column to its kind; return it and a mask of cells that would not convert."""
    missing = values.isna().to_numpy()
    if kind == "str":
        out = values.astype("string").str.strip()
        out = out.mask(out == "")
        return out.astype(object).where(out.notna(), None), np.zeros(len(values), bool)
    if kind in ("int", "float"):
        # True and False are no measurement or count, though to_numeric reads them as 1 and 0
        flags = _bool_cells(values)
        out = pd.to_numeric(values.mask(flags), errors="coerce")
        # inf is never a measurement, a count or a price: refuse it like text
        out = out.mask(np.isinf(out.to_numpy(dtype=float, na_value=np.nan)))
        bad = (out.isna().to_numpy() & ~missing) | flags
        if kind == "int":
            whole = out.isna() | (out == np.round(out))
            bad |= ~whole.to_numpy()
            # beyond int64 the cast wraps (1e20 -> -9.2e18): refuse the value as given
            huge = np.abs(out.to_numpy(dtype=float, na_value=np.nan)) >= 2.0**63
            bad |= huge
            out = out.mask(huge)
            whole = whole & ~huge
            out = out.where(whole).astype("Int64") if (bad.any() or out.isna().any()) else out
            if not out.isna().any():
                out = out.astype("int64")
        else:
            out = out.astype("float64")
        return out, bad
    if kind == "bool":
        mapping = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
        text = values.astype("string").str.strip().str.lower()
        out = text.map(mapping, na_action="ignore")
        bad = out.isna().to_numpy() & ~missing
        return out.astype("boolean"), bad
    if kind == "datetime":
        out = pd.to_datetime(values, errors="coerce", utc=True, format="mixed")
        bad = out.isna().to_numpy() & ~missing
        return out, bad
    raise ValueError(f"unknown column kind {kind!r}")


_KIND_WORDS = {
    "str": "text",
    "int": "whole numbers",
    "float": "numbers",
    "bool": "true/false",
    "datetime": "dates/times",
}


def require_columns(
    table: pd.DataFrame, columns: tuple[Column, ...], *, what: str, source: str | None = None
) -> None:
    """Refuse a table that lacks a required column of its contract, naming the columns it
    needs (quoted: they are column names, which the command line must not read as flags,
    even where one shares a flag's name, as ``local_bsz`` does ``--local-bsz``) and the
    optional ones.

    Raises:
        InputError: not a DataFrame, or naming the missing columns (with "did you mean" from
            the table's own).
    """
    if not isinstance(table, pd.DataFrame):
        _refuse_non_frame(table, what, source)
    missing = [c.name for c in columns if c.required and c.name not in table.columns]
    if not missing:
        return
    optional = [c.name for c in columns if not c.required]
    raise InputError(
        f"missing required column{'s' if len(missing) > 1 else ''} "
        + ", ".join(repr(m) for m in missing)
        + did_you_mean(missing[0], [str(c) for c in table.columns]),
        source=_source(table, source, what),
        column=missing[0],
        fix=f"a {what} table needs the columns "
        + ", ".join(repr(c.name) for c in columns if c.required)
        + (f" (optional: {', '.join(repr(c) for c in optional)})" if optional else ""),
    )


def validate_table(
    table: pd.DataFrame, columns: tuple[Column, ...], *, what: str, source: str | None = None
) -> pd.DataFrame:
    """Check ``table`` against a contract and return a copy with the contract's dtypes (and
    without the names of index levels that repeat a column's, its values kept).

    Raises:
        InputError: not a DataFrame, a repeated or missing column, no rows, or a cell that
            breaks its column's contract (naming the column, the rows and the fix).
    """
    if not isinstance(table, pd.DataFrame):
        _refuse_non_frame(table, what, source)
    src = _source(table, source, what)
    present = [str(c) for c in table.columns]
    repeated = sorted({c for c in present if present.count(c) > 1})
    if repeated:
        raise InputError(
            f"the column {repeated[0]!r} appears more than once",
            source=src,
            column=repeated[0],
            fix="keep one column of each name",
        )
    require_columns(table, columns, what=what, source=src)
    if len(table) == 0:
        raise InputError(f"the {what} table has no rows", source=src, fix="give at least one row")
    out = table.copy()
    out.attrs = dict(table.attrs)
    # an index level named as a column (set_index(..., drop=False)) makes pandas refuse every
    # groupby by that name as ambiguous; the column is what the contract reads
    names = [None if name in out.columns else name for name in out.index.names]
    if names != list(out.index.names):
        out.index = out.index.set_names(names)
    for col in columns:
        if col.name not in out.columns:
            continue
        values, bad = _coerce(out[col.name], col.kind)
        num = None
        if col.minimum is not None or col.maximum is not None:  # the values as given
            num = pd.to_numeric(table[col.name], errors="coerce").to_numpy(float, na_value=np.nan)
        if col.maximum is not None:
            high = ~np.isnan(num) & (num > col.maximum)
            if high.any():
                raise InputError(
                    f"expected values <= {col.maximum:g} ({col.why_maximum or 'the most'}), "
                    f"found {_big(table[col.name].iloc[np.flatnonzero(high)[0]])}",
                    source=src,
                    column=col.name,
                    rows=row_labels(table, high),
                    fix="check the unit and the value",
                )
        if bad.any():
            shown = table[col.name].iloc[np.flatnonzero(bad)[0]]
            raise InputError(
                f"expected {_KIND_WORDS[col.kind]}, found {plain(shown)}",
                source=src,
                column=col.name,
                rows=row_labels(table, bad),
            )
        empty = pd.isna(values).to_numpy() if col.kind != "str" else values.isna().to_numpy()
        if not col.nullable and empty.any():
            raise InputError(
                "empty cells where a value is required",
                source=src,
                column=col.name,
                rows=row_labels(table, empty),
            )
        if col.minimum is not None:
            low = (num <= col.minimum) if col.strict else (num < col.minimum)
            low &= ~np.isnan(num)
            if low.any():
                sign = ">" if col.strict else ">="
                raise InputError(
                    f"expected values {sign} {col.minimum:g}, found {num[low][0]:g}",
                    source=src,
                    column=col.name,
                    rows=row_labels(table, low),
                )
        if col.choices is not None:
            text = values.astype("string").str.strip().str.lower()
            if col.choices == PRICING:
                text = text.replace({"ondemand": "on-demand", "on_demand": "on-demand"})
            allowed = {c.lower(): c for c in col.choices}
            outside = text.notna().to_numpy() & ~text.isin(list(allowed)).fillna(False).to_numpy()
            if outside.any():
                found = str(values.iloc[np.flatnonzero(outside)[0]])
                raise InputError(
                    f"unexpected value {found!r}{did_you_mean(found, col.choices)}",
                    source=src,
                    column=col.name,
                    rows=row_labels(table, outside),
                    fix="use one of " + ", ".join(col.choices),
                )
            values = text.map(allowed, na_action="ignore").astype(object)
        out[col.name] = values
    return out


def _big(value: object) -> str:
    """A value as given, huge numbers in exponent form (1e+20, not 21 digits)."""
    number = pd.to_numeric(pd.Series([value]), errors="coerce").iloc[0]
    return f"{number:g}" if pd.notna(number) and abs(number) >= 1e15 else plain(value)


def _refuse_non_frame(table: object, what: str, source: str | None) -> None:
    """Anything but a DataFrame where a table is expected: one line saying what to pass."""
    if isinstance(table, str | os.PathLike):
        raise InputError(
            f"{what} must be a table (expected a pandas DataFrame, got the path {str(table)!r})",
            source=source,
            fix="read the file first: srifty_kit.tables.files.read_table(path) (CSV, Parquet "
            "or JSON) and pass the DataFrame",
        )
    raise InputError(
        f"{what} must be a table (expected a pandas DataFrame, got {type(table).__name__})",
        source=source,
        fix="pass a DataFrame with the contract's columns, e.g. pd.DataFrame(rows) or "
        "read_table(path)",
    )


def _check_sync(table: pd.DataFrame, src: str) -> None:
    """The all-reduce part of a step is part of the step: sync_time_s <= step_time_s."""
    if "sync_time_s" not in table or "step_time_s" not in table:
        return
    sync = pd.to_numeric(table["sync_time_s"], errors="coerce").to_numpy(float, na_value=np.nan)
    over = ~np.isnan(sync) & (sync > table["step_time_s"].to_numpy(float))
    if over.any():
        raise InputError(
            "sync_time_s is longer than the whole step (step_time_s)",
            source=src,
            column="sync_time_s",
            rows=row_labels(table, over),
            fix="sync_time_s is the all-reduce part of the step: check the two columns",
        )


def placement_fits(placement: str, num_nodes: int, num_workers: int, most: int) -> bool:
    """Whether a Pollux-style placement ('13': 1 worker on one node, 3 on another) can say
    ``num_workers`` on ``num_nodes`` nodes of at most ``most`` each. The digits may be read
    in groups ('1212' is 12 + 12 on 2 nodes), so nodes of 10 workers or more are written too.
    """
    text = placement.strip()
    # reach[i] = node counts the first i digits can be split into, each with its sum
    reach: list[set[tuple[int, int]]] = [set() for _ in range(len(text) + 1)]
    reach[0].add((0, 0))
    for i in range(len(text)):
        for nodes, total in reach[i]:
            for j in range(i + 1, len(text) + 1):
                part = text[i:j]
                if part[0] == "0" or int(part) > most:
                    break
                if nodes < num_nodes and total + int(part) <= num_workers:
                    reach[j].add((nodes + 1, total + int(part)))
    return (num_nodes, num_workers) in reach[len(text)]


def _check_placement(table: pd.DataFrame, src: str) -> None:
    """A placement made of digits must say the row's nodes and workers."""
    if "placement" not in table:
        return
    bad = np.zeros(len(table), bool)
    rows = zip(table["placement"], table["num_nodes"], table["num_workers"], strict=True)
    gpus = table["gpus_per_node"] if "gpus_per_node" in table else [None] * len(table)
    for i, ((text, k, n), g) in enumerate(zip(rows, gpus, strict=True)):
        if isinstance(text, str) and text.strip().isdigit() and len(text.strip()) <= 64:
            most = int(g) if g is not None and not pd.isna(g) else int(n)
            bad[i] = not placement_fits(text, int(k), int(n), most)
    if bad.any():
        first = np.flatnonzero(bad)[0]
        raise InputError(
            f"placement {table['placement'].iloc[first]!r} does not describe "
            f"{counted(table['num_workers'].iloc[first], 'worker')} on "
            f"{counted(table['num_nodes'].iloc[first], 'node')}",
            source=src,
            column="placement",
            rows=row_labels(table, bad),
            fix="give one digit group per node, summing to num_workers (e.g. '13' for 1 + 3), "
            "or leave placement empty",
        )


def _check_catalog_gpus(
    table: pd.DataFrame, src: str, catalog: CatalogSource, near_misses: bool = True
) -> pd.DataFrame:
    """``gpus_per_node`` given for a GPU type of the catalog must be its GPU count
    (``near_misses``: also warn of a type outside the catalog named like one in it).

    ``gpus_per_node`` is what one node holds (the capacity the model and the search use);
    partial use of a node is said by ``num_workers`` (and ``placement``), not by a smaller
    ``gpus_per_node``: a p4d.24xlarge has 8 GPUs however many a run used. Types the catalog
    does not know, or knows without GPUs (CPU instances), keep what they give.
    """
    if catalog is None or "gpus_per_node" not in table or table["gpus_per_node"].isna().all():
        return catalog
    catalog = catalog() if callable(catalog) else catalog
    counts = catalog.drop_duplicates("instance_type").set_index("instance_type")["gpu_count"]
    if near_misses:
        _warn_near_misses(table, src, counts.index)
    known = pd.to_numeric(table["instance_type"].map(counts), errors="coerce")
    given = pd.to_numeric(table["gpus_per_node"], errors="coerce")
    wrong = (known > 0) & given.notna() & (given != known)
    if wrong.any():
        first = np.flatnonzero(wrong.to_numpy())[0]
        itype = table["instance_type"].iloc[first]
        # a table without placement (a candidates list, a configs table) is not sent to a
        # column it cannot have
        said_by = "num_workers and placement" if "placement" in table else "num_workers"
        raise InputError(
            f"gpus_per_node {plain(given.iloc[first])} for {itype}, which has "
            f"{plain(known.iloc[first])} GPUs per node in the catalog",
            source=src,
            column="gpus_per_node",
            rows=row_labels(table, wrong.to_numpy()),
            fix=f"give gpus_per_node {plain(known.iloc[first])} (what one node holds); "
            f"part of a node is said by {said_by}",
        )
    return catalog


def _warn_near_misses(table: pd.DataFrame, src: str, names: pd.Index) -> None:
    """Warn, once per name, of an instance type outside the catalog that is a near miss of
    one in it ('g4dn.12xlarg'), on rows that give ``gpus_per_node``.

    A type outside the catalog is legitimate (an Azure VM, an on-prem box: the reference
    data's 'azure-ND40rs_v2', 'onprem-8xrtx2080ti') and is fitted as hardware of its own, so
    it is never refused; but a near miss is most likely a typo, which would otherwise fit a
    model nobody asks for under a name no search finds. Rows without ``gpus_per_node`` need
    not be warned of: their type is looked up, and a miss is refused with the same hint.
    """
    given = table["gpus_per_node"].notna().to_numpy()
    itypes = table["instance_type"].astype(str)
    known = {str(n) for n in names}
    by_case = {n.lower(): n for n in known}
    for name in pd.unique(itypes[given]):
        if name in known:
            continue
        hint = did_you_mean(name, sorted(known))
        if not hint and name.lower() in by_case:  # the same name in other letters' case
            hint = f" (did you mean {by_case[name.lower()]!r}?)"
        if hint:
            n = int((itypes == name).sum())
            warn(
                f"{src}: instance type {name!r} ({n} row{'s' if n > 1 else ''}) is not in the "
                f"catalog{hint}: it is fitted as hardware of its own; correct the name if it "
                "is a typo"
            )


def _check_workers(table: pd.DataFrame, src: str) -> None:
    fewer = (table["num_workers"] < table["num_nodes"]).to_numpy()
    if fewer.any():
        raise InputError(
            "num_workers is smaller than num_nodes (every node runs at least one worker)",
            source=src,
            column="num_workers",
            rows=row_labels(table, fewer),
        )


def _fill_gpus_per_node(table: pd.DataFrame, src: str, catalog: CatalogSource) -> None:
    """Fill ``gpus_per_node`` from the catalog where absent; types outside it must give it."""
    have = (
        table["gpus_per_node"].notna().to_numpy()
        if "gpus_per_node" in table
        else np.zeros(len(table), bool)
    )
    if have.all():
        table["gpus_per_node"] = table["gpus_per_node"].astype("int64")
        return
    if catalog is None:
        raise InputError(
            "gpus_per_node is missing and no catalog was given to look it up",
            source=src,
            column="gpus_per_node",
            rows=row_labels(table, ~have),
            fix="add a gpus_per_node column, or pass the EC2 catalog (load_catalog())",
        )
    if callable(catalog):  # loaded only when a row needs it: reading a catalog is not free
        catalog = catalog()
    counts = catalog.drop_duplicates("instance_type").set_index("instance_type")["gpu_count"]
    looked_up = table["instance_type"].map(counts)
    unknown = ~have & looked_up.isna().to_numpy()
    if unknown.any():
        first = str(table["instance_type"].iloc[np.flatnonzero(unknown)[0]])
        in_catalog = first in counts.index
        problem = (
            f"instance type {first!r} has no GPU count in the catalog"
            if in_catalog
            else f"instance type {first!r} is not in the catalog"
            + did_you_mean(first, counts.index)
        )
        raise InputError(
            problem,
            source=src,
            column="gpus_per_node",
            rows=row_labels(table, unknown),
            fix="add a gpus_per_node column (workers that fit on one node) for these rows",
        )
    merged = table["gpus_per_node"] if "gpus_per_node" in table else looked_up
    table["gpus_per_node"] = merged.where(pd.Series(have, index=table.index), looked_up).astype(
        "int64"
    )


def _check_capacity(table: pd.DataFrame, src: str) -> None:
    over = (table["num_workers"] > table["num_nodes"] * table["gpus_per_node"]).to_numpy()
    if over.any():
        raise InputError(
            "more workers than num_nodes x gpus_per_node can hold",
            source=src,
            column="num_workers",
            rows=row_labels(table, over),
            fix="check num_workers, num_nodes and gpus_per_node",
        )


def _validate_configs(
    table: pd.DataFrame,
    columns: tuple[Column, ...],
    what: str,
    source: str | None,
    catalog: CatalogSource,
) -> pd.DataFrame:
    out = validate_table(table, columns, what=what, source=source)
    src = _source(table, source, what)
    _check_workers(out, src)
    if _STEP in columns:  # measurements: a step and its parts must agree
        _check_sync(out, src)
    # a configuration to predict or rank holds a node as the catalog says, too: 8 workers
    # on one 4-GPU node is no configuration, whatever gpus_per_node a row claims
    catalog = _check_catalog_gpus(out, src, catalog, near_misses=_STEP in columns)
    _fill_gpus_per_node(out, src, catalog)
    _check_capacity(out, src)
    _check_placement(out, src)
    return out


def validate_measurements(
    table: pd.DataFrame, source: str | None = None, catalog: CatalogSource = None
) -> pd.DataFrame:
    """Validate a measurement table (one row per step or per configuration mean).

    Args:
        table: the measurements (see ``MEASUREMENTS``); extra columns pass through.
        source: the file it came from, named in errors (default: ``table.attrs["source"]``).
        catalog: where ``gpus_per_node`` is looked up for rows without it: a catalog table
            or a function returning one (called only when a row needs it).

    Returns:
        A validated copy with typed columns and ``gpus_per_node`` filled.

    Raises:
        InputError: naming the column, the first bad rows and the fix.
    """
    return _validate_configs(table, MEASUREMENTS, "measurements", source, catalog)


def validate_configs(
    table: pd.DataFrame, source: str | None = None, catalog: CatalogSource = None
) -> pd.DataFrame:
    """Validate a table of configurations to predict (measurements without step_time_s).

    Arguments, result and errors as ``validate_measurements``.
    """
    return _validate_configs(table, CONFIGS, "configurations", source, catalog)


def validate_predictions(table: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    """Validate a prediction table: configurations plus step_time_s and its interval ends."""
    out = validate_table(table, PREDICTIONS, what="predictions", source=source)
    src = _source(table, source, "predictions")
    unordered = ~(
        (out["step_time_lo"] <= out["step_time_s"]) & (out["step_time_s"] <= out["step_time_hi"])
    ).to_numpy()
    if unordered.any():
        raise InputError(
            "expected step_time_lo <= step_time_s <= step_time_hi",
            source=src,
            column="step_time_lo",
            rows=row_labels(out, unordered),
        )
    return out


def content_key(table: pd.DataFrame | None) -> tuple | None:
    """What a table holds, as a comparable value: its columns, their dtypes, its attrs and
    a hash of every cell (not the index); None for no table. A table with a cell that
    cannot be hashed (a list) is known only as itself.

    Args:
        table: any DataFrame, or None.

    Returns:
        A tuple equal for two tables with the same cells, columns and dtypes.
    """
    if table is None:
        return None
    try:
        cells = pd.util.hash_pandas_object(table, index=False).to_numpy().tobytes()
        attrs = repr(sorted(table.attrs.items()))
    except TypeError:  # an unhashable cell: never equal to another table's
        return (id(table),)
    return (tuple(map(str, table.columns)), tuple(table.dtypes.astype(str)), attrs, cells)


# the last catalog validated, by content (a panel re-searches, so re-validates, the same one
# on every control change): (content_key, source, the validated table)
_LAST_CATALOG: list[tuple] = []


def validate_catalog(table: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    """Validate an EC2 catalog table (one row per instance type and region).

    Args:
        table: the catalog (``CATALOG``'s columns).
        source: where it came from, for errors.

    Returns:
        A validated copy (a table with the same content as the last one validated gets a
        copy of that one's result, without validating again).

    Raises:
        InputError: a column missing or malformed, or a type listed twice in one region.
    """
    key = content_key(table) if isinstance(table, pd.DataFrame) else None
    if key is not None and _LAST_CATALOG and _LAST_CATALOG[0][:2] == (key, source):
        return _LAST_CATALOG[0][2].copy()
    out = _validate_catalog(table, source)
    if key is not None:
        _LAST_CATALOG[:] = [(key, source, out.copy())]
    return out


def _validate_catalog(table: pd.DataFrame, source: str | None) -> pd.DataFrame:
    out = validate_table(table, CATALOG, what="catalog", source=source)
    dup = out.duplicated(["instance_type", "region"]).to_numpy()
    if dup.any():
        raise InputError(
            "the same instance type and region appear twice",
            source=_source(table, source, "catalog"),
            column="instance_type",
            rows=row_labels(out, dup),
            fix="keep one row per instance_type and region",
        )
    return out


LEDGER_FORMATS = {"jobs": JOBS_LEDGER, "cur-legacy": CUR_LEGACY, "cur2": CUR_2}


def ledger_format(table: pd.DataFrame) -> str:
    """Which ledger a table is: 'cur-legacy', 'cur2' or 'jobs' (the default guess)."""
    cols = {str(c) for c in table.columns}
    if any(c.startswith("lineItem/") for c in cols):
        return "cur-legacy"
    if any(c.startswith("line_item_") for c in cols):
        return "cur2"
    return "jobs"


def validate_ledger(table: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    """Validate a usage ledger: a CUR export (legacy or 2.0 names) or a plain jobs ledger."""
    kind = ledger_format(table)
    out = validate_table(table, LEDGER_FORMATS[kind], what=f"{kind} ledger", source=source)
    out.attrs["ledger_format"] = kind
    if kind == "jobs":
        src = _source(table, source, "jobs ledger")
        has_end = out["end"].notna() if "end" in out else pd.Series(False, index=out.index)
        has_hours = out["hours"].notna() if "hours" in out else pd.Series(False, index=out.index)
        neither = ~(has_end | has_hours).to_numpy()
        if neither.any():
            raise InputError(
                "a job needs either an end time or hours",
                source=src,
                column="end" if "end" in out else "hours",
                rows=row_labels(out, neither),
                fix="fill 'end' or 'hours' for these rows",
            )
        if "end" in out:
            backwards = (has_end & (out["end"] < out["start"])).to_numpy()
            if backwards.any():
                raise InputError(
                    "end is before start",
                    source=src,
                    column="end",
                    rows=row_labels(out, backwards),
                )
    return out
