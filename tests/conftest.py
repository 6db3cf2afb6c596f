"""Shared fixtures: the repository root and the team's reference data in ../shared."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from srifty_kit.tables.reference import reference_measurements as _reference_measurements
from srifty_kit.tables.reference import shared_dir

REPO = Path(__file__).resolve().parents[1]
# the console script installed beside this interpreter: what a user runs
SRIFTY = str(Path(sys.executable).with_name("srifty"))


def run_srifty(*args: str, cwd=None, timeout: float = 300, env=None) -> subprocess.CompletedProcess:
    """Run the installed ``srifty`` console script as a user would, capturing its output."""
    return subprocess.run(
        [SRIFTY, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
    )


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
