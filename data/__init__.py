"""Embedded defaults shipped with srifty_kit (package data), and where the team's reference
data lives when a source checkout sits beside it."""

from __future__ import annotations

import os
from pathlib import Path


def shared_dir() -> Path:
    """The team's reference folder: $SRIFTY_SHARED, else ../shared beside the source checkout."""
    return Path(os.environ.get("SRIFTY_SHARED", Path(__file__).resolve().parents[2] / "shared"))


def reference_measurements() -> Path:
    """Real EC2 g4dn.12xlarge step times in the shared reference (the file may be absent)."""
    return shared_dir() / "reference" / "measurements" / "aws_g4dn12xlarge_placements.csv"
