"""The usage SQL, written once: every ledger layout (AWS CUR legacy and 2.0, FOCUS 1.0-1.3, a
plain jobs ledger) read as one canonical line item, and the weekly queries over it.

``normalise_sql`` turns a ledger's columns into the line items (``USAGE_COLUMNS``): provider,
service, charge category (Usage, Purchase, Tax, Credit, Adjustment) and class (Correction),
billed / effective (amortised) / list / contracted cost, currency, commitment id, type and
status, quantities and tags. Each row's ``reason`` says what it is for the training-compute
part of the report: NULL for instance usage that the job tables use, else why not (another
service, tax, a commitment's unused part, or a cell that cannot be read). Every row, whatever
its reason, is in the reconciliation. DuckDB and Amazon Athena (Trino) run the same text: a
``Dialect`` holds the few spellings they do not share.

How a CUR's ``lineItem/LineItemType`` maps (AWS's own amortisation rules, as its CUR
documentation states them for "amortized cost"):

| line item type | category | effective cost |
| --- | --- | --- |
| Usage | Usage | unblended |
| DiscountedUsage | Usage (reserved) | reservation/EffectiveCost |
| SavingsPlanCoveredUsage | Usage (savings plan) | savingsPlan/SavingsPlanEffectiveCost |
| SavingsPlanNegation | Usage | 0 (the covered line carries it) |
| SavingsPlanRecurringFee | Purchase | TotalCommitmentToDate - UsedCommitment (the unused part) |
| SavingsPlanUpfrontFee, Fee of a reservation | Purchase | 0 (amortised into the usage) |
| RIFee | Purchase | UnusedAmortizedUpfrontFee + UnusedRecurringFee (the unused part) |
| other Fee (support, a subscription: no commitment ARN) | Purchase (a fee) | unblended |
| Tax | Tax | unblended |
| Credit, Refund, *Discount | Credit | unblended |
| anything else | Adjustment | unblended |
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from srifty_kit.errors import InputError, did_you_mean
from srifty_kit.tables.contracts import CUR_2, CUR_LEGACY, JOBS_LEDGER, PRICING

# --------------------------------------------------------------------------- the line items

USAGE_COLUMNS = (
    "usage_start",
    "provider",  # AWS, Microsoft, Google Cloud, Oracle, ... (FOCUS ServiceProviderName)
    "service",  # FOCUS ServiceName, a CUR's product code
    "charge_category",  # Usage | Purchase | Tax | Credit | Adjustment
    "charge_class",  # Correction or NULL
    "billed_cost",  # what the invoice charges
    "effective_cost",  # amortised: commitments spread over the usage they cover
    "list_cost",  # the public price of the same usage
    "contracted_cost",
    "currency",
    "commitment_id",
    "commitment_type",
    "commitment_status",  # Used | Unused | NULL
    "job",
    "team",
    "model",  # the training model's name in a fitted StepTimeModel (column or tag)
    "local_bsz",  # per-worker batch the job ran with (column or tag)
    "instance_type",
    "pricing",  # on-demand | spot | savings-plan | reserved
    "instance_hours",  # instance-hours (hours x nodes)
    "num_nodes",  # jobs ledger only; a CUR counts distinct resource ids instead
    "resource_id",
    "gpu_util",  # 0..1, jobs ledger only
    "bad_tags",  # the tags cell is not valid JSON
    "bad_sku",  # the SKU details cell is not valid JSON
    "bad_cost",  # a cost cell holds something other than a finite number
    "reason",  # NULL: instance usage the job tables use; else why not
    "raw_start",  # the start and cost as written, for the data-quality examples
    "raw_cost",
    "source_file",
)
UNTAGGED = "(untagged)"
TAGS = ("job", "team", "model", "local_bsz")  # the cost-allocation tags the report reads
DEFAULT_TAGS: dict[str, tuple[str, ...]] = {tag: (tag,) for tag in TAGS}
MAX_COST = 1e15  # no line item costs this much; larger (or infinite) cells are unreadable

# reasons of rows that are not instance usage: every one is in the reconciliation
OTHER_USAGE = "other services and usage (storage, network, non-VM compute)"
TAX = "tax"
CREDIT = "credit or refund"
ADJUSTMENT = "adjustment"
PURCHASE = "commitment purchase (billed now, effective cost in the usage it covers)"
# a purchase of no commitment (support, a subscription, a registration): cost as billed
FEE = "fee (support, subscription or other purchase of no commitment)"
UNUSED = "unused commitment (its effective cost is waste)"
NEGATION = "commitment negation (the covered usage carries its effective cost)"
EXCLUDED = (OTHER_USAGE, TAX, CREDIT, ADJUSTMENT, PURCHASE, FEE, UNUSED, NEGATION)
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
CHARGE_CATEGORIES = ("Usage", "Purchase", "Tax", "Credit", "Adjustment")

_REASON_SQL = """CASE
    WHEN NOT instance_usage THEN role
    WHEN usage_start IS NULL THEN 'missing or unparseable start date'
    WHEN effective_cost IS NULL THEN 'missing or unparseable cost'
    WHEN refuse_negative AND effective_cost < 0 THEN 'negative cost'
    WHEN num_nodes IS NOT NULL AND num_nodes < 1 THEN 'num_nodes below 1'
    WHEN instance_hours IS NULL THEN 'missing or unparseable usage hours'
    WHEN instance_hours < 0 AND charge_class IS NULL THEN 'negative usage hours'
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
    json_value: str  # {j}, {key}: a JSON object's string value, NULL when absent or not JSON
    json_invalid: str  # {j}: TRUE when the text is not valid JSON
    finite: str  # {x}: TRUE when a DOUBLE is neither infinite nor NaN
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
        return self.json_value.format(j=_clean_text(column), key=key)


