"""Weekly report speed: DuckDB over the CUR file against pandas (read the whole file, group by),
and the whole report (papermill) on the same 10,000,000-row CUR 2.0 Parquet.

Ours: ``tables.ledger.weekly_usage`` with ``DuckDBLedger`` — the SQL of ``tables.usage_sql``
run in place over the Parquet file (columns, every row's reason, the daily history, the week by
job/team/instance type/pricing/model; DuckDB's default threads).

pandas: the same week the way a pandas user writes it — ``pd.read_parquet`` of the whole file,
the tags map read through ``dict``, the same rules as vectorised column arithmetic, ``groupby``
for the days, the reasons and the week. Both must give the same week (costs, hours, line items
and distinct resources per job/team/type/pricing/model; rows per reason; the daily series) or
the run fails.

Each contender runs in a fresh Python process (wall time of the work itself, not the
interpreter's start; peak resident memory of the process, and what it held before the work),
median of the runs. The whole report is ``srifty report weekly`` end to end as a user runs it
(papermill kernel, the model fits the savings need, nbconvert), with its process tree's peak
memory. Run from the repository root, after ``benchmarks/make_ledger.py --rows 10000000``:

    .venv/bin/python benchmarks/report_speed.py [--ledger reports/benchmarks/data/cur_10m.parquet]

Writes reports/benchmarks/report_speed.md. Timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from common import REPO, markdown_table, write_report

WEEK = dt.date(2026, 11, 23)
DEFAULT_LEDGER = REPO / "reports" / "benchmarks" / "data" / "cur_10m.parquet"
RUNS = {"duckdb": 3, "pandas": 2}


# --------------------------------------------------------------------------- the contenders


def duckdb_week(path: Path) -> dict[str, pd.DataFrame]:
    """Ours: the SQL in place over the file."""
    from srifty_kit.tables.ledger import DuckDBLedger, weekly_usage

    week = weekly_usage(DuckDBLedger(path), WEEK)
    return {
        "lines": week.lines,
        "quality": week.quality,
        "daily": week.daily,
        "reconciliation": week.reconciliation,
    }


INSTANCE_LINES = ("Usage", "SavingsPlanCoveredUsage", "DiscountedUsage")
USAGE_LINES = (*INSTANCE_LINES, "SavingsPlanNegation")
PURCHASE_LINES = ("Fee", "RIFee", "SavingsPlanRecurringFee", "SavingsPlanUpfrontFee")


def pandas_week(path: Path) -> dict[str, pd.DataFrame]:
    """pandas: read the whole file, the same rules column by column, group by."""
    from srifty_kit.tables.ledger import LINE_SCHEMA, canonical
    from srifty_kit.tables.usage_sql import (
        FEE,
        NEGATION,
        OTHER_USAGE,
        PURCHASE,
        TAX,
        UNUSED,
        WEEK_KEYS,
    )

    df = pd.read_parquet(path)
    tags = df.pop("resource_tags").map(dict)  # (key, value) pairs per row
    for tag in ("job", "team", "model", "local_bsz"):
        df[tag] = tags.str.get(f"user_{tag}")
    del tags
    line_type = df["line_item_line_item_type"].fillna("Usage")
    usage_type = df["line_item_usage_type"].fillna("")
    spot = usage_type.str.contains("SpotUsage", regex=False)
    instance = (
        df["line_item_product_code"].fillna("AmazonEC2").eq("AmazonEC2")
        & line_type.isin(INSTANCE_LINES)
        & (spot | usage_type.str.contains("BoxUsage|DedicatedUsage"))
    )
    covered, reserved = line_type.eq("SavingsPlanCoveredUsage"), line_type.eq("DiscountedUsage")
    unblended = df["line_item_unblended_cost"]
    cost = unblended.where(
        ~covered, df["savings_plan_savings_plan_effective_cost"].fillna(unblended)
    ).where(~line_type.eq("SavingsPlanNegation"), 0.0)
    category = np.select(
        [line_type.isin(USAGE_LINES), line_type.isin(PURCHASE_LINES), line_type.eq("Tax")],
        ["Usage", "Purchase", "Tax"],
        "Adjustment",
    )
    itype = df["product_instance_type"].fillna(usage_type.str.split(":").str[1])
    hours = df["line_item_usage_amount"]
    start = pd.to_datetime(df["line_item_usage_start_date"])
    reason = pd.Series(
        np.select(
            [
                ~instance & line_type.eq("Tax"),
                ~instance & line_type.eq("SavingsPlanNegation"),
                ~instance & line_type.isin(["RIFee", "SavingsPlanRecurringFee"]),
                ~instance & line_type.eq("Fee"),  # no commitment ARN columns in this file
                ~instance & line_type.isin(PURCHASE_LINES),
                ~instance,
                start.isna(),
                cost.isna(),
                hours.isna(),
                hours < 0,
                itype.isna(),
            ],
            [
                TAX,
                NEGATION,
                UNUSED,
                FEE,
                PURCHASE,
                OTHER_USAGE,
                "missing or unparseable start date",
                "missing or unparseable cost",
                "missing or unparseable usage hours",
                "negative usage hours",
                "missing instance type",
            ],
            default="",
        ),
        index=df.index,
    )
    table = pd.DataFrame(
        {
            "day": start.dt.floor("D"),
            "reason": reason,
            "currency": "USD",
            "provider": "AWS",
            "service": df["line_item_product_code"].fillna("AmazonEC2"),
            "charge_category": category,
            "job": df["job"].fillna("(untagged)"),
            "team": df["team"].fillna("(untagged)"),
            "instance_type": itype,
            "pricing": np.select(
                [covered, reserved, spot], ["savings-plan", "reserved", "spot"], "on-demand"
            ),
            "model": df["model"],
            "effective_cost": cost,
            "billed_cost": unblended,
            "list_cost": df["pricing_public_on_demand_cost"],
            "instance_hours": hours,
            "resource_id": df["line_item_resource_id"],
            "local_bsz": pd.to_numeric(df["local_bsz"]),
        }
    )
    del df
    end = pd.Timestamp(WEEK) + pd.Timedelta(days=7)
    in_week = (table["day"] >= pd.Timestamp(WEEK)) & (table["day"] < end)
    week = table[in_week]
    quality = week.groupby("reason")["effective_cost"].size()
    reconciliation = week.groupby(["currency", "charge_category"], as_index=False).agg(
        rows=("billed_cost", "size"),
        billed_cost=("billed_cost", "sum"),
        effective_cost=("effective_cost", "sum"),
    )
    used = table[(table["reason"] == "") & (table["day"] < end)]
    days = used.groupby("day")[["effective_cost", "instance_hours"]].sum()
    days = days.rename(columns={"effective_cost": "cost"})
    days = days.reindex(pd.date_range(days.index.min(), end - pd.Timedelta(days=1)), fill_value=0)
    usable = week[week["reason"] == ""]
    usable = usable.assign(unlisted=usable["instance_hours"].where(usable["list_cost"].isna(), 0.0))
    lines = usable.groupby(list(WEEK_KEYS), dropna=False, as_index=False).agg(
        line_items=("effective_cost", "size"),
        effective_cost=("effective_cost", "sum"),
        billed_cost=("billed_cost", "sum"),
        list_cost=("list_cost", "sum"),
        unlisted_hours=("unlisted", "sum"),
        instance_hours=("instance_hours", "sum"),
        resources=("resource_id", "nunique"),
        local_bsz=("local_bsz", "max"),
    )
    return {
        "lines": canonical(lines, LINE_SCHEMA),
        "quality": quality,
        "daily": days,
        "reconciliation": reconciliation,
    }


CONTENDERS = {"duckdb": duckdb_week, "pandas": pandas_week}


def _same_week(ours: dict, theirs: dict) -> None:
    """Fail unless both contenders found the same week."""
    keys = ["job", "team", "instance_type", "pricing", "model"]
    columns = ["line_items", "effective_cost", "billed_cost", "instance_hours", "resources"]
    columns += ["local_bsz"]

    def lines(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.fillna({"model": ""}).set_index(keys)[columns].sort_index()

    pd.testing.assert_frame_equal(
        lines(ours["lines"]), lines(theirs["lines"]), check_exact=False, rtol=1e-9
    )
    q = ours["quality"].groupby("reason")["rows"].sum().sort_index()
    q = q.rename(index={"instance usage (in the job tables)": ""})
    pd.testing.assert_series_equal(
        q.sort_index(), theirs["quality"]["rows"].sort_index(), check_names=False
    )
    r = (
        ours["reconciliation"]
        .groupby(["currency", "charge_category"])
        .agg(
            rows=("line_items", "sum"),
            billed_cost=("billed_cost", "sum"),
            effective_cost=("effective_cost", "sum"),
        )
    )
    mine = theirs["reconciliation"].set_index(["currency", "charge_category"])
    gap = (r[["billed_cost", "effective_cost"]] - mine[["billed_cost", "effective_cost"]]).abs()
    assert (r["rows"] == mine["rows"]).all() and (gap < 0.005).all().all(), (r, mine)

    def daily(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.set_axis(pd.DatetimeIndex(frame.index).astype("datetime64[ns]"))

    pd.testing.assert_frame_equal(
        daily(ours["daily"]), daily(theirs["daily"]), check_exact=False, rtol=1e-9,
        check_names=False, check_freq=False,
    )  # fmt: skip


# --------------------------------------------------------------------------- measuring


def _child(name: str, path: Path, result: Path | None) -> None:
    """Run one contender in this (fresh) process and print its time and memory as JSON."""
    import srifty_kit.tables.ledger  # noqa: F401 - imports are not the work

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    week = CONTENDERS[name](path)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if result is not None:  # for the equality check, in the parent
        result.mkdir(parents=True, exist_ok=True)
        for part, frame in week.items():
            frame = frame.to_frame("rows") if isinstance(frame, pd.Series) else frame
            frame.to_parquet(result / f"{part}.parquet")
    print(json.dumps({"seconds": seconds, "peak_mib": peak, "before_mib": before}))


def _measure(name: str, path: Path, result: Path | None = None) -> dict:
    cmd = [sys.executable, __file__, "--child", name, "--ledger", str(path)]
    if result is not None:
        cmd += ["--result", str(result)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO / "benchmarks")
    if done.returncode != 0:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _whole_report(path: Path) -> dict:
    """``srifty report weekly`` timed end to end, from a fresh process that waits for it (so
    the peak is the report's process tree, not this script's other children)."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, __file__, "--report", "--ledger", str(path), "--result", out]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO / "benchmarks")
        if done.returncode != 0:
            raise SystemExit(f"the report failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _report_child(path: Path, out: Path) -> None:
    srifty = str(Path(sys.executable).with_name("srifty"))
    start = time.perf_counter()
    done = subprocess.run(
        [srifty, "report", "weekly", "--week", WEEK.isoformat(), "--ledger", str(path),
         "--out", str(out), "--quiet"],
        capture_output=True, text=True,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mib": peak}))


def main(argv: list[str] | None = None) -> int:
    """Measure both contenders and the whole report; write the markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledger", type=Path, default=DEFAULT_LEDGER)
    parser.add_argument("--child", choices=sorted(CONTENDERS), help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--report", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.report:
        _report_child(args.ledger, args.result)
        return 0
    if args.child:
        _child(args.child, args.ledger, args.result)
        return 0
    if not args.ledger.is_file():
        raise SystemExit(f"{args.ledger} is missing: run benchmarks/make_ledger.py first")
    import pyarrow.parquet as pq

    load_before = os.getloadavg()[0]
    rows = pq.ParquetFile(args.ledger).metadata.num_rows
    size_mib = args.ledger.stat().st_size / 2**20
    with tempfile.TemporaryDirectory() as scratch:
        weeks = {n: Path(scratch) / n for n in CONTENDERS}
        runs = {n: [_measure(n, args.ledger, weeks[n])] for n in CONTENDERS}
        _same_week(*({p.stem: pd.read_parquet(p) for p in weeks[n].iterdir()} for n in CONTENDERS))
    for name, count in RUNS.items():
        runs[name] += [_measure(name, args.ledger) for _ in range(count - 1)]
    report = _whole_report(args.ledger)
    load_after = os.getloadavg()[0]
    load = f"{load_before:.1f} at the start, {load_after:.1f} at the end"
    busy = max(load_before, load_after) > (os.cpu_count() or 1)
    load += " (above the CPU count: other work competed)" if busy else ""

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    ours_s, ours_mib = median("duckdb", "seconds"), median("duckdb", "peak_mib")
    table = pd.DataFrame(
        [
            {
                "contender": label,
                "wall time (s)": f"{median(n, 'seconds'):.2f}",
                "time / ours": f"{median(n, 'seconds') / ours_s:.1f}x",
                "peak memory (MiB)": f"{median(n, 'peak_mib'):,.0f}",
                "memory / ours": f"{median(n, 'peak_mib') / ours_mib:.1f}x",
                "held before the work (MiB)": f"{median(n, 'before_mib'):,.0f}",
                "runs": len(runs[n]),
            }
            for n, label in (
                ("duckdb", "ours: DuckDB SQL in place over the Parquet file"),
                ("pandas", "pandas: read the whole file, group by"),
            )
        ]
    )
    cpus = os.cpu_count()
    text = f"""# Weekly report speed: DuckDB against pandas, and the whole report

Written by `benchmarks/report_speed.py` (run it to refresh these figures).

Input: `{args.ledger.relative_to(REPO) if args.ledger.is_relative_to(REPO) else args.ledger}`,
{rows:,} CUR 2.0 line items ({size_mib:,.0f} MiB of Parquet, a year of GENERATED usage from
`benchmarks/make_ledger.py`); the week of {WEEK:%Y-%m-%d}; this machine has {cpus} CPUs, shared:
its 1-minute load average was {load}.

## The week's aggregation

Every row's reason, the daily history, the reconciliation of every row of the week (by
currency and charge category, billed and effective cost) and the week by job, team, instance
type, pricing and model; both contenders found the same week (checked in the run: the
reconciliation to the cent). Each ran in a fresh process;
the median of its runs; peak memory is the process's peak resident set.

{markdown_table(table)}

## The whole report

`srifty report weekly --week {WEEK} --ledger ... --out ...` end to end as a user runs it:
parameters checked, a papermill kernel started, the DuckDB queries, the forecast, the model fits
and searches of the savings, the figures, nbconvert to HTML.

| what | wall time (s) | peak memory of its largest process (MiB) |
| --- | --- | --- |
| whole report, {rows:,} rows | {report["seconds"]:.1f} | {report["peak_mib"]:,.0f} |

Goals (design.md): the aggregation at least 10x faster than pandas; the whole report under a
minute on 2 cores.
"""
    print(table.to_string(index=False))
    print(f"whole report: {report['seconds']:.1f} s")
    write_report("report_speed", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
