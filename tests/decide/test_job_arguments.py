"""Job and Constraints check their arguments where they are given: one InputError naming it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from srifty_kit.catalog.query import load_catalog
from srifty_kit.decide.job import Constraints, Job
from srifty_kit.errors import InputError
from srifty_kit.model.estimator import StepTimeModel


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"samples": "5e7"}, "samples must be a finite number > 0, got '5e7'"),
        ({"samples": float("nan")}, "samples must be a finite number"),
        ({"samples": True}, "samples must be a finite number"),
        ({"samples": -1.0}, "samples must be > 0"),
        ({"samples": 1e6, "reference_bsz": 2.5}, "reference_bsz must be a whole number"),
        ({"samples": 1e6, "noise_scale": "big"}, "noise_scale must be a finite number"),
        ({"samples": 1e6, "local_bsz": "16"}, "local_bsz must list whole batches"),
        ({"samples": 1e6, "local_bsz": (8, 0)}, "found 0"),
        ({"samples": 1e6, "local_bsz": (8, 2.5)}, "found 2.5"),
        ({"samples": 1e6, "spot_fallback_after": 1.5}, "spot_fallback_after must be a whole"),
        ({"model": 3, "samples": 1e6}, "model must be the training model's name"),
    ],
)
def test_a_job_argument_that_cannot_be_is_refused_naming_it(kwargs, words):
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)")) as err:
        Job(**{"model": "bert", **kwargs})
    assert "to fix" in str(err.value)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"max_nodes": 2.5}, "max_nodes must be a whole number"),
        ({"max_nodes": "16"}, "max_nodes must be a whole number"),
        ({"confidence": "0.9"}, "confidence must be a finite number"),
        ({"vcpu_quota": 1.5}, "vcpu_quota must be a whole number"),
        ({"deadline_h": "10"}, "deadline_h must be a finite number"),
        ({"budget_usd": float("inf")}, "budget_usd must be a finite number"),
        ({"families": ["g5", ""]}, "families must list names"),
        ({"families": 5}, "families must be a name or a list of names"),
        ({"instance_types": ()}, "instance_types lists no name"),
        ({"spot": "yes"}, "spot must be True or False"),
    ],
)
def test_a_constraint_that_cannot_be_is_refused_naming_it(kwargs, words):
    with pytest.raises(InputError, match=words):
        Constraints(**kwargs)


def test_one_string_is_one_name_never_its_letters():
    c = Constraints(families="g4dn", instance_types="p4d.24xlarge", regions="us-east-1")
    assert c.families == ("g4dn",) and c.instance_types == ("p4d.24xlarge",)
    assert c.regions == ("us-east-1",)
    assert Constraints(families=["g5", " p4d "]).families == ("g5", "p4d")


def test_numpy_numbers_are_plain_numbers_and_one_batch_is_a_grid_of_one():
    job = Job("bert", samples=np.float64(5e7), local_bsz=np.int64(32), reference_bsz=np.int64(64))
    assert job.samples == 5e7 and type(job.samples) is float and job.local_bsz == (32,)
    assert type(job.reference_bsz) is int
    assert Constraints(max_nodes=np.int64(4)).max_nodes == 4


def test_model_memory_alone_keeps_only_the_gpus_that_hold_it():
    job = Job("bert", samples=1e6, model_memory_gib=20.0)
    assert job.max_local_bsz(40.0) == np.inf and job.max_local_bsz(16.0) == 0
    assert Job("bert", samples=1e6, model_memory_gib=1e6).max_local_bsz(80.0) == 0
    assert Job("bert", samples=1e6).max_local_bsz(16.0) == np.inf


@pytest.mark.parametrize("given", ["file.csv", [1, 2, 3]], ids=["path", "list"])
def test_fit_takes_a_dataframe_and_says_how_to_read_a_file(given):
    with pytest.raises(InputError, match="expected a pandas DataFrame") as err:
        StepTimeModel().fit(given)
    assert "read_table" in str(err.value)


def test_a_file_name_given_as_the_catalog_region_says_to_pass_it_as_path(tmp_path):
    load_catalog().to_csv(tmp_path / "x.csv", index=False)
    with pytest.raises(InputError, match=r"did you mean path='.*x.csv'"):
        load_catalog(str(tmp_path / "x.csv"))
    with pytest.raises(InputError, match="names a file"):
        load_catalog("x.csv")
    assert len(load_catalog(path=tmp_path / "x.csv", region=None)) == len(load_catalog())
    assert isinstance(load_catalog(), pd.DataFrame)


def test_search_arguments_of_the_wrong_kind_are_named_in_one_line():
    import warnings

    from srifty_kit.decide.planner import search
    from tests.builders import measurements

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(measurements(1))
    job, within = Job("resnet", samples=1e8), Constraints(deadline_h=10)
    catalog = load_catalog()
    for args, said in (
        ((model, catalog, "resnet", within), "job must be a Job, got str"),
        ((model, catalog, within, job), "job must be a Job, got Constraints"),
        ((model, catalog, job, {"deadline_h": 10}), "constraints must be Constraints"),
        (("model.json", catalog, job, within), "StepTimeModel.load(path)"),
        ((model, "catalog.csv", job, within), "catalog must be a table"),
    ):
        with pytest.raises(InputError) as refused:
            search(*args)
        assert said in str(refused.value) and "\n" not in str(refused.value)


def test_a_checkpoint_is_written_at_gp3s_baseline_125_mib_a_second():
    """The write speed is EBS gp3's baseline as AWS states it, 125 MiB/s (0.131 GB/s), not
    0.125 GB/s (5% slower): a 125 MiB checkpoint takes one second, 10 GB 76.3 s."""
    mib = 2**20 / 1e9  # GB
    assert Job("m", samples=1, checkpoint_gb=125 * mib).checkpoint_write_h * 3600 == pytest.approx(
        1.0
    )
    assert Job("m", samples=1, checkpoint_gb=10).checkpoint_write_h * 3600 == pytest.approx(
        76.29, abs=0.01
    )
