"""The weekly cost report's content: a week of usage summarised (by team, job, instance family,
pricing), the spend forecast, the recommended configurations' savings, the data-quality table,
and the figures; ``notebooks/04_weekly_cost_report.ipynb`` shows them.

Everything here is a function of small tables the ledger engine already aggregated
(``tables.ledger.WeeklyUsage``); the catalog adds GPU counts and on-demand prices.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from srifty_kit.catalog.query import instance_family, load_catalog
from srifty_kit.decide.savings import SAVINGS_COLUMNS, SLACK, fitted_models, recommend
from srifty_kit.errors import InputError, did_you_mean
from srifty_kit.model.spend import SpendForecast, forecast_next_week
from srifty_kit.tables.files import json_safe
from srifty_kit.tables.ledger import (
    DuckDBLedger,
    LedgerEngine,
    WeeklyUsage,
    jobs_of_week,
    weekly_usage,
)
from srifty_kit.tables.reference import default_measurements, packaged

ENGINES = ("duckdb", "athena")
TOP_JOB_COLUMNS = (
    "job",
    "team",
    "model",
    "instance_type",
    "num_nodes",
    "pricing",
    "wall_hours",
    "node_hours",
    "cost_usd",
    "gpu_util",
)
SAMPLE_LEDGER = "sample_cur_usage.parquet"  # packaged, generated (data/sample_cur_README.md)
SAMPLE_WEEK = "2026-11-23"  # the sample's last full week
SAMPLE_PROFILE = "sample_profile_dist.csv"


def last_full_week(today: dt.date | None = None) -> dt.date:
    """The Monday of the last whole Monday-to-Sunday week before ``today``."""
    today = today or dt.date.today()
    return today - dt.timedelta(days=today.weekday() + 7)


def parse_week(value: str | dt.date | None) -> dt.date:
    """A week's first day from an ISO date (``2026-11-23``); None: the last full week."""
    if value is None or value == "":
        return last_full_week()
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value).strip())
    except ValueError:
        raise InputError(
            f"week_start {value!r} is not an ISO date", column="week_start", fix="e.g. 2026-11-23"
        ) from None


def check_options(engine: str, top_n: int, level: float, slack: float) -> None:
    """Refuse a report option that cannot work, one line each, before any work.

    Raises:
        InputError: an unknown engine, top_n not a whole number >= 1, level outside (0, 1)
            or slack below 0.
    """
    if engine not in ENGINES:
        raise InputError(
            f"unknown engine {engine!r}{did_you_mean(engine, ENGINES)}",
            column="engine",
            fix="use " + " or ".join(ENGINES),
        )
    if isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1:
        raise InputError(f"top_n must be a whole number >= 1, got {top_n!r}", fix="e.g. 10")
    if not 0 < float(level) < 1:
        raise InputError(f"level must be in (0, 1), got {level}", column="level", fix="e.g. 0.9")
    if not float(slack) >= 0:
        raise InputError(f"slack must be >= 0, got {slack}", column="slack", fix="e.g. 0.25")


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


