"""Variance characterisation: per-configuration statistics, intervals, sample sizes, drift."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from srifty_kit import InputError
from srifty_kit.measure import variance


def _table(samples: dict[int, np.ndarray]) -> pd.DataFrame:
    rows = []
    for bsz, xs in samples.items():
        rows += [
            {
                "model": "m",
                "instance_type": "t",
                "num_nodes": 1,
                "num_workers": 1,
                "local_bsz": bsz,
                "step_time_s": x,
                "repeat": i,
            }
            for i, x in enumerate(xs)
        ]
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def two_configs():
    rng = np.random.default_rng(0)
    return _table(
        {8: rng.lognormal(np.log(0.1), 0.1, 200), 16: rng.lognormal(np.log(0.2), 0.3, 60)}
    )


def test_describe_gives_one_row_per_configuration_with_ordered_statistics(two_configs):
    out = variance.describe(two_configs, level=0.9, n_resamples=500)
    assert list(out["local_bsz"]) == [8, 16]
    assert list(out["n"]) == [200, 60]
    assert out.attrs["level"] == 0.9
    assert (out["p5"] <= out["median"]).all() and (out["median"] <= out["p95"]).all()
    assert (out["mean_lo"] < out["mean"]).all() and (out["mean"] < out["mean_hi"]).all()
    assert (out["p95_lo"] <= out["p95"]).all() and (out["p95"] <= out["p95_hi"]).all()
    assert out.loc[1, "cv"] > out.loc[0, "cv"]  # the noisier configuration says so


def test_higher_level_gives_wider_intervals(two_configs):
    narrow = variance.describe(two_configs, level=0.8, n_resamples=500)
    wide = variance.describe(two_configs, level=0.99, n_resamples=500)
    assert ((wide["mean_hi"] - wide["mean_lo"]) > (narrow["mean_hi"] - narrow["mean_lo"])).all()


def test_bootstrap_interval_of_the_mean_covers_about_level():
    rng = np.random.default_rng(3)
    truth = np.exp(np.log(0.1) + 0.3**2 / 2)  # mean of the lognormal
    hits = 0
    for _ in range(150):
        t = _table({8: rng.lognormal(np.log(0.1), 0.3, 40)})
        row = variance.describe(t, level=0.9, n_resamples=400).iloc[0]
        hits += row["mean_lo"] <= truth <= row["mean_hi"]
    assert 0.8 <= hits / 150 <= 0.97


def test_fast_describe_uses_the_t_interval(two_configs):
    out = variance.describe(two_configs, n_resamples=0, level=0.95)
    x = two_configs.query("local_bsz == 8")["step_time_s"]
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert out.loc[0, "mean_lo"] == pytest.approx(lo)
    assert out.loc[0, "mean_hi"] == pytest.approx(hi)
    assert np.isnan(out.loc[0, "p95_lo"])


@given(st.lists(st.floats(0.001, 10), min_size=2, max_size=200), st.sampled_from([0.8, 0.95]))
def test_running_precision_matches_scipy_t_interval(xs, level):
    x = np.array(xs)
    tracker = variance.PrecisionTracker(level)
    for v in x:
        tracker.add(v)
    assert tracker.mean == pytest.approx(x.mean())
    if np.std(x) > 1e-9 * x.mean():
        lo, hi = stats.t.interval(level, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
        assert tracker.precision() == pytest.approx((hi - lo) / 2 / x.mean(), rel=1e-6)


@given(cv=st.floats(0.01, 2), target=st.floats(0.005, 0.2))
@settings(max_examples=100)
def test_samples_needed_is_the_smallest_n_meeting_the_target(cv, target):
    n = int(variance.samples_needed(cv, target, level=0.95)[0])

    def width(k):
        return stats.t.ppf(0.975, k - 1) * cv / np.sqrt(k)

    assert width(n) <= target * (1 + 1e-9)
    if n > 2:
        assert width(n - 1) > target


def test_plan_samples_says_how_many_more_steps(two_configs):
    plan = variance.plan_samples(two_configs, target_precision=0.01)
    assert (plan["n_needed"] >= 2).all()
    assert (plan["n_more"] == np.maximum(0, plan["n_needed"] - plan["n"])).all()
    noisy = plan.set_index("local_bsz")
    assert noisy.loc[16, "n_needed"] > noisy.loc[8, "n_needed"]
    with pytest.raises(InputError, match="target precision"):
        variance.plan_samples(two_configs, target_precision=0)


def test_outliers_flag_spikes_not_ordinary_noise():
    rng = np.random.default_rng(1)
    x = rng.normal(0.1, 0.002, 300)
    assert variance.outliers(x).mean() < 0.01
    x[[10, 200]] = 0.3  # two stalls
    flags = variance.outliers(x)
    assert flags[10] and flags[200]


def test_drift_tells_warm_up_throttling_and_stable_apart():
    rng = np.random.default_rng(2)
    n = 200
    stable = rng.normal(0.1, 0.003, n)
    warm = stable.copy()
    warm[:20] *= np.linspace(2.0, 1.1, 20)  # first steps slow: caches, allocator, JIT
    throttled = stable * np.linspace(1.0, 1.3, n)  # clock drops as the chip heats
    out = variance.detect_drift(_table({1: stable, 2: warm, 3: throttled, 4: stable[:5]}))
    verdict = out.set_index("local_bsz")["verdict"]
    assert verdict[1] == "stable"
    assert verdict[2] == "warming up"
    assert verdict[3] == "slowing down (throttling?)"
    assert verdict[4] == "too few samples"
    row = out.set_index("local_bsz").loc[3]
    assert row["change_lo"] <= row["change"] <= row["change_hi"]
    assert row["change"] == pytest.approx(0.3, abs=0.05)


def test_grouping_by_a_missing_column_is_an_input_error(two_configs):
    with pytest.raises(InputError, match="no column 'zone'"):
        variance.describe(two_configs, by=["zone"])


def test_figures_draw_every_configuration(two_configs):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from srifty_kit.present import plots

    ax = plots.step_time_distributions(two_configs)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16"]
    ax = plots.step_time_intervals(variance.describe(two_configs, n_resamples=200))
    assert len(ax.containers) == 2  # mean and p95 error bars
    ax = plots.step_time_trace(two_configs)
    assert len(ax.get_lines()) >= 2
    coll = pd.DataFrame(
        {
            "bytes": [1024, 1024, 4096, 4096] * 2,
            "world_size": [2] * 4 + [4] * 4,
            "seconds": [1e-4, 2e-4, 3e-4, 4e-4, 2e-4, 3e-4, 5e-4, 6e-4],
        }
    )
    ax = plots.allreduce_times(coll)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    plt.close("all")
