"""The weekly cost report's content: a week of a usage ledger reconciled to its bill (every row
by currency and charge category, billed and effective cost), the part of it that is training
compute and why the rest is not, commitments (coverage, utilisation, waste, effective savings
rate), the week by team, job, instance family and pricing, the spend forecast, the recommended
configurations' savings, the data-quality table with its sanity checks, and the figures;
``notebooks/04_weekly_cost_report.ipynb`` shows them.

Costs are never added across currencies: every table carries its currency and the headline is
one line per currency. The headline's figure is the effective (amortised) cost, the billed
cost beside it. Everything here is a function of small tables the ledger engine already
aggregated (``tables.ledger.WeeklyUsage``); the EC2 catalog (and a GPU catalog the user gives
for other providers' types) adds GPU counts and on-demand prices.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from srifty_kit.catalog.query import instance_family, load_catalog
from srifty_kit.decide.savings import (
    SAVINGS_COLUMNS,
    SLACK,
    fitted_models,
    recommend,
    saving_draws,
    total_interval,
)
from srifty_kit.errors import InputError, check_level, did_you_mean, is_whole
from srifty_kit.present.spend import SpendForecast, forecast_next_week
from srifty_kit.tables.files import json_safe, read_table
from srifty_kit.tables.ledger import (
    DuckDBLedger,
    LedgerEngine,
    WeeklyUsage,
    jobs_of_week,
    weekly_usage,
)
from srifty_kit.tables.reference import default_measurements, packaged
from srifty_kit.tables.usage_sql import (
    NEGATION,
    PURCHASE,
    UNTAGGED,
    UNUSABLE,
    UNUSED,
    tag_map,
)

ENGINES = ("duckdb", "athena")
TOP_JOB_COLUMNS = (
    "job",
    "team",
    "model",
    "provider",
    "instance_type",
    "num_nodes",
    "pricing",
    "wall_hours",
    "instance_hours",
    "effective_cost",
    "billed_cost",
    "gpu_util",
)
SAMPLE_LEDGER = "sample_cur_usage.parquet"  # packaged, generated (data/sample_cur_README.md)
SAMPLE_WEEK = "2026-11-23"  # the sample's last full week
SAMPLE_PROFILE = "sample_profile_dist.csv"
# the report's numbers in the summary cell's output, for machines; a vendor type, so that
# JupyterLab (which ranks application/json above markdown) and the HTML show the headline
SUMMARY_MIME = "application/vnd.srifty.weekly-summary+json"
TRAINING = "training compute (instance usage on GPU or accelerator types)"
CPU_ONLY = "instance usage on CPU-only types"
UNKNOWN_GPUS = "instance usage of types with an unknown GPU count"


def last_full_week(today: dt.date | None = None) -> dt.date:
    """The Monday of the last whole Monday-to-Sunday week before ``today``."""
    today = today or dt.date.today()
    return today - dt.timedelta(days=today.weekday() + 7)


def parse_week(value: str | dt.date | None) -> dt.date:
    """The Monday of the week holding ``value`` (an ISO date such as ``2026-11-23``); None:
    the last full week. A day other than a Monday means its Monday-to-Sunday week
    (``week_note`` says so in the report).

    Raises:
        InputError: the text is not an ISO date.
    """
    if value is None or value == "":
        return last_full_week()
    if isinstance(value, dt.datetime):
        value = value.date()
    if not isinstance(value, dt.date):
        try:
            value = dt.date.fromisoformat(str(value).strip())
        except ValueError:
            raise InputError(
                f"week_start {value!r} is not an ISO date",
                column="week_start",
                fix="e.g. 2026-11-23",
            ) from None
    return value - dt.timedelta(days=value.weekday())


def week_note(value: str | dt.date | None) -> str:
    """'' for a Monday (or no date); else the sentence saying which week a day stands for."""
    if value is None or value == "":
        return ""
    day = value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value).strip())
    if isinstance(day, dt.datetime):
        day = day.date()
    if day.weekday() == 0:
        return ""
    monday = parse_week(day)
    return (
        f"{day:%Y-%m-%d} is a {day:%A}: the report covers its Monday-to-Sunday week, "
        f"{monday:%a %Y-%m-%d} to {monday + dt.timedelta(days=6):%a %Y-%m-%d}"
    )


def check_options(engine: str, top_n: int, level: float, slack: float) -> None:
    """Refuse a report option that cannot work, one line each, before any work.

    Raises:
        InputError: an unknown engine, top_n not a whole number >= 1 (``errors.is_whole``:
            3.0 counts, True does not), level outside (0, 1) or slack below 0.
    """
    if engine not in ENGINES:
        raise InputError(
            f"unknown engine {engine!r}{did_you_mean(engine, ENGINES)}",
            column="engine",
            fix="use " + " or ".join(ENGINES),
        )
    if not is_whole(top_n):  # 3.0 and numpy's 3 are a count, as every other count's rule
        raise InputError(f"top_n must be a whole number >= 1, got {top_n!r}", fix="e.g. 10")
    check_level(level, column="level")
    if not float(slack) >= 0:
        raise InputError(f"slack must be >= 0, got {slack}", column="slack", fix="e.g. 0.25")


def read_gpu_catalog(path: str | os.PathLike | None) -> pd.DataFrame:
    """A catalog of other providers' instance types and their GPU counts (a CSV, Parquet or
    JSON table with ``instance_type`` and ``gpu_count``), or an empty one.

    Raises:
        InputError: the file cannot be read or lacks those columns, or a count is not a
            whole number >= 0.
    """
    if path is None or path == "":
        return pd.DataFrame({"instance_type": [], "gpu_count": []})
    table = read_table(path)
    missing = [c for c in ("instance_type", "gpu_count") if c not in table.columns]
    if missing:
        raise InputError(
            f"the GPU catalog has no column {missing[0]!r}"
            + did_you_mean(missing[0], [str(c) for c in table.columns]),
            source=str(path),
            column=missing[0],
            fix="give a table with instance_type and gpu_count",
        )
    counts = pd.to_numeric(table["gpu_count"], errors="coerce")
    bad = counts.isna() | (counts < 0) | (counts != counts.round())
    if bad.any():
        raise InputError(
            f"gpu_count {table['gpu_count'][bad].iloc[0]!r} is not a whole number >= 0",
            source=str(path),
            column="gpu_count",
            fix="give each type's GPU count (0 for none)",
        )
    return pd.DataFrame({"instance_type": table["instance_type"].astype(str), "gpu_count": counts})


def open_ledger(
    ledger: str | os.PathLike | None = None,
    engine: str = "duckdb",
    *,
    athena_database: str | None = None,
    athena_table: str | None = None,
    athena_output: str | None = None,
    athena_workgroup: str | None = None,
    aws_profile: str | None = None,
    aws_region: str | None = None,
) -> LedgerEngine:
    """The ledger's engine: DuckDB over local files (default: the packaged sample CUR), or
    Athena over a table in S3."""
    if engine == "athena":
        from srifty_kit.tables.athena import AthenaLedger

        return AthenaLedger(
            athena_database or "",
            athena_table or "",
            athena_output,
            workgroup=athena_workgroup,
            profile=aws_profile,
            region=aws_region,
        )
    if engine != "duckdb":
        raise InputError(
            f"unknown engine {engine!r}", column="engine", fix="use " + " or ".join(ENGINES)
        )
    return DuckDBLedger(ledger if ledger else packaged(SAMPLE_LEDGER))


def default_model_sources() -> list[str]:
    """Where fitted models come from when none are given: the measurements the notebooks
    start from (the team's EC2 reference when present) and the packaged sample profile."""
    sources = [str(default_measurements())]
    sample = packaged(SAMPLE_PROFILE)
    if sample.is_file() and str(sample) not in sources:
        sources.append(str(sample))
    return sources


def _finite(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if np.isfinite(value) else None


@dataclass
class WeeklyReport:
    """Everything the weekly notebook shows, as tables and numbers."""

    usage: WeeklyUsage
    level: float
    top_n: int
    slack: float  # a recommendation may take this much longer than the job did
    headline: dict[str, dict[str, Any]]  # currency -> the week's figures
    reconciliation: pd.DataFrame  # currency, charge_category: rows, billed, effective
    compute: pd.DataFrame  # currency, part, provider, service: why each row is or is not compute
    commitments: pd.DataFrame  # currency: coverage, utilisation, unused, effective savings rate
    checks: pd.DataFrame  # the sanity checks and the focus-validator's findings
    jobs: pd.DataFrame  # every tagged job of the week, most expensive first
    by_team: pd.DataFrame
    by_family: pd.DataFrame
    by_pricing: pd.DataFrame
    forecast: SpendForecast
    week_note: str = ""
    savings: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SAVINGS_COLUMNS))
    savings_note: str = ""
    # the total saving's own ends at ``level`` (decide.savings.total_interval), not the sum of
    # the jobs' ends: NaN without a saving
    savings_lo_usd: float = np.nan
    savings_hi_usd: float = np.nan

    @property
    def empty(self) -> bool:
        """No instance usage in the week."""
        return self.usage.empty

    @property
    def currency(self) -> str:
        """The currency most of the week's instance usage is billed in."""
        return self.usage.currency

    @property
    def top_jobs(self) -> pd.DataFrame:
        """The ``top_n`` most expensive jobs in each currency, the columns a reader needs."""
        jobs = self.jobs.groupby("currency", sort=False).head(self.top_n)
        return jobs[["currency", *TOP_JOB_COLUMNS]].reset_index(drop=True)

    @property
    def team_table(self) -> pd.DataFrame:
        """``by_team`` (billed net of each team's credits and negations), and per currency
        the lines that make its columns add up to the week's bill: the credits and negations
        of no team (``NO_TEAM``: neither their tags nor their resource's usage say whose) and
        the rest of the bill (``REST_OF_BILL``); each only where it has rows. Its billed and
        effective columns sum to the reconciliation's, per currency."""
        return self._up_to_the_bill(self.by_team, "team", NO_TEAM)

    @property
    def family_table(self) -> pd.DataFrame:
        """``by_family`` (billed net of the credits and negations on each family's
        resources), then, as ``team_table``, the credits and negations of no one family
        (``NO_FAMILY``: on no resource, or on one whose instance usage that week was not of
        exactly one instance type) and the rest of the bill: its columns add up to the
        reconciliation's, per currency, as the team table's do."""
        return self._up_to_the_bill(self.by_family, "family", NO_FAMILY)

    @property
    def pricing_table(self) -> pd.DataFrame:
        """``by_pricing`` (billed net of the credits and negations on resources that ran at
        that pricing alone), then, as ``team_table``, those of no one pricing
        (``NO_PRICING``) and the rest of the bill: its columns add up to the
        reconciliation's, per currency."""
        return self._up_to_the_bill(self.by_pricing, "pricing", NO_PRICING)

    def _up_to_the_bill(self, frame: pd.DataFrame, key: str, loose_name: str) -> pd.DataFrame:
        """``frame`` (a breakdown by ``key``, billed net of its negations) and per currency a
        line of the negations attributed to none of its rows (``loose_name``) and one of the
        rest of the bill (``REST_OF_BILL``), each only where it has rows.

        The rest's billed and effective cost are what the reconciliation holds beyond the
        rows and the loose line, so the columns add up to it whatever the key; the effective
        cost of a credit attributed to a row is in the rest (``net_of_negations`` says why).
        """
        parts = []
        neg = attributed(self.usage.negations)
        for currency, whole in self.reconciliation.groupby("currency", sort=True):
            rows = frame[frame["currency"] == currency]
            mine = neg[neg["currency"] == currency]
            # NaN (no one type or pricing) is in no set: those rows are loose
            loose = mine[~mine[key].isin(set(rows[key]) - {UNTAGGED})]
            used = self.usage.lines.loc[self.usage.lines["currency"] == currency, "line_items"]
            loose_billed, loose_effective = (
                loose["billed_cost"].sum(),
                loose["effective_cost"].sum(),
            )
            rest = whole["rows"].sum() - used.sum() - mine["line_items"].sum()
            lines = [
                (loose_name, len(loose) > 0, loose_billed, loose_effective),
                (
                    REST_OF_BILL,
                    rest > 0,
                    whole["billed_cost"].sum() - rows["billed_cost"].sum() - loose_billed,
                    whole["effective_cost"].sum() - rows["effective_cost"].sum() - loose_effective,
                ),
            ]
            extra = [
                {"currency": currency, key: name, "billed_cost": b, "effective_cost": e}
                for name, shown, b, e in lines
                if shown
            ]
            parts += [rows, pd.DataFrame(extra, columns=list(frame.columns))]
        parts = [p for p in parts if len(p)]
        if not parts:
            return frame.copy()
        return pd.concat(parts, ignore_index=True)[list(frame.columns)]

    @property
    def savings_table(self) -> pd.DataFrame:
        """The savings, one readable row per job: how it ran, the recommendation (``keep as
        is:`` and why where the job's own configuration is, or ``none:`` and what is missing
        where there is none), its hours and cost, and the saving with its interval at
        ``level``.

        Narrow enough for a mailed page: the recommendation's cost interval is left to the
        savings figure (its error bars), and the reason there is no recommendation stands
        where the recommendation would, not in a last column a reader never scrolls to.

        Returns:
            One row per checked job: ``job``, ``model``, ``ran on``, ``hours``, ``paid_usd``,
            ``recommended``, ``local_bsz``, ``rec_hours``, ``cost_usd``, ``saving_usd``,
            ``saving_lo_usd``, ``saving_hi_usd``; the numbers are NaN where there is no
            recommendation.
        """
        s = self.savings

        def config(nodes: pd.Series, itype: pd.Series, pricing: pd.Series) -> pd.Series:
            text = nodes.map(lambda n: f"{n:.0f} x " if pd.notna(n) else "") + itype.fillna("")
            return (text + " " + pricing.fillna("")).str.strip()

        picked = s["rec_instance_type"].notna()
        kept = s["keep"].fillna(False).astype(bool)
        recommended = config(s["rec_num_nodes"], s["rec_instance_type"], s["rec_pricing"])
        recommended = recommended.where(~kept, "keep as is: " + s["note"].fillna(""))
        return pd.DataFrame(
            {
                "job": s["job"],
                "model": s["model"],
                "ran on": config(s["num_nodes"], s["instance_type"], s["pricing"]),
                "hours": s["hours"],
                "paid_usd": s["cost_usd"],
                "recommended": recommended.where(picked, "none: " + s["note"].fillna("")),
                "local_bsz": s["rec_local_bsz"],
                "rec_hours": s["rec_hours"],
                "cost_usd": s["rec_cost_usd"],
                "saving_usd": s["saving_usd"],
                "saving_lo_usd": s["saving_lo_usd"],
                "saving_hi_usd": s["saving_hi_usd"],
            }
        )

    def summary(self) -> dict[str, Any]:
        """The report's numbers as plain JSON types (what the notebook records and
        ``weekly_cost_<week>.json`` holds): the headline per currency, the reconciliation
        (every row of the week by currency and charge category), the compute split, the
        commitments, the checks, and the week by team, family, pricing and job. Each
        currency's headline holds ``instance_hours`` and, for readers of older summaries, the
        same number under its former name ``node_hours``."""

        def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
            return json_safe(frame.to_dict("records"))

        def by(frame: pd.DataFrame, key: str) -> dict[str, dict[str, float]]:
            out: dict[str, dict[str, float]] = {}
            for row in frame.itertuples(index=False):
                out.setdefault(row.currency, {})[str(getattr(row, key))] = _finite(
                    row.effective_cost
                )
            return out

        f = self.forecast
        quality = self.usage.quality.groupby("reason")["rows"].sum()
        return json_safe(
            {
                "week_start": self.usage.week_start.isoformat(),
                "week_end": (self.usage.week_end - dt.timedelta(days=1)).isoformat(),
                "week_note": self.week_note,
                "source": self.usage.source,
                "format": self.usage.format,
                "cost_basis": "effective_cost is amortised (commitments spread over the usage "
                "they cover); billed_cost is what the invoice charges",
                "currency": self.currency,
                # node_hours: the published name of instance_hours until this release, kept
                # beside it (the same number) for readers of older summaries
                "headline": {
                    c: {**h, "node_hours": h["instance_hours"]} for c, h in self.headline.items()
                },
                "rows": self.usage.rows,
                "reconciliation": records(self.reconciliation),
                "compute": records(self.compute),
                "commitments": records(self.commitments),
                "checks": records(self.checks),
                "outside_week": records(self.usage.outside),
                "tags": {k: list(v) for k, v in self.usage.tags.items()},
                "by_team": by(self.by_team, "team"),
                "by_family": by(self.by_family, "family"),
                "by_pricing": by(self.by_pricing, "pricing"),
                "by_job": by(self.jobs, "job"),
                "forecast": {
                    "currency": self.currency,
                    "total": f.total_usd,
                    "lo": f.lo_usd,
                    "hi": f.hi_usd,
                    "level": f.level,
                    "calibrated": f.calibrated,
                    "scale": f.scale,
                    "calibration_weeks": f.calibration_weeks,
                    "model_lo": f.model_lo_usd,
                    "model_hi": f.model_hi_usd,
                    "note": f.note,
                },
                "quality": {str(k): int(v) for k, v in quality.items()},
                "savings_usd": self.savings["saving_usd"].sum(min_count=1),
                "savings_lo_usd": self.savings_lo_usd,
                "savings_hi_usd": self.savings_hi_usd,
            }
        )


