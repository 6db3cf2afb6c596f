"""Where the measurements a session starts from live: the team's shared reference, else the
packaged sample profile."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from srifty_kit.errors import InputError


def shared_dir() -> Path:
    """The team's reference folder: $SRIFTY_SHARED, else ../shared beside the source checkout."""
    return Path(os.environ.get("SRIFTY_SHARED", Path(__file__).resolve().parents[3] / "shared"))


def reference_measurements() -> Path:
    """Real EC2 g4dn.12xlarge step times in the shared reference (the file may be absent)."""
    return shared_dir() / "reference" / "measurements" / "aws_g4dn12xlarge_placements.csv"


def packaged(name: str) -> Path:
    """A file shipped in ``srifty_kit.data`` (the top-level data/ folder of a checkout)."""
    return Path(str(resources.files("srifty_kit.data").joinpath(name)))


def default_measurements() -> Path:
    """The measurements notebooks start from.

    Returns:
        The shared EC2 reference when present (set SRIFTY_SHARED or keep ../shared beside the
        repository), else the packaged DDP sample profile (world sizes 1, 2, 4: the packaged
        table that exercises every term).

    Raises:
        InputError: neither is present.
    """
    reference = reference_measurements()
    if reference.is_file():
        return reference
    sample = packaged("sample_profile_dist.csv")
    if sample.is_file():
        return sample
    raise InputError(
        "no default measurements: neither the shared reference nor a packaged "
        "sample profile is present",
        fix="pass a measurements file path",
    )
