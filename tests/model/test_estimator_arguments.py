"""StepTimeModel's arguments as a notebook gives them: a value that cannot be is refused in
one line naming it and the fix; a number of numpy's kind is a number."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from srifty_kit import InputError, StepTimeModel
from tests.builders import configs, measurements


@pytest.mark.parametrize("prior", [-1.0, 100, float("nan"), float("inf"), "0.1", True])
def test_a_decay_prior_outside_the_decays_bounds_is_refused_before_fitting(prior):
    # -1 ended in a numpy warning, NaN in scipy's "Residuals are not finite", 100 in an
    # 8-node step of minutes, "0.1" in float()'s ValueError
    with pytest.raises(InputError, match=r"decay_prior must be a number in \[0, 4\]") as err:
        StepTimeModel(decay_prior=prior).fit(measurements(1))
    assert "\n" not in str(err.value) and "to fix" in str(err.value)


def test_a_decay_prior_within_the_bounds_is_used():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel(decay_prior=0.5).fit(measurements(1))
    assert model.network_decay_["g4dn.12xlarge"][0] == 0.5


def test_numbers_of_numpys_kind_are_taken_and_saved_as_numbers(tmp_path):
    # a level or a count read from a table's cell is np.float32 / np.int64: it was refused
    # ("level must be a probability between 0 and 1, got np.float32(0.9)")
    table = measurements(1)
    cfg = configs(table).head(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel(level=np.float32(0.8), decay_prior=np.float32(0.5)).fit(table)
    model.save(tmp_path / "model.json")
    again = StepTimeModel.load(tmp_path / "model.json")
    assert again.get_params()["level"] == pytest.approx(0.8)
    pd.testing.assert_frame_equal(
        again.predict(cfg, level=np.float32(0.9)), again.predict(cfg, level=0.9), rtol=1e-6
    )
    draws = again.predict_draws(cfg, draws=np.int64(7), seed=np.int64(1))
    assert draws.values.shape == (7, 3)
    ends = draws.interval(np.float32(0.9))
    assert (ends["lower"] <= ends["upper"]).all()


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda m, cfg: m.predict(cfg, level=True), "level must be a probability"),
        (lambda m, cfg: m.predict_draws(cfg, draws=True), "draws must be a whole number"),
        (lambda m, cfg: m.predict_draws(cfg).interval(True), "level must be a probability"),
    ],
)
def test_a_bool_is_neither_a_level_nor_a_count(call, words):
    # draws=True ended in numpy's "TypeError: an integer is required"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(measurements(1))
    with pytest.raises(InputError, match=words) as err:
        call(model, configs(measurements(1)).head(2))
    assert "to fix" in str(err.value)


@pytest.mark.parametrize(
    "call",
    [
        lambda m, cfg, tmp: m.predict(cfg),
        lambda m, cfg, tmp: m.predict_draws(cfg),
        lambda m, cfg, tmp: m.explain(cfg),
        lambda m, cfg, tmp: m.summary(),
        lambda m, cfg, tmp: m.save(tmp / "model.json"),
        lambda m, cfg, tmp: m.batch_range("resnet", "g4dn.12xlarge"),
        lambda m, cfg, tmp: m.predict_arrays("resnet", "g4dn.12xlarge", 1, 1, 8),
    ],
    ids=["predict", "predict_draws", "explain", "summary", "save", "batch_range", "arrays"],
)
def test_a_model_used_before_fit_raises_scikit_learns_not_fitted_error(call, tmp_path):
    # it raised only an InputError, which `except NotFittedError` (the scikit-learn
    # convention this estimator follows) let through
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    unfitted = StepTimeModel()
    with pytest.raises(NotFittedError):  # what scikit-learn itself says of it
        check_is_fitted(unfitted)
    with pytest.raises(NotFittedError, match="not fitted") as err:
        call(unfitted, configs(measurements(1)).head(2), tmp_path)
    assert isinstance(err.value, InputError) and "to fix: call fit" in str(err.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("t", [float("nan"), [0.1, float("nan")], "0.5s", None])
def test_the_share_of_draws_under_a_time_that_is_not_one_is_refused(t):
    # NaN gave a share of 0 as if an answer; "0.5s" and None reached numpy as ValueError and
    # TypeError
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(measurements(1))
    draws = model.predict_draws(configs(measurements(1)).head(2))
    assert draws.prob_below(np.inf).tolist() == [1.0, 1.0]
    with pytest.raises(InputError, match="t must be seconds|t is NaN") as err:
        draws.prob_below(t)
    assert "to fix" in str(err.value)


def test_draws_of_two_frames_concatenated_are_drawn_by_position():
    # pd.concat([a, b]) repeats index labels: predict_draws ended in pandas'
    # "InvalidIndexError: Reindexing only valid with uniquely valued Index objects"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(measurements(1))
    cfg = configs(measurements(1))
    small = cfg[cfg["local_bsz"] == 8].head(2).reset_index(drop=True)
    large = cfg[cfg["local_bsz"] == 64].head(2).reset_index(drop=True)
    both = pd.concat([small, large])
    assert both.index.duplicated().any()
    draws = model.predict_draws(both, draws=400)
    alone = model.predict_draws(pd.concat([small, large], ignore_index=True), draws=400)
    np.testing.assert_array_equal(draws.values, alone.values)
    assert (draws.mean[2:] > draws.mean[:2]).all()  # batch 64 takes longer than batch 8


def test_a_table_indexed_by_its_own_columns_fits_and_predicts_as_it_reads():
    # df.set_index(["model", "instance_type"], drop=False), a notebook habit, ended in
    # pandas' "ValueError: 'model' is both an index level and a column label"
    table = measurements(1)
    cfg = configs(table).head(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain_fit = StepTimeModel().fit(table)
        indexed = table.set_index(["model", "instance_type"], drop=False)
        indexed_fit = StepTimeModel().fit(indexed)
    keyed = cfg.set_index(["model", "instance_type"], drop=False)
    got = indexed_fit.predict(keyed)
    expected = plain_fit.predict(cfg)
    np.testing.assert_allclose(got["step_time_s"], expected["step_time_s"])
    np.testing.assert_allclose(got["step_time_hi"], expected["step_time_hi"])
    assert got.index.tolist() == keyed.index.tolist()  # the user's labels, in order
    assert indexed_fit.explain(keyed)["route"].tolist() == plain_fit.explain(cfg)["route"].tolist()
    assert indexed_fit.predict_draws(keyed).values.shape == (200, 4)


def test_facts_of_one_model_that_are_no_mapping_say_what_to_give():
    # the one line named the problem and no fix
    with pytest.raises(InputError, match="the facts of 'resnet' are not a mapping") as err:
        StepTimeModel().fit(measurements(1), facts={"resnet": "facts.json"})
    assert "to fix: give {model: that profile's facts JSON" in str(err.value)


@pytest.mark.parametrize("shape", ["learned", {"sharpness": 4.0}])
def test_a_device_shape_that_is_no_shape_is_refused_before_fitting(shape):
    # it reached learn_curves as "AttributeError: 'str' object has no attribute 'sharpness'"
    with pytest.raises(InputError, match="device_shape must be a device_curve.DeviceShape"):
        StepTimeModel().fit(measurements(1), device_shape=shape)


def test_a_whole_seed_given_as_a_float_draws_as_that_seed_and_others_are_refused():
    # a seed of 3.0 (a notebook's parameter, a table's cell) was refused as no whole number
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(measurements(1))
    cfg = configs(measurements(1)).head(3)
    three = model.predict_draws(cfg, draws=50, seed=3).values
    np.testing.assert_array_equal(model.predict_draws(cfg, draws=50, seed=3.0).values, three)
    np.testing.assert_array_equal(
        model.predict_draws(cfg, draws=50, seed=np.float64(3.0)).values, three
    )
    for seed in (True, 2.5, -1, float("nan")):
        with pytest.raises(InputError, match=r"seed must be a whole number >= 0, got ") as err:
            model.predict_draws(cfg, seed=seed)
        assert "to fix" in str(err.value)
