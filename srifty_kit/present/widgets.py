"""The EC2 search as a JupyterLab panel (ipywidgets 8 + bqplot), wired to the decide layer.

``SearchPanel`` evaluates every candidate once per model, job and candidate-shaping
constraints (``planner.evaluate``: enumeration, predictions with intervals, prices) and keeps
the last few evaluations; moving the deadline, the budget or the objective only re-filters and
re-ranks those arrays (``planner.select``). The bqplot figure is updated in place: its marks
get new data, nothing is redrawn from scratch; it draws in the search front's coordinates, the
time at the confidence across and the expected cost up (``plots.cost_time_axes``, as notebook
03's static figure does), so the pick, by any objective, lies on the front. Errors in what the
user set (``InputError``) and "nothing meets the constraints" are shown in the panel as a
message.

Every control and output carries a stable CSS class (``CLASSES``) for browser tests and
styling; the table carries the inputs it was computed for as ``data-*`` attributes.
"""

from __future__ import annotations

import asyncio
import html
import json
import math
from collections import OrderedDict
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy.special import ndtri

from srifty_kit.catalog.query import instance_family
from srifty_kit.decide.candidates import Candidates, log_sd
from srifty_kit.decide.choices import (
    check_gpu_figures,
    families_not_offered,
    left_out_lines,
    offered_types,
    panel_constraints,
    profiled_batches,
    search_choices,
)
from srifty_kit.decide.explanation import config_phrase
from srifty_kit.decide.job import Constraints, Job, whole_batches
from srifty_kit.decide.pareto import FRONT_TIME
from srifty_kit.decide.planner import OBJECTIVES, Evaluated, SearchResult, evaluate, select
from srifty_kit.errors import InputError, did_you_mean, is_whole
from srifty_kit.present.plots import budget_label, cost_time_axes, log_ticks
from srifty_kit.tables.contracts import validate_catalog

if TYPE_CHECKING:  # pragma: no cover
    from srifty_kit.model.estimator import StepTimeModel

# name -> CSS class of each control and output (stable: browser tests address them)
CLASSES = {
    "panel": "srifty-search-panel",
    "workload": "srifty-workload",
    "samples": "srifty-samples",
    "batches": "srifty-batches",
    "noise_on": "srifty-noise-on",
    "noise": "srifty-noise",
    "deadline_on": "srifty-deadline-on",
    "deadline": "srifty-deadline",
    "budget_on": "srifty-budget-on",
    "budget": "srifty-budget",
    "confidence": "srifty-confidence",
    "objective": "srifty-objective",
    "max_nodes": "srifty-max-nodes",
    "spot": "srifty-spot",
    "mixes": "srifty-mixes",
    "families": "srifty-families",
    "gpus": "srifty-gpus",
    "message": "srifty-message",
    "figure": "srifty-figure",
    "table": "srifty-table",
    "why": "srifty-why",
    "reason": "srifty-reason",
    "probe_button": "srifty-probe-button",
    "probe": "srifty-probe",
}
# the figure's marks, in drawing order (the SVG holds one group per mark, in this order)
MARKS = (
    "cloud",  # every candidate within the node limit, as a density image (``cloud_png``)
    # right of the deadline, shaded with the deadline as its dashed edge: what misses it (one
    # mark, so a deadline move sends one message for it; updated last)
    "deadline",
    "front",
    "front_dots",
    "knee",
    "pick",
    "nearest",
    "budget",
)
# evaluations kept, so that toggling spot or mixes back is instant: each holds every candidate
# up to the node slider's top (on the demo model 140,096, about 60 MB); another confidence or
# pricing is priced from the last one's predictions anyway (``Evaluated.at``)
CACHED_EVALUATIONS = 4
# how long the kernel waits without a message before it prices the confidence slider's
# neighbouring stops (``SearchPanel._price_neighbours``): longer than the gap between a
# browser's messages of one change, shorter than a person's between two key presses
PREFETCH_AFTER_S = 0.05
# the node slider's top: the panel evaluates every candidate up to it once (``_evaluated``)
NODE_SLIDER_TOP = 64
# how far inside a kept axis' ends its points stay before it widens (``_widened``): a dot's
# own radius, so that none is cut by the frame
AXIS_ROOM = 1.05
# the cloud's density image, bins across and up: about 3 pixels each on the figure's plot area
CLOUD_BINS = (150, 100)
CLOUD_COLORS = {"on-demand": (0x4C, 0x78, 0xA8), "spot": (0xF5, 0x85, 0x18)}
NUMBER = "{:.4g}"  # how the table writes numbers
SHARE = "{:.0%}"  # and its shares (SHARES)
SHARES = ("p_meet", "efficiency")
FIGURE_CAPTION = (
    "Across: the time to finish at the confidence (what the deadline is held to); up: the "
    "expected cost (what the cost objective ranks by). Cloud: every configuration searched, "
    "darker where more lie (blue on-demand, orange spot). Black steps: the Pareto front, "
    "whose cheapest point is the pick by cost; gold diamond: its knee; red square: the pick, "
    "a point of the front whatever the objective; orange cross: the nearest configuration "
    "when nothing fits. Shaded: misses the deadline (dashed edge). Dotted: the budget, held "
    "to the cost at the confidence (a configuration under it can still break it)."
)

# the tick labels of every axis of hours, dollars or milliseconds (d3-format, as bqplot takes
# it): decimal notation, never an exponent or an SI prefix ('1,200', not '1.2e+3'; '0.5', not
# '500m'), to 6 significant digits with trailing zeros dropped, so a marked tick (log_ticks
# rounds it to 3) reads as the answer says it: Young/Daly's 12.7 h as '12.7', not '13'
TICKS = ",~r"

LOOK = """
.srifty-ranked { border-collapse: collapse; font-size: 12px; }
.srifty-ranked caption { text-align: left; font-weight: bold; padding: 4px 0; }
.srifty-ranked th, .srifty-ranked td { padding: 2px 8px; border-bottom: 1px solid #ddd; }
.srifty-ranked td { text-align: right; }
.srifty-ranked td:nth-child(2) { text-align: left; }
.srifty-error { color: #b00020; }
.srifty-infeasible { color: #8a4b00; }
.srifty-left-out { color: #555; font-size: 90%; }
.srifty-why-text, .srifty-answer { white-space: pre-wrap; font-size: 12px; }
/* JupyterLab breaks an output's pre anywhere ("mis|ses"): wrap the sentences between words */
.srifty-why .srifty-why-text, .srifty-reason .srifty-why-text {
  word-break: normal; overflow-wrap: break-word;
}
.srifty-caption { font-size: 11px; color: #555; width: 550px; line-height: 1.3; }
"""
# an answer's static copy (static_copy) is for where no widget draws: hidden, output area and
# all, where the panel's widgets draw this style
HIDE_COPIES = (
    ".srifty-static, .jp-OutputArea-child:has(> .jp-OutputArea-output > .srifty-static) "
    "{ display: none; }"
)
STYLE = f"<style>{LOOK}{HIDE_COPIES}\n</style>"

# the class of a widget's static copy beside it (static_copy), which STYLE hides
STATIC = "srifty-static"


def stops(slider: Any) -> list:
    """A selection slider's values, in order (its options are values or (label, value))."""
    return [o[1] if isinstance(o, tuple) else o for o in slider.options]


