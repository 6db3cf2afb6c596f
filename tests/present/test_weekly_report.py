"""The weekly cost report: its forecast and savings, and the notebook run for real (papermill
with the python3 kernel, nbconvert to HTML) agreeing with the ledger's own aggregation."""

from __future__ import annotations

import datetime as dt
import json
import re
import warnings

import nbformat
import numpy as np
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from srifty_kit.catalog.query import load_catalog
from srifty_kit.decide.savings import recommend, saving_draws, total_interval
from srifty_kit.errors import InputError
from srifty_kit.model.estimator import StepTimeModel
from srifty_kit.present.reports import (
    ReportBusy,
    ReportFailed,
    ReportStopped,
    run_report,
    run_weekly_report,
    weekly_parameters,
)
from srifty_kit.present.spend import MIN_DAYS, forecast_next_week
from srifty_kit.present.weekly import SUMMARY_MIME, last_full_week, parse_week, week_note
from srifty_kit.tables.usage_sql import OTHER_USAGE, TAX
from tests.builders import (
    AWS_SECRETS,
    LEDGER_WEEK,
    REPO,
    cur_frame,
    fake_aws_env,
    jobs_ledger_frame,
    synthetic_measurements,
    usage_hours,
    write_cur,
    write_cur_parquet,
)

WEEK = dt.date.fromisoformat(LEDGER_WEEK)


# --------------------------------------------------------------------------- the forecast


def daily_spend(days: int, seed: int = 0) -> pd.Series:
    rng = np.random.default_rng(seed)
    index = pd.date_range("2026-08-03", periods=days, freq="D")  # a Monday
    weekday = np.where(index.day_of_week < 5, 1000.0, 250.0)
    return pd.Series(weekday + 3.0 * np.arange(days) + rng.normal(0, 40, days), index=index)


def test_the_forecast_interval_holds_its_point_and_follows_the_working_week():
    f = forecast_next_week(daily_spend(84), level=0.9)
    assert f.available and f.lo_usd < f.total_usd < f.hi_usd
    assert (f.daily["lo"] <= f.daily["mean"]).all() and (f.daily["mean"] <= f.daily["hi"]).all()
    weekdays = f.daily[f.daily.index.day_of_week < 5]["mean"]
    weekend = f.daily[f.daily.index.day_of_week >= 5]["mean"]
    assert weekdays.min() > weekend.max()
    # a wider level gives a wider interval around the same point
    wide = forecast_next_week(daily_spend(84), level=0.99)
    assert wide.lo_usd < f.lo_usd and wide.hi_usd > f.hi_usd
    assert wide.total_usd == pytest.approx(f.total_usd)


def test_too_short_a_history_gives_no_forecast_and_says_why():
    f = forecast_next_week(daily_spend(MIN_DAYS - 1))
    assert not f.available and f.total_usd is None
    assert "history too short" in f.note and str(MIN_DAYS) in f.note


def test_spend_never_forecast_below_zero():
    falling = pd.Series(
        np.linspace(500, 5, 28), index=pd.date_range("2026-09-07", periods=28, freq="D")
    )
    f = forecast_next_week(falling)
    assert f.lo_usd >= 0 and (f.daily[["mean", "lo", "hi"]] >= 0).all().all()


def test_a_spend_that_dropped_to_zero_is_forecast_near_zero_in_dollars():
    # a team spending ~$5,500 a week that stopped two weeks ago: with additive errors the
    # interval stayed thousands of dollars wide; errors in proportion to the spend shrink it
    spend = daily_spend(84)
    spend.iloc[-14:] = 0.0
    f = forecast_next_week(spend, level=0.9)
    assert f.available and f.idle_days == 14
    assert 0 <= f.model_lo_usd <= f.total_usd <= f.model_hi_usd < 55.0  # under 1% of a week
    assert (f.daily["model_hi"] < 15.0).all()
    # the shown interval and days' band are calibrated on the weeks the model just missed as
    # the spend stopped: wider, still under 10% of a working week and of a working day
    assert 0 <= f.lo_usd <= f.total_usd <= f.hi_usd < 550.0
    assert f.daily_calibrated and (f.daily["hi"] < 100.0).all()
    # a spend that carries on keeps a model interval proportionate to it
    going = forecast_next_week(daily_spend(84), level=0.9)
    model_width = going.model_hi_usd - going.model_lo_usd
    assert going.idle_days == 0 and model_width > 10 * (f.model_hi_usd - f.model_lo_usd)


def test_the_report_of_a_stopped_spend_says_so_beside_a_forecast_near_zero():
    from srifty_kit.present.weekly import forecast_text, weekly_report

    # the packaged sample's spend ends on Sunday 2026-11-29: the week of 2026-12-07 is its
    # second without spend
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly_report("2026-12-07", REPO / "data" / "sample_cur_usage.parquet")
    f = report.forecast
    assert f.available and f.idle_days == 14
    # the sample spent ~$2,000 a week; with additive errors this read $569, $0 to $1,833
    # (calibrated on the weeks the model missed as the spend stopped, the upper end is wider)
    assert 0 <= f.lo_usd <= f.total_usd <= f.hi_usd < 400.0
    text = forecast_text(report)
    assert "Nothing was spent on instances in the last 14 days" in text
    assert "-\\$" not in text and "n/a" not in text


def test_a_spend_that_stopped_keeps_its_point_inside_its_interval():
    # the packaged sample CUR's spend ends in November 2026; the weeks after it have none. Each
    # simulated day clipped at zero before the week was summed put the week's lower end above
    # the point ($0.72 expected, interval $28.76 to $722.83 for the week of 2028-01-03)
    from srifty_kit.tables.ledger import DuckDBLedger, weekly_usage

    ledger = DuckDBLedger(REPO / "data" / "sample_cur_usage.parquet")
    for week in (dt.date(2028, 1, 3), dt.date(2030, 1, 7)):
        f = forecast_next_week(weekly_usage(ledger, week).daily["cost"])
        assert f.available and f.lo_usd <= f.total_usd <= f.hi_usd, (week, f)
        assert f.lo_usd == 0.0  # nothing was spent for a year: nothing is a likely week


# --------------------------------------------------------------------------- the savings


@pytest.fixture(scope="module")
def resnet_model(tmp_path_factory) -> StepTimeModel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(synthetic_measurements())
    path = tmp_path_factory.mktemp("model") / "resnet.json"
    model.save(path)
    model.path_ = path
    return model


def a_job(**changes) -> dict:
    job = {
        "job": "train",
        "model": "resnet",
        "instance_type": "g4dn.12xlarge",
        "num_nodes": 2.0,
        "pricing": "on-demand",
        "wall_hours": 5.0,
        "cost_usd": 3.912 * 2 * 5.0,
        "local_bsz": 32.0,
    }
    return {**job, **changes}