@dataclass
class WeeklyReport:
    """Everything the weekly notebook shows, as tables and numbers."""

    usage: WeeklyUsage
    level: float
    top_n: int
    slack: float  # a recommendation may take this much longer than the job did
    headline: dict[str, Any]
    jobs: pd.DataFrame  # every job of the week, most expensive first
    by_team: pd.DataFrame
    by_family: pd.DataFrame
    by_pricing: pd.DataFrame
    forecast: SpendForecast
    savings: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SAVINGS_COLUMNS))
    savings_note: str = ""

    @property
    def empty(self) -> bool:
        """No usage in the week."""
        return self.usage.empty

    @property
    def top_jobs(self) -> pd.DataFrame:
        """The ``top_n`` most expensive jobs, the columns a reader needs."""
        return self.jobs.head(self.top_n)[list(TOP_JOB_COLUMNS)]

    @property
    def savings_table(self) -> pd.DataFrame:
        """The savings, one readable row per job: how it ran, the recommendation, the saving
        and its interval (or why there is none)."""
        s = self.savings

        def config(nodes: pd.Series, itype: pd.Series, pricing: pd.Series) -> pd.Series:
            text = nodes.map(lambda n: f"{n:.0f} x " if pd.notna(n) else "") + itype.fillna("")
            return (text + " " + pricing.fillna("")).str.strip()

        return pd.DataFrame(
            {
                "job": s["job"],
                "model": s["model"],
                "ran on": config(s["num_nodes"], s["instance_type"], s["pricing"]),
                "hours": s["hours"],
                "paid_usd": s["cost_usd"],
                "recommended": config(s["rec_num_nodes"], s["rec_instance_type"], s["rec_pricing"]),
                "local_bsz": s["rec_local_bsz"],
                "rec_hours": s["rec_hours"],
                "cost_usd": s["rec_cost_usd"],
                "cost_lo_usd": s["rec_cost_lo_usd"],
                "cost_hi_usd": s["rec_cost_hi_usd"],
                "saving_usd": s["saving_usd"],
                "saving_lo_usd": s["saving_lo_usd"],
                "saving_hi_usd": s["saving_hi_usd"],
                "note": s["note"],
            }
        )

    def summary(self) -> dict[str, Any]:
        """The report's numbers as plain JSON types (what the notebook records)."""

        def by(frame: pd.DataFrame, key: str) -> dict[str, float]:
            return {str(k): float(v) for k, v in zip(frame[key], frame["cost_usd"], strict=True)}

        f = self.forecast
        return {
            "week_start": self.usage.week_start.isoformat(),
            "source": self.usage.source,
            "format": self.usage.format,
            **{k: json_safe(v) for k, v in self.headline.items()},
            "by_team": by(self.by_team, "team"),
            "by_family": by(self.by_family, "family"),
            "by_pricing": by(self.by_pricing, "pricing"),
            "by_job": by(self.jobs, "job"),
            "forecast": {
                "total_usd": f.total_usd,
                "lo_usd": f.lo_usd,
                "hi_usd": f.hi_usd,
                "level": f.level,
                "note": f.note,
            },
            "quality": {
                str(r.reason): int(r.rows) for r in self.usage.quality.itertuples(index=False)
            },
            "savings_usd": json_safe(self.savings["saving_usd"].sum(min_count=1)),
        }


def _catalog_column(catalog: pd.DataFrame, types: pd.Series, column: str) -> pd.Series:
    table = catalog.drop_duplicates("instance_type").set_index("instance_type")[column]
    return pd.to_numeric(types.map(table), errors="coerce")


def _headline(usage: WeeklyUsage, jobs: pd.DataFrame, catalog: pd.DataFrame) -> dict[str, Any]:
    lines = usage.lines
    total = float(lines["cost_usd"].sum())
    start = pd.Timestamp(usage.week_start)
    before = usage.daily.loc[
        (usage.daily.index >= start - pd.Timedelta(days=7)) & (usage.daily.index < start),
        "cost_usd",
    ]
    previous = float(before.sum()) if len(before) == 7 else None
    gpus = _catalog_column(catalog, lines["instance_type"], "gpu_count")
    spot = lines["pricing"] == "spot"
    # what the spot hours would have cost on demand: the ledger's list cost where it states
    # one, the catalog's on-demand price for the rest
    ondemand = _catalog_column(catalog, lines["instance_type"], "ondemand_usd_per_hr")
    equivalent = lines["list_cost_usd"].fillna(0.0) + lines["unlisted_hours"] * ondemand
    priced = spot & equivalent.notna()
    util_known = float(jobs["gpu_util"].notna().sum()) if len(jobs) else 0.0
    util = lines["util_hours"].sum() / lines["util_known_hours"].sum() if util_known else None
    return {
        "total_usd": total,
        "previous_week_usd": previous,
        "change_pct": (total / previous - 1.0) * 100.0 if previous else None,
        "node_hours": float(lines["node_hours"].sum()),
        "gpu_hours": float((lines["node_hours"] * gpus).sum()),
        "gpu_hours_unknown_types": sorted(set(lines.loc[gpus.isna(), "instance_type"])),
        "gpu_util": util,
        "jobs": int(lines["job"].nunique()),
        "teams": int(lines["team"].nunique()),
        "spot_usd": float(lines.loc[spot, "cost_usd"].sum()),
        "spot_share": float(lines.loc[spot, "cost_usd"].sum() / total) if total else None,
        "spot_hours_share": (
            float(lines.loc[spot, "node_hours"].sum() / lines["node_hours"].sum())
            if lines["node_hours"].sum()
            else None
        ),
        "spot_saved_usd": float((equivalent[priced] - lines.loc[priced, "cost_usd"]).sum()),
        "spot_unpriced_types": sorted(set(lines.loc[spot & ~priced, "instance_type"])),
    }