# --------------------------------------------------------------------------- computations


def gpu_counts(
    types: pd.Series, catalog: pd.DataFrame, gpu_catalog: pd.DataFrame | None = None
) -> pd.Series:
    """GPUs per instance of each type: from ``gpu_catalog`` (other providers' types, as the
    user gives them) first, then the EC2 catalog; NaN where neither knows the type."""
    tables = [gpu_catalog] if gpu_catalog is not None and len(gpu_catalog) else []
    tables.append(catalog[["instance_type", "gpu_count"]])
    known = pd.concat(tables, ignore_index=True).drop_duplicates("instance_type")
    table = pd.to_numeric(known.set_index("instance_type")["gpu_count"], errors="coerce")
    return pd.to_numeric(types.map(table), errors="coerce")


def reconciliation_table(usage: WeeklyUsage) -> pd.DataFrame:
    """Every row of the week by currency and charge category: rows, billed and effective cost
    (their sum per currency is the week's billed, resp. effective, total) and ``corrections``
    (how many of those rows carry a ChargeClass: corrections of an earlier period)."""
    r = usage.reconciliation
    out = r.groupby(["currency", "charge_category"], as_index=False).agg(
        rows=("line_items", "sum"),
        billed_cost=("billed_cost", "sum"),
        effective_cost=("effective_cost", "sum"),
        corrections=("charge_class", lambda s: 0),
    )
    corrections = (
        r[r["charge_class"].notna()].groupby(["currency", "charge_category"])["line_items"].sum()
    )
    out["corrections"] = [
        int(corrections.get((c, k), 0))
        for c, k in zip(out["currency"], out["charge_category"], strict=True)
    ]
    order = {"Usage": 0, "Purchase": 1, "Credit": 2, "Tax": 3, "Adjustment": 4}
    out["order"] = out["charge_category"].map(order).fillna(9)
    out = out.sort_values(["currency", "order"]).drop(columns="order").reset_index(drop=True)
    return out[
        ["currency", "charge_category", "rows", "billed_cost", "effective_cost", "corrections"]
    ]