def test_the_saving_is_what_was_paid_less_the_recommendation_within_its_interval(resnet_model):
    jobs = pd.DataFrame([a_job(), a_job(job="spot-run", pricing="spot", cost_usd=14.0)])
    out = recommend(jobs, {"resnet": resnet_model}, load_catalog(), level=0.9)
    assert (out["note"] == "").all()
    for row in out.itertuples():
        assert row.rec_cost_lo_usd <= row.rec_cost_usd <= row.rec_cost_hi_usd
        assert row.saving_usd == pytest.approx(row.cost_usd - row.rec_cost_usd)
        assert row.saving_lo_usd <= row.saving_usd <= row.saving_hi_usd
        assert row.rec_local_bsz == 32  # the job's own per-worker batch
        assert row.rec_num_workers * 32 <= 2 * 4 * 32  # the global batch never grows
    assert (out["rec_hours"] > 0).all() and (out["samples"] > 0).all()
    # within the deadline at its upper end, so at its point too: 1.25x the 5 h it took
    assert (out["rec_hours"] <= 1.25 * 5.0).all()


def test_a_job_nothing_else_is_sure_to_beat_is_kept_as_it_ran_and_says_what_would_decide(
    resnet_model,
):
    # the fastest type in the model already, no slack and no more nodes than it ran on: its
    # own time is the deadline, and a run's mean is as likely above it as below
    job = a_job(instance_type="g6.12xlarge", cost_usd=4.6016 * 2 * 5.0)
    full = load_catalog()
    measured = full[full["instance_type"].isin(resnet_model.instance_types_)]
    out = recommend(pd.DataFrame([job]), {"resnet": resnet_model}, measured, slack=0.0, max_nodes=2)
    row = out.iloc[0]
    # what it ran on is the answer: it did finish in its time, at what it paid
    assert row["keep"] and row["rec_instance_type"] == "g6.12xlarge" and row["rec_num_nodes"] == 2
    assert row["rec_num_workers"] == 8 and row["rec_local_bsz"] == 32
    assert row["rec_pricing"] == "on-demand" and row["rec_hours"] == 5.0
    assert row["rec_cost_usd"] == row["cost_usd"]
    assert row["saving_usd"] == row["saving_lo_usd"] == row["saving_hi_usd"] == 0.0
    assert row["note"].startswith(
        "nothing else is sure at 90% to finish within 5.0 h (1x the 5.0 h it took). "
    )
    # and the measurement that would decide it, in the probes' own sentence
    assert re.search(r"\. (Measure .+ for 200 steps, about \$|No short measurement)", row["note"])


def test_a_job_whose_cheapest_sure_configuration_costs_more_is_kept_as_it_ran(resnet_model):
    # a spot run at a price no catalog configuration beats
    out = recommend(pd.DataFrame([a_job(pricing="spot", cost_usd=1.0)]), {"resnet": resnet_model},
                    load_catalog())  # fmt: skip
    row = out.iloc[0]
    assert row["keep"] and row["rec_pricing"] == "spot" and row["saving_usd"] == 0.0
    assert re.match(
        r"the cheapest configuration sure at 90% to finish in time, \d+ x \S+ \(.+\), "
        r"\S+, would cost \$[\d,.]+, not less than the \$1\.00 it paid$",
        row["note"],
    ), row["note"]


def test_the_weeks_total_saving_has_the_ends_of_the_sum_not_the_sum_of_the_ends(resnet_model):
    # recommendations on a measured type: what is left of their errors is each run's own, so
    # the total cannot miss by every job's worst end at once
    catalog = load_catalog()
    jobs = pd.DataFrame(
        [
            a_job(job="a"),
            a_job(job="b", instance_type="p3.8xlarge", cost_usd=12.24 * 2 * 5.0),
            a_job(job="c", wall_hours=9.0, cost_usd=3.912 * 2 * 9.0),
        ]
    )
    models = {"resnet": resnet_model}
    out = recommend(jobs, models, catalog, level=0.9)
    assert out["saving_usd"].notna().all()
    draws = saving_draws(out, models, catalog, level=0.9, seed=1)
    # each job's draws are its recommendation's belief: its own ends, within the sampling
    ends = np.quantile(draws, [0.1, 0.9], axis=0)
    assert ends[0] == pytest.approx(out["saving_lo_usd"], rel=0.03, abs=0.05)
    assert ends[1] == pytest.approx(out["saving_hi_usd"], rel=0.03, abs=0.05)
    lo, hi = total_interval(draws, level=0.9)
    total = tuple(np.quantile(draws.sum(axis=1), [0.1, 0.9]))
    assert (lo, hi) == pytest.approx(total, rel=1e-12)
    summed = out["saving_lo_usd"].sum(), out["saving_hi_usd"].sum()
    assert summed[0] < lo - 0.05 and hi + 0.05 < summed[1]  # narrower than the sum of ends
    # a total of one job is that job's interval; the level stays an argument
    one = tuple(np.quantile(draws[:, 0], [0.1, 0.9]))
    assert total_interval(draws[:, :1], 0.9) == pytest.approx(one, rel=1e-12)
    one = tuple(np.quantile(draws[:, 0], [0.2, 0.8]))
    assert total_interval(draws[:, :1], 0.8) == pytest.approx(one, rel=1e-12)
    with pytest.raises(InputError, match="level must be a probability between 0 and 1"):
        total_interval(draws, 1.5)


def test_the_reports_total_saving_states_the_ends_of_the_total():
    from srifty_kit.present.weekly import money, savings_text, weekly_report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly_report("2026-11-23", REPO / "data" / "sample_cur_usage.parquet")
    s = report.savings.dropna(subset=["saving_usd"])
    assert len(s) > 1
    lo, hi = report.savings_lo_usd, report.savings_hi_usd
    # within the sum of the jobs' ends, and said as the total's, not as that sum
    assert s["saving_lo_usd"].sum() < lo < s["saving_usd"].sum() < hi < s["saving_hi_usd"].sum()
    text = savings_text(report)
    assert f"90% sure of at least {money(lo)}, 90% sure of at most {money(hi)}" in text
    assert money(s["saving_lo_usd"].sum()) not in text and "sum of their" not in text
    assert report.summary()["savings_lo_usd"] == pytest.approx(lo)