def static_copy(body: str) -> Any:
    """``body`` as an IPython ``HTML`` object of class ``srifty-static``: the copy of a widget's
    answer shown in the output after the widget.

    Where a widget draws (JupyterLab with its kernel, an export whose widgets load), the panel's
    style hides the copy; where none does (nbconvert's HTML opened offline, GitHub's viewer, a
    notebook reopened without its kernel) it is what the reader sees. A separate output because
    nbconvert shows one type per output, the widget's whenever its state was saved (papermill
    saves it), which draws nothing offline.

    Args:
        body: the HTML to copy.

    Returns:
        An ``IPython.display.HTML`` to display (with ``display_id=True``, to update it).
    """
    from IPython.display import HTML

    return HTML(f'<div class="{STATIC}">{body}</div>')


def tag(widget: Any, css_class: str) -> Any:
    """``widget`` with ``css_class`` added to its DOM element (returned for chaining)."""
    widget.add_class(css_class)
    return widget


def data_attributes(values: dict[str, Any]) -> str:
    """``data-key="value"`` pairs, HTML-escaped; floats keep every digit (repr)."""

    def text(v: Any) -> str:
        if v is None:
            return ""
        if isinstance(v, bool | np.bool_):
            return "true" if v else "false"
        if isinstance(v, tuple | list):
            return ",".join(str(x) for x in v)
        return repr(float(v)) if isinstance(v, float | np.floating) else str(v)

    return " ".join(
        f'data-{k.replace("_", "-")}="{html.escape(text(v))}"' for k, v in values.items()
    )


NOISE_START = 1000.0  # where the noise scale slider rests while no noise scale is known


def noise_choices(noise: float | None) -> list[tuple[str, float]]:
    """The noise scale slider's stops, 10 to 10^7 samples, ``noise`` among them exactly."""
    return log_choices(noise or NOISE_START, 10.0, 1e7, per_decade=20, label=readable)


def readable(value: float) -> str:
    """A slider's stop as people write the number: '2,000', '11.2', millions and beyond as
    '20.9M', '12B' (the readout holds about nine characters: '20,900,000' lost its last
    digit); never '2e+03' (the stops are already cut to three significant digits)."""
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if abs(value) >= size:
            q = value / size
            return f"{q:,.0f}{unit}" if abs(q) >= 100 else f"{q:.3g}{unit}"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,}"


def batch_options(own: Any) -> list[int]:
    """The local batch control's options: powers of two up to 1024 (the search's default
    batches reach there) and every workload's own batches (``own``: (batches, noise) pairs)."""
    return sorted({2**k for k in range(11)} | {int(b) for batches, _ in own for b in batches})


def family_options(
    families: list[str], not_offered: dict[str, tuple[str, ...]]
) -> list[tuple[str, str]]:
    """The family control's (label, value) options: a family with no type on offer in its
    region (``choices.families_not_offered``) says so in its label ("p3 (retired in
    us-east-1)"), so the control shows before a search that it leads nowhere."""
    return [
        (f"{f} (retired in {', '.join(not_offered[f])})" if f in not_offered else f, f)
        for f in families
    ]


def error_html(err: Exception) -> str:
    """An error as the panel shows it: one line, what to fix."""
    return f'<div class="srifty-error"><b>Cannot search:</b> {html.escape(str(err))}</div>'


def log_choices(
    value: float,
    low: float,
    high: float,
    per_decade: int = 50,
    label: str | Callable[[float], str] = "{:g}",
) -> list[tuple[str, float]]:
    """(label, value) stops from ``low`` to ``high``, evenly spaced in log, three significant
    digits, ``value`` among them: a selection slider sends back exactly one of these values (a
    float slider would snap the value to its step and send that back instead).

    Args:
        value: the stop that must be among them (the control's current value).
        low, high: the first and last stops.
        per_decade: stops per factor of ten.
        label: a format string for each stop's label, or a function of the stop.

    Returns:
        (label, value) pairs, in increasing value.
    """
    decades = np.log10(high / low)
    grid = np.geomspace(low, high, int(round(decades * per_decade)) + 1)
    values = sorted({float(f"{v:.3g}") for v in grid} | {float(value)})
    name = label if callable(label) else label.format
    return [(name(v), v) for v in values]


# the figure's plot area in pixels (its layout less fig_margin) and the room a tick label needs
# along each axis: "20,000" across, one line of text up
PLOT_PX = {"x": 560 - 90 - 20, "y": 400 - 40 - 50}
LABEL_PX = {"x": 44, "y": 18}


def axis_ticks(low: float, high: float, axis: str) -> list[float] | None:
    """Ticks for one log axis of the panel's figure: 1-2-5 in each decade, thinned to 1-3 or to
    powers of ten where the axis spans so many decades that neighbouring labels would print
    into one another ('5,000 10,00020,000').

    Args:
        low, high: the axis' ends (> 0).
        axis: "x" or "y" (how long the axis is, how much room its labels need).

    Returns:
        The tick values, or None (bqplot's own ticks) where fewer than two would be drawn.
    """
    decades = np.log10(high / low) if low > 0 and high > low else 0.0
    steps = (1,)
    for mantissas in ((1, 2, 5), (1, 3)):
        closest = np.diff(np.log10([*mantissas, 10])).min()  # the nearest two, in decades
        if decades and PLOT_PX[axis] * closest / decades >= LABEL_PX[axis]:
            steps = mantissas
            break
    ticks = log_ticks(low, high, steps=steps)
    return ticks if len(ticks) >= 2 else None


def with_line(bounds: tuple[float, float], value: float | None) -> tuple[float, float]:
    """A log axis' ends (``bounds``) widened down to hold a constraint's line at ``value``
    (None: no line), with ``log_bounds``' margin below it.

    Args:
        bounds: the axis' (low, high), as ``log_bounds`` gives them.
        value: where the line is drawn, or None.

    Returns:
        (low, high): ``bounds`` unchanged when the line lies above ``low``.
    """
    low, high = bounds
    if value is None or not value > 0 or value >= low:
        return bounds
    return log_bounds(np.array([value]))[0], high


def cloud_png(
    x: np.ndarray,
    y: np.ndarray,
    spot: np.ndarray,
    bounds_x: tuple[float, float],
    bounds_y: tuple[float, float],
    bins: tuple[int, int] = CLOUD_BINS,
) -> bytes:
    """Where the candidates lie on the panel's log-log figure, as a PNG to place over
    ``bounds_x`` x ``bounds_y``: per bin, the share on spot colours it (``CLOUD_COLORS``, blue
    on-demand to orange spot) and the count its opacity (log, 0.3 for one to 0.9 for the most),
    so that the densest configurations read darkest; a bin with none is clear.

    Args:
        x, y: each candidate's place in the figure's coordinates (> 0; others left out).
        spot: whether each is priced on spot.
        bounds_x, bounds_y: the image's (low, high) ends on each axis.
        bins: the image's size in bins (across, up).

    Returns:
        The PNG's bytes (``bins`` pixels; the first row the highest).
    """
    import io

    from PIL import Image

    nx, ny = bins
    logs = [np.log(np.asarray(v, float).clip(1e-300)) for v in (x, y)]
    at = [
        np.floor((v - np.log(lo)) / (np.log(hi) - np.log(lo)) * n).astype(np.int64)
        for v, (lo, hi), n in zip(logs, (bounds_x, bounds_y), bins, strict=True)
    ]
    inside = (at[0] >= 0) & (at[0] < nx) & (at[1] >= 0) & (at[1] < ny)
    cell = (ny - 1 - at[1][inside]) * nx + at[0][inside]  # row 0 at the top
    on_spot = np.asarray(spot, bool)[inside]
    count = np.bincount(cell, minlength=nx * ny).astype(float)
    share = np.bincount(cell[on_spot], minlength=nx * ny) / np.maximum(count, 1.0)
    blue, orange = (np.array(c, float) for c in CLOUD_COLORS.values())
    rgb = blue[None, :] * (1.0 - share[:, None]) + orange[None, :] * share[:, None]
    alpha = 0.3 + 0.6 * np.log1p(count) / max(np.log1p(count.max()), 1e-12)
    rgba = np.concatenate([rgb, np.where(count > 0, 255 * alpha, 0.0)[:, None]], axis=1)
    out = io.BytesIO()
    Image.fromarray(rgba.round().astype(np.uint8).reshape(ny, nx, 4), "RGBA").save(
        out, "PNG", compress_level=1
    )
    return out.getvalue()


