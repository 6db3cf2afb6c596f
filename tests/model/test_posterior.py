"""The joint belief: one shared error per group and network, draws, probabilities, updates."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from srifty_kit import InputError, StepTimeModel
from srifty_kit.model.posterior import Belief
from tests.builders import configs, measurements


@pytest.fixture(scope="module")
def small_model() -> StepTimeModel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return StepTimeModel().fit(measurements(3))


def _scale_out(nodes=(1, 2, 3, 4, 8, 16)) -> pd.DataFrame:
    k = np.array(nodes)
    return pd.DataFrame(
        {
            "model": "resnet",
            "instance_type": "g4dn.12xlarge",
            "num_nodes": k,
            "num_workers": 4 * k,
            "local_bsz": 32,
        }
    )


def test_the_belief_widens_with_the_nodes_never_measured_and_only_there(small_model):
    cfg = _scale_out()
    b = small_model.predict_belief(
        "resnet", "g4dn.12xlarge", cfg["num_nodes"], cfg["num_workers"], cfg["local_bsz"]
    )
    assert (b.network_sd[:3] == 0).all()  # measured node counts: no network move
    assert (np.diff(b.network_sd[2:]) > 0).all()  # 4, 8, 16 nodes: further, less sure
    lo, hi = b.interval(0.9)
    assert (lo < b.median).all() and (b.median < hi).all()
    # the probability of finishing under a bound is the quantile's inverse
    assert b.prob_below(b.quantile(0.9)) == pytest.approx(np.full(len(b), 0.9), abs=1e-9)


def test_draws_share_the_network_s_error_across_node_counts(small_model):
    draws = small_model.predict_draws(_scale_out(), draws=20_000, seed=1)
    logs = np.log(draws.values)
    # 8 and 16 nodes are judged under the same unknown network: strongly correlated (the
    # independent part alone would make them uncorrelated), as much as the belief says
    corr = np.corrcoef(logs[:, 4], logs[:, 5])[0, 1]
    both = small_model.predict_belief("resnet", "g4dn.12xlarge", [8, 16], [32, 64], [32, 32])
    shared = both.group_sd.prod() + both.network_sd.prod()
    assert corr == pytest.approx(shared / both.sd.prod(), abs=0.02)
    assert corr > 0.6
    frame = draws.summary_frame(0.9)
    assert {"mean", "median", "lower", "upper"} <= set(frame.columns)
    assert (frame["lower"] < frame["upper"]).all()
    # the draws' marginals are the belief's
    b = small_model.predict_belief("resnet", "g4dn.12xlarge", [16], [64], [32])
    assert np.quantile(draws.values[:, 5], 0.9) == pytest.approx(b.quantile(0.9)[0], rel=0.05)
    assert draws.prob_below(b.quantile(0.5)[0])[5] == pytest.approx(0.5, abs=0.03)
    with pytest.raises(InputError, match="draws"):
        small_model.predict_draws(_scale_out(), draws=0)


def test_one_measured_run_narrows_what_it_shares_and_nothing_else():
    b = Belief(
        point=np.ones(3),
        centre=np.zeros(3),
        group_sd=np.array([0.1, 0.1, 0.1]),
        network_sd=np.array([0.2, 0.4, 0.0]),
        noise_sd=np.full(3, 0.03),
        group=np.array([1, 1, 2]),
        network=np.array([7, 7, 8]),
    )
    slow = b.condition(0, 0.3, 0.0)  # the probe ran 35% slower than believed
    assert slow.centre[1] > slow.centre[0] * 0.5 > 0  # its network's other node count moves more
    assert slow.centre[2] == 0.0 and slow.sd[2] == b.sd[2]  # another group and network: untouched
    assert (slow.sd[:2] < b.sd[:2]).all()
    # a vector of outcomes gives one belief per outcome
    many = b.condition(0, np.array([-0.1, 0.0, 0.1]), 0.0)
    assert many.centre.shape == (3, 3)
    assert np.all(np.diff(many.centre[:, 1]) > 0)


def test_a_measured_run_reveals_its_own_configurations_stray_but_not_anothers():
    # two configurations at a node count never measured: each strays from the network's rate
    # by its own 10% (persistent), and a run adds the 3% noise floor
    b = Belief(
        point=np.ones(2),
        centre=np.zeros(2),
        group_sd=np.full(2, 0.1),
        network_sd=np.full(2, 0.2),
        noise_sd=np.full(2, np.hypot(0.1, 0.03)),
        group=np.array([1, 1]),
        network=np.array([7, 7]),
    )
    after = b.condition(0, 0.3, 0.0)
    # the measured configuration is now known to about its run noise: another run of it lands
    # within the floor and its own stray, plus what is left of the shared part
    assert after.noise_sd[0] == pytest.approx(0.03)
    assert after.sd[0] < 0.05 < after.sd[1]
    # it moves almost all the way to what was measured; its neighbour less, its stray unknown
    assert after.centre[0] == pytest.approx(0.3, abs=0.02)
    assert 0 < after.centre[1] < after.centre[0]
    assert after.noise_sd[1] == b.noise_sd[1]


def test_a_belief_matches_the_prediction_interval_it_was_read_from(small_model):
    cfg = _scale_out((2, 4, 8))
    b = small_model.predict_belief(
        "resnet", "g4dn.12xlarge", cfg["num_nodes"], cfg["num_workers"], cfg["local_bsz"]
    )
    pred = small_model.predict(cfg, level=0.9)
    lo, hi = b.interval(0.9)
    assert lo == pytest.approx(pred["step_time_lo"].to_numpy(), rel=0.02)
    assert hi == pytest.approx(pred["step_time_hi"].to_numpy(), rel=0.02)


def test_held_out_larger_runs_fall_inside_the_belief_about_as_often_as_stated(small_model):
    held = measurements(6, min_nodes=4, seed=9)
    b = small_model.predict_belief(
        "resnet",
        "g4dn.12xlarge",
        held["num_nodes"],
        held["num_workers"],
        held["local_bsz"],
    )
    p = b.prob_below(held["step_time_s"].to_numpy())
    # the clean synthetic network has no move: the belief may be wide, never wrong-sided
    assert 0.05 < np.mean(p <= 0.9) <= 1.0
    assert np.mean(p < 0.05) < 0.1
    assert len(configs(held)) == len(held)


def test_runs_beyond_the_fit_condition_every_configuration_exactly_as_gaussians_do():
    # brute force: the joint covariance of the levels asked and the runs seen, conditioned by
    # the textbook formula, against posterior.observe's factored update
    from srifty_kit.model.fit import NOISE_FLOOR
    from srifty_kit.model.posterior import observe, stray_sd

    rng = np.random.default_rng(3)
    seen = Belief(
        point=np.ones(2),
        centre=np.array([0.1, 0.2]),
        group_sd=np.array([0.10, 0.15]),
        network_sd=np.array([0.20, 0.30]),
        noise_sd=np.hypot([0.08, 0.05], NOISE_FLOOR),
        group=np.zeros(2, int),
        network=np.zeros(2, int),
    )
    asked = Belief(
        point=np.ones(4),
        centre=np.array([0.0, 0.05, 0.1, 0.2]),
        group_sd=np.array([0.05, 0.12, 0.10, 0.15]),
        network_sd=np.array([0.0, 0.25, 0.20, 0.30]),
        noise_sd=np.hypot([0.02, 0.06, 0.08, 0.05], NOISE_FLOOR),
        group=np.zeros(4, int),
        network=np.zeros(4, int),
    )
    match = np.array([-1, -1, 0, 1])  # the last two were run
    y = np.array([0.45, -0.1])
    a_seen = np.column_stack([seen.group_sd, seen.network_sd])
    a_ask = np.column_stack([asked.group_sd, asked.network_sd])
    s_seen, s_ask = stray_sd(seen.noise_sd), stray_sd(asked.noise_sd)
    own = np.array([[float(m == j) for j in range(2)] for m in match])  # asked x seen
    # levels L = c + a z + s; runs y = c + a z + s + floor noise
    cov_ll = a_ask @ a_ask.T + np.diag(np.where(match < 0, s_ask**2, 0.0))
    cov_ll += own @ np.diag(s_seen**2) @ own.T
    cov_ly = a_ask @ a_seen.T + own * s_seen**2
    cov_yy = a_seen @ a_seen.T + np.diag(seen.noise_sd**2)
    gain = cov_ly @ np.linalg.inv(cov_yy)
    mean = asked.centre + gain @ (y - seen.centre)
    cov = cov_ll - gain @ cov_ly.T
    after = observe(asked, seen, y, match)
    assert after.centre == pytest.approx(mean, abs=1e-12)
    # a new run of each: its level's variance plus the floor (the stray is part of the level)
    shared = np.column_stack([after.group_sd, after.network_sd])
    own_after = stray_sd(after.noise_sd) ** 2
    assert shared @ shared.T + np.diag(own_after) == pytest.approx(cov, abs=1e-12)
    # so draws of the updated belief have the conditional law
    draws = np.log(after.draws(40_000, rng))
    assert np.cov(draws.T)[1, 3] == pytest.approx(cov[1, 3], abs=0.002)


def test_a_probe_run_appended_moves_what_lies_beyond_the_fit_and_nothing_within(tmp_path):
    from srifty_kit.model.holdout import probe_rows

    table = measurements(2, seed=4)  # 1-2 nodes, every shape: the network is identified
    probe = measurements(4, min_nodes=4, seed=5)
    probe = probe[(probe["num_workers"] == 16) & (probe["local_bsz"] == 32)].copy()
    probe["step_time_s"] *= 1.4  # this network scales worse than the physics says
    both = pd.concat([table, probe], ignore_index=True)
    assert probe_rows(both).sum() == len(probe) and not probe_rows(both)[: len(table)].any()
    assert not probe_rows(table).any()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before = StepTimeModel().fit(table)
        after = StepTimeModel().fit(both)
    ask = pd.DataFrame(
        {
            "model": "resnet",
            "instance_type": "g4dn.12xlarge",
            "num_nodes": [1, 2, 4, 4, 8],
            "num_workers": [4, 8, 16, 12, 32],
            "local_bsz": 32,
        }
    )
    old, new = before.predict(ask), after.predict(ask)
    # within the fitted node counts the run changes nothing: it was not fitted
    for col in ("step_time_s", "step_time_lo", "step_time_hi"):
        assert new[col][:2].to_numpy() == pytest.approx(old[col][:2].to_numpy(), rel=1e-9)
    measured = probe["step_time_s"].mean()
    # the run configuration is now believed near what it measured, and surer than before
    assert new["step_time_lo"][2] < measured < new["step_time_hi"][2]
    assert abs(np.log(new["step_time_s"][2] / measured)) < 0.1
    _points_inside(old, new)  # every point inside its own interval, before and after
    width = np.log(new["step_time_hi"] / new["step_time_lo"]).to_numpy()
    old_width = np.log(old["step_time_hi"] / old["step_time_lo"]).to_numpy()
    assert width[2] < 0.5 * old_width[2]
    # and the configurations it shares the network with move the same way, under one unknown
    assert (new["step_time_s"][2:] > old["step_time_s"][2:] * 1.05).all()
    assert (width[3:] < old_width[3:]).all()
    # the search reads the same belief
    b = after.predict_belief("resnet", "g4dn.12xlarge", [4, 8], [12, 32], [32, 32])
    lo, hi = b.interval(0.9)
    assert hi == pytest.approx(new["step_time_hi"][3:].to_numpy(), rel=1e-6)
    # and it says so
    assert "conditioned on 1 run beyond 2 nodes (4 x 16)" in after.summary()["fitted_as"][0]
    routes = after.explain(ask)["route"].tolist()
    assert (
        routes == ["measured: its own run"] * 2 + ["measured: the fitted physics + 1 probe run"] * 3
    )
    # and a saved model keeps its probes: loaded, it predicts the same
    after.save(tmp_path / "m.json")
    again = StepTimeModel.load(tmp_path / "m.json").predict(ask)
    assert again["step_time_hi"].to_numpy() == pytest.approx(new["step_time_hi"].to_numpy())


def test_a_probed_configuration_is_predicted_at_its_run_when_the_prior_was_pessimistic():
    # a prior that expects this network to slow at scale puts the belief's median beyond the
    # fit well above the physics' point; a run that then measures the physics' point must
    # bring the prediction there, inside its own interval, not below it
    table = measurements(2, seed=4)
    probe = measurements(4, min_nodes=4, seed=5)
    probe = probe[(probe["num_workers"] == 16) & (probe["local_bsz"] == 32)].copy()
    gloomy = (0.4, 0.1, 0.1, 0.05)  # +0.4 log step per doubling beyond the fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before = StepTimeModel(node_move_prior=gloomy).fit(table)
        after = StepTimeModel(node_move_prior=gloomy).fit(pd.concat([table, probe]))
    ask = pd.DataFrame(
        {
            "model": "resnet",
            "instance_type": "g4dn.12xlarge",
            "num_nodes": [4, 4, 8],
            "num_workers": [16, 12, 32],
            "local_bsz": 32,
        }
    )
    old, new = before.predict(ask), after.predict(ask)
    centre = before.predict_belief("resnet", "g4dn.12xlarge", 4, 16, 32).centre
    assert float(np.squeeze(centre)) > 0.2  # the case this test is about
    measured = probe["step_time_s"].mean()
    assert new["step_time_lo"][0] < measured < new["step_time_hi"][0]
    assert abs(np.log(new["step_time_s"][0] / measured)) < 0.05
    _points_inside(old, new)


def _points_inside(*predictions: pd.DataFrame) -> None:
    for pred in predictions:
        assert (pred["step_time_lo"] <= pred["step_time_s"]).all()
        assert (pred["step_time_s"] <= pred["step_time_hi"]).all()


def test_a_simulated_run_beyond_the_fit_moves_what_a_refit_would_move():
    # the value of a probe is judged on the belief a refit with it would hold: a run beyond
    # the fitted node counts moves the configurations beyond them, not those within
    b = Belief(
        point=np.ones(3),
        centre=np.zeros(3),
        group_sd=np.full(3, 0.1),
        network_sd=np.array([0.2, 0.3, 0.0]),  # 4 and 8 nodes beyond the fit; 2 within
        noise_sd=np.full(3, 0.03),
        group=np.ones(3, int),
        network=np.full(3, 7),
    )
    after = b.condition(0, 0.3, 0.0)
    assert after.centre[1] > 0 and after.sd[1] < b.sd[1]
    assert after.centre[2] == 0.0 and after.sd[2] == b.sd[2]
    # a run within the fit still informs the whole group through its shared error
    within = b.condition(2, 0.3, 0.0)
    assert (within.centre[:2] > 0).all()


def _brute_force(asked, seen, y, match, cell, seen_cell, wide, scale):
    """The joint Gaussian of the asked levels and the runs, conditioned by the textbook
    formula: levels L = c + a z + u p_cell + v q_own (a placement or stray never run: its
    own normal)."""
    from srifty_kit.model.fit import NOISE_FLOOR
    from srifty_kit.model.posterior import stray_sd

    a_seen = wide * np.column_stack([seen.group_sd, seen.network_sd])
    a_ask = wide * np.column_stack([asked.group_sd, asked.network_sd])
    u_seen, v_seen = scale * seen.place_sd, scale * stray_sd(seen.noise_sd)
    u_ask, v_ask = scale * asked.place_sd, scale * stray_sd(asked.noise_sd)
    runs, cells, m = len(y), seen_cell.max() + 1, len(match)
    # loadings on (z, p of the runs' placements, q of the runs, p and q of each asked)
    h_ask = np.zeros((m, 2 + cells + runs + 2 * m))
    h_seen = np.zeros((runs, h_ask.shape[1]))
    h_ask[:, :2], h_seen[:, :2] = a_ask, a_seen
    h_seen[np.arange(runs), 2 + seen_cell] = u_seen
    h_seen[np.arange(runs), 2 + cells + np.arange(runs)] = v_seen
    for i, (c, j) in enumerate(zip(cell, match, strict=True)):
        h_ask[i, 2 + c if c >= 0 else 2 + cells + runs + i] = u_ask[i]
        h_ask[i, 2 + cells + j if j >= 0 else 2 + cells + runs + m + i] = v_ask[i]
    cov_yy = h_seen @ h_seen.T + NOISE_FLOOR**2 * np.eye(runs)
    gain = (h_ask @ h_seen.T) @ np.linalg.inv(cov_yy)
    mean = asked.centre + gain @ (y - seen.centre)
    cov = h_ask @ h_ask.T - gain @ (h_seen @ h_ask.T)
    return mean, cov


def test_runs_that_share_a_placement_condition_as_gaussians_do_with_learned_sizes():
    from scipy.stats import multivariate_normal

    from srifty_kit.model.fit import NOISE_FLOOR
    from srifty_kit.model.posterior import _scales, observe, stray_sd

    def belief(centre, group, network, place, own, nodes, workers):
        return Belief(
            point=np.ones(len(centre)),
            centre=np.array(centre),
            group_sd=np.array(group),
            network_sd=np.array(network),
            noise_sd=np.hypot(own, NOISE_FLOOR),
            group=np.zeros(len(centre), int),
            network=np.zeros(len(centre), int),
            place_sd=np.array(place),
            nodes=np.array(nodes),
            workers=np.array(workers),
        )

    # four runs: three batch sizes of one placement (a sweep), one of another
    seen = belief(
        [0.1, 0.1, 0.12, 0.2],
        [0.10, 0.10, 0.11, 0.15],
        [0.20, 0.20, 0.22, 0.30],
        [0.06, 0.06, 0.07, 0.04],
        [0.05, 0.05, 0.06, 0.03],
        [4, 4, 4, 8],
        [16, 16, 16, 32],
    )
    seen_cell = np.array([0, 0, 0, 1])
    y = np.array([0.6, 0.2, 0.45, -0.1])  # the sweep scatters far more than its strays say
    # off every run (another placement); the sweep's placement at a batch not run; two runs
    # themselves; the other run
    asked = belief(
        [0.0, 0.05, 0.1, 0.12, 0.2],
        [0.05, 0.12, 0.10, 0.11, 0.15],
        [0.0, 0.25, 0.20, 0.22, 0.30],
        [0.01, 0.05, 0.06, 0.07, 0.04],
        [0.02, 0.04, 0.05, 0.06, 0.03],
        [2, 4, 4, 4, 8],
        [8, 16, 16, 16, 32],
    )
    cell, match = np.array([-1, 0, 0, 0, 1]), np.array([-1, -1, 0, 2, 3])
    load = np.column_stack([seen.group_sd, seen.network_sd])
    u, v = seen.place_sd, stray_sd(seen.noise_sd)
    wide, scale = _scales(load, u, v, seen_cell, y - seen.centre)

    # the two scales are the most likely pair (neither below the fit's own)
    def loglik(k_a, k_s):
        same = seen_cell[:, None] == seen_cell[None, :]
        cov = k_a**2 * load @ load.T + NOISE_FLOOR**2 * np.eye(4)
        cov = cov + k_s**2 * (np.outer(u, u) * same + np.diag(v**2))
        return multivariate_normal(seen.centre, cov).logpdf(y)

    assert scale > 1.5  # these runs scatter more than the fit's own scatter says
    grid = np.linspace(1, 10, 46)
    assert all(loglik(wide, scale) >= loglik(a, b) - 1e-6 for a in grid for b in grid)
    after = observe(asked, seen, y, match)
    mean, cov = _brute_force(asked, seen, y, match, cell, seen_cell, wide, scale)
    assert after.centre == pytest.approx(mean, abs=1e-10)
    # the updated belief's own covariance: shared loadings, placements, own parts
    shared = np.column_stack([after.group_sd, after.network_sd])
    places = after.places()
    same = places[:, None] == places[None, :]
    joint = shared @ shared.T + np.outer(after.place_sd, after.place_sd) * same
    joint = joint + np.diag(stray_sd(after.noise_sd) ** 2)
    # every marginal is exact; so is every pair but those of a placement run with a batch
    # size run on it (their placement's and own errors are entangled by the run)
    assert np.diag(joint) == pytest.approx(np.diag(cov), abs=1e-10)
    for i, j in [(0, 1), (0, 2), (0, 4), (1, 4), (2, 4), (3, 4)]:
        assert joint[i, j] == pytest.approx(cov[i, j], abs=1e-10)
    # a batch size not run on the sweep's placement learns from it beyond what z carries
    apart = Belief(**{**asked.__dict__, "place_sd": np.zeros(5)})
    apart.noise_sd = np.hypot(asked.noise_sd, asked.place_sd)
    alone = observe(apart, Belief(**{**seen.__dict__, "place_sd": np.zeros(4)}), y, match)
    assert after.centre[1] != pytest.approx(alone.centre[1], abs=1e-3)
    # and a simulated run (the value of a probe) moves what the refit with it moves, its
    # placement's other batch sizes included, to the same marginals
    one = observe(asked, asked.take([1]), y[1:2], np.array([-1, 0, -1, -1, -1]))
    sim = asked.condition(1, y[1], 0.0)
    beyond = [1, 2, 3, 4]
    assert sim.centre[beyond] == pytest.approx(one.centre[beyond], abs=1e-10)
    assert sim.sd[beyond] == pytest.approx(one.sd[beyond], abs=1e-10)


def test_a_sweep_of_batch_sizes_on_one_slow_placement_is_one_placement_s_evidence():
    # within the fit every placement runs its own few percent off the physics, at all its
    # batch sizes alike; beyond it, a sweep of four batch sizes on one placement ran 40% slow.
    # Four rows of one placement are not four independent looks at the network: the other
    # placements there stay inside their band
    rng = np.random.default_rng(11)
    table = measurements(2, seed=4)
    effect = {
        p: np.exp(rng.normal(0, 0.12))
        for p in set(zip(table.num_nodes, table.num_workers, strict=True))
    }
    table["step_time_s"] *= [
        effect[p] for p in zip(table.num_nodes, table.num_workers, strict=True)
    ]
    truth = measurements(4, min_nodes=4, seed=5)
    truth["step_time_s"] *= np.exp(rng.normal(0, 0.12, len(truth)))  # placements own strays
    slow = truth["num_workers"] == 16
    sweep = truth[slow].assign(step_time_s=truth.loc[slow, "step_time_s"] * 1.4)
    others = truth[~slow]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(pd.concat([table, sweep], ignore_index=True))
        alone = StepTimeModel().fit(table)
    assert model.groups_["resnet", "g4dn.12xlarge"].placement_share() > 0.5
    pred, before = model.predict(configs(others)), alone.predict(configs(others))
    y = others["step_time_s"].to_numpy()
    inside = (pred["step_time_lo"].to_numpy() <= y) & (y <= pred["step_time_hi"].to_numpy())
    assert inside.mean() >= 0.9
    # it still moved them the sweep's way, by less than the sweep's 40%
    shift = np.median(pred["step_time_s"].to_numpy() / before["step_time_s"].to_numpy())
    assert 1.0 < shift < 1.3


def test_a_sweep_far_off_in_step_moves_every_placement_beyond_with_it():
    # the whole network at 4 nodes runs 40% slower than the 1-2 node fit says; a sweep of one
    # placement shows it at every batch size alike, far beyond the belief's shared spread:
    # the network is off, not the placement, so the others move with it and stay covered
    table = measurements(2, seed=4)
    truth = measurements(4, min_nodes=4, seed=5)
    truth["step_time_s"] *= 1.4
    swept = truth["num_workers"] == 16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(pd.concat([table, truth[swept]], ignore_index=True))
        alone = StepTimeModel().fit(table)
    others = truth[~swept]
    pred, before = model.predict(configs(others)), alone.predict(configs(others))
    y = others["step_time_s"].to_numpy()
    inside = (pred["step_time_lo"].to_numpy() <= y) & (y <= pred["step_time_hi"].to_numpy())
    assert inside.mean() >= 0.9
    shift = np.median(pred["step_time_s"].to_numpy() / before["step_time_s"].to_numpy())
    assert shift > 1.25


def _placements(rng):
    """Two placements run at three batch sizes each (their beliefs, runs and physics), and
    four asked: a fourth batch size of each, one of a placement never run, and one that was
    run (``_with_measured`` zeroed its loading)."""
    from srifty_kit.model.fit import NOISE_FLOOR

    runs = 6
    noise = np.sqrt(NOISE_FLOOR**2 + rng.uniform(0.0, 0.05, runs) ** 2)
    seen = Belief(
        np.ones(runs), rng.normal(0, 0.02, runs), np.zeros(runs), np.zeros(runs), noise,
        np.zeros(runs, int), np.zeros(runs, int), np.full(runs, 0.1),
    )  # fmt: skip
    seen_parts = (rng.uniform(0.1, 1.0, runs), rng.uniform(0.2, 1.0, runs))  # T_c, T_s
    asked = Belief(
        np.ones(4), np.zeros(4), np.zeros(4), np.zeros(4), np.full(4, NOISE_FLOOR),
        np.zeros(4, int), np.zeros(4, int), np.array([0.1, 0.1, 0.1, 0.0]),
    )  # fmt: skip
    parts = (np.array([1.5, 0.2, 0.5, 0.5]), np.array([0.6, 0.5, 0.5, 0.5]))
    cell = np.array([0, 1, -1, 0])
    return seen, np.array([0, 0, 0, 1, 1, 1]), seen_parts, asked, cell, parts


def test_a_placement_s_runs_condition_its_other_batch_sizes_as_gaussians_do():
    # read as model files before version 13 read them: linear in the latent
    from srifty_kit.model.fit import NOISE_FLOOR
    from srifty_kit.model.physics import sync_share
    from srifty_kit.model.posterior import on_places, stray_sd

    rng = np.random.default_rng(3)
    seen, seen_cell, seen_parts, asked, cell, parts = _placements(rng)
    gamma = 1.4
    y = rng.normal(0.3, 0.1, seen_cell.size)
    after, _ = on_places(asked, seen, y, seen_cell, cell, seen_parts, parts, gamma, exact=False)
    # brute force: latents (p_0, p_1), runs r = A p + e with e ~ N(0, own), asked a_x p,
    # each loading its place_sd times its sync share over the runs' root mean square
    shares = sync_share(*seen_parts, gamma)
    rms = np.sqrt(np.mean(shares**2))
    design = np.zeros((seen_cell.size, 2))
    design[np.arange(seen_cell.size), seen_cell] = seen.place_sd * shares / rms
    own = np.diag(stray_sd(seen.noise_sd) ** 2 + NOISE_FLOOR**2)
    gain = np.linalg.solve(design @ design.T + own, design).T  # Cov(p, r) Var(r)^-1
    post_mean = gain @ (y - seen.centre)
    post_cov = np.eye(2) - gain @ design
    for i in range(2):  # the two asked on run placements
        a = asked.place_sd[i] * sync_share(parts[0][i], parts[1][i], gamma) / rms
        assert after.centre[i] == pytest.approx(a * post_mean[cell[i]], rel=1e-9)
        assert after.place_sd[i] == pytest.approx(a * np.sqrt(post_cov[cell[i], cell[i]]))
    assert after.centre[2] == 0.0 and after.place_sd[2] == 0.1  # a placement never run
    assert after.centre[3] == 0.0 and after.place_sd[3] == 0.0  # run itself: unmoved


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    level=st.floats(-6.0, 6.0),
    sync=st.sampled_from([0.0, 1e-6, 0.3, 50.0]),
    gamma=st.floats(1.0, 10.0),
)
def test_a_placement_s_factor_is_finite_and_moves_the_runs_way_whatever_they_say(
    seed, level, sync, gamma
):
    # runs anywhere from e**-6 to e**6 of their physics, sync from none to fifty times the
    # compute: the belief stays finite, the asked batches move the way the runs did (or
    # not at all), and none moves below its compute alone
    from srifty_kit.model.physics import overlap
    from srifty_kit.model.posterior import on_places

    seen, seen_cell, seen_parts, asked, cell, parts = _placements(np.random.default_rng(seed))
    seen_parts = (seen_parts[0], seen_parts[1] * sync)
    parts = (parts[0], parts[1] * sync)
    y = np.full(seen_cell.size, level) + seen.centre
    after, _ = on_places(asked, seen, y, seen_cell, cell, seen_parts, parts, gamma)
    assert np.isfinite(after.centre).all() and np.isfinite(after.place_sd).all()
    assert (after.place_sd >= 0).all()
    assert (np.sign(after.centre[:2]) * np.sign(level) >= 0).all()
    floor = np.log(parts[0][:2] / overlap(parts[0][:2], parts[1][:2], gamma))
    assert (after.centre[:2] >= floor - 1e-9).all()


@pytest.mark.parametrize("runs", ["2.5x and 0.8x the sync", "0.6x the compute alone"])
def test_a_placement_s_factor_on_its_sync_is_the_most_likely_one_carried_through_the_overlap(
    runs,
):
    # the placement scales its runs' sync time by e**phi, phi = u / rms * p, p ~ N(0, 1):
    # p is the posterior mode and an asked batch's step is its own physics with the sync
    # scaled by that factor, so a placement 2-3x slow in the network moves all the way; runs
    # faster than their compute alone can be (no sync factor explains them) move it no
    # further than dropping its sync, and the search for p settles there
    from scipy.optimize import minimize_scalar

    from srifty_kit.model.fit import NOISE_FLOOR
    from srifty_kit.model.physics import overlap, sync_share
    from srifty_kit.model.posterior import on_places, stray_sd

    rng = np.random.default_rng(5)
    seen, seen_cell, seen_parts, asked, cell, parts = _placements(rng)
    gamma = 1.4
    t_c, t_s = seen_parts
    if runs == "0.6x the compute alone":
        y = np.log(0.6 * t_c / overlap(t_c, t_s, gamma)) + seen.centre
    else:
        factor = np.array([2.5, 0.8])[seen_cell]  # each placement's true factor on its sync
        y = np.log(overlap(t_c, factor * t_s, gamma) / overlap(t_c, t_s, gamma)) + seen.centre
    after, _ = on_places(asked, seen, y, seen_cell, cell, seen_parts, parts, gamma)
    rms = np.sqrt(np.mean(sync_share(t_c, t_s, gamma) ** 2))
    own = stray_sd(seen.noise_sd) ** 2 + NOISE_FLOOR**2
    for c in (0, 1):
        on = seen_cell == c
        scale = 0.1 / rms  # every run's place_sd is 0.1

        def cost(p, on=on, scale=scale):
            moved = overlap(t_c[on], np.exp(scale * p) * t_s[on], gamma)
            r = y[on] - seen.centre[on] - np.log(moved / overlap(t_c[on], t_s[on], gamma))
            return p**2 / 2 + np.sum(r**2 / own[on]) / 2

        p = minimize_scalar(cost, bounds=(-50, 50), method="bounded", options={"xatol": 1e-10}).x
        i = int(np.flatnonzero(cell == c)[0])
        ratio = overlap(parts[0][i], np.exp(scale * p) * parts[1][i], gamma)
        ratio /= overlap(parts[0][i], parts[1][i], gamma)
        assert after.centre[i] == pytest.approx(np.log(ratio), rel=1e-6, abs=1e-9)
        dropped = np.log(parts[0][i] / overlap(parts[0][i], parts[1][i], gamma))
        assert after.centre[i] > dropped  # never faster than its compute alone
    assert after.centre[2] == 0.0 and after.place_sd[2] == 0.1  # a placement never run
    assert after.centre[3] == 0.0 and after.place_sd[3] == 0.0  # run itself: unmoved
    if runs == "2.5x and 0.8x the sync":
        # the runs pin the factors (a few percent of shrinkage): the slow placement's other
        # batch moves by nearly its full factor, the linear reading by far less
        full = np.log(overlap(1.5, 2.5 * 0.6, gamma) / overlap(1.5, 0.6, gamma))
        assert after.centre[0] == pytest.approx(full, rel=0.05)
        linear, _ = on_places(
            asked, seen, y, seen_cell, cell, seen_parts, parts, gamma, exact=False
        )
        assert linear.centre[0] < 0.8 * full
