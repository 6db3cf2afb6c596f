"""Table contracts: a bad table gets one clear message naming the column, rows and fix."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from srifty_kit.errors import InputError, did_you_mean
from srifty_kit.tables.contracts import (
    MAX_STEP_S,
    placement_fits,
    validate_catalog,
    validate_configs,
    validate_ledger,
    validate_measurements,
    validate_predictions,
)
from srifty_kit.tables.files import read_table, write_json, write_table

CATALOG = pd.DataFrame(
    {"instance_type": ["g4dn.12xlarge", "g5.xlarge", "c5.large"], "gpu_count": [4, 1, None]}
)


def measurements(**overrides) -> pd.DataFrame:
    base = {
        "model": ["bert", "bert", "bert"],
        "instance_type": ["g4dn.12xlarge"] * 3,
        "num_nodes": [1, 2, 2],
        "num_workers": [4, 8, 5],
        "local_bsz": [8, 8, 16],
        "step_time_s": [0.5, 0.7, 0.9],
        "gpus_per_node": [4, 4, 4],
    }
    base.update(overrides)
    return pd.DataFrame(base)


def test_valid_measurements_keep_extra_columns_and_get_contract_dtypes():
    table = measurements(flops_per_sample=[1e9, 1e9, 1e9])
    out = validate_measurements(table, catalog=CATALOG)
    assert list(out["num_workers"]) == [4, 8, 5]
    assert out["num_nodes"].dtype == "int64" and out["step_time_s"].dtype == "float64"
    assert "flops_per_sample" in out.columns


def test_missing_column_names_it_and_suggests_the_near_miss():
    table = measurements().rename(columns={"local_bsz": "local_batch"})
    with pytest.raises(InputError) as err:
        validate_measurements(table, source="runs.csv", catalog=CATALOG)
    text = str(err.value)
    assert "runs.csv" in text and "'local_bsz'" in text and "local_batch" in text
    assert "\n" not in text


def test_bad_value_names_column_value_and_file_line(tmp_path):
    path = tmp_path / "m.csv"
    measurements(step_time_s=[0.5, -1.0, 0.9]).to_csv(path, index=False)
    with pytest.raises(InputError) as err:
        validate_measurements(read_table(path), catalog=CATALOG)
    text = str(err.value)
    # the bad row is the second data row: line 3 of the file, after the header
    assert str(path) in text and "step_time_s" in text and "3" in text and "-1" in text


@pytest.mark.parametrize(
    ("suffix", "said"),
    [
        # a CSV's rows are its lines: the second data row is line 3, after the header
        (".csv", "rows 3:"),
        # a Parquet or JSON file has no lines: its rows are said as pandas reads them, and so
        # said (before: "rows 3", numbered as if a header line preceded them)
        (".parquet", "rows 1 of the Parquet file, counted from 0:"),
        (".json", "rows 1 of the JSON file, counted from 0:"),
    ],
)
def test_a_bad_row_is_numbered_as_its_file_format_numbers_rows(tmp_path, suffix, said):
    path = write_table(measurements(step_time_s=[0.5, -1.0, 0.9]), tmp_path / f"m{suffix}")
    with pytest.raises(InputError) as err:
        validate_measurements(read_table(path), catalog=CATALOG)
    assert f"{path}, column 'step_time_s', {said}" in str(err.value)


@pytest.mark.parametrize(
    ("index", "said"),
    [
        # before: "rows 1, 2", the positions from 0, which no label of the frame shows
        ([17, 40, 311], "index 40, 311:"),
        (["a", "b", "3"], "index 'b', '3':"),  # a text label is quoted: '3' is no position
        (pd.to_datetime(["2026-01-01", "2026-01-02", "2026-01-03"]), "index 2026-01-02"),
    ],
)
def test_a_bad_row_of_a_dataframe_is_named_by_its_index_label(index, said):
    table = measurements(step_time_s=[0.5, -1.0, 0.0]).set_axis(index)
    with pytest.raises(InputError) as err:
        validate_measurements(table, catalog=CATALOG)
    assert f"measurements table, column 'step_time_s', {said}" in str(err.value)
    assert list(table.loc[err.value.rows, "step_time_s"]) == [-1.0, 0.0]


def test_a_parquet_file_with_an_index_is_still_numbered_by_its_rows(tmp_path):
    # a saved frame's index comes back with it, but a file's rows are said as the file's
    path = tmp_path / "m.parquet"
    measurements(step_time_s=[0.5, -1.0, 0.9]).set_axis([17, 40, 311]).to_parquet(path)
    with pytest.raises(InputError) as err:
        validate_measurements(read_table(path), catalog=CATALOG)
    assert "rows 1 of the Parquet file, counted from 0:" in str(err.value)


@pytest.mark.parametrize("flags", [[True, False, True], [0.5, True, 0.7]])
def test_a_true_or_false_is_no_step_time(flags):
    # to_numeric reads True as 1: a step of one second the user never measured
    table = pd.DataFrame(
        {
            "model": "m",
            "instance_type": "g4dn.xlarge",
            "num_nodes": 1,
            "num_workers": 1,
            "local_bsz": [4, 8, 16],
            "step_time_s": pd.Series(flags, dtype=object if 0.5 in flags else bool),
        }
    )
    with pytest.raises(InputError, match="step_time_s.*expected numbers, found True"):
        validate_measurements(table)


def test_non_numeric_cell_is_reported_not_silently_dropped():
    with pytest.raises(InputError, match="num_workers.*whole numbers.*'eight'"):
        validate_measurements(measurements(num_workers=[4, "eight", 5]), catalog=CATALOG)


def test_fewer_workers_than_nodes_is_rejected():
    with pytest.raises(InputError, match="smaller than num_nodes"):
        validate_measurements(measurements(num_workers=[4, 1, 5]), catalog=CATALOG)


def test_more_workers_than_the_nodes_hold_is_rejected():
    with pytest.raises(InputError, match="more workers"):
        validate_measurements(measurements(num_workers=[4, 9, 5]), catalog=CATALOG)


def test_gpus_per_node_comes_from_the_catalog_when_absent():
    out = validate_measurements(measurements().drop(columns="gpus_per_node"), catalog=CATALOG)
    assert set(out["gpus_per_node"]) == {4}


def test_type_outside_catalog_is_accepted_with_gpus_per_node():
    table = measurements(instance_type=["on-prem-a100"] * 3, gpus_per_node=[8, 8, 8])
    out = validate_measurements(table, catalog=CATALOG)
    assert set(out["gpus_per_node"]) == {8}


def test_type_outside_catalog_without_gpus_per_node_says_how_to_fix():
    table = measurements(instance_type=["g4dn.12xlarg"] * 3).drop(columns="gpus_per_node")
    with pytest.raises(InputError) as err:
        validate_measurements(table, catalog=CATALOG)
    text = str(err.value)
    assert "did you mean 'g4dn.12xlarge'" in text and "gpus_per_node" in text


def test_configs_do_not_need_step_time_but_predictions_need_ordered_intervals():
    configs = measurements().drop(columns="step_time_s")
    assert len(validate_configs(configs, catalog=CATALOG)) == 3
    preds = measurements(step_time_lo=[0.4, 0.8, 0.8], step_time_hi=[0.6, 0.9, 1.0])
    with pytest.raises(InputError, match="step_time_lo <= step_time_s <= step_time_hi"):
        validate_predictions(preds)


def test_empty_table_is_an_input_error():
    with pytest.raises(InputError, match="no rows"):
        validate_measurements(measurements().iloc[:0], catalog=CATALOG)


def jobs(**overrides) -> pd.DataFrame:
    base = {
        "job": ["a", "b"],
        "team": ["vision", "nlp"],
        "instance_type": ["g5.xlarge", "p4d.24xlarge"],
        "pricing": ["Spot", "on-demand"],
        "start": ["2026-11-02T08:00:00Z", "2026-11-03 10:00"],
        "end": ["2026-11-02T10:00:00Z", None],
        "hours": [None, 5.0],
        "num_nodes": [1, 2],
        "cost_usd": [2.0, 327.7],
    }
    base.update(overrides)
    return pd.DataFrame(base)


def test_jobs_ledger_normalises_pricing_and_needs_end_or_hours():
    out = validate_ledger(jobs())
    assert list(out["pricing"]) == ["spot", "on-demand"]
    assert out.attrs["ledger_format"] == "jobs"
    with pytest.raises(InputError, match="end time or hours"):
        validate_ledger(jobs(end=[None, None], hours=[None, 5.0]))
    with pytest.raises(InputError, match="'reserved'.*on-demand, spot"):
        validate_ledger(jobs(pricing=["reserved", "spot"]))


@pytest.mark.parametrize(
    ("columns", "kind"),
    [
        (
            (
                "lineItem/UsageStartDate",
                "lineItem/UsageType",
                "lineItem/UsageAmount",
                "lineItem/UnblendedCost",
            ),
            "cur-legacy",
        ),
        (
            (
                "line_item_usage_start_date",
                "line_item_usage_type",
                "line_item_usage_amount",
                "line_item_unblended_cost",
            ),
            "cur2",
        ),
    ],
)
def test_cur_exports_in_both_naming_schemes_are_recognised(columns, kind):
    start, usage_type, amount, cost = columns
    table = pd.DataFrame(
        {
            start: ["2026-11-01T00:00:00Z"],
            usage_type: ["SpotUsage:g5.xlarge"],
            amount: [1.0],
            cost: [0.42],
        }
    )
    assert validate_ledger(table).attrs["ledger_format"] == kind
    with pytest.raises(InputError, match=cost.replace("/", ".")):
        validate_ledger(table.drop(columns=cost))


def test_did_you_mean_is_empty_when_nothing_is_close():
    assert did_you_mean("zzz", ["g5.xlarge"]) == ""
    assert "g5.xlarge" in did_you_mean("g5.xlarg", ["g5.xlarge", "c5.large"])


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=20))
def test_step_times_are_accepted_exactly_when_positive_and_at_most_a_day(values):
    n = len(values)
    table = pd.DataFrame(
        {
            "model": ["m"] * n,
            "instance_type": ["x"] * n,
            "num_nodes": [1] * n,
            "num_workers": [1] * n,
            "local_bsz": [1] * n,
            "step_time_s": values,
            "gpus_per_node": [1] * n,
        }
    )
    if all(0 < v <= MAX_STEP_S for v in values):
        assert validate_measurements(table)["step_time_s"].tolist() == values
    else:
        with pytest.raises(InputError, match="step_time_s"):
            validate_measurements(table)


def _current_umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_write_table_is_atomic_and_round_trips(tmp_path):
    path = tmp_path / "out" / "m.parquet"
    write_table(measurements(), path)
    assert read_table(path)["step_time_s"].tolist() == [0.5, 0.7, 0.9]
    assert [p.name for p in path.parent.iterdir()] == ["m.parquet"]
    # readable like any other new file (the umask decides), not private to the writer
    assert path.stat().st_mode & 0o777 == 0o666 & ~_current_umask()
    with pytest.raises(InputError, match=r"\.xlsx"):
        write_table(measurements(), tmp_path / "m.xlsx")


def test_a_json_table_writes_dates_and_times_as_iso_8601(tmp_path):
    # before: epoch milliseconds (1717200000000), which no reader takes for a date
    import datetime as dt

    table = pd.DataFrame(
        {
            "day": [dt.date(2024, 6, 1), None],  # what a Parquet date32 column reads as
            "at": pd.to_datetime(["2024-06-01 12:30:05", None]),
            "utc": pd.to_datetime(["2024-06-01 12:30:05.25", None]).tz_localize("UTC"),
            "price": [1.5, float("nan")],
        }
    )
    records = json.loads(write_table(table, tmp_path / "t.json").read_text())
    assert records[0] == {
        "day": "2024-06-01",
        "at": "2024-06-01T12:30:05",
        "utc": "2024-06-01T12:30:05.250000+00:00",
        "price": 1.5,
    }
    assert records[1] == {"day": None, "at": None, "utc": None, "price": None}
    # a JSON document (a report's figures, a search's pick) says them the same way
    doc = {"day": dt.date(2024, 6, 1), "at": [table["at"].to_numpy()[0], pd.NaT]}
    written = json.loads(write_json(doc, tmp_path / "d.json").read_text())
    assert written == {"day": "2024-06-01", "at": ["2024-06-01T12:30:05", None]}


def test_a_json_table_keeps_every_float_and_writes_no_nan(tmp_path):
    table = pd.DataFrame(
        {
            "name": ["a", "b", "c"],
            "tiny": [1.2345678901234567e-13, float("nan"), float("inf")],
            "n": pd.array([1, None, 3], dtype="Int64"),
        }
    )
    path = write_table(table, tmp_path / "t.json")

    def refuse(token):
        raise AssertionError(f"{token} is not JSON")

    records = json.loads(path.read_text(), parse_constant=refuse)
    assert [r["tiny"] for r in records] == [1.2345678901234567e-13, None, None]
    assert [r["n"] for r in records] == [1, None, 3]


def test_a_rewrite_keeps_the_permissions_of_the_file_it_replaces(tmp_path):
    # a model or catalog the user made private (0600) must not come back world-readable
    path = tmp_path / "m.csv"
    write_table(measurements(), path)
    path.chmod(0o600)
    write_table(measurements(), path)
    assert path.stat().st_mode & 0o777 == 0o600
    path.chmod(0o640)
    write_table(measurements(), path)
    assert path.stat().st_mode & 0o777 == 0o640


def test_unreadable_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_table(tmp_path / "nope.csv")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(InputError, match="cannot be read"):
        read_table(bad)


@pytest.mark.parametrize("where", ["folder", "folder.csv"])
def test_a_folder_given_as_a_table_is_said_to_be_a_folder(tmp_path, where):
    # read_table (and load_catalog(path=...)) said "unsupported file type ''" of a folder,
    # or "file not found" of one named like a table
    folder = tmp_path / where
    folder.mkdir()
    with pytest.raises(InputError, match="is a directory, not a file") as err:
        read_table(folder)
    assert str(folder) in str(err.value) and "to fix: give a file name" in str(err.value)


def test_a_table_path_that_is_no_path_is_an_input_error():
    with pytest.raises(InputError, match="must be a file path, got 123"):  # was TypeError
        read_table(123)


def test_a_file_that_is_no_table_says_what_to_give(tmp_path):
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "doc.json").write_text('{"model": "mlp", "sizes": [4, 8], "shifts": [1, 2, 3]}')
    for path in (tmp_path / "empty.csv", tmp_path / "doc.json"):
        with pytest.raises(InputError, match="cannot be read") as err:
            read_table(path)
        assert "; to fix: give a table" in str(err.value)
        with pytest.raises(InputError) as err:
            read_table(path, fix="give the measurements")
        assert str(err.value).endswith("; to fix: give the measurements")


def _one(**overrides) -> pd.DataFrame:
    row = {
        "model": "m",
        "instance_type": "g4dn.12xlarge",
        "num_nodes": 1,
        "num_workers": 2,
        "local_bsz": 8,
        "step_time_s": 0.2,
        "gpus_per_node": 4,
    }
    return pd.DataFrame([{**row, **overrides}])


@pytest.mark.parametrize(
    ("overrides", "column", "words"),
    [
        ({"step_time_s": 1e308}, "step_time_s", "one day"),
        ({"sync_time_s": 86401.0, "step_time_s": 0.1}, "sync_time_s", "one day"),
        ({"sync_time_s": 0.5}, "sync_time_s", "longer than the whole step"),
        ({"placement": "13"}, "placement", "does not describe 2 workers on 1 node;"),
        ({"num_nodes": 2, "num_workers": 3, "placement": "111"}, "placement", "3 workers"),
        ({"gpus_per_node": 8}, "gpus_per_node", "4 GPUs per node in the catalog"),
        ({"gpus_per_node": 8, "placement": "2"}, "gpus_per_node", "num_workers and placement"),
        ({"gpus_per_node": 2}, "gpus_per_node", "what one node holds"),
        ({"num_nodes": 1e20, "num_workers": 1e20}, "num_nodes", "found 1e+20"),
    ],
    ids=[
        "step-1e308",
        "sync-over-a-day",
        "sync-over-step",
        "placement-2",
        "placement-3",
        "gpus-8-of-4",
        "gpus-8-of-4-placed",
        "gpus-2-of-4",
        "nodes-1e20",
    ],
)
def test_implausible_measurements_are_refused_naming_the_column(overrides, column, words):
    catalog = CATALOG.assign(region="us-east-1")
    with pytest.raises(InputError) as err:
        validate_measurements(_one(**overrides), catalog=catalog)
    assert err.value.column == column and words in str(err.value), str(err.value)
    assert "-9.22" not in str(err.value)  # the value as given, never its int64 wrap-around


def test_partial_node_use_is_said_by_workers_and_placement():
    table = _one(num_nodes=2, num_workers=3, placement="12", sync_time_s=0.05)
    out = validate_measurements(table, catalog=CATALOG.assign(region="us-east-1"))
    assert out["gpus_per_node"].tolist() == [4]
    # types outside the catalog, or CPU types in it, keep the gpus_per_node they give
    assert len(validate_measurements(_one(instance_type="local", gpus_per_node=2), catalog=CATALOG))
    assert len(
        validate_measurements(_one(instance_type="c5.large", gpus_per_node=2), catalog=CATALOG)
    )


def test_placements_of_ten_or_more_workers_per_node_are_read_in_groups():
    assert placement_fits("16", 1, 16, 16) and placement_fits("1616", 2, 32, 16)
    assert placement_fits("13", 2, 4, 4) and not placement_fits("13", 2, 4, 2)
    assert not placement_fits("22", 1, 4, 4) and placement_fits("4", 1, 4, 8)


@pytest.mark.parametrize("given", ["file.csv", [1, 2, 3], None])
def test_a_table_that_is_not_a_dataframe_is_one_line_saying_what_to_pass(given):
    with pytest.raises(InputError, match="expected a pandas DataFrame") as err:
        validate_measurements(given)
    if isinstance(given, str):
        assert "read_table" in str(err.value) and "file.csv" in str(err.value)


def test_every_bad_row_is_counted_though_only_the_first_are_kept():
    bad = pd.DataFrame(
        {
            "model": ["bert"] * 30,
            "instance_type": ["g4dn.12xlarge"] * 30,
            "num_nodes": [1] * 30,
            "num_workers": [1] * 30,
            "local_bsz": [8] * 30,
            "step_time_s": ["slow"] * 30,
        }
    )
    with pytest.raises(InputError) as err:
        validate_measurements(bad, catalog=CATALOG)
    assert "index 0, 1, 2, 3, 4 (+25 more)" in str(err.value)
    assert err.value.n_rows == 30 and err.value.rows == list(range(20))


@pytest.mark.parametrize(
    "itype",
    # the reference data's own types outside the catalog, and names like them
    ["azure-ND40rs_v2", "onprem-8xrtx2080ti", "onprem-dgx-a100", "onprem-4xrtx6000"]
    + ["ND40rs_v2", "rtx2080ti", "local-cpu-amd-epyc-2c", "g4dn.12xlarge"],
)
def test_a_type_outside_the_catalog_that_is_no_near_miss_is_fitted_without_a_word(itype):
    import warnings

    from srifty_kit.catalog.query import load_catalog

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = validate_measurements(
            measurements(instance_type=[itype] * 3, gpus_per_node=[4] * 3), catalog=load_catalog
        )
    assert (table["instance_type"] == itype).all()


@pytest.mark.parametrize(
    ("itype", "meant"), [("g4dn.12xlarg", "g4dn.12xlarge"), ("G5.XLARGE", "g5.xlarge")]
)
def test_a_near_miss_of_a_catalog_type_is_fitted_with_a_warning(itype, meant):
    from srifty_kit.catalog.query import load_catalog

    with pytest.warns(UserWarning, match=f"did you mean '{meant}'") as seen:
        validate_measurements(
            measurements(instance_type=[itype] * 3, gpus_per_node=[4] * 3), catalog=load_catalog
        )
    assert len([w for w in seen if itype in str(w.message)]) == 1


def test_a_catalog_validated_again_is_checked_again_once_it_changes():
    # a panel re-validates the same catalog on every control change, so the result for the
    # same content is kept; an edit made between two searches is still caught, and the
    # table handed back is the caller's own to change
    from srifty_kit.catalog.query import load_catalog

    catalog = load_catalog()
    first = validate_catalog(catalog)
    second = validate_catalog(catalog.copy())
    pd.testing.assert_frame_equal(first, second)
    second.loc[second.index[0], "ondemand_usd_per_hr"] = -1.0
    pd.testing.assert_frame_equal(validate_catalog(catalog), first)
    edited = catalog.copy()
    edited.loc[edited.index[0], "ondemand_usd_per_hr"] = -1.0
    with pytest.raises(InputError, match="ondemand_usd_per_hr"):
        validate_catalog(edited)
    twice = pd.concat([catalog, catalog.iloc[:1]], ignore_index=True)
    with pytest.raises(InputError, match="twice"):
        validate_catalog(twice)