def _breakdown(lines: pd.DataFrame, key: str, catalog: pd.DataFrame) -> pd.DataFrame:
    gpus = _catalog_column(catalog, lines["instance_type"], "gpu_count")
    table = lines.assign(
        family=instance_family(lines["instance_type"]),
        gpu_hours=lines["node_hours"] * gpus,
        spot_usd=lines["cost_usd"].where(lines["pricing"] == "spot", 0.0),
    )
    out = table.groupby(key, as_index=False, dropna=False).agg(
        cost_usd=("cost_usd", "sum"),
        node_hours=("node_hours", "sum"),
        gpu_hours=("gpu_hours", "sum"),
        spot_usd=("spot_usd", "sum"),
        jobs=("job", "nunique"),
    )
    total = out["cost_usd"].sum()
    out["share"] = out["cost_usd"] / total if total else np.nan
    return out.sort_values(["cost_usd", key], ascending=[False, True]).reset_index(drop=True)


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
    **athena: str | None,
) -> WeeklyReport:
    """Summarise the week starting ``week_start`` of ``ledger`` (a path, or an engine).

    ``models`` are model files or profiles (``decide.savings.fitted_models``) for the savings;
    None: ``default_model_sources()``; an empty list: no savings section. A recommendation
    must finish within (1 + ``slack``) times the time the job took, at ``level``.
    """
    week = parse_week(week_start)
    check_options(engine, top_n, level, slack)
    source = ledger if hasattr(ledger, "query") else open_ledger(ledger, engine, **athena)
    usage = weekly_usage(source, week)
    catalog = load_catalog() if catalog is None else catalog
    jobs = jobs_of_week(usage.lines)
    report = WeeklyReport(
        usage=usage,
        level=level,
        top_n=top_n,
        slack=slack,
        headline=_headline(usage, jobs, catalog),
        jobs=jobs,
        by_team=_breakdown(usage.lines, "team", catalog),
        by_family=_breakdown(usage.lines, "family", catalog),
        by_pricing=_breakdown(usage.lines, "pricing", catalog),
        forecast=forecast_next_week(usage.daily["cost_usd"], level=level),
    )
    if usage.empty:
        return report
    sources = default_model_sources() if models is None else list(models)
    if not sources:
        report.savings_note = "no models given: savings not computed"
        return report
    fitted = fitted_models(sources)
    known = jobs[jobs["model"].isin(list(fitted))]
    report.savings = recommend(
        known.head(top_n), fitted, catalog, level=level, spot=spot, slack=slack
    )
    others = jobs[~jobs["model"].isin(list(fitted))]
    report.savings_note = (
        f"{len(others)} of {len(jobs)} jobs ({_usd(others['cost_usd'].sum())}) have no fitted "
        "model or profile for their training model (tag user:model / column model)"
        if len(others)
        else ""
    )
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
    forecast with its interval."""
    import seaborn as sns

    ax = _axes(ax)
    daily = report.usage.daily["cost_usd"]
    start = pd.Timestamp(report.usage.week_start)
    shown = daily[daily.index >= start - pd.Timedelta(weeks=weeks - 1)]
    sns.lineplot(x=shown.index, y=shown.to_numpy(), ax=ax, label="daily spend", marker="o")
    ax.axvspan(start, start + pd.Timedelta(days=7), color="0.85", zorder=0, label="this week")
    f = report.forecast
    if f.available:
        ax.plot(f.daily.index, f.daily["mean"], color="C1", label="forecast")
        ax.fill_between(
            f.daily.index,
            f.daily["lo"],
            f.daily["hi"],
            color="C1",
            alpha=0.25,
            label=f"{f.level:.0%} interval",
        )
    ax.set(xlabel="", ylabel="USD per day", title="Daily spend and next week's forecast")
    ax.legend(loc="upper left")
    ax.figure.autofmt_xdate()
    return ax


def breakdown_figure(report: WeeklyReport, axes: Any = None) -> Any:
    """This week's spend by team, by instance family and by pricing (bars)."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, (frame, key, title) in zip(
        axes,
        (
            (report.by_team, "team", "by team"),
            (report.by_family, "family", "by instance family"),
            (report.by_pricing, "pricing", "by pricing"),
        ),
        strict=True,
    ):
        if frame.empty:
            _nothing(ax, "no usage this week")
        else:
            sns.barplot(data=frame, y=key, x="cost_usd", ax=ax, color="C0", orient="h")
        ax.set(xlabel="USD this week", ylabel="", title=title)
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

    columns = ["job", "model", "instance_type", "num_nodes", "pricing", "wall_hours", "cost_usd"]

    def show(team: str) -> None:
        display(report.jobs.loc[report.jobs["team"] == team, columns].reset_index(drop=True))

    teams = list(report.by_team["team"])
    return widgets.interactive(show, team=widgets.Dropdown(options=teams, description="team"))


