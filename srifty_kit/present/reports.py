"""Parameterised notebook reports: run a notebook with papermill, export it to HTML."""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from srifty_kit.errors import InputError, did_you_mean
from srifty_kit.tables.files import atomic_write


@dataclass(frozen=True)
class Report:
    """Where a report run left its executed notebook and its HTML export."""

    notebook: Path
    html: Path | None


def packaged_notebooks() -> dict[str, Path]:
    """The notebooks that ship with srifty_kit, by name without the .ipynb suffix."""
    root = resources.files("srifty_kit.notebooks")
    return {
        Path(entry.name).stem: Path(str(entry))
        for entry in root.iterdir()
        if entry.name.endswith(".ipynb")
    }


def find_notebook(name_or_path: str | os.PathLike) -> Path:
    """A notebook by path, or by name among the packaged ones ('03_search_ec2')."""
    path = Path(name_or_path)
    if path.suffix == ".ipynb" and path.is_file():
        return path
    shipped = packaged_notebooks()
    if path.stem in shipped:
        return shipped[path.stem]
    raise InputError(
        f"no notebook {str(name_or_path)!r}{did_you_mean(path.stem, shipped)}",
        fix="give a path to an .ipynb file or one of " + ", ".join(sorted(shipped)),
    )


def _html_of(notebook: Path, exclude_input: bool) -> str:
    import nbformat
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(exclude_input=exclude_input)
    body, _ = exporter.from_notebook_node(nbformat.read(notebook, as_version=4))
    return body


def run_report(
    notebook: str | os.PathLike,
    parameters: dict[str, Any],
    out_dir: str | os.PathLike,
    *,
    name: str | None = None,
    html: bool = True,
    exclude_input: bool = False,
    kernel_name: str = "python3",
    progress: bool = True,
    timeout_s: float | None = 600,
) -> Report:
    """Execute ``notebook`` with ``parameters`` in ``out_dir`` and export it to HTML.

    The executed notebook is kept even when a cell fails (papermill saves it cell by cell), so
    nothing computed is lost; an ``InputError`` raised inside the notebook comes back as one.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    source = find_notebook(notebook)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    stem = name or source.stem
    executed = out / f"{stem}.ipynb"
    try:
        papermill.execute_notebook(
            str(source),
            str(executed),
            parameters=parameters,
            kernel_name=kernel_name,
            cwd=str(out),
            progress_bar=progress,
            execution_timeout=timeout_s,
        )
    except PapermillExecutionError as err:
        if err.ename == "InputError":
            raise InputError(
                f"{err.evalue} (see the executed notebook)", source=str(executed)
            ) from err
        raise
    page = None
    if html:
        page = out / f"{stem}.html"
        text = _html_of(executed, exclude_input)
        atomic_write(page, lambda p: p.write_text(text, encoding="utf-8"))
    return Report(notebook=executed, html=page)
