"""SearchPanel refuses what it cannot show before making a widget: one InputError, no TraitError."""

from __future__ import annotations

import pytest

from srifty_kit.catalog.query import load_catalog
from srifty_kit.decide.planner import Constraints, Job
from srifty_kit.errors import InputError
from srifty_kit.present.widgets import SearchPanel

JOB = Job("resnet", samples=1.2e8, reference_bsz=256, noise_scale=4096, local_bsz=(16, 32, 64))


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"job": Job("resnett", samples=1e8)}, "workload 'resnett' is not in the model"),
        ({"objective": "cheap"}, "unknown objective 'cheap'"),
        ({"constraints": Constraints(families="g5x")}, "unknown instance family 'g5x'"),
        ({"constraints": {"max_nodes": 8}}, "constraints must be Constraints"),
        ({"job": "resnet"}, "job must be a Job"),
        ({"top": 0}, "top must be a whole number"),
        ({"top": True}, "top must be a whole number"),
        ({"noise_scales": {"resnett": 4096}}, "noise_scales names workload 'resnett'"),
        ({"noise_scales": {"resnet": -1.0}}, r"noise_scales\['resnet'\] must be a number > 0"),
    ],
    ids=[
        "workload",
        "objective",
        "family",
        "constraints-dict",
        "job-str",
        "top",
        "top-bool",
        "noise",
        "noise<0",
    ],
)
def test_a_panel_argument_it_cannot_show_is_one_input_error(model, change, words):
    args = {"job": JOB, "constraints": Constraints(max_nodes=8), "objective": "cost", "top": 10}
    args.update(change)
    with pytest.raises(InputError, match=words) as err:
        SearchPanel(model, load_catalog(), args.pop("job"), args.pop("constraints"), **args)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("catalog", "words"),
    [("catalog.csv", "catalog must be a table"), ({"g5": 1}, "catalog must be a table")],
    ids=["path", "dict"],
)
def test_a_panel_catalog_that_is_no_table_is_one_input_error(model, catalog, words):
    # a path reached search_choices as a string: "TypeError: string indices must be integers"
    with pytest.raises(InputError, match=words) as err:
        SearchPanel(model, catalog, JOB)
    assert "\n" not in str(err.value) and "to fix" in str(err.value)


@pytest.mark.parametrize("model", [None, "model.json"], ids=["none", "path"])
def test_a_panel_without_a_fitted_model_says_so(model):
    with pytest.raises(InputError, match="needs a fitted StepTimeModel"):
        SearchPanel(model, load_catalog(), JOB)


def test_a_family_given_as_one_string_is_one_family_in_the_panel(model):
    panel = SearchPanel(model, load_catalog(), JOB, Constraints(families="g4dn", max_nodes=4))
    assert panel.controls["families"].value == ("g4dn",)
