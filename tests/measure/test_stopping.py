"""The stopping rule: warm-up cut, batch-means interval of correlated steps, when to stop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from srifty_kit.measure import stopping, variance
from srifty_kit.measure.stopping import PrecisionTracker, batch_means_estimate, mser_cut
from tests.builders import ar1_steps as ar1


def _run(series: np.ndarray, interval: str, target: float) -> stopping.MeanEstimate:
    """Feed steps until the rule stops on precision (or the series ends)."""
    tracker = PrecisionTracker(0.95, interval)
    for v in series:
        tracker.add(float(v))
        if tracker.stop_reason(target, 10, series.size, False):
            break
    return tracker.estimate()


def test_mser_cuts_a_slow_start_and_little_of_a_steady_run():
    rng = np.random.default_rng(0)
    x = ar1(rng, 600, 0.3, 0.03)
    x[:40] *= np.linspace(1.8, 1.05, 40)  # caches, allocator, kernel choice
    assert 35 <= mser_cut(x) <= 80
    steady = [mser_cut(ar1(rng, 600, 0.3, 0.03)) for _ in range(40)]
    assert np.median(steady) <= 30  # a steady run loses at most a few batches
    assert max(steady) <= 300  # never more than half


def test_a_warm_up_still_going_keeps_the_run_measuring():
    rng = np.random.default_rng(10)
    slow_start = np.linspace(1.3, 1.0, 300) * ar1(rng, 300, 0.2, 0.01)  # getting faster
    tracker = PrecisionTracker(0.95)
    for v in slow_start[:200]:
        tracker.add(float(v))
        assert tracker.stop_reason(0.05, 10, 10_000, False) is None
    assert tracker.precision() < 0.05 and not tracker.estimate().settled
    stopped = None
    for v in np.concatenate([slow_start[200:], ar1(rng, 600, 0.2, 0.01)]):
        tracker.add(float(v))
        stopped = stopped or tracker.stop_reason(0.05, 10, 10_000, False)
        if stopped:
            break
    assert stopped == "precision reached" and tracker.n > 300
    assert 150 <= tracker.estimate().warmup_steps <= tracker.n // 2 + 5


def test_von_neumann_statistic_is_one_minus_half_durbin_watson():
    from statsmodels.stats.stattools import durbin_watson

    z = np.random.default_rng(1).normal(size=50)
    assert stopping.von_neumann_c(z) == pytest.approx(1 - durbin_watson(z - z.mean()) / 2)


def test_independent_steps_keep_batch_size_one_and_all_their_worth():
    rng = np.random.default_rng(2)
    sizes = [batch_means_estimate(rng.normal(1, 0.05, 400), 0.95) for _ in range(30)]
    assert np.mean([e.batch_size == 1 for e in sizes]) >= 0.7
    one = [e for e in sizes if e.batch_size == 1]
    assert all(e.n_eff == pytest.approx(e.n - e.warmup_steps) for e in one)


def test_batch_means_variance_agrees_with_newey_west_on_a_long_series():
    import statsmodels.api as sm

    rng = np.random.default_rng(3)
    x = ar1(rng, 20_000, 0.6, 0.05)
    est = batch_means_estimate(x, 0.95)
    ours = (est.hi - est.mean) / stats.t.ppf(0.975, (x.size - est.warmup_steps) // est.batch_size)
    kept = x[est.warmup_steps :]
    hac = sm.OLS(kept, np.ones_like(kept)).fit(cov_type="HAC", cov_kwds={"maxlags": 40})
    assert ours == pytest.approx(float(hac.bse[0]), rel=0.25)
    # and both are wider than the iid standard error by about sqrt((1 + rho) / (1 - rho)) = 2
    assert ours / stats.sem(kept) == pytest.approx(2.0, rel=0.25)
    assert est.n_eff == pytest.approx(kept.size / 4, rel=0.5)


def test_on_correlated_steps_the_new_rule_covers_the_mean_and_the_iid_rule_does_not():
    rng = np.random.default_rng(4)
    new_hits = old_hits = 0
    steps_new, steps_old = [], []
    runs = 150
    for _ in range(runs):
        x = ar1(rng, 6000, 0.6, 0.08)
        new, old = _run(x, "batch_means", 0.02), _run(x, "iid", 0.02)
        new_hits += new.lo <= 1.0 <= new.hi
        old_hits += old.lo <= 1.0 <= old.hi
        steps_new.append(new.n)
        steps_old.append(old.n)
    assert new_hits / runs >= 0.88
    assert old_hits / runs <= 0.8
    assert np.median(steps_new) > 2 * np.median(steps_old)  # the price: it measures longer


def test_unsettled_interval_does_not_stop_the_run():
    # 19 kept steps cannot make MIN_BATCHES batch means: shown, not stopped on
    tracker = PrecisionTracker(0.95)
    for v in np.linspace(1.0, 1.001, stopping.MIN_BATCHES - 1):
        tracker.add(float(v))
    assert not tracker.estimate().settled
    assert tracker.precision() < 0.01
    assert tracker.stop_reason(0.01, 2, 10_000, False) is None
    assert tracker.stop_reason(0.01, 2, 10, False) == "step limit"


@given(
    st.lists(st.floats(0.001, 10), min_size=2, max_size=300),
    st.sampled_from(["batch_means", "iid"]),
)
@settings(max_examples=150, deadline=None)
def test_the_interval_holds_the_mean_and_the_cut_is_at_most_half(xs, interval):
    tracker = PrecisionTracker(0.9, interval)
    for v in xs:
        tracker.add(v)
    est = tracker.estimate()
    assert est.n == len(xs)
    assert 0 <= est.warmup_steps <= len(xs) // 2 + stopping.MSER_BATCH
    assert est.mean == pytest.approx(np.mean(xs[est.warmup_steps :]))
    if np.isfinite(est.lo):
        assert est.lo <= est.mean * (1 + 1e-12) and est.mean <= est.hi * (1 + 1e-12)
        assert est.n_eff > 0
    again = variance.summarise(np.array(xs), 0.9, interval=interval)  # what summaries recompute
    assert (again.lo, again.hi) == pytest.approx((est.lo, est.hi), rel=1e-9, nan_ok=True)


@given(st.lists(st.floats(0.001, 10), min_size=2, max_size=200), st.sampled_from([0.8, 0.95]))
def test_iid_rule_matches_scipy_t_interval(xs, level):
    x = np.array(xs)
    tracker = PrecisionTracker(level, interval="iid")
    for v in x:
        tracker.add(v)
    assert tracker.mean == pytest.approx(x.mean())
    if np.std(x) > 1e-9 * x.mean():
        lo, hi = stats.t.interval(level, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
        assert tracker.precision() == pytest.approx((hi - lo) / 2 / x.mean(), rel=1e-6)


def test_an_unknown_interval_rule_is_refused():
    with pytest.raises(ValueError, match="batch_means"):
        PrecisionTracker(0.95, interval="bootstrap")