def test_recommendations_on_one_type_are_drawn_under_one_shared_error():
    # a model that knows g6.12xlarge only by transfer: every configuration of it shares the
    # carried fit's error, two jobs recommended the very same configuration its own stray too,
    # and so they are wrong together
    measured = synthetic_measurements()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(measured[measured["instance_type"] == "g4dn.12xlarge"])
    full = load_catalog()
    catalog = full[full["instance_type"] == "g6.12xlarge"]
    jobs = pd.DataFrame(
        [
            a_job(job="a", instance_type="g6.12xlarge", cost_usd=4.6016 * 2 * 5.0),
            a_job(job="b", instance_type="g6.12xlarge", wall_hours=8.0, cost_usd=4.6016 * 16),
        ]
    )
    models = {"resnet": model}
    out = recommend(jobs, models, catalog, slack=3.0)
    assert (out["rec_instance_type"] == "g6.12xlarge").all()
    draws = saving_draws(out, models, catalog, seed=2)
    assert np.corrcoef(draws.T)[0, 1] > 0.95
    # so the total's ends are about the sum of the jobs' ends, not sqrt(2) times narrower
    lo, hi = total_interval(draws)
    summed = out["saving_hi_usd"].sum() - out["saving_lo_usd"].sum()
    assert hi - lo == pytest.approx(summed, rel=0.1)


@pytest.mark.parametrize(
    ("change", "note"),
    [
        ({"model": None}, "no model tag"),
        ({"model": "gpt"}, "no fitted model or profile for 'gpt'"),
        ({"local_bsz": np.nan}, "no per-worker batch"),
        ({"instance_type": "c6i.4xlarge"}, "has no GPU"),
        ({"instance_type": "x9.huge"}, "not in the catalog"),
    ],
)
def test_a_job_without_what_a_recommendation_needs_says_what_is_missing(resnet_model, change, note):
    out = recommend(pd.DataFrame([a_job(**change)]), {"resnet": resnet_model}, load_catalog())
    assert note in out["note"].iloc[0]
    assert np.isnan(out["saving_usd"].iloc[0])


def test_weeks_default_to_the_last_full_monday_to_sunday_week():
    assert last_full_week(dt.date(2026, 12, 2)) == dt.date(2026, 11, 23)
    assert last_full_week(dt.date(2026, 11, 30)) == dt.date(2026, 11, 23)
    assert parse_week("2026-11-23") == WEEK
    with pytest.raises(InputError, match="not an ISO date"):
        parse_week("23/11/2026")
    # another day stands for its Monday-to-Sunday week, and the report says so
    assert parse_week("2026-11-24") == parse_week("2026-11-29") == WEEK
    assert week_note("2026-11-23") == ""
    assert week_note("2026-11-24").startswith("2026-11-24 is a Tuesday: the report covers")


# --------------------------------------------------------------------------- the notebook


def pandas_week(path) -> dict:
    """The week's numbers straight from the CUR file with pandas: an independent reading."""
    cur = pd.read_parquet(path)
    tags = cur["resource_tags"].map(dict)
    for tag in ("job", "team"):
        cur[tag] = tags.map(lambda t, tag=tag: t.get(f"user_{tag}", "(untagged)"))
    instance = cur["line_item_line_item_type"].isin(["Usage", "SavingsPlanCoveredUsage"]) & cur[
        "line_item_usage_type"
    ].str.contains("BoxUsage|SpotUsage")
    lines = cur[instance].copy()
    covered = lines["line_item_line_item_type"] == "SavingsPlanCoveredUsage"
    lines["cost"] = lines["line_item_unblended_cost"].where(
        ~covered, lines["savings_plan_savings_plan_effective_cost"]
    )
    lines["pricing"] = np.where(
        covered,
        "savings-plan",
        np.where(lines["line_item_usage_type"].str.contains("Spot"), "spot", "on-demand"),
    )
    lines["family"] = lines["product_instance_type"].str.split(".").str[0]
    start = pd.to_datetime(lines["line_item_usage_start_date"])
    end = pd.Timestamp(WEEK) + pd.Timedelta(7, "D")
    every = pd.to_datetime(cur["line_item_usage_start_date"])
    in_week = (every >= pd.Timestamp(WEEK)) & (every < end)
    week = lines[
        (start >= pd.Timestamp(WEEK)) & (start < pd.Timestamp(WEEK) + pd.Timedelta(7, "D"))
    ]
    before = lines[
        (start >= pd.Timestamp(WEEK) - pd.Timedelta(7, "D")) & (start < pd.Timestamp(WEEK))
    ]

    def by(key):
        return week.groupby(key)["cost"].sum().to_dict()

    return {
        "total_usd": week["cost"].sum(),
        "previous_week_usd": before["cost"].sum(),
        "instance_hours": week["line_item_usage_amount"].sum(),
        "spot_share": week.loc[week["pricing"] == "spot", "cost"].sum() / week["cost"].sum(),
        "by_team": by("team"),
        "by_job": by("job"),
        "by_family": by("family"),
        "by_pricing": by("pricing"),
        "not_instance_rows": int(
            (
                ~instance
                & (cur["line_item_line_item_type"] != "SavingsPlanNegation")
                & (pd.to_datetime(cur["line_item_usage_start_date"]) >= pd.Timestamp(WEEK))
                & (pd.to_datetime(cur["line_item_usage_start_date"]) < end)
            ).sum()
        ),
        "billed_usd": cur.loc[in_week, "line_item_unblended_cost"].sum(),
        "week_rows": int(in_week.sum()),
    }


def notebook_summary(path) -> dict:
    nb = nbformat.read(path, as_version=4)
    (cell,) = [c for c in nb.cells if "summary" in c.metadata.get("tags", [])]
    (data,) = [o["data"] for o in cell.outputs if SUMMARY_MIME in o.get("data", {})]
    return data[SUMMARY_MIME]


@pytest.fixture(scope="module")
def ran(tmp_path_factory, resnet_model):
    """The report run once for real on a small CUR 2.0 export, with fake AWS keys about."""
    d = tmp_path_factory.mktemp("weekly")
    cur = write_cur(usage_hours(), d / "cur.parquet")
    mp = pytest.MonkeyPatch()
    for name, value in fake_aws_env(None, d).items():
        mp.setenv(name, value)
    try:
        report = run_weekly_report(
            LEDGER_WEEK, cur, d / "out", models=[resnet_model.path_], progress=False
        )
    finally:
        mp.undo()
    return cur, report


