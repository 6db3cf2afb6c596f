"""Notebook 05's four lesson panels (ipywidgets 8 + bqplot), each wired to one decide.tradeoffs
function: workers x batch x statistical efficiency, spot against on-demand, the batch
controller on a mixed cluster, the point estimate against the upper end.

Each panel has a few controls (selection sliders whose stops are round values, among them the
values its question asks for, labelled in the unit its answer uses), a figure updated in place
(log axes with 1-2-5 ticks and the deadline's) and an answer: the tradeoffs result's
``text()``, in an element (``srifty-answer``) that carries the inputs it was computed for as
JSON (``data-inputs``). Where the reference measurements hold what a figure shows, the measured
points sit beside the model's point estimate and band. ``panel.ask(value)`` moves the lesson's
question control to that stop and returns the answer (how the notebook answers its question
when it runs headless).
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from srifty_kit.decide import tradeoffs
from srifty_kit.decide.job import Constraints, Job
from srifty_kit.decide.planner import evaluate
from srifty_kit.errors import InputError, hours
from srifty_kit.present.plots import log_ticks
from srifty_kit.present.widgets import STYLE, TICKS, error_html, point_mark, set_data, tag

if TYPE_CHECKING:  # pragma: no cover
    from srifty_kit.model.estimator import StepTimeModel

# the reference campaigns whose curves the lessons draw (../shared/reference/measurements)
REFERENCE_FILES = (
    "aws_g4dn12xlarge_placements.csv",  # AWS g4dn.12xlarge, 4x T4
    "sia_rtx2080ti.csv",  # on-premises, 8x RTX 2080 Ti
    "sia_azure_nd40rsv2.csv",  # Azure ND40rs_v2, 8x V100
)
# the catalog rows (vendors' datasheets, with sources) of the reference types that are not EC2
GPU_CATALOG = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_catalog.csv"

# the stops of each question's control: round values, the asked ones among them
NOISE_SCALES = (100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000)
LOCAL_BATCHES = (16, 32, 64, 128, 256, 512)
CHECKPOINT_H = (5 / 60, 10 / 60, 0.25, 0.5, 1, 2, 4, 6, 8, 12, 24)
RESTART_H = (1 / 60, 0.1, 0.25, 0.5, 1, 2)
SLOWDOWNS = (1, 1.5, 2, 3, 4)
DEADLINES_H = (0.25, 0.5, 0.75, 1, 1.5, 2, 3, 4, 6, 8, 12, 24)
# where lesson (d) looks for its start when no stop above has two different picks: round
# deadlines finer than the stops (5 min to 1 h, 0.1 h to 3 h, 0.5 h to 8 h, 1 h to 24 h); a
# pick's interval is narrow where it was measured, so its point and its upper end can both
# fall between two stops
DEADLINE_SEARCH_H = tuple(
    [m / 60 for m in range(5, 60, 5)]
    + [round(1 + i / 10, 1) for i in range(20)]
    + [3 + i / 2 for i in range(10)]
    + list(range(8, 25))
)

BLUE, ORANGE, RED, GREY = "#4c78a8", "#f58518", "#d62728", "#999999"

# the caption under each lesson's figure: what each mark is
CAPTIONS = {
    "scaling": (
        "Blue line: the model's point estimate of the hours to the target; shaded: its "
        "interval at the lesson's level (90%: one run in 20 above it, one below); dashed: the "
        "upper end one can promise at that level (90% of runs within it, as the search "
        "promises). Black dots: measured runs' mean step times turned into hours with the "
        "same steps to the target (the reference campaigns). Blue "
        "diamond: fastest by the point estimate; white diamond: fastest by the upper end. "
        "Grey: more nodes than were measured (extrapolation)."
    ),
    "spot": (
        "Blue: spot's expected cost above its cheapest checkpoint plan (left axis, zoomed to "
        "20%); gold diamond: that cheapest interval; blue diamond: the one chosen; green "
        "line: Young/Daly's interval. Red dots: share of simulated spot runs that miss the "
        "deadline (right axis); grey: intervals so short the checkpoint writes alone pass it. "
        "On-demand, with the same checkpoints, is priced in the answer."
    ),
    "controller": (
        "Left, top: each worker's local batch (blue: the first type's workers, orange: the "
        "second's; red dashed: worker 0, the one that slows down). Left, bottom: the step time "
        "(the slowest worker's); dashed: what keeping the split of the step before the "
        "slowdown would cost. Right: one worker's step against its local batch, the model's "
        "point estimate (line) and interval (shaded) beside the measured steps of the "
        "reference campaigns (dots; a type never measured has none); red dashed: worker 0 "
        "slowed; diamonds: where the controller leaves each worker (red: worker 0), all near "
        "the last step's time (dotted); the legend sits below that plot."
    ),
    "variance": (
        "Share of simulated runs by time to the target (in the unit the deadline is said in): "
        "red, the pick judged by the point estimate; blue, the pick judged by the upper end. "
        "Dashed: the deadline."
    ),
}


def job_inputs(job: Job) -> dict[str, Any]:
    """A job as JSON-ready fields (``Job(**fields)`` rebuilds it, tuples as lists)."""
    return asdict(job)


def answer_html(text: str, inputs: dict[str, Any]) -> str:
    """The answer element: the text, and the inputs it was computed for as JSON."""
    data = html.escape(json.dumps(inputs), quote=True)
    return f'<div class="srifty-answer" data-inputs="{data}">{html.escape(text)}</div>'


def stops(values: tuple, value: Any, label: Any = "{:g}") -> list[tuple[str, Any]]:
    """(label, value) stops of a selection slider: ``values`` and ``value`` (the starting
    one, kept exactly), sorted; ``label`` a format string or a function of the value."""
    text = label.format if isinstance(label, str) else label
    kind = type(value) if isinstance(value, int) else float
    every = sorted({kind(v) for v in values} | {kind(value)})
    return [(text(v), v) for v in every]


def reference_measurements() -> pd.DataFrame | None:
    """The reference campaigns the lessons draw (REFERENCE_FILES in the team's shared
    folder, ``tables.reference.shared_dir``), one table; None when none is there."""
    from srifty_kit.tables.reference import shared_dir

    folder = shared_dir() / "reference" / "measurements"
    files = [folder / name for name in REFERENCE_FILES if (folder / name).is_file()]
    return pd.concat([pd.read_csv(f) for f in files], ignore_index=True) if files else None


def lesson_setup(
    model_path: str | None, workload: str | None, level: float = 0.9
) -> tuple[Any, pd.DataFrame, pd.DataFrame | None, str]:
    """What notebook 05 starts from: (model, catalog, measurements, workload).

    Args:
        model_path: a model file written by ``srifty fit``; None: fit ``workload``'s rows of
            the reference campaigns (else the default measurements) here.
        workload: the training model; None: cifar10 where it was measured, else the first.
        level: the model's interval level.

    Returns:
        The model, the EC2 catalog plus the datasheet rows of the reference types that are not
        EC2 types (when this checkout has them), the reference measurements (None without the
        shared folder) and the workload.

    Raises:
        InputError: the workload was not measured.
    """
    import warnings

    from srifty_kit import StepTimeModel, load_catalog
    from srifty_kit.tables.files import read_table
    from srifty_kit.tables.reference import default_measurements

    catalog = load_catalog()
    if GPU_CATALOG.is_file():
        extra = pd.read_csv(GPU_CATALOG)
        extra = extra[~extra["instance_type"].isin(catalog["instance_type"])]
        catalog = pd.concat([catalog, extra], ignore_index=True)
    measured = reference_measurements()
    if measured is not None:  # only the types the catalog describes
        measured = measured[measured["instance_type"].isin(catalog["instance_type"])]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if model_path:
            model = StepTimeModel.load(model_path)
        else:
            rows = measured if measured is not None else read_table(default_measurements())
            names = sorted(set(rows["model"]))
            workload = workload or ("cifar10" if "cifar10" in names else names[0])
            if workload not in names:
                raise InputError(f"{workload!r} was not measured", fix="one of " + ", ".join(names))
            model = StepTimeModel(level=level).fit(rows[rows["model"] == workload])
    workload = workload or ("cifar10" if "cifar10" in model.models_ else model.models_[0])
    return model, catalog, measured, workload


class Lesson:
    """What the four panels share: controls, a figure, an answer, errors as a message."""

    question = ""  # the name of the control the lesson's question moves

    def __init__(
        self, controls: dict[str, Any], figure: Any, css_class: str, caption: str = ""
    ) -> None:
        import ipywidgets as w

        self.controls = controls
        self.figure = tag(figure, "srifty-figure")
        self.answer = ""
        self.error: Exception | None = None
        self.message = tag(w.HTML(), "srifty-message")
        self.answer_box = tag(w.HTML(), "srifty-lesson-answer")
        for name, control in controls.items():
            tag(control, f"srifty-{name.replace('_', '-')}")
            control.observe(lambda _change: self.refresh(), names="value")
        self.widget = tag(
            w.VBox(
                [
                    w.HTML(STYLE),
                    w.HBox(
                        [
                            w.VBox(
                                list(controls.values()),
                                layout=w.Layout(width="440px", flex="0 0 auto"),
                            ),
                            w.VBox(
                                [
                                    self.figure,
                                    w.HTML(f'<div class="srifty-caption">{caption}</div>'),
                                ]
                            ),
                        ]
                    ),
                    self.message,
                    self.answer_box,
                ]
            ),
            css_class,
        )

    def compute(self) -> tuple[Any, dict[str, Any]]:
        """The tradeoffs result for the controls now, and the inputs it was computed for."""
        raise NotImplementedError

    def draw(self, result: Any) -> None:
        """Put ``result`` on the figure (in place)."""
        raise NotImplementedError

    def refresh(self) -> Any:
        """Compute for the controls now and show it; an InputError becomes the message."""
        try:
            result, inputs = self.compute()
        except InputError as err:
            self.error = err
            self.message.value = error_html(err)
            return None
        self.error = None
        self.message.value = ""
        self.draw(result)
        self.answer = result.text()
        self.answer_box.value = answer_html(self.answer, inputs)
        return result

    def ask(self, value: Any) -> str:
        """Move the question's control to its stop nearest ``value`` and return the answer."""
        control = self.controls[self.question]
        values = [v for _, v in control.options]
        if value not in values:
            value = min(values, key=lambda v: abs(np.log(v / value)))
        control.value = value
        return self.answer if self.error is None else str(self.error)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def _figure(
    marks: list, axes: list, title: str, height: int = 360, width: int = 560, **kw: Any
) -> Any:
    import bqplot as bq

    return bq.Figure(
        marks=marks,
        axes=axes,
        title=title,
        fig_margin={"top": 40, "bottom": 50, "left": 70, "right": 70},
        layout={"width": f"{width}px", "height": f"{height}px"},
        animation_duration=0,
        **kw,
    )


