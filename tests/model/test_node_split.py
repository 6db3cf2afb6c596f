"""Notebook 02's split: fit up to a node count, score above it, and say which it scored and
what its numbers mean."""

from __future__ import annotations

import pandas as pd
import pytest

from srifty_kit import InputError, StepTimeModel
from srifty_kit.model.holdout import fold_error_line, middle_batch, score_line, split_by_nodes
from tests.builders import configs, measurements


def _table(nodes=(1, 2, 3)) -> pd.DataFrame:
    return pd.DataFrame(
        [{"model": "m", "num_nodes": k, "num_workers": k, "local_bsz": 8} for k in nodes]
    )


def test_default_split_holds_out_the_largest_node_count():
    split = split_by_nodes(_table(), "m")
    assert split.held_out and split.cut == 2
    assert list(split.fit["num_nodes"]) == [1, 2] and list(split.scored["num_nodes"]) == [3]


@pytest.mark.parametrize("nodes, cut", [((1, 1), None), ((1, 2, 3), 3), ((1, 2, 3), 7)])
def test_nothing_above_the_cut_scores_the_fitted_rows_and_says_so(nodes, cut):
    split = split_by_nodes(_table(nodes), "m", cut)
    assert not split.held_out and split.scored.equals(split.fit)
    pred = split.scored.assign(step_time_s=1.0, step_time_lo=0.9, step_time_hi=1.1, m_s=1.0)
    line = score_line(pred, split, 0.9, "m_s")
    assert not line.startswith("held-out") and "nothing held out" in line
    assert "in-sample MAPE 0.0%; 100% of steps inside the 90% interval" in line


@pytest.mark.parametrize(
    "model, cut, says",
    [
        ("n", None, "no rows of training model 'n'"),
        ("m", 0, "fit_max_nodes 0 is not a whole number of nodes"),
        ("m", 1.5, "fit_max_nodes 1.5 is not a whole number of nodes"),
        ("m", "2", "fit_max_nodes '2' is not a whole number of nodes"),
    ],
)
def test_what_cannot_be_split_is_one_line_naming_the_fix(model, cut, says):
    with pytest.raises(InputError, match=says):
        split_by_nodes(_table(), model, cut, source="t.csv")


def test_a_cut_below_every_measured_node_count_names_the_fewest():
    with pytest.raises(InputError, match="leaves nothing to fit.*2 nodes at the fewest"):
        split_by_nodes(_table((2, 3)), "m", 1)


def test_the_breakdown_is_drawn_at_a_batch_that_was_run():
    rows = pd.DataFrame({"local_bsz": [8] * 5 + [16] * 5, "num_workers": 1})
    assert set(middle_batch(rows)["local_bsz"]) == {8}
    rows = pd.DataFrame({"local_bsz": [4] * 3 + [8] * 2 + [16] * 9})
    assert set(middle_batch(rows)["local_bsz"]) == {16}


@pytest.fixture(scope="module")
def fitted_beyond_two_nodes():
    """A model fitted on synthetic steps up to 2 nodes, its predictions at 3."""
    table = measurements(3)
    split = split_by_nodes(table, "resnet", 2)
    with pytest.warns(UserWarning, match="one multi-node count"):
        model = StepTimeModel().fit(split.fit)
    return model, model.predict(configs(split.scored))


def test_held_out_error_is_said_as_a_percent_with_what_it_measures(fitted_beyond_two_nodes):
    model, _ = fitted_beyond_two_nodes
    error = model.summary()["held_out_error"].iloc[0]
    line = fold_error_line(model.summary())
    assert f"held_out_error {error:.2f} = {error:.0%}, the typical miss" in line
    assert "exp(mean |log(measured / predicted)|) - 1" in line and "not the MAPE" in line
    one_node = measurements(1).query("num_nodes == 1 and num_workers == 1")
    with pytest.warns(UserWarning, match="prior width used"):
        alone = StepTimeModel().fit(one_node)
    assert "nothing could be held out while fitting" in fold_error_line(alone.summary())
