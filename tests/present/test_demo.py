"""`srifty demo` runs the whole pipeline here: profile, fit, search, HTML report."""

from __future__ import annotations

import subprocess

import pandas as pd
import pytest

from srifty_kit.model.estimator import StepTimeModel
from tests.builders import SRIFTY

pytestmark = pytest.mark.slow


def _demo(out, seconds: str, timeout: int) -> subprocess.CompletedProcess:
    """`srifty demo --out OUT --seconds S`, run from OUT's parent."""
    return subprocess.run(
        [SRIFTY, "demo", "--out", str(out), "--seconds", seconds],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=out.parent,
    )


def test_demo_profiles_fits_searches_and_writes_a_report(tmp_path):
    out = tmp_path / "demo"
    done = _demo(out, "6", 600)
    assert done.returncode == 0, done.stderr[-2000:]
    # its short budget is the demo's choice: no advice to profile for an hour
    assert "time budget ran out" not in done.stderr
    # the pick, and how it compares with the cheapest instance per hour (or that it is it)
    assert done.stdout.startswith("Pick") and "cheapest" in done.stdout
    measured = pd.read_csv(out / "measurements.csv")
    # one process at several batch sizes, and a real 2-process DDP run
    assert measured["local_bsz"].nunique() >= 2
    assert set(measured["num_workers"]) >= {1, 2}
    assert (measured["step_time_s"] > 0).all()
    model = StepTimeModel.load(out / "model.json")
    assert "mlp" in model.models_
    # a GPU is reached through the profile's op graph, not through this CPU's step time
    gpu = pd.DataFrame(
        {"model": ["mlp"], "instance_type": ["g4dn.xlarge"], "num_nodes": [1], "num_workers": [1]}
    ).assign(local_bsz=64)
    assert model.explain(gpu)["route"].iloc[0] == "roofline (op graph alone)"
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


USERS = {
    "measurements.csv": b"model,step_time_s\nmine,0.1\n",
    "model.json": b'{"mine": true}',
    "index.html": b"<p>my index</p>",
    "notes.txt": b"kept",
}


def test_demo_refuses_a_folder_whose_files_it_would_replace(tmp_path):
    out = tmp_path / "work"
    out.mkdir()
    for name, data in USERS.items():
        (out / name).write_bytes(data)
    done = _demo(out, "2", 120)
    assert done.returncode == 2, done.stderr[-2000:]
    line = done.stderr.strip()
    assert "\n" not in line and "would replace: measurements.csv, model.json, index.html" in line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == USERS  # nothing new, nothing lost


def test_a_folder_an_earlier_demo_wrote_is_the_demos_to_replace(tmp_path):
    from srifty_kit.present.demo import DEMO_MARK, INDEX_TITLE, check_demo_folder

    marked, older = tmp_path / "marked", tmp_path / "older"
    for folder in (marked, older):
        folder.mkdir()
        (folder / "model.json").write_text("{}")
    (marked / DEMO_MARK).write_text("")
    (older / "index.html").write_text(f"<html><head>{INDEX_TITLE}</head></html>")
    check_demo_folder(marked)
    check_demo_folder(older)
    check_demo_folder(tmp_path / "new")