def _selection(values: list[tuple[str, Any]], value: Any, description: str, **kw: Any) -> Any:
    import ipywidgets as w

    kw.setdefault("style", {"description_width": "160px"})
    return w.SelectionSlider(
        options=values,
        value=value,
        description=description,
        layout=w.Layout(width="430px"),
        readout=True,
        **kw,
    )


def _dropdown(options: list, value: Any, description: str) -> Any:
    import ipywidgets as w

    return w.Dropdown(
        options=options,
        value=value,
        description=description,
        style={"description_width": "160px"},
        layout=w.Layout(width="430px"),
    )


def _apart(low: float, high: float) -> float:
    """How far apart (|log(a / b)|) two ticks of a lesson's log axis from ``low`` to ``high``
    must be for their labels to stay apart: a twelfth of the axis (35 of the 420 pixels a
    lesson's plot is wide), 20% at least."""
    return max(0.2, float(np.log(high / low)) / 12)


def _log_range(scale: Any, axis: Any, values: Any, extra: tuple = (), margin: float = 1.15):
    """Fit a log scale around ``values`` (and ``extra``) and tick it 1-2-5 plus ``extra``."""
    v = np.asarray([*np.ravel(values), *extra], float)
    v = v[np.isfinite(v) & (v > 0)]
    if v.size == 0:
        return
    low, high = float(v.min() / margin), float(v.max() * margin)
    near = _apart(low, high)
    ticks = log_ticks(low, high, extra, near=near)
    if len(ticks) > 9:
        ticks = log_ticks(low, high, extra, steps=(1,), near=near)
    for finer in ((1, 1.5, 2, 3, 5, 7), (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8)):
        if len(ticks) >= 4:
            break
        # a range under a decade: 1-2-5 leaves one tick or two
        ticks = log_ticks(low, high, extra, steps=finer, near=near)
    with scale.hold_sync():
        scale.min, scale.max = low, high
    ticks = np.asarray(ticks, float)
    if not np.array_equal(axis.tick_values, ticks):  # unchanged ticks: nothing sent
        axis.tick_values = ticks


