"""The usage SQL, written once: every ledger layout (AWS CUR legacy and 2.0, FOCUS 1.x, a
plain jobs ledger) read as one usage table, and the weekly queries over it.

``normalise_sql`` turns a ledger's columns into the usage table (``USAGE_COLUMNS``), one row
per line item, whose ``reason`` says why a row cannot be used (NULL when it can); the weekly
queries aggregate it inside the engine. DuckDB and Amazon Athena (Trino) run the same text: a
``Dialect`` holds the few spellings they do not share (reading ISO text as a UTC timestamp, a
MAP or JSON value, the file a row came from).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from srifty_kit.errors import InputError, did_you_mean
from srifty_kit.tables.contracts import CUR_2, CUR_LEGACY, JOBS_LEDGER, PRICING

# --------------------------------------------------------------------------- the usage table

# One row per line item. node_hours is instance-hours (hours x nodes); cost_usd is what was
# paid (the effective cost of savings-plan and reserved lines); list_cost_usd the public
# on-demand price of the same usage where the ledger states it.
USAGE_COLUMNS = (
    "usage_start",
    "job",
    "team",
    "instance_type",
    "pricing",  # on-demand | spot | savings-plan | reserved
    "node_hours",
    "num_nodes",  # jobs ledger only; a CUR counts distinct resource ids instead
    "resource_id",
    "cost_usd",
    "list_cost_usd",
    "model",  # the training model's name in a fitted StepTimeModel (column or tag)
    "local_bsz",  # per-worker batch the job ran with (column or tag)
    "gpu_util",  # 0..1, jobs ledger only
    "reason",  # NULL: usable; else why not
    "raw_start",  # the start and cost as written, for the data-quality examples
    "raw_cost",
    "source_file",
)
UNTAGGED = "(untagged)"
TAGS = ("job", "team", "model", "local_bsz")  # cost-allocation tags the report reads

NOT_INSTANCE_USAGE = "not EC2 instance usage"
COMMITMENT_LINE = "commitment fee or negation (covered lines carry the effective cost)"
EXCLUDED = (NOT_INSTANCE_USAGE, COMMITMENT_LINE)
UNUSABLE = {
    # reason -> the logical field whose column a user should look at
    "missing or unparseable start date": "start",
    "missing or unparseable cost": "cost",
    "negative cost": "cost",
    "missing or unparseable usage hours": "hours",
    "negative usage hours": "hours",
    "num_nodes below 1": "num_nodes",
    "missing instance type": "instance_type",
    "unknown pricing": "pricing",
}

_REASON_SQL = f"""CASE
    WHEN NOT instance_usage THEN CASE WHEN commitment_line THEN '{COMMITMENT_LINE}'
                                      ELSE '{NOT_INSTANCE_USAGE}' END
    WHEN usage_start IS NULL THEN 'missing or unparseable start date'
    WHEN cost_usd IS NULL THEN 'missing or unparseable cost'
    WHEN cost_usd < 0 THEN 'negative cost'
    WHEN num_nodes IS NOT NULL AND num_nodes < 1 THEN 'num_nodes below 1'
    WHEN node_hours IS NULL THEN 'missing or unparseable usage hours'
    WHEN node_hours < 0 THEN 'negative usage hours'
    WHEN instance_type IS NULL THEN 'missing instance type'
    WHEN pricing IS NULL THEN 'unknown pricing'
  END"""


# --------------------------------------------------------------------------- dialects


@dataclass(frozen=True)
class Dialect:
    """The few spellings DuckDB and Athena (Trino) do not share; every query is built once."""

    name: str
    text_timestamp: str  # {x}: ISO-8601 text (with Z or an offset) -> UTC TIMESTAMP, NULL if bad
    zoned_timestamp: str  # {x}: TIMESTAMP WITH TIME ZONE -> UTC TIMESTAMP
    map_value: str  # {m}, {k}: a MAP's value, NULL when the key is absent
    json_value: str  # {j}, {key}: a JSON object's string value, NULL when absent
    source_file: str  # the file a row came from

    def timestamp(self, column: str, kind: str) -> str:
        """SQL turning ``column`` of ``kind`` into a UTC TIMESTAMP (NULL when unparseable)."""
        if kind == "timestamptz":
            return self.zoned_timestamp.format(x=column)
        if kind == "timestamp":
            return f"TRY_CAST({column} AS TIMESTAMP)"
        return self.text_timestamp.format(x=f"CAST({column} AS VARCHAR)")

    def lookup(self, column: str, kind: str, key: str) -> str:
        """SQL for ``key`` in a MAP column or a JSON-object text column."""
        if kind == "map":
            return self.map_value.format(m=column, k=literal(key))
        return self.json_value.format(j=f"CAST({column} AS VARCHAR)", key=key)


DUCKDB = Dialect(
    name="duckdb",
    text_timestamp="CAST(TRY_CAST({x} AS TIMESTAMPTZ) AS TIMESTAMP)",  # session TimeZone UTC
    zoned_timestamp="CAST({x} AS TIMESTAMP)",
    map_value="{m}[{k}]",
    json_value="json_extract_string({j}, '$.\"{key}\"')",
    source_file="filename",
)
ATHENA = Dialect(
    name="athena",
    text_timestamp="COALESCE(TRY_CAST({x} AS TIMESTAMP), "
    "CAST(TRY(from_iso8601_timestamp({x})) AT TIME ZONE 'UTC' AS TIMESTAMP))",
    zoned_timestamp="CAST({x} AT TIME ZONE 'UTC' AS TIMESTAMP)",
    map_value="element_at({m}, {k})",
    json_value="json_extract_scalar({j}, '$[\"{key}\"]')",
    source_file='"$path"',
)


def literal(text: str) -> str:
    """A string as a single-quoted SQL literal (both engines)."""
    return "'" + str(text).replace("'", "''") + "'"


def quote(name: str) -> str:
    """A column or table name as a double-quoted SQL identifier (both engines)."""
    return '"' + str(name).replace('"', '""') + '"'


# --------------------------------------------------------------------------- source columns


def type_kind(type_name: str) -> str:
    """An engine's column type as one of text, number, timestamp, timestamptz, map, other."""
    t = str(type_name).strip().lower()
    if "with time zone" in t or t.startswith("timestamptz"):
        return "timestamptz"
    if t.startswith(("timestamp", "date")):
        return "timestamp"
    if t.startswith(("varchar", "string", "char", "json", "text")):
        return "text"
    if t.startswith("map"):
        return "map"
    numbers = ("double", "float", "real", "decimal", "numeric", "bigint", "int", "smallint")
    if t.startswith(numbers + ("tinyint", "hugeint", "ubigint", "uinteger", "usmallint")):
        return "number"
    return "other"


