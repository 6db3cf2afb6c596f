"""The end-to-end demo: profile a demo model here, fit, search EC2, write an HTML report."""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from srifty_kit.present.reports import Report, run_report
from srifty_kit.tables.files import write_table

SINGLE_BATCHES = (8, 16, 32, 64)
DIST_WORLDS = (1, 2)  # two processes: what a 2-core machine can run without oversubscribing


@dataclass(frozen=True)
class Demo:
    """What the demo wrote: measurements, the fitted model, the report and its pick."""

    measurements: Path
    model: Path
    report: Report
    pick: str


def _noise_scale(facts: dict) -> float | None:
    """The profiled noise scale when it is usable; None (perfect scaling assumed) otherwise."""
    value = facts.get("noise_scale")
    if value is None or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def _pick_text(report: Report) -> str:
    """The printed output of the executed notebook's cell tagged ``pick``."""
    import nbformat

    nb = nbformat.read(report.notebook, as_version=4)
    for cell in nb.cells:
        if "pick" in cell.get("metadata", {}).get("tags", []):
            return "".join(o.get("text", "") for o in cell.get("outputs", [])).strip()
    return ""


def run_demo(
    out_dir: str | os.PathLike = "reports/demo",
    model: str = "mlp",
    seconds: float = 20.0,
    samples: float = 1e9,
    deadline_h: float = 1.0,
    progress: bool = True,
) -> Demo:
    """Profile ``model`` here (one process and a 2-process DDP run), fit, and report a search.

    ``seconds`` is the measuring budget, split between the two profiles; the job is ``samples``
    training samples to the target at the largest profiled batch, due within ``deadline_h``.
    Every table is written to ``out_dir`` as soon as it is measured.
    """
    from srifty_kit.measure.distributed.profile import profile_distributed
    from srifty_kit.measure.profile import profile_spec
    from srifty_kit.model.estimator import StepTimeModel

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    single = profile_spec(
        model, SINGLE_BATCHES, max_seconds=seconds / 2, out=out / "profile.csv", progress=progress
    )
    dist = profile_distributed(
        model,
        DIST_WORLDS,
        (SINGLE_BATCHES[1],),
        max_seconds=seconds / 2,
        out=out / "profile_dist.csv",
        progress=progress,
    )
    measured = pd.concat([single.measurements, dist.measurements], ignore_index=True)
    measurements = write_table(measured, out / "measurements.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # terms it fixes are listed in the report's fit table
        fitted = StepTimeModel().fit(measured)
    model_path = out / "model.json"
    fitted.save(model_path)
    parameters = {
        "model_path": str(model_path),
        "workload": model,
        "samples": samples,
        "reference_bsz": max(SINGLE_BATCHES),
        "noise_scale": _noise_scale(single.facts),
        "deadline_h": deadline_h,
    }
    report = run_report("03_search_ec2", parameters, out, name="search_ec2", progress=progress)
    return Demo(measurements, model_path, report, _pick_text(report))
