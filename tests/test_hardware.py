"""Transfer to instance types never measured: catalog figures, wide intervals that narrow."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from srifty_kit import InputError, StepTimeModel
from srifty_kit.hardware import Belief, build_transfer
from srifty_kit.schemas import validate_catalog
from srifty_kit.step_physics import StepParams, simulate

SOURCE = StepParams(0.02, 0.004, 0.001, 0.02, 0.002, 0.15, 0.3, 1.0)


def catalog() -> pd.DataFrame:
    """Three GPU types and a CPU type with the figures the transfer reads (T4, V100, A10G)."""
    rows = [
        ("g4dn.12xlarge", 4, 50.0, 65.0, 8.1, 320.0),
        ("p3.8xlarge", 4, 10.0, 125.0, 15.7, 900.0),
        ("g5.12xlarge", 4, 40.0, None, None, None),  # figures unknown: empty, never guessed
        ("c7i.8xlarge", 0, 12.5, None, None, None),
    ]
    table = pd.DataFrame(
        [
            {
                "instance_type": t,
                "region": "us-east-1",
                "vcpus": 32,
                "memory_gib": 128.0,
                "gpu_count": g,
                "gpu_model": "x" if g else None,
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
            for t, g, net, f16, f32, bw in rows
        ]
    )
    return validate_catalog(table)


def shapes(max_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pairs = [(k, n) for k in range(1, max_nodes + 1) for n in range(k, 4 * k + 1)]
    k, n = (np.array(a) for a in zip(*pairs, strict=True))
    bsz = np.array([8, 16, 32])
    kk, bb = np.meshgrid(np.arange(k.size), bsz, indexing="ij")
    return k[kk.ravel()], n[kk.ravel()], bb.ravel()


def table(params: StepParams, itype: str, max_nodes: int, seed: int = 0, **extra) -> pd.DataFrame:
    sim = simulate(params, *shapes(max_nodes), noise=0.03, seed=seed)
    return pd.DataFrame(sim).assign(model="resnet", instance_type=itype, gpus_per_node=4, **extra)


@pytest.fixture(scope="module")
def source_model() -> StepTimeModel:
    return StepTimeModel().fit(table(SOURCE, "g4dn.12xlarge", 2), catalog=catalog())


def width(pred: dict) -> np.ndarray:
    return np.log(pred["step_time_hi"] / pred["step_time_lo"])


def test_unmeasured_type_is_predicted_from_peak_throughput(source_model):
    args = ("resnet", "g4dn.12xlarge", 1, 1, np.array([8, 16, 32]))
    here = source_model.predict_arrays(*args)
    there = source_model.predict_arrays("resnet", "p3.8xlarge", *args[2:], catalog=catalog())
    # compute moves between the fp32 peak (8.1 -> 15.7 TFLOP/s) and the memory bandwidth
    # (320 -> 900 GB/s) speed-ups: their geometric mean
    speedup = np.sqrt(15.7 / 8.1 * 900 / 320)
    np.testing.assert_allclose(there["compute_s"], here["compute_s"] / speedup, rtol=1e-9)
    assert (width(there) > width(here)).all()  # a carried prediction is less sure


def test_without_memory_bandwidth_compute_moves_with_peak_alone(source_model):
    cat = catalog()
    cat["gpu_mem_bw_gbps"] = np.nan
    args = ("resnet", "g4dn.12xlarge", 1, 1, np.array([8, 32]))
    here = source_model.predict_arrays(*args)
    there = source_model.predict_arrays("resnet", "p3.8xlarge", *args[2:], catalog=cat)
    np.testing.assert_allclose(there["compute_s"], here["compute_s"] * 8.1 / 15.7, rtol=1e-9)


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


def test_cpu_profile_is_carried_to_a_gpu_type_with_wide_intervals():
    flops, grad_bytes = 1.2e9, 4.5e7
    cpu = SOURCE._replace(alpha_c=0.01, beta_c=0.05)  # a slow CPU: 50 ms per sample
    profile = table(cpu, "local-cpu-amd-epyc-2c", 1).query("num_workers == 1")
    profile = profile.assign(flops_per_sample=flops, grad_bytes=grad_bytes, gpus_per_node=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no multi-worker rows: terms fixed, said in a warning
        model = StepTimeModel().fit(profile)
    pred = model.predict_arrays(
        "resnet", "g4dn.12xlarge", np.array([1, 2, 4]), np.array([1, 8, 16]), 32, catalog=catalog()
    )
    assert np.isfinite(pred["step_time_s"]).all()
    # the GPU is faster than the CPU measured, and the interval spans well over a factor 2
    assert pred["compute_s"][0] < 0.01 + 0.05 * 32
    assert (pred["step_time_hi"] / pred["step_time_lo"] > 2.0).all()
    # the interval holds the time at any efficiency within the prior's one-sd band
    for eff in (0.2, 0.8):
        t = flops * 32 / (8.1e12 * eff)
        assert pred["step_time_lo"][0] < t < pred["step_time_hi"][0]


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
    prior = Belief(0.0, 1.0)
    post = prior.update(np.full(4, 0.5), noise_sd=1.0)
    assert post.mu == pytest.approx(0.4) and post.sd == pytest.approx(np.sqrt(1 / 5))
    assert prior.update(np.array([])) == prior


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
