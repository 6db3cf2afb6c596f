"""evaluate() once, select() per deadline, budget and objective: what search() returns, without
predicting again."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from srifty_kit.catalog.query import load_catalog
from srifty_kit.decide.planner import OBJECTIVES, Constraints, Job, evaluate, search, select
from srifty_kit.errors import InputError
from srifty_kit.model.estimator import StepTimeModel

JOB = Job("resnet", samples=1.2e8, reference_bsz=256, noise_scale=4096, local_bsz=(16, 32, 64))
BASE = Constraints(max_nodes=8, spot=True, mixes=True)


# the module's fixtures are built once: hypothesis may reuse them across its examples
EXAMPLES = settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def assert_same_answer(fast, full) -> None:
    """Two search results say the same: counts, what was left out, ranked rows, front, why."""
    assert fast.n_feasible == full.n_feasible and fast.n_candidates == full.n_candidates
    assert fast.skipped == full.skipped
    pd.testing.assert_frame_equal(fast.ranked, full.ranked)
    pd.testing.assert_frame_equal(fast.pareto, full.pareto)
    assert fast.explanation == full.explanation


@pytest.fixture(scope="module")
def catalog() -> pd.DataFrame:
    full = load_catalog()
    keep = ("g4dn.12xlarge", "g6.12xlarge", "p4d.24xlarge", "g4dn.xlarge")
    return full[full["instance_type"].isin(keep)].reset_index(drop=True)


@pytest.fixture(scope="module")
def evaluated(model, catalog):
    return evaluate(model, catalog, JOB, BASE)


@EXAMPLES
@given(
    deadline=st.one_of(st.none(), st.floats(0.05, 200.0)),
    budget=st.one_of(st.none(), st.floats(5.0, 5000.0)),
    objective=st.sampled_from(OBJECTIVES),
)
def test_select_returns_what_search_returns(model, catalog, evaluated, deadline, budget, objective):
    constraints = replace(BASE, deadline_h=deadline, budget_usd=budget)
    fast = select(evaluated, constraints, objective=objective, top=7)
    full = search(model, catalog, JOB, constraints, objective=objective, top=7)
    assert_same_answer(fast, full)


def test_select_never_predicts_again(evaluated, monkeypatch):
    calls = []
    real = StepTimeModel.predict_arrays

    def counted(self, *args, **kwargs):
        calls.append(args)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(StepTimeModel, "predict_arrays", counted)
    for deadline in (1.0, 5.0, 50.0):
        select(evaluated, replace(BASE, deadline_h=deadline), objective="time")
    assert calls == []


@pytest.mark.parametrize(
    "change", [{"spot": False}, {"confidence": 0.8}, {"max_nodes": 4}, {"mixes": False}]
)
def test_select_refuses_constraints_that_change_the_candidates(evaluated, change):
    with pytest.raises(InputError, match="evaluate"):
        select(evaluated, replace(BASE, **change))


ALONE = replace(BASE, mixes=False)


@pytest.fixture(scope="module")
def alone(model, catalog):
    return evaluate(model, catalog, JOB, ALONE)


@EXAMPLES
@given(
    max_nodes=st.integers(1, ALONE.max_nodes),
    deadline=st.one_of(st.none(), st.floats(0.05, 200.0)),
    objective=st.sampled_from(OBJECTIVES),
)
def test_a_lower_node_limit_selects_what_a_search_at_that_limit_returns(
    model, catalog, alone, max_nodes, deadline, objective
):
    # the panel's node slider narrows one evaluation instead of predicting every candidate
    # again: the answer must be the one a search at that limit gives, row for row
    constraints = replace(ALONE, max_nodes=max_nodes, deadline_h=deadline)
    fast = select(alone, constraints, objective=objective, top=7)
    full = search(model, catalog, JOB, constraints, objective=objective, top=7)
    assert_same_answer(fast, full)
    assert (fast.ranked["num_nodes"] <= max_nodes).all()


@EXAMPLES
@given(
    confidence=st.sampled_from([0.5, 0.66, 0.8, 0.9, 0.95, 0.99]),
    spot=st.booleans(),
    work=st.sampled_from([{}, {"samples": 5e8}, {"noise_scale": None}, {"noise_scale": 1e5}]),
    max_nodes=st.integers(1, ALONE.max_nodes),
    deadline=st.one_of(st.none(), st.floats(0.05, 200.0)),
    objective=st.sampled_from(OBJECTIVES),
)
def test_another_confidence_pricing_or_work_is_priced_from_the_kept_predictions(
    model, catalog, alone, confidence, spot, work, max_nodes, deadline, objective, monkeypatch
):
    # the panel's confidence, spot, samples and noise controls price the kept predictions
    # again instead of predicting every candidate again: the answer must be a new search's
    constraints = replace(
        ALONE, confidence=confidence, spot=spot, max_nodes=max_nodes, deadline_h=deadline
    )
    job = replace(JOB, **work)
    full = search(model, catalog, job, constraints, objective=objective, top=7)
    with monkeypatch.context() as m:
        m.setattr(StepTimeModel, "predict_belief", None)  # any prediction would fail here
        again = alone.at(constraints, job)
        fast = select(again, constraints, objective=objective, top=7)
    assert_same_answer(fast, full)


def test_a_narrowed_evaluation_still_reaches_the_node_limit_it_predicted(model, catalog, alone):
    # the panel moves its node slider down and up again through evaluations made by ``at``
    low = alone.at(replace(ALONE, max_nodes=2))
    assert 0 < len(low) < len(alone)
    back = low.at(ALONE)
    assert back is not None and len(back) == len(alone)
    fast = select(back, replace(ALONE, deadline_h=5.0))
    full = search(model, catalog, JOB, replace(ALONE, deadline_h=5.0))
    pd.testing.assert_frame_equal(fast.ranked, full.ranked)


@pytest.mark.parametrize(
    "change",
    [{"mixes": True}, {"max_nodes": ALONE.max_nodes + 1}, {"families": ("p4d",)}],
)
def test_what_changes_the_candidates_themselves_is_evaluated_again(alone, change):
    assert alone.at(replace(ALONE, **change)) is None


@pytest.mark.parametrize(
    "change", [{"local_bsz": (16, 32)}, {"global_bsz_max": 256}, {"memory_per_sample_gib": 0.5}]
)
def test_a_job_that_enumerates_other_configurations_is_evaluated_again(alone, change):
    assert alone.at(ALONE, replace(JOB, **change)) is None


def test_only_a_lower_node_limit_of_an_enumeration_without_mixes_is_narrowed(model, catalog, alone):
    with pytest.raises(InputError, match="evaluate"):
        select(alone, replace(ALONE, max_nodes=ALONE.max_nodes + 1))
    listed = search(model, catalog, JOB, ALONE).ranked.head(5)
    given_list = evaluate(model, catalog, JOB, ALONE, candidates=listed)
    # a list's rows over the limit are said in ``skipped``: only a new evaluate says so
    with pytest.raises(InputError, match="evaluate"):
        select(given_list, replace(ALONE, max_nodes=1))
    assert given_list.at(replace(ALONE, confidence=0.8)) is None
    mixed = evaluate(model, catalog, JOB, replace(ALONE, mixes=True))
    # mixes are built from the best single types at the confidence: a new one may build others
    assert mixed.at(replace(ALONE, mixes=True, confidence=0.8)) is None


def test_select_checks_the_objective_and_top_like_search(evaluated):
    with pytest.raises(InputError, match="did you mean"):
        select(evaluated, objective="costs")
    with pytest.raises(InputError, match="top"):
        select(evaluated, top=0)


def test_top_counts_numpys_ints_and_refuses_a_bool(evaluated):
    # top=np.int64(3) (a count read from a table) was refused as not a whole number, and
    # top=True taken as one row
    assert len(select(evaluated, top=np.int64(3)).ranked) == 3
    with pytest.raises(InputError, match="top must be a whole number >= 1, got True"):
        select(evaluated, top=True)


def test_searching_with_an_unfitted_model_raises_scikit_learns_not_fitted_error(catalog):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="not fitted") as err:
        search(StepTimeModel(), catalog, JOB, BASE)
    assert isinstance(err.value, InputError)
