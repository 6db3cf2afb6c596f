"""`srifty search` through the installed console script: the three questions it exists for."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.builders import REPO, run_srifty, run_srifty_into_a_closed_pipe, synthetic_measurements


def srifty(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_srifty(*args, cwd=cwd, timeout=300)


def fit(measurements: Path, tmp: Path) -> Path:
    out = tmp / "model.json"
    done = srifty("fit", "--measurements", str(measurements), "--out", str(out), cwd=tmp)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def synthetic_model(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("synthetic")
    csv = tmp / "measured.csv"
    synthetic_measurements().to_csv(csv, index=False)
    return fit(csv, tmp)


@pytest.fixture(scope="module")
def reference_model(tmp_path_factory) -> Path:
    from srifty_kit.tables.reference import reference_measurements

    path = reference_measurements()
    if not path.is_file():
        pytest.skip(f"reference measurements not found at {path} (set SRIFTY_SHARED)")
    return fit(path, tmp_path_factory.mktemp("reference"))


@pytest.fixture(scope="module")
def sample_model(tmp_path_factory) -> Path:
    """Fitted on the profiles this project's profiler made here (one process and DDP)."""
    tmp = tmp_path_factory.mktemp("sample")
    parts = [pd.read_csv(REPO / "data" / f"sample_profile_{k}.csv") for k in ("single", "dist")]
    pd.concat(parts, ignore_index=True).to_csv(tmp / "measured.csv", index=False)
    return fit(tmp / "measured.csv", tmp)


def ask(model: Path, tmp: Path, workload: str, *extra: str) -> dict:
    done = srifty(
        "search",
        "--model",
        str(model),
        "--workload",
        workload,
        "--format",
        "json",
        "--max-nodes",
        "8",
        *extra,
        cwd=tmp,
    )
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


