"""Intervals for extrapolation: signed conformal ends, the node-count move, old files' widths."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from srifty_kit import InputError, StepTimeModel
from srifty_kit.model import intervals
from srifty_kit.model.intervals import NodeMove, Spread, equal_weights, node_move, signed_quantiles
from tests.builders import configs, measurements


def _misses(lo: float, hi: float, fresh: np.ndarray) -> tuple[float, float]:
    return float(np.mean(fresh > hi)), float(np.mean(fresh < lo))


def test_signed_ends_put_as_many_misses_above_as_below_for_a_model_that_runs_slow():
    rng = np.random.default_rng(0)
    # held-out steps of a model that underpredicts larger scales: errors centred at +0.5 sd
    scores, fresh = rng.normal(0.5, 1.0, 2000), rng.normal(0.5, 1.0, 20000)
    above, below = _misses(*signed_quantiles(scores, 0.9), fresh)
    assert abs(above - 0.05) < 0.015 and abs(below - 0.05) < 0.015
    # the symmetric interval of |score| covers as much, but its misses are nearly all slow
    q = intervals.conformal_quantile(np.abs(scores), 0.9)
    above_sym, below_sym = _misses(-q, q, fresh)
    assert above_sym > 2.5 * below_sym


def test_signed_ends_with_too_few_scores_reach_beyond_the_extremes():
    scores = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0])
    lo, hi = signed_quantiles(scores, 0.9)
    assert lo < scores.min() and hi > scores.max()
    assert signed_quantiles(np.array([]), 0.9) == pytest.approx((-1.6449, 1.6449), abs=1e-4)


def test_node_move_reads_the_median_and_the_5_and_95_percent_points():
    rng = np.random.default_rng(1)
    # network time at a new node count: 10% slower in the median, a long slow tail
    x = np.where(rng.random(4000) < 0.5, -np.abs(rng.normal(0, 0.1, 4000)), 0)
    x = 0.1 + np.where(x < 0, x, np.abs(rng.normal(0, 0.4, 4000)))
    share = np.full(x.size, 0.8)
    move = node_move(x * share, share, np.ones(x.size), np.full(x.size, 0.5), "synthetic")
    z = intervals.two_sided_z(0.9)
    assert move.centre == pytest.approx(np.median(x), abs=0.01)
    assert move.centre - z * move.below == pytest.approx(np.quantile(x, 0.05), abs=0.01)
    assert move.centre + z * move.above == pytest.approx(np.quantile(x, 0.95), abs=0.03)
    assert move.above > 3 * move.below
    # steps that are mostly compute say nothing about the network: they are left out
    junk = node_move(
        np.r_[x * share, np.full(500, 0.5)],
        np.r_[share, np.full(500, 0.05)],
        np.ones(x.size + 500),
        np.r_[np.full(x.size, 0.5), np.full(500, 2.0)],
        "synthetic",
    )
    assert (junk.centre, junk.below, junk.above) == (move.centre, move.below, move.above)
    assert junk.doublings == move.doublings == 0.5  # the largest move among the rows kept
    assert node_move(x[:5], share[:5], np.ones(5), np.ones(5), "too few") is None


def test_equal_weights_give_every_cluster_then_every_move_the_same_say():
    cluster = np.array(["aws"] * 6 + ["azure"] * 2)
    move = np.array(["3", "3", "3", "3", "4", "4", "3", "4"])
    w = equal_weights(cluster, move)
    assert w.sum() == pytest.approx(1.0)
    assert w[cluster == "aws"].sum() == pytest.approx(0.5)
    assert w[(cluster == "aws") & (move == "3")].sum() == pytest.approx(0.25)
    assert w[7] == pytest.approx(0.25)


def test_a_new_node_count_moves_the_interval_by_the_network_s_share_and_holds_the_point():
    node = NodeMove(0.2, 0.1, 0.3, "test", doublings=1.0)
    spread = Spread(0.03, 0.05, np.linspace(-1.6, 1.6, 200), signed=True, node=node)
    share = np.array([0.0, 0.5, 0.5, 1.0])
    doublings = np.array([1.0, 0.0, 1.0, 1.0])
    down, up = spread.offsets(0.9, share, np.ones(4), doublings)
    z = intervals.two_sided_z(0.9)
    # a step without synchronisation keeps only the noise floor, centred on the point
    assert down[0] == pytest.approx(z * 0.03, rel=0.05) and up[0] == pytest.approx(down[0])
    # the same configuration at a new node count: shifted up by share * centre, wider above
    assert up[2] > up[1] and up[2] - down[2] > 0
    # half the sync share more: half the centre and half the upper spread more, less the
    # own part's quadrature (small here)
    assert up[3] - up[2] == pytest.approx(0.5 * (0.2 + z * 0.3), rel=0.1)
    assert (down >= 0).all() and (up >= 0).all()  # the point always lies inside


def test_the_node_move_grows_only_beyond_the_moves_it_was_learned_on():
    node = NodeMove(0.1, 0.2, 0.3, "test", doublings=0.5)
    spread = Spread(0.03, 0.05, np.linspace(-1.6, 1.6, 200), signed=True, node=node)
    share = np.full(4, 0.8)
    down, up = spread.offsets(0.9, share, np.ones(4), np.array([0.25, 0.5, 1.0, 2.0]))
    # within the learned size (a quarter and a half doubling) the band is the same
    assert (down[0], up[0]) == pytest.approx((down[1], up[1]))
    # beyond it, 2 and 4 times the learned size: the upper end's distance grows in proportion
    z = intervals.two_sided_z(0.9)
    for i, scale in ((2, 2.0), (3, 4.0)):
        assert up[i] == pytest.approx(0.8 * scale * (0.1 + z * 0.3), rel=0.05)


def test_a_type_measured_on_three_or_more_nodes_learns_its_own_node_move():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(measurements(5))
    node = model.groups_[("resnet", "g4dn.12xlarge")].spread.node
    assert "held out 1-4 -> 5 nodes" in node.source
    # clean synthetic data: a far narrower move than the prior learned on real clusters
    assert max(node.below, node.above) < 0.5 * min(
        intervals.NODE_MOVE_PRIOR.below, intervals.NODE_MOVE_PRIOR.above
    )
    held = measurements(7, min_nodes=6, seed=5)
    pred = model.predict(configs(held))
    inside = (held["step_time_s"] >= pred["step_time_lo"]) & (
        held["step_time_s"] <= pred["step_time_hi"]
    )
    assert inside.mean() >= 0.85


def test_the_node_move_prior_is_a_parameter_and_bad_values_are_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wide = StepTimeModel(node_move_prior=(0.0, 1.0, 1.0, 0.5)).fit(measurements(2))
        narrow = StepTimeModel(node_move_prior=(0.0, 0.05, 0.05, 0.5)).fit(measurements(2))
    cfg = configs(measurements(4, min_nodes=3, seed=6))
    width = [
        (m.predict(cfg)["step_time_hi"] / m.predict(cfg)["step_time_lo"]) for m in (wide, narrow)
    ]
    assert (width[0] > width[1]).all()
    assert "node_move_prior given" in wide.summary()["interval_from"].iloc[0]
    bad_values = (
        (0.0, -0.1, 0.2, 0.5),
        (0.0, 0.1, 0.1),
        "wide",
        (0.0, float("nan"), 0.1, 0.5),
        (0.0, 0.1, 0.1, 0.0),
    )
    for bad in bad_values:
        with pytest.raises(InputError, match="node_move_prior"):
            StepTimeModel(node_move_prior=bad).fit(measurements(2))


def test_a_model_measured_on_few_nodes_borrows_the_move_of_its_network_from_the_others():
    wide = measurements(5, model="resnet")
    small = measurements(2, model="bert", seed=7)  # no fold of its own moves from 3+ nodes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(pd.concat([wide, small], ignore_index=True))
    own = model.groups_[("resnet", "g4dn.12xlarge")].spread.node
    borrowed = model.groups_[("bert", "g4dn.12xlarge")].spread.node
    assert "held out 1-4 -> 5 nodes" in own.source
    assert "node moves of 1 model(s) on g4dn.12xlarge" in borrowed.source
    assert (borrowed.centre, borrowed.below, borrowed.above) == pytest.approx(
        (own.centre, own.below, own.above)
    )
    said = model.summary().set_index("model").loc["bert", "interval_from"]
    assert "node moves of 1 model(s) on g4dn.12xlarge" in said
