"""Notebook 03 runs headless under papermill and answers with a pick, a front and a reason."""

from __future__ import annotations

import re

import pytest

from tests.builders import parameter_names, run_notebook

pytestmark = pytest.mark.slow


def test_notebook_parameters_are_the_questions_knobs():
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
    } <= parameter_names("03_search_ec2")


def _text(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            parts.append(str(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


SMALL = {  # the question both runs ask
    "workload": "resnet",
    "samples": 1.2e8,
    "reference_bsz": 256,
    "local_bsz": [16, 32, 64],
    "deadline_h": 100.0,
    "max_nodes": 8,
}


def test_notebook_ranks_draws_the_front_and_explains_the_pick(tmp_path, model_file):
    nb = run_notebook(
        "03_search_ec2",
        tmp_path,
        model_path=str(model_file),
        noise_scale=4096.0,
        interactive=False,
        **SMALL,
    )
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 1
    text = _text(nb)
    assert "meet the constraints" in text
    assert "Why not the cheapest per hour" in text or "also the cheapest" in text
    tables = [
        o["data"]["text/html"]
        for c in nb.cells
        for o in c.get("outputs", [])
        if "time_hi_h" in o.get("data", {}).get("text/html", "")
    ]
    assert len(tables) == 2  # the ranked table and the front
    ranked = tables[0]
    assert "p_meet" in ranked and re.search(r">\$[\d,]+\.\d\d<", ranked)  # dollars to the cent
    assert re.search(r">\d{1,3}%<", ranked)  # the probability of meeting, in percent
    assert not re.search(r"\d\.\d{5,}", ranked)  # no raw floats for a reader to squint at


def test_notebook_shows_the_panel_when_interactive(tmp_path, model_file):
    nb = run_notebook("03_search_ec2", tmp_path, model_path=str(model_file), **SMALL)
    outputs = [o for c in nb.cells for o in c.get("outputs", [])]
    widget = "application/vnd.jupyter.widget-view+json"
    assert any(widget in o.get("data", {}) for o in outputs)  # the panel, not static figures
    assert not any("image/png" in o.get("data", {}) for o in outputs)
    assert "Why not the cheapest per hour" in _text(nb) or "also the cheapest" in _text(nb)


def test_the_probes_cell_answers_the_question_the_panel_asks_now(model_file):
    """Run again after the panel's controls moved, the cell suggests for what the panel shows,
    not for the question the panel was first shown with."""
    import contextlib
    import io

    import nbformat
    import pandas as pd

    from srifty_kit.decide.probes import suggest_probes
    from tests.builders import REPO

    nb = nbformat.read(REPO / "notebooks" / "03_search_ec2.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    probes_cell = next(c for c in code if "probes" in c.metadata.get("tags", []))
    ns: dict = {}
    exec(code[0].source, ns)  # the parameters, then this question's values
    ns.update(model_path=str(model_file), noise_scale=4096.0, probe_runs=1, **SMALL)
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in code[1:]:
            if cell is not probes_cell:
                exec(cell.source, ns)
        panel, shown = ns["panel"], ns["result"]
        panel.controls["max_nodes"].value = 2  # the user narrows the question
        assert panel.result is not shown
        exec(probes_cell.source, ns)
    pd.testing.assert_frame_equal(ns["probes"], suggest_probes(panel.result, k=1))
    assert not ns["probes"].equals(suggest_probes(shown, k=1))
