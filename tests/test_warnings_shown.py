"""The kit's warnings name the user's own line: a script's file and line, a notebook's cell.

In a Jupyter kernel a cell's code lives in a temporary file ('/tmp/ipykernel_1234/567.py'),
which ``warnings.warn`` would name: noise a user cannot open. Both cases run for real: a
script in a subprocess, a notebook in a python3 kernel through papermill.
"""

from __future__ import annotations

import subprocess
import sys

import nbformat
import papermill

# a typo of an instance type with its GPU count given: validated, fitted, and warned of
TYPO = """import pandas as pd
from srifty_kit.catalog.query import load_catalog
from srifty_kit.tables.contracts import validate_measurements

table = pd.DataFrame({"model": ["m"], "instance_type": ["g4dn.12xlarg"], "num_nodes": [1],
                      "num_workers": [4], "local_bsz": [8], "step_time_s": [0.5],
                      "gpus_per_node": [4]})
validate_measurements(table, catalog=load_catalog())
"""
SAID = "instance type 'g4dn.12xlarg' (1 row) is not in the catalog"
THIRD_PARTY = 'import warnings\nwarnings.warn("not the kit\'s", UserWarning)\n'


def _stderr_of_cells(tmp_path, *sources: str) -> list[str]:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, tmp_path / "in.ipynb")
    papermill.execute_notebook(
        str(tmp_path / "in.ipynb"),
        str(tmp_path / "out.ipynb"),
        kernel_name="python3",
        cwd=str(tmp_path),
        progress_bar=False,
    )
    ran = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    return [
        "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stderr")
        for cell in ran.cells
    ]


def test_a_warning_in_a_notebook_names_the_cell_not_the_kernels_temporary_file(tmp_path):
    kit, other = _stderr_of_cells(tmp_path, TYPO, THIRD_PARTY)
    assert SAID in kit and "UserWarning: " in kit
    assert "ipykernel_" not in kit and "/tmp/" not in kit, kit
    # the cell as IPython names it in a traceback, and the line in it that called
    assert kit.startswith("Cell In[1]:8: UserWarning: "), kit
    # another library's warning shows as Python shows it: the kernel's file, untouched
    assert "ipykernel_" in other and "UserWarning: not the kit's" in other


def test_a_warning_in_a_script_still_names_its_file_and_line(tmp_path):
    script = tmp_path / "fit_it.py"
    script.write_text(TYPO)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"{script}:8: UserWarning: " in done.stderr and SAID in done.stderr