def _line(scales: dict, color: str, label: str, **style: Any) -> Any:
    import bqplot as bq

    return bq.Lines(x=[], y=[], scales=scales, colors=[color], labels=[label], **style)


# the traits that draw a mark's legend entry: its key repeats them
KEY_TRAITS = (
    "colors", "line_style", "stroke_width", "marker", "marker_size", "stroke", "default_size",
)  # fmt: skip


def _key(marks: list, width: int) -> Any:
    """A figure that holds only the legend of ``marks``, set below their plot: each entry is
    the mark drawn again without data (its colours, stroke and marker) and follows its label,
    so the legend covers none of the plot's data whatever the data are (bqplot draws a legend
    only inside the plot area)."""
    import bqplot as bq
    import traitlets

    scales = {"x": bq.LinearScale(min=0, max=1), "y": bq.LinearScale(min=0, max=1)}
    copies = []
    for mark in marks:
        style = {k: getattr(mark, k) for k in KEY_TRAITS if mark.has_trait(k)}
        # bqplot gives a line an entry only where it has one: a line of gaps draws nothing
        nothing = [np.nan, np.nan] if isinstance(mark, bq.Lines) else []
        copy = type(mark)(
            x=[0.0, 1.0][: len(nothing)], y=nothing, scales=scales, display_legend=True, **style
        )
        traitlets.dlink((mark, "labels"), (copy, "labels"))
        copies.append(copy)
    rows = 16 * (len(copies) + 1)  # bqplot's legend: 16 px a row, and one row's margin
    return bq.Figure(
        marks=copies,
        axes=[],
        fig_margin={"top": 0, "bottom": 0, "left": 70, "right": 20},
        layout={"width": f"{width}px", "height": f"{rows + 12}px"},
        legend_location="top-left",
        animation_duration=0,
    )


