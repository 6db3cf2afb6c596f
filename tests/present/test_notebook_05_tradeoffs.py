"""Notebook 05 runs headless under papermill: four lessons, each answering its question."""

from __future__ import annotations

import re

import nbformat
import pytest

from tests.builders import REPO, parameter_names, run_notebook

NOTEBOOK = REPO / "notebooks" / "05_tradeoffs.ipynb"
pytestmark = pytest.mark.slow
SMALL = {
    "samples": 1.2e8,
    "reference_bsz": 256,
    "noise_scale": 4096.0,
    "local_bsz": 32,
    "runs": 500,
}


@pytest.fixture
def run(tmp_path, model_file):
    """Notebook 05 on the session model, the SMALL question and the given parameters."""
    return lambda **parameters: run_notebook(
        "05_tradeoffs", tmp_path, model_path=str(model_file), **SMALL, **parameters
    )


def _texts(nb) -> list[str]:
    return ["".join(o.get("text", "") for o in c.get("outputs", [])) for c in nb.cells]


def test_notebook_has_its_knobs_and_four_lessons_with_a_question_each():
    names = parameter_names("05_tradeoffs")
    assert {"model_path", "workload", "interactive", "runs", "deadline_h"} <= names
    nb = nbformat.read(NOTEBOOK, as_version=4)
    lessons = [c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("## ")]
    assert len(lessons) == 4
    assert all("**Question:**" in c.source for c in lessons)


def test_each_lesson_answers_its_question_in_numbers(run):
    out = "\n".join(_texts(run(interactive=False)))
    # (a) the cheapest and fastest worker counts at two noise scales
    answers_a = re.findall(r"noise scale moved to ([\d.]+):", out)
    assert len(answers_a) == 2 and re.search(r"(Cheapest|Cheapest and fastest) at \d+ workers", out)
    # (b) expected cost, spread and deadline risk, at a second checkpoint interval
    assert "checkpoint interval moved to" in out and re.search(r"\d+\.\d% of spot runs miss", out)
    # (c) the controller settles, then re-settles after worker 0 slows down
    assert re.search(r"settles by step \d+", out) and re.search(r"re-settles by step \d+", out)
    # (d) both picks and how often each misses, at three deadlines
    assert len(re.findall(r"Judged by the upper end", out)) == 3
    assert re.search(r"misses the deadline in [\d.]+% of 500 simulated runs", out)
    assert "Traceback" not in out


def test_interactive_shows_four_panels(run):
    nb = run(interactive=True)
    widget = "application/vnd.jupyter.widget-view+json"
    panels = [o for c in nb.cells for o in c.get("outputs", []) if widget in o.get("data", {})]
    assert len(panels) == 4
