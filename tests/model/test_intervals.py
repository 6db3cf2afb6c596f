"""Intervals for extrapolation: signed conformal ends and the network's move to new node counts."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from srifty_kit import InputError, StepTimeModel
from srifty_kit.model import intervals
from srifty_kit.model.intervals import (
    NetworkPrior,
    NodeMove,
    Spread,
    equal_weights,
    learn_prior,
    move_rates,
    network_move,
    signed_quantiles,
)
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


def _held_out(rng, n, sd0, sd1):
    """n held-out log errors whose spread is sqrt(sd0^2 + (sd1 * x)^2) at x = share * distance,
    with x spread from a large batch's small share to twice a step that is all sync."""
    x = rng.uniform(0.02, 2.0, n)
    return rng.normal(0.0, np.sqrt(sd0**2 + (sd1 * x) ** 2)), x


def test_a_spread_at_small_shares_is_the_intercept_s_not_stretched_over_every_share():
    # more workers on a host slow the compute by 8% either way (the AWS cifar10 folds: 7% at
    # shares near 0), the network adds 10% per unit of share x distance; the one-worker spread
    # the fit passes in is 3%
    rng = np.random.default_rng(0)
    r, x = _held_out(rng, 2000, 0.08, 0.10)
    spread = intervals.calibrate(r, x, np.ones_like(x), None, sigma0=0.03)
    assert spread.sigma0 == pytest.approx(0.08, rel=0.15)
    assert spread.sigma1 == pytest.approx(0.10, rel=0.15)
    # so its 90% ends hold 90% of fresh steps at a large batch's small share and where sync is
    # the step alike; a scale through the one-worker spread alone reads the small shares'
    # errors as the largest scores: too narrow there, too wide where sync dominates
    old_sd1 = float(np.sqrt(np.sum(x**2 * (r**2 - 0.03**2)) / np.sum(x**4)))
    old = Spread(0.03, old_sd1, r / np.sqrt(0.03**2 + (old_sd1 * x) ** 2))
    for at, new_cov, old_cov in ((0.05, (0.87, 0.93), (0.0, 0.8)), (1.5, (0.87, 0.93), (0.93, 1))):
        fresh = rng.normal(0.0, np.hypot(0.08, 0.10 * at), 20000)
        for fit, (low, high) in ((spread, new_cov), (old, old_cov)):
            down, up = fit.offsets(0.9, np.array([at]), np.array([1.0]), np.array([0.0]))
            inside = np.mean((fresh >= -down[0]) & (fresh <= up[0]))
            assert low <= inside <= high, (at, fit.sigma0, inside)


def test_held_out_steps_at_one_share_keep_a_spread_that_grows_with_the_distance():
    # every held-out step at one x cannot tell a flat spread from a growing one: the growing
    # term keeps it, so an interval still widens for configurations beyond what was held out
    rng = np.random.default_rng(1)
    r = rng.normal(0.0, 0.1, 400)
    x = np.full(400, 0.8)
    spread = intervals.calibrate(r, x, np.ones_like(x), None, sigma0=0.03)
    assert spread.sigma0 == 0.03
    _, near = spread.offsets(0.9, np.array([0.8]), np.array([1.0]), np.array([0.0]))
    _, far = spread.offsets(0.9, np.array([0.8]), np.array([3.0]), np.array([0.0]))
    assert far[0] > 2.5 * near[0]


def test_a_move_s_rate_is_the_slope_of_its_log_error_on_reach():
    rng = np.random.default_rng(1)
    share = rng.uniform(0.05, 0.9, 400)
    doublings = np.full(400, 0.585)
    # the network 30% slower per doubling, the sync share carrying it, plus 3% noise
    log_ratio = 0.3 * share * doublings + rng.normal(0, 0.03, 400)
    fold = np.repeat([0, 1], 200)
    rates, scatter = move_rates(log_ratio, share, doublings, fold)
    assert rates.shape == scatter.shape == (2,)
    assert rates == pytest.approx([0.3, 0.3], abs=0.05)
    assert scatter == pytest.approx([0.03, 0.03], abs=0.01)  # the noise around the line
    # a fold with too few steps says nothing
    assert move_rates(log_ratio[:5], share[:5], doublings[:5], fold[:5])[0].size == 0