def compute_split(
    usage: WeeklyUsage, catalog: pd.DataFrame, gpu_catalog: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The week's rows split into training compute (instance usage on GPU/accelerator types,
    by provider and service) and everything else with the reason it is not; per currency the
    parts add up to the reconciliation's totals. ``instance_hours`` and ``gpu_hours`` count
    instance usage only: empty (NaN, shown as a dash) on the parts that are not instance usage
    (other services, tax, credits, purchases), whose usage quantities are not hours."""
    r = usage.reconciliation.copy()
    used = r["reason"].isna()
    gpus = gpu_counts(r["instance_type"], catalog, gpu_catalog)
    part = r["reason"].copy().astype(object)
    part[used & (gpus > 0)] = TRAINING
    part[used & (gpus == 0)] = CPU_ONLY
    part[used & gpus.isna()] = UNKNOWN_GPUS
    unusable = r["reason"].isin(list(UNUSABLE))
    part[unusable] = "unusable instance usage: " + r.loc[unusable, "reason"]
    per_type = used | unusable
    # hours are instance-hours only on instance usage: another service's usage quantity (GB
    # of storage, of transfer) is in its own unit, and no hours at all (shown empty)
    hours = r["instance_hours"].where(per_type)
    r = r.assign(
        part=part,
        provider=r["provider"].where(per_type, ""),
        service=r["service"].where(per_type, ""),
        instance_hours=hours,
        gpu_hours=hours * gpus,
    )
    out = r.groupby(["currency", "part", "provider", "service"], as_index=False).agg(
        rows=("line_items", "sum"),
        billed_cost=("billed_cost", "sum"),
        effective_cost=("effective_cost", "sum"),
        instance_hours=("instance_hours", lambda s: s.sum(min_count=1)),
        gpu_hours=("gpu_hours", lambda s: s.sum(min_count=1)),
    )
    unknown = (
        r[used & gpus.isna()]
        .groupby("currency")["instance_type"]
        .agg(lambda s: ", ".join(sorted(set(s.dropna()))))
    )
    out["types"] = [
        unknown.get(c, "") if p == UNKNOWN_GPUS else ""
        for c, p in zip(out["currency"], out["part"], strict=True)
    ]
    out["order"] = out["part"].map({TRAINING: 0, CPU_ONLY: 1, UNKNOWN_GPUS: 2}).fillna(3)
    out = out.sort_values(["currency", "order", "effective_cost"], ascending=[True, True, False])
    return out.drop(columns="order").reset_index(drop=True)


def commitment_table(usage: WeeklyUsage) -> pd.DataFrame:
    """Per currency: coverage (covered eligible instance usage / eligible usage, at on-demand
    prices), utilisation (used / (used + unused) commitment), the unused commitment's cost
    (waste), the commitments' purchases billed (their fees: upfront, recurring; a fee of no
    commitment, such as support, is no commitment's), and the effective savings rate of
    compute ((list - effective - unused) / list, over instance usage whose list cost the
    ledger states). Where commitments covered usage but the week has no commitment fee row
    to read the unused part from, the unused part is unknown, and so are utilisation, waste
    and the savings rate (None): not a made-up 100% and $0. Where no row states a list cost
    (a jobs ledger), ``list_cost`` is unknown (None), not $0."""
    r = usage.reconciliation
    rows = []
    for currency, g in r.groupby("currency"):
        used_lines = g[g["reason"].isna()]
        on_demand = used_lines["list_cost"].fillna(0) + (
            used_lines["effective_cost"].where(used_lines["listed_rows"] == 0, 0).fillna(0)
        )
        eligible = used_lines["pricing"].isin(["on-demand", "savings-plan", "reserved"])
        covered = used_lines["pricing"].isin(["savings-plan", "reserved"])
        used = float(g.loc[g["commitment_status"] == "Used", "effective_cost"].sum())
        # no row stating a list cost (a jobs ledger, an export without pricing columns) leaves
        # it unknown: a $0.00 would read as free usage beside a savings rate of —
        listed: float | None = (
            float(used_lines["list_cost"].sum()) if used_lines["listed_rows"].sum() else None
        )
        listed_effective = float(used_lines["listed_effective"].sum())
        eligible_total = float(on_demand[eligible].sum())
        # the unused part is read off the commitments' fee rows (a support fee is none): without
        # any, it is unknown, not zero (the fee is billed in another account or not exported)
        commitment_rows = g["reason"].isin([PURCHASE, UNUSED])
        fees = bool(commitment_rows.any())
        unused: float | None = float(g.loc[g["reason"] == UNUSED, "effective_cost"].sum())
        if not fees and used > 0:
            unused = None
        purchases = commitment_rows & (g["charge_category"] == "Purchase")
        rows.append(
            {
                "currency": currency,
                "coverage": float(on_demand[covered].sum()) / eligible_total
                if eligible_total
                else None,
                "utilisation": used / (used + unused)
                if unused is not None and fees and used + unused > 0
                else None,
                "used_commitment": used,
                "unused_commitment": unused,
                "purchases_billed": float(g.loc[purchases, "billed_cost"].sum()),
                "negations_billed": float(g.loc[g["reason"] == NEGATION, "billed_cost"].sum()),
                "list_cost": listed,
                "effective_savings_rate": (listed - listed_effective - unused) / listed
                if listed is not None and listed > 0 and unused is not None
                else None,
            }
        )
    return pd.DataFrame(
        rows,
        columns=[
            "currency",
            "coverage",
            "utilisation",
            "used_commitment",
            "unused_commitment",
            "purchases_billed",
            "negations_billed",
            "list_cost",
            "effective_savings_rate",
        ],
    )


def sanity_checks(
    usage: WeeklyUsage,
    compute: pd.DataFrame,
    findings: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """The data-quality checks of the week (check, currency, rows, cost, detail): effective
    above list, cost columns that look rounded, negative quantities, unreadable cells, every
    unusable row by reason with its cost, types of unknown GPU count, rows outside the week,
    and the focus-validator's findings."""
    r = usage.reconciliation
    out: list[dict[str, Any]] = []

    def add(check: str, currency: str, rows: int, cost: float | None, detail: str) -> None:
        out.append(
            {
                "check": check,
                "currency": currency,
                "rows": int(rows),
                "cost": cost,
                "detail": detail,
            }
        )

    for currency, g in r.groupby("currency"):
        if g["above_list_rows"].sum():
            add(
                "effective cost above list cost",
                currency,
                g["above_list_rows"].sum(),
                float(g["above_list_cost"].sum()),
                "cost: by how much effective exceeds list (a rounded or mis-mapped column?)",
            )
        for column, whole, nonzero in (
            ("EffectiveCost", "whole_effective", "nonzero_effective"),
            ("BilledCost", "whole_billed", "nonzero_billed"),
        ):
            n, k = int(g[nonzero].sum()), int(g[whole].sum())
            if n >= 5 and k == n:
                add(
                    f"{column} looks rounded",
                    currency,
                    n,
                    None,
                    f"all {n} non-zero values are whole numbers: the export may round costs",
                )
        for column, label in (
            ("negative_quantity_rows", "negative usage quantities"),
            ("bad_tags_rows", "tags cell is not valid JSON (read as untagged)"),
            ("bad_sku_rows", "SKU details cell is not valid JSON (no instance type)"),
            ("bad_cost_rows", "cost cell is not a finite number (read as missing)"),
        ):
            if g[column].sum():
                add(label, currency, g[column].sum(), None, "")
        for reason, bad in g[g["reason"].isin(list(UNUSABLE))].groupby("reason"):
            add(
                f"unusable: {reason}",
                currency,
                bad["line_items"].sum(),
                float(bad["effective_cost"].sum()),
                "in the reconciliation, not in the job tables",
            )
    for row in compute[compute["part"] == UNKNOWN_GPUS].itertuples(index=False):
        add(
            "unknown GPU count",
            row.currency,
            row.rows,
            _finite(row.effective_cost),
            f"types: {row.types} (give --gpu-catalog with their gpu_count)",
        )
    for row in usage.outside.itertuples(index=False):
        add(
            f"outside the week: {row.reason}",
            row.currency,
            row.rows,
            _finite(row.effective_cost),
            "",
        )
    if findings is not None:
        for row in findings.itertuples(index=False):
            add(row.check, "", row.rows, None, row.detail)
    return pd.DataFrame(out, columns=["check", "currency", "rows", "cost", "detail"])


