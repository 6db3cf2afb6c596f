"""Every notebook is committed thin: no outputs, one cell tagged `parameters`, a kernel."""

from __future__ import annotations

import nbformat
import pytest

from tests.builders import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def test_the_design_notebooks_are_there():
    names = {p.stem for p in NOTEBOOKS}
    assert {"01_profile_model", "02_performance_model", "03_search_ec2"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs_and_with_one_parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    dirty = [i for i, c in enumerate(code) if c.outputs or c.execution_count is not None]
    assert not dirty, f"{path.name}: code cells {dirty} carry outputs; clear them before commit"
    tagged = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: needs exactly one cell tagged 'parameters'"
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
