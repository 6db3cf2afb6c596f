"""Shared fixtures: the team's reference data in ../shared (skipped with the reason when absent).

Builders and helpers live in tests/builders.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from srifty_kit.tables.reference import reference_measurements as _reference_measurements
from srifty_kit.tables.reference import shared_dir


@pytest.fixture
def reference_measurements() -> Path:
    """Real EC2 g4dn.12xlarge step times; the test is skipped when ../shared is absent."""
    path = _reference_measurements()
    if not path.is_file():
        pytest.skip(f"reference measurements not found at {path} (set SRIFTY_SHARED)")
    return path


@pytest.fixture
def reference_ec2() -> Path:
    """EC2 facts assembled from public sources; the test is skipped when ../shared is absent."""
    path = shared_dir() / "reference" / "ec2" / "ec2_reference.csv"
    if not path.is_file():
        pytest.skip(f"EC2 reference not found at {path} (set SRIFTY_SHARED)")
    return path


@pytest.fixture(scope="session")
def model():
    """A StepTimeModel fitted on ``builders.synthetic_measurements()`` (two 4-GPU types, 1-2
    nodes), shared read-only by the decide and present tests."""
    import warnings

    from srifty_kit import StepTimeModel
    from tests.builders import synthetic_measurements

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return StepTimeModel().fit(synthetic_measurements())


@pytest.fixture(scope="session")
def model_file(model, tmp_path_factory) -> Path:
    """The session ``model`` saved once, for notebooks and commands that read a model file."""
    path = tmp_path_factory.mktemp("model") / "model.json"
    model.save(path)
    return path