class ScalingLesson(Lesson):
    """(a) Workers x batch x statistical efficiency: time to the target as workers grow on one
    instance type, fastest by the point estimate and by the upper end; the question moves the
    gradient noise scale."""

    question = "noise_scale"

    def __init__(
        self,
        model: StepTimeModel,
        catalog: pd.DataFrame,
        job: Job,
        instance_types: tuple[str, ...] | None = None,
        local_bsz: int = 64,
        max_nodes: int = 16,
        level: float = 0.9,
        measurements: pd.DataFrame | None = None,
    ) -> None:
        import bqplot as bq

        self.model, self.catalog, self.job = model, catalog, job
        self.max_nodes, self.level, self.measurements = max_nodes, level, measurements
        known = set(catalog["instance_type"])
        if instance_types is None:  # the measured types only, those with EC2 prices first
            priced = set(catalog.loc[catalog["ondemand_usd_per_hr"].notna(), "instance_type"])
            instance_types = tuple(
                sorted(
                    (t for t in tradeoffs.measured_types(model, job.model) if t in known),
                    key=lambda t: (t not in priced, t),
                )
            )
        measured = set(tradeoffs.measured_types(model, job.model))
        options = [
            (t if t in measured else f"{t} (never measured)", t)
            for t in dict.fromkeys(instance_types)
        ]
        noise = float(job.noise_scale or 2000.0)
        controls = {
            "noise_scale": _selection(stops(NOISE_SCALES, noise, "{:,.0f}"), noise, "noise scale"),
            "local_bsz": _selection(
                stops(LOCAL_BATCHES, int(local_bsz), "{:.0f}"), int(local_bsz), "local batch"
            ),
            "instance_type": _dropdown(options, options[0][1], "instance type"),
        }
        xs, ys = bq.LogScale(), bq.LogScale()
        sc = {"x": xs, "y": ys}
        self.marks = {
            "beyond": bq.Lines(
                x=[], y=[], scales=sc, colors=[GREY], stroke_width=0, fill="inside",
                close_path=True, fill_colors=[GREY], fill_opacities=[0.2],
                labels=["more nodes than measured"],
            ),
            "band": bq.Lines(
                x=[], y=[], scales=sc, colors=[BLUE], stroke_width=0, fill="between",
                fill_colors=[BLUE], fill_opacities=[0.18], labels=["interval"],
            ),
            "point": _line(sc, BLUE, "point estimate", marker="circle", marker_size=24),
            "upper": _line(sc, BLUE, "upper end", line_style="dashed"),
            "measured": bq.Scatter(
                x=[], y=[], scales=sc, colors=["black"], default_size=36, labels=["measured"],
            ),
            "fastest": point_mark(sc, "diamond", BLUE, "fastest (point)", 180, stroke="black"),
            "fastest_upper": point_mark(
                sc, "diamond", "white", "fastest (upper end)", 180, stroke="black"
            ),
        }  # fmt: skip
        self.axes = {
            "x": bq.Axis(scale=xs, label="workers", tick_format="d"),
            "y": bq.Axis(scale=ys, label="hours to the target", side="left", tick_format=TICKS),
        }
        figure = _figure(list(self.marks.values()), list(self.axes.values()), "Time to the target")
        self.scales = sc
        super().__init__(controls, figure, "srifty-lesson-scaling", CAPTIONS["scaling"])
        self.refresh()

    def compute(self) -> tuple[tradeoffs.Scaling, dict[str, Any]]:
        """``tradeoffs.scaling`` with the job's noise scale replaced by the control's."""
        v = {k: c.value for k, c in self.controls.items()}
        job = replace(self.job, noise_scale=float(v["noise_scale"]))
        args = {
            "instance_type": v["instance_type"],
            "local_bsz": int(v["local_bsz"]),
            "max_nodes": self.max_nodes,
            "level": self.level,
        }
        result = tradeoffs.scaling(
            self.model, self.catalog, job, measurements=self.measurements, **args
        )
        return result, {"job": job_inputs(job), **args}

    def draw(self, result: tradeoffs.Scaling) -> None:
        """Point, band and upper end over workers; the measured points; both fastest marks;
        the extrapolated range shaded."""
        t, m = result.table, self.marks
        x = t["num_workers"].to_numpy(float)
        _log_range(self.scales["x"], self.axes["x"], x, margin=1.1)
        _log_range(self.scales["y"], self.axes["y"], t[["band_lo_h", "band_hi_h"]].to_numpy())
        (y0, y1) = self.scales["y"].min, self.scales["y"].max
        set_data(m["band"], x, np.vstack([t["band_lo_h"], t["band_hi_h"]]))
        set_data(m["point"], x, t["time_h"])
        set_data(m["upper"], x, t["time_hi_h"])
        seen = result.measured
        set_data(m["measured"], seen["num_workers"], seen["measured_time_h"])
        far = [w for w, n in zip(x, t["num_nodes"], strict=True) if result.basis.beyond(n)]
        if not result.basis.measured:
            far = list(x)
        if far:
            a, b = far[0] / 1.05, x.max() * 1.1
            set_data(m["beyond"], [a, b, b, a], [y0, y0, y1, y1])
        else:
            set_data(m["beyond"], [], [])
        f, u = result.fastest, result.fastest_upper
        set_data(m["fastest"], [f["num_workers"]], [f["time_h"]])
        set_data(m["fastest_upper"], [u["num_workers"]], [u["time_hi_h"]])