DUCKDB = Dialect(
    name="duckdb",
    text_timestamp="CAST(TRY_CAST({x} AS TIMESTAMPTZ) AS TIMESTAMP)",  # session TimeZone UTC
    zoned_timestamp="CAST({x} AS TIMESTAMP)",
    map_value="{m}[{k}]",
    json_value="CASE WHEN json_valid({j}) THEN json_extract_string({j}, '$.\"{key}\"') END",
    json_invalid="(NOT json_valid({j}))",
    finite="isfinite({x})",
    source_file="filename",
)
ATHENA = Dialect(
    name="athena",
    text_timestamp="COALESCE(TRY_CAST({x} AS TIMESTAMP), "
    "CAST(TRY(from_iso8601_timestamp({x})) AT TIME ZONE 'UTC' AS TIMESTAMP))",
    zoned_timestamp="CAST({x} AT TIME ZONE 'UTC' AS TIMESTAMP)",
    map_value="element_at({m}, {k})",
    json_value="TRY(json_extract_scalar({j}, '$[\"{key}\"]'))",
    json_invalid="(TRY(json_parse({j})) IS NULL)",
    finite="is_finite({x})",
    source_file='"$path"',
)


def literal(text: str) -> str:
    """A string as a single-quoted SQL literal (both engines)."""
    return "'" + str(text).replace("'", "''") + "'"


def quote(name: str) -> str:
    """A column or table name as a double-quoted SQL identifier (both engines)."""
    return '"' + str(name).replace('"', '""') + '"'


def _clean_text(column: str) -> str:
    """A cell as trimmed text; empty and the literal text NULL (as real exports write nulls)
    are NULL."""
    text = f"TRIM(CAST({column} AS VARCHAR))"
    return f"CASE WHEN UPPER({text}) IN ('', 'NULL') THEN NULL ELSE {text} END"


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
    """SQL reading the source's columns: text, numbers, money, timestamps; NULL when absent."""

    def __init__(self, cols: SourceColumns, dialect: Dialect) -> None:
        self.cols, self.dialect = cols, dialect

    def has(self, *names: str) -> bool:
        """Whether any of ``names`` is a column."""
        return any(self.cols.find(n) is not None for n in names)

    def text(self, *names: str) -> str:
        """The first of ``names`` present, as trimmed text ('' and 'NULL' are NULL)."""
        for name in names:
            actual = self.cols.find(name)
            if actual is not None:
                return _clean_text(quote(actual))
        return "CAST(NULL AS VARCHAR)"

    def number(self, *names: str) -> str:
        """The first of ``names`` present, as a DOUBLE (NULL when not a number)."""
        for name in names:
            actual = self.cols.find(name)
            if actual is not None:
                return f"TRY_CAST({quote(actual)} AS DOUBLE)"
        return "CAST(NULL AS DOUBLE)"

    def money(self, *names: str) -> str:
        """A cost column as a DOUBLE: NULL unless a finite number below ``MAX_COST``."""
        x = self.number(*names)
        if x.startswith("CAST(NULL"):
            return x
        return (
            f"CASE WHEN {self.dialect.finite.format(x=x)} AND ABS({x}) < {MAX_COST:g} THEN {x} END"
        )

    def bad_money(self, *names: str) -> str:
        """TRUE where a cost cell holds text that is not a finite number below MAX_COST."""
        checks = [
            f"({self.text(n)} IS NOT NULL AND {self.money(n)} IS NULL)"
            for n in names
            if self.has(n)
        ]
        return " OR ".join(checks) if checks else "FALSE"

    def timestamp(self, name: str) -> str:
        """Column ``name`` as a UTC TIMESTAMP (NULL when absent or unparseable)."""
        actual = self.cols.find(name)
        if actual is None:
            return "CAST(NULL AS TIMESTAMP)"
        if self.cols.kinds[actual] in ("timestamp", "timestamptz"):
            return self.dialect.timestamp(quote(actual), self.cols.kinds[actual])
        return self.dialect.timestamp(_clean_text(quote(actual)), "text")

    def lookup(self, name: str, keys: Iterable[str]) -> str | None:
        """The first of ``keys`` found in a MAP or JSON-text column, or None if no column."""
        actual = self.cols.find(name)
        if actual is None:
            return None
        kind = self.cols.kinds[actual]
        found = [self.dialect.lookup(quote(actual), kind, key) for key in keys]
        return _clean_text(f"COALESCE({', '.join(found)})")

    def bad_json(self, name: str) -> str:
        """TRUE where a JSON-text column's cell is not valid JSON (a MAP column never is)."""
        actual = self.cols.find(name)
        if actual is None or self.cols.kinds[actual] == "map":
            return "FALSE"
        j = _clean_text(quote(actual))
        return f"({j} IS NOT NULL AND {self.dialect.json_invalid.format(j=j)})"


# --------------------------------------------------------------------------- tags

_TAG_KEY = re.compile(r"^[A-Za-z0-9_.:/@+=-]{1,128}$")


