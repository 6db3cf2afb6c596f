"""The network decay: one value per instance type, learned where the runs show it, else a prior."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srifty_kit import StepTimeModel
from srifty_kit.model.fit import DECAY_PRIOR, estimate_decay, network_decay, with_per_node
from srifty_kit.model.physics import StepParams, network_slowdown, simulate, sync_time

# no network latency: a latency paid per node grows the per-byte sync too, and would be read
# as decay (the estimate absorbs it; the fit then holds it in lat_inter)
BASE = dict(alpha_c=0.05, beta_c=0.004, lat_intra=0.0005, bw_intra=0.02, lat_inter=0.0)


def runs(decay: float, nodes=(1, 2, 3, 4, 6, 8), models=("a", "b"), noise=0.02, seed=0):
    """Synthetic runs of several models on one 4-GPU type whose network decays by ``decay``."""
    frames = []
    for i, model in enumerate(models):
        p = StepParams(**BASE, bw_inter=0.1 * (i + 1), share=0.0, gamma=1.0, decay=decay)
        k = np.array([k for k in nodes for _ in (1, 4)])
        n = np.array([k * g for k in nodes for g in (1, 4)])
        keep = n >= k
        sim = simulate(
            p,
            np.repeat(k[keep], 3),
            np.repeat(n[keep], 3),
            np.tile([8, 16, 32], keep.sum()),
            noise,
            seed=seed + i,
        )
        frames.append(pd.DataFrame(sim).assign(model=model, instance_type="t", gpus_per_node=4))
    return pd.concat(frames, ignore_index=True)


def test_slowdown_is_one_at_two_nodes_and_grows_ever_more_slowly():
    k = np.array([1, 2, 3, 4, 8, 16, 32])
    s = network_slowdown(0.3, k)
    assert s[0] == s[1] == 1.0
    steps = np.diff(s[1:]) / np.diff(np.log2(k[1:]))
    assert np.allclose(steps, 0.3)  # linear in log2 nodes: each doubling adds the same


@settings(max_examples=15, deadline=None)
@given(decay=st.sampled_from([0.0, 0.1, 0.3, 0.6, 1.0]))
def test_the_decay_is_recovered_from_runs_on_several_larger_node_counts(decay):
    table = with_per_node(runs(decay))
    assert estimate_decay(table) == pytest.approx(decay, abs=0.06)


@pytest.mark.parametrize("odd", [2, 4, 8])
def test_one_inconsistent_campaign_does_not_set_the_growth(odd):
    # slower per byte at one node count (as the reference g4dn.12xlarge runs are at 2): no
    # node count is special, the robust loss gives whichever campaign strays little weight
    table = runs(0.4)
    table.loc[table["num_nodes"] == odd, ["step_time_s", "sync_time_s"]] *= 1.8
    assert estimate_decay(with_per_node(table)) == pytest.approx(0.4, abs=0.06)


def test_too_few_larger_node_counts_give_the_prior_and_say_so():
    table = with_per_node(runs(0.5, nodes=(1, 2, 3)))
    assert estimate_decay(table) is None
    value, source = network_decay(table, prior=0.2)
    assert value == 0.2 and "prior" in source
    assert network_decay(table)[0] == DECAY_PRIOR


def test_one_decay_per_instance_type_is_shared_by_every_model_and_used_in_predictions():
    truth = 0.5
    table = runs(truth)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(table)
    ((decay, source),) = model.network_decay_.values()
    assert decay == pytest.approx(truth, abs=0.06) and "learned" in source
    assert {fit.params.decay for fit in model.groups_.values()} == {decay}
    # 16 nodes, never measured: the sync part grows as the network says
    p = model.groups_[("a", "t")].params
    far = sync_time(p, np.array([16]), np.array([64]), np.array([4]))[0]
    flat = sync_time(p._replace(decay=0.0), np.array([16]), np.array([64]), np.array([4]))[0]
    assert far / flat == pytest.approx(network_slowdown(decay, 16), rel=1e-9)


def test_a_fitted_decay_survives_save_and_load(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(runs(0.3))
    model.save(tmp_path / "m.json")
    again = StepTimeModel.load(tmp_path / "m.json")
    cfg = pd.DataFrame(
        {
            "model": ["a"],
            "instance_type": ["t"],
            "num_nodes": [12],
            "num_workers": [48],
            "local_bsz": [16],
            "gpus_per_node": [4],
        }
    )
    assert again.predict(cfg).equals(model.predict(cfg))


def test_the_prior_is_an_argument():
    table = runs(0.5, nodes=(1, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with_prior = StepTimeModel(decay_prior=0.7).fit(table)
        without = StepTimeModel().fit(table)
    assert with_prior.network_decay_["t"][0] == 0.7
    cfg = pd.DataFrame(
        {
            "model": ["a"],
            "instance_type": ["t"],
            "num_nodes": [8],
            "num_workers": [32],
            "local_bsz": [16],
            "gpus_per_node": [4],
        }
    )
    assert (with_prior.predict(cfg)["step_time_s"] > without.predict(cfg)["step_time_s"]).all()
