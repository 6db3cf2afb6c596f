"""Online search without a model: what it profiles, what it costs, how close it lands."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from srifty_kit.catalog.query import load_catalog
from srifty_kit.decide.online import (
    Environment,
    MeasuredTable,
    ProfilingRuns,
    online_search,
    regret,
)
from srifty_kit.decide.planner import Constraints, Job, search
from srifty_kit.errors import InputError


def cluster_measurements(seed: int = 0) -> pd.DataFrame:
    """One 4-GPU type, 1-4 nodes, batches 16-256: compute linear in batch, ring all-reduce."""
    rng = np.random.default_rng(seed)
    rows = []
    for nodes in (1, 2, 3, 4):
        for per in (1, 2, 4):
            n = nodes * per
            sync = (
                0.0 if n == 1 else (0.012 * (per - 1) / per if nodes == 1 else 0.09 * (n - 1) / n)
            )
            for bsz in (16, 32, 64, 128, 256):
                for rep in range(2):
                    rows.append(
                        {
                            "model": "resnet",
                            "instance_type": "g4dn.12xlarge",
                            "gpus_per_node": 4,
                            "num_nodes": nodes,
                            "num_workers": n,
                            "local_bsz": bsz,
                            "repeat": rep,
                            "step_time_s": (0.02 + 0.0035 * bsz + sync) * rng.lognormal(0, 0.02),
                        }
                    )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def env() -> MeasuredTable:
    return MeasuredTable(cluster_measurements(), load_catalog())


JOB = Job("resnet", epochs=90, dataset_size=1_281_167, reference_bsz=256, noise_scale=8192)


def test_both_environments_implement_the_interface(env):
    assert isinstance(env, Environment)
    assert isinstance(ProfilingRuns(world_sizes=(1,), batch_sizes=(8,)), Environment)


def test_search_starts_from_extreme_batches_at_the_smallest_scale(env):
    result = online_search(env, JOB, Constraints(), max_profiles=6)
    first = result.history.head(4)
    assert (first["num_nodes"] == 1).all()
    assert set(first["local_bsz"]) == {16, 256}
    assert set(first["num_workers"]) == {1, 4}


def test_profiling_cost_is_what_the_profiled_runs_cost_and_stays_in_budget(env):
    result = online_search(
        env, JOB, Constraints(), profiling_budget_usd=3.0, max_profiles=30, patience=30
    )
    costs = result.history["cost_usd"]
    assert result.profiling_cost_usd == pytest.approx(costs.sum())
    assert result.stopped.startswith("profiling budget")
    # it stops at the first run that reaches the budget: before that run it was under
    assert costs.iloc[:-1].sum() < 3.0 <= costs.sum()
    assert len(result.history) < len(env.configurations())  # it did not measure everything


def test_search_stops_when_the_recommendation_is_stable_and_lands_near_the_oracle(env):
    cons = Constraints(deadline_h=30)
    result = online_search(env, JOB, cons, max_profiles=25, patience=3)
    assert result.stopped == "stable"
    assert len(result.history) < len(env.configurations())
    score = regret(result, env, JOB, cons)
    assert score["oracle"] <= score["recommended"]
    assert 0 <= score["regret"] < 0.25
    assert score["recommended"] == pytest.approx(score["oracle"] * (1 + score["regret"]))


def test_the_recommendation_is_what_search_decides_on_what_was_measured(env):
    # one decision rule in the kit: the online search recommends what ``search`` picks among
    # the same configurations, the cheapest whose probability of meeting the deadline under
    # the model's joint belief reaches the confidence, and says that probability
    cons = Constraints(deadline_h=30, confidence=0.9)
    result = online_search(env, JOB, cons, max_profiles=25, patience=3)
    rec = result.recommendation
    assert rec is not None
    again = search(result.model, env.catalog, JOB, cons, candidates=env.configurations()).pick
    keys = ["instance_type", "num_nodes", "num_workers", "local_bsz", "pricing"]
    assert rec[keys].tolist() == again[keys].tolist()
    assert rec["p_meet"] >= 0.9 and rec["time_hi_h"] <= 30
    assert result.history["p_meet"].iloc[-1] == pytest.approx(rec["p_meet"])
    assert result.result.explanation.startswith("Pick (cost): ")  # why, in words


def test_a_deadline_that_needs_several_nodes_sends_profiling_there(env):
    result = online_search(env, JOB, Constraints(deadline_h=12), max_profiles=12)
    assert (result.history["num_nodes"] > 1).any()
    if result.recommendation is not None:
        assert result.recommendation["time_hi_h"] <= 12


def test_impossible_constraints_give_no_recommendation_but_the_nearest(env):
    result = online_search(env, JOB, Constraints(deadline_h=0.001), max_profiles=6)
    assert result.recommendation is None and result.nearest is not None
    assert "no profiled model meets" in result.stopped
    assert np.isnan(regret(result, env, JOB, Constraints(deadline_h=0.001))["regret"])


def test_online_search_refuses_objectives_it_cannot_rank(env):
    with pytest.raises(InputError, match="cost"):
        online_search(env, JOB, objective="knee")


def test_regret_on_real_ec2_measurements(reference_measurements):
    table = pd.read_csv(reference_measurements)
    env = MeasuredTable(table[table["model"] == "cifar10"], load_catalog())
    job = Job("cifar10", epochs=100, dataset_size=50_000, reference_bsz=128, noise_scale=1000)
    result = online_search(env, job, Constraints(), max_profiles=12)
    score = regret(result, env, job)
    assert score["regret"] < 0.25 and score["profiled"] <= 12


@pytest.mark.slow
def test_real_profiling_runs_feed_the_search():
    env = ProfilingRuns(
        spec="mlp", world_sizes=(1, 2), batch_sizes=(8, 64), seconds=1.5, usd_per_hr=3.0
    )
    result = online_search(env, Job("mlp", samples=1e6), Constraints(), max_profiles=4)
    assert result.profiling_cost_usd > 0
    assert (result.measurements["instance_type"] == env.instance_type).all()
    assert len(result.measurements) >= 4 * 2  # every profiled configuration has its steps
    assert result.recommendation is not None


class _CtrlCAfter(MeasuredTable):
    """The replay environment, with the user pressing Ctrl-C during the third run."""

    calls: int = 0

    def measure(self, config):
        self.calls += 1
        if self.calls == 3:
            raise KeyboardInterrupt
        return super().measure(config)


def test_ctrl_c_keeps_what_was_measured():
    env = _CtrlCAfter(cluster_measurements(), load_catalog())
    result = online_search(env, JOB, Constraints())
    assert result.stopped.startswith("interrupted")
    assert len(result.history) == 2 and len(result.measurements) == 2 * 2  # two repeats each
    assert result.profiling_cost_usd > 0