def across_levels(c: Candidates, level: float, levels: list[float]) -> np.ndarray:
    """The candidates' times at ``level`` (``FRONT_TIME``) carried to the lowest and highest of
    ``levels``: t x exp((z(to) - z(level)) x sd), sd each one's belief's log sd with the spread
    spot reclaims add (``candidates.log_sd``; exact on demand, close on spot). The panel's
    time axis spans them, so that a confidence move shifts the cloud in a frame that stays.

    Args:
        c: priced candidates.
        level: the confidence they were priced at.
        levels: the confidences the slider offers.

    Returns:
        The times at min(levels), then at max(levels) (2 x len(c) values).
    """
    sd = log_sd(c.cols)
    shift = ndtri(np.array([min(levels), max(levels)])) - ndtri(level)
    return (c[FRONT_TIME][None, :] * np.exp(shift[:, None] * sd[None, :])).ravel()


def _widened(bounds: tuple[float, float] | None, values: np.ndarray) -> tuple[float, float]:
    """A log axis' ends (``bounds``; None: none yet) kept while ``values`` lie within them
    by ``AXIS_ROOM``, else widened to ``log_bounds(values)`` on the side they leave."""
    if bounds is None:
        return log_bounds(values)
    v = np.asarray(values, float)
    v = v[np.isfinite(v) & (v > 0)]
    if v.size == 0:
        return bounds
    low, high = bounds
    wide = log_bounds(v)
    if v.min() < low * AXIS_ROOM:
        low = wide[0]
    if v.max() > high / AXIS_ROOM:
        high = wide[1]
    return low, high


def log_bounds(values: np.ndarray, margin: float = 1.25) -> tuple[float, float]:
    """A log axis' ends around the finite positive ``values``, widened by ``margin``."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v) & (v > 0)]
    if v.size == 0:
        return 0.1, 10.0
    return float(v.min() / margin), float(v.max() * margin)


# the table's columns after rank and configuration: (title, result column); {level} is the
# confidence: the ends at it are quantiles, below the expected cost at 50% for a wide belief,
# so they are titled by their level, never "upper"
TABLE_COLUMNS = (
    ("$/h", "usd_per_hr"),
    # the chance the search holds to the confidence, and the efficiency, in percent as
    # notebook 03's static table (decision_table) writes them
    ("P(meet)", "p_meet"),
    ("time h", "time_h"),
    ("time h at {level}", "time_hi_h"),
    ("expected cost $", "cost_mean_usd"),
    ("cost $ at {level}", "cost_hi_usd"),
    ("step s", "step_time_s"),
    ("efficiency", "efficiency"),
)


# what each objective ranks by (planner._rank), as the table's caption says it
RANKED_BY = {
    "cost": "expected cost",
    "time": "time at {level}",
    "knee": "distance to the knee (time at {level} and expected cost, scaled over the front)",
    "throughput-per-dollar": "throughput per dollar, the front's points first",
}


def ranked_html(result: SearchResult, inputs: dict[str, Any]) -> str:
    """The ranked configurations as an HTML table carrying ``inputs`` as data attributes.

    Args:
        result: the search to show; its confidence titles the columns of the ends at it.
        inputs: what it was computed for, written as ``data-*`` attributes.

    Returns:
        The table's HTML, with its caption (the order of its rows; the count of configurations
        that meet the constraints is the panel's message).
    """
    level = f"{(result.constraints or Constraints()).confidence:.0%}"
    titles = ("#", "configuration", *(t.format(level=level) for t, _ in TABLE_COLUMNS))
    head = "".join(f"<th>{html.escape(t)}</th>" for t in titles)
    rows = []
    for i, (_, row) in enumerate(result.ranked.iterrows(), start=1):
        cells = [str(i), html.escape(config_phrase(row))]
        cells += [
            (SHARE if c in SHARES else NUMBER).format(float(row[c])) for _, c in TABLE_COLUMNS
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    counts = {"n_candidates": result.n_candidates, "n_feasible": result.n_feasible}
    # the count is the message's, right above the table: the caption says the order
    caption = (
        f"the first {len(result.ranked)} of {result.n_feasible:,} that meet the constraints, "
        f"by {RANKED_BY[result.why.objective].format(level=level)}"
        if result.feasible
        else "none to rank"
    )
    return (
        f'<table class="srifty-ranked" {data_attributes({**inputs, **counts})}>'
        f"<caption>{html.escape(caption)}</caption>"
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _column_format(name: str) -> str | None:
    """How a decision table writes a column, read from its name's unit."""
    if name.endswith("_usd") or name == "usd_per_hr":
        return "${:,.2f}"
    if name.startswith("p_") or name.endswith("_rate") or name == "efficiency":  # shares
        return "{:.0%}"
    if name.endswith("_h"):
        return "{:,.2f}"
    if name.endswith("_s"):
        return "{:.3g}"
    return None


