"""Notebook 01 runs headless under papermill, shows how the steps behave and saves them."""

from __future__ import annotations

import json
import re

import pytest

from srifty_kit.tables.contracts import validate_measurements
from srifty_kit.tables.files import read_table
from tests.builders import run_notebook

pytestmark = pytest.mark.slow


def test_notebook_profiles_plots_and_saves_the_measurements(tmp_path):
    out = tmp_path / "profile.csv"
    nb = run_notebook(
        "01_profile_model",
        tmp_path,
        model_name="mlp",
        batch_sizes=[4, 8],
        max_seconds=4,
        out_path=str(out),
    )
    table = validate_measurements(read_table(out))
    assert set(table["local_bsz"]) == {4, 8}
    assert json.loads((tmp_path / "profile.facts.json").read_text())["model"] == "mlp"
    images = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "image/png" in o.get("data", {})
    ]
    # ACF, effective samples, warm-up and shifts, the trace, distributions and intervals
    assert len(images) >= 6
    text = "".join(
        str(o.get("data", {}).get("text/plain", "")) + str(o.get("text", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    assert "TqdmExperimentalWarning" not in text  # the kit's imports print no warning
    html = "".join(
        str(o.get("data", {}).get("text/html", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    for shown in ("n_eff", "warmup_steps", "drift", "shift_p"):
        assert shown in text + html, shown  # per configuration, in the tables the notebook shows
    # the drift table says in words what it flagged, tested and not, and leaves no cell empty
    drift_table = next(t for t in re.findall(r"<table.*?</table>", html, re.S) if "shift_p" in t)
    caption = re.search(r"<caption>(.*?)</caption>", drift_table, re.S)
    assert caption and re.match(r"(No level shift|Level shift|Not tested) ", caption[1]), caption
    cells = [c.strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", drift_table, re.S)]
    assert cells and all(c and c.lower() not in ("nan", "none") for c in cells), cells
    # every step time shown carries its unit: the profile summary's and the distributions'
    for shown_table in re.findall(r"<table.*?</table>", html, re.S):
        header = re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", shown_table, re.S)
        if "mean" not in header:
            continue
        at = header.index("mean")
        for row in re.findall(r"<tr>(.*?)</tr>", shown_table, re.S)[1:]:
            mean = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)[at].strip()
            assert re.fullmatch(r"[\d.,]+ (ms|s|min|h)", mean), mean
    # the noise scale with the reason it is missing (or unstable) beside it, when it is
    facts = json.loads((tmp_path / "profile.facts.json").read_text())
    assert "'noise_scale_note'" in text
    if facts["noise_scale_note"]:  # a long string is shown in pieces: 'a b ' 'c d'
        assert facts["noise_scale_note"] in re.sub(r"'\s+'", "", text)
    assert "warmup" in table.columns and table["warmup"].dtype == bool
