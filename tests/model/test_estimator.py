"""StepTimeModel: fit, predict with intervals, explain, predict_arrays, save/load."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from srifty_kit import InputError, StepTimeModel, load_catalog
from srifty_kit.model.physics import StepParams
from tests.builders import TRUE, configs, measurements


@pytest.fixture(scope="module")
def fitted() -> StepTimeModel:
    return StepTimeModel().fit(measurements(2))


@pytest.mark.parametrize("nodes", [2, 3])
def test_a_fit_of_simulated_rows_gives_back_the_physics_that_made_them(nodes):
    # simulate writes what a profiler records (the exposed sync, T - T_c): the fitted physics
    # must then reproduce the true step everywhere, one worker (no sync to hide) included
    from srifty_kit.model.physics import max_per_node, step_time

    table = measurements(nodes, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (fit,) = StepTimeModel().fit(table).groups_.values()
    k, n, b = (table[c].to_numpy() for c in ("num_nodes", "num_workers", "local_bsz"))
    truth, t_c, _ = step_time(TRUE, k, n, b, max_per_node(k, n))
    np.testing.assert_allclose(table["sync_time_s"] / table["step_time_s"], 1 - t_c / truth)
    error = np.log(fit.physics(k, n, b, max_per_node(k, n), 0.9)["step_time_s"] / truth)
    assert np.median(np.abs(error)) < 0.02 and np.abs(error).max() < 0.06
    assert np.abs(np.median(error[n == 1])) < 0.03


def test_predicts_larger_clusters_than_it_was_fitted_on(fitted):
    held = measurements(4, min_nodes=3, seed=1)
    pred = fitted.predict(configs(held))
    ape = np.abs(pred["step_time_s"] / held["step_time_s"] - 1)
    assert ape.mean() < 0.04  # 3% noise (a mean |error| of 2.4%); the structure is the true one


def test_prediction_interval_covers_held_out_steps(fitted):
    held = measurements(4, min_nodes=3, seed=2)
    pred = fitted.predict(configs(held), level=0.9)
    inside = (held["step_time_s"] >= pred["step_time_lo"]) & (
        held["step_time_s"] <= pred["step_time_hi"]
    )
    assert inside.mean() >= 0.85


def test_intervals_are_ordered_finite_and_widen_with_level_and_scale(fitted):
    cfg = configs(measurements(4, seed=3))
    p80 = fitted.predict(cfg, level=0.8)
    p95 = fitted.predict(cfg, level=0.95)
    for p in (p80, p95):
        assert np.isfinite(p[["step_time_s", "step_time_lo", "step_time_hi"]]).all().all()
        assert (p["step_time_lo"] > 0).all()
        assert (p["step_time_lo"] <= p["step_time_s"]).all()
        assert (p["step_time_s"] <= p["step_time_hi"]).all()
    width = lambda p: p["step_time_hi"] - p["step_time_lo"]  # noqa: E731
    assert (width(p95) >= width(p80)).all()
    rel = (p95["step_time_hi"] / p95["step_time_lo"]).groupby(p95["num_nodes"]).mean()
    assert rel.loc[4] > rel.loc[2]  # beyond the fitted nodes the interval grows


def test_predict_keeps_the_input_columns_and_adds_the_prediction(fitted):
    cfg = configs(measurements(3, seed=4)).assign(note="mine")
    pred = fitted.predict(cfg)
    assert list(pred.columns[: len(cfg.columns)]) == list(cfg.columns)
    assert {"step_time_s", "step_time_lo", "step_time_hi"} <= set(pred.columns)
    assert (pred["note"] == "mine").all()


def test_predict_arrays_matches_predict_and_broadcasts(fitted):
    cfg = configs(measurements(4, seed=5))
    table = fitted.predict(cfg)
    arrays = fitted.predict_arrays(
        "resnet", "g4dn.12xlarge", cfg["num_nodes"], cfg["num_workers"], cfg["local_bsz"]
    )
    np.testing.assert_allclose(arrays["step_time_s"], table["step_time_s"])
    np.testing.assert_allclose(arrays["step_time_hi"], table["step_time_hi"])
    grid = fitted.predict_arrays(
        "resnet",
        "g4dn.12xlarge",
        np.array([[2], [4]]),
        np.array([[8], [16]]),
        np.array([[8, 16, 32]]),
    )
    assert all(v.shape == (2, 3) for v in grid.values())
    np.testing.assert_allclose(
        grid["compute_s"] + grid["sync_s"] >= grid["step_time_s"] - 1e-12, True
    )


def test_explain_breaks_the_step_into_compute_sync_and_overlap(fitted):
    out = fitted.explain(configs(measurements(2, seed=6)))
    assert (out["compute_s"] > 0).all()
    single = out["num_workers"] == 1
    assert (out.loc[single, "sync_s"] == 0).all()
    assert (out.loc[~single, "sync_s"] > 0).all()
    assert (out["overlap_s"] >= -1e-12).all()
    assert np.allclose(out["compute_s"] + out["sync_s"] - out["overlap_s"], out["step_time_s"])


def test_step_time_rises_with_local_batch(fitted):
    # a placement never measured (a measured batch is believed at its own run's level)
    b = np.arange(1, 200)
    t = fitted.predict_arrays("resnet", "g4dn.12xlarge", 3, 12, b)["step_time_s"]
    assert (np.diff(t) > 0).all()


def test_the_fits_note_never_says_steps_1x_the_fit():
    from srifty_kit.model.estimator import _worst_node_count

    # one node's steps 4-5% above the fit: "1x" would say they are not off at all
    said = _worst_node_count(np.array([1, 1, 2, 2]), np.array([1.04, 1.05, 1.0, 1.01]))
    assert said == ", worst at 1 node (steps 1.04x the fit)"
    said = _worst_node_count(np.array([1, 2, 2]), np.array([1.0, 1.3, 1.4]))
    assert "(steps 1.3x the fit)" in said


def test_a_measured_configuration_is_predicted_from_its_own_run():
    # one campaign's 2-node runs 40% slower than the network's physics through 1 and 3 nodes
    # (as the reference AWS bert rows are): predict must not put them 40% below what the user
    # measured, and must say what the search believes; the fit alone is still flagged
    table = measurements(3, seed=4)
    two = table["num_nodes"] == 2
    table.loc[two, "step_time_s"] *= 1.4
    said = r"measured steps it was fitted on.*worst at 2 nodes \(steps 1\.[2-4]x the fit\)"
    with pytest.warns(UserWarning, match=said):
        model = StepTimeModel().fit(table)
    pred = model.predict(configs(table))
    ratio = pred["step_time_s"] / table["step_time_s"]
    assert ratio[two].between(0.93, 1.07).all()
    inside = (table["step_time_s"] >= pred["step_time_lo"]) & (
        table["step_time_s"] <= pred["step_time_hi"]
    )
    assert inside.mean() >= 0.8  # about the 90% level: each measured step is one draw
    explained = model.explain(configs(table))
    np.testing.assert_allclose(explained["step_time_s"], pred["step_time_s"])
    parts = explained["compute_s"] + explained["sync_s"]
    assert (parts >= explained["step_time_s"] * (1 - 1e-9)).all()  # its parts explain it
    belief = model.predict_belief(
        "resnet", "g4dn.12xlarge", table["num_nodes"], table["num_workers"], table["local_bsz"]
    )
    # the search's belief of the same runs: its median where predict puts the point
    np.testing.assert_allclose(belief.median[two], pred["step_time_s"][two], rtol=0.05)


def test_runs_far_further_off_the_fit_than_its_band_said_are_believed_where_they_lie():
    # as the reference AWS bert run on 2 x 8 workers at batch 12 (2.54 s, 1.3x its
    # neighbours): one run 1.7x the physics and its placement's other runs 1.3x, on a fit
    # whose band is a few percent wide. Believed halfway between run and fit, the user's own
    # measurement lay outside its own interval
    table = measurements(3, seed=4)
    place = (table["num_nodes"] == 2) & (table["num_workers"] == 8)
    off = place & (table["local_bsz"] == 16)
    table.loc[place, "step_time_s"] *= 1.3
    table.loc[off, "step_time_s"] *= 1.7 / 1.3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(table)
    ran, y = configs(table), table["step_time_s"].to_numpy()

    def inside(pred, truth):
        return (pred["step_time_lo"] <= truth) & (truth <= pred["step_time_hi"])

    pred = model.predict(ran)
    np.testing.assert_allclose(pred["step_time_s"], y, rtol=0.05)  # each at its own run
    assert inside(pred, y).all()
    for fit in model.groups_.values():
        fit.predicts_as = 11  # model files before version 12: the fit's own band, unsized
    before = model.predict(ran)
    assert (before["step_time_s"] / y)[off.to_numpy()].iloc[0] < 0.75
    assert not inside(before, y)[off.to_numpy()].any()


def _slow_two_node_campaign() -> tuple[pd.DataFrame, StepParams]:
    """Runs through 1-3 nodes whose 2-node network ran 3x the physics (a campaign effect),
    and the constants of that network."""
    slow = TRUE._replace(lat_inter=TRUE.lat_inter * 3, bw_inter=TRUE.bw_inter * 3)
    table = pd.concat(
        [
            measurements(1, seed=4),
            measurements(2, min_nodes=2, params=slow, seed=5),
            measurements(3, min_nodes=3, seed=6),
        ],
        ignore_index=True,
    )
    return table, slow


def test_another_batch_of_a_measured_placement_is_predicted_from_that_placement_s_runs():
    # a campaign whose 2-node network ran 3x slower than its 1- and 3-node runs (as the
    # reference AWS 2-node bert runs did: their steps flat in the batch); the largest batch
    # at 2 nodes was not run, and a search over batch sizes asks about it
    table, _ = _slow_two_node_campaign()
    held = (table["num_nodes"] == 2) & (table["local_bsz"] == 64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fit's own coverage at 2 nodes: flagged, as it is
        model = StepTimeModel().fit(table[~held])
    asked, truth = configs(table[held]), table.loc[held, "step_time_s"].to_numpy()
    ratio = model.predict(asked)["step_time_s"].to_numpy() / truth
    for fit in model.groups_.values():
        fit.predicts_as = 9  # the fit alone there, as model files before version 10
    alone = model.predict(asked)["step_time_s"].to_numpy() / truth
    assert np.abs(ratio - 1).mean() < 0.10 and (ratio > 0.8).all()
    assert (np.abs(ratio - 1) < np.abs(alone - 1)).all()
    assert alone.max() < 0.75  # what the search planned on before: half the real step


def test_a_larger_batch_on_a_placement_slow_in_the_network_keeps_its_slowness():
    # a campaign whose 2-node network ran 3x the physics (as the reference AWS bert runs on
    # 2 x 8 workers did: 2.49-2.54 s at batch 4-12 where the fit said 1.2-1.5 s): a search
    # raising the batch on those nodes asks batch 128 there. The slowness is the network's,
    # which the batch does not change, so the larger batch adds its compute to it
    from srifty_kit.model.physics import max_per_node, step_time

    table, slow = _slow_two_node_campaign()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fit's own coverage at 2 nodes: flagged, as it is
        model = StepTimeModel().fit(table)
    largest = table[table["num_nodes"] == 2].sort_values("local_bsz").groupby("num_workers").tail(1)
    asked = configs(largest).assign(local_bsz=128)
    k, n = asked["num_nodes"].to_numpy(), asked["num_workers"].to_numpy()
    truth, compute, sync = step_time(slow, k, n, 128, max_per_node(k, n))
    pred = model.predict(asked)
    ratio = pred["step_time_s"].to_numpy() / truth
    inside = (pred["step_time_lo"] <= truth) & (truth <= pred["step_time_hi"])
    assert 0.95 < np.median(ratio) < 1.10 and inside.mean() >= 0.8
    # never faster than the same nodes' run at half the batch
    assert (pred["step_time_s"].to_numpy() > largest["step_time_s"].to_numpy()).all()
    # and the slowness is told where it is: the network's, not the compute's
    parts = model.explain(asked)
    np.testing.assert_allclose(parts["compute_s"], compute, rtol=0.05)
    np.testing.assert_allclose(parts["sync_s"], sync, rtol=0.10)
    for fit in model.groups_.values():
        fit.predicts_as = 12  # model files before version 13: moved by the share, linearly
    before = model.predict(asked)
    assert np.median(before["step_time_s"].to_numpy() / truth) < 0.95
    assert (model.explain(asked)["sync_s"].to_numpy() < 0.6 * sync).all()


def test_a_batch_not_run_on_a_measured_placement_is_as_uncertain_as_its_folds_showed():
    # each placement's hosts scale with the batch in their own way (8% per doubling, a drift
    # the physics does not hold); batch 64 was not run on the multi-node placements, as a
    # search raising the batch asks. The fit's batch folds learn how far off such a batch
    # lands, which widens its band about the same point
    table = measurements(3, seed=0)
    place = table.groupby(["num_nodes", "num_workers"]).ngroup().to_numpy()
    drift = np.random.default_rng(100).normal(0, 0.08, place.max() + 1)[place]
    factor = np.exp(drift * np.log2(table["local_bsz"] / 8))
    table["step_time_s"] *= factor
    table["sync_time_s"] *= factor
    held = (table["local_bsz"] == 64) & (table["num_nodes"] > 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(table[~held])
    asked, truth = configs(table[held]), table.loc[held, "step_time_s"].to_numpy()
    pred = model.predict(asked)
    (fit,) = model.groups_.values()
    assert fit.batch_sd > 0.05
    said = model.summary()["interval_from"].iloc[0]
    assert f"a batch not run on a measured placement: log sd {fit.batch_sd:.3f}" in said
    fit.batch_sd = 0.0  # model files before version 11
    narrow = model.predict(asked)

    def covered(p):
        return np.mean((truth >= p["step_time_lo"]) & (truth <= p["step_time_hi"]))

    # and explain says how each was reached
    three = [asked[:1], configs(table[:1]), asked[:1].assign(num_nodes=4, num_workers=16)]
    shown = model.explain(pd.concat(three, ignore_index=True))
    assert shown["route"].tolist() == [
        "measured: its placement's runs",
        "measured: its own run",
        "measured: the fitted physics",
    ]

    assert covered(pred) >= 0.7 and covered(pred) >= covered(narrow) + 0.1
    np.testing.assert_allclose(pred["step_time_s"], narrow["step_time_s"], rtol=1e-12)
    # a run configuration keeps its own band, and so does a batch between two run on its
    # placement (held out there, the band covered as it was): only a batch beyond them widens
    ran = configs(table[~held & (table["num_nodes"] == 2)])
    between = ran[ran["local_bsz"] < 32].assign(local_bsz=lambda t: t["local_bsz"] * 3 // 2)
    ran = pd.concat([ran, between], ignore_index=True)
    fit.batch_sd = 0.2
    wide = model.predict(ran)
    fit.batch_sd = 0.0
    for column in ("step_time_lo", "step_time_hi"):
        np.testing.assert_allclose(wide[column], model.predict(ran)[column], rtol=1e-12)


def test_a_batch_s_distance_beyond_its_placement_s_runs_is_counted_in_doublings():
    from srifty_kit.model.groups import _beyond_batches

    rng = np.random.default_rng(3)
    runs = rng.integers(0, 5, 40)
    run_bsz = 2.0 ** rng.integers(0, 12, 40)
    cell = rng.integers(-1, 5, 300)
    asked = rng.integers(1, 5000, 300).astype(float)
    got = _beyond_batches(run_bsz, runs, cell, asked)
    for c, b, d in zip(cell, asked, got, strict=True):
        mine = run_bsz[runs == c]
        want = 0.0 if c < 0 else max(np.log2(b / mine.max()), np.log2(mine.min() / b), 0.0)
        assert d == pytest.approx(want, abs=1e-12)


def test_a_table_of_two_frames_concatenated_is_predicted_row_by_row():
    # pd.concat keeps each frame's index, so labels repeat; predict read rows by label and
    # failed with pandas' "Must have equal len keys and value"
    table = measurements(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(table)
    asked = configs(table)
    both = pd.concat([asked[:3], asked[5:8].reset_index(drop=True)])
    assert both.index.duplicated().any()
    got = model.predict(both)
    want = model.predict(both.reset_index(drop=True))
    np.testing.assert_allclose(got["step_time_s"].to_numpy(), want["step_time_s"].to_numpy())
    assert got.index.tolist() == both.index.tolist()
    assert model.explain(both)["route"].tolist() == ["measured: its own run"] * 6


def test_per_step_samples_fit_like_their_means():
    steps = measurements(2, repeats=5, noise=0.05, seed=7)
    means = steps.groupby(
        ["model", "instance_type", "gpus_per_node", "num_nodes", "num_workers", "local_bsz"],
        as_index=False,
    )[["step_time_s", "sync_time_s"]].mean()
    cfg = configs(measurements(4, min_nodes=3))
    a = StepTimeModel().fit(steps).predict(cfg)["step_time_s"]
    b = StepTimeModel().fit(means).predict(cfg)["step_time_s"]
    assert np.abs(a / b - 1).max() < 0.05


def test_fits_without_sync_time():
    model = StepTimeModel().fit(measurements(2, sync=False))
    held = measurements(3, min_nodes=3, seed=8)
    ape = np.abs(model.predict(configs(held))["step_time_s"] / held["step_time_s"] - 1)
    assert ape.mean() < 0.05  # the step alone holds the physics: barely worse than with sync


def test_too_few_configurations_fix_terms_and_say_which():
    table = measurements(1).query("local_bsz == 16 and num_workers == 1")
    with pytest.warns(UserWarning, match="fixed"):
        model = StepTimeModel().fit(table)
    fixed = model.fixed_terms_["resnet/g4dn.12xlarge"]
    assert {"alpha_c", "bw_inter", "bw_intra"} <= set(fixed)
    assert all(isinstance(why, str) and why for why in fixed.values())
    pred = model.predict(configs(measurements(4)))
    assert np.isfinite(pred[["step_time_s", "step_time_lo", "step_time_hi"]]).all().all()


@given(
    nodes=st.integers(2, 64),
    per_node=st.integers(1, 8),
    lat=st.floats(1e-6, 5e-3),
    bw=st.floats(1e-4, 10.0),
)
def test_network_latency_grows_with_nodes_and_bandwidth_term_saturates(nodes, per_node, lat, bw):
    from srifty_kit.model.physics import sync_time

    p = StepParams(0.0, 0.0, 0.0, 0.0, lat, bw, 0.0, 1.0)
    n = nodes * per_node
    t_s = float(sync_time(p, np.array(nodes), np.array(n), np.array(per_node)))
    # the ring crosses the network 2(k-1) times whatever the GPUs per node (NCCL's cost model)
    latency_only = float(sync_time(p._replace(bw_inter=0.0), nodes, n, per_node))
    assert latency_only == pytest.approx(2 * (nodes - 1) * lat)
    # 2(n-1)/n of the gradient bytes per link: between 1x (two workers) and 2x the bytes
    assert bw * (1 - 1e-9) <= t_s - latency_only < 2 * bw


def test_one_multi_node_count_fixes_network_latency_and_says_why():
    with pytest.warns(UserWarning, match="lat_inter: one multi-node count"):
        model = StepTimeModel().fit(measurements(2))
    assert model.groups_[("resnet", "g4dn.12xlarge")].params.lat_inter == 0.0


def test_missing_inter_node_terms_are_borrowed_from_another_model_with_wider_intervals():
    table = pd.concat([measurements(2, model="bert"), measurements(1, model="resnet")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(table)
    assert "bw_inter" in model.fixed_terms_["resnet/g4dn.12xlarge"]
    cfg = configs(measurements(2, min_nodes=2, model="resnet"))
    resnet = model.predict(cfg)
    bert = model.predict(cfg.assign(model="bert"))
    assert np.isfinite(resnet["step_time_s"]).all()
    width = lambda p: (p["step_time_hi"] / p["step_time_lo"]).mean()  # noqa: E731
    assert width(resnet) > width(bert)


def test_save_and_load_give_the_same_predictions(fitted, tmp_path):
    path = tmp_path / "model.json"
    fitted.save(path)
    again = StepTimeModel.load(path)
    cfg = configs(measurements(4, seed=9))
    pd.testing.assert_frame_equal(fitted.predict(cfg), again.predict(cfg))
    assert again.models_ == ["resnet"] and again.instance_types_ == ["g4dn.12xlarge"]
    assert again.summary()["interval_from"].tolist() == fitted.summary()["interval_from"].tolist()


def test_summary_says_what_the_interval_widths_were_calibrated_on(fitted):
    # fitted on 1-2 nodes: no fold could move to a new node count, so a prior covers 3+ nodes
    said = fitted.summary()["interval_from"].iloc[0]
    assert said.startswith("held out <=") and "workers on 2 nodes" in said
    assert "beyond 2 nodes a prior learned on three reference clusters" in said
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # 1-3 nodes: the move from 2 nodes to 3 is held out and learned, pooled with the prior
        three = StepTimeModel().fit(measurements(3)).summary()["interval_from"].iloc[0]
    assert "beyond 3 nodes 1 held-out node move(s) of g4dn.12xlarge pooled with" in three


def test_a_fit_with_nothing_to_hold_out_reports_no_held_out_error():
    # one GPU at four batches: no larger scale to hold out, so no error was measured (NaN),
    # which the summary must not print as an infinite one
    one_gpu = measurements(1).query("num_workers == 1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        error = StepTimeModel().fit(one_gpu).summary()["held_out_error"].iloc[0]
    assert np.isnan(error)


def test_a_hand_edited_model_file_is_refused(fitted, tmp_path):
    path = tmp_path / "model.json"
    fitted.save(path)
    doc = json.loads(path.read_text())
    doc["groups"][0]["params"]["beta_c"] *= 2
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="edited"):
        StepTimeModel.load(path)


def test_a_model_file_of_another_version_is_refused(fitted, tmp_path):
    path = tmp_path / "model.json"
    fitted.save(path)
    doc = json.loads(path.read_text())
    doc["version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="version 99"):
        StepTimeModel.load(path)
    doc["version"] = 1
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="version 1 was written by an older srifty_kit"):
        StepTimeModel.load(path)
    path.write_text("{not json")
    with pytest.raises(InputError, match="JSON"):
        StepTimeModel.load(path)


def test_the_batch_range_each_group_was_fitted_on_is_kept_and_saved(fitted, tmp_path):
    assert fitted.local_bsz_range_ == {("resnet", "g4dn.12xlarge"): (8, 64)}
    # a type never measured rests on the measurements of the type it is carried from
    assert fitted.batch_range("resnet", "p4d.24xlarge") == (8, 64)
    fitted.save(tmp_path / "model.json")
    again = StepTimeModel.load(tmp_path / "model.json")
    assert again.local_bsz_range_ == fitted.local_bsz_range_
    with pytest.raises(InputError, match="did you mean 'resnet'"):
        again.batch_range("resnt", "g4dn.12xlarge")


def test_batch_range_refuses_a_type_neither_fitted_nor_in_the_catalog(fitted):
    # before: a misspelt type answered with the range of the type fits are carried from
    with pytest.raises(InputError, match="not in the catalog .did you mean 'g4dn.12xlarge'") as e:
        fitted.batch_range("resnet", "g4dn.12xlarg")
    assert "'g4dn.12xlarg'" in e.value.problem and e.value.column == "instance_type"
    # a type only the given catalog lists is known through it, in batch_range and predict
    cat = load_catalog()
    mine = pd.concat([cat, cat[cat["instance_type"] == "p3.8xlarge"].assign(instance_type="x1")])
    with pytest.raises(InputError, match="'x1' is not in the catalog"):
        fitted.batch_range("resnet", "x1")
    assert fitted.batch_range("resnet", "x1", catalog=mine) == (8, 64)
    far = pd.DataFrame(
        {"model": "resnet", "instance_type": ["x1"], "num_nodes": 1, "num_workers": 1}
    ).assign(local_bsz=1024)
    with pytest.warns(UserWarning, match="outside the fitted 8-64"):
        assert np.isfinite(fitted.predict(far, catalog=mine)["step_time_s"]).all()


def test_an_unknown_training_model_gets_did_you_mean(fitted):
    with pytest.raises(InputError, match="did you mean 'resnet'"):
        fitted.predict_arrays("resnt", "g4dn.12xlarge", 1, 1, 8)


def test_bad_level_is_refused(fitted):
    with pytest.raises(InputError, match="level"):
        fitted.predict(configs(measurements(1)), level=90)


def test_predicting_before_fitting_is_refused():
    with pytest.raises(InputError, match="not fitted"):
        StepTimeModel().predict(configs(measurements(1)))


def test_local_cpu_profiles_outside_the_catalog_fit():
    table = measurements(1).assign(instance_type="local-cpu-8core", gpus_per_node=4)
    with pytest.warns(UserWarning, match="no multi-node measurements"):
        model = StepTimeModel().fit(table)
    pred = model.predict(configs(table).drop(columns="gpus_per_node"))
    assert np.isfinite(pred["step_time_s"]).all()


def test_reference_ec2_fit_on_three_nodes_predicts_four(reference_measurements):
    table = pd.read_csv(reference_measurements)
    model = StepTimeModel().fit(table[table["num_nodes"] <= 3])
    held = table[table["num_nodes"] == 4]
    pred = model.predict(held.drop(columns=["step_time_s", "sync_time_s"]))
    ape = (pred["step_time_s"] / held["step_time_s"] - 1).abs()
    assert ape.groupby(held["model"]).mean().mean() < 0.12


def test_a_batch_nobody_ran_on_the_reference_slow_bert_nodes_is_no_faster_than_its_runs(
    reference_measurements,
):
    # the real AWS bert runs on 2 x 8 workers took 2.49-2.54 s at batch 4-12, about twice the
    # physics' network time; a search raising the batch there asks 16-32, which nobody ran
    table = pd.read_csv(reference_measurements)
    bert = table[table["model"] == "bert"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fit misses the 2-node campaign: flagged, as it is
        model = StepTimeModel().fit(bert)
    ran = bert[(bert["num_nodes"] == 2) & (bert["num_workers"] == 8)]
    asked = configs(ran.head(3)).assign(local_bsz=[16, 24, 32])
    pred = model.predict(asked)["step_time_s"].to_numpy()
    slowest = ran.groupby("local_bsz")["step_time_s"].mean().max()
    assert (pred >= slowest).all() and (np.diff(pred) > 0).all()
    for fit in model.groups_.values():
        fit.predicts_as = 12  # model files before version 13: moved linearly in the share
    assert model.predict(asked)["step_time_s"].iloc[0] < 0.9 * slowest


def test_batch_size_quirks_are_learned_when_they_help_held_out_scales():
    table = measurements(2, seed=10)
    quirk = table["local_bsz"] == 16  # e.g. another kernel at this size: 30% slower compute
    bumped = TRUE.alpha_c + TRUE.beta_c * 16
    table.loc[quirk, "step_time_s"] += 0.3 * bumped
    model = StepTimeModel().fit(table)
    plain = StepTimeModel(correction="none").fit(table)
    assert model.groups_[("resnet", "g4dn.12xlarge")].correction is not None
    assert "batch correction" in model.summary()["fitted_as"].iloc[0]
    held = measurements(4, min_nodes=3, seed=11).query("local_bsz == 16")
    truth = held["step_time_s"] + 0.3 * bumped
    err = lambda m: (m.predict(configs(held))["step_time_s"] / truth - 1).abs().mean()  # noqa: E731
    assert err(model) < err(plain)
    assert err(model) < 0.06


def test_unknown_structure_or_correction_is_refused():
    with pytest.raises(InputError, match="did you mean 'full'"):
        StepTimeModel(structure="ful").fit(measurements(1))
    with pytest.raises(InputError, match="correction"):
        StepTimeModel(correction="yes").fit(measurements(1))


@settings(max_examples=40, deadline=None)
# one more low score reached at 0.904 once moved the band of a new node count down
@example(nodes=3, per_node=1, bsz=1, levels=(0.90234375, 0.001953125))
# a batch never run on a measured placement, and a measured configuration: conditioned beliefs
@example(nodes=1, per_node=2, bsz=1, levels=(0.5, 0.0078125))
@example(nodes=1, per_node=2, bsz=8, levels=(0.5, 0.0078125))
@given(
    nodes=st.integers(1, 64),
    per_node=st.integers(1, 4),
    bsz=st.integers(1, 4096),
    levels=st.tuples(st.floats(0.5, 0.98), st.floats(0.0, 0.019)),
)
def test_any_configuration_gets_an_ordered_finite_interval_that_grows_with_level(
    fitted, nodes, per_node, bsz, levels
):
    low_level, extra = levels
    args = ("resnet", "g4dn.12xlarge", nodes, nodes * per_node, bsz)
    a = fitted.predict_arrays(*args, level=low_level)
    b = fitted.predict_arrays(*args, level=low_level + extra)
    for p in (a, b):
        assert np.isfinite(list(p.values())).all()
        assert 0 < p["step_time_lo"] <= p["step_time_s"] <= p["step_time_hi"]
    assert b["step_time_hi"] >= a["step_time_hi"] and b["step_time_lo"] <= a["step_time_lo"]


def test_gradient_bytes_carry_the_network_from_one_model_to_another():
    # same machine, same links: sync seconds scale with the gradient bytes (3x here)
    small, big = TRUE, TRUE._replace(bw_intra=3 * TRUE.bw_intra, bw_inter=3 * TRUE.bw_inter)
    table = pd.concat(
        [
            measurements(2, model="bert", params=small).assign(grad_bytes=1e8),
            # gpt measured on one worker only: no link of its own was ever timed
            measurements(1, model="gpt", params=big)
            .query("num_workers == 1")
            .assign(grad_bytes=3e8),
        ]
    )
    with pytest.warns(UserWarning, match="borrowed"):
        model = StepTimeModel().fit(table)
    held = measurements(2, min_nodes=2, model="gpt", params=big, seed=12)
    ape = (model.predict(configs(held))["step_time_s"] / held["step_time_s"] - 1).abs()
    assert ape.mean() < 0.08


def test_a_bad_catalog_is_refused_in_one_line_by_fit_and_predict(fitted):
    from srifty_kit import load_catalog

    table = measurements(2)
    short = load_catalog().drop(columns="gpu_count")
    for call in (
        lambda cat: StepTimeModel().fit(table, catalog=cat),
        lambda cat: fitted.predict(configs(table).head(3), catalog=cat),
    ):
        with pytest.raises(InputError, match="'gpu_count'") as missing:
            call(short)
        assert "\n" not in str(missing.value) and "to fix" in str(missing.value)
        with pytest.raises(InputError, match="catalog must be a table"):
            call("catalog.csv")


def test_paths_and_seeds_of_the_wrong_kind_are_named_in_one_line(fitted, tmp_path):
    cfg = configs(measurements(2)).head(2)
    for call, said in (
        (lambda: fitted.predict_draws(cfg, seed="a"), "seed must be a whole number"),
        (lambda: StepTimeModel.load(None), "must be a file path, got None"),
        (lambda: fitted.save(None), "must be a file path, got None"),
        (lambda: fitted.save(tmp_path), "is a directory, not a file"),
    ):
        with pytest.raises(InputError, match=said) as refused:
            call()
        assert "\n" not in str(refused.value) and "to fix" in str(refused.value)
    assert list(tmp_path.iterdir()) == []  # nothing written in the folder named


def test_an_uneven_placement_is_not_predicted_from_the_even_spread_s_run(reference_measurements):
    # the reference AWS cifar10 runs on 2 nodes x 4 workers at batch 32: 1 + 3 workers took
    # 0.190 s, 2 + 2 took 0.148 s. The fit keeps the even spread's runs; the uneven one was
    # predicted as "its own run" from the 2 + 2 run, its own measurement outside its interval.
    # It is its own physics (3 workers on the busiest node) moved by the runs on those nodes
    table = pd.read_csv(reference_measurements)
    table = table[(table["model"] == "cifar10") & (table["num_nodes"] <= 2)]
    table["placement"] = table["placement"].astype("string")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(table)
    asked = table[
        (table["num_nodes"] == 2) & (table["num_workers"] == 4) & (table["local_bsz"] == 32)
    ].drop_duplicates("placement")
    asked = asked.set_index("placement", drop=False).loc[["13", "22"]]
    measured = asked["step_time_s"].to_numpy()
    assert measured[0] > 1.2 * measured[1]  # the rows this test is about
    pred = model.predict(asked.drop(columns=["step_time_s", "sync_time_s"]).reset_index(drop=True))
    route = model.explain(asked.drop(columns=["step_time_s", "sync_time_s"]).reset_index(drop=True))
    assert list(route["route"]) == ["measured: its placement's runs", "measured: its own run"]
    assert pred["step_time_s"][0] > 1.05 * pred["step_time_s"][1]  # its busiest node's 3
    # its own run lies 20% above the point, at the 90% band's upper end (0.1896 s there)
    wide = model.predict(
        asked.drop(columns=["step_time_s", "sync_time_s"]).reset_index(drop=True), level=0.95
    )
    assert wide["step_time_lo"][0] <= measured[0] <= wide["step_time_hi"][0]
    assert measured[0] <= 1.01 * pred["step_time_hi"][0]
    assert pred["step_time_s"][1] == pytest.approx(measured[1], rel=0.03)


def test_a_bad_row_of_a_filtered_frame_is_named_by_its_own_index_label():
    # before: "rows 1, 2", the positions from 0 in the filtered frame, which match no label
    # the user sees (its rows are 5, 9, 13, ...): they could not find the bad rows
    table = measurements(2)
    two_nodes = table[table["num_nodes"] == 2].copy()
    bad = two_nodes.index[[1, 2]]
    assert list(bad) != [1, 2]  # the labels are not the positions
    two_nodes.loc[bad, "step_time_s"] = -1.0
    with pytest.raises(InputError) as err:
        StepTimeModel().fit(two_nodes)
    said = str(err.value)
    assert f"column 'step_time_s', index {bad[0]}, {bad[1]}: expected values > 0" in said
    assert two_nodes.loc[err.value.rows, "step_time_s"].eq(-1.0).all()  # df.loc finds them


def test_a_refused_configuration_to_predict_is_named_by_its_index_label(fitted):
    asked = configs(measurements(2))
    asked.index = [f"run-{i}" for i in range(len(asked))]
    asked.loc["run-7", "gpus_per_node"] = 8
    with pytest.raises(InputError) as err:
        fitted.predict(asked.iloc[5:])
    assert "column 'gpus_per_node', index 'run-7': gpus_per_node 8" in str(err.value)
