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
from srifty_kit.measure.stopping import PrecisionTracker, batch_means_estimate
from tests.builders import ar1_steps as ar1


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


def test_interval_of_the_mean_covers_about_level_on_independent_steps():
    rng = np.random.default_rng(3)
    truth = np.exp(np.log(0.1) + 0.3**2 / 2)  # mean of the lognormal
    hits = 0
    for _ in range(150):
        t = _table({8: rng.lognormal(np.log(0.1), 0.3, 40)})
        row = variance.describe(t, level=0.9, n_resamples=0).iloc[0]
        hits += row["mean_lo"] <= truth <= row["mean_hi"]
    assert 0.8 <= hits / 150 <= 0.97


def test_describe_gives_the_stopping_rules_interval_and_the_iid_one_on_request(two_configs):
    out = variance.describe(two_configs, n_resamples=0, level=0.95)
    x = two_configs.query("local_bsz == 8")["step_time_s"].to_numpy()
    est = batch_means_estimate(x, 0.95)
    assert (out.loc[0, "mean_lo"], out.loc[0, "mean_hi"]) == pytest.approx((est.lo, est.hi))
    assert out.loc[0, "warmup_steps"] == est.warmup_steps
    assert out.loc[0, "n_eff"] == pytest.approx(est.n_eff)
    assert np.isnan(out.loc[0, "p95_lo"])
    old = variance.describe(two_configs, n_resamples=0, level=0.95, interval="iid")
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert (old.loc[0, "mean_lo"], old.loc[0, "mean_hi"]) == pytest.approx((lo, hi))
    with pytest.raises(InputError, match="unknown interval 'normal'"):
        variance.describe(two_configs, interval="normal")


def test_correlated_steps_are_worth_fewer_and_need_more():
    rng = np.random.default_rng(5)
    independent = rng.normal(0.1, 0.005, 600)
    correlated = ar1(rng, 600, 0.7, 0.05, mean=0.1)
    table = _table({1: independent, 2: correlated})
    out = variance.describe(table, n_resamples=0).set_index("local_bsz")
    assert out.loc[1, "n_eff"] > 2 * out.loc[2, "n_eff"]
    assert out.loc[2, "lag1"] > 0.5
    plan = variance.plan_samples(table, target_precision=0.002).set_index("local_bsz")
    assert plan.loc[2, "n_needed"] > 2 * plan.loc[1, "n_needed"]


def test_marked_warmup_rows_are_counted_and_left_out():
    rng = np.random.default_rng(6)
    x = rng.normal(0.1, 0.002, 200)
    x[:10] = 1.0  # ten slow steps the profiler marked
    table = _table({8: x}).assign(warmup=[True] * 10 + [False] * 190)
    row = variance.describe(table, n_resamples=0).iloc[0]
    assert row["n"] == 200 and row["warmup_steps"] == 10
    assert row["mean"] == pytest.approx(x[10:].mean())
    assert len(variance.steady(table)) == 190
    # the same marks as text (a CSV read without types) mean the same
    assert len(variance.steady(table.assign(warmup=table["warmup"].astype(str)))) == 190


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
    assert verdict[3].startswith("slowing down (throttling?)")  # and its level moved
    assert verdict[4] == "too few samples"
    row = out.set_index("local_bsz").loc[3]
    assert row["change_lo"] <= row["change"] <= row["change_hi"]
    assert row["change"] == pytest.approx(0.3, abs=0.05)


def test_drift_says_too_few_steps_where_the_warm_up_cut_left_too_few_to_judge():
    # 30 steady steps, the profiler marked the first 18 as warm-up: 12 are left, fewer than
    # a level-shift test needs, so the verdict must not read "stable"
    rng = np.random.default_rng(3)
    table = _table({4: rng.normal(0.1, 0.003, 30), 8: rng.normal(0.2, 0.003, 200)})
    table["warmup"] = (table["local_bsz"] == 4) & (table["repeat"] < 18)
    out = variance.detect_drift(table).set_index("local_bsz")
    assert out.loc[4, "verdict"] == (
        "too few steps to judge a level shift (12 after the warm-up cut, 20 needed)"
    )
    assert not out.loc[4, "drift"] and np.isnan(out.loc[4, "shift"])
    assert out.loc[8, "verdict"] == "stable"  # enough steps: judged, and steady


