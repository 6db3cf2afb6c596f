"""The end-to-end demo: profile a demo model here, fit, search EC2, write an HTML report; then
the weekly cost report of the packaged sample ledger, and an index page linking both."""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from srifty_kit.errors import InputError
from srifty_kit.present.reports import (
    Report,
    notebook_figures,
    run_report,
    run_weekly_report,
    tagged_outputs,
)
from srifty_kit.tables.files import atomic_write, write_table

SINGLE_BATCHES = (8, 16, 32, 64)
# The demo job's deadline. The demo profiles on this machine's CPU, and a CPU's step time says
# nothing of a GPU's: every GPU type is reached through the model's op graph alone (its floor
# from the operators a step launches, which is most of a small model's GPU step and uncertain
# by a factor of ~1.5 at one sd), so the search's 90% upper end of a run lies ~1.7x above its
# point estimate whatever machine profiles. And the demo model is small: its all-reduce is
# milliseconds of fixed cost per ring step (``transfer.SYNC_PRIOR``, what the reference
# clusters measured), about its whole step on a GPU, so more GPUs barely shorten the job
# (one T4 needs ~2.2 h, up to ~3.8 h at 90%). Five hours leave room for that width on one
# GPU, so the report opens on a decision, the dearer clusters that finish sooner and the
# measurement that would narrow it.
DEADLINE_H = 5.0
DIST_WORLDS = (1, 2)  # two processes: what a 2-core machine can run without oversubscribing


# left in --out by the demo: a folder holding it is the demo's own, which a rerun replaces
DEMO_MARK = ".srifty-demo"
INDEX_TITLE = "<title>srifty_kit demo</title>"  # what an older demo's index.html (no mark) holds


def demo_files(out: Path) -> list[Path]:
    """The files in ``out`` that a demo run would replace (those there now, sorted)."""
    from srifty_kit.present.reports import weekly_report_name
    from srifty_kit.present.weekly import SAMPLE_WEEK

    weekly = weekly_report_name(SAMPLE_WEEK)
    names = [
        "profile.csv",
        "profile.facts.json",
        "profile_dist.csv",
        "measurements.csv",
        "model.json",
        "search_ec2.ipynb",
        "search_ec2.html",
        f"{weekly}.ipynb",
        f"{weekly}.html",
        f"{weekly}.json",
        "index.html",
    ]
    found = [out / n for n in names if os.path.lexists(out / n)]
    for stem in ("search_ec2", weekly):  # notebook_figures' names
        found += sorted((out / "figures").glob(f"{stem}_fig*.png"))
    return found


def check_demo_folder(out: Path) -> None:
    """Refuse, before any work, an ``out`` that holds files of the user's that the demo would
    replace (its tables, model and reports have plain names: measurements.csv, model.json,
    index.html); a folder an earlier demo wrote (its mark, or an older demo's index page) is
    the demo's to replace.

    Raises:
        InputError: naming the files that would be replaced.
    """
    if (out / DEMO_MARK).exists():
        return
    index = out / "index.html"
    try:
        if index.is_file() and INDEX_TITLE in index.read_text(encoding="utf-8", errors="replace"):
            return  # written by a demo before the mark was
    except OSError:
        pass
    taken = demo_files(out)
    if taken:
        shown = ", ".join(str(p.relative_to(out)) for p in taken[:5])
        more = f" (+{len(taken) - 5} more)" if len(taken) > 5 else ""
        raise InputError(
            f"the folder holds files the demo would replace: {shown}{more}",
            source=str(out),
            fix="give the demo a new or empty folder (--out), or move those files away",
        )


@dataclass(frozen=True)
class Demo:
    """What the demo wrote: measurements, the fitted model, the report and its pick."""

    measurements: Path
    model: Path
    report: Report
    pick: str
    weekly: Report | None = None  # the weekly cost report of the sample ledger
    index: Path | None = None  # index.html linking the reports and their figures
    probe: str = ""  # what to measure next, in a sentence (notebook 03's probes cell)


def _noise_scale(facts: dict) -> float | None:
    """The profiled noise scale when it is usable; None (perfect scaling assumed) otherwise."""
    value = facts.get("noise_scale")
    if value is None or not math.isfinite(value) or value <= 0:
        return None
    return float(value)


def _printed(outputs: dict[str, list], tag: str) -> str:
    """What the cell tagged ``tag`` printed (``tagged_outputs``' entry), stripped."""
    return "".join(o.get("text", "") for o in outputs.get(tag, [])).strip()