class SpotLesson(Lesson):
    """(b) Spot against on-demand: interruption rate, checkpoint interval and restart cost;
    the question moves the checkpoint interval."""

    question = "checkpoint_interval"

    def __init__(
        self,
        model: StepTimeModel,
        catalog: pd.DataFrame,
        job: Job,
        instance_type: str = "g4dn.12xlarge",
        num_nodes: int = 8,
        local_bsz: int = 64,
        deadline_h: float | None = None,
        level: float = 0.9,
        runs: int = 2000,
    ) -> None:
        import bqplot as bq

        from srifty_kit.tables.contracts import INTERRUPTION_BUCKETS

        self.model, self.catalog, self.job = model, catalog, job
        self.instance_type, self.num_nodes, self.local_bsz = instance_type, num_nodes, local_bsz
        self.level, self.runs = level, runs
        if deadline_h is None:  # fixed once: 3% over the on-demand time at the first interval
            deadline_h = tradeoffs.spot_deadline(
                model, catalog, job, instance_type, num_nodes, local_bsz, level=level
            )
        self.deadline_h = deadline_h
        self._curves: dict[tuple, tradeoffs.SpotCurve] = {}
        bucket = tradeoffs.listed_bucket(catalog, instance_type)
        controls = {
            "checkpoint_interval": _selection(
                stops(CHECKPOINT_H, job.checkpoint_interval_h, hours),
                float(job.checkpoint_interval_h), "checkpoint every",
            ),
            "bucket": _dropdown(
                [(f"{b} of capacity a month", b) for b in INTERRUPTION_BUCKETS], bucket,
                "Spot Advisor reclaims",
            ),
            "restart": _selection(
                stops(RESTART_H, job.restart_h, hours), float(job.restart_h), "restart takes"
            ),
        }  # fmt: skip
        xs, ys, ms = bq.LogScale(), bq.LinearScale(min=0, max=0.2), bq.LinearScale(min=0, max=1)
        sc = {"x": xs, "y": ys}
        self.marks = {
            "writes": bq.Lines(
                x=[], y=[], scales=sc, colors=[GREY], stroke_width=0, fill="inside",
                close_path=True, fill_colors=[GREY], fill_opacities=[0.25],
                labels=["checkpoint writes alone pass the deadline"],
            ),
            "spot": _line(sc, BLUE, "spot, expected cost above its cheapest plan", stroke_width=2),
            "miss": bq.Lines(
                x=[], y=[], scales={"x": xs, "y": ms}, colors=[RED], marker="circle",
                marker_size=12, stroke_width=1, labels=["spot runs missing the deadline"],
            ),
            "young_daly": _line(sc, "#2ca02c", "Young/Daly interval", line_style="dashed"),
            "best": point_mark(sc, "diamond", "gold", "cheapest interval", 180, stroke="black"),
            "now": point_mark(sc, "diamond", BLUE, "this interval", 140, stroke="black"),
        }  # fmt: skip
        self.axes = {
            "x": bq.Axis(scale=xs, label="checkpoint interval (h)", tick_format=TICKS),
            "y": bq.Axis(
                scale=ys, label="cost above the cheapest plan", side="left", tick_format=".0%",
                tick_values=np.linspace(0, 0.2, 5),
            ),
            "miss": bq.Axis(
                scale=ms, label="share missing the deadline", side="right", tick_format=".0%",
                label_offset="48px",  # clear of the tick labels
            ),
        }  # fmt: skip
        self.scales = sc
        figure = _figure(
            list(self.marks.values()), list(self.axes.values()), "Spot: when to checkpoint"
        )
        super().__init__(controls, figure, "srifty-lesson-spot", CAPTIONS["spot"])
        self.refresh()

    def compute(self) -> tuple[tradeoffs.SpotTradeoff, dict[str, Any]]:
        """``tradeoffs.spot_tradeoff`` with the job's checkpoint interval and restart from the
        controls, reclaims at the chosen bucket."""
        v = {k: c.value for k, c in self.controls.items()}
        job = replace(
            self.job,
            checkpoint_interval_h=float(v["checkpoint_interval"]),
            restart_h=float(v["restart"]),
        )
        args = {
            "instance_type": self.instance_type,
            "num_nodes": self.num_nodes,
            "local_bsz": self.local_bsz,
            "bucket": v["bucket"],
            "deadline_h": self.deadline_h,
            "level": self.level,
            "runs": self.runs,
        }
        # the curve over intervals does not move with the checkpoint interval: computed once
        # per (bucket, restart), a move of the interval prices one plan and simulates it
        key = (v["bucket"], float(v["restart"]))
        curve = self._curves.get(key)
        if curve is None:
            curve = tradeoffs.spot_curve(self.model, self.catalog, job, **args)
            self._curves[key] = curve
        result = tradeoffs.spot_tradeoff(self.model, self.catalog, job, curve=curve, **args)
        return result, {"job": job_inputs(job), **args}

    def draw(self, result: tradeoffs.SpotTradeoff) -> None:
        """Spot's cost above its cheapest plan and the miss share over intervals; the cheapest,
        the chosen and Young/Daly's interval; where the writes alone pass the deadline."""
        grid, m = result.by_interval, self.marks
        x = grid["checkpoint_interval_h"].to_numpy(float)
        marked = (result.best["interval_h"], result.checkpoint_interval_h)
        yd = result.young_daly_h if np.isfinite(result.young_daly_h) else None
        _log_range(self.scales["x"], self.axes["x"], x, margin=1.0)
        self.axes["x"].tick_values = np.asarray(
            log_ticks(
                x.min(),
                x.max(),
                tuple(v for v in marked if v) + ((yd,) if yd else ()),
                near=_apart(x.min(), x.max()),
            ),
            float,
        )
        set_data(m["spot"], x, grid["above_best"])
        set_data(m["miss"], x, grid["miss_share"])
        set_data(m["young_daly"], [yd, yd] if yd else [], [0, 0.2] if yd else [])
        set_data(m["best"], [result.best["interval_h"]], [0.0])
        now = result.expected["cost_usd"] / result.best["cost_usd"] - 1
        set_data(m["now"], [result.checkpoint_interval_h], [min(now, 0.2)])
        edge = min(result.all_miss_below_h, x.max())
        if edge > x.min():
            set_data(m["writes"], [x.min(), edge, edge, x.min()], [0, 0, 0.2, 0.2])
        else:
            set_data(m["writes"], [], [])


