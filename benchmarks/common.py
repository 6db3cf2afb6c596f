"""What every benchmark shares: where the reference data lives and how a result is written."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from srifty_kit.data import reference_measurements  # noqa: F401 (for the scripts)
from srifty_kit.tables import atomic_write

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports" / "benchmarks"


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub markdown table of ``frame``, cells as they are printed."""
    return frame.to_markdown(index=False, disable_numparse=True)


def write_report(name: str, text: str) -> Path:
    """Write ``reports/benchmarks/NAME.md`` atomically and say where."""
    path = REPORTS / f"{name}.md"
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))
    print(f"wrote {path.relative_to(REPO)}")
    return path
