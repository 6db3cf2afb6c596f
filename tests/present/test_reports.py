"""Notebook reports run for real: papermill with a Jupyter kernel, then nbconvert to HTML."""

from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from srifty_kit.errors import InputError
from srifty_kit.present.reports import find_notebook, run_report

pytestmark = pytest.mark.slow


def _notebook(path, body: str):
    params = new_code_cell("budget_usd = 1.0")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nb.metadata["language_info"] = {"name": "python"}  # papermill needs the language
    nbformat.write(nb, path)
    return path


def test_report_runs_with_parameters_and_exports_html(tmp_path):
    nb = _notebook(tmp_path / "r.ipynb", "print(f'budget is {budget_usd * 2:.1f} dollars')")
    report = run_report(nb, {"budget_usd": 21.0}, tmp_path / "out", progress=False)
    assert report.html is not None and report.html.exists()
    assert "budget is 42.0 dollars" in report.html.read_text()
    # the executed notebook is kept beside the HTML, with the injected parameters
    assert "budget_usd = 21.0" in report.notebook.read_text()


def test_input_error_inside_the_notebook_comes_back_as_one_and_keeps_the_run(tmp_path):
    body = (
        "print('measured before the failure')\n"
        "from srifty_kit.errors import InputError\n"
        "raise InputError('budget must be positive', column='budget_usd')"
    )
    nb = _notebook(tmp_path / "bad.ipynb", body)
    with pytest.raises(InputError, match="budget must be positive"):
        run_report(nb, {"budget_usd": -1.0}, tmp_path / "out", progress=False)
    executed = (tmp_path / "out" / "bad.failed.ipynb").read_text()
    assert "measured before the failure" in executed
    assert not (tmp_path / "out" / "bad.ipynb").exists()  # no report claims to be whole


def test_unknown_notebook_name_suggests_the_shipped_ones(tmp_path):
    with pytest.raises(InputError, match="no notebook"):
        find_notebook(tmp_path / "nope")


def test_a_rerun_that_fails_never_replaces_the_last_good_report(tmp_path):
    # as `srifty demo` reruns its search report: no failed_name given, yet the half-run
    # notebook goes beside the last good one, never over it
    from srifty_kit.present.reports import ReportFailed

    nb = _notebook(tmp_path / "r.ipynb", "print(f'answer {100 / budget_usd:.1f}')")
    out = tmp_path / "out"
    good = run_report(nb, {"budget_usd": 4.0}, out, progress=False)
    page, executed = good.html.read_bytes(), good.notebook.read_bytes()
    with pytest.raises(ReportFailed):
        run_report(nb, {"budget_usd": 0.0}, out, progress=False)
    assert good.html.read_bytes() == page and good.notebook.read_bytes() == executed
    assert "ZeroDivisionError" in (out / "r.failed.ipynb").read_text()
    run_report(nb, {"budget_usd": 5.0}, out, progress=False)
    assert "answer 20.0" in good.html.read_text() and not (out / "r.failed.ipynb").exists()