def tag_map(mapping: Mapping[str, str | Iterable[str]] | None = None) -> dict[str, tuple[str, ...]]:
    """The tags to read for job, team, model and local_bsz: the defaults (tags named so), with
    ``mapping`` (logical name -> the ledger's tag key or keys, first found wins) over them.

    Args:
        mapping: e.g. ``{"team": "business_unit", "job": "application"}``.

    Returns:
        Logical name -> tag keys.

    Raises:
        InputError: a logical name other than job, team, model, local_bsz, or a key with
            characters no tag key has (quotes, spaces, brackets).
    """
    out = dict(DEFAULT_TAGS)
    for name, keys in (mapping or {}).items():
        if name not in TAGS:
            raise InputError(
                f"unknown tag {name!r}{did_you_mean(name, TAGS)}",
                column="tag",
                fix="map one of " + ", ".join(TAGS) + " (e.g. --tag team=business_unit)",
            )
        keys = (keys,) if isinstance(keys, str) else tuple(keys)
        for key in keys:
            if not _TAG_KEY.match(str(key)):
                raise InputError(
                    f"tag key {key!r} is not a tag name (letters, digits and _.:/@+=- only)",
                    column="tag",
                    fix="e.g. --tag team=business_unit",
                )
        out[name] = keys
    return out


def _tag_sql(f: _Fields, fmt: str, keys: tuple[str, ...]) -> str:
    """SQL for the first of ``keys`` the ledger's tags hold (NULL when none)."""
    parts: list[str] = []
    for key in keys:
        if fmt == "cur-legacy":
            parts += [f.text(f"resourceTags/user:{key}"), f.text(f"resourceTags/{key}")]
        elif fmt == "cur2":
            found = f.lookup("resource_tags", (f"user_{key}", key))
            if found:
                parts.append(found)
            parts.append(f.text(f"resource_tags_user_{key}"))
        else:
            found = f.lookup("Tags", (key, f"user:{key}", f"user_{key}"))
            if found:
                parts.append(found)
    parts = [p for p in parts if not p.startswith("CAST(NULL")]
    return f"COALESCE({', '.join(parts)})" if parts else "CAST(NULL AS VARCHAR)"


# --------------------------------------------------------------------------- formats


@dataclass(frozen=True)
class LedgerFormat:
    """One ledger layout: the columns it must have and the SQL reading it as line items."""

    name: str
    label: str
    required: tuple[str, ...]
    alternatives: tuple[tuple[str, ...], ...] = ()  # at least one of each group

    def fields(
        self, cols: SourceColumns, dialect: Dialect, tags: Mapping[str, tuple[str, ...]]
    ) -> dict[str, str]:
        """SQL for every line-item column except ``reason``, over the source relation."""
        return _FIELD_BUILDERS[self.name](_Fields(cols, dialect), dict(tags))


def _required(columns) -> tuple[str, ...]:
    return tuple(c.name for c in columns if c.required)


_CUR_NAMES = {  # logical field -> (legacy name, CUR 2.0 name)
    "start": ("lineItem/UsageStartDate", "line_item_usage_start_date"),
    "usage_type": ("lineItem/UsageType", "line_item_usage_type"),
    "amount": ("lineItem/UsageAmount", "line_item_usage_amount"),
    "cost": ("lineItem/UnblendedCost", "line_item_unblended_cost"),
    "line_type": ("lineItem/LineItemType", "line_item_line_item_type"),
    "product": ("lineItem/ProductCode", "line_item_product_code"),
    "currency": ("lineItem/CurrencyCode", "line_item_currency_code"),
    "instance_type": ("product/instanceType", "product_instance_type"),
    "resource": ("lineItem/ResourceId", "line_item_resource_id"),
    "list_cost": ("pricing/publicOnDemandCost", "pricing_public_on_demand_cost"),
    "sp_cost": ("savingsPlan/SavingsPlanEffectiveCost", "savings_plan_savings_plan_effective_cost"),
    "sp_arn": ("savingsPlan/SavingsPlanARN", "savings_plan_savings_plan_a_r_n"),
    "sp_total": ("savingsPlan/TotalCommitmentToDate", "savings_plan_total_commitment_to_date"),
    "sp_used": ("savingsPlan/UsedCommitment", "savings_plan_used_commitment"),
    "ri_cost": ("reservation/EffectiveCost", "reservation_effective_cost"),
    "ri_arn": ("reservation/ReservationARN", "reservation_reservation_a_r_n"),
    "ri_unused_upfront": (
        "reservation/UnusedAmortizedUpfrontFeeForBillingPeriod",
        "reservation_unused_amortized_upfront_fee_for_billing_period",
    ),
    "ri_unused_fee": ("reservation/UnusedRecurringFee", "reservation_unused_recurring_fee"),
}
_CUR_CREDITS = (
    "('Credit', 'Refund', 'BundledDiscount', 'Discount', 'EdpDiscount', 'PrivateRateDiscount', "
    "'DistributorDiscount', 'SppDiscount')"
)
_CUR_PURCHASES = "('Fee', 'RIFee', 'SavingsPlanRecurringFee', 'SavingsPlanUpfrontFee')"
_CUR_USAGE = "('Usage', 'DiscountedUsage', 'SavingsPlanCoveredUsage', 'SavingsPlanNegation')"
_INSTANCE_LINES = "('Usage', 'SavingsPlanCoveredUsage', 'DiscountedUsage')"