@dataclass(frozen=True)
class SourceColumns:
    """A ledger's columns as its engine reports them; names match ignoring case (Athena
    lower-cases them), kinds say how to read each."""

    kinds: dict[str, str]  # actual name -> type_kind

    @classmethod
    def from_types(cls, pairs: Iterable[tuple[str, str]]) -> SourceColumns:
        """From (name, engine type) pairs."""
        return cls({str(name): type_kind(kind) for name, kind in pairs})

    def find(self, name: str) -> str | None:
        """The actual column called ``name`` (any case), or None."""
        if name in self.kinds:
            return name
        lower = name.lower()
        return next((c for c in self.kinds if c.lower() == lower), None)

    def names(self) -> list[str]:
        """Every column name."""
        return list(self.kinds)


class _Fields:
    """SQL reading the source's columns: text, numbers, timestamps; NULL when absent."""

    def __init__(self, cols: SourceColumns, dialect: Dialect) -> None:
        self.cols, self.dialect = cols, dialect

    def text(self, *names: str) -> str:
        """The first of ``names`` present, as trimmed text ('' is NULL)."""
        for name in names:
            actual = self.cols.find(name)
            if actual is not None:
                return f"NULLIF(TRIM(CAST({quote(actual)} AS VARCHAR)), '')"
        return "CAST(NULL AS VARCHAR)"

    def number(self, *names: str) -> str:
        """The first of ``names`` present, as a DOUBLE (NULL when not a number)."""
        for name in names:
            actual = self.cols.find(name)
            if actual is not None:
                return f"TRY_CAST({quote(actual)} AS DOUBLE)"
        return "CAST(NULL AS DOUBLE)"

    def timestamp(self, name: str) -> str:
        """Column ``name`` as a UTC TIMESTAMP (NULL when absent or unparseable)."""
        actual = self.cols.find(name)
        if actual is None:
            return "CAST(NULL AS TIMESTAMP)"
        return self.dialect.timestamp(quote(actual), self.cols.kinds[actual])

    def lookup(self, name: str, keys: Iterable[str]) -> str | None:
        """The first of ``keys`` found in a MAP or JSON-text column, or None if no column."""
        actual = self.cols.find(name)
        if actual is None:
            return None
        kind = self.cols.kinds[actual]
        found = [self.dialect.lookup(quote(actual), kind, key) for key in keys]
        return f"NULLIF(TRIM(COALESCE({', '.join(found)})), '')"