def _headline(
    usage: WeeklyUsage,
    jobs: pd.DataFrame,
    compute: pd.DataFrame,
    catalog: pd.DataFrame,
    gpu_catalog: pd.DataFrame | None,
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    r = usage.reconciliation
    start = pd.Timestamp(usage.week_start)
    for currency in sorted(set(r["currency"])):
        week = r[r["currency"] == currency]
        lines = usage.lines[usage.lines["currency"] == currency]
        parts = (
            compute[compute["currency"] == currency]
            .groupby("part")[["effective_cost", "billed_cost"]]
            .sum()
        )
        gpus = gpu_counts(lines["instance_type"], catalog, gpu_catalog)
        spot = lines["pricing"] == "spot"
        instance = float(lines["effective_cost"].sum())
        tagged = lines[lines["job"] != UNTAGGED]
        h: dict[str, Any] = {
            "effective_cost": float(week["effective_cost"].sum()),
            "billed_cost": float(week["billed_cost"].sum()),
            "rows": int(week["line_items"].sum()),
            "instance_effective_cost": instance,
            "instance_billed_cost": float(lines["billed_cost"].sum()),
            "training_effective_cost": float(parts["effective_cost"].get(TRAINING, 0.0)),
            "training_billed_cost": float(parts["billed_cost"].get(TRAINING, 0.0)),
            "untagged_effective_cost": float(
                lines.loc[lines["job"] == UNTAGGED, "effective_cost"].sum()
            ),
            "instance_hours": float(lines["instance_hours"].sum()),
            "gpu_hours": float((lines["instance_hours"] * gpus).sum()),
            "gpu_hours_unknown_types": sorted(set(lines.loc[gpus.isna(), "instance_type"])),
            "jobs": int(tagged["job"].nunique()),
            "teams": int(lines.loc[lines["team"] != UNTAGGED, "team"].nunique()),
            "providers": sorted(set(lines["provider"])),
            "spot_effective_cost": float(lines.loc[spot, "effective_cost"].sum()),
            "spot_share": float(lines.loc[spot, "effective_cost"].sum() / instance)
            if instance > 0
            else None,
            "previous_week_instance_cost": None,
            "change_pct": None,
        }
        if currency == usage.currency:
            daily = usage.daily
            before = daily.loc[
                (daily.index >= start - pd.Timedelta(days=7)) & (daily.index < start), "cost"
            ]
            previous = float(before.sum()) if len(before) == 7 else None
            h["previous_week_instance_cost"] = previous
            if previous is not None and previous > 0 and np.isfinite(instance):
                h["change_pct"] = (instance / previous - 1.0) * 100.0
            known = lines["util_known_hours"].sum()
            h["gpu_util"] = float(lines["util_hours"].sum() / known) if known > 0 else None
        out[currency] = h
    return out


NO_TEAM = "(credits and negations of no team)"
NO_FAMILY = "(credits and negations of no one instance family)"
NO_PRICING = "(credits and negations of no one pricing)"
REST_OF_BILL = "(the rest of the bill: other services, tax, fees, purchases, unusable rows)"


def attributed(negations: pd.DataFrame) -> pd.DataFrame:
    """``WeeklyUsage.negations`` with the instance family of the type each is attributed to
    (``family``; NaN where its resource's usage had no one instance type).

    Args:
        negations: ``WeeklyUsage.negations`` (``tables.ledger.NEGATION_SCHEMA``).

    Returns:
        A copy with a ``family`` column, the key ``net_of_negations`` nets ``by_family`` on.
    """
    types = negations["instance_type"]
    return negations.assign(family=instance_family(types).where(types.notna()))


def net_of_negations(frame: pd.DataFrame, negations: pd.DataFrame, key: str) -> pd.DataFrame:
    """``frame`` (a row per currency and ``key``) with ``billed_cost`` net of the credits,
    refunds and commitment negations attributed to that key (``WeeklyUsage.negations``: the
    job and team by their tags or their resource's usage, the type and pricing by their
    resource's usage).

    Only the billed cost is netted: a commitment negation's effective cost is 0 (the covered
    usage already carries its amortised cost), and the effective cost of the rows stays that
    of their usage, the figure the breakdown figure, the shares and the summary give; a
    credit's own effective cost is on the table's rest-of-the-bill line
    (``WeeklyReport.team_table``), so the column still adds up.

    Args:
        frame: the jobs or a breakdown by team, family or pricing, with currency, ``key``
            and billed_cost.
        negations: ``WeeklyUsage.negations``, through ``attributed`` for ``family``.
        key: "job", "team", "family" or "pricing": a column of both. The untagged row takes
            none (whose they are is unknown), and negations attributed to no ``key``
            (``UNTAGGED``, or NaN where their resource's usage had no one type or pricing)
            net into no row.

    Returns:
        A copy; negations whose key has no row here are left out (``WeeklyReport``'s
        ``team_table``, ``family_table`` and ``pricing_table`` show them on a line of their
        own).
    """
    mine = negations[negations[key].notna() & (negations[key] != UNTAGGED)]
    got = mine.groupby(["currency", key])["billed_cost"].sum()
    pairs = zip(frame["currency"], frame[key], strict=True)
    add = np.array([float(got.get(pair, 0.0)) for pair in pairs])
    return frame.assign(billed_cost=frame["billed_cost"] + (add if len(add) else 0.0))


def _breakdown(
    lines: pd.DataFrame, key: str, catalog: pd.DataFrame, gpu_catalog: pd.DataFrame | None
) -> pd.DataFrame:
    gpus = gpu_counts(lines["instance_type"], catalog, gpu_catalog)
    table = lines.assign(
        family=instance_family(lines["instance_type"]),
        gpu_hours=lines["instance_hours"] * gpus,
        spot_cost=lines["effective_cost"].where(lines["pricing"] == "spot", 0.0),
        tagged_job=lines["job"].where(lines["job"] != UNTAGGED),
    )
    out = table.groupby(["currency", key], as_index=False, dropna=False).agg(
        effective_cost=("effective_cost", "sum"),
        billed_cost=("billed_cost", "sum"),
        instance_hours=("instance_hours", "sum"),
        gpu_hours=("gpu_hours", lambda s: s.sum(min_count=1)),
        spot_cost=("spot_cost", "sum"),
        jobs=("tagged_job", "nunique"),
    )
    totals = out.groupby("currency")["effective_cost"].transform("sum")
    out["share"] = (out["effective_cost"] / totals).where(totals > 0)
    out = out.sort_values(["currency", "effective_cost", key], ascending=[True, False, True])
    return out.reset_index(drop=True)


def weekly_report(
    week_start: str | dt.date | None = None,
    ledger: str | os.PathLike | LedgerEngine | None = None,
    *,
    engine: str = "duckdb",
    top_n: int = 10,
    models: Sequence[str | os.PathLike] | None = None,
    level: float = 0.9,
    spot: bool = True,
    slack: float = SLACK,
    catalog: pd.DataFrame | None = None,
    tags: Mapping[str, str | Sequence[str]] | None = None,
    gpu_catalog: str | os.PathLike | None = None,
    validate: bool = True,
    **athena: str | None,
) -> WeeklyReport:
    """Summarise the week holding ``week_start`` (its Monday to Sunday) of ``ledger`` (a
    path, or an engine).

    Args:
        week_start: a day of the week (ISO text or a date); None: the last full week, or,
            for the packaged sample (``ledger`` None with duckdb), its last week
            (``SAMPLE_WEEK``): the generated data ends there, and a later week is empty.
        ledger: the ledger's file or folder, or a ``LedgerEngine``; None: the packaged sample.
        engine, athena: duckdb (local files) or athena (with athena_database, athena_table...).
        top_n: jobs in the top-jobs and savings tables (per currency): a whole number >= 1.
        models: model files or profiles (``decide.savings.fitted_models``) for the savings;
            None: ``default_model_sources()``; an empty list: no savings section.
        level, spot, slack: a recommendation must finish within (1 + ``slack``) times the
            time the job took, at ``level``; ``spot`` lets it use spot.
        catalog: the EC2 catalog (default: the embedded one).
        tags: logical tag (job, team, model, local_bsz) -> the ledger's tag key(s).
        gpu_catalog: a table of other providers' instance types and their gpu_count.
        validate: run focus-validator over a local FOCUS export.

    Returns:
        The ``WeeklyReport``.

    Raises:
        InputError: a bad option, tag mapping, GPU catalog or ledger (one line).
    """
    sample = ledger is None and engine == "duckdb"
    if sample and (week_start is None or week_start == ""):
        # the notebook's defaults: a first-time user would meet an empty report once the
        # sample's last week is no longer the last full one
        week_start = SAMPLE_WEEK
    week = parse_week(week_start)
    check_options(engine, top_n, level, slack)
    top_n = int(top_n)  # 3.0 would head(3.0) and say "the 3.0 costliest"
    tag_keys = tag_map(tags)
    extra = read_gpu_catalog(gpu_catalog)
    source = ledger if hasattr(ledger, "query") else open_ledger(ledger, engine, **athena)
    usage = weekly_usage(source, week, tag_keys)
    catalog = load_catalog() if catalog is None else catalog
    findings = None
    if validate and usage.format == "focus" and isinstance(source, DuckDBLedger):
        from srifty_kit.tables.focus_check import validate_focus

        findings = validate_focus(source.files)
    # billed as the invoice nets it: each job's credits and negations on its own row
    negations = attributed(usage.negations)
    jobs = net_of_negations(jobs_of_week(usage.lines), negations, "job")

    def breakdown(key: str) -> pd.DataFrame:  # so that each adds up to the same bill
        return net_of_negations(_breakdown(usage.lines, key, catalog, extra), negations, key)

    compute = compute_split(usage, catalog, extra)
    report = WeeklyReport(
        usage=usage,
        level=level,
        top_n=top_n,
        slack=slack,
        headline=_headline(usage, jobs, compute, catalog, extra),
        reconciliation=reconciliation_table(usage),
        compute=compute,
        commitments=commitment_table(usage),
        checks=sanity_checks(usage, compute, findings),
        jobs=jobs,
        by_team=breakdown("team"),
        by_family=breakdown("family"),
        by_pricing=breakdown("pricing"),
        forecast=forecast_next_week(usage.daily["cost"], level=level),
        week_note=week_note(week_start),
    )
    if usage.empty:
        return report
    sources = default_model_sources() if models is None else list(models)
    if not sources:
        report.savings_note = "no models given: savings not computed"
        return report
    fitted = fitted_models(sources)
    # the catalog's prices are AWS's in USD: only such jobs can be compared with them
    aws = jobs[(jobs["currency"] == "USD") & (jobs["provider"] == "AWS")]
    known = aws[aws["model"].isin(list(fitted))].assign(cost_usd=lambda j: j["effective_cost"])
    report.savings = recommend(
        known.head(top_n), fitted, catalog, level=level, spot=spot, slack=slack
    )
    draws = saving_draws(report.savings, fitted, catalog, level=level)
    report.savings_lo_usd, report.savings_hi_usd = total_interval(draws, level)
    others = jobs[~jobs.index.isin(known.index)]
    notes = []
    if len(known) > top_n:  # the total is of the jobs checked, not of every job it could be
        notes.append(
            f"savings were checked for the {top_n} costliest of the {len(known)} jobs that "
            f"have a model (top_n); the other {len(known) - top_n} were not checked"
        )
    if len(others):
        notes.append(
            f"{len(others)} of {len(jobs)} jobs have no fitted model or profile for their "
            "training model (tag user:model / column model), or ran outside AWS or not in USD"
        )
    report.savings_note = "; ".join(notes)
    return report


# --------------------------------------------------------------------------- figures


def _axes(ax: Any, size: tuple[float, float] = (9, 4)) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=size)[1]


