"""Transfer to instance types never measured: catalog figures, wide intervals that narrow."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from srifty_kit import InputError, StepTimeModel, load_catalog
from srifty_kit.model import roofline
from srifty_kit.model.device_curve import (
    DEFAULT_SHAPE,
    DeviceCurve,
    fit_curve,
    learn_shape,
    measured_compute,
    speed,
)
from srifty_kit.model.groups import GroupFit
from srifty_kit.model.physics import StepParams, simulate, step_time
from srifty_kit.model.posterior import LogBeliefs
from srifty_kit.model.transfer import (
    HOST_FLOOR_MIN_S,
    HOST_FLOPS,
    HOST_RATIO,
    STEP_NOISE,
    SYNC_PRIOR,
    SyncPrior,
    TransferFit,
    build_transfer,
    learn_network_ratio,
    learn_sync_prior,
    ring_seconds,
)
from srifty_kit.tables.contracts import validate_catalog
from srifty_kit.tables.reference import shared_dir
from tests.builders import REPO

SOURCE = StepParams(0.02, 0.004, 0.001, 0.02, 0.002, 0.15, 0.3, 1.0)


def catalog() -> pd.DataFrame:
    """Three GPU types and a CPU type with the figures the transfer reads (T4, V100, A10G)."""
    rows = [
        ("g4dn.12xlarge", 4, 50.0, 65.0, 8.1, 320.0, "T4"),
        ("p3.8xlarge", 4, 10.0, 125.0, 15.7, 900.0, "V100"),
        ("g5.12xlarge", 4, 40.0, None, None, None, "A10G"),  # figures unknown: never guessed
        ("c7i.8xlarge", 0, 12.5, None, None, None, None),
    ]
    table = pd.DataFrame(
        [
            {
                "instance_type": t,
                "region": "us-east-1",
                "vcpus": 32,
                "memory_gib": 128.0,
                "gpu_count": g,
                "gpu_model": gpu,
                "gpu_memory_gib": 16.0,
                "network_gbps": net,
                "efa_supported": False,
                "ondemand_usd_per_hr": 3.0,
                "spot_usd_per_hr": 1.0,
                "spot_interruption_bucket": "<5%",
                "gpu_fp16_tflops": f16,
                "gpu_fp32_tflops": f32,
                "gpu_mem_bw_gbps": bw,
                "source": "test",
            }
            for t, g, net, f16, f32, bw, gpu in rows
        ]
    )
    return validate_catalog(table)


def shapes(max_nodes: int, bsz=(8, 16, 32)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pairs = [(k, n) for k in range(1, max_nodes + 1) for n in range(k, 4 * k + 1)]
    k, n = (np.array(a) for a in zip(*pairs, strict=True))
    bsz = np.asarray(bsz)
    kk, bb = np.meshgrid(np.arange(k.size), bsz, indexing="ij")
    return k[kk.ravel()], n[kk.ravel()], bb.ravel()


def table(
    params: StepParams, itype: str, max_nodes: int, seed: int = 0, bsz=(8, 16, 32), **extra
) -> pd.DataFrame:
    sim = simulate(params, *shapes(max_nodes, bsz), noise=0.03, seed=seed)
    return pd.DataFrame(sim).assign(model="resnet", instance_type=itype, gpus_per_node=4, **extra)


@pytest.fixture(scope="module")
def source_model() -> StepTimeModel:
    """Three batch sizes measured: a device curve, carried along it."""
    return StepTimeModel().fit(table(SOURCE, "g4dn.12xlarge", 2), catalog=catalog())


@pytest.fixture(scope="module")
def line_model() -> StepTimeModel:
    """Two batch sizes measured: no device curve, carried by the catalog's ratios."""
    return StepTimeModel().fit(table(SOURCE, "g4dn.12xlarge", 2, bsz=(8, 32)), catalog=catalog())


def width(pred: dict) -> np.ndarray:
    return np.log(pred["step_time_hi"] / pred["step_time_lo"])


def test_without_facts_a_type_never_measured_takes_the_fp32_peak_rule(line_model):
    bsz = 2 ** np.arange(0, 16)
    args = ("resnet", "g4dn.12xlarge", 1, 1, bsz)
    here = line_model.predict_arrays(*args)["compute_s"]
    there = line_model.predict_arrays("resnet", "p3.8xlarge", *args[2:], catalog=catalog())
    # the shipped roofline constants chose the fp32-peak ratio (8.1 -> 15.7 TFLOP/s) for the
    # whole compute step: no blend beat it on every held-out pair of reference GPUs
    np.testing.assert_allclose(there["compute_s"] / here, 8.1 / 15.7, rtol=1e-9)
    assert (width(there) > width(line_model.predict_arrays(*args))).all()  # less sure
    shown = line_model.explain(
        pd.DataFrame(
            {
                "model": ["resnet"] * 2,
                "instance_type": ["g4dn.12xlarge", "p3.8xlarge"],
                "num_nodes": 1,
                "num_workers": 1,
                "local_bsz": 8,
            }
        )
    )
    assert shown["route"].tolist() == ["measured: its own run", "fp32-peak rule"]


def test_without_the_roofline_constants_device_work_moves_by_the_ratios():
    fit = build_transfer(SOURCE, "g4dn.12xlarge", "p3.8xlarge", catalog(), constants=None)
    bsz = 2.0 ** np.arange(0, 16)
    here = SOURCE.alpha_c + SOURCE.beta_c * bsz
    there = fit.predict(1, 1, bsz, 1, 0.9)["compute_s"]
    # the device part moves between the fp32 peak (8.1 -> 15.7 TFLOP/s) and the memory
    # bandwidth (320 -> 900 GB/s) speed-ups: their geometric mean
    speedup = np.sqrt(15.7 / 8.1 * 900 / 320)
    ratio = there / here
    assert (ratio <= 1.0 + 1e-12).all() and (ratio >= 1.0 / speedup - 1e-12).all()
    assert ratio[-1] == pytest.approx(1.0 / speedup, rel=0.01)  # device-bound: all of it moves
    assert np.diff(ratio).max() <= 1e-12  # the larger the batch, the more of the step moves
    assert there.min() >= SOURCE.alpha_c  # the host floor does not shrink
    assert fit.route == "fp32/bandwidth ratio"


def test_without_a_curve_a_type_with_the_source_figures_gets_the_source_prediction_back(
    line_model,
):
    cat = catalog()
    twin = cat[cat["instance_type"] == "g4dn.12xlarge"].assign(instance_type="g4dn.twin")
    cat = pd.concat([cat, twin], ignore_index=True)
    k, n, b = shapes(3)
    # the source's fitted physics (predict returns the runs themselves where measured)
    here = line_model.groups_["resnet", "g4dn.12xlarge"].physics(k, n, b, np.ceil(n / k), 0.9)
    there = line_model.predict_arrays("resnet", "g4dn.twin", k, n, b, catalog=cat)
    for key in ("step_time_s", "compute_s", "sync_s"):
        np.testing.assert_allclose(there[key], here[key], rtol=1e-9)
    # also when the host floor was raised above a fitted intercept, at the batches measured
    small = SOURCE._replace(alpha_c=2e-5, beta_c=1e-4)
    carried = build_transfer(small, "g4dn.12xlarge", "g4dn.twin", cat, min_bsz=8, constants=None)
    assert carried.base.alpha_c == HOST_FLOOR_MIN_S
    np.testing.assert_allclose(
        carried.predict(k, n, b, np.ceil(n / k), 0.9)["step_time_s"],
        step_time(small, k, n, b, np.ceil(n / k))[0],
        rtol=1e-9,
    )


def test_without_memory_bandwidth_device_work_moves_with_peak_alone(line_model):
    cat = catalog()
    cat["gpu_mem_bw_gbps"] = np.nan  # the target's is unknown (the source's was kept)
    args = ("resnet", "g4dn.12xlarge", 1, 1, np.array([8, 32, 1 << 16]))
    here = line_model.predict_arrays(*args)["compute_s"]
    there = line_model.predict_arrays("resnet", "p3.8xlarge", *args[2:], catalog=cat)
    assert there["compute_s"][-1] == pytest.approx(here[-1] * 8.1 / 15.7, rel=0.01)
    assert (there["compute_s"] >= here * 8.1 / 15.7).all()