def _tag_keys(tag: str) -> tuple[str, ...]:
    return (f"user_{tag}", f"user:{tag}", tag)


# --------------------------------------------------------------------------- formats


@dataclass(frozen=True)
class LedgerFormat:
    """One ledger layout: the columns it must have and the SQL reading it as usage."""

    name: str
    label: str
    required: tuple[str, ...]
    alternatives: tuple[tuple[str, ...], ...] = ()  # at least one of each group

    def fields(self, cols: SourceColumns, dialect: Dialect) -> dict[str, str]:
        """SQL for every usage column except ``reason``, over the source relation."""
        return _FIELD_BUILDERS[self.name](_Fields(cols, dialect))


def _required(columns) -> tuple[str, ...]:
    return tuple(c.name for c in columns if c.required)


_CUR_NAMES = {  # logical field -> (legacy name, CUR 2.0 name)
    "start": ("lineItem/UsageStartDate", "line_item_usage_start_date"),
    "usage_type": ("lineItem/UsageType", "line_item_usage_type"),
    "amount": ("lineItem/UsageAmount", "line_item_usage_amount"),
    "cost": ("lineItem/UnblendedCost", "line_item_unblended_cost"),
    "line_type": ("lineItem/LineItemType", "line_item_line_item_type"),
    "product": ("lineItem/ProductCode", "line_item_product_code"),
    "instance_type": ("product/instanceType", "product_instance_type"),
    "resource": ("lineItem/ResourceId", "line_item_resource_id"),
    "list_cost": ("pricing/publicOnDemandCost", "pricing_public_on_demand_cost"),
    "sp_cost": ("savingsPlan/SavingsPlanEffectiveCost", "savings_plan_savings_plan_effective_cost"),
    "ri_cost": ("reservation/EffectiveCost", "reservation_effective_cost"),
}
_INSTANCE_LINES = "('Usage', 'SavingsPlanCoveredUsage', 'DiscountedUsage')"
_COMMITMENT_LINES = (
    "('SavingsPlanNegation', 'SavingsPlanRecurringFee', 'SavingsPlanUpfrontFee', 'RIFee')"
)


