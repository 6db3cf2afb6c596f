"""Model files: what was saved loads and predicts the same, across releases of the layout."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from srifty_kit import InputError, StepTimeModel
from srifty_kit.model import persist
from tests.builders import REPO, run_srifty

DATA = REPO / "tests" / "data"


def test_a_model_file_of_an_earlier_version_is_refused_with_how_to_refit():
    # written by the flat-module release (commit 61cb4b2): its intervals came from mechanisms
    # the joint belief replaced, so it is refused rather than predicted two ways
    with pytest.raises(InputError, match="srifty fit") as err:
        StepTimeModel.load(DATA / "model_v3_before_layout.json")
    assert "version" in str(err.value)


def test_a_folder_given_as_the_model_file_is_said_to_be_a_folder(tmp_path):
    # it was "model file not found" of a folder that is there
    with pytest.raises(InputError, match="is a directory, not a file") as err:
        StepTimeModel.load(tmp_path)
    assert f"to fix: give a file name, e.g. {tmp_path / 'NAME.json'}" in str(err.value)


def test_a_model_file_of_a_newer_release_says_to_upgrade(model, tmp_path):
    # it said only "model file version 14; ...; to fix: refit it", as of a file of
    # unknown make: the measurements may be gone, and an upgrade reads it as written
    path = tmp_path / "model.json"
    model.save(path)
    doc = json.loads(path.read_text())
    doc["version"] = persist.VERSION + 1
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="was written by a newer srifty_kit") as err:
        StepTimeModel.load(path)
    assert "to fix: upgrade srifty_kit to the release that wrote it, or refit" in str(err.value)


def test_the_old_file_is_one_line_through_the_cli(tmp_path):
    out = tmp_path / "pred.csv"
    done = run_srifty(
        "predict",
        "--model",
        str(DATA / "model_v3_before_layout.json"),
        "--configs",
        str(DATA / "configs_before_layout.csv"),
        "--out",
        str(out),
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "srifty fit" in lines[0] and "Traceback" not in done.stderr
    assert not out.exists()


def test_a_json_file_nested_too_deep_is_one_line_through_the_cli(tmp_path):
    # a foreign JSON document deeper than Python's parser goes is no model: one line, no trace
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    out = tmp_path / "pred.csv"
    configs = str(DATA / "configs_before_layout.csv")
    done = run_srifty("predict", "--model", str(deep), "--configs", configs, "--out", str(out))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "deep.json: not a model file" in line and "srifty fit" in line
    assert not out.exists()


def test_save_then_load_predicts_and_draws_the_same(model, tmp_path):
    model.save(tmp_path / "again.json")
    again = StepTimeModel.load(tmp_path / "again.json")
    configs = pd.DataFrame(
        {
            "model": "resnet",
            "instance_type": ["g4dn.12xlarge", "g6.12xlarge", "g4dn.12xlarge", "p4d.24xlarge"],
            "num_nodes": [1, 2, 8, 2],
            "num_workers": [4, 8, 32, 16],
            "local_bsz": 32,
        }
    )
    assert again.predict(configs).equals(model.predict(configs))
    assert again.summary().equals(model.summary())
    # the joint belief (the network's move beyond the measured nodes included) survives too
    np.testing.assert_array_equal(
        again.predict_draws(configs, draws=50).values, model.predict_draws(configs, draws=50).values
    )


# Files written by earlier releases, each with the configurations asked and the predictions
# that release made at 90%, and the node counts where this release would predict otherwise.
OLD_FILES = {
    # commit c7a8d49, before the node move's growth: fitted on 1-2 nodes, so 3-8 nodes lie
    # beyond, where its move grew in proportion to the distance
    "version 6": ("v6_linear_move", "v6_linear_move", range(3, 9)),
    # commit a74fe94, before the move's limit, on the session model's measurements (1-2
    # nodes): 5-8 nodes lie past the 1.32 doublings the shipped growth was learned on, where
    # that release kept the move flat
    "version 7": ("v7_flat_move", "v6_linear_move", range(6, 9)),
    # commit a8465c0, before placements' runs were read: 1-3 nodes, the 2-node runs 1.4x
    # slow, asked at batch 64, which was not run at 2 nodes, where it predicted the physics
    "version 9": ("v9_batch_physics", "v9_batch_physics", (2,)),
    # commit 4d4d98a, before a batch not run on a measured placement was widened: the same
    # campaign, where that release's band at batch 64 on 2 nodes was the narrower one
    "version 10": ("v10_batch_narrow", "v9_batch_physics", (2,)),
    # commit 9cbf995, before the runs' spread was sized to them: 1-3 nodes, one 2-node run
    # 1.7x the physics and its placement's other runs 1.3x (batch 64 there not run), where
    # that release believed them halfway between the fit and the runs, as it did the 1-node
    # runs the fit missed (tests/model/test_estimator.py holds the campaign)
    "version 11": ("v11_runs_unsized", "v11_runs_unsized", (1, 2)),
    # commit a3a7dd6, before another batch of a measured placement moved through the
    # overlap: 1-3 nodes, the 2-node network 3x the physics and batch 64 not run there,
    # where that release moved it by its physics' sync share of the runs' shift
    "version 12": ("v12_places_linear", "v11_runs_unsized", (2,)),
}


@pytest.mark.parametrize("version", list(OLD_FILES))
def test_a_file_of_an_earlier_version_still_read_predicts_what_it_did(version):
    file, asked, differ = OLD_FILES[version]
    model = StepTimeModel.load(DATA / f"model_{file}.json")
    then = pd.read_csv(DATA / f"predicted_{file}.csv")
    configs = pd.read_csv(DATA / f"configs_{asked}.csv")
    now = model.predict(configs)
    for column in ("step_time_s", "step_time_lo", "step_time_hi"):
        np.testing.assert_allclose(now[column].to_numpy(), then[column].to_numpy(), rtol=1e-9)
    # where the releases differ
    assert then["num_nodes"].isin(differ).any()


def _as_written_and_as_read_now(file: str, asked: str, version: int) -> tuple:
    """The points a fixture of ``version`` predicts, and the same file's read as this release
    reads runs."""
    model = StepTimeModel.load(DATA / f"model_{file}.json")
    configs = pd.read_csv(DATA / f"configs_{asked}.csv")
    then = model.predict(configs)["step_time_s"].to_numpy()
    for fit in model.groups_.values():
        assert fit.predicts_as == version
        fit.predicts_as = persist.VERSION
    return then, model.predict(configs)["step_time_s"].to_numpy()


def test_a_version_11_file_predicts_otherwise_only_where_its_runs_were_unsized():
    # the fixture is not vacuous: read as this release reads runs, its predictions move
    then, now = _as_written_and_as_read_now("v11_runs_unsized", "v11_runs_unsized", 11)
    assert (np.abs(now / then - 1) > 0.05).mean() > 0.5


def test_a_version_12_file_predicts_otherwise_only_at_a_batch_its_placement_did_not_run():
    # the fixture is not vacuous: read as this release reads placements, the batch not run
    # on the slow 2-node placement moves up (the truth there is 1.386 s) and nothing else does
    then, now = _as_written_and_as_read_now("v12_places_linear", "v11_runs_unsized", 12)
    moved = np.abs(now / then - 1) > 1e-9
    configs = pd.read_csv(DATA / "configs_v11_runs_unsized.csv")
    not_run = (configs["num_nodes"] == 2) & (configs["local_bsz"] == 64)
    assert moved.tolist() == not_run.tolist()
    at = not_run.to_numpy()
    assert then[at][0] < now[at][0] and abs(now[at][0] - 1.386) < abs(then[at][0] - 1.386)


def test_this_release_writes_the_version_its_fits_predict_as(model, tmp_path):
    from srifty_kit.model.groups import PREDICTS

    assert PREDICTS == persist.VERSION  # a behaviour change bumps both
    model.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["version"] == persist.VERSION
    assert {g["predicts_as"] for g in doc["groups"] if "spread" in g} == {persist.VERSION}


@pytest.mark.parametrize("bad", [14, 5, True, "13", None])
def test_a_group_claiming_a_version_it_cannot_predict_as_is_refused(model, tmp_path, bad):
    model.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    next(g for g in doc["groups"] if "spread" in g)["predicts_as"] = bad
    body = {k: v for k, v in doc.items() if k != "sha256"}
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({**body, "sha256": persist._checksum(body)}))
    with pytest.raises(InputError, match="predicts_as.*srifty fit"):
        StepTimeModel.load(edited)


@pytest.mark.parametrize("value", [10**30, 10**400])
def test_a_constant_too_large_for_a_float_is_refused_with_how_to_refit(model, tmp_path, value):
    # JSON integers have no size limit; numpy's isfinite raised a TypeError on 10**30
    model.save(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    doc["groups"][0]["params"]["lat_inter"] = value
    body = {k: v for k, v in doc.items() if k != "sha256"}
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({**body, "sha256": persist._checksum(body)}))
    if value < 10**300:  # as big as a float holds: a physical, if absurd, latency
        StepTimeModel.load(edited)
    else:
        with pytest.raises(InputError, match="lat_inter.*srifty fit"):
            StepTimeModel.load(edited)


def test_a_file_with_unsigned_scores_is_refused_with_how_to_refit(tmp_path):
    # no version this release reads wrote magnitudes (version 4 and older did): one that
    # claims them was edited by hand, and would be read as signed scores if loaded
    doc = json.loads((DATA / "model_v6_linear_move.json").read_text())
    spread = next(g["spread"] for g in doc["groups"] if "spread" in g)
    spread["signed"] = False
    body = {k: v for k, v in doc.items() if k != "sha256"}
    edited = tmp_path / "unsigned.json"
    edited.write_text(json.dumps({**body, "sha256": persist._checksum(body)}))
    with pytest.raises(InputError, match="signed scores.*srifty fit"):
        StepTimeModel.load(edited)
