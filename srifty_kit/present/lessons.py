"""Notebook 05's four lesson panels (ipywidgets 8 + bqplot), each wired to one decide.tradeoffs
function: workers x batch x statistical efficiency, spot against on-demand, the batch
controller on a mixed cluster, the point estimate against the upper end.

Each panel has a few controls, a figure updated in place and an answer: the tradeoffs
result's ``text()``, in an element (``srifty-answer``) that carries the inputs it was computed
for as JSON (``data-inputs``). ``panel.ask(value)`` sets the lesson's question control and
returns the answer (how the notebook answers its question when it runs headless).
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from srifty_kit.decide import tradeoffs
from srifty_kit.decide.job import Constraints, Job
from srifty_kit.decide.planner import evaluate
from srifty_kit.errors import InputError
from srifty_kit.present.widgets import STYLE, error_html, log_choices, point_mark, set_data, tag

if TYPE_CHECKING:  # pragma: no cover
    from srifty_kit.model.estimator import StepTimeModel


# the caption under each lesson's figure: what each mark is
CAPTIONS = {
    "scaling": (
        "Blue circles: hours to the target (left axis); red squares: dollars (right axis); both "
        "upper ends. Diamonds: the cheapest and the fastest worker counts."
    ),
    "spot": (
        "Blue: spot's expected cost over checkpoint intervals (diamond: the chosen one); dashed: "
        "on-demand's cost; red dots: share of simulated spot runs that miss the deadline (right "
        "axis)."
    ),
    "controller": (
        "One line per worker: its local batch (left axis; blue: the first type, orange: the "
        "second). Black: the step time, the slowest worker's (right axis)."
    ),
    "variance": (
        "Share of simulated runs by hours to the target: red, the pick judged by the point "
        "estimate; blue, the pick judged by the upper end. Dashed: the deadline."
    ),
}


def job_inputs(job: Job) -> dict[str, Any]:
    """A job as JSON-ready fields (``Job(**fields)`` rebuilds it, tuples as lists)."""
    return asdict(job)


def answer_html(text: str, inputs: dict[str, Any]) -> str:
    """The answer element: the text, and the inputs it was computed for as JSON."""
    data = html.escape(json.dumps(inputs), quote=True)
    return f'<div class="srifty-answer" data-inputs="{data}">{html.escape(text)}</div>'


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
                                layout=w.Layout(width="420px", flex="0 0 auto"),
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
        stops = [v for _, v in control.options]
        if value not in stops:
            value = min(stops, key=lambda v: abs(np.log(v / value)))
        control.value = value
        return self.answer if self.error is None else str(self.error)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)


def _figure(marks: list, axes: list, title: str) -> Any:
    import bqplot as bq

    return bq.Figure(
        marks=marks,
        axes=axes,
        title=title,
        fig_margin={"top": 40, "bottom": 50, "left": 70, "right": 70},
        layout={"width": "540px", "height": "360px"},
        animation_duration=0,
    )


def _selection(values: list[tuple[str, Any]], value: Any, description: str, **kw: Any) -> Any:
    import ipywidgets as w

    return w.SelectionSlider(
        options=values,
        value=value,
        description=description,
        style={"description_width": "130px"},
        layout=w.Layout(width="410px"),
        readout=True,
        **kw,
    )


class ScalingLesson(Lesson):
    """(a) Workers x batch x statistical efficiency: time and cost to the target as workers
    grow on one instance type; the question moves the gradient noise scale."""

    question = "noise_scale"

    def __init__(
        self,
        model: StepTimeModel,
        catalog: pd.DataFrame,
        job: Job,
        instance_types: tuple[str, ...] = ("g4dn.12xlarge", "g6.12xlarge", "p4d.24xlarge"),
        local_bsz: int = 64,
        max_nodes: int = 16,
        level: float = 0.9,
    ) -> None:
        import bqplot as bq
        import ipywidgets as w

        self.model, self.catalog, self.job = model, catalog, job
        self.max_nodes, self.level = max_nodes, level
        noise = job.noise_scale or 2000.0
        batches = sorted({2**i for i in range(11)} | {int(local_bsz)})
        controls = {
            "noise_scale": _selection(
                log_choices(noise, 10.0, 1e6, per_decade=20), noise, "noise scale"
            ),
            "local_bsz": _selection([(str(b), b) for b in batches], int(local_bsz), "local batch"),
            "instance_type": w.Dropdown(
                options=list(instance_types),
                value=instance_types[0],
                description="instance type",
                style={"description_width": "140px"},
            ),
        }
        xs, ts, cs = bq.LogScale(), bq.LogScale(), bq.LogScale()
        self.marks = {
            "time": bq.Lines(
                x=[], y=[], scales={"x": xs, "y": ts}, colors=["#4c78a8"], marker="circle",
                labels=["time (upper end)"],
            ),
            "cost": bq.Lines(
                x=[], y=[], scales={"x": xs, "y": cs}, colors=["#e45756"], marker="square",
                labels=["cost (upper end)"],
            ),
            "cheapest": point_mark(
                {"x": xs, "y": cs}, "diamond", "#e45756", "cheapest", 160, stroke="black"
            ),
            "fastest": point_mark(
                {"x": xs, "y": ts}, "diamond", "#4c78a8", "fastest", 160, stroke="black"
            ),
        }  # fmt: skip
        axes = [
            bq.Axis(scale=xs, label="workers", tick_format="d"),
            bq.Axis(scale=ts, label="hours to target", side="left", tick_format=".3~g"),
            bq.Axis(scale=cs, label="USD to target", side="right", tick_format="~s"),
        ]
        figure = _figure(list(self.marks.values()), axes, "Time and cost against workers")
        super().__init__(
            controls,
            figure,
            "srifty-lesson-scaling",
            CAPTIONS["scaling"],
        )
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
        result = tradeoffs.scaling(self.model, self.catalog, job, **args)
        return result, {"job": job_inputs(job), **args}

    def draw(self, result: tradeoffs.Scaling) -> None:
        """Time and cost lines over workers; the cheapest and the fastest count marked."""
        t = result.table
        for name, column in (("time", "time_hi_h"), ("cost", "cost_hi_usd")):
            set_data(self.marks[name], t["num_workers"], t[column])
        for name, row, column in (
            ("cheapest", result.cheapest, "cost_hi_usd"),
            ("fastest", result.fastest, "time_hi_h"),
        ):
            set_data(self.marks[name], [row["num_workers"]], [row[column]])


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
        import ipywidgets as w

        from srifty_kit.tables.contracts import INTERRUPTION_BUCKETS

        self.model, self.catalog, self.job = model, catalog, job
        self.instance_type, self.num_nodes, self.local_bsz = instance_type, num_nodes, local_bsz
        self.level, self.runs = level, runs
        if deadline_h is None:  # fixed once: 3% over the on-demand time at the first interval
            deadline_h = tradeoffs.spot_deadline(
                model, catalog, job, instance_type, num_nodes, local_bsz, level=level
            )
        self.deadline_h = deadline_h
        bucket = tradeoffs.listed_bucket(catalog, instance_type)
        controls = {
            "checkpoint_interval": _selection(
                log_choices(job.checkpoint_interval_h, 1 / 60, 8, per_decade=12, label="{:.3g} h"),
                job.checkpoint_interval_h,
                "checkpoint every",
            ),
            "bucket": w.Dropdown(
                options=list(INTERRUPTION_BUCKETS),
                value=bucket,
                description="reclaims / month",
                style={"description_width": "140px"},
            ),
            "restart": _selection(
                log_choices(job.restart_h, 0.01, 2.0, per_decade=10, label="{:.3g} h"),
                job.restart_h,
                "restart takes",
            ),
        }  # fmt: skip
        xs, ys, ms = bq.LogScale(), bq.LinearScale(min=0), bq.LinearScale(min=0, max=1)
        self.marks = {
            "spot": bq.Lines(
                x=[], y=[], scales={"x": xs, "y": ys}, colors=["#4c78a8"],
                labels=["spot, expected cost"],
            ),
            "ondemand": bq.Lines(
                x=[], y=[], scales={"x": xs, "y": ys}, colors=["black"], line_style="dashed",
                labels=["on-demand cost"],
            ),
            "miss": bq.Lines(
                x=[], y=[], scales={"x": xs, "y": ms}, colors=["#e45756"], line_style="dotted",
                labels=["spot runs missing the deadline"],
            ),
            "now": point_mark(
                {"x": xs, "y": ys}, "diamond", "#4c78a8", "this interval", 140, stroke="black"
            ),
        }  # fmt: skip
        axes = [
            bq.Axis(scale=xs, label="checkpoint interval (h)", tick_format=".2~g"),
            bq.Axis(scale=ys, label="USD to target", side="left", tick_format="~s"),
            bq.Axis(scale=ms, label="share missing the deadline", side="right", tick_format=".0%"),
        ]
        figure = _figure(list(self.marks.values()), axes, "Spot against on-demand")
        super().__init__(
            controls,
            figure,
            "srifty-lesson-spot",
            CAPTIONS["spot"],
        )
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
        result = tradeoffs.spot_tradeoff(self.model, self.catalog, job, **args)
        return result, {"job": job_inputs(job), **args}

    def draw(self, result: tradeoffs.SpotTradeoff) -> None:
        """The expected spot cost and the miss share over intervals; on-demand flat."""
        grid = result.by_interval
        x = grid["checkpoint_interval_h"].to_numpy(float)
        od = float(result.ondemand["cost_usd"])
        for name, y in (
            ("spot", grid["cost_usd"].to_numpy(float)),
            ("ondemand", np.full(x.size, od)),
            ("miss", grid["miss_share"].to_numpy(float)),
        ):
            set_data(self.marks[name], x, y)
        set_data(self.marks["now"], [result.checkpoint_interval_h], [result.expected["cost_usd"]])


class ControllerLesson(Lesson):
    """(c) A two-type cluster balanced by OmniLearn's proportional controller, step by step;
    the question slows worker 0 down mid-run."""

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
    ) -> None:
        import bqplot as bq

        self.model, self.catalog, self.job = model, catalog, job
        self.instance_types, self.num_nodes = tuple(instance_types), tuple(num_nodes)
        self.local_bsz, self.steps, self.slow_at = local_bsz, steps, slow_at
        factors = [(f"{f:g}x", float(f)) for f in np.round(np.arange(1.0, 4.01, 0.25), 2)]
        controls = {"slow_factor": _selection(factors, 1.0, "worker 0 slows down")}
        xs, bs, ts = bq.LinearScale(), bq.LinearScale(min=0), bq.LinearScale(min=0)
        self.marks = {
            "batches": bq.Lines(
                x=[], y=[], scales={"x": xs, "y": bs}, labels=["local batch per worker"],
            ),
            "step": bq.Lines(
                x=[], y=[], scales={"x": xs, "y": ts}, colors=["black"], stroke_width=3,
                labels=["step time"],
            ),
        }  # fmt: skip
        axes = [
            bq.Axis(scale=xs, label="step", tick_format="d"),
            bq.Axis(scale=bs, label="local batch per worker", side="left", tick_format="d"),
            bq.Axis(scale=ts, label="step time (s)", side="right", tick_format=".3~g"),
        ]
        figure = _figure(list(self.marks.values()), axes, "The controller, step by step")
        super().__init__(
            controls,
            figure,
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
        }
        result = tradeoffs.controller_lesson(self.model, self.catalog, self.job, **args)
        return result, {"job": job_inputs(self.job), **args}

    def draw(self, result: tradeoffs.ControllerLesson) -> None:
        """One line per worker (its local batch) and the step time, over steps."""
        wide = result.trace.pivot(index="step", columns="worker", values="local_bsz")
        colors = ["#4c78a8" if t == result.instance_types[0] else "#f58518" for t in
                  result.trace.drop_duplicates("worker")["instance_type"]]  # fmt: skip
        set_data(self.marks["batches"], wide.index, wide.to_numpy(float).T, colors=colors)
        step = result.trace.groupby("step")["step_time_s"].first()
        set_data(self.marks["step"], step.index, step)


class VarianceLesson(Lesson):
    """(d) The same deadline judged by the point estimate and by the upper end, with how
    often each pick misses it; the question moves the deadline."""

    question = "deadline"

    def __init__(
        self,
        model: StepTimeModel,
        catalog: pd.DataFrame,
        job: Job,
        deadline_h: float = 1.0,
        confidence: float = 0.9,
        max_nodes: int = 16,
        runs: int = 10_000,
    ) -> None:
        import bqplot as bq

        self.model, self.catalog, self.job = model, catalog, job
        self.constraints = Constraints(confidence=confidence, max_nodes=max_nodes)
        self.runs = runs
        self.evaluated = evaluate(model, catalog, job, self.constraints)  # once: arrays
        controls = {
            "deadline": _selection(log_choices(deadline_h, 0.05, 100.0), deadline_h, "deadline (h)")
        }
        xs, ys = bq.LogScale(), bq.LinearScale(min=0)
        self.marks = {
            "point": bq.Lines(
                x=[], y=[], scales={"x": xs, "y": ys}, colors=["#e45756"],
                interpolation="step-after", labels=["pick by point estimate"],
            ),
            "upper": bq.Lines(
                x=[], y=[], scales={"x": xs, "y": ys}, colors=["#4c78a8"],
                interpolation="step-after", labels=["pick by upper end"],
            ),
            "deadline": bq.Lines(
                x=[], y=[], scales={"x": xs, "y": ys}, colors=["black"], line_style="dashed",
                labels=["deadline"],
            ),
        }  # fmt: skip
        axes = [
            bq.Axis(
                scale=xs, label="hours to target (simulated runs)", tick_format=".2~g", num_ticks=6
            ),
            bq.Axis(scale=ys, label="share of runs", side="left", tick_format=".0%"),
        ]
        figure = _figure(list(self.marks.values()), axes, "How long the two picks really take")
        super().__init__(
            controls,
            figure,
            "srifty-lesson-variance",
            CAPTIONS["variance"],
        )
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
        """Each pick's distribution of simulated run times, and the deadline."""
        edges, shares = result.histogram()
        top = max((float(s.max()) for s in shares.values()), default=1.0)
        for rule in ("point", "upper"):
            share = shares.get(rule)
            if share is None:
                set_data(self.marks[rule], [], [])
            else:
                set_data(self.marks[rule], edges, np.append(share, share[-1]))
        set_data(self.marks["deadline"], [result.deadline_h, result.deadline_h], [0.0, top])


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
