"""StepTimeModel's arguments as a notebook gives them: a value that cannot be is refused in
one line naming it and the fix; a number of numpy's kind is a number."""

from __future__ import annotations

import warnings

import pytest

from srifty_kit import InputError, StepTimeModel
from tests.builders import measurements


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
