"""Notebook 03 runs headless under papermill and answers with a pick, a front and a reason."""

from __future__ import annotations

import warnings

import nbformat
import papermill
import pytest

from srifty_kit.model.estimator import StepTimeModel
from tests.builders import REPO, synthetic_measurements

NOTEBOOK = REPO / "notebooks" / "03_search_ec2.ipynb"
pytestmark = pytest.mark.slow


def test_notebook_parameters_are_the_questions_knobs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    names = {line.split("=")[0].strip() for line in tagged[0].source.splitlines() if "=" in line}
    assert {
        "model_path",
        "workload",
        "samples",
        "deadline_h",
        "budget_usd",
        "confidence",
        "objective",
        "spot",
        "hetero",
        "interactive",
    } <= names


def _text(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            parts.append(str(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def test_notebook_ranks_draws_the_front_and_explains_the_pick(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        StepTimeModel().fit(synthetic_measurements()).save(tmp_path / "model.json")
    executed = tmp_path / "03.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOK),
        str(executed),
        kernel_name="python3",
        cwd=str(tmp_path),
        parameters={
            "model_path": str(tmp_path / "model.json"),
            "workload": "resnet",
            "samples": 1.2e8,
            "reference_bsz": 256,
            "noise_scale": 4096.0,
            "local_bsz": [16, 32, 64],
            "deadline_h": 100.0,
            "max_nodes": 8,
            "interactive": False,
        },
        progress_bar=False,
    )
    nb = nbformat.read(executed, as_version=4)
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 1
    text = _text(nb)
    assert "meet the constraints" in text
    assert "Why not the cheapest per hour" in text or "also the cheapest" in text
    assert "time_hi_h" in text  # the ranked table and the front are shown


def test_notebook_shows_the_panel_when_interactive(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        StepTimeModel().fit(synthetic_measurements()).save(tmp_path / "model.json")
    executed = tmp_path / "03.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOK),
        str(executed),
        kernel_name="python3",
        cwd=str(tmp_path),
        parameters={
            "model_path": str(tmp_path / "model.json"),
            "workload": "resnet",
            "samples": 1.2e8,
            "reference_bsz": 256,
            "local_bsz": [16, 32, 64],
            "deadline_h": 100.0,
            "max_nodes": 8,
        },
        progress_bar=False,
    )
    nb = nbformat.read(executed, as_version=4)
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    widget = "application/vnd.jupyter.widget-view+json"
    assert any(widget in o.get("data", {}) for o in outputs)  # the panel, not static figures
    assert not any("image/png" in o.get("data", {}) for o in outputs)
    assert "Why not the cheapest per hour" in _text(nb) or "also the cheapest" in _text(nb)