# --------------------------------------------------------------------------- words


def _usd(value: float | None) -> str:
    """Dollars for markdown: the sign escaped, or two of them would open a formula."""
    return "n/a" if value is None or not np.isfinite(value) else f"\\${value:,.0f}"


def headline_text(report: WeeklyReport) -> str:
    """The week in a few sentences (markdown); says so plainly when there was no usage."""
    u, h = report.usage, report.headline
    week = f"{u.week_start:%a %d %b %Y} to {u.week_end - dt.timedelta(days=1):%a %d %b %Y}"
    source = f"`{Path(u.source).name if '://' not in u.source else u.source}` ({u.format})"
    if report.empty:
        return (
            f"**No usage in the week of {week}** in {source}: no usable EC2 instance usage is "
            "dated in that week. The data-quality table below counts every row the ledger has."
        )
    change = (
        f" ({h['change_pct']:+.1f}% on the week before, {_usd(h['previous_week_usd'])})"
        if h["change_pct"] is not None
        else " (no full week before it to compare with)"
    )
    util = f", {h['gpu_util']:.0%} GPU utilisation where recorded" if h["gpu_util"] else ""
    spot = (
        f"Spot: {h['spot_share']:.0%} of the spend and {h['spot_hours_share']:.0%} of the "
        f"instance-hours; it saved {_usd(h['spot_saved_usd'])} against on-demand prices."
        if h["spot_usd"]
        else "Nothing ran on spot."
    )
    return (
        f"**{_usd(h['total_usd'])}** of EC2 instance usage in the week of {week}{change}, "
        f"from {source}: {h['jobs']} jobs of {h['teams']} teams, "
        f"{h['node_hours']:,.0f} instance-hours and {h['gpu_hours']:,.0f} GPU-hours{util}. " + spot
    )


def forecast_text(report: WeeklyReport) -> str:
    """Next week's forecast with its interval, or why there is none (markdown)."""
    f = report.forecast
    if not f.available:
        return f"**No forecast**: {f.note}."
    return (
        f"**Next week: {_usd(f.total_usd)}** expected, {f.level:.0%} prediction interval "
        f"{_usd(f.lo_usd)} to {_usd(f.hi_usd)} ({f.method})."
    )


def savings_text(report: WeeklyReport) -> str:
    """What the recommended configurations would have saved, with the interval (markdown)."""
    done = report.savings.dropna(subset=["saving_usd"])
    parts = []
    if len(done):
        parts.append(
            f"**{_usd(done['saving_usd'].sum())}** could have been saved on {len(done)} jobs "
            f"(the sum of their {report.level:.0%} intervals: {_usd(done['saving_lo_usd'].sum())}"
            f" to {_usd(done['saving_hi_usd'].sum())}), each on the cheapest configuration sure "
            f"at {report.level:.0%} to finish its work within {1 + report.slack:.3g}x the time "
            "it took."
        )
    elif not report.empty:
        parts.append("No job of the week has a recommendation.")
    if report.savings_note:
        parts.append(report.savings_note[0].upper() + report.savings_note[1:] + ".")
    return " ".join(parts)


def quality_text(report: WeeklyReport) -> str:
    """How many rows were used, excluded and unusable (markdown)."""
    q = report.usage.quality.groupby("kind")["rows"].sum()
    total = int(q.sum())
    return (
        f"{total:,} rows read: {int(q.get('used', 0)):,} used, "
        f"{int(q.get('excluded', 0)):,} excluded as not EC2 instance usage (or commitment "
        f"lines), **{int(q.get('unusable', 0)):,} unusable**, "
        f"{int(q.get('later', 0)):,} dated after the week."
    )