def _cur_fields(f: _Fields, tags: dict, legacy: bool) -> dict[str, str]:
    at = 0 if legacy else 1
    fmt = "cur-legacy" if legacy else "cur2"

    def name(field_name: str) -> str:
        return _CUR_NAMES[field_name][at]

    tag = {t: _tag_sql(f, fmt, tags[t]) for t in TAGS}
    line_type = f"COALESCE({f.text(name('line_type'))}, 'Usage')"
    usage_type = f"COALESCE({f.text(name('usage_type'))}, '')"
    cost = f.money(name("cost"))
    zero = "CAST(0 AS DOUBLE)"
    category = (
        f"CASE WHEN {line_type} IN {_CUR_USAGE} THEN 'Usage' "
        f"WHEN {line_type} IN {_CUR_PURCHASES} THEN 'Purchase' "
        f"WHEN {line_type} = 'Tax' THEN 'Tax' WHEN {line_type} IN {_CUR_CREDITS} THEN 'Credit' "
        "ELSE 'Adjustment' END"
    )
    sp_unused = f"COALESCE({f.money(name('sp_total'))} - {f.money(name('sp_used'))}, {zero})"
    ri_unused = (
        f"COALESCE({f.money(name('ri_unused_upfront'))}, {zero}) + "
        f"COALESCE({f.money(name('ri_unused_fee'))}, {zero})"
    )
    effective = (
        f"CASE WHEN {line_type} = 'SavingsPlanCoveredUsage' "
        f"THEN COALESCE({f.money(name('sp_cost'))}, {cost}) "
        f"WHEN {line_type} = 'DiscountedUsage' THEN COALESCE({f.money(name('ri_cost'))}, {cost}) "
        f"WHEN {line_type} = 'SavingsPlanNegation' THEN {zero} "
        f"WHEN {line_type} = 'SavingsPlanRecurringFee' THEN {sp_unused} "
        f"WHEN {line_type} = 'SavingsPlanUpfrontFee' THEN {zero} "
        f"WHEN {line_type} = 'RIFee' THEN {ri_unused} "
        f"WHEN {line_type} = 'Fee' AND {f.text(name('ri_arn'))} IS NOT NULL THEN {zero} "
        f"ELSE {cost} END"
    )
    role = (
        f"CASE WHEN {line_type} = 'Tax' THEN '{TAX}' "
        f"WHEN {line_type} IN {_CUR_CREDITS} THEN '{CREDIT}' "
        f"WHEN {line_type} = 'SavingsPlanNegation' THEN '{NEGATION}' "
        f"WHEN {line_type} IN ('RIFee', 'SavingsPlanRecurringFee') THEN '{UNUSED}' "
        f"WHEN {line_type} = 'Fee' AND {f.text(name('ri_arn'))} IS NULL "
        f"AND {f.text(name('sp_arn'))} IS NULL THEN '{FEE}' "
        f"WHEN {line_type} IN {_CUR_PURCHASES} THEN '{PURCHASE}' "
        f"WHEN {line_type} IN {_CUR_USAGE} THEN '{OTHER_USAGE}' ELSE '{ADJUSTMENT}' END"
    )
    covered = f"{line_type} IN ('SavingsPlanCoveredUsage', 'DiscountedUsage')"
    return {
        "usage_start": f.timestamp(name("start")),
        "provider": "'AWS'",
        "service": f"COALESCE({f.text(name('product'))}, 'AmazonEC2')",
        "charge_category": category,
        "charge_class": "CAST(NULL AS VARCHAR)",
        "billed_cost": cost,
        "effective_cost": effective,
        "list_cost": f.money(name("list_cost")),
        "contracted_cost": "CAST(NULL AS DOUBLE)",
        "currency": f"UPPER(COALESCE({f.text(name('currency'))}, 'USD'))",
        "commitment_id": f"COALESCE({f.text(name('sp_arn'))}, {f.text(name('ri_arn'))})",
        "commitment_type": f"CASE WHEN {line_type} LIKE 'SavingsPlan%' THEN 'Savings Plan' "
        f"WHEN {line_type} IN ('DiscountedUsage', 'RIFee') THEN 'Reservation' END",
        "commitment_status": f"CASE WHEN {covered} THEN 'Used' "
        f"WHEN {line_type} IN ('RIFee', 'SavingsPlanRecurringFee') THEN 'Unused' END",
        "job": f"COALESCE({tag['job']}, '{UNTAGGED}')",
        "team": f"COALESCE({tag['team']}, '{UNTAGGED}')",
        # the instance type is also the usage type's suffix: USE1-SpotUsage:g5.xlarge
        "instance_type": f"COALESCE({f.text(name('instance_type'))}, "
        f"NULLIF(split_part({usage_type}, ':', 2), ''))",
        "pricing": f"CASE WHEN {line_type} = 'SavingsPlanCoveredUsage' THEN 'savings-plan' "
        f"WHEN {line_type} = 'DiscountedUsage' THEN 'reserved' "
        f"WHEN {usage_type} LIKE '%SpotUsage%' THEN 'spot' ELSE 'on-demand' END",
        "instance_hours": f.number(name("amount")),
        "num_nodes": "CAST(NULL AS DOUBLE)",
        "resource_id": f.text(name("resource")),
        "model": tag["model"],
        "local_bsz": f"TRY_CAST({tag['local_bsz']} AS DOUBLE)",
        "gpu_util": "CAST(NULL AS DOUBLE)",
        "bad_tags": f.bad_json("resource_tags") if not legacy else "FALSE",
        "bad_sku": "FALSE",
        "bad_cost": f.bad_money(name("cost"), name("list_cost")),
        "instance_usage": f"COALESCE({f.text(name('product'))}, 'AmazonEC2') = 'AmazonEC2' "
        f"AND {line_type} IN {_INSTANCE_LINES} AND ({usage_type} LIKE '%BoxUsage%' "
        f"OR {usage_type} LIKE '%SpotUsage%' OR {usage_type} LIKE '%DedicatedUsage%')",
        "role": role,
        "refuse_negative": "FALSE",
        "raw_start": f.text(name("start")),
        "raw_cost": f.text(name("cost")),
    }


