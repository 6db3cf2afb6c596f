"""The cross-GPU transfer benchmark's own bookkeeping: held out means held out."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from tests.builders import benchmark

MIXES = {
    "conv": {
        "tensor": {"flops_per_sample": 2e9, "bytes_per_sample": 5e7},
        "elementwise": {"flops_per_sample": 0.0, "bytes_per_sample": 2e8},
    },
    "mem": {"elementwise": {"flops_per_sample": 0.0, "bytes_per_sample": 4e8}},
}


@pytest.fixture(scope="module")
def bench():
    return benchmark("transfer_accuracy")


def one_gpu_steps(bench, seed: int = 0, mixes=MIXES, floors=None, noise=0.03) -> pd.DataFrame:
    """The models of ``mixes`` on three of the accelerators, made by the roofline with
    ``noise`` (log sd), each on its floor of ``floors`` (20 ms where not given)."""
    rng = np.random.default_rng(seed)
    figs = bench.gpu_figures()
    eff = bench.roofline.Efficiency(np.log(0.5), np.log(0.4), 0.0)
    bsz = np.array([8, 16, 32, 64, 128, 256], float)
    rows = []
    for gpu in ("T4", "V100", "A100"):
        for model, mix in mixes.items():
            s = bench.roofline._roofline_s(mix, figs[gpu], eff)
            floor = (floors or {}).get(model, 0.02)
            t = (floor**2 + (bsz * s) ** 2) ** 0.5 * np.exp(rng.normal(0, noise, bsz.size))
            rows.append(
                pd.DataFrame({"gpu": gpu, "model": model, "local_bsz": bsz, "step_time_s": t})
            )
    return pd.concat(rows, ignore_index=True)


@pytest.fixture(scope="module")
def carried(bench):
    """The benchmark's cross-GPU carries of the made-up steps: (curves, results, learned)."""
    curves = one_gpu_steps(bench)
    return (curves, *bench.cross_gpu(curves, MIXES, bench.gpu_figures()))


def test_what_a_target_is_scored_with_never_sees_the_target(bench, carried):
    curves, results, learned = carried
    figs = bench.gpu_figures()
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


def test_every_column_is_scored_on_the_batches_no_update_saw(bench, carried):
    curves, results, _ = carried
    out = results[(results["source"] == "T4") & (results["target"] == "A100")]
    assert set(out["local_bsz"]) == {16, 32, 64, 128} and len(out) == 8
    for label in bench.LABELS:
        assert np.isfinite(out[f"{label} pred"]).all(), label
    assert not np.allclose(out["cold pred"], out["2 steps pred"])  # the update moves it
    scored = bench.scores(out, ["source", "target"])
    assert scored["steps"].iloc[0] == 8 and 0.0 <= scored["cold cover"].iloc[0] <= 1.0
    # the fp32 rule scales the source as its fit reads it: the measured step, within noise
    src = curves[(curves["gpu"] == "T4") & (curves["model"] == "conv")].set_index("local_bsz")
    rule = out[out["model"] == "conv"].set_index("local_bsz")["fp32 peak pred"]
    figs = bench.gpu_figures()
    ratio = figs["T4"].fp32_tflops / figs["A100"].fp32_tflops
    np.testing.assert_allclose(rule, src.loc[rule.index, "step_time_s"] * ratio, rtol=0.1)


def test_with_the_rules_constants_the_products_carry_is_the_rule_batch_for_batch(bench, carried):
    curves, _, learned = carried
    # the fallback at bandwidth weight 0 and floor exponent 1, and the op mix given weight 0:
    # the fp32-peak ratio for floor and slope alike, on the path srifty runs
    rule = replace(
        learned["A100"], bandwidth_weight=0.0, fallback_floor_exponent=1.0, mix_weight=0.0
    )
    catalog = bench.gpu_table()
    fits = bench.source_fits(curves[curves["gpu"] == "T4"], MIXES, catalog)
    out = bench.carry_pair(curves, bench.gpu_figures(), fits, rule, catalog, "T4", "A100")
    assert out["route"].str.startswith("fp32-peak rule").all()
    np.testing.assert_allclose(out["cold pred"], out["fp32 peak pred"], rtol=1e-9)
    np.testing.assert_allclose(out["fallback pred"], out["fp32 peak pred"], rtol=1e-9)
    assert "of the 2 source fits kept a per-batch correction" in bench.fits_with_correction(out)


def test_the_op_graph_carry_never_sees_the_target_or_the_model_it_predicts(bench, carried):
    # three models whose floors follow their launches; the A100's constants as cross_gpu
    # learned them without it. The conv model's cold prediction into the A100 must not move
    # when its own steps on the other GPUs are ten times slower: its efficiencies and its
    # cost per launch are learned without it
    _, _, learned = carried
    figs = bench.gpu_figures()
    launches = {"conv": 400.0, "mem": 100.0, "wide": 1600.0}
    mixes = {**MIXES, "wide": MIXES["conv"]}
    mixes = {m: {**mix, "host": {"launches_per_step": launches[m]}} for m, mix in mixes.items()}
    floors = {m: n * 1e-4 for m, n in launches.items()}
    curves = one_gpu_steps(bench, mixes=mixes, floors=floors, noise=0.0)
    slower = curves.copy()
    slower.loc[(slower["model"] == "conv") & (slower["gpu"] != "A100"), "step_time_s"] *= 10.0
    only = {"A100": learned["A100"]}
    frame, moved = bench.graph_alone(curves, mixes, figs, only)
    again, _ = bench.graph_alone(slower, mixes, figs, only)
    assert not moved  # a slower stand-in CPU moves nothing either
    conv = frame["model"] == "conv"
    np.testing.assert_allclose(
        frame.loc[conv, "cold (op graph) pred"], again.loc[conv, "cold (op graph) pred"]
    )
    # while the other models' predictions read the conv's slower rows
    assert not np.allclose(
        frame.loc[~conv, "cold (op graph) pred"], again.loc[~conv, "cold (op graph) pred"]
    )


def test_the_shipped_sync_prior_is_what_the_reference_clusters_teach(bench, reference_measurements):
    # transfer.SYNC_PRIOR is learned from these rows; a change to the learning or the rows
    # that moves it must be shipped with it (the benchmark fails the same way)
    text, stale = bench.sync_section(bench.sync_inputs(reference_measurements.parent))
    assert not stale, text.rsplit("\n\n", 1)[-1]
    assert "| g4dn.12xlarge" in text  # the EC2 cluster is scored held out