def _nothing(ax: Any, text: str) -> Any:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set(xticks=[], yticks=[])
    return ax


def spend_figure(report: WeeklyReport, weeks: int = 8, ax: Any = None) -> Any:
    """Daily spend of the last ``weeks`` weeks, the report's week shaded, and next week's
    forecast with each day's interval, calibrated as the week's total is (``forecast_text``)
    or, with too little history, the model's own, as the legend (beside the axes) says."""
    import seaborn as sns

    ax = _axes(ax)
    daily = report.usage.daily["cost"]
    start = pd.Timestamp(report.usage.week_start)
    shown = daily[daily.index >= start - pd.Timedelta(weeks=weeks - 1)]
    sns.lineplot(x=shown.index, y=shown.to_numpy(), ax=ax, label="daily spend", marker="o")
    ax.axvspan(start, start + pd.Timedelta(days=7), color="0.85", zorder=0, label="this week")
    f = report.forecast
    if f.available:
        whose = "calibrated" if f.daily_calibrated else "the model's"
        ax.plot(f.daily.index, f.daily["mean"], color="C1", label="forecast")
        ax.fill_between(
            f.daily.index,
            f.daily["lo"],
            f.daily["hi"],
            color="C1",
            alpha=0.25,
            label=f"{whose} {f.level:.0%} interval of a day",
        )
    ax.set(
        xlabel="",
        ylabel=f"{report.currency} per day (effective cost)",
        title="Daily instance spend and next week's forecast",
    )
    # beside the axes: inside, the legend hid the history's highest days
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    ax.figure.autofmt_xdate()
    return ax