# Services whose hourly usage is a virtual machine, by provider (FOCUS ServiceName values as
# the providers' FOCUS exports write them)
_FOCUS_VMS = (
    "('Amazon Elastic Compute Cloud', 'Amazon EC2', 'Virtual Machines', 'Compute Engine', "
    "'Compute', 'Oracle Cloud Infrastructure Compute')"
)
# where the providers' FOCUS exports name the instance type (SkuPriceDetails from FOCUS 1.1;
# Azure's x_SkuDetails; AWS's x_UsageType suffix) -- read in this order
_SKU_KEYS = (
    "InstanceType",
    "x_InstanceType",
    "instanceType",
    "VMSize",
    "MachineType",
    "ServiceType",
)


def _focus_fields(f: _Fields, tags: dict) -> dict[str, str]:
    tag = {t: _tag_sql(f, "focus", tags[t]) for t in TAGS}
    sources = [f.lookup("SkuPriceDetails", _SKU_KEYS), f.lookup("x_SkuDetails", _SKU_KEYS)]
    sources += [f.text("x_InstanceType", "InstanceType")]
    if f.has("x_UsageType"):
        usage_type = f"COALESCE({f.text('x_UsageType')}, '')"
        sources.append(
            f"CASE WHEN {usage_type} LIKE '%Usage:%' "
            f"THEN NULLIF(split_part({usage_type}, ':', 2), '') END"
        )
    sources = [s for s in sources if s and not s.startswith("CAST(NULL")]
    itype = f"COALESCE({', '.join(sources)})" if sources else "CAST(NULL AS VARCHAR)"
    category = f"COALESCE({f.text('ChargeCategory')}, '')"
    cat = (
        "CASE "
        + " ".join(f"WHEN LOWER({category}) = '{c.lower()}' THEN '{c}'" for c in CHARGE_CATEGORIES)
        + f" ELSE COALESCE({f.text('ChargeCategory')}, 'Adjustment') END"
    )
    charge_class = (
        f"CASE WHEN LOWER(COALESCE({f.text('ChargeClass')}, '')) = 'correction' "
        "THEN 'Correction' END"
    )
    status = (
        f"CASE WHEN LOWER(COALESCE({f.text('CommitmentDiscountStatus')}, '')) = 'unused' "
        f"THEN 'Unused' WHEN LOWER(COALESCE({f.text('CommitmentDiscountStatus')}, '')) = 'used' "
        f"THEN 'Used' END"
    )
    pricing_cat = f"LOWER(COALESCE({f.text('PricingCategory')}, ''))"
    unit = f"LOWER(COALESCE({f.text('ConsumedUnit', 'PricingUnit')}, ''))"
    quantity = f.number("ConsumedQuantity")
    correction = f"({charge_class}) IS NOT NULL"
    vm = (
        f"(COALESCE({f.text('ServiceCategory')}, '') = 'Compute' "
        f"AND COALESCE({f.text('ServiceName')}, '') IN {_FOCUS_VMS})"
    )
    hourly = f"({unit} LIKE '%hour%' OR {unit} IN ('hrs', 'hr', 'h'))"
    billed = f.money("BilledCost", "EffectiveCost")
    return {
        "usage_start": f.timestamp("ChargePeriodStart"),
        # FOCUS 1.3 splits ProviderName into ServiceProviderName and HostProviderName
        "provider": f"COALESCE({f.text('ServiceProviderName', 'ProviderName', 'PublisherName')}, "
        "'(unknown provider)')",
        "service": f"COALESCE({f.text('ServiceName')}, '(unknown service)')",
        "charge_category": cat,
        "charge_class": charge_class,
        "billed_cost": billed,
        "effective_cost": f.money("EffectiveCost", "BilledCost"),
        "list_cost": f.money("ListCost"),
        "contracted_cost": f.money("ContractedCost"),
        "currency": f"UPPER(COALESCE({f.text('BillingCurrency')}, '(no currency)'))",
        "commitment_id": f.text("CommitmentDiscountId"),
        "commitment_type": f.text("CommitmentDiscountType"),
        "commitment_status": status,
        "job": f"COALESCE({tag['job']}, '{UNTAGGED}')",
        "team": f"COALESCE({tag['team']}, '{UNTAGGED}')",
        "instance_type": itype,
        "pricing": f"CASE WHEN {pricing_cat} = 'dynamic' THEN 'spot' "
        f"WHEN {pricing_cat} = 'committed' OR ({status}) = 'Used' THEN CASE WHEN "
        f"LOWER(COALESCE({f.text('CommitmentDiscountType')}, '')) LIKE '%savings%' "
        "THEN 'savings-plan' ELSE 'reserved' END ELSE 'on-demand' END",
        # a correction may carry no quantity (the spec allows it): it moves cost, not hours
        "instance_hours": f"CASE WHEN {correction} THEN COALESCE({quantity}, 0) "
        f"ELSE {quantity} END",
        "num_nodes": "CAST(NULL AS DOUBLE)",
        "resource_id": f.text("ResourceId"),
        "model": tag["model"],
        "local_bsz": f"TRY_CAST({tag['local_bsz']} AS DOUBLE)",
        "gpu_util": "CAST(NULL AS DOUBLE)",
        "bad_tags": f.bad_json("Tags"),
        "bad_sku": f"({f.bad_json('SkuPriceDetails')} OR {f.bad_json('x_SkuDetails')})",
        "bad_cost": f.bad_money("BilledCost", "EffectiveCost", "ListCost", "ContractedCost"),
        # virtual-machine hours; an unused commitment is waste, never an instance-hour
        "instance_usage": f"({cat}) = 'Usage' AND {vm} AND COALESCE(({status}), '') <> 'Unused' "
        f"AND ({hourly} OR ({correction} AND {unit} = ''))",
        "role": f"CASE WHEN ({cat}) = 'Tax' THEN '{TAX}' WHEN ({cat}) = 'Credit' THEN '{CREDIT}' "
        f"WHEN ({cat}) = 'Purchase' AND {f.text('CommitmentDiscountId')} IS NULL THEN '{FEE}' "
        f"WHEN ({cat}) = 'Purchase' THEN '{PURCHASE}' "
        f"WHEN ({status}) = 'Unused' THEN '{UNUSED}' "
        f"WHEN ({cat}) = 'Usage' THEN '{OTHER_USAGE}' ELSE '{ADJUSTMENT}' END",
        "refuse_negative": "FALSE",
        "raw_start": f.text("ChargePeriodStart"),
        "raw_cost": f.text("EffectiveCost", "BilledCost"),
    }