def _cur_fields(f: _Fields, legacy: bool) -> dict[str, str]:
    at = 0 if legacy else 1

    def name(field_name: str) -> str:
        return _CUR_NAMES[field_name][at]

    tags = {}
    for tag in TAGS:
        if legacy:
            tags[tag] = f.text(f"resourceTags/user:{tag}")
        else:  # a resource_tags MAP (Parquet) or JSON text (CSV), or one column per tag
            tags[tag] = f.lookup("resource_tags", _tag_keys(tag)) or f.text(
                f"resource_tags_user_{tag}"
            )
    line_type = f"COALESCE({f.text(name('line_type'))}, 'Usage')"
    usage_type = f"COALESCE({f.text(name('usage_type'))}, '')"
    cost = f.number(name("cost"))
    return {
        "usage_start": f.timestamp(name("start")),
        "job": f"COALESCE({tags['job']}, '{UNTAGGED}')",
        "team": f"COALESCE({tags['team']}, '{UNTAGGED}')",
        # the instance type is also the usage type's suffix: USE1-SpotUsage:g5.xlarge
        "instance_type": f"COALESCE({f.text(name('instance_type'))}, "
        f"NULLIF(split_part({usage_type}, ':', 2), ''))",
        "pricing": f"CASE WHEN {line_type} = 'SavingsPlanCoveredUsage' THEN 'savings-plan' "
        f"WHEN {line_type} = 'DiscountedUsage' THEN 'reserved' "
        f"WHEN {usage_type} LIKE '%SpotUsage%' THEN 'spot' ELSE 'on-demand' END",
        "node_hours": f.number(name("amount")),
        "num_nodes": "CAST(NULL AS DOUBLE)",
        "resource_id": f.text(name("resource")),
        "cost_usd": f"CASE WHEN {line_type} = 'SavingsPlanCoveredUsage' "
        f"THEN COALESCE({f.number(name('sp_cost'))}, {cost}) "
        f"WHEN {line_type} = 'DiscountedUsage' THEN COALESCE({f.number(name('ri_cost'))}, {cost}) "
        f"ELSE {cost} END",
        "list_cost_usd": f.number(name("list_cost")),
        "model": tags["model"],
        "local_bsz": f"TRY_CAST({tags['local_bsz']} AS DOUBLE)",
        "gpu_util": "CAST(NULL AS DOUBLE)",
        "instance_usage": f"COALESCE({f.text(name('product'))}, 'AmazonEC2') = 'AmazonEC2' "
        f"AND {line_type} IN {_INSTANCE_LINES} AND ({usage_type} LIKE '%BoxUsage%' "
        f"OR {usage_type} LIKE '%SpotUsage%' OR {usage_type} LIKE '%DedicatedUsage%')",
        "commitment_line": f"{line_type} IN {_COMMITMENT_LINES}",
        "raw_start": f.text(name("start")),
        "raw_cost": f.text(name("cost")),
    }


_FOCUS_COMPUTE = "('Amazon Elastic Compute Cloud', 'Virtual Machines', 'Compute Engine')"


def _focus_fields(f: _Fields) -> dict[str, str]:
    tags = {tag: f.lookup("Tags", _tag_keys(tag)) or "CAST(NULL AS VARCHAR)" for tag in TAGS}
    itype = f.lookup("SkuPriceDetails", ("InstanceType", "instanceType")) or "NULL"
    pricing_cat = f.text("PricingCategory")
    unit = f"LOWER(COALESCE({f.text('ConsumedUnit')}, ''))"
    compute = (
        f"(COALESCE({f.text('ServiceCategory')}, '') = 'Compute' "
        f"OR COALESCE({f.text('ServiceName')}, '') IN {_FOCUS_COMPUTE})"
    )
    return {
        "usage_start": f.timestamp("ChargePeriodStart"),
        "job": f"COALESCE({tags['job']}, '{UNTAGGED}')",
        "team": f"COALESCE({tags['team']}, '{UNTAGGED}')",
        "instance_type": itype,
        "pricing": f"CASE WHEN {pricing_cat} = 'Dynamic' THEN 'spot' "
        f"WHEN {pricing_cat} = 'Committed' THEN CASE WHEN "
        f"LOWER(COALESCE({f.text('CommitmentDiscountType')}, '')) LIKE '%savings%' "
        "THEN 'savings-plan' ELSE 'reserved' END ELSE 'on-demand' END",
        "node_hours": f.number("ConsumedQuantity"),
        "num_nodes": "CAST(NULL AS DOUBLE)",
        "resource_id": f.text("ResourceId"),
        "cost_usd": f.number("EffectiveCost", "BilledCost"),
        "list_cost_usd": f.number("ListCost"),
        "model": tags["model"],
        "local_bsz": f"TRY_CAST({tags['local_bsz']} AS DOUBLE)",
        "gpu_util": "CAST(NULL AS DOUBLE)",
        # FOCUS names no EC2 usage types: compute usage in hours that names an instance type
        "instance_usage": f"COALESCE({f.text('ChargeCategory')}, '') = 'Usage' AND {compute} "
        f"AND ({unit} LIKE '%hour%' OR {unit} IN ('hrs', 'hr', 'h')) AND {itype} IS NOT NULL",
        "commitment_line": f"COALESCE({f.text('ChargeCategory')}, '') = 'Purchase'",
        "raw_start": f.text("ChargePeriodStart"),
        "raw_cost": f.text("EffectiveCost", "BilledCost"),
    }


