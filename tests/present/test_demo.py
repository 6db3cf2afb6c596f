"""`srifty demo` runs the whole pipeline here: profile, fit, search, HTML report."""

from __future__ import annotations

import subprocess

import pandas as pd
import pytest

from srifty_kit.model.estimator import StepTimeModel
from tests.builders import SRIFTY

pytestmark = pytest.mark.slow


def test_demo_profiles_fits_searches_and_writes_a_report(tmp_path):
    srifty = SRIFTY
    out = tmp_path / "demo"
    done = subprocess.run(
        [srifty, "demo", "--out", str(out), "--seconds", "6"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # the pick, and how it compares with the cheapest instance per hour (or that it is it)
    assert done.stdout.startswith("Pick") and "cheapest" in done.stdout
    measured = pd.read_csv(out / "measurements.csv")
    # one process at several batch sizes, and a real 2-process DDP run
    assert measured["local_bsz"].nunique() >= 2
    assert set(measured["num_workers"]) >= {1, 2}
    assert (measured["step_time_s"] > 0).all()
    model = StepTimeModel.load(out / "model.json")
    assert "mlp" in model.models_
    html = (out / "search_ec2.html").read_text()
    # a static report (the panel needs a live kernel): the ranked table and the figure are in it
    assert "<table" in html and "data:image/png;base64" in html
    assert "Traceback" not in html
    # the reader gets the answer, not the code that computed it
    assert "from srifty_kit import" not in html and "import warnings" not in html
    index = out / "index.html"
    assert f"open: {index}" in done.stdout
    links = index.read_text()
    assert "search_ec2.html" in links and "weekly_cost" in links