def breakdown_figure(report: WeeklyReport, axes: Any = None) -> Any:
    """This week's instance spend (effective cost, the main currency) by team, by instance
    family and by pricing (bars)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(13, 4))

    def main(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[frame["currency"] == report.currency]

    for ax, (frame, key, title) in zip(
        axes,
        (
            (main(report.by_team), "team", "by team"),
            (main(report.by_family), "family", "by instance family"),
            (main(report.by_pricing), "pricing", "by pricing"),
        ),
        strict=True,
    ):
        if frame.empty:
            _nothing(ax, "no usage this week")
        else:
            sns.barplot(data=frame, y=key, x="effective_cost", ax=ax, color="C0", orient="h")
        ax.set(xlabel=f"{report.currency} this week (effective)", ylabel="", title=title)
    axes[0].figure.tight_layout()
    return axes


def savings_figure(report: WeeklyReport, ax: Any = None) -> Any:
    """Per job: what it paid and what the recommended configuration would have cost, with
    the recommendation's cost interval."""
    ax = _axes(ax, (9, 0.5 + 0.45 * max(1, len(report.savings))))
    rows = report.savings.dropna(subset=["rec_cost_usd"]).iloc[::-1]
    if rows.empty:
        return _nothing(ax, "no job with a recommendation this week")
    y = np.arange(len(rows))
    ax.barh(y + 0.2, rows["cost_usd"], height=0.4, color="C0", label="paid")
    ax.barh(y - 0.2, rows["rec_cost_usd"], height=0.4, color="C2", label="recommended")
    ax.errorbar(
        rows["rec_cost_usd"],
        y - 0.2,
        xerr=[
            rows["rec_cost_usd"] - rows["rec_cost_lo_usd"],
            rows["rec_cost_hi_usd"] - rows["rec_cost_usd"],
        ],
        fmt="none",
        ecolor="black",
        capsize=3,
        label=f"{report.level:.0%} interval",
    )
    ax.set_yticks(y, rows["job"])
    ax.set(xlabel="USD for the week's work", title="Paid and on the recommended configuration")
    ax.legend(loc="lower right")
    return ax


