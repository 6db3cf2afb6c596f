"""Usage ledgers read in place by DuckDB: every format gives the same week, bad rows are
counted with their reason, bad files are one clear InputError."""

from __future__ import annotations

import datetime as dt
import gzip

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from srifty_kit.errors import InputError
from srifty_kit.tables.ledger import UNDATED, DuckDBLedger, jobs_of_week, weekly_usage
from srifty_kit.tables.usage_sql import (
    ATHENA,
    DUCKDB,
    FORMATS,
    OTHER_USAGE,
    TAX,
    SourceColumns,
    normalise_sql,
)
from tests.builders import (
    LEDGER_WEEK,
    jobs_ledger_frame,
    usage_hours,
    write_cur,
    write_focus,
    write_jobs_ledger,
)

WEEK = dt.date.fromisoformat(LEDGER_WEEK)
KEYS = ["job", "team", "instance_type", "pricing", "model"]
COST = "effective_cost"


def week_of(path) -> object:
    return weekly_usage(DuckDBLedger(path), WEEK)


def by_key(lines: pd.DataFrame, columns=("effective_cost", "instance_hours")) -> pd.DataFrame:
    return lines.set_index(KEYS)[list(columns)].sort_index()


@pytest.fixture(scope="module")
def hours() -> pd.DataFrame:
    return usage_hours()