def test_slower_network_makes_multi_node_sync_slower(source_model):
    here = source_model.predict_arrays("resnet", "g4dn.12xlarge", 2, 8, 16)
    there = source_model.predict_arrays("resnet", "p3.8xlarge", 2, 8, 16, catalog=catalog())
    assert there["sync_s"] == pytest.approx(here["sync_s"] * 50 / 10, rel=1e-9)


def test_interval_narrows_as_measurements_of_the_target_arrive(source_model):
    true = SOURCE._replace(alpha_c=0.01, beta_c=0.0014, bw_inter=0.9, lat_inter=0.004)
    measured = table(true, "p3.8xlarge", 2, seed=3).sample(frac=1.0, random_state=0)
    carried = source_model._transfer("resnet", "p3.8xlarge", catalog())
    cfg = shapes(4)
    widths, errors = [], []
    for seen in (0, 3, 12, 40):
        fit = carried.update(measured.iloc[:seen]) if seen else carried
        pred = fit.predict(*cfg, np.ceil(cfg[1] / cfg[0]), 0.9)
        widths.append(width(pred).mean())
        truth = simulate(true, *cfg, noise=0.0)["step_time_s"]
        errors.append(np.mean(np.abs(np.log(pred["step_time_s"] / truth))))
    assert all(a > b for a, b in zip(widths, widths[1:], strict=False))
    assert errors[-1] < errors[0]


def test_thinly_measured_type_is_carried_over_and_updated_at_fit():
    rows = table(SOURCE._replace(beta_c=0.002), "p3.8xlarge", 1, seed=4).iloc[:4]
    both = pd.concat([table(SOURCE, "g4dn.12xlarge", 2), rows])
    with pytest.warns(UserWarning, match="updated with 4 measured steps"):
        model = StepTimeModel().fit(both, catalog=catalog())
    assert "transfer" in model.fixed_terms_["resnet/p3.8xlarge"]
    unmeasured = StepTimeModel().fit(table(SOURCE, "g4dn.12xlarge", 2), catalog=catalog())
    args = ("resnet", "p3.8xlarge", 1, 1, 16)
    assert width(model.predict_arrays(*args)) < width(
        unmeasured.predict_arrays(*args, catalog=catalog())
    )