def test_a_network_pools_its_moves_and_never_speeds_up_beyond_them():
    prior = NetworkPrior(0.0, 0.3, 0.3, 0.05, "prior")

    def move(rates, prior=prior, source="own"):
        return network_move(np.asarray(rates, float), np.full(len(rates), 0.04), prior, source)

    consistent = move([0.21, 0.19, 0.2, 0.22, 0.18, 0.2])
    assert consistent.centre == pytest.approx(0.2, abs=0.03)
    assert consistent.sd < np.hypot(prior.between_types, prior.between_moves)
    # no moves: the prior's centre and full spread; one move: between the two, no narrower
    # than the prior's spread of moves
    assert move([]).sd == pytest.approx(np.hypot(0.3, 0.3)) and move([]).scatter == 0.05
    thin = move([0.5])
    assert 0.0 < thin.centre < 0.5 and thin.sd > prior.between_moves
    # a slow smaller campaign (every rate negative) is not carried on as a network that
    # keeps getting faster with more nodes
    assert move(np.full(6, -0.6)).centre == 0.0
    # one odd model among many barely moves the median
    odd = move([0.2, 0.2, 0.21, 0.19, 0.2, 3.0])
    assert odd.centre == pytest.approx(0.2, abs=0.03)


def test_equal_weights_give_every_cluster_then_every_move_the_same_say():
    cluster = np.array(["aws"] * 6 + ["azure"] * 2)
    move = np.array(["3", "3", "3", "3", "4", "4", "3", "4"])
    w = equal_weights(cluster, move)
    assert w.sum() == pytest.approx(1.0)
    assert w[cluster == "aws"].sum() == pytest.approx(0.5)
    assert w[(cluster == "aws") & (move == "3")].sum() == pytest.approx(0.25)
    assert w[7] == pytest.approx(0.25)


def test_a_new_node_count_moves_the_interval_by_the_network_s_share_and_holds_the_point():
    node = NodeMove(0.2, 0.3, 0.0, "test")
    spread = Spread(0.03, 0.05, np.linspace(-1.6, 1.6, 200), node=node)
    share = np.array([0.0, 0.5, 0.5, 1.0, 1.0])
    doublings = np.array([1.0, 0.0, 1.0, 1.0, 2.0])
    down, up = spread.offsets(0.9, share, np.ones(5), doublings)
    z = intervals.two_sided_z(0.9)
    # a step without synchronisation keeps only the noise floor, centred on the point
    assert down[0] == pytest.approx(z * 0.03, rel=0.05) and up[0] == pytest.approx(down[0])
    # the same configuration at a new node count: shifted up by share * centre, wider
    assert up[2] > up[1] and up[2] - down[2] > up[1] - down[1]
    # the move grows with the reach share * doublings: twice the doublings, twice the shift
    mid3, mid4 = (up[3] - down[3]) / 2, (up[4] - down[4]) / 2
    assert mid4 == pytest.approx(2 * mid3, rel=0.05)
    assert (down >= 0).all() and (up >= 0).all()  # the point always lies inside
    # with growth 0 the move is a step off the measured node counts: as far at two
    # doublings as at one
    flat = Spread(0.03, 0.05, spread.scores, node=NodeMove(0.2, 0.3, 0.0, "", 0.0))
    down, up = flat.offsets(0.9, share, np.ones(5), doublings)
    assert (up[4] - down[4]) / 2 == pytest.approx((up[3] - down[3]) / 2)
    assert up[1] < up[2]  # and nothing where the node count was measured


def test_past_the_distances_its_growth_was_learned_on_a_move_grows_in_proportion_again():
    # learned flat on moves of up to 1.5 doublings: flat to there, then in proportion to the
    # distance (twice as far, twice the reach)
    d = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0])
    u = intervals.reach(np.full(6, 0.5), d, growth=0.0, seen=1.5)
    np.testing.assert_allclose(u, 0.5 * np.array([0.0, 1.0, 1.0, 1.0, 4 / 3, 2.0]))
    # linear growth is the same with or without a limit; no limit keeps a growth however far
    np.testing.assert_allclose(intervals.reach(1.0, d, 1.0, seen=1.5), d)
    np.testing.assert_allclose(intervals.reach(1.0, d, 0.0)[1:], 1.0)
    # the band of a configuration 2 doublings out widens past the limit, not before it
    near = NodeMove(0.0, 0.3, 0.05, "", 0.0, seen=1.5)
    wide = NodeMove(0.0, 0.3, 0.05, "", 0.0)
    share = np.full(2, 0.8)
    at = np.array([1.0, 2.0])
    assert near.band(0.9, share, at)[1][0] == pytest.approx(wide.band(0.9, share, at)[1][0])
    assert near.band(0.9, share, at)[1][1] > 1.3 * wide.band(0.9, share, at)[1][1]


def _moves(growth: float, seed: int = 0) -> pd.DataFrame:
    """Held-out moves of three clusters whose errors grow as d**growth: each fit of up to 2
    nodes predicts 3, 4 and 8 nodes, each model of a cluster at its own rate."""
    rng = np.random.default_rng(seed)
    rows = []
    for c, cluster in enumerate(("a", "b", "c")):
        for model in range(5):
            rate = 0.1 * c + rng.normal(0.0, 0.2)
            for nodes in (3, 4, 8):
                share = rng.uniform(0.3, 0.9, 30)
                d = np.log2(nodes / 2)
                err = rate * share * d**growth + rng.normal(0.0, 0.02, 30)
                rows.append(
                    pd.DataFrame(
                        {
                            "cluster": cluster,
                            "move": "1-2 -> 3-8",
                            "model": str(model),
                            "log_ratio": err,
                            "share": share,
                            "doublings": d,
                        }
                    )
                )
    return pd.concat(rows, ignore_index=True)