WORK = {
    "resnet": (
        "--epochs",
        "90",
        "--dataset-size",
        "1281167",
        "--reference-bsz",
        "256",
        "--noise-scale",
        "4096",
        "--local-bsz",
        "16,32,64",
    ),
    "bert": (
        "--samples",
        "2e7",
        "--reference-bsz",
        "96",
        "--noise-scale",
        "2000",
        "--local-bsz",
        "4,8,12",
    ),
    "cnn": (
        "--samples",
        "5e7",
        "--reference-bsz",
        "64",
        "--noise-scale",
        "500",
        "--local-bsz",
        "8,16,32,64",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("which", "workload"), [("synthetic", "resnet"), ("reference", "bert"), ("sample", "cnn")]
)
def test_cli_answers_the_three_questions(request, tmp_path, which, workload):
    model = request.getfixturevalue(f"{which}_model")
    work = WORK[workload]
    # "finish within H hours at 90% confidence as cheaply as possible"
    free = ask(model, tmp_path, workload, *work, "--objective", "time")
    deadline = 3 * free["pick"]["time_hi_h"]
    cheap = ask(
        model,
        tmp_path,
        workload,
        *work,
        "--deadline-h",
        f"{deadline}",
        "--confidence",
        "0.9",
        "--objective",
        "cost",
    )
    assert cheap["feasible"] and cheap["pick"]["time_hi_h"] <= deadline
    assert all(r["time_hi_h"] <= deadline for r in cheap["ranked"])
    # the pick has the least expected cost among those meeting the deadline at 90%
    assert cheap["pick"]["p_meet"] >= 0.9
    assert cheap["pick"]["cost_mean_usd"] == min(r["cost_mean_usd"] for r in cheap["ranked"])
    alt = cheap["cheapest_per_hour"]  # None when the pick is itself the cheapest per hour
    assert alt is None or alt["usd_per_hr"] <= cheap["pick"]["usd_per_hr"]
    assert cheap["binding"] is None
    # "the most throughput I can get for $B"
    budget = 2 * cheap["pick"]["cost_hi_usd"]
    fast = ask(
        model,
        tmp_path,
        workload,
        *work,
        "--budget-usd",
        f"{budget}",
        "--objective",
        "time",
        "--spot",
    )
    assert fast["feasible"] and fast["pick"]["cost_hi_usd"] <= budget
    # ranked in the front's coordinates: the least time at the confidence, a point of the front
    assert fast["pick"]["time_hi_h"] == min(r["time_hi_h"] for r in fast["ranked"])
    assert fast["pick"]["time_hi_h"] == min(r["time_hi_h"] for r in fast["pareto"])
    # "show me the whole tradeoff"
    whole = ask(model, tmp_path, workload, *work, "--objective", "knee", "--spot")
    front = pd.DataFrame(whole["pareto"])
    assert len(front) >= 2 and front["time_hi_h"].is_monotonic_increasing
    assert front["cost_mean_usd"].is_monotonic_decreasing  # the front's axes: pareto.FRONT_*
    assert (front["time_hi_h"] == whole["knee"]["time_hi_h"]).any()


@pytest.mark.slow
def test_table_output_and_csv_file(synthetic_model, tmp_path):
    done = srifty(
        "search",
        "--model",
        str(synthetic_model),
        "--workload",
        "resnet",
        *WORK["resnet"],
        "--deadline-h",
        "100",
        "--out",
        "ranked.csv",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    # listed in the coordinates the panel and notebook 03 draw it in (pareto.FRONT_*)
    front = done.stdout.split("Pareto front of the time at the confidence and the expected cost")
    assert len(front) == 2 and "expected_cost_usd" in front[1].splitlines()[1].split()
    assert (
        "Why not the cheapest per hour" in done.stdout
        or "also the cheapest cluster per hour" in done.stdout
    )
    # what was left out, each reason once with its types (ten Trainium/Inferentia types
    # said "not a GPU" ten times before)
    (left,) = [x for x in done.stdout.splitlines() if x.startswith("left out") and "types:" in x]
    assert left.count("not a GPU") == 1 and "trn1.2xlarge, trn1.32xlarge" in left, left
    ranked = pd.read_csv(tmp_path / "ranked.csv")
    assert {
        "instance_type",
        "num_nodes",
        "num_workers",
        "local_bsz",
        "pricing",
        "time_hi_h",
        "cost_hi_usd",
        "compute_s",
        "sync_s",
        "efficiency",
    } <= set(ranked.columns)


@pytest.mark.slow
def test_the_table_and_the_pick_show_the_expected_cost_they_rank_by(synthetic_model, tmp_path):
    from srifty_kit.decide.explanation import money

    search = ("search", "--model", str(synthetic_model), "--workload", "resnet", *WORK["resnet"])
    asked = (*search, "--deadline-h", "100", "--spot")
    done = srifty(*asked, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    doc = ask(synthetic_model, tmp_path, "resnet", *WORK["resnet"], "--deadline-h", "100", "--spot")
    lines = done.stdout.splitlines()
    head = lines[0].split()
    assert "expected_cost_usd" in head and "cost_usd" not in head
    column = head.index("expected_cost_usd")
    rows = lines[1 : 1 + len(doc["ranked"])]
    shown = [float(line.split()[column]) for line in rows]
    assert shown == sorted(shown)  # the order of the cost shown
    assert shown == [float(f"{r['cost_mean_usd']:.4g}") for r in doc["ranked"]]
    pick = doc["pick"]
    said = next(line for line in lines if line.startswith("Pick ("))
    assert f"expected {money(pick['cost_mean_usd'])}" in said


def _resnet(model) -> tuple[str, ...]:
    """srifty search's arguments for the resnet job on ``model``."""
    return ("search", "--model", str(model), "--workload", "resnet", *WORK["resnet"])


@pytest.mark.slow
def test_csv_into_a_pipe_that_closes_ends_quietly(synthetic_model, tmp_path):
    code, err = run_srifty_into_a_closed_pipe(
        *_resnet(synthetic_model), "--deadline-h", "100", "--format", "csv", cwd=tmp_path
    )
    assert err == "" and code == 141  # `| head -1`: no traceback, 128 + SIGPIPE as cat


@pytest.mark.slow
def test_the_file_asked_for_is_written_before_a_closed_pipe_stops_the_table(
    synthetic_model, tmp_path
):
    out = tmp_path / "ranked.csv"
    code, err = run_srifty_into_a_closed_pipe(
        *_resnet(synthetic_model), "--deadline-h", "100", "--out", str(out), cwd=tmp_path
    )
    assert err == "" and code == 141  # `srifty search ... --out ranked.csv | head`
    ranked = pd.read_csv(out)  # the whole ranking, although the table stopped at once
    assert len(ranked) > 1 and ranked["cost_mean_usd"].is_monotonic_increasing


@pytest.mark.slow
def test_a_step_of_a_second_or_more_is_said_in_seconds(tmp_path):
    slow = synthetic_measurements()
    slow["step_time_s"] *= 100  # steps of 1.5 s to 20 s
    slow.to_csv(tmp_path / "slow.csv", index=False)
    model = fit(tmp_path / "slow.csv", tmp_path)
    done = srifty(
        "search",
        "--model",
        str(model),
        "--workload",
        "resnet",
        "--steps",
        "1000",
        "--reference-bsz",
        "256",
        "--instance-types",
        "g4dn.12xlarge",
        "--local-bsz",
        "64",
        "--max-nodes",
        "1",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    said = next(line for line in done.stdout.splitlines() if "step takes" in line)
    step = said[said.index("step takes") :].split(";")[0]
    assert re.match(r"step takes \d[\d.]* s: compute \d[\d.]* (s|ms), gradient", step), step
    assert "e+" not in said


@pytest.mark.parametrize(
    ("fmt", "out"), [("json", None), ("json", "r.json"), ("csv", None), ("csv", "r.csv")]
)
def test_a_negative_answer_on_stdout_is_the_document_alone_and_says_why(
    synthetic_model, tmp_path, fmt, out
):
    # a script reads stdout whole, so the sentences saying why go to stderr; with --out, a
    # negative answer leaves the file alone and prints the document instead
    more = ("--out", str(tmp_path / out)) if out else ()
    done = srifty(
        "search",
        "--model",
        str(synthetic_model),
        "--workload",
        "resnet",
        *WORK["resnet"],
        "--deadline-h",
        "0.001",
        "--format",
        fmt,
        *more,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert "Infeasible: the deadline binds" in done.stderr
    assert not (out and (tmp_path / out).exists())
    if fmt == "csv":
        (header,) = done.stdout.splitlines()  # the ranked table's columns, no rows
        assert header.startswith("instance_type,") and "p_meet" in header
        return
    doc = json.loads(done.stdout)
    assert not doc["feasible"] and doc["binding"] == "deadline" and doc["pick"] is None
    assert doc["nearest"]["time_hi_h"] > 0.001
    assert doc["infeasible_reason"].startswith("Infeasible")
    assert doc["infeasible_reason"] in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--workload", "resnt", "--samples", "1e6"), "did you mean"),
        (("--workload", "resnet", "--samples", "1e6", "--local-bsz", "16,big"), "--local-bsz"),
        (("--workload", "resnet", "--samples", "1e6", "--instance-types", "g9.huge"), "g9.huge"),
        (("--workload", "resnet", "--samples", "-5"), "--samples"),
        # a .json file is the whole result (--format json); the ranked table is .csv/.parquet
        (("--workload", "resnet", "--samples", "1e6", "--out", "r.json"), "--format json"),
        (
            ("--workload", "resnet", "--samples", "1e6", "--format", "csv", "--out", "r.json"),
            "--format json",
        ),
    ],
)
def test_bad_input_exits_2_with_one_line(synthetic_model, tmp_path, args, needle):
    done = srifty("search", "--model", str(synthetic_model), *args, cwd=tmp_path)
    assert done.returncode == 2
    assert needle in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_search_help_lists_the_options(tmp_path):
    done = srifty("search", "--help", cwd=tmp_path)
    assert done.returncode == 0
    for flag in (
        "--deadline-h",
        "--budget-usd",
        "--confidence",
        "--objective",
        "--spot",
        "--hetero",
        "--max-nodes",
        "--instance-types",
        "--families",
        "--local-bsz",
        "--top",
        "--format",
        "--out",
    ):
        assert flag in done.stdout


def _candidates_file(tmp: Path) -> Path:
    path = tmp / "candidates.csv"
    k = pd.Series([1, 2, 4, 8, 12, 16])
    pd.DataFrame(
        {"instance_type": "g4dn.12xlarge", "num_nodes": k, "num_workers": 4 * k, "local_bsz": 32}
    ).to_csv(path, index=False)
    return path


def _decide(model: Path, tmp: Path, deadline: str, *more: str) -> subprocess.CompletedProcess:
    return srifty(
        "search",
        "--model",
        str(model),
        "--workload",
        "resnet",
        "--samples",
        "2e8",
        "--deadline-h",
        deadline,
        "--candidates",
        str(_candidates_file(tmp)),
        *more,
        cwd=tmp,
    )


def test_search_among_a_candidates_file_writes_the_pick_with_its_probability(
    synthetic_model, tmp_path
):
    out = tmp_path / "r.json"
    done = _decide(synthetic_model, tmp_path, "60", "--format", "json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    pick = doc["pick"]
    for column in ("instance_type", "num_nodes", "num_workers", "local_bsz", "time_h", "cost_usd"):
        assert column in pick
    assert pick["p_meet"] >= 0.9
    assert (pick["num_nodes"], pick["num_workers"]) in {(k, 4 * k) for k in (1, 2, 4, 8, 12, 16)}
    assert doc["n_candidates"] == 6


def test_json_csv_and_the_api_give_the_same_numbers(synthetic_model, tmp_path):
    # a program reading the JSON gets the CSV's numbers and the Python API's, not 10 decimals
    from srifty_kit import Constraints, Job, StepTimeModel, load_catalog, search

    json_out, csv_out = tmp_path / "r.json", tmp_path / "r.csv"
    for fmt, out in (("json", json_out), ("csv", csv_out)):
        done = _decide(synthetic_model, tmp_path, "60", "--suggest-probes", "1", "--format", fmt)
        assert done.returncode == 0, done.stderr
        out.write_text(done.stdout)
    doc = json.loads(json_out.read_text())
    table = pd.read_csv(csv_out)
    api = search(
        StepTimeModel.load(synthetic_model),
        load_catalog(),
        Job("resnet", samples=2e8),
        Constraints(deadline_h=60),
        candidates=pd.read_csv(_candidates_file(tmp_path)),
    ).ranked
    floats = [c for c in api.columns if api[c].dtype.kind == "f"]
    assert "cost_mean_usd" in floats and "p_meet" in floats
    assert len(doc["ranked"]) == len(table) == len(api) > 1
    for got, row, want in zip(doc["ranked"], table.itertuples(), api.itertuples(), strict=True):
        for column in floats:
            assert got[column] == getattr(row, column) == getattr(want, column), column
    assert doc["pick"] == doc["ranked"][0]
    # the probe's figures are the unrounded ones too: 15 or more digits, as Python writes them
    assert any(len(repr(v)) > 13 for v in doc["probes"][0].values() if isinstance(v, float))


def test_probes_asked_for_with_a_csv_on_stdout_are_said_on_stderr(synthetic_model, tmp_path):
    # the CSV holds the ranked table only: the probe has no column there, and before it was
    # computed and shown nowhere
    done = _decide(synthetic_model, tmp_path, "60", "--suggest-probes", "1", "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("instance_type,") and "Measure" not in done.stdout
    (said,) = [x for x in done.stderr.splitlines() if x.startswith(("Measure ", "No short"))]
    assert said.endswith(".")


def test_predictions_written_as_json_hold_the_csvs_numbers(synthetic_model, tmp_path):
    configs = tmp_path / "configs.csv"
    configs.write_text(
        "model,instance_type,num_nodes,num_workers,local_bsz\nresnet,g4dn.12xlarge,3,12,48\n"
    )
    for out in ("p.json", "p.csv"):
        args = ("--model", str(synthetic_model), "--configs", str(configs), "--out", out)
        done = srifty("predict", *args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    (record,) = json.loads((tmp_path / "p.json").read_text())
    row = pd.read_csv(tmp_path / "p.csv").iloc[0]
    for column in ("step_time_s", "step_time_lo", "step_time_hi"):
        assert record[column] == row[column]


def test_a_configuration_listed_twice_is_ranked_once_and_the_repeat_is_said(
    synthetic_model, tmp_path
):
    path = tmp_path / "twice.csv"
    path.write_text(
        "instance_type,num_nodes,num_workers,local_bsz,pricing\n"
        "g4dn.12xlarge,1,4,32,on-demand\n"
        "g4dn.12xlarge,2,8,32,on-demand\n"
        "g4dn.12xlarge,1,4,32,on-demand\n"  # line 4 repeats line 2
        "g4dn.12xlarge,1,4,32,spot\n"  # another pricing: another configuration
    )
    done = _among(synthetic_model, path, tmp_path, "--deadline-h", "1000", "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    ranked = [(r["num_nodes"], r["pricing"]) for r in doc["ranked"]]
    assert sorted(ranked) == [(1, "on-demand"), (1, "spot"), (2, "on-demand")]
    assert doc["n_candidates"] == 3
    (note,) = [line for line in done.stderr.splitlines() if "repeating" in line]
    assert "twice.csv: dropped 1 row repeating a configuration listed before (rows 4)" in note


def _refused(model, tmp_path, text: str) -> str:
    """The one line `srifty search --candidates` refuses a file of ``text`` with (exit 2)."""
    path = tmp_path / "candidates.csv"
    path.write_text(text)
    done = _among(model, path, tmp_path, "--deadline-h", "1000")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    return line


def test_a_bad_row_after_a_repeat_is_named_by_its_own_line_and_alone(synthetic_model, tmp_path):
    # the repeat is dropped only from a table that passed: the refusal names the file's
    # line 4, not the line it would have in the table without the repeat, and is one line
    line = _refused(
        synthetic_model,
        tmp_path,
        "instance_type,num_nodes,num_workers,local_bsz\n"
        "g4dn.12xlarge,1,4,32\n"
        "g4dn.12xlarge,1,4,32\n"
        "g4dn.12xlarge,1,9,32\n",  # line 4: 9 workers on one 4-GPU node
    )
    assert "column 'num_workers', rows 4:" in line


def test_a_candidate_node_holding_more_gpus_than_its_type_is_refused(synthetic_model, tmp_path):
    # a g4dn.12xlarge holds 4 GPUs: 8 workers on one is no configuration to rank or pick
    line = _refused(
        synthetic_model,
        tmp_path,
        "instance_type,num_nodes,num_workers,local_bsz,gpus_per_node\ng4dn.12xlarge,1,8,32,8\n",
    )
    assert "column 'gpus_per_node', rows 2: gpus_per_node 8 for g4dn.12xlarge" in line


def test_a_misspelt_column_is_refused_without_a_note_on_repeats(synthetic_model, tmp_path):
    # without local_bsz, rows differing only in it looked like repeats of each other
    line = _refused(
        synthetic_model,
        tmp_path,
        "instance_type,num_nodes,num_workers,local_bs\n"
        "g4dn.12xlarge,1,4,32\n"
        "g4dn.12xlarge,1,4,64\n",  # not a repeat: another batch
    )
    assert "missing required column 'local_bsz'" in line


def test_an_unanswerable_deadline_exits_1_and_says_what_to_measure(synthetic_model, tmp_path):
    out = tmp_path / "r.json"
    out.write_text('{"older": true}')
    before = out.read_bytes()
    done = _decide(
        synthetic_model,
        tmp_path,
        "8",
        "--format",
        "json",
        "--out",
        str(out),
        "--suggest-probes",
        "2",
    )
    assert done.returncode == 1, done.stderr
    assert out.read_bytes() == before  # a negative answer never replaces an older file
    doc, end = json.JSONDecoder().raw_decode(done.stdout[done.stdout.index("{") :])
    assert doc["pick"] is None
    assert "{" not in done.stdout[done.stdout.index("{") + end :]  # the answer once, not twice
    probes = doc["probes"]
    assert 1 <= len(probes) <= 2
    for key in (
        "num_nodes",
        "num_workers",
        "local_bsz",
        "steps",
        "cost_usd",
        "expected_saving_usd",
    ):
        assert key in probes[0]
    assert probes[0]["expected_saving_usd"] > probes[0]["cost_usd"]
    assert doc["probe_sentence"].startswith("Measure ")
    table = _decide(synthetic_model, tmp_path, "8", "--suggest-probes", "1")
    assert table.returncode == 1 and "Measure " in table.stdout


@pytest.mark.parametrize("k", ["0", "21", "50"])
def test_a_probe_count_out_of_range_is_said_with_its_flag(synthetic_model, tmp_path, k):
    # before: 21 and 50 ran the whole search, then said "k must be a whole number 1..20"
    done = _decide(synthetic_model, tmp_path, "8", "--suggest-probes", k)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert f"argument --suggest-probes: expected a whole number in [1, 20], got {k!r}" in line


def _among(model, candidates, cwd, *extra: str) -> subprocess.CompletedProcess:
    """srifty search among a candidates file (the resnet job; ``extra``: more flags)."""
    args = ("--model", str(model), "--workload", "resnet", "--samples", "2e8", *extra)
    return srifty("search", *args, "--candidates", str(candidates), cwd=cwd)


def test_a_listed_cluster_over_max_nodes_is_left_out_and_said(synthetic_model, tmp_path):
    # before: --max-nodes did not hold for a list, and the 12- or 16-node row could be picked
    done = _decide(synthetic_model, tmp_path, "1000", "--max-nodes", "4", "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["n_candidates"] == 3 and doc["pick"]["num_nodes"] <= 4
    assert {r["num_nodes"] for r in doc["ranked"]} <= {1, 2, 4}
    table = _decide(synthetic_model, tmp_path, "1000", "--max-nodes", "4")
    (line,) = [x for x in table.stdout.splitlines() if x.startswith("left out")]
    assert line.startswith("left out 3 candidates: over the node limit of 4: 8 x g4dn.12xlarge")


def test_a_candidates_file_s_own_columns_reach_the_pick_in_json(synthetic_model, tmp_path):
    path = tmp_path / "quoted.parquet"
    k = pd.Series([1, 2, 4])
    pd.DataFrame(
        {
            "instance_type": "g4dn.12xlarge",
            "num_nodes": k,
            "num_workers": 4 * k,
            "local_bsz": 32,
            "quote": "Q-" + k.astype(str),
            "discount": [0.1, None, 0.3],
        }
    ).to_parquet(path)
    done = _among(synthetic_model, path, tmp_path, "--deadline-h", "1000", "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)  # strict JSON: no NaN where a cell is empty
    assert doc["pick"]["quote"] == f"Q-{doc['pick']['num_nodes']}"
    by_nodes = {r["num_nodes"]: r["discount"] for r in doc["ranked"]}
    assert by_nodes == {1: 0.1, 2: None, 4: 0.3}


def test_a_candidates_file_s_dates_reach_the_json_as_iso_8601(synthetic_model, tmp_path):
    # before: a quote's date and expiry came out as epoch milliseconds (1717200000000)
    import datetime as dt

    path = tmp_path / "dated.parquet"
    k = pd.Series([1, 2])
    pd.DataFrame(
        {
            "instance_type": "g4dn.12xlarge",
            "num_nodes": k,
            "num_workers": 4 * k,
            "local_bsz": 32,
            "quoted_on": [dt.date(2024, 6, 1), dt.date(2024, 6, 2)],
            "valid_until": pd.to_datetime(["2024-07-01 09:00", "2024-07-02 09:00"]),
        }
    ).to_parquet(path)
    done = _among(synthetic_model, path, tmp_path, "--deadline-h", "1000", "--format", "json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    day = doc["pick"]["num_nodes"]
    assert doc["pick"]["quoted_on"] == f"2024-06-0{day}"
    assert doc["pick"]["valid_until"] == f"2024-07-0{day}T09:00:00"
    assert {r["quoted_on"] for r in doc["ranked"]} == {"2024-06-01", "2024-06-02"}


def test_a_bad_candidates_file_is_one_line(synthetic_model, tmp_path):
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"instance_type": ["g4dn.12xlarg"], "num_nodes": [1], "local_bsz": [8]}).to_csv(
        bad, index=False
    )
    done = _among(synthetic_model, bad, tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert "num_workers" in lines[0] or "did you mean" in lines[0]


def test_a_misspelt_candidate_type_is_one_line_and_a_given_catalogs_type_is_searched(
    synthetic_model, tmp_path
):
    from srifty_kit.catalog.query import load_catalog

    rows = {"num_nodes": [1], "num_workers": [4], "local_bsz": [1024]}
    pd.DataFrame({"instance_type": ["g4dn.12xlarg"], **rows}).to_csv(
        tmp_path / "bad.csv", index=False
    )
    done = _among(synthetic_model, tmp_path / "bad.csv", tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "'g4dn.12xlarg'" in line and "did you mean 'g4dn.12xlarge'" in line
    # a type only --catalog lists: searched, and its batch said to lie beyond the measured
    cat = load_catalog()
    own = cat[cat["instance_type"] == "p3.8xlarge"].assign(instance_type="onprem-v100-box")
    pd.concat([cat, own]).to_csv(tmp_path / "cat.csv", index=False)
    pd.DataFrame({"instance_type": ["onprem-v100-box"], **rows}).to_csv(
        tmp_path / "far.csv", index=False
    )
    done = _among(
        synthetic_model, tmp_path / "far.csv", tmp_path, "--catalog", str(tmp_path / "cat.csv")
    )
    assert done.returncode in (0, 1), done.stderr
    assert "local batch 1024 lies more than 8x outside" in done.stdout + done.stderr


def test_a_candidates_file_without_its_columns_is_told_the_candidates_columns(
    synthetic_model, tmp_path
):
    bad = tmp_path / "c.csv"
    bad.write_text("type,nodes,workers,bsz\ng4dn.12xlarge,1,4,32\n")
    done = _among(synthetic_model, bad, tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    fix = line.split("to fix: ")[1]
    # the file's own contract: no model column, and local_bsz is a column, not the flag
    assert "'instance_type', 'num_nodes', 'num_workers', 'local_bsz'" in fix
    assert "'pricing'" in fix and "'gpus_per_node'" in fix
    assert "model" not in fix and "--local-bsz" not in fix


# -- a GPU filter that lands on GPUs without figures ------------------------------------------
def _search(model: Path, tmp: Path, *extra: str) -> subprocess.CompletedProcess:
    args = ("--workload", "resnet", "--samples", "1e7", "--max-nodes", "2", *extra)
    return srifty("search", "--model", str(model), *args, cwd=tmp)


@pytest.mark.slow
@pytest.mark.parametrize("flag", [("--gpu", "A10G"), ("--families", "g5")])
def test_a_filter_on_a_gpu_without_figures_says_why_in_one_line(synthetic_model, tmp_path, flag):
    done = _search(synthetic_model, tmp_path, *flag)
    assert done.returncode == 2, done.stdout
    assert len(done.stderr.strip().splitlines()) == 1
    line = done.stderr
    # which GPU, the catalog's reason, and the two ways out
    assert f"{' '.join(flag)}: the catalog has no GPU figures for the A10G" in line
    assert "no vendor document" in line and "resnet was never measured" in line
    assert "measure one step" in line and "--catalog" in line


@pytest.mark.slow
def test_a_gpu_filter_keeps_the_gpus_it_can_reach_and_names_the_one_it_cannot(
    synthetic_model, tmp_path
):
    done = _search(synthetic_model, tmp_path, "--gpu", "A10G,T4")
    assert done.returncode == 0, done.stderr
    picked = [line for line in done.stdout.splitlines() if line.startswith("Pick")]
    assert picked and "g4dn." in picked[0]  # the T4's family
    left = [line for line in done.stdout.splitlines() if line.startswith("left out the A10G")]
    assert len(left) == 1 and "no vendor document" in left[0] and "--catalog FILE" in left[0]


@pytest.mark.slow
def test_a_gpu_without_figures_is_searched_where_it_was_measured(tmp_path):
    steps = synthetic_measurements()
    steps["instance_type"] = steps["instance_type"].replace({"g6.12xlarge": "g5.12xlarge"})
    steps.to_csv(tmp_path / "measured.csv", index=False)
    model = fit(tmp_path / "measured.csv", tmp_path)
    done = _search(model, tmp_path, "--gpu", "A10G")
    assert done.returncode == 0, done.stderr
    picked = [line for line in done.stdout.splitlines() if line.startswith("Pick")]
    assert picked and "g5.12xlarge" in picked[0]
    # the other A10G types were never measured: said once, with the reason
    assert "left out the A10G" in done.stdout and "g5.xlarge" in done.stdout


@pytest.mark.slow
def test_an_unknown_gpu_model_exits_2_with_did_you_mean(synthetic_model, tmp_path):
    done = _search(synthetic_model, tmp_path, "--gpu", "A10")
    assert done.returncode == 2
    assert "did you mean 'A10G'" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_panels_gpu_filter_says_the_same(synthetic_model):
    """The panel's GPU models, given the model and workload, refuse the A10G the same way."""
    from srifty_kit.catalog.query import load_catalog
    from srifty_kit.decide.choices import panel_constraints
    from srifty_kit.errors import InputError
    from srifty_kit.model.estimator import StepTimeModel

    model, catalog = StepTimeModel.load(synthetic_model), load_catalog()
    settings = dict(deadline_h=None, budget_usd=None, confidence=0.9, max_nodes=2)
    with pytest.raises(InputError, match="GPU models A10G: the catalog has no GPU figures"):
        panel_constraints(
            catalog,
            **settings,
            spot=False,
            mixes=False,
            gpu_models=("A10G",),
            model=model,
            workload="resnet",
        )
    kept = panel_constraints(
        catalog,
        **settings,
        spot=False,
        mixes=False,
        gpu_models=("A10G", "T4"),
        model=model,
        workload="resnet",
    )
    assert any(t.startswith("g4dn.") for t in kept.instance_types)


def test_a_pick_far_beyond_the_measured_batches_is_said_with_what_to_give(
    reference_measurements, tmp_path
):
    # bert measured at local batches 4-12 on 1-2 nodes: the default batches reach 1024, which
    # the search may pick; a step 85x beyond the runs is extrapolated and may not fit in memory
    table = pd.read_csv(reference_measurements)
    table = table[(table["model"] == "bert") & (table["num_nodes"] <= 2)]
    table.to_csv(tmp_path / "bert.csv", index=False)
    done = srifty("fit", "--measurements", "bert.csv", "--out", "bert.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    args = ["--model", "bert.json", "--workload", "bert", "--samples", "3e6"]
    args += ["--reference-bsz", "64", "--deadline-h", "5", "--max-nodes", "4"]
    args += ["--instance-types", "g4dn.12xlarge"]
    done = srifty("search", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "x batch 1024)" in done.stdout  # the pick
    assert "note: the pick's local batch 1024 lies more than 8x outside the batches its " in (
        done.stdout
    )
    assert "(4-12, measured for bert)" in done.stdout and "--local-bsz" in done.stdout
    done = srifty("search", *args, "--local-bsz", "4,8,12", "--deadline-h", "20", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "note: the pick" not in done.stdout