def _jobs_fields(f: _Fields) -> dict[str, str]:
    start = f.timestamp("start")
    span = f"date_diff('second', {start}, {f.timestamp('end')}) / 3600.0"
    hours = f"COALESCE({f.number('hours')}, {span})"
    pricing = f"LOWER({f.text('pricing')})"
    choices = ", ".join(literal(p) for p in PRICING)
    util = f.number("gpu_util")
    return {
        "usage_start": start,
        "job": f"COALESCE({f.text('job')}, '{UNTAGGED}')",
        "team": f"COALESCE({f.text('team')}, '{UNTAGGED}')",
        "instance_type": f.text("instance_type"),
        "pricing": f"CASE WHEN {pricing} IN ('ondemand', 'on_demand', 'on demand') "
        f"THEN 'on-demand' WHEN {pricing} IN ({choices}) THEN {pricing} END",
        "node_hours": f"{hours} * {f.number('num_nodes')}",
        "num_nodes": f.number("num_nodes"),
        "resource_id": "CAST(NULL AS VARCHAR)",
        "cost_usd": f.number("cost_usd"),
        "list_cost_usd": "CAST(NULL AS DOUBLE)",
        "model": f.text("model"),
        "local_bsz": f.number("local_bsz"),
        # a fraction, or a percentage when above 1
        "gpu_util": f"CASE WHEN {util} BETWEEN 0 AND 1 THEN {util} "
        f"WHEN {util} BETWEEN 1 AND 100 THEN {util} / 100 END",
        "instance_usage": "TRUE",
        "commitment_line": "FALSE",
        "raw_start": f.text("start"),
        "raw_cost": f.text("cost_usd"),
    }


_FIELD_BUILDERS = {
    "cur-legacy": lambda f: _cur_fields(f, legacy=True),
    "cur2": lambda f: _cur_fields(f, legacy=False),
    "focus": _focus_fields,
    "jobs": _jobs_fields,
}
_FOCUS_REQUIRED = (
    "ChargePeriodStart",
    "ChargeCategory",
    "ServiceName",
    "ConsumedQuantity",
    "ConsumedUnit",
    "SkuPriceDetails",
)
FORMATS = (
    LedgerFormat("jobs", "jobs ledger", _required(JOBS_LEDGER), alternatives=(("end", "hours"),)),
    LedgerFormat("cur-legacy", "Cost and Usage Report (legacy names)", _required(CUR_LEGACY)),
    LedgerFormat("cur2", "Cost and Usage Report 2.0", _required(CUR_2)),
    LedgerFormat(
        "focus",
        "FOCUS export",
        _FOCUS_REQUIRED,
        alternatives=(("EffectiveCost", "BilledCost"),),
    ),
)
_FIELD_COLUMN = {  # logical field of a reason -> the column a user should look at, by format
    "jobs": {"start": "start", "cost": "cost_usd", "hours": "end", "num_nodes": "num_nodes"},
    "cur-legacy": {"start": "lineItem/UsageStartDate", "cost": "lineItem/UnblendedCost"},
    "cur2": {"start": "line_item_usage_start_date", "cost": "line_item_unblended_cost"},
    "focus": {"start": "ChargePeriodStart", "cost": "EffectiveCost"},
}


def reason_column(fmt: LedgerFormat, reason: str) -> str | None:
    """The ledger column a user should look at for an unusable row's ``reason``."""
    return _FIELD_COLUMN[fmt.name].get(UNUSABLE.get(reason, ""))


def detect_format(cols: SourceColumns, source: str) -> LedgerFormat:
    """Which ledger the columns describe; a missing required column is an InputError."""
    present = {c.lower() for c in cols.names()}

    def score(fmt: LedgerFormat) -> int:
        return sum(c.lower() in present for c in fmt.required)

    best = max(FORMATS, key=score)
    if score(best) < 2:
        raise InputError(
            "not a usage ledger this tool reads",
            source=source,
            fix="give an AWS CUR export (lineItem/... or line_item_... columns), a FOCUS export "
            "(ChargePeriodStart, EffectiveCost, ...) or a jobs ledger with columns "
            + ", ".join(FORMATS[0].required)
            + " and end or hours",
        )
    missing = [c for c in best.required if c.lower() not in present]
    for group in best.alternatives:
        if not any(c.lower() in present for c in group):
            missing.append(" or ".join(group))
    if missing:
        raise InputError(
            f"looks like a {best.label} but has no column {missing[0]!r}"
            + did_you_mean(missing[0].split(" or ")[0], cols.names()),
            source=source,
            column=missing[0],
            fix=f"a {best.label} needs {', '.join(best.required)}"
            + "".join(f" and {' or '.join(g)}" for g in best.alternatives),
        )
    return best


