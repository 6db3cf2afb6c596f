"""The four lessons' numbers: invariants of workers x efficiency, spot, the controller, variance."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from srifty_kit.catalog.query import load_catalog
from srifty_kit.decide import tradeoffs
from srifty_kit.decide.planner import Constraints, Job, evaluate, search
from srifty_kit.errors import InputError
from srifty_kit.model.intervals import two_sided_z

JOB = Job("resnet", samples=1.2e8, reference_bsz=256, noise_scale=4096.0, checkpoint_gb=10.0)


@pytest.fixture(scope="module")
def catalog() -> pd.DataFrame:
    return load_catalog()


# -- (a) ---------------------------------------------------------------------------------------


def test_scaling_grows_the_global_batch_and_loses_statistical_efficiency(model, catalog):
    s = tradeoffs.scaling(model, catalog, JOB, "g4dn.12xlarge", 32, max_nodes=8)
    t = s.table
    assert t["num_workers"].tolist() == [1, 2, 3, 4, 8, 12, 16, 20, 24, 28, 32]
    assert (t["global_bsz"] == t["num_workers"] * 32).all()
    eff = t["efficiency"].to_numpy()
    assert ((eff > 0) & (eff <= 1)).all() and (np.diff(eff) < 0).all()
    assert s.cheapest["cost_hi_usd"] == t["cost_hi_usd"].min()
    assert s.fastest["time_hi_h"] == t["time_hi_h"].min()
    assert f"{s.cheapest['num_workers']} workers" in s.text()


def test_a_larger_noise_scale_never_makes_fewer_workers_fastest(model, catalog):
    fastest = [
        tradeoffs.scaling(model, catalog, replace(JOB, noise_scale=b), "g4dn.12xlarge", 32).fastest[
            "num_workers"
        ]
        for b in (100.0, 1000.0, 10_000.0, 1e6)
    ]
    assert fastest == sorted(fastest) and fastest[0] < fastest[-1]


# -- (b) ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spot_case(model, catalog):
    long_job = replace(JOB, samples=2e9, checkpoint_interval_h=1.0)
    return tradeoffs.spot_tradeoff(
        model, catalog, long_job, "g4dn.12xlarge", 8, 32, bucket=">20%", runs=4000
    )


def test_spot_runs_only_ever_take_longer_and_cost_less_on_average(spot_case):
    od = spot_case.ondemand
    assert (spot_case.runs["time_h"] >= od["time_h"] - 1e-9).all()
    assert spot_case.expected["cost_usd"] < od["cost_usd"]
    # the closed form is the simulation's mean, to first order in the reclaim rate
    simulated = spot_case.runs["time_h"].mean()
    assert spot_case.expected["time_h"] == pytest.approx(simulated, rel=0.01)
    assert 0 <= spot_case.miss_share <= 1 and spot_case.deadline_h == pytest.approx(
        od["time_h"] * 1.03
    )


def test_checkpointing_rarely_risks_the_deadline_and_often_costs_writes(spot_case):
    grid = spot_case.by_interval
    at_one_hour = grid.loc[(grid["checkpoint_interval_h"] - 1.0).abs().idxmin(), "miss_share"]
    # every minute: the writes alone overrun a deadline 3% past the on-demand time
    assert grid["miss_share"].iloc[0] == 1.0
    # every 8 hours: reclaims lose enough work to miss it, where hourly checkpoints do not
    assert grid["miss_share"].iloc[-1] > at_one_hour
    best = grid["cost_usd"].idxmin()
    assert 0 < best < len(grid) - 1  # an interior optimum: writes on one side, lost work on other
    assert "Cheapest checkpoint interval" in spot_case.text()


# -- (c) ---------------------------------------------------------------------------------------


def test_the_controller_balances_a_mix_and_rebalances_after_a_slowdown(model, catalog):
    lesson = tradeoffs.controller_lesson(model, catalog, JOB, local_bsz=32, slow_factor=2.0)
    trace = lesson.trace
    assert (trace.groupby("step")["local_bsz"].sum() == lesson.global_bsz).all()
    s = lesson.summary
    assert 0 <= s["settled_at"] < lesson.slow_at and s["resettled_at"] > lesson.slow_at
    assert s["settled_step_s"] < s["even_step_s"] and s["final_step_s"] < s["slowed_step_s"]
    before = trace[(trace["step"] == lesson.slow_at - 1) & (trace["worker"] == 0)]
    after = trace[(trace["step"] == trace["step"].max()) & (trace["worker"] == 0)]
    assert int(after["local_bsz"].iloc[0]) < int(before["local_bsz"].iloc[0])
    # settled: the faster type (g6) carries the larger batch
    last = trace[trace["step"] == lesson.slow_at - 1].groupby("instance_type")["local_bsz"]
    assert last.mean()["g6.12xlarge"] > last.mean()["g4dn.12xlarge"]
    assert f"re-settles by step {s['resettled_at']}" in lesson.text()


def test_without_a_slowdown_nothing_happens_at_the_slow_step(model, catalog):
    lesson = tradeoffs.controller_lesson(model, catalog, JOB, local_bsz=32, slow_factor=1.0)
    s = lesson.summary
    assert s["slowed_step_s"] == pytest.approx(s["settled_step_s"])
    assert "slower at step" not in lesson.text()


@pytest.mark.parametrize("bad", [{"slow_at": 0}, {"slow_at": 40}, {"slow_factor": 0.0}])
def test_controller_lesson_says_what_is_wrong(model, catalog, bad):
    with pytest.raises(InputError):
        tradeoffs.controller_lesson(model, catalog, JOB, **bad)


# -- (d) ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def evaluated(model, catalog):
    return evaluate(model, catalog, JOB, Constraints(confidence=0.9, max_nodes=8))


def test_simulated_runs_put_the_interval_ends_at_their_quantiles(evaluated):
    row = pd.Series({"time_h": 2.0, "time_lo_h": 1.5, "time_hi_h": 3.5})
    t = tradeoffs.simulate_runs(row, 0.9, 200_000, np.random.default_rng(1))
    assert np.quantile(t, [0.05, 0.5, 0.95]) == pytest.approx([1.5, 2.0, 3.5], rel=0.01)
    assert two_sided_z(0.9) == pytest.approx(1.6449, abs=1e-4)


@pytest.mark.parametrize("deadline", [2.0, 5.0, 20.0])
def test_the_upper_end_pick_is_the_search_pick_and_rarely_misses(
    model, catalog, evaluated, deadline
):
    j = tradeoffs.deadline_judgement(evaluated, deadline, runs=20_000)
    rows = {r["rule"]: r for _, r in j.table.iterrows()}
    want = search(model, catalog, JOB, Constraints(deadline_h=deadline, max_nodes=8), top=1)
    assert rows["upper"]["time_hi_h"] == want.pick["time_hi_h"]
    assert rows["upper"]["cost_hi_usd"] == want.pick["cost_hi_usd"]
    # its upper end meets the deadline: at most (1 - level) / 2 of runs miss, plus MC noise
    assert rows["upper"]["miss_share"] <= 0.05 + 0.01
    # the point estimate's pick is chosen from a superset: never dearer on average
    assert rows["point"]["cost_usd"] <= rows["upper"]["cost_usd"]
    edges, shares = j.histogram()
    assert all(s.sum() == pytest.approx(1.0) for s in shares.values())
    assert edges[0] <= min(t.min() for t in j.runs.values())


def test_judging_needs_on_demand_candidates_and_a_positive_deadline(model, catalog, evaluated):
    with pytest.raises(InputError, match="on-demand"):
        tradeoffs.deadline_judgement(
            evaluate(model, catalog, JOB, Constraints(spot=True, max_nodes=2)), 5.0
        )
    with pytest.raises(InputError, match="deadline"):
        tradeoffs.deadline_judgement(evaluated, 0.0)
