"""Distributed measurements over a real gloo process group on 127.0.0.1: what is measured."""

from __future__ import annotations

import os
import subprocess

import pytest

from srifty_kit import InputError
from srifty_kit.measure import host
from srifty_kit.measure.distributed.profile import profile_distributed
from srifty_kit.tables.contracts import validate_measurements
from srifty_kit.tables.files import read_table
from tests.builders import REPO, SRIFTY

pytestmark = pytest.mark.slow
QUIET = {"progress": False, "warmup": 1, "min_steps": 3, "device": "cpu"}


def test_ddp_steps_and_all_reduce_at_world_sizes_2_and_4(tmp_path):
    out, coll_out = tmp_path / "d.csv", tmp_path / "c.parquet"
    result = profile_distributed(
        "mlp",
        [2, 4],
        [4],
        max_seconds=6,
        sizes_bytes=[1024, 1 << 20],
        out=out,
        collectives_out=coll_out,
        **QUIET,
    )
    steps = validate_measurements(read_table(out))
    assert sorted(steps["num_workers"].unique()) == [2, 4]
    assert (steps["num_nodes"] == 1).all() and (steps["local_bsz"] == 4).all()
    assert set(steps["placement"]) == {"2", "4"}
    assert (steps["step_time_s"] > 0).all()
    assert (steps["sync_time_s"] >= 0).all() and (steps["compute_time_s"] > 0).all()
    # the all-reduce part never exceeds the step it belongs to
    assert (steps["sync_time_s"] <= steps["step_time_s"]).all()
    assert (steps["backend"] == "gloo").all()
    assert steps["grad_bytes"].iloc[0] == 4 * steps["param_count"].iloc[0]
    coll = read_table(coll_out)
    assert set(coll["world_size"]) == {2, 4}
    assert set(coll["bytes"]) == {1024, 1 << 20}
    assert (coll["seconds"] > 0).all()
    for _, group in coll.groupby(["world_size", "bytes"]):
        assert list(group["repeat"]) == list(range(len(group)))  # every sample kept
    assert len(result.collectives) == len(coll)


def test_each_call_is_one_run_that_a_fit_tells_apart(tmp_path):
    # without a run id, two calls' steps of one configuration read as one run, and the fit
    # cannot tell one step's spread about its run's mean from the spread between runs
    import pandas as pd

    from srifty_kit.model.intervals import run_variance

    calls = [profile_distributed("mlp", [2], [4], max_seconds=2, **QUIET) for _ in range(2)]
    ids = [set(c.measurements["run"]) for c in calls]
    assert all(len(i) == 1 for i in ids) and ids[0] != ids[1]
    both = run_variance(pd.concat([c.measurements for c in calls], ignore_index=True))
    assert both["runs_by"].iloc[0] == "run" and both["runs"].iloc[0] == 2
    assert both["within_sd"].iloc[0] > 0


def test_world_size_over_what_the_machine_runs_is_an_input_error():
    too_many = host.max_world_size("cpu") + 1
    with pytest.raises(InputError, match=f"world size {too_many} is more than"):
        profile_distributed("mlp", [2, too_many], [4], **QUIET)
    with pytest.raises(InputError, match="world size"):
        profile_distributed("mlp", [0], [4], **QUIET)
    with pytest.raises(InputError, match="unknown model"):
        profile_distributed("resnet9000", [2], [4], **QUIET)


def test_torchrun_runs_the_same_entry_point(tmp_path):
    out = tmp_path / "d.csv"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [
            str(REPO / ".venv/bin/torchrun"),
            "--standalone",
            "--nproc-per-node",
            "2",
            "--no-python",
            SRIFTY,
            "profile-dist",
            "--model",
            "mlp",
            "--batch-sizes",
            "4",
            "--max-seconds",
            "3",
            "--device",
            "cpu",
            "--quiet",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    steps = validate_measurements(read_table(out))
    assert (steps["num_workers"] == 2).all() and (steps["num_nodes"] == 1).all()
    assert (steps["placement"] == "2").all()