def normalise_sql(fmt: LedgerFormat, cols: SourceColumns, dialect: Dialect, relation: str) -> str:
    """The usage table (``USAGE_COLUMNS``) as a SELECT over ``relation``: the one place the
    ledger formats are read."""
    fields = fmt.fields(cols, dialect)
    fields["source_file"] = dialect.source_file
    inner = ",\n    ".join(f"{sql} AS {name}" for name, sql in fields.items())
    outer = ", ".join(c for c in USAGE_COLUMNS if c != "reason")
    return (
        f"SELECT {outer},\n  {_REASON_SQL} AS reason\n"
        f"FROM (\n  SELECT\n    {inner}\n  FROM {relation}\n) AS typed"
    )


# --------------------------------------------------------------------------- weekly queries


def _timestamp(day: dt.date) -> str:
    return f"TIMESTAMP '{day.isoformat()} 00:00:00'"


def overview_sql(usage: str) -> str:
    """Line items, cost and instance-hours per day and reason (NULL: usable), every row."""
    return (
        f"WITH usage AS (\n{usage}\n)\n"
        "SELECT CAST(usage_start AS DATE) AS usage_date, reason, COUNT(*) AS line_items,\n"
        "  SUM(cost_usd) AS cost_usd, SUM(node_hours) AS node_hours\n"
        "FROM usage\nGROUP BY CAST(usage_start AS DATE), reason\n"
        "ORDER BY usage_date, reason"
    )


WEEK_KEYS = ("job", "team", "instance_type", "pricing", "model")


def week_sql(usage: str, start: dt.date, end: dt.date) -> str:
    """The week's usable usage by job, team, instance type, pricing and model."""
    keys = ", ".join(WEEK_KEYS)
    return (
        f"WITH usage AS (\n{usage}\n)\n"
        f"SELECT {keys}, COUNT(*) AS line_items, SUM(cost_usd) AS cost_usd,\n"
        "  SUM(list_cost_usd) AS list_cost_usd,\n"
        "  SUM(CASE WHEN list_cost_usd IS NULL THEN node_hours ELSE 0 END) AS unlisted_hours,\n"
        "  SUM(node_hours) AS node_hours, MAX(num_nodes) AS num_nodes,\n"
        "  COUNT(DISTINCT resource_id) AS resources, MAX(local_bsz) AS local_bsz,\n"
        "  SUM(gpu_util * node_hours) AS util_hours,\n"
        "  SUM(CASE WHEN gpu_util IS NULL THEN 0 ELSE node_hours END) AS util_known_hours,\n"
        "  MIN(usage_start) AS first_start, MAX(usage_start) AS last_start\n"
        "FROM usage\n"
        f"WHERE reason IS NULL AND usage_start >= {_timestamp(start)} "
        f"AND usage_start < {_timestamp(end)}\n"
        f"GROUP BY {keys}\nORDER BY {keys}"
    )


def examples_sql(usage: str, per_reason: int = 3) -> str:
    """A few unusable rows per reason, as written in the ledger."""
    reasons = ", ".join(literal(r) for r in UNUSABLE)
    return (
        f"WITH usage AS (\n{usage}\n),\nbad AS (\n"
        "  SELECT reason, source_file, raw_start, raw_cost, job, instance_type,\n"
        "    ROW_NUMBER() OVER (PARTITION BY reason ORDER BY source_file, raw_start, raw_cost)"
        " AS n\n"
        f"  FROM usage WHERE reason IN ({reasons})\n)\n"
        "SELECT reason, source_file, raw_start, raw_cost, job, instance_type FROM bad\n"
        f"WHERE n <= {int(per_reason)} ORDER BY reason, n"
    )
