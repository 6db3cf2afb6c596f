"""What every benchmark shares: where the reference data lives and how a result is written."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from srifty_kit.tables.files import atomic_write
from srifty_kit.tables.reference import reference_measurements  # noqa: F401 (for the scripts)

REPO = Path(__file__).resolve().parents[1]
REPORTS = REPO / "reports" / "benchmarks"


def one_worker_per_node(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.Series]:
    """Multi-node rows with one worker per node, and each row's ring all-reduce traffic per
    gradient byte, 2(n-1)/n: where the traced sync time is network time and nothing else."""
    rows = table[(table["num_workers"] == table["num_nodes"]) & (table["num_nodes"] > 1)]
    n = rows["num_workers"]
    return rows, 2 * (n - 1) / n


def markdown_table(frame: pd.DataFrame) -> str:
    """A GitHub markdown table of ``frame``, cells as they are printed."""
    return frame.to_markdown(index=False, disable_numparse=True)


def write_report(name: str, text: str) -> Path:
    """Write ``reports/benchmarks/NAME.md`` atomically and say where."""
    path = REPORTS / f"{name}.md"
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))
    print(f"wrote {path.relative_to(REPO)}")
    return path