class ControllerLesson(Lesson):
    """(c) A two-type cluster balanced by OmniLearn's proportional controller, step by step,
    beside each type's one-worker step against its batch (the model's and the measured); the
    question slows worker 0 down mid-run."""

    question = "slow_factor"

    def __init__(
        self,
        model: StepTimeModel,
        catalog: pd.DataFrame,
        job: Job,
        instance_types: tuple[str, str] = ("g4dn.12xlarge", "g6.12xlarge"),
        num_nodes: tuple[int, int] = (1, 1),
        local_bsz: int = 64,
        steps: int = 40,
        slow_at: int = 20,
        measurements: pd.DataFrame | None = None,
        level: float = 0.9,
    ) -> None:
        import bqplot as bq
        import ipywidgets as w

        self.model, self.catalog, self.job = model, catalog, job
        self.instance_types, self.num_nodes = tuple(instance_types), tuple(num_nodes)
        self.local_bsz, self.steps, self.slow_at = local_bsz, steps, slow_at
        self.measurements, self.level = measurements, level
        a, b = self.instance_types
        controls = {
            "slow_factor": _selection(
                stops(SLOWDOWNS, 1.0, "{:g}x"), 1.0, f"worker 0 ({a}) slows by",
                style={"description_width": "230px"},
            )
        }  # fmt: skip
        xs, bs, ts = bq.LinearScale(), bq.LinearScale(min=0), bq.LinearScale(min=0)
        self.marks = {
            "batches": bq.Lines(
                x=[], y=[], scales={"x": xs, "y": bs}, labels=["local batch per worker"],
            ),
            "worker0": _line({"x": xs, "y": bs}, RED, "worker 0", stroke_width=4,
                             line_style="dashed"),
            "step": _line({"x": xs, "y": ts}, "black", "step time", stroke_width=3),
            "kept": _line({"x": xs, "y": ts}, "black", "old split kept", line_style="dashed"),
        }  # fmt: skip
        top = _figure(
            [self.marks["batches"], self.marks["worker0"]],
            [
                bq.Axis(scale=xs, label="step", tick_format="d"),
                bq.Axis(scale=bs, label="local batch per worker", side="left", tick_format="d"),
            ],
            "Each worker's local batch, step by step",
            height=300,
        )
        bottom = _figure(
            [self.marks["step"], self.marks["kept"]],
            [
                bq.Axis(scale=xs, label="step", tick_format="d"),
                bq.Axis(scale=ts, label="step time (ms)", side="left", tick_format=TICKS),
            ],
            "Step time (the slowest worker's)",
            height=240,
        )
        # one worker's step against its batch: the model's lines and band, the measured points
        measured = set(tradeoffs.measured_types(model, job.model))
        lx, ly = bq.LinearScale(min=0), bq.LinearScale(min=0)
        sc = {"x": lx, "y": ly}
        self.line_scales = sc

        def kind(t: str) -> str:
            return "model" if t in measured else "model (never measured)"

        def band(color: str) -> Any:
            return bq.Lines(
                x=[], y=[], scales=sc, colors=[color], stroke_width=0, fill="between",
                fill_colors=[color], fill_opacities=[0.15],
            )  # fmt: skip

        def seen(color: str, label: str) -> Any:
            return bq.Scatter(
                x=[], y=[], scales=sc, colors=[color], stroke="black", default_size=40,
                labels=[label],
            )  # fmt: skip

        self.line_marks = {
            "band_a": band(BLUE),
            "band_b": band(ORANGE),
            "model_a": _line(sc, BLUE, f"{a}: {kind(a)}", stroke_width=2),
            "model_b": _line(sc, ORANGE, f"{b}: {kind(b)}", stroke_width=2),
            "slowed": _line(sc, RED, "worker 0 slowed", line_style="dashed", stroke_width=2),
            "measured_a": seen(BLUE, f"{a}: measured"),
            "measured_b": seen(ORANGE, f"{b}: measured"),
            "level": _line(sc, GREY, "last step's time", line_style="dotted"),
            "settled": bq.Scatter(
                x=[], y=[], scales=sc, marker="diamond", stroke="black", default_size=110,
                colors=[BLUE], labels=["each worker at the last step"],
            ),
        }  # fmt: skip
        lines = _figure(
            list(self.line_marks.values()),
            [
                bq.Axis(scale=lx, label="local batch (samples per worker)", tick_format="d"),
                bq.Axis(scale=ly, label="one worker's step (ms)", side="left", tick_format=TICKS),
            ],
            "One worker's step against its batch",
            height=420,
            width=500,
        )
        # the legend below the plot: inside it, it covered the slowed worker's dashed line
        keyed = ("model_a", "model_b", "slowed", "measured_a", "measured_b", "settled")
        self.key = _key([self.line_marks[k] for k in keyed], width=500)
        super().__init__(
            controls,
            w.HBox([w.VBox([top, bottom]), w.VBox([lines, self.key])]),
            "srifty-lesson-controller",
            CAPTIONS["controller"],
        )
        self.refresh()

    def compute(self) -> tuple[tradeoffs.ControllerLesson, dict[str, Any]]:
        """``tradeoffs.controller_lesson`` with the control's slowdown."""
        factor = float(self.controls["slow_factor"].value)
        args = {
            "instance_types": self.instance_types,
            "num_nodes": self.num_nodes,
            "local_bsz": self.local_bsz,
            "steps": self.steps,
            "slow_at": self.slow_at,
            "slow_factor": factor,
            "level": self.level,
        }
        result = tradeoffs.controller_lesson(
            self.model, self.catalog, self.job, measurements=self.measurements, **args
        )
        return result, {"job": job_inputs(self.job), **args}

    def draw(self, result: tradeoffs.ControllerLesson) -> None:
        """One line per worker (worker 0 highlighted), the step time in ms and, after the
        slowdown, what the old split would cost; each type's one-worker step against its batch
        (model, band, measured), worker 0's slowed line and where each worker ends."""
        wide = result.trace.pivot(index="step", columns="worker", values="local_bsz")
        colors = [BLUE if t == result.instance_types[0] else ORANGE for t in
                  result.trace.drop_duplicates("worker")["instance_type"]]  # fmt: skip
        set_data(self.marks["batches"], wide.index, wide.to_numpy(float).T, colors=colors)
        set_data(self.marks["worker0"], wide.index, wide[0].to_numpy(float))
        step = result.trace.groupby("step")["step_time_s"].first() * 1000
        set_data(self.marks["step"], step.index, step)
        if result.slow_factor != 1:
            kept = result.summary["slowed_step_s"] * 1000
            set_data(self.marks["kept"], [result.slow_at, step.index.max()], [kept, kept])
        else:
            set_data(self.marks["kept"], [], [])
        m, ms = self.line_marks, 1000
        for key, name in zip("ab", result.instance_types, strict=True):
            c = result.curves[result.curves["instance_type"] == name]
            x = c["local_bsz"].to_numpy(float)
            set_data(m[f"model_{key}"], x, c["step_s"] * ms)
            set_data(m[f"band_{key}"], x, np.vstack([c["step_lo_s"], c["step_hi_s"]]) * ms)
            seen = result.measured[result.measured["instance_type"] == name]
            set_data(m[f"measured_{key}"], seen["local_bsz"], seen["measured_s"] * ms)
            if key == "a" and result.slow_factor != 1:
                set_data(m["slowed"], x, c["step_s"] * ms * result.slow_factor,
                         labels=[f"worker 0 slowed {result.slow_factor:g}x"])  # fmt: skip
            elif key == "a":
                set_data(m["slowed"], [], [])
        last = result.settled
        worker0 = last["worker"].to_numpy() == 0
        first = last["instance_type"].to_numpy() == result.instance_types[0]
        colors = np.where(worker0, RED, np.where(first, BLUE, ORANGE))
        order = np.argsort(worker0, kind="stable")  # worker 0 drawn last, on top
        set_data(
            m["settled"], last["local_bsz"].to_numpy(float)[order],
            last["compute_s"].to_numpy(float)[order] * ms, colors=list(colors[order]),
        )  # fmt: skip
        top = float(last["step_time_s"].iloc[0]) * ms
        set_data(m["level"], [0, float(result.curves["local_bsz"].max())], [top, top])
        # the slowed line may run off the top: the types' lines and dots set the range
        high = max(result.curves["step_hi_s"].max(), result.measured["measured_s"].max()
                   if len(result.measured) else 0.0) * ms  # fmt: skip
        self.line_scales["y"].max = float(high) * 1.1


