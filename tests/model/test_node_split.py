"""Notebook 02's split: fit up to a node count, score above it, and say which it scored and
what its numbers mean."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from srifty_kit import InputError, StepTimeModel
from srifty_kit.model.holdout import (
    fold_error_line,
    interval_line,
    middle_batch,
    score_line,
    split_by_nodes,
)
from srifty_kit.tables.files import read_table
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


def _reach(line: str) -> tuple[int, int]:
    found = re.search(r"interval reaches (\d+)% below the point and (\d+)% above it", line)
    assert found, line
    return int(found.group(1)), int(found.group(2))


def test_interval_line_reads_its_reach_from_the_bounds_and_its_lean_from_the_folds(
    fitted_beyond_two_nodes,
):
    model, pred = fitted_beyond_two_nodes
    line = interval_line(model, pred, 0.9)
    below = np.median(1 - pred["step_time_lo"] / pred["step_time_s"])
    above = np.median(pred["step_time_hi"] / pred["step_time_s"] - 1)
    assert _reach(line) == (round(100 * below), round(100 * above))
    scores = model.groups_[("resnet", "g4dn.12xlarge")].spread.scores
    faster = np.mean(scores < 0)
    assert f"{faster:.0%} of those {scores.size} steps ran faster than predicted" in line
    # the same fit, its bounds pulled down: the line calls the lower side wider
    lopsided = pred.assign(step_time_lo=pred["step_time_s"] * (1 - 2 * above))
    assert "lopsided, wider below even in log step time" in interval_line(model, lopsided, 0.9)
    # one factor each way (1.3) reads +30% and -23%: said to be even in log time, not lopsided
    even = pred.assign(
        step_time_lo=pred["step_time_s"] / 1.3, step_time_hi=pred["step_time_s"] * 1.3
    )
    line = interval_line(model, even, 0.9)
    assert _reach(line) == (23, 30) and "even in log step time" in line
    assert "lopsided" not in line


def test_reference_interval_is_said_to_lean_the_way_its_fold_errors_do(reference_measurements):
    split = split_by_nodes(read_table(reference_measurements), "bert")
    with pytest.warns(UserWarning):  # the reference fit warns of its in-sample coverage
        model = StepTimeModel(level=0.9).fit(split.fit)
    line = interval_line(model, model.predict(configs(split.scored)), 0.9)
    below, above = _reach(line)
    faster = int(re.search(r"(\d+)% of those [\d,]+ steps ran faster", line).group(1))
    # the reference's interval leans below in log time too: the side most of the fit's own
    # fold errors fell on, and the line says both
    assert -np.log(1 - below / 100) > 1.25 * np.log(1 + above / 100), line
    assert "lopsided, wider below even in log step time" in line and faster > 50, line