def check_search_parameters(
    *,
    model_path: object = None,
    workload: object = None,
    local_bsz: object = None,
    objective: object = "cost",
    spot: object = True,
    hetero: object = False,
    probe_runs: object = 1,
    interactive: object = True,
    candidates_file: object = None,
) -> None:
    """Refuse a parameter of notebook 03 that cannot work, in one line naming it as the
    notebook does, before a model is fitted or searched (papermill's ``-p`` gives a value as
    it is typed: text where a number or a list was meant). The question's numbers
    (``samples``, ``reference_bsz``, ``noise_scale``, ``deadline_h``, ``budget_usd``,
    ``confidence``, ``max_nodes``) are checked by ``Job`` and ``Constraints``, under the same
    names; ``hetero`` is ``Constraints.mixes``, named here as the notebook names it.

    Args:
        model_path: None, or the file ``srifty fit`` wrote (it must exist).
        workload: None, or a training model's name.
        local_bsz: None, or the local batches (``decide.job.whole_batches``).
        objective: one of ``planner.OBJECTIVES``.
        spot, hetero, interactive: True or False.
        probe_runs: a whole number from 0 (none) to ``probes.MAX_PROBES``.
        candidates_file: None, or a candidates table to decide among (CSV, Parquet or JSON
            records: ``tables.files.read_table``; its rows are checked when it is read).

    Raises:
        InputError: the first wrong parameter, with what to give instead.
    """
    import os

    from srifty_kit.decide.probes import MAX_PROBES

    files = {
        "model_path": (
            model_path,
            "the file `srifty fit --out` wrote",
            "to fit the default measurements",
        ),
        "candidates_file": (
            candidates_file,
            "a table of instance_type, num_nodes, num_workers, local_bsz",
            "to search every configuration",
        ),
    }
    for name, (path, what, none) in files.items():
        if path is None:
            continue
        if not isinstance(path, str | os.PathLike) or not str(path).strip():
            raise InputError(
                f"{name} must be a file path, got {path!r}",
                fix=f"give `{name}` as {what}, or None",
            )
        if not os.path.isfile(path):
            raise InputError(
                f"{name}: file not found: {path}", fix=f"give `{name}` as {what}, or None {none}"
            )
    if workload is not None and (not isinstance(workload, str) or not workload.strip()):
        raise InputError(
            f"workload must be the training model's name, got {workload!r}",
            fix="give `workload` as the model names it, or None for its first",
        )
    if local_bsz is not None:
        whole_batches(local_bsz)
    if objective not in OBJECTIVES:
        raise InputError(
            f"unknown objective {objective!r}{did_you_mean(str(objective), OBJECTIVES)}",
            fix="give `objective` as one of " + ", ".join(OBJECTIVES),
        )
    for name, value in (("spot", spot), ("hetero", hetero), ("interactive", interactive)):
        if not isinstance(value, bool | np.bool_):
            raise InputError(
                f"{name} must be True or False, got {value!r}",
                fix=f"give `{name}` as True or False",
            )
    # suggest_probes' own rule for k (errors.is_whole), with 0 for none
    if not (is_whole(probe_runs, least=0) and probe_runs <= MAX_PROBES):
        raise InputError(
            f"probe_runs must be a whole number 0..{MAX_PROBES} (0: none), got {probe_runs!r}",
            fix="give `probe_runs` such as 1, or 0 for none",
        )


def decision_table(frame: pd.DataFrame) -> Any:
    """A search's table (``ranked``, ``pareto``, the suggested probes) as a notebook shows it:
    no index, dollars to the cent, probabilities and efficiencies in percent, hours to two
    decimals, seconds to three significant digits; other columns as they are.

    Args:
        frame: any of those tables, or a selection of its columns.

    Returns:
        A pandas Styler (``display`` renders it; ``.data`` is ``frame`` unchanged).
    """
    formats = {c: f for c in frame.columns if (f := _column_format(str(c))) is not None}
    return frame.style.format(formats, na_rep="—").hide(axis="index")


def _check_panel(
    model: object,
    catalog: pd.DataFrame,
    job: object,
    constraints: object,
    objective: str,
    top: object,
    noise_scales: object = None,
) -> Constraints:
    """The panel's arguments checked before any widget is made (a widget would refuse a
    value outside its options with a TraitError): one InputError naming the argument."""
    if not hasattr(model, "models_"):
        raise InputError(
            f"the panel needs a fitted StepTimeModel, got {type(model).__name__}",
            fix="SearchPanel(StepTimeModel.load('model.json'), catalog, Job(...))",
        )
    if not isinstance(job, Job):
        raise InputError(
            f"job must be a Job, got {type(job).__name__}",
            fix="SearchPanel(model, catalog, Job(...))",
        )
    if not isinstance(constraints, Constraints):
        raise InputError(
            f"constraints must be Constraints, got {type(constraints).__name__}",
            fix="SearchPanel(model, catalog, job, Constraints(...))",
        )
    # as search refuses it; a path here reached search_choices as a string and a TypeError
    validate_catalog(catalog)
    choices = search_choices(model, catalog)
    if job.model not in choices["workloads"]:
        hint = did_you_mean(job.model, choices["workloads"])
        raise InputError(
            f"workload {job.model!r} is not in the model{hint}",
            fix="Job(model=...) one of " + ", ".join(choices["workloads"]),
        )
    if objective not in OBJECTIVES:
        raise InputError(
            f"unknown objective {objective!r}{did_you_mean(objective, OBJECTIVES)}",
            fix="use one of " + ", ".join(OBJECTIVES),
        )
    for family in constraints.families or ():
        if family not in choices["families"]:
            raise InputError(
                f"unknown instance family {family!r}{did_you_mean(family, choices['families'])}",
                fix="Constraints(families=...) among the catalog's GPU families: "
                + ", ".join(choices["families"]),
            )
    if not is_whole(top):
        raise InputError(f"top must be a whole number >= 1, got {top!r}", fix="e.g. top=10")
    if noise_scales is not None and not isinstance(noise_scales, dict):
        raise InputError(
            f"noise_scales must be a dict, got {type(noise_scales).__name__}",
            fix="noise_scales={'workload': its noise scale} (its profile facts' noise_scale)",
        )
    for workload, value in (noise_scales or {}).items():
        if workload not in choices["workloads"]:
            raise InputError(
                f"noise_scales names workload {workload!r}, which is not in the model"
                + did_you_mean(str(workload), choices["workloads"]),
                fix="name workloads among " + ", ".join(choices["workloads"]),
            )
        ok = value is None or (
            isinstance(value, int | float) and not isinstance(value, bool) and value > 0
        )
        if not ok or (value is not None and not math.isfinite(value)):
            raise InputError(
                f"noise_scales[{workload!r}] must be a number > 0 or None, got {value!r}",
                fix="give the profile facts' noise_scale, or None to assume perfect scaling",
            )
    return constraints