def _jobs_fields(f: _Fields, tags: dict) -> dict[str, str]:
    start = f.timestamp("start")
    span = f"date_diff('second', {start}, {f.timestamp('end')}) / 3600.0"
    hours = f"COALESCE({f.number('hours')}, {span})"
    pricing = f"LOWER({f.text('pricing')})"
    choices = ", ".join(literal(p) for p in PRICING)
    util = f.number("gpu_util")
    cost = f.money("cost_usd")

    def column(name: str) -> str:  # a jobs ledger names its columns; --tag renames them
        return f.text(*tags[name])

    return {
        "usage_start": start,
        "provider": f"COALESCE({f.text('provider')}, 'AWS')",
        "service": f"COALESCE({f.text('service')}, 'AmazonEC2')",
        "charge_category": "'Usage'",
        "charge_class": "CAST(NULL AS VARCHAR)",
        "billed_cost": cost,
        "effective_cost": cost,
        "list_cost": "CAST(NULL AS DOUBLE)",
        "contracted_cost": "CAST(NULL AS DOUBLE)",
        "currency": "'USD'",
        "commitment_id": "CAST(NULL AS VARCHAR)",
        "commitment_type": "CAST(NULL AS VARCHAR)",
        "commitment_status": "CAST(NULL AS VARCHAR)",
        "job": f"COALESCE({column('job')}, '{UNTAGGED}')",
        "team": f"COALESCE({column('team')}, '{UNTAGGED}')",
        "instance_type": f.text("instance_type"),
        "pricing": f"CASE WHEN {pricing} IN ('ondemand', 'on_demand', 'on demand') "
        f"THEN 'on-demand' WHEN {pricing} IN ({choices}) THEN {pricing} END",
        "instance_hours": f"{hours} * {f.number('num_nodes')}",
        "num_nodes": f.number("num_nodes"),
        "resource_id": "CAST(NULL AS VARCHAR)",
        "model": column("model"),
        "local_bsz": f"TRY_CAST({column('local_bsz')} AS DOUBLE)",
        # a fraction, or a percentage when above 1
        "gpu_util": f"CASE WHEN {util} BETWEEN 0 AND 1 THEN {util} "
        f"WHEN {util} BETWEEN 1 AND 100 THEN {util} / 100 END",
        "bad_tags": "FALSE",
        "bad_sku": "FALSE",
        "bad_cost": f.bad_money("cost_usd"),
        "instance_usage": "TRUE",
        "role": "CAST(NULL AS VARCHAR)",
        "refuse_negative": "TRUE",  # a jobs ledger has no refunds: a negative cost is a typo
        "raw_start": f.text("start"),
        "raw_cost": f.text("cost_usd"),
    }


_FIELD_BUILDERS = {
    "cur-legacy": lambda f, tags: _cur_fields(f, tags, legacy=True),
    "cur2": lambda f, tags: _cur_fields(f, tags, legacy=False),
    "focus": _focus_fields,
    "jobs": _jobs_fields,
}
# what the report needs of a FOCUS export (every version 1.0-1.3 has these; the rest is read
# where present: SkuPriceDetails arrived in 1.1, ServiceProviderName in 1.3)
_FOCUS_REQUIRED = ("ChargePeriodStart", "ChargeCategory", "BillingCurrency")
FORMATS = (
    LedgerFormat("jobs", "jobs ledger", _required(JOBS_LEDGER), alternatives=(("end", "hours"),)),
    LedgerFormat("cur-legacy", "Cost and Usage Report (legacy names)", _required(CUR_LEGACY)),
    LedgerFormat("cur2", "Cost and Usage Report 2.0", _required(CUR_2)),
    LedgerFormat(
        "focus",
        "FOCUS export",
        _FOCUS_REQUIRED,
        alternatives=(("BilledCost", "EffectiveCost"),),
    ),
)
_FIELD_COLUMN = {  # logical field of a reason -> the column a user should look at, by format
    "jobs": {"start": "start", "cost": "cost_usd", "hours": "end", "num_nodes": "num_nodes"},
    "cur-legacy": {
        "start": "lineItem/UsageStartDate",
        "cost": "lineItem/UnblendedCost",
        "hours": "lineItem/UsageAmount",
    },
    "cur2": {
        "start": "line_item_usage_start_date",
        "cost": "line_item_unblended_cost",
        "hours": "line_item_usage_amount",
    },
    "focus": {
        "start": "ChargePeriodStart",
        "cost": "EffectiveCost",
        "hours": "ConsumedQuantity",
        "instance_type": "SkuPriceDetails",
    },
}


