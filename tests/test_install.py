"""A non-editable install carries the embedded catalog and finds it from any directory."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import REPO

pytestmark = pytest.mark.slow

_NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "reports", ".hyp*"
)


def _build_wheel(tmp: Path) -> Path:
    """Build the project's wheel from a copy of the tree (the shared tree stays clean)."""
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=_NOT_SOURCES)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "wheel")]
    if importlib.util.find_spec("setuptools") and importlib.util.find_spec("wheel"):
        cmd.append("--no-build-isolation")  # build with what is installed: no download
    run = subprocess.run([*cmd, str(src)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    (wheel,) = (tmp / "wheel").glob("srifty_kit-*.whl")
    return wheel


def test_installed_wheel_loads_the_embedded_catalog_from_another_directory(tmp_path):
    wheel = _build_wheel(tmp_path)
    target = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    run = subprocess.run([*install, str(wheel)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import srifty_kit; "
        "from srifty_kit import catalog; "
        "print(srifty_kit.__file__); print(catalog.__file__); "
        "print(len(srifty_kit.load_catalog()))"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe, str(target)],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    package_file, catalog_file, rows = run.stdout.split()
    assert Path(package_file).is_relative_to(target)
    assert Path(catalog_file).is_relative_to(target)
    assert int(rows) >= 100
    assert (target / "srifty_kit" / "data" / "ec2_catalog_us-east-1.csv").is_file()
    assert (target / "srifty_kit" / "data" / "CATALOG_SOURCES.md").is_file()
