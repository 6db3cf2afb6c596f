"""The cross-GPU transfer benchmark's own bookkeeping: held out means held out."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pandas as pd
import pytest

from tests.builders import REPO

TYPES = ("g4dn.12xlarge", "azure-ND40rs_v2", "onprem-dgx-a100", "onprem-4xrtx6000")


@pytest.fixture(scope="module")
def bench():
    folder = str(REPO / "benchmarks")
    sys.path.insert(0, folder)  # the script imports its neighbours (common, trace_models)
    try:
        spec = importlib.util.spec_from_file_location(
            "transfer_accuracy", f"{folder}/transfer_accuracy.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module


def one_gpu_steps(seed: int = 0) -> pd.DataFrame:
    """Two models on four accelerators: a floor, then linear past a knee, with 3% noise."""
    rng = np.random.default_rng(seed)
    bsz = np.array([8, 16, 32, 64, 128, 256])
    rows = []
    for model, floor, slope in (("m1", 0.02, 4e-4), ("m2", 0.1, 2e-3)):
        for itype, speed in zip(TYPES, (1.0, 2.8, 4.9, 2.1), strict=True):
            t = (floor**1.5 + (slope / speed * bsz) ** 1.5) ** (1 / 1.5)
            rows.append(
                pd.DataFrame(
                    {
                        "model": model,
                        "instance_type": itype,
                        "gpus_per_node": 4,
                        "num_nodes": 1,
                        "num_workers": 1,
                        "local_bsz": bsz,
                        "step_time_s": t * np.exp(rng.normal(0, 0.03, bsz.size)),
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def test_the_shape_a_pair_is_scored_with_never_sees_the_target(bench):
    rows, catalog = one_gpu_steps(), bench.gpu_catalog()
    target = "onprem-dgx-a100"
    shape = bench.held_out_shape(rows, catalog, target)
    # whatever the target measured, the shape its pairs are scored with is the same
    changed = rows.copy()
    changed.loc[changed["instance_type"] == target, "step_time_s"] *= 10.0
    assert bench.held_out_shape(changed, catalog, target) == shape
    assert "onprem-dgx-a100" not in shape.basis and "3 accelerators" in shape.basis


def test_every_column_is_scored_on_the_batches_no_update_saw(bench):
    rows, catalog = one_gpu_steps(), bench.gpu_catalog()
    shape = bench.held_out_shape(rows, catalog, "onprem-4xrtx6000")
    out = bench.carry_pair(rows, catalog, shape, "g4dn.12xlarge", "onprem-4xrtx6000")
    # each model's smallest (one step) and largest (two steps) batch are never scored
    assert set(out["local_bsz"]) == {16, 32, 64, 128}
    assert len(out) == 8
    for label in bench.LABELS:
        assert np.isfinite(out[f"{label} step_time_s"]).all(), label
    for label in ("cold", "1 step", "2 steps"):
        assert (out[f"{label} step_time_lo"] <= out[f"{label} step_time_s"]).all()
    # a measured step moves the prediction: the update is not a no-op
    assert not np.allclose(out["cold step_time_s"], out["2 steps step_time_s"])
    scored = bench.scores(out, ["source", "target"])
    assert scored["steps"].iloc[0] == 8 and 0.0 <= scored["cold cover"].iloc[0] <= 1.0