@pytest.mark.slow
def test_the_executed_notebooks_figures_equal_the_ledgers_own_aggregation(ran):
    cur, report = ran
    got, want = notebook_summary(report.notebook), pandas_week(cur)
    usd = got["headline"]["USD"]
    pairs = {
        "instance_effective_cost": "total_usd",
        "previous_week_instance_cost": "previous_week_usd",
        "instance_hours": "instance_hours",
        "spot_share": "spot_share",
    }
    for key, theirs in pairs.items():
        assert usd[key] == pytest.approx(want[theirs], rel=1e-9), key
    assert usd["node_hours"] == usd["instance_hours"]  # the former name, for old readers
    for key in ("by_team", "by_job", "by_family", "by_pricing"):
        assert got[key]["USD"] == pytest.approx(want[key], rel=1e-9), key
    assert got["quality"][OTHER_USAGE] + got["quality"][TAX] == want["not_instance_rows"]
    # every row of the week, all services, ties to the invoice's unblended total
    assert {r["charge_category"] for r in got["reconciliation"]} == {"Usage", "Tax"}
    billed = sum(r["billed_cost"] for r in got["reconciliation"])
    assert billed == pytest.approx(want["billed_usd"], abs=0.005)
    assert sum(r["rows"] for r in got["reconciliation"]) == want["week_rows"] == got["rows"]
    assert usd["billed_cost"] == pytest.approx(want["billed_usd"], abs=0.005)
    f = got["forecast"]
    assert f["lo"] <= f["total"] <= f["hi"] and f["level"] == 0.9
    assert got["savings_usd"] is not None  # the resnet jobs have a model
    # the same figures beside the HTML, for another tool
    beside = json.loads(report.html.with_suffix(".json").read_text())
    assert beside == got


@pytest.mark.slow
def test_the_html_has_no_code_cells_no_credentials_and_embeds_its_figures(ran):
    _, report = ran
    assert report.html.name == f"weekly_cost_{LEDGER_WEEK}.html"
    assert report.notebook.name == f"weekly_cost_{LEDGER_WEEK}.ipynb"
    html = report.html.read_text()
    code_cells = re.findall(r'class="jp-Cell jp-CodeCell[^"]*"', html)
    assert len(code_cells) >= 8 and all("jp-mod-noInput" in c for c in code_cells)
    assert 'class="highlight' not in html and "weekly.weekly_report(" not in html
    assert "import matplotlib" not in html and "aws_profile =" not in html
    assert html.count("data:image/png;base64") >= 3
    assert "prediction interval" in html and "could have been saved" in html
    assert "Traceback" not in html
    for text in (html, report.notebook.read_text()):
        assert not any(secret in text for secret in AWS_SECRETS)
    assert not list(report.html.parent.glob(".*"))  # no temporary file left behind
    # presentation: cents, no index columns, nothing raw
    assert 'class="row_heading' not in html and "blank level0" not in html
    for raw in (">None<", ">nan<", ">NaN<", ">inf<", "RuntimeWarning"):
        assert raw not in html, raw
    assert html.count('class="srifty-table-note"') >= 6
    assert "effective cost</strong>" in html and "billed)" in html


@pytest.mark.slow
def test_a_week_without_usage_is_an_explicit_no_usage_report(tmp_path, ran):
    cur, _ = ran
    report = run_weekly_report("2026-10-05", cur, tmp_path, models=[], progress=False)
    html = report.html.read_text()
    assert "No usage in the week of" in html
    summary = notebook_summary(report.notebook)
    assert summary["headline"] == {} and summary["reconciliation"] == [] and summary["rows"] == 0


@pytest.mark.slow
def test_a_ledger_with_no_usable_row_fails_in_one_line_keeping_the_notebook(tmp_path):
    path = tmp_path / "jobs.csv"
    jobs_ledger_frame(usage_hours()).assign(cost_usd=-1.0).to_csv(path, index=False)
    with pytest.raises(InputError, match="negative cost") as e:
        run_weekly_report(LEDGER_WEEK, path, tmp_path / "out", models=[], progress=False)
    assert "\n" not in str(e.value)
    assert (tmp_path / "out" / f"weekly_cost_{LEDGER_WEEK}.failed.ipynb").is_file()
    assert not (tmp_path / "out" / f"weekly_cost_{LEDGER_WEEK}.html").exists()


def test_parameters_are_checked_before_a_kernel_starts(tmp_path):
    jobs = jobs_ledger_frame(usage_hours()).drop(columns="cost_usd")
    jobs.to_csv(tmp_path / "jobs.csv", index=False)
    cases = [
        ({"ledger": tmp_path / "jobs.csv"}, "no column 'cost_usd'"),
        ({"ledger": tmp_path / "nope.csv"}, "no such file"),
        ({"week_start": "last week"}, "not an ISO date"),
        ({"top_n": 0}, "top_n"),
        ({"level": 1.5}, "level"),
        ({"engine": "bigquery"}, "unknown engine"),
        ({"engine": "athena", "athena_table": "cur"}, "needs a database and a table"),
        ({"models": [tmp_path / "none.json"]}, "model or profile not found"),
    ]
    for change, match in cases:
        args = {"week_start": LEDGER_WEEK, "ledger": None, **change}
        with pytest.raises(InputError, match=match):
            run_weekly_report(args.pop("week_start"), args.pop("ledger"), tmp_path / "o", **args)
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").iterdir())