def test_level_shift_is_flagged_and_autocorrelation_alone_is_not():
    from statsmodels.stats.diagnostic import breaks_cusumolsresid

    rng = np.random.default_rng(7)
    steady = [ar1(rng, 400, 0.6, 0.05) for _ in range(100)]
    ours = np.mean([variance.level_shift(x)["drift"] for x in steady])
    # the iid CUSUM test (statsmodels) takes the same correlated series for changes
    iid = np.mean([breaks_cusumolsresid(x - x.mean())[1] < 0.01 for x in steady])
    assert ours <= 0.05 < 0.2 <= iid
    x = ar1(rng, 1000, 0.3, 0.03)
    x[600:] *= 1.08  # a noisy neighbour arrives at step 600
    found = variance.level_shift(x)
    assert found["drift"] and found["shift_p"] < 0.01
    assert found["shift"] == pytest.approx(0.08, abs=0.02)
    assert 550 <= found["shift_at"] <= 650


def test_drift_table_flags_the_shifted_configuration_and_keeps_its_samples():
    rng = np.random.default_rng(8)
    shifted = ar1(rng, 500, 0.3, 0.03)
    shifted[250:] *= 1.1
    table = _table({1: ar1(rng, 500, 0.3, 0.03), 2: shifted})
    out = variance.detect_drift(table).set_index("local_bsz")
    assert not out.loc[1, "drift"] and out.loc[2, "drift"]
    assert "level shift (+" in out.loc[2, "verdict"]
    assert out.loc[2, "n"] == 500  # nothing dropped


def test_autocorrelation_table_has_every_lag_and_a_band():
    rng = np.random.default_rng(9)
    table = _table({1: rng.normal(1, 0.1, 300), 2: ar1(rng, 300, 0.8, 0.1)})
    acf = variance.autocorrelation(table, nlags=10)
    assert list(acf.groupby("local_bsz")["lag"].apply(list)) == [list(range(1, 11))] * 2
    first = acf[acf["lag"] == 1].set_index("local_bsz")
    assert abs(first.loc[1, "acf"]) < first.loc[1, "band"] < first.loc[2, "acf"]


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
    ax = plots.step_time_acf(variance.autocorrelation(two_configs))
    assert [t.get_text() for t in ax.get_legend().get_texts()][:2] == [
        "local_bsz=8",
        "local_bsz=16",
    ]
    ax = plots.effective_samples(variance.describe(two_configs, n_resamples=0))
    assert len(ax.patches) == 6  # steps, kept, effective for each configuration
    shifted = two_configs.copy()
    late = (shifted["local_bsz"] == 8) & (shifted["repeat"] >= 100)
    shifted.loc[late, "step_time_s"] *= 1.5
    drift = variance.detect_drift(shifted)
    ax = plots.warmup_and_shift(shifted, drift)
    dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert len(dashed) == int(drift["drift"].sum()) >= 1
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


def test_a_few_wild_steps_never_show_a_negative_mean_time():
    # eight steps on a contended machine: two of them ten times the others, so the t interval
    # of the mean reaches below zero; a table of step times must not print a negative time
    steps = np.array([0.1, 0.1, 2.0, 0.1, 0.1, 0.1, 2.0, 0.1])
    table = pd.DataFrame({"model": "m", "local_bsz": 8, "step_time_s": steps})
    est = batch_means_estimate(steps, 0.95, warmup=False)
    assert est.lo < 0  # the raw interval does reach below zero here
    row = variance.describe(table, by=["model", "local_bsz"], n_resamples=0).iloc[0]
    assert row["mean_lo"] == 0.0 and row["mean_hi"] == pytest.approx(est.hi)
    assert row["precision"] == pytest.approx(est.precision)  # the stopping rule is unchanged


def test_a_profiles_rows_give_back_the_interval_its_summary_showed():
    # heavy-tailed, correlated CPU steps (a busy machine) whose warm-up MSER-5 does not
    # call over: the profiler did not take its interval as settled, and widened it
    rng = np.random.default_rng(13)
    z = np.zeros(400)
    for i, e in enumerate(rng.normal(0, 1, 400)):
        z[i] = 0.3 * z[i - 1] + e if i else e
    x = 0.01 * np.exp(1.2 * z)
    tracker = PrecisionTracker(0.95)
    for v in x:
        tracker.add(float(v))
    shown = tracker.estimate()  # what the profile's summary shows
    assert not shown.settled and shown.warmup_steps > 0
    marks = np.arange(x.size) < shown.warmup_steps  # as the profiler marks its rows
    table = _table({8: x}).assign(warmup=marks)
    for row in (
        variance.describe(table, n_resamples=0).iloc[0],
        variance.plan_samples(table).iloc[0],
    ):
        assert row["n_eff"] == pytest.approx(shown.n_eff)
        assert row["precision"] == pytest.approx(shown.precision)
    again = variance.describe(table, n_resamples=0).iloc[0]
    assert (again["mean_lo"], again["mean_hi"]) == pytest.approx((shown.lo, shown.hi))
    assert again["warmup_steps"] == shown.warmup_steps