def team_explorer(report: WeeklyReport) -> Any:
    """A dropdown of teams showing each team's jobs (for a person exploring the report)."""
    import ipywidgets as widgets
    from IPython.display import display

    columns = ["job", "model", "instance_type", "num_nodes", "pricing", "wall_hours"]
    columns += ["currency", "effective_cost"]

    def show(team: str) -> None:
        from IPython.display import HTML

        jobs = report.jobs.loc[report.jobs["team"] == team, columns]
        display(HTML(table_html(jobs, "effective cost, in each row's currency")))

    teams = sorted(set(report.by_team["team"]) - {UNTAGGED})
    return widgets.interactive(show, team=widgets.Dropdown(options=teams, description="team"))


# --------------------------------------------------------------------------- words and tables


def money(value: Any, currency: str = "USD", markdown: bool = True) -> str:
    """An amount for a reader: cents under 1,000, whole units above; ``n/a`` when unknown.
    USD as a dollar sign (escaped in markdown, or two would open a formula), others by code."""
    value = _finite(value)
    if value is None:
        return "n/a"
    text = f"{abs(value):,.2f}" if abs(value) < 1000 else f"{abs(value):,.0f}"
    sign = "-" if value < 0 and text.strip("0.,") else ""
    if currency == "USD":
        dollar = "\\$" if markdown else "$"
        return f"{sign}{dollar}{text}"
    return f"{sign}{text} {currency}"


def _cell(value: Any, kind: str, currency: str) -> str:
    if kind == "money":
        return money(value, currency, markdown=False) if _finite(value) is not None else "—"
    if isinstance(value, float | int | np.floating | np.integer) and not isinstance(value, bool):
        number = _finite(value)
        if number is None:
            return "—"
        if kind == "share":
            return f"{number:.1%}"
        if kind == "int":
            return f"{number:,.0f}"
        return f"{number:,.2f}" if abs(number) < 1000 else f"{number:,.0f}"
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NaT:
        return "—"
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "—"
    # an empty text (no provider for a tax row, no unknown type) is drawn as the dash every
    # other empty cell is: a blank cell reads as a value the report failed to print
    return str(value) if str(value).strip() else "—"


MONEY_COLUMNS = (
    "effective_cost",
    "billed_cost",
    "list_cost",
    "cost",
    "spot_cost",
    "used_commitment",
    "unused_commitment",
    "purchases_billed",
    "negations_billed",
)
SHARE_COLUMNS = ("share", "coverage", "utilisation", "effective_savings_rate", "gpu_util")
INT_COLUMNS = ("rows", "jobs", "line_items", "corrections", "num_nodes", "local_bsz")


def table_html(frame: pd.DataFrame, note: str, currency: str | None = None) -> str:
    """A table for the report: no index, money in its row's currency (a column named
    ``..._usd`` in USD; cents under 1,000), shares as percentages, '—' for unknown or empty
    (never None, NaN or a blank cell), out of MathJax's reach, and a line under it saying
    which cost column and currency it shows."""
    from html import escape

    rows = []
    for _, row in frame.iterrows():
        cur = str(row.get("currency") or currency or "USD")
        cells = {}
        for name in frame.columns:
            # a column named in its unit (paid_usd, saving_lo_usd) is money in that currency
            in_usd = str(name).endswith("_usd")
            kind = (
                "money"
                if name in MONEY_COLUMNS or in_usd
                else "share"
                if name in SHARE_COLUMNS
                else "int"
                if name in INT_COLUMNS
                else "number"
            )
            cells[name] = _cell(row[name], kind, "USD" if in_usd else cur)
        rows.append(cells)
    shown = pd.DataFrame(rows, columns=list(frame.columns))
    if shown.empty:
        body = "<p><em>(no rows)</em></p>"
    else:
        body = shown.style.hide(axis="index").to_html()
    # a cell may hold two amounts (a reason with a probe's cost and saving): MathJax would
    # read the text between their dollar signs as a formula (``prose`` says more)
    body = f'<div class="tex2jax_ignore mathjax_ignore">{body}</div>'
    return f'{body}<p class="srifty-table-note">{escape(note)}</p>'


def headline_text(report: WeeklyReport) -> str:
    """The week in a few sentences per currency (markdown); says so plainly when there was no
    instance usage."""
    u = report.usage
    week = f"{u.week_start:%a %d %b %Y} to {u.week_end - dt.timedelta(days=1):%a %d %b %Y}"
    source = f"`{Path(u.source).name if '://' not in u.source else u.source}` ({u.format})"
    parts = [f"_{report.week_note}._"] if report.week_note else []
    if not report.headline:
        parts.append(
            f"**No usage in the week of {week}** in {source}: the ledger has no row dated in "
            "that week. The data-quality table below counts the rows outside it."
        )
        return "\n\n".join(parts)
    if report.empty:
        parts.append(
            f"**No usage in the week of {week}** in {source}: no usable instance usage is "
            "dated in that week; the reconciliation below still shows every row of the week."
        )
    for currency, h in report.headline.items():
        c = currency

        def m(value: Any, c: str = c) -> str:
            return money(value, c)

        line = (
            f"**{currency}: {m(h['effective_cost'])} effective cost** (amortised; "
            f"{m(h['billed_cost'])} billed) over {h['rows']:,} rows of the week of {week}, "
            f"from {source}. Training compute (instance usage on GPU types): "
            f"{m(h['training_effective_cost'])} effective; all instance usage "
            f"{m(h['instance_effective_cost'])}"
        )
        if h.get("change_pct") is not None:
            line += (
                f" ({h['change_pct']:+.1f}% on the week before, "
                f"{m(h['previous_week_instance_cost'])})"
            )
        elif currency == report.currency and not report.empty:
            line += " (no full week before it to compare with)"
        line += (
            f", {h['jobs']} tagged jobs of {h['teams']} teams, {h['instance_hours']:,.1f} "
            f"instance-hours and {h['gpu_hours']:,.1f} GPU-hours"
        )
        if h["gpu_hours_unknown_types"]:
            line += f" (GPU count unknown for {', '.join(h['gpu_hours_unknown_types'])})"
        if h.get("gpu_util"):
            line += f", {h['gpu_util']:.0%} GPU utilisation where recorded"
        line += "."
        if h["untagged_effective_cost"]:
            line += f" Untagged instance usage: {m(h['untagged_effective_cost'])}."
        if h["spot_effective_cost"] and h["spot_share"] is not None:
            line += f" Spot: {h['spot_share']:.0%} of the instance spend."
        line += _unbilled_commitment(report.commitments, currency)
        parts.append(line)
    return "\n\n".join(parts)


