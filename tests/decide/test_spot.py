"""Spot reclaim risk: the closed form the search uses agrees with a Monte Carlo of the process."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srifty_kit.decide.spot import SpotPolicy, expected_run, hourly_hazard, simulate, upper_run
from srifty_kit.errors import InputError
from srifty_kit.tables.contracts import INTERRUPTION_BUCKETS

SPOT, ON_DEMAND = 1.2, 3.9

# realistic runs: up to 16 nodes in the worst bucket, 1 h checkpoints, 5-15 min restarts
CASES = [
    (16 * 3.9e-4, 120.0, SpotPolicy(1.0, 0.1, None)),
    (16 * 3.9e-4, 120.0, SpotPolicy(1.0, 0.25, 1)),
    (0.02, 60.0, SpotPolicy(0.5, 0.1, None)),
    (0.02, 60.0, SpotPolicy(0.5, 0.1, 2)),
    (0.05, 30.0, SpotPolicy(0.25, 0.2, 3)),
]


def test_hazard_grows_with_the_bucket_and_matches_the_stated_conversion():
    lam = hourly_hazard(list(INTERRUPTION_BUCKETS))
    assert np.all(np.diff(lam) > 0)
    # '5-10%' -> 7.5% a month -> -ln(1 - 0.075) / 730 per hour
    assert lam[1] == pytest.approx(-np.log(1 - 0.075) / 730)


def test_unknown_bucket_is_treated_as_the_worst():
    assert hourly_hazard([None])[0] == hourly_hazard([">20%"])[0]


def test_bucket_outside_the_advisor_scale_is_an_input_error():
    with pytest.raises(InputError, match="bucket"):
        hourly_hazard(["30%"])


@pytest.mark.parametrize(("hazard", "work", "policy"), CASES)
def test_closed_form_expectation_agrees_with_monte_carlo(hazard, work, policy):
    closed = expected_run(np.array([work]), hazard, policy, SPOT, ON_DEMAND)
    runs = simulate(work, hazard, policy, SPOT, ON_DEMAND, runs=20_000, seed=1)
    assert closed["time_h"][0] == pytest.approx(runs["time_h"].mean(), rel=0.01)
    assert closed["cost_usd"][0] == pytest.approx(runs["cost_usd"].mean(), rel=0.02)
    assert closed["reclaims"][0] == pytest.approx(runs["reclaims"].mean(), rel=0.05, abs=0.02)


@pytest.mark.parametrize(("hazard", "work", "policy"), CASES)
@pytest.mark.parametrize("level", [0.8, 0.9, 0.99])
def test_upper_bound_holds_at_its_level_in_monte_carlo(hazard, work, policy, level):
    bound = upper_run(np.array([work]), hazard, policy, SPOT, ON_DEMAND, level)
    runs = simulate(work, hazard, policy, SPOT, ON_DEMAND, runs=20_000, seed=2)
    assert (runs["time_h"] <= bound["time_h"][0] + 1e-9).mean() >= level
    assert (runs["cost_usd"] <= bound["cost_usd"][0] + 1e-9).mean() >= level


def test_fallback_stops_reclaims_at_k():
    runs = simulate(50.0, 0.2, SpotPolicy(1.0, 0.1, 2), SPOT, ON_DEMAND, runs=2_000)
    assert runs["reclaims"].max() == 2
    assert runs.loc[runs["fell_back"], "reclaims"].eq(2).all()


def test_no_hazard_means_the_run_costs_its_work_at_the_spot_price():
    out = expected_run(np.array([10.0]), 0.0, SpotPolicy(1.0, 0.1, 2), SPOT, ON_DEMAND)
    assert out["time_h"][0] == 10.0 and out["cost_usd"][0] == pytest.approx(10.0 * SPOT)


@settings(max_examples=50, deadline=None)
@given(
    nodes=st.integers(1, 64),
    work=st.floats(0.1, 500),
    period=st.floats(0.05, 4),
    restart=st.floats(0, 1),
    k=st.one_of(st.none(), st.integers(1, 5)),
)
def test_more_nodes_mean_more_expected_reclaims_and_time(nodes, work, period, restart, k):
    lam = hourly_hazard(["10-15%"])[0]
    policy = SpotPolicy(period, restart, k)
    few = expected_run(np.array([work]), lam * nodes, policy, SPOT, ON_DEMAND)
    many = expected_run(np.array([work]), lam * (nodes + 1), policy, SPOT, ON_DEMAND)
    assert many["reclaims"][0] >= few["reclaims"][0]
    assert many["time_h"][0] >= few["time_h"][0] >= work
    bound = upper_run(np.array([work]), lam * nodes, policy, SPOT, ON_DEMAND, 0.9)
    assert bound["time_h"][0] >= work