def reason_column(fmt: LedgerFormat, reason: str) -> str | None:
    """The ledger column a user should look at for an unusable row's ``reason``."""
    return _FIELD_COLUMN[fmt.name].get(UNUSABLE.get(reason, ""))


def detect_format(cols: SourceColumns, source: str) -> LedgerFormat:
    """Which ledger the columns describe; a missing required column is an InputError."""
    present = {c.lower() for c in cols.names()}

    def score(fmt: LedgerFormat) -> int:
        found = sum(c.lower() in present for c in fmt.required)
        return found + sum(any(c.lower() in present for c in g) for g in fmt.alternatives)

    best = max(FORMATS, key=score)
    if score(best) < 2:
        raise InputError(
            "not a usage ledger this tool reads",
            source=source,
            fix="give an AWS CUR export (lineItem/... or line_item_... columns), a FOCUS 1.x "
            "export (ChargePeriodStart, ChargeCategory, BilledCost, BillingCurrency, ...) or a "
            "jobs ledger with columns " + ", ".join(FORMATS[0].required) + " and end or hours",
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


def normalise_sql(
    fmt: LedgerFormat,
    cols: SourceColumns,
    dialect: Dialect,
    relation: str,
    tags: Mapping[str, tuple[str, ...]] | None = None,
) -> str:
    """The line items (``USAGE_COLUMNS``) as a SELECT over ``relation``: the one place the
    ledger formats are read. ``tags``: ``tag_map()``'s logical name -> tag keys."""
    fields = fmt.fields(cols, dialect, tags or DEFAULT_TAGS)
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


def _in_week(start: dt.date, end: dt.date) -> str:
    return f"usage_start >= {_timestamp(start)} AND usage_start < {_timestamp(end)}"


def overview_sql(usage: str) -> str:
    """Line items, effective cost and instance-hours per day, currency and reason (NULL: used
    instance usage), every row."""
    return (
        f"WITH usage AS (\n{usage}\n)\n"
        "SELECT CAST(usage_start AS DATE) AS usage_date, currency, reason,\n"
        "  COUNT(*) AS line_items, SUM(effective_cost) AS effective_cost,\n"
        "  SUM(billed_cost) AS billed_cost, SUM(instance_hours) AS instance_hours\n"
        "FROM usage\nGROUP BY CAST(usage_start AS DATE), currency, reason\n"
        "ORDER BY usage_date, currency, reason"
    )


RECONCILE_KEYS = (
    "currency",
    "charge_category",
    "charge_class",
    "reason",
    "provider",
    "service",
    "instance_type",
    "pricing",
    "commitment_status",
)


def reconciliation_sql(usage: str, start: dt.date, end: dt.date) -> str:
    """Every row of the week by currency, charge category and class, reason, provider,
    service, commitment status (and instance type and pricing for instance usage): rows,
    billed / effective / list / contracted cost, and what the sanity checks count."""
    keys = ", ".join(RECONCILE_KEYS)

    def whole(column: str) -> str:
        return f"SUM(CASE WHEN {column} <> 0 AND {column} = ROUND({column}) THEN 1 ELSE 0 END)"

    def nonzero(column: str) -> str:
        return f"SUM(CASE WHEN {column} <> 0 THEN 1 ELSE 0 END)"

    return (
        f"WITH usage AS (\n{usage}\n),\nweek AS (\n"
        "  SELECT currency, charge_category, charge_class, reason, provider, service,\n"
        "    CASE WHEN instance_usage_row THEN instance_type END AS instance_type,\n"
        "    CASE WHEN instance_usage_row THEN pricing END AS pricing,\n"
        "    commitment_status, billed_cost, effective_cost, list_cost, contracted_cost,\n"
        "    instance_hours, bad_tags, bad_sku, bad_cost\n"
        "  FROM (SELECT *, (reason IS NULL OR reason IN ("
        + ", ".join(literal(r) for r in UNUSABLE)
        + ")) AS instance_usage_row FROM usage) AS u\n"
        f"  WHERE {_in_week(start, end)}\n)\n"
        f"SELECT {keys}, COUNT(*) AS line_items,\n"
        "  SUM(billed_cost) AS billed_cost, SUM(effective_cost) AS effective_cost,\n"
        "  SUM(list_cost) AS list_cost, SUM(contracted_cost) AS contracted_cost,\n"
        "  SUM(CASE WHEN list_cost IS NULL THEN 0 ELSE 1 END) AS listed_rows,\n"
        "  SUM(CASE WHEN list_cost IS NULL THEN 0 ELSE effective_cost END) AS listed_effective,\n"
        "  SUM(instance_hours) AS instance_hours,\n"
        "  SUM(CASE WHEN effective_cost > list_cost + 0.005 THEN 1 ELSE 0 END)"
        " AS above_list_rows,\n"
        "  SUM(CASE WHEN effective_cost > list_cost + 0.005 THEN effective_cost - list_cost "
        "ELSE 0 END) AS above_list_cost,\n"
        "  SUM(CASE WHEN instance_hours < 0 THEN 1 ELSE 0 END) AS negative_quantity_rows,\n"
        "  SUM(CASE WHEN bad_tags THEN 1 ELSE 0 END) AS bad_tags_rows,\n"
        "  SUM(CASE WHEN bad_sku THEN 1 ELSE 0 END) AS bad_sku_rows,\n"
        "  SUM(CASE WHEN bad_cost THEN 1 ELSE 0 END) AS bad_cost_rows,\n"
        f"  {whole('effective_cost')} AS whole_effective, {nonzero('effective_cost')}"
        " AS nonzero_effective,\n"
        f"  {whole('billed_cost')} AS whole_billed, {nonzero('billed_cost')} AS nonzero_billed\n"
        f"FROM week\nGROUP BY {keys}\nORDER BY {keys}"
    )


WEEK_KEYS = ("currency", "provider", "service", "job", "team", "instance_type", "pricing", "model")


def week_sql(usage: str, start: dt.date, end: dt.date) -> str:
    """The week's usable instance usage by currency, provider, service, job, team, instance
    type, pricing and model."""
    keys = ", ".join(WEEK_KEYS)
    return (
        f"WITH usage AS (\n{usage}\n)\n"
        f"SELECT {keys}, COUNT(*) AS line_items,\n"
        "  SUM(effective_cost) AS effective_cost, SUM(billed_cost) AS billed_cost,\n"
        "  SUM(list_cost) AS list_cost,\n"
        "  SUM(CASE WHEN list_cost IS NULL THEN instance_hours ELSE 0 END) AS unlisted_hours,\n"
        "  SUM(instance_hours) AS instance_hours, MAX(num_nodes) AS num_nodes,\n"
        "  COUNT(DISTINCT resource_id) AS resources, MAX(local_bsz) AS local_bsz,\n"
        "  SUM(gpu_util * instance_hours) AS util_hours,\n"
        "  SUM(CASE WHEN gpu_util IS NULL THEN 0 ELSE instance_hours END) AS util_known_hours,\n"
        "  MIN(usage_start) AS first_start, MAX(usage_start) AS last_start\n"
        "FROM usage\n"
        f"WHERE reason IS NULL AND {_in_week(start, end)}\n"
        f"GROUP BY {keys}\nORDER BY {keys}"
    )


def negations_sql(usage: str, start: dt.date, end: dt.date) -> str:
    """The week's credits, refunds and commitment negations (reasons ``CREDIT`` and
    ``NEGATION``) by currency and what they can be attributed to: the job and team by their
    own tags, else those of the week's instance usage on the same resource when one job and
    team used it (``UNTAGGED`` where neither says whose they are); the instance type and the
    pricing by the week's instance usage on the same resource, each when that usage had
    exactly one (NULL otherwise: a negation row's own pricing is not its usage's, a CUR's
    savings-plan negation reads as on-demand). Rows, billed and effective cost."""
    untagged = literal(UNTAGGED)
    reasons = ", ".join(literal(r) for r in (CREDIT, NEGATION))

    def only(column: str) -> str:  # the resource's one value of ``column``, else NULL
        return f"CASE WHEN COUNT(DISTINCT {column}) = 1 THEN MIN({column}) END AS {column}"

    return (
        f"WITH usage AS (\n{usage}\n),\nweek AS (\n"
        f"  SELECT * FROM usage WHERE {_in_week(start, end)}\n),\nowner AS (\n"
        "  SELECT resource_id, MIN(job) AS job, MIN(team) AS team FROM week\n"
        f"  WHERE reason IS NULL AND resource_id IS NOT NULL AND job <> {untagged}\n"
        "  GROUP BY resource_id\n"
        "  HAVING COUNT(DISTINCT job) = 1 AND COUNT(DISTINCT team) = 1\n),\nkind AS (\n"
        # tagged or not: what ran on a resource does not depend on whose it was
        f"  SELECT resource_id, {only('instance_type')}, {only('pricing')} FROM week\n"
        "  WHERE reason IS NULL AND resource_id IS NOT NULL\n"
        "  GROUP BY resource_id\n)\n"
        "SELECT n.currency,\n"
        f"  COALESCE(NULLIF(n.job, {untagged}), o.job, {untagged}) AS job,\n"
        f"  COALESCE(NULLIF(n.team, {untagged}), o.team, {untagged}) AS team,\n"
        "  k.instance_type, k.pricing,\n"
        "  COUNT(*) AS line_items, SUM(n.billed_cost) AS billed_cost,\n"
        "  SUM(n.effective_cost) AS effective_cost\n"
        "FROM week AS n LEFT JOIN owner AS o ON n.resource_id = o.resource_id\n"
        "  LEFT JOIN kind AS k ON n.resource_id = k.resource_id\n"
        f"WHERE n.reason IN ({reasons})\n"
        "GROUP BY 1, 2, 3, 4, 5\nORDER BY 1, 2, 3, 4, 5"
    )


def examples_sql(usage: str, start: dt.date, end: dt.date, per_reason: int = 3) -> str:
    """A few unusable rows per reason, as written in the ledger: those of the week and those
    that have no readable date (they belong to no week)."""
    reasons = ", ".join(literal(r) for r in UNUSABLE)
    return (
        f"WITH usage AS (\n{usage}\n),\nbad AS (\n"
        "  SELECT reason, source_file, raw_start, raw_cost, job, instance_type,\n"
        "    ROW_NUMBER() OVER (PARTITION BY reason ORDER BY source_file, raw_start, raw_cost)"
        " AS n\n"
        f"  FROM usage WHERE reason IN ({reasons})\n"
        f"    AND (usage_start IS NULL OR ({_in_week(start, end)}))\n)\n"
        "SELECT reason, source_file, raw_start, raw_cost, job, instance_type FROM bad\n"
        f"WHERE n <= {int(per_reason)} ORDER BY reason, n"
    )