@pytest.mark.parametrize("growth", [0.0, 0.5, 1.0])
def test_the_hyperprior_learns_how_the_error_grows_with_the_distance(growth):
    prior = learn_prior(_moves(growth), "test")
    assert prior.growth == growth
    # it holds as far as the moves reached: 2 -> 8 nodes
    assert prior.seen == pytest.approx(2.0)
    # the network's move carries both to every model fitted under the prior
    move = network_move(np.array([]), np.array([]), prior, "p")
    assert (move.growth, move.seen) == (growth, prior.seen)


def test_moves_of_one_distance_each_cannot_tell_growths_apart_and_keep_it_linear():
    one = _moves(0.0)
    one = one[one["doublings"] == 1.0]
    assert learn_prior(one, "test").growth == 1.0


def test_a_type_measured_on_three_or_more_nodes_learns_its_own_node_move():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(measurements(5))
    node = model.groups_[("resnet", "g4dn.12xlarge")].spread.node
    assert "held-out node move(s) of g4dn.12xlarge" in node.source
    # two moves of its own narrow the network's rate below the prior's uncertainty (how far
    # one move strays from the rate stays the prior's until three moves show it)
    prior = intervals.NODE_MOVE_PRIOR
    assert node.sd < np.hypot(prior.between_types, prior.between_moves)
    held = measurements(7, min_nodes=6, seed=5)
    pred = model.predict(configs(held))
    inside = (held["step_time_s"] >= pred["step_time_lo"]) & (
        held["step_time_s"] <= pred["step_time_hi"]
    )
    assert inside.mean() >= 0.85


def test_the_node_move_prior_is_a_parameter_and_bad_values_are_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wide = StepTimeModel(node_move_prior=(0.0, 1.0, 1.0, 0.1)).fit(measurements(2))
        narrow = StepTimeModel(node_move_prior=(0.0, 0.05, 0.05, 0.0)).fit(measurements(2))
    cfg = configs(measurements(4, min_nodes=3, seed=6))
    width = [
        (m.predict(cfg)["step_time_hi"] / m.predict(cfg)["step_time_lo"]) for m in (wide, narrow)
    ]
    assert (width[0] > width[1]).all()
    assert "node_move_prior given" in wide.summary()["interval_from"].iloc[0]
    # a fifth value is the growth with distance: far beyond, growth 0 is narrower than 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        flat = StepTimeModel(node_move_prior=(0.0, 1.0, 1.0, 0.1, 0.0)).fit(measurements(2))
        # a sixth, how far that growth was learned to hold: past it the band widens again
        held = StepTimeModel(node_move_prior=(0.0, 1.0, 1.0, 0.1, 0.0, 2.0)).fit(measurements(2))
        endless = StepTimeModel(node_move_prior=(0.0, 1.0, 1.0, 0.1, 0.0, np.inf))
        endless.fit(measurements(2))
    far = configs(measurements(16, min_nodes=16, seed=6))
    ratio = [
        m.predict(far)["step_time_hi"] / m.predict(far)["step_time_s"]
        for m in (wide, flat, held, endless)
    ]
    assert (ratio[1] < ratio[0]).all()
    assert (ratio[2] > ratio[1]).all() and (ratio[2] < ratio[0]).all()
    np.testing.assert_allclose(ratio[3], ratio[1])
    bad_values = (
        (0.0, -0.1, 0.2, 0.0),
        (0.0, 0.1, 0.1),
        "wide",
        (0.0, float("nan"), 0.1, 0.0),
        (0.0, 0.1, 0.0, 0.0),
        (0.0, 0.1, 0.1, -0.1),
        (0.0, 0.1, 0.1, 0.0, 1.5),
        (0.0, 0.1, 0.1, 0.0, 0.5, 0.0),
        (0.0, 0.1, 0.1, 0.0, 0.5, float("nan")),
        (0.0, 0.1, 0.1, 0.0, np.inf, 1.0),
        (0.0, 0.1, 0.1, 0.0, 0.5, 1.0, 1.0),
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
    # one network: the model that never moved beyond 2 nodes gets the move its network
    # showed for the other
    assert "held-out node move(s) of g4dn.12xlarge" in own.source
    assert borrowed == own
    said = model.summary().set_index("model").loc["bert", "interval_from"]
    assert "held-out node move(s) of g4dn.12xlarge" in said