def _unbilled_commitment(commitments: pd.DataFrame, currency: str) -> str:
    """The sentence saying why billed is below effective where commitments covered usage but
    no fee row of theirs is in the ledger (``commitment_table``'s unknown unused part); ''
    elsewhere."""
    row = commitments[commitments["currency"] == currency]
    if row.empty or row["unused_commitment"].notna().iloc[0]:
        return ""
    used = _finite(row["used_commitment"].iloc[0])
    if not used:
        return ""
    # a finance reader compares the two totals first: the gap is the covered usage's
    # effective cost, whose fee the ledger does not hold, and says where to look for it
    return (
        f" Billed leaves out the commitments' fees: they covered {money(used, currency)} of "
        "usage (at effective cost), but no fee row of theirs is in this ledger (billed in "
        "another account, or not exported), hence billed below effective; their utilisation "
        "and waste below are unknown for the same reason."
    )


def prose(markdown: str) -> str:
    """Markdown of the report's sentences as it is displayed: each paragraph in a span that
    MathJax leaves alone (classes ``mathjax_ignore``, for JupyterLab's MathJax 3, and
    ``tex2jax_ignore``, for the HTML export's MathJax 2).

    ``money`` escapes its dollar sign, but JupyterLab's markdown turns ``\\$`` into a bare
    ``$`` before MathJax reads the page, which then drew "$110.24 to $160.94" as an italic
    formula. The span is inline HTML, so the paragraph's own markdown still renders.

    Args:
        markdown: one or more paragraphs (``headline_text``, ``forecast_text``, ...).

    Returns:
        The same paragraphs, each wrapped; '' stays ''.
    """
    return "\n\n".join(
        f'<span class="tex2jax_ignore mathjax_ignore">{part}</span>' if part.strip() else part
        for part in markdown.split("\n\n")
    )


def headline_output(report: WeeklyReport) -> dict[str, Any]:
    """The summary cell's output, for ``display(..., raw=True)``: the headline for a person
    and the report's numbers for machines, in one bundle.

    The numbers travel under ``SUMMARY_MIME``, a type no front end renders: under
    ``application/json`` JupyterLab drew them as a JSON tree in the headline's place.

    Args:
        report: the weekly report.

    Returns:
        {"text/markdown": ``headline_text`` (as ``prose``), ``SUMMARY_MIME``:
        ``WeeklyReport.summary``}.
    """
    return {"text/markdown": prose(headline_text(report)), SUMMARY_MIME: report.summary()}


def forecast_text(report: WeeklyReport) -> str:
    """Next week's forecast with its interval and how the interval was calibrated (or that
    there was too little history to check it, and then no promise of its level), or why
    there is no forecast, and whether the spend has stopped (a week or more without any).

    Args:
        report: the weekly report.

    Returns:
        Markdown, one paragraph.
    """
    f = report.forecast
    if not f.available:
        return f"**No forecast**: {f.note}."
    c = report.currency
    text = f"**Next week: {money(f.total_usd, c)}** expected (instance usage, effective cost, {c})"
    if f.calibrated:
        text += (
            f", {f.level:.0%} prediction interval {money(f.lo_usd, c)} to "
            f"{money(f.hi_usd, c)} ({f.method}). The interval is calibrated on the model's own "
            f"past errors: forecasting each of the last {f.calibration_weeks} seven-day "
            f"stretches of this history from the days before it, the model's interval had to "
            f"be {f.scale:.2f} times as wide to hold {f.level:.0%} of their actual totals, so "
            f"next week's is the model's own ({money(f.model_lo_usd, c)} to "
            f"{money(f.model_hi_usd, c)}) made {f.scale:.2f} times as wide."
        )
    elif f.method == "constant daily spend":
        text += f", exactly ({f.method})."
    else:
        text += (
            f"; the model's interval is {money(f.lo_usd, c)} to {money(f.hi_usd, c)} "
            f"({f.method}), but it is not a promise of {f.level:.0%}: there is too little "
            f"history to check it against the model's past errors ({f.calibration_weeks} past "
            f"weeks to forecast, {f.calibration_needed} needed), and unchecked intervals "
            "like it have held fewer weeks than they claim."
        )
    if f.idle_days >= 7:  # a stopped spend: its forecast falls towards zero as it stays so
        text += (
            f" Nothing was spent on instances in the last {f.idle_days} days; the forecast "
            "weighs them against the weeks before."
        )
    return text


def savings_text(report: WeeklyReport) -> str:
    """What the recommended configurations would have saved, with the total's own ends at the
    report's level (``WeeklyReport.savings_lo_usd`` / ``savings_hi_usd``; markdown)."""
    done = report.savings.dropna(subset=["saving_usd"])
    kept = int(done["keep"].fillna(False).astype(bool).sum())
    done = done[~done["keep"].fillna(False).astype(bool)]
    parts = []
    if len(done):
        parts.append(
            f"**{money(done['saving_usd'].sum())}** could have been saved on {len(done)} jobs "
            f"({report.level:.0%} sure of at least {money(report.savings_lo_usd)}, "
            f"{report.level:.0%} sure of at most {money(report.savings_hi_usd)}: the total's "
            "own ends, from the model's joint draws, where jobs on one instance type share its "
            f"error), each on the cheapest configuration sure at {report.level:.0%} to finish "
            f"its work within {1 + report.slack:.3g}x the time it took (USD, effective cost)."
        )
    elif not report.empty:
        parts.append("No job of the week has a recommendation to change how it ran.")
    if kept:
        said = "1 job is best kept as it" if kept == 1 else f"{kept} jobs are best kept as they"
        parts.append(f"{said} ran (the table says why, and which measurement would decide it).")
    if report.savings_note:
        parts.append(report.savings_note[0].upper() + report.savings_note[1:] + ".")
    return " ".join(parts)


def quality_text(report: WeeklyReport) -> str:
    """How many of the week's rows were used, excluded and unusable, and how many rows lie
    outside the week (markdown)."""
    q = report.usage.quality.groupby("kind")["rows"].sum()
    total = int(q.sum())
    outside = report.usage.outside.groupby("reason")["rows"].sum()
    text = (
        f"The week has {total:,} rows: {int(q.get('used', 0)):,} instance usage in the job "
        f"tables, {int(q.get('excluded', 0)):,} other charges (each reason below), "
        f"**{int(q.get('unusable', 0)):,} unusable**."
    )
    if len(outside):
        text += (
            " Outside the week: "
            + ", ".join(f"{int(n):,} {reason}" for reason, n in outside.items())
            + "."
        )
    return text