def failing_notebook(path, body: str):
    params = new_code_cell("x = 1")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(
        cells=[params, new_code_cell("print('kept before the failure')"), new_code_cell(body)]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.metadata["language_info"] = {"name": "python"}
    nbformat.write(nb, path)
    return path


def last_good_report(tmp_path, body: str, x: int = 0):
    """A report ``r`` run once to its end in ``tmp_path/out`` from a notebook whose last cell is
    ``body``: (the notebook, the folder, the report, its HTML's bytes)."""
    nb = failing_notebook(tmp_path / "r.ipynb", body)
    out = tmp_path / "out"
    good = run_report(nb, {"x": x}, out, name="r", progress=False)
    return nb, out, good, good.html.read_bytes()


@pytest.mark.slow
def test_a_failing_cell_keeps_its_notebook_and_the_last_good_report(tmp_path):
    nb = failing_notebook(tmp_path / "r.ipynb", "print(10 / x)")
    out = tmp_path / "out"
    good = run_report(nb, {"x": 2}, out, name="r", failed_name="r.failed", progress=False)
    first = good.html.read_text()
    assert "5.0" in first
    with pytest.raises(ReportFailed) as e:
        run_report(nb, {"x": 0}, out, name="r", failed_name="r.failed", progress=False)
    message = str(e.value)
    assert "ZeroDivisionError" in message and "r.failed.ipynb" in message and "\n" not in message
    assert "kept before the failure" in (out / "r.failed.ipynb").read_text()
    assert good.html.read_text() == first and "5.0" in good.notebook.read_text()
    # a good rerun replaces the report whole and drops the stale failure
    again = run_report(nb, {"x": 4}, out, name="r", failed_name="r.failed", progress=False)
    assert "2.5" in again.html.read_text() and not (out / "r.failed.ipynb").exists()
    assert sorted(p.name for p in out.iterdir()) == ["r.html", "r.ipynb"]


@pytest.mark.slow
def test_a_report_being_written_is_not_run_again_into_its_folder_meanwhile(tmp_path):
    import fcntl

    nb, out, good, first = last_good_report(tmp_path, "print(10 / x)", x=2)
    with open(out / ".r.lock", "w") as held:  # another process's run of r, writing now
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(ReportBusy) as e:
            run_report(nb, {"x": 4}, out, name="r", progress=False)
        # another report into the same folder is not held up
        run_report(nb, {"x": 5}, out, name="other", progress=False)
    assert "another run of r is writing in" in str(e.value) and "\n" not in str(e.value)
    assert good.html.read_bytes() == first
    # once it is done, a run goes ahead and leaves no lock file behind
    again = run_report(nb, {"x": 4}, out, name="r", progress=False)
    assert "2.5" in again.html.read_text()
    assert not (out / ".r.lock").exists() and not (out / ".other.lock").exists()


@pytest.mark.slow
def test_a_cell_past_the_timeout_is_one_line_keeping_the_last_good_report(tmp_path):
    nb, out, good, first = last_good_report(tmp_path, "import time\nif x:\n    time.sleep(600)")
    with pytest.raises(ReportStopped) as e:
        run_report(nb, {"x": 1}, out, name="r", progress=False, timeout_s=2)
    message = str(e.value)
    assert "ran longer than 2 s and was stopped" in message and "\n" not in message
    assert e.value.notebook == out.resolve() / "r.failed.ipynb"
    assert "kept before the failure" in e.value.notebook.read_text()
    assert good.html.read_bytes() == first


@pytest.mark.slow
def test_the_demo_ends_in_an_index_linking_both_reports_and_their_figures(tmp_path):
    from srifty_kit.present.demo import run_demo

    demo = run_demo(tmp_path / "demo", seconds=4, progress=False)
    index = demo.index.read_text()
    for report in (demo.report, demo.weekly):
        assert f'href="{report.html.name}"' in index and report.html.is_file()
    figures = re.findall(r'<img src="(figures/[^"]+\.png)"', index)
    assert any("search_ec2" in f for f in figures) and any("weekly_cost" in f for f in figures)
    assert all((tmp_path / "demo" / f).stat().st_size > 1000 for f in figures)
    assert "No usage" not in demo.weekly.html.read_text()  # the sample's last full week
    # the first answer a new user reads is a decision at 90%, and what to measure next
    assert demo.pick.startswith("Pick (cost):"), demo.pick
    assert demo.probe.startswith(("Measure ", "No short measurement")), demo.probe


def test_instance_hours_have_one_name_in_every_table_and_the_summary():
    from srifty_kit.present.weekly import weekly_report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly_report("2026-11-23", REPO / "data" / "sample_cur_usage.parquet", models=[])
    tables = {
        "top jobs": report.top_jobs,
        "by team": report.by_team,
        "by family": report.by_family,
        "by pricing": report.by_pricing,
        "compute": report.compute,
        "daily": report.usage.daily,
        "lines": report.usage.lines,
    }
    for name, table in tables.items():
        assert "instance_hours" in table and "node_hours" not in table, name
    (h,) = report.headline.values()
    assert "node_hours" not in h
    # the published summary keeps the former key, the same number, for its old readers
    summary = report.summary()["headline"]["USD"]
    assert summary["node_hours"] == summary["instance_hours"] == h["instance_hours"]
    assert h["instance_hours"] == pytest.approx(report.compute["instance_hours"].sum())


def test_other_services_show_no_instance_hours_and_the_hours_add_up():
    from srifty_kit.present.weekly import table_html, weekly_report

    # the README's example: the sample CUR export's week of 2026-11-23
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly_report("2026-11-23", REPO / "data" / "sample_cur_usage.parquet")
    split = report.compute
    other = split[split["part"] == OTHER_USAGE]
    assert len(other) == 1 and other["effective_cost"].iloc[0] > 0
    # storage and network usage is not counted in hours: empty, drawn as a dash
    assert other[["instance_hours", "gpu_hours"]].isna().all(axis=None)
    instance = split["part"].str.contains("instance usage")
    assert split.loc[~instance, "instance_hours"].isna().all()
    hours = split["instance_hours"].sum()
    assert hours == pytest.approx(report.headline["USD"]["instance_hours"])
    html = table_html(split.drop(columns="types"), "note")
    (row,) = [r for r in re.findall(r"<tr>(.*?)</tr>", html, re.S) if "other services" in r]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert [c.strip() for c in cells[-2:]] == ["—", "—"]
    # and the costs still add up to the reconciliation
    whole = report.reconciliation
    assert split["billed_cost"].sum() == pytest.approx(whole["billed_cost"].sum())
    assert split["rows"].sum() == whole["rows"].sum()


# 3.0 and numpy's 3 are the count 3 (errors.is_whole): they were refused as no whole number
@pytest.mark.parametrize("top_n", [3, 3.0, np.int64(3)])
def test_the_savings_say_how_many_jobs_with_a_model_were_not_checked(top_n):
    from srifty_kit.present.weekly import savings_text, weekly_report

    ledger = REPO / "data" / "sample_cur_usage.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly_report("2026-11-23", ledger, top_n=top_n)
    checked = len(report.savings)
    assert checked == 3 and report.top_n == 3 and isinstance(report.top_n, int)
    note = report.savings_note
    said = re.search(r"the (\d+) costliest of the (\d+) jobs that have a model", note)
    assert said and int(said[1]) == checked and int(said[2]) > checked
    skipped = int(said[2]) - checked
    # the total's sentence is read with the note beside it: which jobs it sums, which not
    assert f"the other {skipped} were not checked" in savings_text(report)


def test_a_whole_top_n_given_as_a_float_reaches_the_notebook_as_that_count():
    ledger = REPO / "data" / "sample_cur_usage.parquet"
    said = weekly_parameters("2026-11-23", ledger, top_n=3.0, models=[])
    assert said == weekly_parameters("2026-11-23", ledger, top_n=3, models=[])
    assert type(said["top_n"]) is int


@pytest.mark.parametrize("top_n", [True, 2.5, -1, 0, float("nan"), "3"])
def test_a_top_n_that_is_no_count_is_refused_in_one_line_before_any_work(top_n):
    from srifty_kit.present.weekly import weekly_report

    # a folder that is no ledger: the refusal must come first, naming top_n
    with pytest.raises(InputError, match=r"^top_n must be a whole number >= 1, got ") as err:
        weekly_report("2026-11-23", REPO / "no-such-ledger", top_n=top_n)
    assert "to fix" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(InputError, match=r"^top_n must be a whole number >= 1, got "):
        weekly_parameters("2026-11-23", REPO / "no-such-ledger", top_n=top_n)


@pytest.mark.parametrize("level", [True, 1.5, 0, float("nan"), "0.9", "x"])
def test_a_level_that_is_no_probability_is_refused_in_one_line_before_any_work(level):
    from srifty_kit.present.weekly import weekly_report

    # text once reached float() and left a ValueError's traceback instead of the one line
    with pytest.raises(
        InputError, match=r"level must be a probability between 0 and 1, got "
    ) as err:
        weekly_report("2026-11-23", REPO / "no-such-ledger", level=level)
    assert "to fix" in str(err.value) and "\n" not in str(err.value)


def test_unused_commitment_and_savings_rate_are_unknown_without_a_commitment_fee_row():
    from srifty_kit.present.weekly import weekly_report

    # the sample's savings plan covers usage, but no fee row says how much of it went unused:
    # the waste is unknown, not $0, and the savings rate that subtracts it is unknown too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly_report("2026-11-23", REPO / "data" / "sample_cur_usage.parquet", models=[])
    (row,) = report.commitments.to_dict("records")
    assert row["used_commitment"] > 0 and row["list_cost"] > 0
    assert row["unused_commitment"] is None and row["effective_savings_rate"] is None


def test_a_support_fee_in_the_sample_is_a_fee_counted_in_the_total_not_a_commitment(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from srifty_kit.present.weekly import weekly_report
    from srifty_kit.tables.usage_sql import FEE

    sample = pq.read_table(REPO / "data" / "sample_cur_usage.parquet")
    fee = {name: [None] for name in sample.column_names}
    fee.update(
        identity_line_item_id=["support-1"],
        line_item_line_item_type=["Fee"],
        line_item_usage_start_date=[dt.datetime(2026, 11, 24)],
        line_item_product_code=["AWSSupportBusiness"],
        line_item_usage_type=["Dollar"],
        line_item_usage_amount=[1.0],
        line_item_unblended_cost=[100.0],
    )
    ledger = tmp_path / "cur_with_support.parquet"
    pq.write_table(pa.concat_tables([sample, pa.table(fee, schema=sample.schema)]), ledger)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = weekly_report("2026-11-23", REPO / "data" / "sample_cur_usage.parquet", models=[])
        report = weekly_report("2026-11-23", ledger, models=[])
    # every row counted: one more row, the fee's $100 in both totals, as a Purchase
    (h0,), (h,) = base.headline.values(), report.headline.values()
    assert h["rows"] == h0["rows"] + 1
    assert h["billed_cost"] == pytest.approx(h0["billed_cost"] + 100.0)
    assert h["effective_cost"] == pytest.approx(h0["effective_cost"] + 100.0)
    recon = report.reconciliation.set_index("charge_category")
    assert recon.loc["Purchase", "rows"] == 1 and recon.loc["Purchase", "billed_cost"] == 100.0
    assert recon["billed_cost"].sum() == pytest.approx(h["billed_cost"])
    # shown as a fee, not as a commitment purchase, and it tells nothing of the commitment
    split = report.compute.set_index("part")
    assert split.loc[FEE, "rows"] == 1 and split.loc[FEE, "effective_cost"] == 100.0
    assert split["effective_cost"].sum() == pytest.approx(h["effective_cost"])
    (row,) = report.commitments.to_dict("records")
    assert row["purchases_billed"] == 0
    assert row["utilisation"] is None  # not a made-up 100% from a support bill


def test_utilisation_is_unknown_without_a_commitment_fee_row():
    from srifty_kit.present.weekly import weekly_report

    # the sample CUR export covers usage by savings plans but holds no fee rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly_report("2026-11-23", REPO / "data" / "sample_cur_usage.parquet")
    (row,) = report.commitments.to_dict("records")
    assert row["used_commitment"] > 0 and row["purchases_billed"] == 0
    assert row["utilisation"] is None or np.isnan(row["utilisation"])  # not a made-up 100%
    assert row["coverage"] > 0


def test_every_top_job_of_the_sample_has_a_recommendation_or_says_why_where_it_would_stand():
    from srifty_kit.present.weekly import savings_text, table_html, weekly_report

    # the sample's costliest jobs: bert on p4d and mlp on g6e (known only by transfer:
    # kept as they ran), deepspeech2 and imagenet (a change), and jobs without a model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly_report("2026-11-23", REPO / "data" / "sample_cur_usage.parquet")
    table, s = report.savings_table, report.savings
    kept = s["keep"].astype(bool)
    changed = s["rec_instance_type"].notna() & ~kept
    assert kept.any() and changed.any()
    # a reader of the mailed page sees the answer in the recommendation's own cell, not in a
    # last column beyond the page's edge: a configuration, keep as is and why, or none and why
    assert "note" not in table
    assert (table.loc[kept, "recommended"] == "keep as is: " + s.loc[kept, "note"]).all()
    assert table.loc[kept, "recommended"].str.contains("nothing else is sure at 90%").all()
    assert table.loc[kept, "recommended"].str.contains("to decide|No short measurement").all()
    assert (table.loc[kept, "saving_usd"] == 0).all()
    # a probe for a job that ran is valued against running it that way again: it can never
    # be expected to save more than the job cost (it said $1,198 on a $342 job)
    said = s.loc[kept, "note"].str.extract(r"expected saving \$([\d,]+(?:\.\d+)?)")[0].dropna()
    assert len(said)
    assert (said.str.replace(",", "").astype(float) < s.loc[said.index, "cost_usd"]).all()
    assert table.loc[kept | changed, ["cost_usd", "saving_usd", "local_bsz"]].notna().all().all()
    assert not table.loc[changed, "recommended"].str.startswith(("none", "keep")).any()
    none = ~kept & ~changed
    assert (table.loc[none, "recommended"].str.len() > len("none: ")).all()
    assert table["recommended"].notna().all()
    html = table_html(table, "note", currency="USD")
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)
    assert cells and all(c.strip() for c in cells)  # no blank cell: a value, a dash or why
    assert "nan" not in html.lower().replace("nanos", "")
    assert len(table.columns) <= 12  # its 15 ran 185 px past a 1280 px page's edge
    text = savings_text(report)
    assert f"on {int(changed.sum())} jobs" in text
    assert f"{int(kept.sum())} jobs are best kept as they ran" in text


def credit_line(frame: pd.DataFrame, kind: str, cost: float, resource, tags) -> pd.DataFrame:
    """A CUR 2.0 line of ``kind`` (Credit, Refund, ...) for ``cost`` on ``resource`` (None:
    the account's) with ``tags`` ((key, value) pairs), dated as the week's first line."""
    first = frame[frame["line_item_usage_start_date"] >= pd.Timestamp(LEDGER_WEEK)].iloc[0]
    return first.copy().to_frame().T.assign(
        line_item_line_item_type=kind, line_item_unblended_cost=cost,
        line_item_resource_id=resource, resource_tags=[tags], line_item_usage_type="",
        line_item_usage_amount=0.0, product_instance_type=None,
        pricing_public_on_demand_cost=np.nan,
    )  # fmt: skip


def report_with(frame: pd.DataFrame, credits: list[pd.DataFrame], path) -> tuple:
    """The weekly report of ``frame`` and ``credits`` written as a CUR 2.0 Parquet export,
    and the same week read independently: its rows, which of them are instance usage (by
    the line item and usage types) and their billed (unblended) cost."""
    from srifty_kit.present.weekly import weekly_report

    frame = pd.concat([frame, *credits], ignore_index=True)
    for column in ("line_item_unblended_cost", "line_item_usage_amount"):
        frame[column] = frame[column].astype(float)
    path = write_cur_parquet(frame, path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly_report(LEDGER_WEEK, path, models=[])
    start = pd.to_datetime(frame["line_item_usage_start_date"])
    week = frame[(start >= pd.Timestamp(LEDGER_WEEK)) & (start < pd.Timestamp("2026-11-30"))]
    used = week["line_item_usage_type"].str.contains("BoxUsage|SpotUsage") & week[
        "line_item_line_item_type"
    ].isin(["Usage", "SavingsPlanCoveredUsage"])
    return report, week, used, week["line_item_unblended_cost"]


def test_team_and_job_billed_cost_is_net_of_their_credits_and_adds_up_to_the_bill(tmp_path):
    from srifty_kit.present.weekly import NO_TEAM, REST_OF_BILL, table_html

    frame = cur_frame(usage_hours(), tags="map")
    kind = frame["line_item_line_item_type"]
    # the bert job's negations carry no tags: whose they are is read off their resource
    frame.loc[kind == "SavingsPlanNegation", "resource_tags"] = pd.Series(
        [[] for _ in range(int((kind == "SavingsPlanNegation").sum()))],
        index=frame.index[kind == "SavingsPlanNegation"],
    )
    vision = frame[(kind == "Usage") & frame["line_item_usage_type"].str.contains("Spot")]
    vision = vision[vision["line_item_usage_start_date"] >= pd.Timestamp(LEDGER_WEEK)].iloc[0]
    credits = [
        credit_line(frame, "Credit", -5.0, vision["line_item_resource_id"], []),  # resource's
        credit_line(frame, "Refund", -1.1, None, [("user_team", "nlp"), ("user_job", "nlp-eval")]),
        credit_line(frame, "Credit", -7.25, None, []),  # the account's: nobody's
    ]
    report, week, used, cost = report_with(frame, credits, tmp_path / "cur.parquet")

    # the ledger read independently: instance usage by its tags
    tags = week["resource_tags"].map(dict)
    team = tags.map(lambda t: t.get("user_team"))
    job = tags.map(lambda t: t.get("user_job"))
    negated = week["line_item_line_item_type"] == "SavingsPlanNegation"
    want_team = {
        "nlp": cost[used & (team == "nlp")].sum() + cost[negated].sum() - 1.1,
        "vision": cost[used & (team == "vision")].sum() - 5.0,
    }
    shown = report.team_table.set_index("team")
    for name, billed in want_team.items():
        assert round(shown.loc[name, "billed_cost"], 2) == round(billed, 2), name
    assert round(shown.loc[NO_TEAM, "billed_cost"], 2) == -7.25
    rest = ~used & ~negated & ~week["line_item_line_item_type"].isin(["Credit", "Refund"])
    assert round(shown.loc[REST_OF_BILL, "billed_cost"], 2) == round(cost[rest].sum(), 2)
    # the columns add up to the bill, to the cent, and to the amortised total
    assert round(shown["billed_cost"].sum(), 2) == round(cost.sum(), 2)
    whole = report.reconciliation
    assert round(shown["effective_cost"].sum(), 2) == round(whole["effective_cost"].sum(), 2)
    # each job likewise: bert's covered hours net of their negations, the refund on nlp-eval
    jobs = report.top_jobs.set_index("job")
    assert round(jobs.loc["nlp-bert", "billed_cost"], 2) == 0.0
    assert round(jobs.loc["nlp-eval", "billed_cost"], 2) == round(
        cost[used & (job == "nlp-eval")].sum() - 1.1, 2
    )
    assert round(jobs.loc["vision-resnet", "billed_cost"], 2) == round(
        cost[used & (job == "vision-resnet")].sum() - 5.0, 2
    )
    cells = re.findall(r"<td[^>]*>(.*?)</td>", table_html(report.team_table, "note"), re.S)
    assert cells and all(c.strip() for c in cells) and "nan" not in " ".join(cells).lower()


def test_family_and_pricing_billed_cost_is_net_of_the_credits_on_their_resources(tmp_path):
    from srifty_kit.present.weekly import NO_FAMILY, NO_PRICING, REST_OF_BILL, table_html

    frame = cur_frame(usage_hours(), tags="map")
    resource, itype = frame["line_item_resource_id"], frame["product_instance_type"]
    instance = frame["line_item_usage_type"].str.contains("BoxUsage|SpotUsage")
    in_week = frame["line_item_usage_start_date"] >= pd.Timestamp(LEDGER_WEEK)
    bert = resource[instance & (itype == "p4d.24xlarge") & in_week].iloc[0]
    resnet = resource[instance & (itype == "g4dn.12xlarge") & in_week].iloc[0]
    # vision-big's g6 hours ran on a resnet node resized: a resource of two types and two
    # pricings (g4dn spot, g6 on-demand), whose credit is no one family's or pricing's
    frame.loc[instance & (itype == "g6.12xlarge"), "line_item_resource_id"] = resnet
    credits = [
        credit_line(frame, "Credit", -40.0, bert, []),  # on the p4d savings-plan node
        credit_line(frame, "Credit", -3.0, resnet, [("user_team", "vision")]),
    ]
    report, week, used, cost = report_with(frame, credits, tmp_path / "cur.parquet")

    # the ledger read independently: each instance usage row's family and pricing
    kind = week["line_item_line_item_type"]
    family = week["product_instance_type"].str.split(".").str[0]
    pricing = np.where(
        kind == "SavingsPlanCoveredUsage",
        "savings-plan",
        np.where(week["line_item_usage_type"].str.contains("Spot"), "spot", "on-demand"),
    )
    negations = cost[kind == "SavingsPlanNegation"].sum()  # all on bert's node
    want_family = {
        "p4d": cost[used & (family == "p4d")].sum() + negations - 40.0,
        "g4dn": cost[used & (family == "g4dn")].sum(),
        "g6": cost[used & (family == "g6")].sum(),
        "c6i": cost[used & (family == "c6i")].sum(),
        NO_FAMILY: -3.0,
    }
    want_pricing = {
        "savings-plan": cost[used & (pricing == "savings-plan")].sum() + negations - 40.0,
        "spot": cost[used & (pricing == "spot")].sum(),
        "on-demand": cost[used & (pricing == "on-demand")].sum(),
        NO_PRICING: -3.0,
    }
    families = report.family_table.set_index("family")
    prices = report.pricing_table.set_index("pricing")
    for shown, want in ((families, want_family), (prices, want_pricing)):
        for name, billed in want.items():
            assert round(shown.loc[name, "billed_cost"], 2) == round(billed, 2), name
    # the p4d credit reads under p4d as under its team; the resized node's under its team only
    teams = report.team_table.set_index("team")
    assert round(teams.loc["nlp", "billed_cost"] - families.loc["p4d", "billed_cost"], 2) == round(
        cost[used & (family == "c6i")].sum(), 2
    )
    vision = cost[used & family.isin(["g4dn", "g6"])].sum() - 3.0
    assert round(teams.loc["vision", "billed_cost"], 2) == round(vision, 2)
    # every breakdown's billed column is the same bill, to the cent, and so is effective
    bill = round(cost.sum(), 2)
    for shown in (teams, families, prices):
        assert round(shown["billed_cost"].sum(), 2) == bill
        assert round(shown.loc[REST_OF_BILL, "billed_cost"], 2) == round(
            teams.loc[REST_OF_BILL, "billed_cost"], 2
        )
        effective = round(report.reconciliation["effective_cost"].sum(), 2)
        assert round(shown["effective_cost"].sum(), 2) == effective
    # effective cost stays the usage's amortised cost: the savings plan's share, no credit
    amortised = week["savings_plan_savings_plan_effective_cost"][used & (family == "p4d")].sum()
    assert report.by_family.set_index("family").loc["p4d", "effective_cost"] == pytest.approx(
        amortised
    )
    for table in (report.family_table, report.pricing_table):
        html = table_html(table, "note")
        cells = re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)
        assert cells and all(c.strip() for c in cells) and "nan" not in " ".join(cells).lower()
    assert NO_FAMILY in table_html(report.family_table, "note")


def test_a_ledger_that_states_no_list_cost_shows_it_unknown_not_zero():
    from srifty_kit.present.weekly import table_html, weekly_report

    # the packaged jobs ledger has cost_usd but no public on-demand price per row
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly_report("2026-11-23", REPO / "data" / "sample_jobs_ledger.csv", models=[])
    (row,) = report.commitments.to_dict("records")
    assert row["list_cost"] is None and row["effective_savings_rate"] is None
    html = table_html(report.commitments, "note")
    header = re.findall(r"<th[^>]*>(.*?)</th>", html, re.S)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)
    shown = dict(zip([h.strip() for h in header], [c.strip() for c in cells], strict=True))
    assert shown["list_cost"] == "—"  # not "$0.00" beside a savings rate of —


