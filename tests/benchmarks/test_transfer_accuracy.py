"""The cross-GPU transfer benchmark's own bookkeeping: held out means held out."""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pandas as pd
import pytest

from tests.builders import REPO

MIXES = {
    "conv": {
        "tensor": {"flops_per_sample": 2e9, "bytes_per_sample": 5e7},
        "elementwise": {"flops_per_sample": 0.0, "bytes_per_sample": 2e8},
    },
    "mem": {"elementwise": {"flops_per_sample": 0.0, "bytes_per_sample": 4e8}},
}


@pytest.fixture(scope="module")
def bench():
    folder = str(REPO / "benchmarks")
    sys.path.insert(0, folder)  # the script imports its neighbours (common)
    try:
        spec = importlib.util.spec_from_file_location(
            "transfer_accuracy", f"{folder}/transfer_accuracy.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module


def one_gpu_steps(bench, seed: int = 0) -> pd.DataFrame:
    """Two models on three of the accelerators, made by the roofline with 3% noise."""
    rng = np.random.default_rng(seed)
    figs = bench.gpu_figures()
    eff = bench.roofline.Efficiency(np.log(0.5), np.log(0.4), 0.0)
    bsz = np.array([8, 16, 32, 64, 128, 256], float)
    rows = []
    for gpu in ("T4", "V100", "A100"):
        for model, mix in MIXES.items():
            s = bench.roofline._roofline_s(mix, figs[gpu], eff)
            t = (0.02**2 + (bsz * s) ** 2) ** 0.5 * np.exp(rng.normal(0, 0.03, bsz.size))
            rows.append(
                pd.DataFrame({"gpu": gpu, "model": model, "local_bsz": bsz, "step_time_s": t})
            )
    return pd.concat(rows, ignore_index=True)


def test_what_a_target_is_scored_with_never_sees_the_target(bench):
    curves, figs = one_gpu_steps(bench), bench.gpu_figures()
    results, learned = bench.cross_gpu(curves, MIXES, figs)
    changed = curves.copy()
    changed.loc[changed["gpu"] == "A100", "step_time_s"] *= 10.0
    again, relearned = bench.cross_gpu(changed, MIXES, figs)
    assert relearned["A100"] == learned["A100"]
    assert "A100" not in learned["A100"].per_gpu and "A100" not in learned["A100"].basis
    into = results["target"] == "A100"
    for label in ("cold", "fallback"):  # cold predictions into the A100 do not move
        np.testing.assert_allclose(
            results.loc[into, f"{label} pred"], again.loc[into, f"{label} pred"]
        )


def test_every_column_is_scored_on_the_batches_no_update_saw(bench):
    curves, figs = one_gpu_steps(bench), bench.gpu_figures()
    learned = bench.roofline.learn(curves[curves["gpu"] != "A100"], MIXES, figs)
    out = bench.carry_pair(curves, MIXES, figs, learned, "T4", "A100")
    assert set(out["local_bsz"]) == {16, 32, 64, 128} and len(out) == 8
    for label in bench.LABELS:
        assert np.isfinite(out[f"{label} pred"]).all(), label
    assert not np.allclose(out["cold pred"], out["2 steps pred"])  # the update moves it
    scored = bench.scores(out, ["source", "target"])
    assert scored["steps"].iloc[0] == 8 and 0.0 <= scored["cold cover"].iloc[0] <= 1.0
    # the fp32 rule is the source's measured step times the peak ratio, nothing learned
    src = curves[(curves["gpu"] == "T4") & (curves["model"] == "conv")].set_index("local_bsz")
    rule = out[out["model"] == "conv"].set_index("local_bsz")["fp32 peak pred"]
    ratio = figs["T4"].fp32_tflops / figs["A100"].fp32_tflops
    np.testing.assert_allclose(rule, src.loc[rule.index, "step_time_s"] * ratio)
