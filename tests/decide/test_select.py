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


@pytest.fixture(scope="module")
def catalog() -> pd.DataFrame:
    full = load_catalog()
    keep = ("g4dn.12xlarge", "g6.12xlarge", "p4d.24xlarge", "g4dn.xlarge")
    return full[full["instance_type"].isin(keep)].reset_index(drop=True)


@pytest.fixture(scope="module")
def evaluated(model, catalog):
    return evaluate(model, catalog, JOB, BASE)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    deadline=st.one_of(st.none(), st.floats(0.05, 200.0)),
    budget=st.one_of(st.none(), st.floats(5.0, 5000.0)),
    objective=st.sampled_from(OBJECTIVES),
)
def test_select_returns_what_search_returns(model, catalog, evaluated, deadline, budget, objective):
    constraints = replace(BASE, deadline_h=deadline, budget_usd=budget)
    fast = select(evaluated, constraints, objective=objective, top=7)
    full = search(model, catalog, JOB, constraints, objective=objective, top=7)
    assert fast.n_feasible == full.n_feasible and fast.n_candidates == full.n_candidates
    pd.testing.assert_frame_equal(fast.ranked, full.ranked)
    pd.testing.assert_frame_equal(fast.pareto, full.pareto)
    assert fast.explanation == full.explanation


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