@pytest.fixture(scope="module")
def ledgers(hours, tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("ledgers")
    return {
        "cur-legacy": write_cur(hours, d / "legacy.csv", legacy=True),
        "cur2": write_cur(hours, d / "cur2.parquet"),
        "focus": write_focus(hours, d / "focus.csv"),
        "jobs": write_jobs_ledger(hours, d / "jobs.csv"),
    }


def test_legacy_cur_cur2_and_focus_describing_the_same_usage_give_the_same_week(ledgers, hours):
    weeks = {name: week_of(ledgers[name]) for name in ("cur-legacy", "cur2", "focus")}
    assert {name: w.format for name, w in weeks.items()} == {
        "cur-legacy": "cur-legacy",
        "cur2": "cur2",
        "focus": "focus",
    }
    first = weeks["cur2"]
    columns = ("effective_cost", "instance_hours", "list_cost", "resources", "local_bsz")
    for w in weeks.values():
        pd.testing.assert_frame_equal(by_key(w.lines, columns), by_key(first.lines, columns))
        pd.testing.assert_frame_equal(w.daily, first.daily)
        in_week = hours["start"].between(pd.Timestamp(WEEK), pd.Timestamp("2026-11-29 23:59"))
        assert w.quality.loc[w.quality["kind"] == "used", "rows"].sum() == in_week.sum()
        assert w.quality["rows"].sum() == w.rows  # the week's rows, all accounted for
    # and they are the usage itself: the week's cost per job, savings-plan at its effective cost
    in_week = hours[(hours["start"] >= pd.Timestamp(WEEK)) & (hours["start"] < "2026-11-30")]
    expected = in_week.groupby("job")["cost_usd"].sum()
    got = first.lines.groupby("job")[COST].sum()
    pd.testing.assert_series_equal(got.sort_index(), expected.sort_index(), check_names=False)


def test_a_jobs_ledger_of_the_same_runs_gives_the_same_costs_by_team_job_and_day(ledgers):
    cur, jobs = week_of(ledgers["cur2"]), week_of(ledgers["jobs"])
    for key in ("team", "job", "instance_type"):
        pd.testing.assert_series_equal(
            jobs.lines.groupby(key)[COST].sum(), cur.lines.groupby(key)[COST].sum()
        )
    pd.testing.assert_frame_equal(jobs.daily, cur.daily)


def test_a_job_s_nodes_and_wall_hours_come_from_its_resources_or_its_row(ledgers):
    for name in ("cur2", "jobs"):
        jobs = jobs_of_week(week_of(ledgers[name]).lines).set_index("job")
        assert jobs.loc["vision-resnet", "num_nodes"] == 2
        assert jobs.loc["vision-resnet", "wall_hours"] == pytest.approx(4.5)
        assert jobs.loc["vision-resnet", "local_bsz"] == 32
        assert jobs.loc["nlp-bert", "model"] == "bert"
        assert list(jobs.index[:1]) == ["nlp-bert"]  # most expensive first


def test_csv_gzip_parquet_and_a_folder_of_monthly_parts_read_the_same(hours, tmp_path):
    whole = week_of(write_cur(hours, tmp_path / "one.parquet"))
    as_csv = week_of(write_cur(hours, tmp_path / "one.csv"))  # tags as JSON text
    gz = write_cur(hours, tmp_path / "legacy.csv.gz", legacy=True)
    assert gzip.open(gz).read(2)  # really gzip
    as_gz = week_of(gz)
    parts = tmp_path / "parts"
    for month, rows in hours.groupby(hours["start"].dt.strftime("%Y-%m")):
        write_cur(rows, parts / f"BILLING_PERIOD={month}" / "part-0.parquet")
    as_parts = week_of(parts)
    for other in (as_csv, as_gz, as_parts):
        pd.testing.assert_frame_equal(by_key(other.lines), by_key(whole.lines))
        pd.testing.assert_frame_equal(other.daily, whole.daily)


def test_lines_that_are_not_instance_usage_are_excluded_and_counted(ledgers):
    quality = week_of(ledgers["cur-legacy"]).quality.set_index("reason")
    assert quality.loc[OTHER_USAGE, "kind"] == "excluded"
    assert quality.loc[OTHER_USAGE, "rows"] == 4  # a storage line per job of the week
    assert quality.loc[TAX, "rows"] == 1 and quality.loc[TAX, "billed_cost"] == 12.0
    negations = quality.filter(like="negation", axis=0)
    assert len(negations) == 1 and negations["rows"].iloc[0] == 3  # one per covered hour
    # a negation cancels the covered line's billed cost and carries no effective cost
    assert negations["effective_cost"].iloc[0] == 0 and negations["billed_cost"].iloc[0] < 0


def test_unusable_rows_are_counted_with_their_reason_and_kept_out_of_the_totals(tmp_path):
    jobs = jobs_ledger_frame(usage_hours())
    bad = pd.concat(
        [
            jobs.head(1).assign(job="neg", cost_usd=-5.0),
            jobs.head(1).assign(job="date", start="2026-13-45T00:00:00Z"),
            jobs.head(1).assign(job="type", instance_type=None),
            jobs.head(1).assign(job="price", pricing="reserved"),
            jobs.head(1).assign(job="nodes", num_nodes=0),
        ]
    )
    clean = week_of(write_jobs_ledger_frame(jobs, tmp_path / "clean.csv"))
    dirty = week_of(write_jobs_ledger_frame(pd.concat([jobs, bad]), tmp_path / "dirty.csv"))
    unusable = dirty.quality[dirty.quality["kind"] == "unusable"].set_index("reason")["rows"]
    assert unusable.to_dict() == {
        "negative cost": 1,
        "missing instance type": 1,
        "unknown pricing": 1,
        "num_nodes below 1": 1,
    }
    # a row without a readable date belongs to no week: counted outside it, with its cost
    undated = dirty.outside.set_index("reason").loc[UNDATED]
    assert undated["rows"] == 1 and undated["effective_cost"] > 0
    pd.testing.assert_frame_equal(dirty.lines, clean.lines)
    pd.testing.assert_frame_equal(dirty.daily, clean.daily)
    shown = dirty.examples.set_index("reason")
    assert shown.loc["missing or unparseable start date", "raw_start"] == "2026-13-45T00:00:00Z"
    assert shown.loc["negative cost", "raw_cost"] == "-5.0"
    assert set(shown["source_file"]) == {"dirty.csv"}


def write_jobs_ledger_frame(frame: pd.DataFrame, path):
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("change", "reason", "column"),
    [
        ({"cost_usd": -3.0}, "negative cost", "cost_usd"),
        ({"start": "yesterday"}, "unparseable start date", "start"),
    ],
)
def test_a_ledger_without_one_usable_row_is_an_input_error(tmp_path, change, reason, column):
    jobs = jobs_ledger_frame(usage_hours()).assign(**change)
    path = write_jobs_ledger_frame(jobs, tmp_path / "bad.csv")
    with pytest.raises(InputError, match=reason) as caught:
        week_of(path)
    assert caught.value.column == column
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_column_is_named_with_what_was_meant(tmp_path):
    jobs = jobs_ledger_frame(usage_hours()).rename(columns={"cost_usd": "cost"})
    with pytest.raises(InputError, match=r"no column 'cost_usd' \(did you mean 'cost'") as e:
        week_of(write_jobs_ledger_frame(jobs, tmp_path / "jobs.csv"))
    assert e.value.column == "cost_usd"
    no_end = jobs_ledger_frame(usage_hours()).drop(columns="end")
    with pytest.raises(InputError, match="end or hours"):
        week_of(write_jobs_ledger_frame(no_end, tmp_path / "no_end.csv"))


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("notes.csv", "a,b\n1,2\n", "not a usage ledger"),
        ("empty.csv", "job,team,instance_type,pricing,start,end,num_nodes,cost_usd\n", "no rows"),
        ("ledger.xlsx", "x", "unsupported ledger file type"),
    ],
)
def test_files_that_are_no_ledger_are_one_clear_error(tmp_path, name, text, match):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=match):
        week_of(path)
    with pytest.raises(InputError, match="no such file"):
        week_of(tmp_path / "absent.csv")