class VarianceLesson(Lesson):
    """(d) The same deadline judged by the point estimate and by the upper end, with how
    often each pick misses it; the question moves the deadline."""

    question = "deadline"

    def __init__(
        self,
        model: StepTimeModel,
        catalog: pd.DataFrame,
        job: Job,
        deadline_h: float | None = None,
        confidence: float = 0.9,
        max_nodes: int = 16,
        runs: int = 10_000,
    ) -> None:
        import bqplot as bq

        self.model, self.catalog, self.job = model, catalog, job
        self.constraints = Constraints(confidence=confidence, max_nodes=max_nodes)
        self.runs = runs
        # once: arrays; over the types with an on-demand price (the picks are judged by cost)
        priced = catalog[catalog["ondemand_usd_per_hr"].notna()]
        self.evaluated = evaluate(model, priced, job, self.constraints)
        if deadline_h is None:  # start where the two rules pick apart and disagree most:
            # of the stops, else of finer round deadlines (it becomes a stop), else 1 h
            found = tradeoffs.disagreeing_deadline(self.evaluated, DEADLINES_H)
            if found is None:
                found = tradeoffs.disagreeing_deadline(self.evaluated, DEADLINE_SEARCH_H)
            deadline_h = found if found is not None else 1.0
        controls = {
            "deadline": _selection(
                stops(DEADLINES_H, deadline_h, hours), float(deadline_h), "deadline"
            )
        }
        xs, ys = bq.LogScale(), bq.LinearScale(min=0)
        sc = {"x": xs, "y": ys}
        # a legend on the figure: which histogram is which pick is the lesson's whole point
        self.marks = {
            "point": _line(sc, RED, "pick by point estimate", interpolation="step-after",
                           display_legend=True),
            "upper": _line(sc, BLUE, "pick by upper end", interpolation="step-after",
                           display_legend=True),
            "deadline": _line(sc, "black", "deadline", line_style="dashed", display_legend=True),
        }  # fmt: skip
        self.axes = {
            "x": bq.Axis(scale=xs, label="hours to the target (simulated runs)", tick_format=TICKS),
            "y": bq.Axis(scale=ys, label="share of runs", side="left", tick_format=".0%"),
        }
        self.scales = sc
        figure = _figure(
            list(self.marks.values()),
            list(self.axes.values()),
            "How long the two picks really take",
            legend_location="top-left",  # the runs' left tail lies low: the corner is free
            legend_style={"fill": "white", "opacity": 0.9},
        )
        super().__init__(controls, figure, "srifty-lesson-variance", CAPTIONS["variance"])
        self.refresh()

    def compute(self) -> tuple[tradeoffs.Judgement, dict[str, Any]]:
        """``tradeoffs.deadline_judgement`` of the evaluation made once, at the control's
        deadline."""
        deadline = float(self.controls["deadline"].value)
        inputs = {
            "job": job_inputs(self.job),
            "confidence": self.constraints.confidence,
            "max_nodes": self.constraints.max_nodes,
            "deadline_h": deadline,
            "runs": self.runs,
        }
        return tradeoffs.deadline_judgement(self.evaluated, deadline, runs=self.runs), inputs

    def draw(self, result: tradeoffs.Judgement) -> None:
        """Each pick's distribution of simulated run times, and the deadline (with a tick), in
        the unit the slider and the answer say the deadline in: minutes below an hour (the
        tick '45' where they say '45 min', not '0.75'), hours from one."""
        minutes = hours(result.deadline_h).endswith(" min")
        unit = 60.0 if minutes else 1.0
        label = f"{'minutes' if minutes else 'hours'} to the target (simulated runs)"
        if self.axes["x"].label != label:
            self.axes["x"].label = label
        edges, shares = result.histogram()
        edges, deadline = edges * unit, result.deadline_h * unit
        top = max((float(s.max()) for s in shares.values()), default=1.0)
        _log_range(self.scales["x"], self.axes["x"], edges, (deadline,), margin=1.05)
        for rule in ("point", "upper"):
            share = shares.get(rule)
            if share is None:
                set_data(self.marks[rule], [], [])
            else:
                set_data(self.marks[rule], edges, np.append(share, share[-1]))
        set_data(self.marks["deadline"], [deadline, deadline], [0.0, top])
        # the top third stays empty for the legend: a tall narrow peak never hides behind it
        if self.scales["y"].max != top * 1.45:
            self.scales["y"].max = top * 1.45


def show(lesson: Lesson, interactive: bool, ask: tuple = ()) -> None:
    """The panel in JupyterLab; headless (papermill), its answer now and at each ``ask``."""
    from IPython.display import display

    if interactive:
        display(lesson)
        return
    print(lesson.answer)
    for value in ask:
        answer = lesson.ask(value)
        moved = lesson.controls[lesson.question].label
        print(f"\n-- {lesson.question.replace('_', ' ')} moved to {moved}:")
        print(answer)
