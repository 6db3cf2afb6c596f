"""Notebook 05's teacher's guide says what the notebook prints: run headless at its defaults on
the reference fit, every quote (code type) in a lesson's row of the guide is in that lesson's
output, and each lesson still shows the contrast it teaches."""

from __future__ import annotations

import re

import nbformat
import pytest

from srifty_kit.present.lessons import REFERENCE_FILES
from srifty_kit.tables.reference import shared_dir
from tests.builders import REPO, run_notebook

NOTEBOOK = REPO / "notebooks" / "05_tradeoffs.ipynb"


def guide_quotes(nb) -> dict[str, list[str]]:
    """Lesson letter -> the code-type quotes in its row of the teacher's guide."""
    guide = nb.cells[0].source.split("### Teacher's guide", 1)[1]
    rows = {}
    for line in guide.splitlines():
        row = re.match(r"\| ([a-d]) ·", line)
        if row:
            rows[row.group(1)] = re.findall(r"`([^`]+)`", line)
    return rows


def lesson_outputs(nb) -> dict[str, str]:
    """Lesson letter -> what its cell printed."""
    printed = {}
    for cell in nb.cells:
        lesson = re.match(r'if "([a-d])" in lessons:', cell.source)
        if cell.cell_type == "code" and lesson:
            text = "".join(o.get("text", "") for o in cell.get("outputs", []))
            printed[lesson.group(1)] = text
    return printed


def test_every_row_of_the_guide_quotes_its_lesson():
    rows = guide_quotes(nbformat.read(NOTEBOOK, as_version=4))
    assert sorted(rows) == ["a", "b", "c", "d"]
    assert all(len(quotes) >= 5 for quotes in rows.values()), rows


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """Notebook 05 run headless at its committed defaults (the reference fit)."""
    folder = shared_dir() / "reference" / "measurements"
    if not all((folder / name).is_file() for name in REFERENCE_FILES):
        pytest.skip(f"reference measurements not found at {folder} (set SRIFTY_SHARED)")
    return run_notebook("05_tradeoffs", tmp_path_factory.mktemp("nb05"), interactive=False)


@pytest.mark.slow
def test_the_guide_quotes_what_each_lesson_prints_at_the_defaults(executed):
    printed = lesson_outputs(executed)
    missing = {
        lesson: [q for q in quotes if q not in printed[lesson]]
        for lesson, quotes in guide_quotes(nbformat.read(NOTEBOOK, as_version=4)).items()
    }
    assert not any(missing.values()), (
        f"the guide quotes what the notebook no longer prints: {missing}"
    )


@pytest.mark.slow
def test_the_lessons_show_their_contrast_at_the_defaults(executed):
    printed = lesson_outputs(executed)
    start_a = printed["a"].split("\n-- ", 1)[0]
    marks = re.findall(r"^Fastest by .*?: (\d+) workers", start_a, flags=re.M)
    assert len(marks) == 2 and marks[0] != marks[1], start_a  # point and upper end part
    start_d = printed["d"].split("\n-- ", 1)[0]
    picks = [
        line.split(": ", 1)[1].split(", predicted")[0]
        for line in start_d.splitlines()
        if line.startswith("Judged by")
    ]
    assert "no configuration" not in start_d and len(picks) == 2 and picks[0] != picks[1]
    misses = [float(m) for m in re.findall(r"misses the deadline in ([\d.]+)%", start_d)]
    assert misses[0] > misses[1]  # the point estimate's pick misses more often