def test_a_week_without_usage_is_empty_not_an_error(ledgers):
    quiet = weekly_usage(DuckDBLedger(ledgers["cur2"]), dt.date(2026, 10, 5))
    assert quiet.empty and quiet.lines.empty
    assert quiet.rows == 0 and quiet.quality["rows"].sum() == 0
    assert quiet.outside["rows"].sum() > 0  # the ledger's rows are still all accounted for


def test_the_sql_is_written_once_the_dialects_only_spell_functions(ledgers):
    ledger = DuckDBLedger(ledgers["cur2"])
    cols = ledger.columns()
    for fmt in FORMATS:
        if fmt.name != "cur2":
            continue
        duck = normalise_sql(fmt, cols, DUCKDB, "src")
        athena = normalise_sql(fmt, cols, ATHENA, "src")
        assert duck != athena
        for word in ("json_extract_string", "TIMESTAMPTZ", "filename"):
            assert word not in athena
        # the same columns, reasons and structure line by line
        assert len(duck.splitlines()) == len(athena.splitlines())
        assert duck.split("FROM (")[0] == athena.split("FROM (")[0]


def test_column_names_match_whatever_their_case(tmp_path):
    hours = usage_hours()
    frame = pd.read_csv(write_focus(hours, tmp_path / "focus.csv"))
    frame.columns = [c.lower() for c in frame.columns]  # as Athena lists them
    lower = week_of(write_jobs_ledger_frame(frame, tmp_path / "lower.csv"))
    pd.testing.assert_frame_equal(
        by_key(lower.lines), by_key(week_of(tmp_path / "focus.csv").lines)
    )
    assert SourceColumns({"ChargePeriodStart": "text"}).find("chargeperiodstart")


jobs_rows = st.lists(
    st.fixed_dictionaries(
        {
            "day": st.integers(0, 20),
            "hours": st.one_of(st.floats(0.1, 30), st.just(-1.0)),
            "cost_usd": st.one_of(st.floats(0, 500), st.just(-2.0), st.just(float("nan"))),
            "num_nodes": st.integers(0, 4),
            "pricing": st.sampled_from(["on-demand", "spot", "Spot", "reserved"]),
            "team": st.sampled_from(["a", "b", "c"]),
        }
    ),
    min_size=1,
    max_size=30,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=jobs_rows)
def test_every_row_is_counted_once_and_the_week_sums_to_its_days(tmp_path, rows):
    frame = pd.DataFrame(rows)
    start = pd.Timestamp("2026-11-09") + pd.to_timedelta(frame.pop("day"), unit="D")
    frame["start"] = start.dt.strftime("%Y-%m-%dT08:00:00Z")
    frame["job"] = [f"j{i}" for i in range(len(frame))]
    frame["instance_type"] = "g4dn.xlarge"
    path = write_jobs_ledger_frame(frame, tmp_path / "h.csv")
    try:
        w = week_of(path)
    except InputError as err:  # allowed only when no row is usable
        assert "no usable rows" in str(err)
        return
    assert w.quality["rows"].sum() + w.outside["rows"].sum() == len(frame)
    in_week = (w.daily.index >= pd.Timestamp(WEEK)) & (w.daily.index < pd.Timestamp("2026-11-30"))
    assert w.lines[COST].sum() == pytest.approx(w.daily.loc[in_week, "cost"].sum())
    assert (w.lines[COST] >= 0).all() and (w.lines["instance_hours"] >= 0).all()
    assert set(w.lines["pricing"]) <= {"on-demand", "spot"}
    assert np.isfinite(w.daily.to_numpy()).all()