def cpu_profile(
    alpha: float, beta: float, flops: float, grad_bytes: float, name: str = "resnet"
) -> StepTimeModel:
    """A model fitted on one-worker steps of a CPU outside the catalog, with profile facts."""
    cpu = SOURCE._replace(alpha_c=alpha, beta_c=beta)
    profile = table(cpu, "local-cpu-amd-epyc-2c", 1).query("num_workers == 1")
    profile = profile.assign(
        model=name, flops_per_sample=flops, grad_bytes=grad_bytes, gpus_per_node=1
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no multi-worker rows: terms fixed, said in a warning
        return StepTimeModel().fit(profile)


def test_cpu_profile_is_carried_to_a_gpu_type_with_wide_intervals():
    flops, alpha = 1.2e9, 0.01
    model = cpu_profile(alpha, 0.05, flops, 4.5e7)  # a slow CPU: 50 ms per sample
    pred = model.predict_arrays(
        "resnet", "g4dn.12xlarge", np.array([1, 2, 4]), np.array([1, 8, 16]), 32, catalog=catalog()
    )
    assert np.isfinite(pred["step_time_s"]).all()
    # the GPU is faster than the CPU measured, and the interval spans well over a factor 2
    assert pred["compute_s"][0] < 0.01 + 0.05 * 32
    assert (pred["step_time_hi"] / pred["step_time_lo"] > 2.0).all()
    # the interval holds the step at any device efficiency within the prior's one-sd band,
    # the host floor at its median, the two overlapped
    for eff in (0.2, 0.8):
        device = flops * 32 / (8.1e12 * eff)
        t = np.hypot(alpha, device)
        assert pred["step_time_lo"][0] < t < pred["step_time_hi"][0]


# the demo's MLP profiled on this 2-core CPU: ~1 ms fixed per step, ~37 us per sample,
# 2.1 MFLOP per sample, 1.6 MB of gradients (data/sample_profile_single.csv)
MLP = (1.0e-3, 3.7e-5, 2.13e6, 1.6e6)
GPU_TYPES = [
    t
    for t, g, f, k in load_catalog()[
        ["instance_type", "gpu_count", "gpu_fp32_tflops", "accelerator_kind"]
    ].itertuples(index=False)
    if g > 0 and f > 0 and k == "GPU"
]  # CUDA GPUs: the roofline routes carry only between them (Neuron keeps the ratio route)


@pytest.fixture(scope="module")
def mlp_model() -> StepTimeModel:
    return cpu_profile(*MLP, name="mlp")


def test_a_small_model_profiled_on_a_cpu_never_steps_faster_than_its_host_floor_on_a_gpu(
    mlp_model,
):
    alpha = mlp_model.groups_[("mlp", "local-cpu-amd-epyc-2c")].params.alpha_c
    floor_lo = alpha * host_low_end("local-cpu")
    bsz = np.array([1, 2, 8, 64])
    for itype in GPU_TYPES:
        pred = mlp_model.predict_arrays("mlp", itype, 1, 1, bsz, level=0.9)
        # tens of microseconds at least, whatever the accelerator: a step pays its host work
        assert (pred["step_time_s"] >= alpha).all(), itype
        assert (pred["step_time_lo"] >= floor_lo * (1 - 1e-12)).all(), itype
        assert (pred["step_time_lo"] <= pred["step_time_s"]).all()
        assert (pred["step_time_s"] <= pred["step_time_hi"]).all()


def test_a_profile_of_one_batch_size_still_carries_a_host_floor():
    # one batch size: the intercept cannot be fitted and is fixed at 0
    model = cpu_profile(0.01, 0.05, 1.2e9, 4.5e7)
    rows = table(SOURCE._replace(alpha_c=0.01, beta_c=0.05), "local-cpu-amd-epyc-2c", 1)
    rows = rows.query("num_workers == 1 and local_bsz == 16")
    rows = rows.assign(flops_per_sample=2e6, grad_bytes=1.6e6, gpus_per_node=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(rows)
    assert model.groups_[("resnet", "local-cpu-amd-epyc-2c")].params.alpha_c == 0.0
    pred = model.predict_arrays("resnet", "p4d.24xlarge", 1, 1, np.array([1, 16]))
    assert (pred["step_time_s"] >= HOST_FLOOR_MIN_S).all()
    assert "host floor" in model._transfer("resnet", "p4d.24xlarge", None).notes[0]


def test_steps_measured_quicker_than_eager_host_work_are_believed():
    # a CUDA-graph step: 20 us at batch 1 on the source; the assumed eager floor gives way
    graphed = SOURCE._replace(alpha_c=1.5e-5, beta_c=5e-6)
    fit = build_transfer(graphed, "g4dn.12xlarge", "p3.8xlarge", catalog(), min_bsz=1)
    assert fit.predict(1, 1, 1, 1, 0.9)["step_time_s"] < 2e-5


gpu_pairs = st.tuples(st.sampled_from(GPU_TYPES), st.sampled_from(GPU_TYPES))
sources = st.builds(
    lambda a, b: SOURCE._replace(alpha_c=a, beta_c=b),
    st.floats(1e-5, 0.1),
    st.floats(1e-7, 0.05),
)


def host_low_end(source: str, level: float = 0.9) -> float:
    """Lower end of the host factor's interval: the floor a carried step never goes below."""
    sd = (HOST_FLOPS if source.startswith("local-cpu") else HOST_RATIO)[1]
    return float(np.exp(-norm.ppf(0.5 + level / 2) * np.hypot(sd, STEP_NOISE)))


def _figures(itype: str) -> tuple[float, float]:
    row = load_catalog().set_index("instance_type").loc[itype]
    return float(row["gpu_fp32_tflops"]), float(row["gpu_mem_bw_gbps"])


@settings(max_examples=60, deadline=None)
@given(sources, gpu_pairs, st.sampled_from(GPU_TYPES), st.booleans())
def test_a_faster_accelerator_never_makes_a_step_slower(params, pair, source, by_flops):
    cat = load_catalog()
    (slow, fast) = sorted(pair, key=_figures)
    if by_flops:  # a CPU profile: the target's peak alone decides
        faster = _figures(fast)[0] >= _figures(slow)[0]
        source = "local-cpu"
    else:
        faster = all(f >= s for f, s in zip(_figures(fast), _figures(slow), strict=True))
    assume(faster)
    bsz = 2.0 ** np.arange(0, 14)
    steps = [
        build_transfer(params, source, t, cat, 2e9, 1e8).predict(1, 1, bsz, 1, 0.9)
        for t in (slow, fast)
    ]
    assert (steps[1]["step_time_s"] <= steps[0]["step_time_s"] * (1 + 1e-12)).all()


@settings(max_examples=60, deadline=None)
@given(sources, st.sampled_from(GPU_TYPES), st.sampled_from(["g4dn.xlarge", "local-cpu"]))
def test_throughput_per_gpu_rises_with_local_batch_with_diminishing_returns(params, target, src):
    fit = build_transfer(params, src, target, load_catalog(), 2e9, 1e8)
    bsz = 2.0 ** np.arange(0, 16)
    for k, n in ((1, 1), (1, 4), (2, 8)):
        pred = fit.predict(k, n, bsz, n // k, 0.9)
        throughput = bsz / pred["step_time_s"]
        gain = throughput[1:] / throughput[:-1]  # per doubling of the local batch
        assert (gain >= 1 - 1e-9).all() and (gain <= 2 + 1e-9).all()
        assert (np.diff(gain) <= 1e-9).all()
        lo, hi = pred["step_time_lo"], pred["step_time_hi"]
        assert (lo <= pred["step_time_s"]).all() and (pred["step_time_s"] <= hi).all()
        if src.startswith("local-cpu"):  # the CPU's intercept is the floor's median
            assert (lo >= params.alpha_c * host_low_end(src) * (1 - 1e-12)).all()
        assert (lo > 0).all()


def test_type_outside_the_catalog_cannot_be_carried(source_model):
    with pytest.raises(InputError, match="not in the catalog"):
        source_model.predict_arrays("resnet", "x9.huge", 1, 1, 8, catalog=catalog())


def test_type_without_figures_names_the_missing_column(source_model):
    with pytest.raises(InputError, match="gpu_fp32_tflops"):
        source_model.predict_arrays("resnet", "g5.12xlarge", 1, 1, 8, catalog=catalog())


def test_cpu_source_without_flop_count_cannot_reach_a_gpu():
    with pytest.raises(InputError, match="flops_per_sample"):
        build_transfer(SOURCE, "local-cpu-x", "p3.8xlarge", catalog())


def test_belief_update_is_the_conjugate_normal_posterior():
    prior = LogBeliefs(("a",), np.array([0.0]), np.array([[1.0]]))
    post = prior.update(lambda t: np.full(4, 0.5) - t[0], noise_sd=1.0)
    assert post.mean[0] == pytest.approx(0.4) and post.sd("a") == pytest.approx(np.sqrt(1 / 5))
    assert prior.update(lambda t: np.array([]), noise_sd=1.0) is prior
    # two correlated factors observed through a linear map: Bayesian linear regression
    x = np.array([[1.0, 0.5], [0.2, 1.0], [1.0, 1.0]])
    y = np.array([0.3, -0.2, 0.1])
    prior = LogBeliefs.prior(a=(1.0, 0.5), b=(2.0, 0.8))
    post = prior.update(lambda t: y - x @ t, noise_sd=0.1)
    precision = np.linalg.inv(prior.cov) + x.T @ x / 0.01
    cov = np.linalg.inv(precision)
    mean = cov @ (np.linalg.inv(prior.cov) @ prior.mean + x.T @ y / 0.01)
    np.testing.assert_allclose(post.cov, cov, rtol=1e-5)
    np.testing.assert_allclose(post.mean, mean, rtol=1e-5, atol=1e-8)


def test_saved_model_keeps_carried_groups(tmp_path):
    rows = table(SOURCE, "p3.8xlarge", 1, seed=5).iloc[:3]
    with pytest.warns(UserWarning, match="transfer"):
        model = StepTimeModel().fit(
            pd.concat([table(SOURCE, "g4dn.12xlarge", 2), rows]), catalog=catalog()
        )
    model.save(tmp_path / "m.json")
    again = StepTimeModel.load(tmp_path / "m.json")
    args = ("resnet", "p3.8xlarge", 2, 8, np.array([8, 16]))
    for key, value in model.predict_arrays(*args).items():
        np.testing.assert_allclose(again.predict_arrays(*args)[key], value)


# -- the device curve: a floor, then linear once the batch fills the device ------------------
# a model that fills a T4 at batch 15: 30 ms on the floor, then 2 ms per sample
CURVE = DeviceCurve(0.03, 0.002, 1.5, (1e-3, 0.0, 2e-3), 0.04, 6)


def one_worker(bsz: np.ndarray, step: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {"num_nodes": 1, "num_workers": 1, "local_bsz": bsz.astype(int), "step_time_s": step}
    )


def test_a_fitted_curve_gives_back_the_floor_and_the_slope_it_was_drawn_from():
    bsz = 2.0 ** np.arange(1, 12)
    noise = np.exp(np.random.default_rng(0).normal(0, 0.02, bsz.size))
    curve = fit_curve(bsz, CURVE.time(bsz) * noise, 1.5)
    assert curve.floor_s == pytest.approx(CURVE.floor_s, rel=0.1)
    assert curve.per_sample_s == pytest.approx(CURVE.per_sample_s, rel=0.05)
    assert fit_curve(bsz[:2], CURVE.time(bsz[:2]), 1.5) is None  # two batches: no knee
    # a range that never leaves the floor says little about the slope
    flat = fit_curve(bsz[:4], CURVE.time(bsz[:4]), 1.5)
    assert flat.log_cov[2] > 10 * curve.log_cov[2]


def _curve_carry():
    """CURVE carried from g4dn.12xlarge to p3.8xlarge along the device curve: the route taken
    without the roofline constants (the roofline's own tests: test_roofline.py)."""
    return build_transfer(
        SOURCE,
        "g4dn.12xlarge",
        "p3.8xlarge",
        catalog(),
        curve=CURVE,
        shape=DEFAULT_SHAPE,
        constants=None,
    )


def test_a_carried_curve_sits_on_the_floor_then_grows_linearly_past_a_knee_that_moves():
    fit = _curve_carry()
    bsz = 2.0 ** np.arange(0, 16)
    there = fit.predict(1, 1, bsz, 1, 0.9)["compute_s"]
    # the default shape: speed is the memory bandwidth (w = 1), the floor stays (phi = 0)
    ratio = 320.0 / 900.0
    knee = CURVE.knee / ratio  # a faster device needs a larger batch to fill
    assert there[bsz <= knee / 8] == pytest.approx(CURVE.floor_s, rel=0.1)
    assert there[-1] == pytest.approx(CURVE.per_sample_s * ratio * bsz[-1], rel=1e-3)
    per_sample = there / bsz
    assert (np.diff(per_sample) < 0).all()  # utilisation rises with the batch
    assert (there <= CURVE.time(bsz) * (1 + 1e-12)).all()  # never slower than the source
    assert any("past batch" in note for note in fit.notes)


def test_a_type_with_the_source_figures_gets_the_source_compute_back(source_model):
    cat = catalog()
    twin = cat[cat["instance_type"] == "g4dn.12xlarge"].assign(instance_type="g4dn.twin")
    cat = pd.concat([cat, twin], ignore_index=True)
    bsz = np.array([1, 8, 16, 32, 1024])
    there = source_model.predict_arrays("resnet", "g4dn.twin", 1, 1, bsz, catalog=cat)
    here = source_model.predict_arrays("resnet", "g4dn.12xlarge", 1, 1, bsz)
    np.testing.assert_allclose(there["compute_s"], here["compute_s"], rtol=1e-9)
    # without the roofline constants, along the device curve
    curve = source_model.device_curves_[("resnet", "g4dn.12xlarge")]
    params = source_model.groups_[("resnet", "g4dn.12xlarge")].params
    fit = build_transfer(
        params,
        "g4dn.12xlarge",
        "g4dn.twin",
        cat,
        curve=curve,
        shape=source_model.device_shape_,
        constants=None,
    )
    np.testing.assert_allclose(
        fit.predict(1, 1, bsz, 1, 0.9)["compute_s"], curve.time(bsz), rtol=1e-9
    )


def test_measured_steps_never_make_unmeasured_batches_worse_in_expectation():
    # targets drawn from the carried belief itself: a world in which the belief is right
    fit = _curve_carry()
    rng = np.random.default_rng(0)
    bsz = 2.0 ** np.arange(2, 12)
    errors = {"cold": [], "one step": [], "two steps": []}
    inside, widths = {"cold": [], "one step": []}, {"cold": [], "one step": []}
    for _ in range(150):
        theta = rng.multivariate_normal(fit.beliefs.mean, fit.beliefs.cov)
        truth = replace(fit, beliefs=replace(fit.beliefs, mean=theta))
        true = truth.predict(1, 1, bsz, 1, 0.9)["step_time_s"]
        observed = true * np.exp(rng.normal(0.0, fit.noise, bsz.size))
        fits = {
            "cold": fit,
            "one step": fit.update(one_worker(bsz[:1], observed[:1])),
            "two steps": fit.update(one_worker(bsz[[0, -1]], observed[[0, -1]])),
        }
        for name, carried in fits.items():
            pred = carried.predict(1, 1, bsz[1:-1], 1, 0.9)
            errors[name].append(np.log(pred["step_time_s"] / true[1:-1]) ** 2)
            if name in inside:
                lo, hi = pred["step_time_lo"], pred["step_time_hi"]
                inside[name].append((lo <= observed[1:-1]) & (observed[1:-1] <= hi))
                widths[name].append(np.log(hi / lo))
    mse = {k: np.mean(v, axis=0) for k, v in errors.items()}
    # at every unmeasured batch, no worse than before the step (Monte Carlo slack of 5%)
    assert (mse["one step"] <= 1.05 * mse["cold"]).all()
    assert (mse["two steps"] <= 1.05 * mse["one step"]).all()
    assert mse["two steps"].mean() < 0.5 * mse["cold"].mean()
    # intervals narrow, and only as far as the evidence supports: they still cover ~90%
    assert np.mean(widths["one step"]) < np.mean(widths["cold"])
    for name in inside:
        assert 0.85 <= np.mean(inside[name]) <= 0.97, name


def test_the_shape_is_learned_from_every_measured_accelerator():
    # four accelerators, three models whose curves follow a known shape: p = 2, speed the
    # memory bandwidth, floors that stay; each machine's host and each model's efficiency
    # a little off, as real ones are
    speeds = {"a": (8.1, 320.0), "b": (15.7, 900.0), "c": (19.5, 1555.0), "d": (13.4, 616.0)}
    rng = np.random.default_rng(1)
    bsz = 2.0 ** np.arange(2, 12)
    rows = []
    for model, floor, slope in (("m1", 0.02, 4e-4), ("m2", 0.1, 5e-3), ("m3", 0.01, 2e-5)):
        for name, (_, bandwidth) in speeds.items():
            f = floor * np.exp(rng.normal(0, 0.05))
            c = slope * 320.0 / bandwidth * np.exp(rng.normal(0, 0.05))
            t = (f**2 + (c * bsz) ** 2) ** 0.5 * np.exp(rng.normal(0, 0.03, bsz.size))
            rows.append(
                pd.DataFrame({"model": model, "instance_type": name, "local_bsz": bsz}).assign(
                    compute_s=t
                )
            )
    compute = pd.concat(rows, ignore_index=True)
    shape = learn_shape(compute, speeds)
    assert (shape.sharpness, shape.bandwidth_weight, shape.floor_exponent) == (2.0, 1.0, 0.0)
    assert shape.host_sd < 0.2 and shape.compute_sd < 0.2 and shape.noise_sd < 0.08
    assert "4 accelerators" in shape.basis
    # fewer accelerators than that teach nothing: the caller falls back to DEFAULT_SHAPE
    assert learn_shape(compute[compute["instance_type"].isin(["a", "b"])], speeds) is None


def reference_single_gpu() -> tuple[pd.DataFrame, dict[str, tuple[float, float]]]:
    """One-worker steps of the five reference accelerators, with their catalog speeds."""
    folder = shared_dir() / "reference" / "measurements"
    if not folder.is_dir():
        pytest.skip(f"the team's reference measurements are not at {folder} (set SRIFTY_SHARED)")
    steps = pd.concat([pd.read_csv(p) for p in sorted(folder.glob("*.csv"))], ignore_index=True)
    one = steps[steps["num_workers"] == 1]
    cat = pd.concat(
        [pd.read_csv(REPO / "benchmarks" / "gpu_catalog.csv"), load_catalog()], ignore_index=True
    )
    figures = cat.set_index("instance_type")[["gpu_fp32_tflops", "gpu_mem_bw_gbps"]]
    speeds = {t: tuple(figures.loc[t]) for t in one["instance_type"].unique()}
    compute = measured_compute(one).assign(
        model=one["model"].to_numpy(), instance_type=one["instance_type"].to_numpy()
    )
    return compute, speeds


def test_the_default_shape_is_what_the_reference_measurements_teach():
    compute, speeds = reference_single_gpu()
    shape = learn_shape(compute, speeds)
    for name in ("sharpness", "bandwidth_weight", "floor_exponent"):
        assert getattr(shape, name) == getattr(DEFAULT_SHAPE, name), name
    for name in ("host_sd", "compute_sd", "noise_sd"):
        assert getattr(shape, name) == pytest.approx(getattr(DEFAULT_SHAPE, name), rel=2e-3)


def test_speed_mixes_the_peak_and_the_bandwidth():
    assert speed(8.0, 300.0, 0.0) == 8.0 and speed(8.0, 300.0, 1.0) == 300.0
    assert speed(4.0, 16.0, 0.5) == pytest.approx(8.0)


# -- what a fit carries with it ---------------------------------------------------------------
def onprem_catalog() -> pd.DataFrame:
    """Two machines no embedded catalog knows, with their figures."""
    cat = catalog()
    rows = cat[cat["instance_type"].isin(["g4dn.12xlarge", "p3.8xlarge"])].copy()
    rows["instance_type"] = ["onprem-t4-box", "onprem-v100-box"]
    rows["region"] = "onprem"
    return rows.reset_index(drop=True)


def single_gpu_rows(itype: str = "onprem-t4-box") -> pd.DataFrame:
    """A user's own one-GPU measurements: five batch sizes, no gradient size."""
    bsz = np.array([8, 16, 32, 64, 128])
    return one_worker(bsz, CURVE.time(bsz)).assign(
        model="resnet", instance_type=itype, gpus_per_node=4
    )


@pytest.fixture(scope="module")
def onprem_model() -> StepTimeModel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one worker: the sync terms are fixed, as it warns
        return StepTimeModel().fit(single_gpu_rows(), catalog=onprem_catalog())


def test_fit_keeps_the_catalog_rows_of_the_types_it_measured(onprem_model):
    rows = onprem_model.catalog_rows_
    assert list(rows["instance_type"]) == ["onprem-t4-box"]
    assert rows["gpu_fp32_tflops"].iloc[0] == 8.1
    # so the embedded catalog serves a carry from a type only the fit's catalog knew
    pred = onprem_model.predict_arrays("resnet", "p3.8xlarge", 1, 1, np.array([8, 256]))
    assert np.isfinite(pred["step_time_s"]).all()
    # and a type only a later catalog knows is carried with it
    configs = pd.DataFrame(
        {
            "model": "resnet",
            "instance_type": "onprem-v100-box",
            "num_nodes": 1,
            "num_workers": 1,
            "local_bsz": [8, 256],
        }
    )
    with pytest.raises(InputError, match="not in the catalog"):
        onprem_model.predict(configs)
    out = onprem_model.predict(configs, catalog=onprem_catalog())
    assert (out["gpus_per_node"] == 4).all() and np.isfinite(out["step_time_s"]).all()


def test_a_catalog_that_contradicts_the_model_names_the_type_and_the_column(onprem_model):
    cat = onprem_catalog()
    cat.loc[cat["instance_type"] == "onprem-t4-box", "gpu_fp32_tflops"] = 9.9
    configs = pd.DataFrame(
        {
            "model": "resnet",
            "instance_type": ["onprem-v100-box"],
            "num_nodes": 1,
            "num_workers": 1,
            "local_bsz": 8,
        }
    )
    with pytest.raises(InputError, match="onprem-t4-box") as err:
        onprem_model.predict(configs, catalog=cat)
    assert err.value.column == "gpu_fp32_tflops"
    # the embedded catalog is a default, not a statement: the kept rows win over it
    embedded = load_catalog()
    assert onprem_model.predict_arrays("resnet", "p3.2xlarge", 1, 1, 8, catalog=embedded)


def test_an_edited_copy_of_the_embedded_catalog_is_checked_as_a_users_catalog(tmp_path):
    from tests.builders import measurements

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # two node counts: the latency is fixed, as it warns
        model = StepTimeModel().fit(measurements(2))  # g4dn.12xlarge, the embedded rows
    configs = pd.DataFrame(
        {
            "model": "resnet",
            "instance_type": ["p3.8xlarge"],  # carried from g4dn.12xlarge by its figures
            "num_nodes": 1,
            "num_workers": 1,
            "local_bsz": 8,
        }
    )
    edited = load_catalog()  # its attrs still say "embedded catalog"
    edited.loc[edited["instance_type"] == "g4dn.12xlarge", "gpu_fp32_tflops"] = 999.0
    edited.to_csv(tmp_path / "mine.csv", index=False)
    mine = load_catalog(path=tmp_path / "mine.csv")
    refusals = []
    for cat in (mine, edited):
        with pytest.raises(InputError, match="g4dn.12xlarge") as err:
            model.predict(configs, catalog=cat)
        refusals.append((err.value.problem, err.value.column))
    assert refusals[0] == refusals[1]
    assert refusals[0][1] == "gpu_fp32_tflops" and "999" in refusals[0][0]
    # unedited it states nothing; edited where the model measured nothing, it is used
    plain = model.predict(configs, catalog=load_catalog())["step_time_s"].iloc[0]
    faster = load_catalog()
    faster.loc[faster["instance_type"] == "p3.8xlarge", "gpu_fp32_tflops"] = 31.4
    assert model.predict(configs, catalog=faster)["step_time_s"].iloc[0] < plain


def test_one_gpu_measurements_without_gradient_size_carry_to_one_worker_only(onprem_model):
    args = ("resnet", "onprem-v100-box")
    cat = onprem_catalog()
    pred = onprem_model.predict_arrays(*args, [1, 1, 2], [1, 4, 8], 32, catalog=cat)
    assert np.isfinite(pred["step_time_s"][0]) and np.isinf(pred["step_time_s"][1:]).all()
    configs = pd.DataFrame(
        {
            "model": "resnet",
            "instance_type": "onprem-v100-box",
            "num_nodes": 1,
            "num_workers": [1, 4],
            "local_bsz": 32,
        }
    )
    with pytest.raises(InputError, match="grad_bytes") as err:
        onprem_model.predict(configs, catalog=cat)
    assert err.value.rows == [1] and err.value.column == "num_workers"
    assert np.isfinite(onprem_model.predict(configs.iloc[:1], catalog=cat)["step_time_s"]).all()


def test_a_saved_model_keeps_its_curves_shape_and_catalog_rows(onprem_model, tmp_path):
    onprem_model.save(tmp_path / "m.json")
    again = StepTimeModel.load(tmp_path / "m.json")
    assert again.device_curves_ == onprem_model.device_curves_
    assert again.device_shape_ == onprem_model.device_shape_
    pd.testing.assert_frame_equal(
        again.catalog_rows_, onprem_model.catalog_rows_, check_dtype=False
    )
    args = ("resnet", "onprem-v100-box", 1, 1, np.array([8, 64, 512]))
    cat = onprem_catalog()
    for key, value in onprem_model.predict_arrays(*args, catalog=cat).items():
        np.testing.assert_allclose(again.predict_arrays(*args, catalog=cat)[key], value)


def test_a_thin_group_is_carried_only_from_one_measured_at_least_as_well():
    # five batch sizes on the T4 box (thin, but a curve) and one step of the V100 box: the
    # V100 box is carried from the T4 box and updated; never the other way round
    rows = pd.concat([single_gpu_rows(), single_gpu_rows("onprem-v100-box").iloc[:1]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(rows, catalog=onprem_catalog())
    assert isinstance(model.groups_[("resnet", "onprem-t4-box")], GroupFit)
    carried = model.groups_[("resnet", "onprem-v100-box")]
    assert isinstance(carried, TransferFit) and carried.n_observed == 1


def test_a_cpu_profiles_gloo_latency_is_not_carried_to_gpu_links():
    # the packaged DDP profile: gloo on a busy 2-core host, milliseconds per ring step
    from srifty_kit.tables.reference import packaged

    rows = pd.read_csv(packaged("sample_profile_dist.csv"))
    shapes = pd.DataFrame(
        {
            "model": "mlp",
            "instance_type": "g4dn.12xlarge",
            "num_nodes": [1, 1, 2, 4],
            "num_workers": [1, 4, 8, 16],
            "local_bsz": 32,
        }
    )
    syncs = []
    for slower in (1.0, 3.0):  # the same profile on a host three times as busy
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            slow = rows.assign(**{c: rows[c] * slower for c in ("step_time_s", "sync_time_s")})
            model = StepTimeModel().fit(slow)
            syncs.append(model.explain(shapes)["sync_s"].to_numpy())
    source = model.groups_[("mlp", rows["instance_type"].iloc[0])].params
    assert source.lat_intra > 1e-3  # what the CPU run measured
    # the GPU type's links are what the reference clusters taught (SYNC_PRIOR): a ring step
    # costs milliseconds, more GPUs never synchronise faster than fewer, and how busy the
    # CPU that profiled was moves nothing
    np.testing.assert_allclose(syncs[0], syncs[1])
    assert syncs[0][0] == 0.0
    assert np.all(np.diff(syncs[0]) > 0)
    grad = model.profile_facts_["mlp"]["grad_bytes"]
    four_gpus = 6 * SYNC_PRIOR.lat_intra + 1.5 * grad / (SYNC_PRIOR.eff_intra * 126e9 / 8)
    four_nodes = 6 * SYNC_PRIOR.lat_inter + 30 / 16 * grad / (SYNC_PRIOR.eff_inter * 50e9 / 8)
    np.testing.assert_allclose(syncs[0][[1, 3]], [four_gpus, four_nodes], rtol=1e-6)


def test_a_thin_group_carried_without_network_figures_still_fits():
    # a thin multi-node group on a type whose catalog row lacks the network: carried, its
    # multi-node rows cannot be predicted, and fitting must not trip over them
    from tests.builders import synthetic_measurements

    table = synthetic_measurements()
    thin = table[
        (table["instance_type"] == "g6.12xlarge")
        & (table["local_bsz"] == 32)
        & table["num_workers"].isin([1, 2, 4, 8])
    ]
    catalog = load_catalog()
    catalog.loc[catalog["instance_type"] == "g6.12xlarge", "network_gbps"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(
            pd.concat([table[table["instance_type"] == "g4dn.12xlarge"], thin]), catalog=catalog
        )
    carried = model.groups_[("resnet", "g6.12xlarge")]
    assert carried.source.startswith("g4dn.12xlarge")
    assert carried.refused(np.array([2]), np.array([8]))[0]


# an op mix of the kind ``srifty profile`` writes (a conv net: tensor FLOPs, memory-bound rest)
OP_MIX = {
    "tensor": {"flops_per_sample": 2e9, "bytes_per_sample": 5e7},
    "elementwise": {"flops_per_sample": 0.0, "bytes_per_sample": 2e8},
    "normalisation": {"flops_per_sample": 0.0, "bytes_per_sample": 1e8},
    "optimizer": {"flops_per_sample": 0.0, "bytes_per_sample": 0.0},
    "host": {"flops_per_sample": 0.0, "bytes_per_sample": 1e4},
}


def one_gpu_configs(itypes, bsz=(8, 64, 512)) -> pd.DataFrame:
    rows = [(t, b) for t in itypes for b in bsz]
    return pd.DataFrame(rows, columns=["instance_type", "local_bsz"]).assign(
        model="resnet", num_nodes=1, num_workers=1
    )


@pytest.fixture(scope="module")
def facts_model() -> StepTimeModel:
    """The source model's measurements with a profile's facts (its op mix)."""
    return StepTimeModel().fit(
        table(SOURCE, "g4dn.12xlarge", 2),
        catalog=catalog(),
        facts={"model": "resnet", "op_mix": OP_MIX},
    )


def _t4_to_v100(params, constants, op_mix=OP_MIX):
    """``params`` fitted on batches 8-32 of a T4 machine, carried to a V100 one."""
    return build_transfer(
        params,
        "g4dn.12xlarge",
        "p3.8xlarge",
        catalog(),
        op_mix=op_mix,
        bsz_range=(8, 32),
        constants=constants,
    )


def test_a_fit_with_an_op_mix_carries_by_the_roofline_and_says_so(facts_model, source_model):
    configs = one_gpu_configs(["g4dn.12xlarge", "p3.8xlarge"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shown = facts_model.explain(configs)
        plain = source_model.explain(configs)
    # the shipped constants weigh the op mix's roofline against the fp32-peak rule by the
    # held-out pairs of reference GPUs, and the route says what it got
    weight = roofline.reference_learned().mix_weight
    carried = "roofline (op mix)" if weight > 0 else "fp32-peak rule (op mix given weight 0"
    # batch 8 was run on one GPU of the source, 64 and 512 were not
    measured = ["measured: its own run"] + ["measured: its placement's runs"] * 2
    assert shown["route"].tolist()[:3] == measured
    assert all(r.startswith(carried) for r in shown["route"].tolist()[3:])
    assert plain["route"].tolist() == measured + ["fp32-peak rule"] * 3
    pred = facts_model.predict(configs, catalog=catalog())
    assert set(pred.columns) >= {"step_time_s", "step_time_lo", "step_time_hi"}
    assert "route" not in pred
    # given weight, the op mix moves the carried step: a mix the T4 runs memory-bound moves
    # with the V100's bandwidth (2.8x), further than its fp32 peak (1.9x)
    params = facts_model.groups_[("resnet", "g4dn.12xlarge")].params
    full = replace(roofline.reference_learned(), mix_weight=1.0)
    mixed, rule = (_t4_to_v100(params, full, mix) for mix in (OP_MIX, None))
    assert mixed.route == "roofline (op mix)" and rule.route == "fp32-peak rule"
    bsz = np.array([4096.0])
    assert (
        mixed.predict(1, 1, bsz, 1, 0.9)["compute_s"] < rule.predict(1, 1, bsz, 1, 0.9)["compute_s"]
    )


def test_a_host_that_caps_the_sources_steps_stays_with_it(facts_model):
    # the source machine's input pipeline holds every step to 1 s; the op graph says the
    # model's 300 launches cost ~0.1 s: carried to a V100 machine, the cap is not carried
    # and the route says so; without the band (constants before it) it is
    counted = {**OP_MIX, "host": {"launches_per_step": 300.0}}
    params = facts_model.groups_[("resnet", "g4dn.12xlarge")].params._replace(alpha_c=1.0)
    shipped = roofline.reference_learned()
    held, free = (
        _t4_to_v100(params, replace(shipped, graph_band=k), counted) for k in (2.5, np.inf)
    )
    assert "floor held near the op graph's" in held.route
    assert "floor held" not in free.route
    small = np.array([1.0])
    fast, slow = (t.predict(1, 1, small, 1, 0.9)["compute_s"][0] for t in (held, free))
    graph = 300 * shipped.launch_s
    assert fast < graph * np.exp(2.5 * shipped.launch_sd) * 1.05 < slow


def test_a_saved_model_keeps_its_op_mix_and_carries_the_same(facts_model, tmp_path):
    path = tmp_path / "model.json"
    facts_model.save(path)
    loaded = StepTimeModel.load(path)
    assert loaded.op_mix_ == facts_model.op_mix_
    configs = one_gpu_configs(["p3.8xlarge"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before = facts_model.explain(configs)
        after = loaded.explain(configs)
    np.testing.assert_allclose(after["step_time_s"], before["step_time_s"], rtol=1e-12)
    assert after["route"].tolist() == before["route"].tolist()


def test_a_malformed_op_mix_is_refused_at_fit():
    with pytest.raises(InputError, match="tensor.flops_per_sample"):
        StepTimeModel().fit(
            table(SOURCE, "g4dn.12xlarge", 1),
            catalog=catalog(),
            facts={"resnet": {"op_mix": {"tensor": {"flops_per_sample": "many"}}}},
        )


def _cpu_fits(op_mix: dict) -> tuple[StepTimeModel, StepTimeModel]:
    """One CPU profile fitted twice: as measured, and as a host three times as loaded
    measures it (every step 3x; the intercept 10 ms -> 30 ms)."""
    cpu = SOURCE._replace(alpha_c=0.01, beta_c=0.05)
    profile = table(cpu, "local-cpu-amd-epyc-2c", 1).query("num_workers == 1")
    profile = profile.assign(flops_per_sample=2e9, grad_bytes=4.5e7, gpus_per_node=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(
            StepTimeModel().fit(
                profile.assign(step_time_s=profile["step_time_s"] * k),
                facts={"resnet": {"op_mix": op_mix}},
            )
            for k in (1, 3)
        )


@pytest.mark.parametrize("bsz", [1, 512])
def test_a_cpu_profile_reaches_a_gpu_only_through_its_op_graph_whatever_the_cpu_took(bsz):
    launched = {**OP_MIX, "host": {**OP_MIX.get("host", {}), "launches_per_step": 300.0}}
    model, loaded_cpu = _cpu_fits(launched)
    fit = model._group("resnet", "g4dn.12xlarge", catalog())
    assert fit.route == "roofline (op graph alone)"
    assert any("300 launches" in note for note in fit.notes)
    assert any("x/÷" in note and "no GPU step measured" in note for note in fit.notes)
    # the floor (launches x the learned cost) and the slope (the op mix) are the op graph's:
    # a CPU three times as loaded while profiling moves no GPU prediction, at a batch on the
    # floor or far past it
    configs = one_gpu_configs(["g4dn.12xlarge"], bsz=(bsz,))
    a = model.predict(configs, catalog=catalog())
    b = loaded_cpu.predict(configs, catalog=catalog())
    for column in ("step_time_s", "step_time_lo", "step_time_hi"):
        assert float(b[column].iloc[0]) == pytest.approx(float(a[column].iloc[0]), rel=1e-9)
    # no GPU step measured: the interval is at least as wide as the narrower of the floor's
    # and the per-sample time's learned spreads says
    learned = roofline.reference_learned()
    sd = min(learned.launch_sd, learned.scale * learned.absolute_sd)
    assert float(a["step_time_hi"].iloc[0] / a["step_time_lo"].iloc[0]) >= np.exp(3.29 * sd)


def test_facts_without_launches_keep_the_cpu_intercept_as_the_floor_and_say_so():
    model, loaded_cpu = _cpu_fits(OP_MIX)  # facts written before launches were counted
    fit = model._group("resnet", "g4dn.12xlarge", catalog())
    assert fit.route == "roofline (op mix, CPU profile)"
    assert any("profile again" in note for note in fit.notes)
    # the per-sample time is the op mix's, whatever the CPU took: a CPU 3x slower moves the
    # GPU's large-batch step by nothing but its host floor's share
    configs = one_gpu_configs(["g4dn.12xlarge"], bsz=(512,))
    a = model.predict(configs, catalog=catalog())
    b = loaded_cpu.predict(configs, catalog=catalog())
    assert 1.0 < float(b["step_time_s"].iloc[0] / a["step_time_s"].iloc[0]) < 1.5


def test_a_gpu_without_figures_says_why_it_cannot_be_carried_to(source_model):
    cat = load_catalog()
    with pytest.raises(InputError, match="no vendor document"):
        source_model.predict_arrays("resnet", "g5.xlarge", 1, 1, 32, catalog=cat)


def test_a_belief_refuses_what_the_carry_cannot_synchronise():
    # the same configurations the point prediction refuses (inf) the belief must refuse too,
    # or a search reading the belief would pick a multi-node run nobody can predict
    fit = replace(_curve_carry(), sync_missing=("", "no inter-node figures"))
    k, n, b = np.array([1, 2]), np.array([4, 8]), np.array([32, 32])
    out = fit.predict(k, n, b, np.array([4, 4]), 0.9, beliefs=(1, 2))
    assert np.isfinite(out["step_time_s"][0]) and np.isinf(out["step_time_s"][1])
    assert np.isfinite(out["belief"].median[0]) and np.isinf(out["belief"].median[1])
    # and it is one no chance constraint passes, whatever the deadline: not a nan spread
    assert np.isfinite(out["belief"].sd).all()
    assert out["belief"].prob_below(1e9)[1] == 0.0


# what ``srifty profile`` on a T4 writes as its op trace (facts ``op_trace``): seconds per step
def _record(b: int) -> dict:
    tensor, elementwise = 2e-4 * b, 1e-4 * b
    busy = tensor + elementwise + 1e-3  # 1 ms of kernels no operator claimed
    return {
        "step_s": busy + 4e-3,
        "launch_s": 3e-3,
        "busy_s": busy,
        "classes": {"tensor": tensor, "elementwise": elementwise, "optimizer": 0.0},
    }


T4_TRACE = {
    "device": "cuda",
    "device_name": "Tesla T4",
    "batches": {str(b): _record(b) for b in (8, 32)},
}


def test_a_class_is_carried_by_the_roofline_ratio_of_its_own_bound():
    t4 = roofline.GpuFigures(8.1, 8.1, 320.0)
    v100 = roofline.GpuFigures(15.7, 15.7, 900.0)
    rec = _record(32)
    # to its own GPU: the measured step back
    assert roofline.traced_step(rec, OP_MIX, 32, t4, t4) == pytest.approx(rec["step_s"])
    # tensor: 2 GFLOP against 50 MB a sample, past the T4's ridge (25 FLOP/B): the fp32
    # peaks' ratio; elementwise (no FLOPs) and what no operator claimed: the bandwidths'
    device = (
        rec["classes"]["tensor"] * 8.1 / 15.7 + (rec["classes"]["elementwise"] + 1e-3) * 320 / 900
    )
    expected = max(rec["launch_s"], device) + (rec["step_s"] - rec["busy_s"])
    assert roofline.traced_step(rec, OP_MIX, 32, t4, v100) == pytest.approx(expected)
    # a host twice as slow doubles the host's part, not the device's
    slow = roofline.traced_step(rec, OP_MIX, 32, t4, v100, host=2.0)
    assert slow == pytest.approx(max(2 * rec["launch_s"], device) + 2 * 4e-3)


def test_a_cuda_op_trace_carries_the_model_class_by_class_and_says_so(facts_model, tmp_path):
    fit = StepTimeModel().fit(
        table(SOURCE, "g4dn.12xlarge", 2),
        catalog=catalog(),
        facts={"model": "resnet", "op_mix": OP_MIX, "op_trace": T4_TRACE},
    )
    configs = one_gpu_configs(["p3.8xlarge"], bsz=(8, 32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shown = fit.explain(configs)
        plain = facts_model.explain(configs)
    assert shown["route"].tolist() == ["op trace (per class)"] * 2
    assert not plain["route"].str.startswith("op trace").any()
    # at the traced batches the carried compute is the source's times the trace's ratio
    source = fit.groups_[("resnet", "g4dn.12xlarge")]
    t4, v100 = (roofline.figures(catalog().set_index("instance_type").loc[t]) for t in
                ("g4dn.12xlarge", "p3.8xlarge"))  # fmt: skip
    host = roofline.host_ratio(
        roofline.reference_learned(), ("T4", "V100"), ("g4dn.12xlarge", "p3.8xlarge")
    )
    ratio = roofline.trace_ratio(T4_TRACE, OP_MIX, [8, 32], t4, v100, host=host)
    own = source.predict(np.array([1, 1]), np.array([1, 1]), np.array([8, 32]), 1, 0.9)
    np.testing.assert_allclose(shown["compute_s"], own["compute_s"] * ratio, rtol=0.05)
    # a saved model keeps the trace and carries the same
    fit.save(tmp_path / "m.json")
    loaded = StepTimeModel.load(tmp_path / "m.json")
    assert loaded.op_trace_ == fit.op_trace_
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = loaded.explain(configs)
    np.testing.assert_allclose(again["step_time_s"], shown["step_time_s"], rtol=1e-12)


@pytest.mark.parametrize(
    "trace",
    [
        {**T4_TRACE, "device": "cpu", "device_name": "Intel(R) Xeon(R)"},  # a CPU's times
        {**T4_TRACE, "device_name": "NVIDIA L4"},  # another GPU than the source type's
        {  # a profiler that saw no kernels (no CUPTI): nothing to carry by
            **T4_TRACE,
            "batches": {
                b: {**r, "busy_s": 0.0, "classes": {}} for b, r in T4_TRACE["batches"].items()
            },
        },
    ],
)
def test_a_trace_from_another_device_leaves_the_route_as_it_was(facts_model, trace):
    fit = StepTimeModel().fit(
        table(SOURCE, "g4dn.12xlarge", 2),
        catalog=catalog(),
        facts={"model": "resnet", "op_mix": OP_MIX, "op_trace": trace},
    )
    configs = one_gpu_configs(["p3.8xlarge"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert (
            fit.explain(configs)["route"].tolist() == facts_model.explain(configs)["route"].tolist()
        )


def test_a_malformed_op_trace_is_refused_at_fit():
    bad = {"device": "cuda", "batches": {"8": {"step_s": -1, "launch_s": 0, "busy_s": 0,
                                               "classes": {}}}}  # fmt: skip
    with pytest.raises(InputError, match="op trace of resnet at batch '8'"):
        StepTimeModel().fit(
            table(SOURCE, "g4dn.12xlarge", 2), facts={"resnet": {"op_mix": OP_MIX, "op_trace": bad}}
        )


def test_a_measured_step_is_read_with_the_carry_chosen_for_measured_steps(facts_model):
    # constants whose cold carry gives the op mix no weight and whose carry after a measured
    # step gives it all: cold, the fp32-peak rule; once a step is measured, the update starts
    # from the op mix's curve, exactly as a fit carried with those constants outright would
    params = facts_model.groups_[("resnet", "g4dn.12xlarge")].params
    shipped = roofline.reference_learned()
    after = {"mix_weight": 1.0, "scale": 1.2, "floor_sd": 0.5, "slope_sd": 0.6}
    both, cold, measured = (
        replace(shipped, mix_weight=0.0, after_step=after),
        replace(shipped, mix_weight=0.0, after_step={}),
        replace(shipped, mix_weight=0.0, after_step=after).measured(),
    )
    fits = {
        name: _t4_to_v100(params, constants)
        for name, constants in (("both", both), ("cold", cold), ("measured", measured))
    }
    bsz = np.array([8.0, 64.0, 512.0])
    before = fits["both"].predict(1, 1, bsz, 1, 0.9)
    np.testing.assert_allclose(
        before["step_time_s"], fits["cold"].predict(1, 1, bsz, 1, 0.9)["step_time_s"]
    )
    assert fits["both"].route.startswith("fp32-peak rule (op mix given weight 0")
    step = one_worker(np.array([64.0]), np.array([0.05]))
    updated, direct = fits["both"].update(step), fits["measured"].update(step)
    for column in ("step_time_s", "step_time_lo", "step_time_hi"):
        np.testing.assert_allclose(
            updated.predict(1, 1, bsz, 1, 0.9)[column],
            direct.predict(1, 1, bsz, 1, 0.9)[column],
            rtol=1e-9,
        )
    assert "the curve's shape once a step is measured" in updated.route
    assert updated.measured_curve is None and updated.n_observed == 1


def test_the_route_counts_one_measured_step_in_the_singular(facts_model):
    params = facts_model.groups_[("resnet", "g4dn.12xlarge")].params
    fit = build_transfer(params, "g4dn.12xlarge", "p3.8xlarge", catalog(), op_mix=OP_MIX)
    one = fit.update(one_worker(np.array([64.0]), np.array([0.05])))
    two = fit.update(one_worker(np.array([8.0, 64.0]), np.array([0.02, 0.05])))
    assert one.route.endswith("updated by 1 measured step")
    assert two.route.endswith("updated by 2 measured steps")


@pytest.mark.parametrize("source_is_cpu", [False, True])
def test_a_probe_is_valued_on_the_belief_the_measured_step_leaves(facts_model, source_is_cpu):
    # ``decide.probes`` values a one-step probe of a type never measured by conditioning
    # the carry's belief on the probe's run. That belief must leave, at the batches not
    # measured, what the update a measured step makes does leave: the curve's shape away
    # from the step; not the noise floor, which made every probe of a new GPU look like it
    # settled the type and overstated what it was worth
    params = facts_model.groups_[("resnet", "g4dn.12xlarge")].params
    source = "c7i.8xlarge" if source_is_cpu else "g4dn.12xlarge"
    fit = build_transfer(params, source, "p3.8xlarge", catalog(), op_mix=OP_MIX, bsz_range=(8, 32))
    bsz = np.array([8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0])
    cold = fit.predict(1, 1, bsz, 1, 0.9, beliefs=(0, 0))
    at = roofline.probe_batch(bsz, roofline.reference_learned())  # where srifty says to measure
    probe = int(np.flatnonzero(bsz == at)[0])
    belief = cold["belief"]
    others = np.arange(bsz.size) != probe
    # the marginal is the carry's own, before and after the change of how it is shared
    np.testing.assert_allclose(belief.interval(0.9)[1], cold["step_time_hi"], rtol=1e-6)
    # a Gaussian belief leaves the same spread whatever the step measures; the update, a
    # Laplace fit of a curve, narrows a little more the further the step lands from what
    # the carry expected: alike at the step expected, close at steps 20-30% off it
    for ratio, rtol in ((1.0, 0.07), (0.8, 0.2), (1.3, 0.2)):
        measured = cold["step_time_s"][probe] * ratio
        after = belief.condition(probe, np.log(ratio), 0.0)
        updated = fit.update(one_worker(bsz[[probe]], np.array([measured])))
        read = updated.predict(1, 1, bsz, 1, 0.9)
        left = np.log(read["step_time_hi"] / read["step_time_lo"]) / (2 * norm.ppf(0.95))
        np.testing.assert_allclose(after.sd[others], left[others], rtol=rtol)


def test_a_carried_fit_follows_the_catalogs_content_not_its_frame(source_model):
    # every search validates the catalog into a new frame, and a panel searches again on
    # each control change: the carry is kept while the catalog holds the same figures, and
    # made again as soon as a figure it reads changes
    configs = one_gpu_configs(["p3.8xlarge"])
    first = catalog()
    before = source_model.predict(configs, catalog=first)
    carried = source_model._group("resnet", "p3.8xlarge", first)
    again = catalog()
    assert source_model._group("resnet", "p3.8xlarge", again) is carried
    pd.testing.assert_frame_equal(source_model.predict(configs, catalog=again), before)
    faster = catalog()
    faster.loc[faster["instance_type"] == "p3.8xlarge", "gpu_fp32_tflops"] *= 2
    after = source_model.predict(configs, catalog=faster)
    assert source_model._group("resnet", "p3.8xlarge", faster) is not carried
    assert (after["step_time_s"] < before["step_time_s"]).all()


def test_the_sync_prior_learns_the_links_back_from_their_sync_times():
    # sync times made by a known ring (1 ms a step inside a node, 3 ms across, a third and a
    # fifth of the links' rates) with a spread of 0.3 between models: learned back, and
    # its spread covers the models' differences
    truth = SyncPrior(1e-3, 3e-3, 0.33, 0.2, 0.3)
    rng = np.random.default_rng(3)
    grads = {f"m{i}": float(b) for i, b in enumerate(np.geomspace(1e6, 4e8, 24))}
    rows = []
    for model, grad in grads.items():
        shift = rng.normal(0, 0.3)
        for itype, nic in (("a", 50.0), ("b", 100.0)):
            for k, n in ((1, 2), (1, 4), (1, 8), (2, 8), (3, 12), (4, 16)):
                one = pd.DataFrame(
                    {"num_nodes": [k], "num_workers": [n], "per_node": [n / k]}
                ).assign(grad_bytes=grad, network_gbps=nic)
                t = ring_seconds(truth, one)
                rows.append(
                    {
                        "model": model,
                        "instance_type": itype,
                        "num_nodes": k,
                        "num_workers": n,
                        "sync_time_s": float(t[0]) * np.exp(shift + rng.normal(0, 0.05)),
                    }
                )
    learned = learn_sync_prior(pd.DataFrame(rows), grads, {"a": 50.0, "b": 100.0})
    for field in ("lat_intra", "lat_inter", "eff_intra", "eff_inter"):
        assert getattr(learned, field) == pytest.approx(getattr(truth, field), rel=0.35)
    assert 0.15 < learned.log_sd < 0.5
    # across nodes only where the network is known; nothing left to learn from is refused
    no_net = learn_sync_prior(pd.DataFrame(rows), grads, {})
    assert no_net.lat_intra == pytest.approx(truth.lat_intra, rel=0.35)
    with pytest.raises(InputError, match="sync prior"):
        learn_sync_prior(pd.DataFrame(rows), {}, {"a": 50.0})


def test_the_network_ratio_spread_is_how_differently_two_networks_reach_their_rates():
    # two networks, three models: on "b" every model reaches its NIC's rate as on "a" but one,
    # which is 4x slower there; the ratio's spread is that difference over the three
    grads = {"small": 2e6, "mid": 1e8, "big": 4e8}
    rows = []
    for itype, nic in (("a", 50.0), ("b", 100.0)):
        for model, grad in grads.items():
            slower = 4.0 if (itype, model) == ("b", "mid") else 1.0
            for k in (2, 3):  # only the fewest nodes above one count
                n = 4 * k
                ideal = 2 * (n - 1) / n * grad / (nic * 1e9 / 8)
                base = 3.0 * ideal * slower if k == 2 else 1.0
                rows.append(
                    {
                        "model": model,
                        "instance_type": itype,
                        "num_nodes": k,
                        "num_workers": n,
                        "sync_time_s": base,
                    }
                )
    sd, pairs = learn_network_ratio(pd.DataFrame(rows), grads, {"a": 50.0, "b": 100.0})
    assert sd == pytest.approx(np.log(4.0) / np.sqrt(3))
    assert list(pairs) == [("a", "b")]
    with pytest.raises(InputError, match="two instance types"):
        learn_network_ratio(pd.DataFrame(rows), grads, {"a": 50.0})