def test_no_table_of_the_report_has_a_blank_cell():
    from srifty_kit.present.weekly import table_html, weekly_report

    # the sample CUR's week: other services have no provider column, no type has an unknown
    # GPU count, and the outside-the-week check has no detail
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly_report("2026-11-23", REPO / "data" / "sample_cur_usage.parquet", models=[])
    for name in ("reconciliation", "compute", "commitments", "by_team", "top_jobs", "checks"):
        html = table_html(getattr(report, name), "note")
        cells = [c.strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", html, re.S)]
        assert cells and all(cells), name


def test_the_headline_says_why_billed_is_below_effective_when_no_fee_row_is_there():
    from srifty_kit.present.weekly import headline_text, money, weekly_report

    # the sample CUR's savings plan covers usage, but its fee rows were not exported: the
    # invoice-side total is below the amortised one, and the headline is read first
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cur = weekly_report("2026-11-23", REPO / "data" / "sample_cur_usage.parquet", models=[])
        jobs = weekly_report("2026-11-23", REPO / "data" / "sample_jobs_ledger.csv", models=[])
    h = cur.headline["USD"]
    assert h["billed_cost"] < h["effective_cost"]
    used = cur.commitments["used_commitment"].iloc[0]
    text = headline_text(cur)
    assert f"they covered {money(used)} of usage" in text
    assert "no fee row of theirs is in this ledger" in text and "hence billed below" in text
    # no commitment, nothing to explain
    assert "fee row" not in headline_text(jobs)


def test_the_notebooks_defaults_report_the_samples_week_whatever_the_date(monkeypatch):
    from srifty_kit.present import weekly

    # a first-time user opening notebook 04 on a Monday after the sample's data ends: its
    # defaults (no week, no ledger) must still show the sample's week, not an empty one
    monkeypatch.setattr(weekly, "last_full_week", lambda today=None: dt.date(2027, 3, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly.weekly_report(None, None, models=[])
    assert report.usage.week_start == dt.date.fromisoformat(weekly.SAMPLE_WEEK)
    assert not report.empty and "No usage" not in weekly.headline_text(report)
    # a ledger of the user's own: the last full week, as the parameter says
    assert weekly.parse_week(None) == dt.date(2027, 3, 1)


def test_the_savings_table_shows_its_amounts_as_money_like_every_other_table():
    from srifty_kit.present.weekly import table_html, weekly_report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = weekly_report("2026-11-23", REPO / "data" / "sample_cur_usage.parquet", top_n=5)
    table = report.savings_table
    html = table_html(table, "note", currency="USD")
    header = [h.strip() for h in re.findall(r"<th\b[^>]*>(.*?)</th>", html, re.S)]
    rows = re.findall(r"<tr>(.*?)</tr>", html, re.S)[1:]
    shown = [dict(zip(header, [c.strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)],
                      strict=True)) for r in rows]  # fmt: skip
    money = re.compile(r"^-?\$[\d,]+(\.\d\d)?$")
    picked = table["cost_usd"].notna().to_numpy()
    for row, has in zip(shown, picked, strict=True):
        assert money.match(row["paid_usd"]), row
        for column in ("cost_usd", "saving_usd", "saving_lo_usd", "saving_hi_usd"):
            assert money.match(row[column]) if has else row[column] == "—", (column, row)
    # hours and the batch stay plain numbers
    assert all("$" not in row["hours"] and "$" not in row["local_bsz"] for row in shown)
