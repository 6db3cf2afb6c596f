"""Shared fixtures: the repository root and the team's reference data in ../shared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """The shared reference folder: $SRIFTY_SHARED, else ../shared beside the repository."""
    return Path(os.environ.get("SRIFTY_SHARED", REPO.parent / "shared"))


@pytest.fixture
def reference_measurements() -> Path:
    """Real EC2 g4dn.12xlarge step times; the test is skipped when ../shared is absent."""
    path = shared_dir() / "reference" / "measurements" / "aws_g4dn12xlarge_placements.csv"
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