def run_demo(
    out_dir: str | os.PathLike = "reports/demo",
    model: str = "mlp",
    seconds: float = 20.0,
    samples: float = 1e9,
    deadline_h: float = DEADLINE_H,
    progress: bool = True,
) -> Demo:
    """Profile ``model`` here (one process and a 2-process DDP run), fit, and report a search.

    Args:
        out_dir: where every table, the model and the reports are written (each table as soon
            as it is measured).
        model: the demo model to profile (``measure.zoo``).
        seconds: the measuring budget, split between the two profiles.
        samples: the job: training samples to the target at the largest profiled batch.
        deadline_h: when the job is due (``DEADLINE_H``: see there why 5 h).
        progress: show progress bars.

    Returns:
        A :class:`Demo`: the files written, the search's pick (or why nothing meets the
        constraints) and the measurement it suggests next.

    Raises:
        InputError: ``out_dir`` holds files of the user's the demo would replace
            (``check_demo_folder``), before anything is measured.
    """
    from srifty_kit.measure.distributed.profile import profile_distributed
    from srifty_kit.measure.profile import BudgetWarning, profile_spec
    from srifty_kit.model.estimator import StepTimeModel

    out = Path(out_dir).resolve()
    check_demo_folder(out)  # no file of the user's is replaced
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(
        out / DEMO_MARK,
        lambda p: p.write_text("written by `srifty demo`: a rerun may replace its files\n"),
    )
    with warnings.catch_warnings():
        # the demo's budget is short by design (a quick look, not a precise profile): telling
        # a newcomer to give it an hour would be noise; a profile of their own says it
        warnings.simplefilter("ignore", BudgetWarning)
        single = profile_spec(
            model,
            SINGLE_BATCHES,
            max_seconds=seconds / 2,
            out=out / "profile.csv",
            progress=progress,
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
        # with the profile's facts, as `srifty fit` reads them beside the table: the op graph,
        # not this CPU's step time, is what reaches a GPU
        fitted = StepTimeModel().fit(measured, facts={model: single.facts})
    model_path = out / "model.json"
    fitted.save(model_path)
    parameters = {
        "model_path": str(model_path),
        "workload": model,
        "samples": samples,
        "reference_bsz": max(SINGLE_BATCHES),
        "noise_scale": _noise_scale(single.facts),
        "deadline_h": deadline_h,
        "interactive": False,  # an HTML report: static tables and figures, not the panel
    }
    # the reader of the report wants the answer, not the code (as in the weekly report)
    report = run_report(
        "03_search_ec2",
        parameters,
        out,
        name="search_ec2",
        exclude_input=True,
        progress=progress,
    )
    weekly = run_demo_weekly(out, model_path, progress=progress)
    index = write_index(out, [("Search EC2 for the demo job", report), (WEEKLY_TITLE, weekly)])
    outputs = tagged_outputs(report.notebook)
    pick, probe = _printed(outputs, "pick"), _printed(outputs, "probes").split("\n", 1)[0]
    return Demo(measurements, model_path, report, pick, weekly, index, probe)


WEEKLY_TITLE = "Weekly cost report of the sample ledger (generated data)"


def run_demo_weekly(out: Path, model_path: Path | None = None, progress: bool = True) -> Report:
    """The weekly cost report of the packaged sample CUR for its last full week; the savings
    use the demo's own fitted model first (its training model measured here), then the
    default measurements."""
    from srifty_kit.present.weekly import SAMPLE_LEDGER, SAMPLE_WEEK, default_model_sources
    from srifty_kit.tables.reference import packaged

    models = ([str(model_path)] if model_path else []) + default_model_sources()
    return run_weekly_report(
        SAMPLE_WEEK, packaged(SAMPLE_LEDGER), out, models=models, progress=progress
    )


def write_index(out: str | os.PathLike, reports: list[tuple[str, Report]]) -> Path:
    """``index.html`` in ``out``: a link to each report's HTML and its figures (written to
    ``figures/`` as PNG files), atomically."""
    from html import escape

    out = Path(out)
    sections = []
    for title, report in reports:
        figures = notebook_figures(report.notebook, out / "figures")
        images = "\n".join(
            f'<a href="{escape(p.relative_to(out).as_posix())}"><img src="'
            f'{escape(p.relative_to(out).as_posix())}" alt="{escape(title)}, figure {i}" '
            'width="360"></a>'
            for i, p in enumerate(figures, 1)
        )
        page = report.html.relative_to(out).as_posix() if report.html else ""
        sections.append(
            f'<h2><a href="{escape(page)}">{escape(title)}</a></h2>\n'
            f'<p><a href="{escape(page)}">{escape(page)}</a> (the executed notebook: '
            f'<a href="{escape(report.notebook.name)}">{escape(report.notebook.name)}</a>)</p>'
            f"\n<p>{images}</p>"
        )
    body = "\n".join(sections)
    text = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"{INDEX_TITLE}</head>\n<body>\n<h1>srifty_kit demo</h1>\n"
        f"{body}\n</body></html>\n"
    )
    path = out / "index.html"
    atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))
    return path
