"""The roofline carry: invariants of the physics, the update, and the reference pairs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from srifty_kit import InputError
from srifty_kit.model import roofline
from srifty_kit.model.roofline import Efficiency, GpuFigures, Learned
from srifty_kit.tables.reference import reference_measurements

MIX = {  # a conv net's op mix per sample: tensor-bound FLOPs plus memory-bound classes
    "tensor": {"flops_per_sample": 2e9, "bytes_per_sample": 5e7},
    "elementwise": {"flops_per_sample": 0.0, "bytes_per_sample": 2e8},
    "normalisation": {"flops_per_sample": 0.0, "bytes_per_sample": 1e8},
    "optimizer": {"flops_per_sample": 0.0, "bytes_per_sample": 0.0},
    "host": {"flops_per_sample": 0.0, "bytes_per_sample": 1e4},
}
SRC = GpuFigures(8.1, 8.1, 320.0)
BSZ = np.array([8, 16, 32, 64, 128, 256], float)


def learned(**kw) -> Learned:
    base = dict(
        per_gpu={},
        population=Efficiency(np.log(0.6), np.log(0.3), 0.0),
        between_sd=Efficiency(0.2, 0.2, 0.3),
        floor_sd=0.4,
        slope_sd=0.3,
        fallback_slope_sd=0.4,
        step_sd=0.05,
        scale=1.0,
        bandwidth_weight=0.5,
    )
    return Learned(**{**base, **kw})


def steps(floor=0.02, slope=5e-4) -> np.ndarray:
    return (floor**2 + (BSZ * slope) ** 2) ** 0.5 * np.exp(np.linspace(-0.03, 0.03, BSZ.size))


@pytest.mark.parametrize("mix", [MIX, None], ids=["op mix", "fallback"])
def test_a_target_identical_to_the_source_gets_the_source_time(mix):
    t = steps()
    out = roofline.predict_step(mix, SRC, BSZ, t, SRC, learned(), BSZ)
    np.testing.assert_allclose(out["step_time_s"], t, rtol=1e-9)
    between = roofline.predict_step(mix, SRC, BSZ, t, SRC, learned(), [12, 48])
    assert (between["step_time_s"] > t[0]).all() and (between["step_time_s"] < t[3]).all()


@pytest.mark.parametrize("mix", [MIX, None], ids=["op mix", "fallback"])
def test_twice_every_figure_is_faster_but_never_more_than_twice(mix):
    t = steps()
    fast = GpuFigures(*(2 * v for v in SRC))
    out = roofline.predict_step(mix, SRC, BSZ, t, fast, learned(), BSZ)["step_time_s"]
    assert (out < t).all() and (out >= t / 2 - 1e-12).all()
    # the larger the batch, the more of the step is per-sample work, the nearer to 2x
    ratio = (t / out).to_numpy()
    assert np.all(np.diff(ratio) >= -1e-9)


def test_memory_bound_mix_follows_bandwidth_not_flops():
    memory_only = {"elementwise": {"flops_per_sample": 0.0, "bytes_per_sample": 1e9}}
    more_flops = GpuFigures(80.0, 80.0, 320.0)
    t = steps(floor=1e-6, slope=5e-3)  # all slope: nothing hides behind the floor
    out = roofline.predict_step(memory_only, SRC, BSZ, t, more_flops, learned(), BSZ)
    np.testing.assert_allclose(out["step_time_s"], t, rtol=1e-3)
    assert roofline.arithmetic_share(memory_only, SRC) == 0.0
    assert 0 < roofline.arithmetic_share(MIX, SRC) < 1


def test_one_measured_step_moves_the_carry_to_it_and_narrows_it():
    t = steps()
    target = GpuFigures(16.0, 16.0, 600.0)
    cold = roofline.carry(MIX, SRC, BSZ, t, target, learned())
    truth = 1.7 * cold.at(BSZ)["step_time_s"].to_numpy()  # the target is 1.7x slower
    one = cold.update(BSZ[:1], truth[:1])
    two = cold.update(BSZ[[0, -1]], truth[[0, -1]])
    err = [np.mean(np.abs(c.at(BSZ)["step_time_s"] / truth - 1)) for c in (cold, one, two)]
    assert err[0] > err[1] > err[2]
    widths = [c.at(BSZ)["scale"].mean() for c in (cold, one, two)]
    assert widths[0] > widths[1] > widths[2]
    assert "updated by 2 measured step(s)" in two.route and "roofline" in cold.route


def test_interval_is_ordered_and_the_route_is_named():
    out = roofline.carry(None, SRC, BSZ, steps(), GpuFigures(16, 16, 600), learned()).interval(
        [10, 100], 0.9
    )
    assert (out["step_time_lo"] < out["step_time_s"]).all()
    assert (out["step_time_s"] < out["step_time_hi"]).all()
    assert out["route"].iloc[0].startswith("no op mix")


def test_figures_refuse_what_is_not_a_cuda_gpu_or_lacks_figures():
    trn = {"gpu_model": "Trainium", "accelerator_kind": "Neuron", "gpu_fp32_tflops": 47.5}
    with pytest.raises(InputError, match="not a CUDA GPU"):
        roofline.figures(trn)
    with pytest.raises(InputError, match="fp32 peak or memory bandwidth"):
        roofline.figures({"gpu_model": "A10G", "gpu_fp32_tflops": None, "gpu_mem_bw_gbps": 600})
    a100 = {"gpu_fp32_tflops": 19.5, "gpu_tf32_tflops": 156, "gpu_mem_bw_gbps": 1555}
    assert roofline.figures(a100).tensor_tflops == 156
    assert roofline.figures(a100, allow_tf32=False).tensor_tflops == 19.5
    v100 = {"gpu_fp32_tflops": 15.7, "gpu_fp16_tflops": 125, "gpu_mem_bw_gbps": 900}
    assert roofline.figures(v100).tensor_tflops == 15.7  # no TF32 on Volta: fp32 peak
    assert roofline.figures(v100, dtype="fp16").tensor_tflops == 125


def synthetic_curves() -> tuple[pd.DataFrame, dict, dict]:
    """Three models on three GPUs made by the roofline itself with known efficiencies."""
    figs = {
        "a": GpuFigures(8.0, 8.0, 300.0),
        "b": GpuFigures(16.0, 16.0, 900.0),
        "c": GpuFigures(20.0, 150.0, 1500.0),
    }
    mixes = {
        "conv": MIX,
        "mem": {"elementwise": {"flops_per_sample": 0.0, "bytes_per_sample": 4e8}},
        "mixed": {
            "tensor": {"flops_per_sample": 5e8, "bytes_per_sample": 1e7},
            "elementwise": {"flops_per_sample": 0.0, "bytes_per_sample": 2e8},
        },
    }
    eff = Efficiency(np.log(0.5), np.log(0.4), 0.0)
    rows = []
    for g, fig in figs.items():
        for m, mix in mixes.items():
            s = roofline._roofline_s(mix, fig, eff)
            t = (0.01**2 + (BSZ * s) ** 2) ** 0.5
            rows.append(pd.DataFrame({"gpu": g, "model": m, "local_bsz": BSZ, "step_time_s": t}))
    return pd.concat(rows, ignore_index=True), mixes, figs


def test_learning_recovers_the_efficiencies_that_made_the_curves():
    curves, mixes, figs = synthetic_curves()
    fit = roofline.learn(curves, mixes, figs)
    assert np.exp(fit.population.log_arith) == pytest.approx(0.5, rel=0.15)
    assert np.exp(fit.population.log_mem) == pytest.approx(0.4, rel=0.15)
    assert "3 GPUs" in fit.basis and "held-out carries" in fit.basis
    # a carry from a to c with what was learned lands on c's own curve
    c_conv = curves[(curves["gpu"] == "c") & (curves["model"] == "conv")]
    a_conv = curves[(curves["gpu"] == "a") & (curves["model"] == "conv")]
    out = roofline.predict_step(
        mixes["conv"], figs["a"], BSZ, a_conv["step_time_s"], figs["c"], fit, BSZ
    )
    np.testing.assert_allclose(out["step_time_s"], c_conv["step_time_s"], rtol=0.15)


FOUR = {  # three GPUs without tensor cores for fp32 and one with (TF32 above its fp32 peak)
    "a": GpuFigures(8.0, 8.0, 300.0),
    "b": GpuFigures(16.0, 16.0, 900.0),
    "c": GpuFigures(20.0, 150.0, 1500.0),
    "d": GpuFigures(14.0, 14.0, 600.0),
}
SHARE = {"a": 0.9, "b": 0.9, "c": 0.3, "d": 0.9}  # eta_a: c reaches less of its TF32 peak
MATMUL = {"tensor": {"flops_per_sample": 2e10, "bytes_per_sample": 1e7}}


def four_gpu_curves(gpus=tuple(FOUR)) -> tuple[pd.DataFrame, dict]:
    """Curves made by the roofline at ``SHARE``, of the synthetic models, an arithmetic-bound
    one and a host-bound one (its slope 100x its roofline, as ncf's), on ``gpus``."""
    _, mixes, _ = synthetic_curves()
    host = {"tensor": {"flops_per_sample": 1e6, "bytes_per_sample": 1e4}}
    mixes = {**mixes, "matmul": MATMUL, "host": host}
    rows = []
    for g in gpus:
        eff = Efficiency(np.log(SHARE[g]), np.log(0.4), 0.0)
        for m, mix in mixes.items():
            s = roofline._roofline_s(mix, FOUR[g], eff) * (100.0 if m == "host" else 1.0)
            t = (0.01**2 + (BSZ * s) ** 2) ** 0.5
            rows.append(pd.DataFrame({"gpu": g, "model": m, "local_bsz": BSZ, "step_time_s": t}))
    return pd.concat(rows, ignore_index=True), mixes


def test_a_host_bound_model_does_not_pull_each_gpu_back_to_the_population():
    # each GPU keeps the efficiency its GPU-bound models show; before, the host-bound slope
    # dragged every share down and the pooling then shrank them to one (a 0.28, c 0.28)
    curves, mixes = four_gpu_curves()
    fit = roofline.learn(curves, mixes, FOUR)
    eta = {g: float(np.exp(e.log_arith)) for g, e in fit.per_gpu.items()}
    assert eta["c"] == pytest.approx(0.3, rel=0.25)
    assert all(eta[g] == pytest.approx(0.9, rel=0.25) for g in "abd")


def test_a_tensor_core_gpu_never_measured_gets_its_kinds_share_of_its_peak():
    import json

    curves, mixes = four_gpu_curves()
    fit = roofline.learn(curves, mixes, FOUR)
    flops = MATMUL["tensor"]["flops_per_sample"]

    def achieved_tflops(target: GpuFigures, constants: Learned) -> float:
        return flops / roofline.absolute(MATMUL, target, constants)[0] / 1e12

    # a new GPU with tensor cores reaches c's share of its TF32 peak, one without a's of
    # its fp32 peak (before, both got one population's: 0.9 of a TF32 peak)
    assert achieved_tflops(GpuFigures(60.0, 400.0, 3000.0), fit) == pytest.approx(120, rel=0.3)
    assert achieved_tflops(GpuFigures(30.0, 30.0, 900.0), fit) == pytest.approx(27, rel=0.3)
    assert roofline.learned_of(json.loads(json.dumps(roofline.learned_doc(fit)))) == fit
    # learned on GPUs without tensor cores only: nothing says how much of the TF32 peak a
    # tensor-core GPU reaches, so it is put at the geometric middle between no gain over its
    # fp32 peak and the whole of it, at their share (here near c's own 45 TFLOP/s)
    plain = roofline.learn(*four_gpu_curves("abd"), FOUR)
    assert plain.tensor_log_arith is None
    middle = 0.9 * np.sqrt(FOUR["c"].fp32_tflops * FOUR["c"].tensor_tflops)
    assert achieved_tflops(FOUR["c"], plain) == pytest.approx(middle, rel=0.25)


def test_learning_refuses_one_gpu_or_missing_figures():
    curves, mixes, figs = synthetic_curves()
    with pytest.raises(InputError, match="two GPUs"):
        roofline.learn(curves[curves["gpu"] == "a"], mixes, figs)
    with pytest.raises(InputError, match="no figures"):
        roofline.learn(curves, mixes, {"a": figs["a"]})


def test_fallback_is_never_worse_than_the_fp32_rule_on_the_reference_pairs():
    data = reference_measurements()
    if not data.is_file():
        pytest.skip(f"reference measurements not found at {data} (set SRIFTY_SHARED)")
    from tests.builders import benchmark

    bench = benchmark("transfer_accuracy")
    curves, figs = bench.one_gpu_curves(data.parent), bench.gpu_figures()
    mixes = dict.fromkeys(curves["model"].unique())  # no facts: the fallback route
    results, _ = bench.cross_gpu(curves, mixes, figs)
    results["pair"] = results["source"] + " -> " + results["target"]
    pairs = bench.scores(results, ["pair"])
    worse = pairs[pairs["fallback mape"] > pairs["fp32 peak mape"] * (1 + 1e-9)]
    assert worse.empty, worse[["pair", "fallback mape", "fp32 peak mape"]].to_string()


def test_learned_constants_survive_json_and_the_shipped_ones_load():
    import json

    fit = learned(machines={"T4": "g4dn.12xlarge"}, absolute_sd=0.7, basis="test")
    again = roofline.learned_of(json.loads(json.dumps(roofline.learned_doc(fit))))
    assert again == fit
    # a floor band survives; no band (inf) is left out, as strict JSON has no infinity
    banded = replace(fit, graph_band=2.5)
    assert roofline.learned_of(json.loads(json.dumps(roofline.learned_doc(banded)))) == banded
    assert "graph_band" not in roofline.learned_doc(fit)
    # so does a floor weight learned apart; none (the slope's) is left out, as files before it
    apart = replace(fit, mix_weight=0.5, floor_mix_weight=0.25)
    assert roofline.learned_of(json.loads(json.dumps(roofline.learned_doc(apart)))) == apart
    assert "floor_mix_weight" not in roofline.learned_doc(fit)
    own = replace(fit, without_facts={"floor_sd": 0.7, "scale": 1.4, "correlation": 0.3})
    assert roofline.learned_of(json.loads(json.dumps(roofline.learned_doc(own)))) == own
    shipped = roofline.reference_learned()
    assert shipped is not None and "GPUs" in shipped.basis
    assert set(shipped.machines) == set(shipped.per_gpu)
    with pytest.raises(InputError, match="malformed"):
        roofline.learned_of({"per_gpu": {}})


def test_a_host_factor_applies_only_on_the_machine_it_was_learned_on():
    slow_host = Efficiency(np.log(0.6), np.log(0.3), np.log(3.0))
    fit = learned(per_gpu={"T4": slow_host}, machines={"T4": "g4dn.12xlarge"}, mix_weight=1.0)
    t, fast = steps(), GpuFigures(16.0, 16.0, 600.0)
    own = roofline.carry(MIX, SRC, BSZ, t, fast, fit, "T4", None, "g4dn.12xlarge")
    other = roofline.carry(MIX, SRC, BSZ, t, fast, fit, "T4", None, "g4dn.xlarge")
    # carried from the slow host it was learned on, the floor drops by its factor 3
    assert own.floor == pytest.approx(other.floor / 3.0)


def test_an_op_mix_alone_gives_a_slope_and_a_stated_width():
    slope, sd, words = roofline.absolute(MIX, SRC, learned())
    assert slope == pytest.approx(roofline._roofline_s(MIX, SRC, learned().population))
    assert sd > 0 and "no GPU step measured" in words
    with pytest.raises(InputError):
        roofline.absolute({"host": {"bytes_per_sample": 1.0}}, SRC, learned())
    assert roofline.op_mixes_of({"model": "m", "op_mix": MIX}) == {"m": MIX}
    assert roofline.op_mixes_of({"m": {"op_mix": None}}) == {}


def test_a_floor_from_the_op_graph_is_launches_times_the_learned_cost_per_launch():
    # three models whose floors are their launches x 50 us x each GPU's host factor
    curves, mixes, figs = synthetic_curves()
    launches = {"conv": 400.0, "mem": 100.0, "mixed": 1600.0}
    host = {"a": 0.8, "b": 1.0, "c": 1.25}
    rows = []
    for (g, m), c in curves.groupby(["gpu", "model"]):
        slope = roofline._roofline_s(mixes[m], figs[g], Efficiency(np.log(0.5), np.log(0.4), 0))
        floor = launches[m] * 50e-6 * host[g]
        rows.append(c.assign(step_time_s=(floor**2 + (c["local_bsz"] * slope) ** 2) ** 0.5))
    counted = {m: {**mix, "host": {"launches_per_step": launches[m]}} for m, mix in mixes.items()}
    fit = roofline.learn(pd.concat(rows), counted, figs)
    assert fit.launch_s == pytest.approx(50e-6, rel=0.1)
    assert fit.launch_sd < 0.1  # each model, held out of tau, is predicted by the others
    floor, sd, words = roofline.graph_floor(counted["conv"], fit)
    assert floor == pytest.approx(400 * fit.launch_s) and sd == fit.launch_sd
    assert "400 launches" in words
    # a model with recurrent layers gets the spread that counts the recurrent models' misses
    rnn = {**counted["conv"], "host": {"launches_per_step": 400.0, "recurrent_layers": 2.0}}
    wide = replace(fit, launch_sd_recurrent=1.2)
    assert (
        roofline.graph_floor(rnn, wide)[1] == 1.2
        and "recurrent" in roofline.graph_floor(rnn, wide)[2]
    )
    assert roofline.graph_floor(counted["conv"], wide)[1] == fit.launch_sd
    # an op mix from before launches were counted, or constants without them: no floor
    assert roofline.graph_floor(mixes["conv"], fit) is None
    assert roofline.graph_floor(counted["conv"], learned()) is None
    shipped = roofline.reference_learned()
    assert shipped is not None and shipped.launch_s > 0  # the reference models count launches


def test_a_floor_its_source_host_caps_is_held_near_the_op_graphs():
    # a source machine whose input pipeline holds every step to 0.2 s, for a model whose 200
    # launches at 50 us cost 10 ms: the cap is the host's, not the model's
    counted = {**MIX, "host": {**MIX["host"], "launches_per_step": 200.0}}
    fit = learned(launch_s=50e-6, launch_sd=0.4, mix_weight=1.0, graph_band=2.0)
    fast, capped = GpuFigures(16.0, 16.0, 600.0), steps(floor=0.2)
    held = roofline.carry(counted, SRC, BSZ, capped, fast, fit)
    assert held.floor == pytest.approx(200 * 50e-6 * np.exp(2.0 * 0.4))
    assert "moved into it" in held.route
    free = roofline.carry(counted, SRC, BSZ, capped, fast, replace(fit, graph_band=np.inf))
    assert free.floor == pytest.approx(0.2, rel=0.05) and "op graph" not in free.route
    # a floor the op graph explains is carried as it was, and so is one to the same GPU
    near = steps(floor=0.012)
    assert roofline.carry(counted, SRC, BSZ, near, fast, fit).floor == pytest.approx(
        roofline.carry(counted, SRC, BSZ, near, fast, replace(fit, graph_band=np.inf)).floor
    )
    same = roofline.carry(counted, SRC, BSZ, capped, SRC, fit, "T4", "T4")
    assert same.floor == pytest.approx(0.2, rel=0.05)
    # without a launch count there is no op graph floor to hold it to
    assert roofline.carry(MIX, SRC, BSZ, capped, fast, fit).floor == pytest.approx(free.floor)
    # once a step on the target sets the level, the band is not applied
    assert not np.isfinite(fit.measured().graph_band)


def capped_curves() -> tuple[pd.DataFrame, pd.DataFrame, dict, dict]:
    """(clean, capped, op mixes, figures): the synthetic curves with each step's floor its
    200 launches at 50 us, and the same with GPU c's host holding "mem"'s steps to 0.3 s."""
    curves, mixes, figs = synthetic_curves()
    counted = {m: {**mix, "host": {"launches_per_step": 200.0}} for m, mix in mixes.items()}
    made = curves.assign(step_time_s=lambda c: np.hypot(c["step_time_s"], 200 * 50e-6))
    cap = (made["gpu"] == "c") & (made["model"] == "mem")
    capped = made.assign(
        step_time_s=np.where(cap, np.hypot(made["step_time_s"], 0.3), made["step_time_s"])
    )
    return made, capped, counted, figs


def test_learning_holds_a_capped_hosts_floor_only_where_one_is_capped():
    made, capped, counted, figs = capped_curves()
    # clean curves: no band changes a held-out carry, so none is chosen
    assert not np.isfinite(roofline.learn(made, counted, figs).graph_band)
    # carried from c, the cap on "mem" is no one else's floor
    cap = (capped["gpu"] == "c") & (capped["model"] == "mem")
    fit = roofline.learn(capped, counted, figs)
    assert np.isfinite(fit.graph_band)
    src = capped[cap]
    own = made[(made["gpu"] == "a") & (made["model"] == "mem")]["step_time_s"].to_numpy()
    for band in (fit, replace(fit, graph_band=np.inf)):
        out = roofline.predict_step(
            counted["mem"],
            figs["c"],
            BSZ,
            src["step_time_s"],
            figs["a"],
            band,
            BSZ,
            source_gpu="c",
            target_gpu="a",
        )
        err = np.max(np.abs(out["step_time_s"].to_numpy() / own - 1))
        assert (err < 0.35) == np.isfinite(band.graph_band), err


def test_the_band_moves_no_spread_that_the_routes_without_it_share(monkeypatch):
    # the rule without facts and the op graph alone read the same floor sd, scale and
    # correlation as a banded carry; learning a band must leave them as they were without one
    # (the weights the band let through held, so that only the band differs)
    _, capped, counted, figs = capped_curves()
    fit = roofline.learn(capped, counted, figs)
    lam_o = fit.mix_weight if fit.floor_mix_weight is None else fit.floor_mix_weight
    chooses = roofline._minimax_setting

    def weights_held(inner, keys, rule):
        if "floor_mix_weight" in keys:
            return (fit.mix_weight, lam_o, np.inf)
        return chooses(inner, keys, rule)

    monkeypatch.setattr(roofline, "_minimax_setting", weights_held)
    monkeypatch.setattr(roofline, "BAND_GRID", (np.inf,))
    plain = roofline.learn(capped, counted, figs)
    assert np.isfinite(fit.graph_band) and not np.isfinite(plain.graph_band)
    assert fit.floor_mix_weight is not None  # the floor's weight was learned apart
    assert replace(fit, graph_band=np.inf) == plain


def test_correlated_errors_let_one_step_move_the_part_it_does_not_see():
    # a target 1.7x slower overall: one step at the smallest batch (all floor) also moves the
    # slope when the prior says the two move together, and not when it says they are apart
    t = steps()
    target = GpuFigures(16.0, 16.0, 600.0)
    apart = roofline.carry(MIX, SRC, BSZ, t, target, learned())
    together = roofline.carry(MIX, SRC, BSZ, t, target, learned(correlation=0.9))
    assert apart.prior_cov[0, 1] == 0 and together.prior_cov[0, 1] > 0
    truth = 1.7 * apart.at(BSZ)["step_time_s"].to_numpy()
    err = [
        np.abs(c.update(BSZ[:1], truth[:1]).at(BSZ[-1:])["step_time_s"].iloc[0] / truth[-1] - 1)
        for c in (apart, together)
    ]
    assert err[1] < err[0]


def test_the_one_step_batch_is_the_one_nearest_the_learned_position():
    carry = roofline.carry(MIX, SRC, BSZ, steps(), SRC, learned(probe_quantile=0.5))
    assert carry.probe_batch([256, 8, 32, 64, 16]) == 32  # sqrt(8 * 256) = 45: 32 is nearest
    assert roofline.carry(MIX, SRC, BSZ, steps(), SRC, learned()).probe_batch(BSZ) == 8
    with pytest.raises(InputError, match="no batch to measure at"):
        carry.probe_batch([])


@pytest.mark.parametrize(("floor_err", "slope_err", "best"), [(0.0, 0.5, 1.0), (0.5, 0.0, 0.0)])
def test_the_one_step_position_goes_where_the_carry_is_wrong(floor_err, slope_err, best):
    # held-out carries whose slope (or floor) alone is off: one step where the step is all
    # slope (the largest batch) or all floor (the smallest) puts every other step right
    share = 1.0 / (1.0 + (BSZ / 32.0) ** 2)  # floor share, falling with the batch
    resid = share * floor_err + (1 - share) * slope_err
    rows = pd.DataFrame(
        [
            {"source": s, "target": "t", "share": share, "resid": resid, "bsz": BSZ}
            for s in ("a", "b")
        ]
    )
    errs = roofline._probe_error(rows, np.diag([0.5**2, 0.5**2]), 0.03)
    assert min(errs, key=errs.get) == best
    assert errs[best] < 0.5 * errs[1.0 - best]  # the other end leaves twice the error


def test_after_a_measured_step_the_weight_that_carries_the_shape_is_chosen():
    # held-out carries under two op-mix weights: lambda 0 gets the level right and the shape
    # wrong (too high at small batches, too low at large), lambda 1 the shape right and the
    # level 30% off. Cold, the level is what counts (the cold choice would take lambda 0);
    # after one measured step the level is the step's, and lambda 1 leaves no error
    share = 1.0 / (1.0 + (BSZ / 32.0) ** 2)
    rows = []
    for source in ("a", "b", "c"):
        shape_wrong = 0.15 * share - 0.15 * (1 - share)
        rows += [
            {"mix_weight": 0.0, "floor_err": 0.15, "slope_err": -0.15, "resid": shape_wrong},
            {"mix_weight": 1.0, "floor_err": 0.3, "slope_err": 0.3, "resid": np.full(6, 0.3)},
        ]
        rows[-2:] = [
            {**r, "source": source, "target": "t", "share": share, "bsz": BSZ} for r in rows[-2:]
        ]
    carries = pd.DataFrame(rows)
    cold = roofline._best_mean(carries, "mix_weight")
    after = roofline._after_step(carries, 0.03, 0.9)
    assert cold == 0.0 and after["mix_weight"] == 1.0
    assert after["correlation"] == max(roofline.CORRELATION_GRID)  # floor and slope move as one
    # its scale covers 90% of the steps one measured step leaves, so it is positive and finite
    assert 0 < after["scale"] < 10
    fit = learned(mix_weight=0.0, after_step=after)
    assert fit.measured().mix_weight == 1.0 and fit.measured().after_step == {}
    assert roofline._after_step(carries.iloc[:0], 0.03, 0.9) == {}


def test_the_constants_after_a_step_survive_json_and_a_misspelt_one_is_refused():
    import json

    fit = learned(after_step={"mix_weight": 1.0, "scale": 1.3, "probe_quantile": 0.5})
    doc = json.loads(json.dumps(roofline.learned_doc(fit)))
    assert roofline.learned_of(doc) == fit
    # the one-step batch is the one the carry that reads the step wants
    assert roofline.probe_batch([8, 16, 32, 64, 128, 256], fit) == 32
    doc["after_step"] = {"mix_wieght": 1.0}
    with pytest.raises(InputError, match="malformed roofline constants.*mix_wieght"):
        roofline.learned_of(doc)


def test_the_floor_carries_at_its_own_weight_and_the_slope_at_lambda():
    # log O_t = lambda_O log O_roofline + (1 - lambda_O) log O_fallback, the slope at lambda:
    # on a host four times slower, the roofline's floor is 4x the source's, the rule's 1x
    slow_host = Efficiency(0.0, 0.0, np.log(4.0))
    fit = learned(per_gpu={"T4": slow_host}, mix_weight=1.0, fallback_floor_exponent=1.0)
    t = steps()

    def carried(**weights):  # to the source's own figures: only the host differs
        return roofline.carry(MIX, SRC, BSZ, t, SRC, replace(fit, **weights), None, "T4")

    both, floor_apart = carried(), carried(floor_mix_weight=0.5)
    src_floor = roofline.fit_curve(BSZ, t)[0]
    assert both.floor == pytest.approx(4.0 * src_floor)
    assert floor_apart.floor == pytest.approx(2.0 * src_floor)  # half way, in logs
    assert floor_apart.slope == pytest.approx(both.slope)
    assert "the floor's 0.50" in floor_apart.route and "the floor's" not in both.route
    # once a step sets the level, one weight carries the shape
    assert fit.measured().floor_mix_weight is None
    assert replace(fit, floor_mix_weight=0.5).measured().floor_mix_weight is None


def test_the_route_without_facts_keeps_its_own_interval_whatever_the_op_mix_weighs(
    monkeypatch,
):
    # the fallback's spreads are calibrated on its own carries, as they are when the op mix
    # has no weight: learning a weight for the op mix moves no interval of a fit without facts
    _, capped, counted, figs = capped_curves()
    fit = roofline.learn(capped, counted, figs)
    assert fit.mix_weight > 0 and fit.without_facts
    monkeypatch.setattr(roofline, "LAMBDA_GRID", (0.0,))
    monkeypatch.setattr(roofline, "BAND_GRID", (np.inf,))
    plain = roofline.learn(capped, counted, figs)
    assert plain.mix_weight == 0.0
    for name in ("floor_sd", "scale", "correlation"):
        assert fit.without_facts[name] == pytest.approx(getattr(plain, name), rel=0.02), name
    # a carry without facts reads them; one with facts reads the op mix's
    own = fit.without_facts
    bare = roofline.carry(None, figs["c"], BSZ, steps(), figs["a"], fit, "c", "a")
    assert np.sqrt(bare.prior_cov[0, 0]) == pytest.approx(own["scale"] * own["floor_sd"])
    mixed = roofline.carry(counted["mem"], figs["c"], BSZ, steps(), figs["a"], fit, "c", "a")
    assert np.sqrt(mixed.prior_cov[0, 0]) == pytest.approx(fit.scale * fit.floor_sd)
