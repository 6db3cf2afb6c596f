"""Model files: what was saved loads and predicts the same, across releases of the layout."""

from __future__ import annotations

import pandas as pd
import pytest

from srifty_kit import StepTimeModel
from tests.builders import REPO, run_srifty

DATA = REPO / "tests" / "data"


def _unchanged(configs: pd.DataFrame, model: StepTimeModel) -> pd.Series:
    """Rows whose prediction must not move: types the file measured, and one-worker rows of
    carried types. Multi-worker rows of carried types are computed at prediction time from the
    file's constants by the current transfer, which has improved since the file was written
    (the CPU profile's gloo latency is no longer carried to GPU links as if it were NCCL's)."""
    return configs["instance_type"].isin(model.instance_types_) | (configs["num_workers"] == 1)


def test_a_model_file_saved_before_the_layout_change_predicts_what_it_did():
    # written by the flat-module release (commit 61cb4b2) from the packaged sample profiles,
    # with its predictions of these configurations at the time
    model = StepTimeModel.load(DATA / "model_v3_before_layout.json")
    configs = pd.read_csv(DATA / "configs_before_layout.csv")
    then = pd.read_csv(DATA / "predictions_before_layout.csv")
    now = model.predict(configs)
    same = _unchanged(configs, model).to_numpy()
    assert same.sum() >= 8
    for column in ("step_time_s", "step_time_lo", "step_time_hi"):
        assert now[column].to_numpy()[same] == pytest.approx(
            then[column].to_numpy()[same], rel=1e-9
        )
    moved = now[~same]
    assert (moved["step_time_lo"] <= moved["step_time_s"]).all()
    assert (moved["step_time_s"] <= moved["step_time_hi"]).all()


def test_the_old_file_predicts_through_the_cli(tmp_path):
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
    assert done.returncode == 0, done.stderr
    model = StepTimeModel.load(DATA / "model_v3_before_layout.json")
    configs = pd.read_csv(DATA / "configs_before_layout.csv")
    same = _unchanged(configs, model).to_numpy()
    then = pd.read_csv(DATA / "predictions_before_layout.csv")
    assert pd.read_csv(out)["step_time_hi"].to_numpy()[same] == pytest.approx(
        then["step_time_hi"].to_numpy()[same], rel=1e-9
    )


def test_save_then_load_round_trips_every_group_kind(tmp_path):
    model = StepTimeModel.load(DATA / "model_v3_before_layout.json")
    model.save(tmp_path / "again.json")
    again = StepTimeModel.load(tmp_path / "again.json")
    configs = pd.read_csv(DATA / "configs_before_layout.csv")
    assert again.predict(configs).equals(model.predict(configs))
    assert again.summary().equals(model.summary())