class SearchPanel:
    """Controls for the search's questions, the cost-time figure, the ranked table and why.

    Args:
        model: a fitted ``StepTimeModel``.
        catalog: the EC2 catalog (default: the embedded one).
        job: the training job; the panel's workload, samples, local batches and noise scale
            controls replace its model, its samples to the target, its ``local_bsz`` and its
            ``noise_scale`` (its other fields are kept).
        constraints: the starting deadline, budget, confidence, nodes, spot, mixes, families.
        objective: the starting objective (``planner.OBJECTIVES``).
        top: rows in the table.
        noise_scales: each workload's gradient noise scale (its profile facts'
            ``noise_scale``), or None where it was not measured.
        candidates: decide among exactly these configurations (the candidates contract, as
            ``search(..., candidates=)`` and ``srifty search --candidates`` take it): every
            control still applies to them (the deadline, budget and confidence choose among
            them; max nodes, spot, families and GPU models leave rows out, and the message
            says which and why) except the local batches and two-type mixes, which the list
            fixes, so those two controls are disabled. None: every configuration the catalog
            offers.

    Raises:
        InputError: a bad argument, or a candidates table that breaks its contract (one
            line, as ``srifty search --candidates`` says it).

    Choosing another workload sets the local batches to the batches it was profiled at
    (``choices.profiled_batches``; the job's own for the job's workload) and the noise scale to
    its own (``noise_scales``, the job's for the job's workload; none, perfect scaling, when
    unknown), in one update, before it searches; the deadline, budget, confidence, pricing and
    the other controls stay as the user set them.

    ``panel.widget`` is the ipywidgets box (JupyterLab displays the panel itself, followed by
    ``static_html()`` as a static copy for where no widget draws: ``static_copy``);
    ``panel.result`` is the current ``SearchResult``, ``panel.error`` the current error and
    ``panel.evaluated`` the evaluation the result was selected from.
    """

    def __init__(
        self,
        model: StepTimeModel,
        catalog: pd.DataFrame | None = None,
        job: Job | None = None,
        constraints: Constraints | None = None,
        *,
        objective: str = "cost",
        top: int = 10,
        noise_scales: dict[str, float | None] | None = None,
        candidates: pd.DataFrame | None = None,
    ) -> None:
        import ipywidgets as w

        from srifty_kit.catalog.query import load_catalog
        from srifty_kit.decide.planner import validate_candidates

        if job is None:
            raise InputError("the panel needs a Job", fix="SearchPanel(model, catalog, Job(...))")
        catalog = load_catalog() if catalog is None else catalog
        c = _check_panel(
            model, catalog, job, constraints or Constraints(), objective, top, noise_scales
        )
        self.model = model
        self.catalog = catalog
        self.job = job
        self.top = top
        # checked once, each configuration once (a repeat warned of here, not on every move)
        self.candidates = (
            None if candidates is None else validate_candidates(candidates, job, catalog)
        )
        listed = self.candidates is not None
        self.result: SearchResult | None = None
        self.error: Exception | None = None
        self.evaluated: Evaluated | None = None  # what the current result was selected from
        self._cache: OrderedDict[tuple, tuple[Evaluated, dict]] = OrderedDict()
        self._drawn: dict | None = None  # the cloud shown (``_draw``)
        self._bounds: dict[str, tuple[float, float]] | None = None  # the axes' ends drawn
        self._left: dict[tuple, list[str]] = {}  # what searches left out (``_left_out``)
        self._idle: asyncio.TimerHandle | None = None  # work waiting for the kernel's idle
        self._reason: Any = None  # reason_view's widget, made when a cell asks for it
        # each displayed static copy and what it copies (_display_with_copy)
        self._copies: list[tuple[Any, Callable[[], str]]] = []
        choices = search_choices(model, self.catalog)
        # each workload's own batches and noise scale: what choosing it sets those controls to
        self._own = {
            name: (profiled_batches(model, name), (noise_scales or {}).get(name))
            for name in choices["workloads"]
        }
        self._own[job.model] = (job.local_bsz or (), job.noise_scale)
        self._quiet = False  # while a workload switch sets the controls it owns
        samples = job.work.samples
        noise = job.noise_scale
        wide = {"description_width": "90px"}
        self.controls = {
            "workload": w.Dropdown(
                options=choices["workloads"], value=job.model, description="workload", style=wide
            ),
            "samples": w.SelectionSlider(
                options=log_choices(samples, samples / 100, samples * 100, label=readable),
                value=samples,
                description="samples",
                continuous_update=False,
                style=wide,
            ),
            "batches": w.SelectMultiple(
                options=batch_options(self._own.values()),
                value=tuple(job.local_bsz or ()),
                description="local batches",
                rows=4,
                style=wide,
                disabled=listed,  # the candidates list says each configuration's batch
                tooltip="set by the candidates list" if listed else None,
            ),
            "noise_on": w.Checkbox(
                value=noise is not None,
                description="noise scale",
                indent=False,
                layout=w.Layout(width="100px"),
            ),
            "noise": w.SelectionSlider(
                options=noise_choices(noise),
                value=noise or NOISE_START,
                description="samples",
                continuous_update=False,
            ),
            "deadline_on": w.Checkbox(
                value=c.deadline_h is not None,
                description="deadline",
                indent=False,
                layout=w.Layout(width="100px"),
            ),
            "deadline": w.SelectionSlider(
                options=log_choices(c.deadline_h or 10.0, 0.01, 1000.0),
                value=c.deadline_h or 10.0,
                description="hours",
            ),
            "budget_on": w.Checkbox(
                value=c.budget_usd is not None,
                description="budget",
                indent=False,
                layout=w.Layout(width="100px"),
            ),
            "budget": w.SelectionSlider(
                options=log_choices(c.budget_usd or 100.0, 1.0, 1e6, label=readable),
                value=c.budget_usd or 100.0,
                description="USD",
            ),
            "confidence": w.SelectionSlider(
                options=sorted({*np.round(np.arange(0.5, 0.995, 0.01), 2).tolist(), c.confidence}),
                value=c.confidence,
                description="confidence",
                continuous_update=False,
                style=wide,
            ),
            "objective": w.Dropdown(
                options=OBJECTIVES, value=objective, description="objective", style=wide
            ),
            "max_nodes": w.IntSlider(
                value=c.max_nodes,
                min=1,
                max=max(NODE_SLIDER_TOP, c.max_nodes),
                description="max nodes",
                continuous_update=False,
                style=wide,
            ),
            "spot": w.Checkbox(value=c.spot, description="spot allowed", indent=False),
            "mixes": w.Checkbox(
                value=c.mixes and not listed,
                description="two-type mixes",
                indent=False,
                disabled=listed,  # a list names its configurations, mixes none
            ),
            "families": w.SelectMultiple(
                options=family_options(choices["families"], families_not_offered(self.catalog)),
                value=tuple(c.families or ()),
                description="families",
                rows=5,
                style=wide,
            ),
            "gpus": w.SelectMultiple(
                options=choices["gpu_models"],
                value=(),
                description="GPU models",
                rows=5,
                style=wide,
            ),
        }
        for name, control in self.controls.items():
            tag(control, CLASSES[name])
            control.observe(self._changed, names="value")
        self.style = w.HTML(STYLE)
        self.message = tag(w.HTML(), CLASSES["message"])
        self.table = tag(w.HTML(), CLASSES["table"])
        self.why = tag(w.HTML(), CLASSES["why"])
        # what to measure next costs a simulation of the decision (about a second on a full
        # catalog): on demand, so the cheap controls stay fast
        self.probe_button = tag(
            # as wide as its words: the default width cuts it to "What to measu..."
            w.Button(
                description="What to measure next",
                icon="flask",
                layout=w.Layout(width="auto", flex="0 0 auto"),
            ),
            CLASSES["probe_button"],
        )
        self.probe = tag(w.HTML(), CLASSES["probe"])
        self.probe_button.on_click(self._suggest)
        # the cloud's two images: one shown, the other takes the next cloud (``_draw``)
        clear = cloud_png(*(np.zeros(0),) * 3, (1.0, 10.0), (1.0, 10.0), bins=(1, 1))
        self._images = [w.Image(format="png", value=clear) for _ in range(2)]
        self.figure, self.marks, self.scales = self._figure()
        tag(self.figure, CLASSES["figure"])
        caption = w.HTML(f'<div class="srifty-caption">{FIGURE_CAPTION}</div>')
        ctl = self.controls
        left = w.VBox(
            [
                ctl["workload"],
                ctl["samples"],
                ctl["batches"],
                w.HBox([ctl["noise_on"], ctl["noise"]]),
                w.HBox([ctl["deadline_on"], ctl["deadline"]]),
                w.HBox([ctl["budget_on"], ctl["budget"]]),
                ctl["confidence"],
                ctl["objective"],
                ctl["max_nodes"],
                w.HBox([ctl["spot"], ctl["mixes"]]),
                ctl["families"],
                ctl["gpus"],
            ],
            layout=w.Layout(width="400px", flex="0 0 auto"),
        )
        self.widget = tag(
            w.VBox(
                [
                    self.style,
                    w.HBox([left, w.VBox([self.figure, caption])]),
                    self.message,
                    self.table,
                    self.why,
                    w.HBox([self.probe_button, self.probe]),
                ]
            ),
            CLASSES["panel"],
        )
        self.refresh()

    def probes(self, k: int = 1) -> pd.DataFrame | None:
        """The ``k`` short runs worth measuring for the question the controls ask now
        (``suggest_probes`` of the current result); None while the panel cannot search."""
        from srifty_kit.decide.probes import suggest_probes

        return None if self.result is None else suggest_probes(self.result, k=k)

    def _suggest(self, _button=None) -> None:
        """Show the short run worth measuring for the current decision, in a sentence."""
        from srifty_kit.decide.probes import probe_sentence

        probes = self.probes(k=1)
        self.probe.value = "" if probes is None else html.escape(probe_sentence(probes))

    @property
    def explanation(self) -> str:
        """Why the current pick (or why nothing fits), or the current error, in sentences."""
        return self.result.explanation if self.result is not None else str(self.error)

    def reason_view(self) -> Any:
        """``explanation`` as a widget that follows the controls, for a cell below the panel
        (notebook 03's "Why this one"): printed once, the text there named the first pick
        after the controls had moved to another.

        Returns:
            An ipywidgets ``HTML`` (class ``srifty-reason``), the same one on every call; where
            no widget is drawn (a saved notebook, its HTML export) its output reads as the
            explanation it showed when it was displayed.
        """
        import ipywidgets as w

        if self._reason is None:
            panel = self

            class Reason(w.HTML):
                def _repr_mimebundle_(self, **kwargs: Any) -> Any:
                    # the widget's own plain text is its repr cut at 110 characters
                    plain = {"text/plain": panel.explanation}
                    return {**super()._repr_mimebundle_(**kwargs), **plain}

                def _ipython_display_(self) -> None:
                    panel._display_with_copy(self._repr_mimebundle_(), panel._reason_html)

            self._reason = tag(Reason(), CLASSES["reason"])
            self._show_reason()
        return self._reason

    def _reason_html(self) -> str:
        return f'<pre class="srifty-why-text">{html.escape(self.explanation)}</pre>'

    def _show_reason(self) -> None:
        if self._reason is not None:
            # drawn, it hides its static copy, even where the panel is not shown
            self._reason.value = f"<style>{HIDE_COPIES}</style>{self._reason_html()}"

    # -- what the controls ask -------------------------------------------------------------
    def inputs(self) -> tuple[Job, Constraints, str]:
        """The job, constraints and objective the controls set now."""
        v = {name: control.value for name, control in self.controls.items()}
        job = self.job
        batches = tuple(int(b) for b in v["batches"]) or None  # none ticked: the default ones
        noise = float(v["noise"]) if v["noise_on"] else None
        if (v["workload"], batches, noise) != (job.model, job.local_bsz, job.noise_scale):
            job = replace(job, model=v["workload"], local_bsz=batches, noise_scale=noise)
        if float(v["samples"]) != job.work.samples:
            job = replace(job, samples=float(v["samples"]), steps=None, epochs=None)
        constraints = panel_constraints(
            self.catalog,
            deadline_h=float(v["deadline"]) if v["deadline_on"] else None,
            budget_usd=float(v["budget"]) if v["budget_on"] else None,
            confidence=float(v["confidence"]),
            max_nodes=int(v["max_nodes"]),
            spot=bool(v["spot"]),
            mixes=bool(v["mixes"]),
            families=tuple(v["families"]),
            gpu_models=tuple(v["gpus"]),
            # a GPU filter that reaches only types without figures is refused in one line
            model=self.model,
            workload=job.model,
        )
        if v["families"] and not v["gpus"]:
            # families whose every type is retired in the region (p3), or none of whose GPUs
            # can be predicted (g5: the A10G has no figures), are refused in one line, as
            # `srifty search --families` does, not by a search that lists every type it could
            # not reach and advises filters the panel does not have
            names = self.catalog["instance_type"].astype(str)
            types = tuple(names[instance_family(names).isin(list(v["families"])).to_numpy()])
            asked = f"families {', '.join(v['families'])}"
            types = offered_types(self.catalog, types, asked, self.model, job.model)
            check_gpu_figures(self.catalog, types, self.model, job.model, asked)
        return job, constraints, str(v["objective"])

    def _key(self, job: Job, constraints: Constraints) -> tuple[Job, Constraints]:
        """The cache's key of an evaluation: the job and the constraints it is evaluated at,
        without deadline and budget, up to the node slider's top where there are no mixes."""
        top = constraints.max_nodes
        # a list is evaluated at the limit asked: it says which rows the limit left out
        if not constraints.mixes and self.candidates is None:
            top = max(top, self.controls["max_nodes"].max)
        return job, replace(constraints, deadline_h=None, budget_usd=None, max_nodes=top)

    def _cached(self, job: Job, constraints: Constraints) -> Evaluated | None:
        """The kept evaluation that answers ``constraints`` without pricing again, or None."""
        hit = self._cache.get(self._key(job, constraints))
        return hit[0] if hit and hit[0].allows(constraints) else None

    def _evaluated(self, job: Job, constraints: Constraints) -> tuple[Evaluated, dict]:
        """The evaluation ``select`` answers ``constraints`` from and what the figure draws of
        it: its axes' ends and, per node limit, the cloud of the candidates within it.

        Without mixes the candidates are predicted up to the node slider's top: a node limit
        only narrows them (``select``, ``Evaluated.within``), so moving it neither predicts
        nor prices again and the axes stay where they were. Another amount of work or noise
        scale prices the same predictions again (``Evaluated.at``) instead of predicting them,
        up to the top; another confidence or spot choice prices only those within the node
        limit, on the axes already drawn (widened where a new price falls outside them), and
        the rest once, when the limit rises past it. Only the batches, the workload, the type
        filters and mixes predict again."""
        key, limit = self._key(job, constraints), constraints.max_nodes
        wide = key[1]
        if key in self._cache:
            self._cache.move_to_end(key)
            ev, view = self._cache[key]
            if not ev.allows(constraints):  # priced within a lower limit: the rest now
                ev = ev.at(wide) or self._evaluate(job, wide)
                # the same rows first, in the same order: the clouds drawn are still its own
                view.update({k: _widened(view[k], ev.candidates[view["axes"][k][0]]) for k in "xy"})
                self._cache[key] = (ev, view)
        else:
            last = self._cache[next(reversed(self._cache))] if self._cache else None
            # the same work at another confidence or pricing: priced within the limit only,
            # on the axes drawn (a confidence move shifts the cloud, not the frame it is read
            # against); other work scales every time, and gets axes of its own
            same = last is not None and last[0].job == job
            ev = None
            if last is not None:
                ev = last[0].at(replace(wide, max_nodes=limit) if same else wide, job)
            held = last[1] if same and ev is not None else {"x": None, "y": None}
            ev = self._evaluate(job, wide) if ev is None else ev
            axes = cost_time_axes(constraints.confidence)  # the front's coordinates, in words
            times = ev.candidates[axes["x"][0]]
            if held["x"] is None:  # the time axis holds every confidence the slider offers
                levels = stops(self.controls["confidence"])
                times = across_levels(ev.candidates, constraints.confidence, levels)
            view = {
                "clouds": {},  # per node limit: the cloud of the candidates within it
                "axes": axes,
                "x": _widened(held["x"], times),
                "y": _widened(held["y"], ev.candidates[axes["y"][0]]),
            }
            self._cache[key] = (ev, view)
            while len(self._cache) > CACHED_EVALUATIONS:
                self._cache.popitem(last=False)
        ev, view = self._cache[key]
        if limit not in view["clouds"]:
            c, (x, _), (y, _) = ev.within(limit), *view["axes"].values()
            # the image with the ends it was binned over: it is placed there, even on axes
            # widened since (a node limit risen past what a confidence move priced)
            png = cloud_png(c[x], c[y], c["spot"], view["x"], view["y"])
            view["clouds"][limit] = {"png": png, "x": view["x"], "y": view["y"]}
        return ev, {**view, "cloud": view["clouds"][limit]}

    def _evaluate(self, job: Job, constraints: Constraints) -> Evaluated:
        """``planner.evaluate`` of the panel's model and catalog (and candidates list)."""
        return evaluate(self.model, self.catalog, job, constraints, self.candidates)

    def _changed(self, change: dict) -> None:
        if self._quiet:
            return  # a workload switch setting its controls: it searches once, when done
        if change["owner"] is self.controls["workload"]:
            self._switch_workload(change["new"])
            return
        for name in ("deadline", "budget", "noise"):
            box = self.controls[f"{name}_on"]
            if change["owner"] is self.controls[name] and not box.value:
                # moving a deadline, a budget or a noise scale asks for one: a slider left off
                # would move while nothing else did (the box's own observer searches again)
                box.value = True
                return
        self.refresh()

    def _switch_workload(self, workload: str) -> None:
        """Set the controls a workload owns to its own values (its profiled batches, its noise
        scale or none) in one batched update per control, then search once; every other
        control keeps what the user set."""
        batches, noise = self._own[workload]
        ctl = self.controls
        self._quiet = True
        try:
            with ExitStack() as held:
                for name in ("batches", "noise", "noise_on"):
                    held.enter_context(ctl[name].hold_sync())
                ctl["batches"].value = tuple(batches)
                if noise is not None:
                    ctl["noise"].options = noise_choices(noise)
                    ctl["noise"].value = noise
                ctl["noise_on"].value = noise is not None
        finally:
            self._quiet = False
        self.refresh()

    def refresh(self) -> SearchResult | None:
        """Search for what the controls set now and show it (errors as a message)."""
        if getattr(self, "probe", None) is not None and self.probe.value:
            self.probe.value = ""  # a suggestion for the old question would mislead
        try:
            job, constraints, objective = self.inputs()
            ev, view = self._evaluated(job, constraints)
            result = select(ev, constraints, objective=objective, top=self.top)
        except InputError as err:
            self.result, self.error = None, err
            self._show_error(err)
            return None
        self.result, self.error, self.evaluated = result, None, ev
        inputs = {
            "workload": job.model,
            "samples": job.work.samples,
            "deadline": constraints.deadline_h,
            "budget": constraints.budget_usd,
            "confidence": constraints.confidence,
            "objective": objective,
            "max_nodes": constraints.max_nodes,
            "spot": constraints.spot,
            "mixes": constraints.mixes,
            "families": constraints.families or (),
            "instance_types": constraints.instance_types or (),
            "job": json.dumps(asdict(job)),
        }
        # the figure first and the table last: a browser sees the table change last
        self._draw(view, result, constraints)
        # the reason is said once: under the figure for a pick, in the message when none
        why = result.explanation if result.feasible else ""
        self.why.value = f'<pre class="srifty-why-text">{html.escape(why)}</pre>'
        left = self._left_out(result, job.model)
        self.message.value = (
            f'<div class="srifty-ok">{result.n_feasible:,} of {result.n_candidates:,} '
            f"{'listed ' if self.candidates is not None else ''}configurations meet the "
            "constraints.</div>"
            if result.feasible
            else f'<div class="srifty-infeasible">{html.escape(result.explanation)}</div>'
        ) + "".join(f'<div class="srifty-left-out">{html.escape(line)}</div>' for line in left)
        self.table.value = ranked_html(result, inputs)
        self._show_reason()
        self._update_copies()
        self._when_idle(self._price_neighbours)
        return result

    def _when_idle(self, work: Callable[[], None]) -> None:
        """Run ``work`` once the kernel has had nothing to do for ``PREFETCH_AFTER_S``: a
        control's next message cancels it first. Nothing runs without a running event loop
        (a script, a test without one): only a kernel waits for its next message."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._idle = loop.call_later(PREFETCH_AFTER_S, work)

    def _price_neighbours(self) -> None:
        """Price the confidence slider's two neighbouring stops for the controls as they are,
        one per idle turn, so that an arrow key's move to either only selects and draws.
        Only where a confidence is a new price of the same predictions (no mixes: those
        predict again, too much work to do in case)."""
        self._idle = None
        if self.error is not None or self.evaluated is None or self.evaluated.kept is None:
            return
        try:
            job, constraints, _ = self.inputs()
        except InputError:  # the controls moved since without a search: nothing to prepare
            return
        levels = stops(self.controls["confidence"])
        at = levels.index(constraints.confidence)
        for near in levels[at + 1 : at + 2] + levels[max(at - 1, 0) : at]:
            other = replace(constraints, confidence=near)
            if self._cached(job, other) is None:
                current = next(reversed(self._cache))
                self._evaluated(job, other)
                self._cache.move_to_end(current)  # still the evaluation shown: the last used
                self._when_idle(self._price_neighbours)  # the other one, on the next idle turn
                return

    def _left_out(self, result: SearchResult, workload: str) -> list[str]:
        """``left_out_lines`` for ``result``, kept per workload, types searched and types left
        out: a deadline, node-limit or confidence move leaves all three as they were, and
        reading the catalog's GPU rows again cost a move about 8 ms."""
        names = () if result.candidates is None else tuple(map(str, result.candidates.types.names))
        key = (workload, names, tuple(result.skipped.items()))
        if key not in self._left:
            if len(self._left) >= CACHED_EVALUATIONS:
                self._left.clear()
            self._left[key] = left_out_lines(
                result, self.catalog, self.model, workload, "a catalog"
            )
        return self._left[key]

    def _show_error(self, err: Exception) -> None:
        self.message.value = error_html(err)
        self.table.value = '<table class="srifty-ranked" data-error="true"></table>'
        self.why.value = ""
        self._show_reason()
        self._update_copies()
        # every mark, the cloud and the shades too: nothing drawn may come from the search
        # before the error; the next search draws its cloud again
        for name in MARKS:
            if name == "cloud":
                self.marks[name].visible = False
            else:
                set_data(self.marks[name], [], [])
        self._drawn = None

    # -- the figure --------------------------------------------------------------------------
    def _figure(self) -> tuple[Any, dict, dict]:
        import bqplot as bq

        xs = bq.LogScale(allow_padding=False)
        ys = bq.LogScale(allow_padding=False)
        sc = {"x": xs, "y": ys}
        marks = {
            # a density image, not a scatter of dots: every candidate drawn, in one image the
            # browser decodes, where 500 dots cost it a restyle of 500 SVG groups per move
            "cloud": bq.Image(
                image=self._images[0],
                scales=sc,
                pixelated=True,
                labels=["configurations (blue: on-demand, orange: spot)"],
            ),
            "deadline": _shade(
                sc,
                labels=["misses the deadline"],
                colors=["#555555"],
                stroke_width=1.5,
                line_style="dashed",
            ),
            "front": bq.Lines(
                x=[],
                y=[],
                scales=sc,
                colors=["black"],
                interpolation="step-after",
                labels=["Pareto front"],
            ),
            "front_dots": bq.Scatter(
                x=[], y=[], scales=sc, colors=["black"], default_size=16, labels=["front points"]
            ),
            "knee": point_mark(sc, "diamond", "gold", "knee", stroke="black"),
            "pick": point_mark(sc, "square", "crimson", "pick", stroke="black"),
            "nearest": point_mark(sc, "cross", "darkorange", "nearest (infeasible)", size=140),
            "budget": bq.Lines(
                x=[],
                y=[],
                scales=sc,
                colors=["#555555"],
                line_style="dotted",
                labels=[budget_label(0.9)],
            ),
        }
        start = cost_time_axes(0.9)  # each evaluation says its own confidence (_draw)
        axes = [
            bq.Axis(scale=xs, label=start["x"][1], tick_format=TICKS),
            # the cost's name clear of its widest ticks ('200,000'): at bqplot's own offset it
            # was drawn over '10,000' down to '1,000'
            bq.Axis(
                scale=ys,
                label=start["y"][1],
                side="left",
                tick_format=TICKS,
                label_offset="64px",
            ),
        ]
        fig = bq.Figure(
            marks=[marks[name] for name in MARKS],
            axes=axes,
            # the count of what meets the constraints is in the message above: a title that
            # changes would cost the browser one more update per move
            title="Cost-time tradeoff",
            fig_margin={"top": 40, "bottom": 50, "left": 90, "right": 20},  # PLOT_PX
            layout={"width": "560px", "height": "400px"},
            animation_duration=0,
        )
        return fig, marks, sc

    def _draw(self, view: dict, result: SearchResult, constraints: Constraints) -> None:
        m = self.marks
        # every mark in the front's coordinates (``plots.cost_time_axes``): the pick, by any
        # objective, is a point of the front (the search ranks in them), never off it
        (x, x_label), (y, y_label) = view["axes"].values()
        d, b = constraints.deadline_h, constraints.budget_usd
        # a budget under every configuration's cost is drawn all the same, on the axis
        # widened down to it: the line far below the cloud says why nothing fits
        bounds = {"x": view["x"], "y": with_line(view["y"], b)}
        # the axes are the evaluation's (``_evaluated``): a node limit within it keeps them, and
        # a confidence or pricing move keeps them while its prices fit
        cloud = view["cloud"]
        moved = [k for k in "xy" if self._bounds is None or bounds[k] != self._bounds[k]]
        for name, axis in zip("xy", self.figure.axes, strict=True):
            if name in moved:
                with self.scales[name].hold_sync():
                    self.scales[name].min, self.scales[name].max = bounds[name]
                with axis.hold_sync():
                    axis.tick_values = axis_ticks(*bounds[name], name)
        self._bounds = bounds
        if self._drawn is not cloud:  # another evaluation or node limit: another cloud
            for axis, label in zip(self.figure.axes, (x_label, y_label), strict=True):
                if axis.label != label:  # the confidence is in the time's label
                    axis.label = label
            budget = budget_label(constraints.confidence)
            if m["budget"].labels != [budget]:
                m["budget"].labels = [budget]
            # the image not shown takes the new cloud, then the mark shows it: bqplot's image
            # mark draws again when its image widget changes, not when that widget's value does
            spare = self._images[m["cloud"].image is self._images[0]]
            spare.value = cloud["png"]
            with m["cloud"].hold_sync():
                m["cloud"].image, m["cloud"].x, m["cloud"].y = spare, cloud["x"], cloud["y"]
                m["cloud"].visible = True
            self._drawn = cloud
        front = result.pareto
        set_data(m["front"], front[x], front[y])
        set_data(m["front_dots"], front[x], front[y])
        for name, row in (
            ("knee", result.knee),
            ("pick", result.pick),
            ("nearest", result.nearest),
        ):
            if row is None:
                set_data(m[name], [], [])
            else:
                set_data(m[name], [row[x]], [row[y]])
        # what misses the deadline is shaded right of it (the cloud keeps its colours, so a
        # move redraws a few shapes, not thousands of points); the budget is a dotted line, not
        # a shade: it is held to the cost at the confidence, which this axis does not draw
        (x0, x1), (y0, y1) = bounds["x"], bounds["y"]
        set_data(m["budget"], [x0, x1] if b else [], [b, b] if b else [])
        # the last mark: its left edge, from (d, y0) up, is the deadline
        set_data(m["deadline"], [d, x1, x1, d] if d else [], [y0, y0, y1, y1] if d else [])

    def static_html(self) -> str:
        """The panel's answer as it stands, as static HTML: the count (or why nothing fits),
        the ranked table, why the pick and the suggested probe once asked for.

        Returns:
            HTML with the panel's style, without controls or figure (those need a kernel).
        """
        probe = self.probe.value and f"<div>{self.probe.value}</div>"
        return (
            '<div class="srifty-left-out">The search panel as last shown; its controls and '
            "figure need a running kernel (open the notebook in JupyterLab and run it).</div>"
            f"<style>{LOOK}</style>{self.message.value}{self.table.value}{self.why.value}{probe}"
        )

    def _display_with_copy(self, bundle: dict, body: Callable[[], str]) -> None:
        """Display a widget's ``bundle``, then a static copy of ``body()`` that follows the
        controls (``static_copy``), so that a notebook saved at any point reads as it was."""
        from IPython.display import display

        display(bundle, raw=True)
        self._copies.append((display(static_copy(body()), display_id=True), body))

    def _update_copies(self) -> None:
        for handle, body in getattr(self, "_copies", ()):
            handle.update(static_copy(body()))

    def _ipython_display_(self) -> None:
        self._display_with_copy(self.widget._repr_mimebundle_(), self.static_html)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def set_data(mark: Any, x: Any, y: Any, **more: Any) -> None:
    """New data (and any other traits in ``more``) for a bqplot mark, sent to the browser in
    one message; nothing is sent when it holds that data already."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    same = np.array_equal(mark.x, x) and np.array_equal(mark.y, y)
    if same and not more:
        return
    with mark.hold_sync():
        if not same:
            mark.x, mark.y = x, y
        for k, v in more.items():
            setattr(mark, k, v)


def _shade(scales: dict, **style: Any):
    """An empty grey filled polygon: where configurations fail a constraint (``style``
    overrides the stroke: none by default)."""
    import bqplot as bq

    look = {"colors": ["#999999"], "stroke_width": 0, **style}
    return bq.Lines(
        x=[],
        y=[],
        scales=scales,
        fill="inside",
        close_path=True,
        fill_colors=["#999999"],
        fill_opacities=[0.25],
        **look,
    )


def point_mark(scales: dict, marker: str, color: str, label: str, size: int = 120, **style: Any):
    """An empty bqplot scatter for one highlighted configuration (knee, pick, cheapest...)."""
    import bqplot as bq

    return bq.Scatter(
        x=[],
        y=[],
        scales=scales,
        marker=marker,
        colors=[color],
        default_size=size,
        labels=[label],
        **style,
    )
