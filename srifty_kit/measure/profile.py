"""Time training steps of a PyTorch model per batch size, until the mean is precise enough.

``profile_model`` keeps every measured step (one row each, the design's measurement table),
stops each batch size once the confidence interval of the mean is within
``target_precision`` of it or its share of ``max_seconds`` is spent, and adds what the later
stages need: FLOPs per sample, parameters, gradient bytes, peak memory, the largest batch
under a memory budget and the gradient noise scale.

The interval is the stopping rule's (``stopping``): steps are not taken as independent, the
warm-up is found by MSER-5 and its rows marked ``warmup`` (kept, left out of the mean), and
the summary gives the effective sample size ``n_eff`` beside the steps ``n`` and a CUSUM
level-shift flag (``drift``) per batch size. Every row carries the ``run`` it was measured in.
"""

from __future__ import annotations

import gc
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from srifty_kit.errors import (
    InputError,
    check_interrupt,
    check_level,
    counted,
    first_line,
    is_number,
    is_whole,
    plain,
    warn,
)
from srifty_kit.measure import host, memory, noise_scale, opgraph, variance
from srifty_kit.measure.op_trace import TRACE_STEPS, trace_batch
from srifty_kit.measure.stopping import INTERVALS, PrecisionTracker, fewest_steps
from srifty_kit.measure.torch_step import (
    count_flops,
    device_batch,
    out_of_memory,
    parameter_facts,
    resolve_device,
    step_cause,
    step_failed,
    synchronize,
    timed_step,
    train_step,
)
from srifty_kit.measure.zoo import ModelSpec, load_spec
from srifty_kit.tables.contracts import validate_measurements
from srifty_kit.tables.files import (
    TABLE_SUFFIXES,
    Staging,
    check_writable,
    write_json,
    write_table,
)
from srifty_kit.tables.progress import progress_bar
from srifty_kit.tables.redact import redact

NOISE_SHARE = 0.1  # of max_seconds, for the gradient noise scale; the rest times steps


class BudgetWarning(UserWarning):
    """The time budget ran out before the target precision at some batch sizes (their rows
    are kept): ``budget_note`` words it, the facts' ``budget_short`` holds its numbers."""


class ProfileWarning(UserWarning):
    """A batch size could not be measured; the others were."""


def check_batch_sizes(batch_sizes: Iterable[int] | str, what: str = "batch sizes") -> list[int]:
    """Sorted distinct positive integers, or an InputError naming the bad value.

    Args:
        batch_sizes: whole numbers >= 1 (``errors.is_whole``: 8.0 is 8; never a bool, NaN
            or inf), one such number, or a string: the command line's list, ``"4,8,16"``
            (brackets allowed: ``"[4, 8, 16]"``), what ``papermill -p batch_sizes 4,8,16``
            gives a notebook's parameter.
        what: what the sizes are, as the message names them ("world sizes").

    Returns:
        The sizes as ints, sorted, each once.

    Raises:
        InputError: not a list, an empty one, or a size that is no whole number >= 1.
    """
    if isinstance(batch_sizes, bytes):
        batch_sizes = batch_sizes.decode(errors="replace")
    if isinstance(batch_sizes, str):
        text = batch_sizes.strip().strip("[]()")
        parts = [p.strip() for p in text.split(",")] if text.strip() else []
        sizes = [int(p) if p.isdigit() else p for p in parts]
    elif is_number(batch_sizes):  # one size, as Job(local_bsz=8) takes one batch
        sizes = [batch_sizes]
    elif isinstance(batch_sizes, Iterable):
        sizes = list(batch_sizes)
    else:
        raise InputError(
            f"{what} must be a list of whole numbers, got {type(batch_sizes).__name__}",
            fix=f"give {what} such as [4, 8, 16]",
        )
    if not sizes:
        raise InputError(f"no {what} given", fix=f"give at least one, e.g. {what} 4,8,16")
    for b in sizes:
        if not is_whole(b):  # NaN and inf too, which int() below cannot take
            raise InputError(
                f"{what} must be whole numbers >= 1, got {plain(b)}",
                fix=f"use {what} of 1 or more, e.g. 4,8,16",
            )
    return sorted({int(b) for b in sizes})


def check_budget(target_precision: float, max_seconds: float) -> None:
    """A target precision in (0, 1) and a positive, finite time budget, or an InputError (an
    infinite one would time steps until the target is met, which noise can put off forever)."""
    if not (is_number(target_precision) and 0 < target_precision < 1):
        raise InputError(
            f"target precision {target_precision} is not in (0, 1)", fix="e.g. 0.02 for +-2%"
        )
    if not (is_number(max_seconds) and 0 < max_seconds < math.inf):
        raise InputError(
            f"max seconds {max_seconds} is not a positive, finite number of seconds", fix="e.g. 60"
        )


def _check_options(model: object, name: object, level: object, counts: dict[str, tuple]) -> None:
    """profile_model's other arguments, before anything is measured: each went on to fail
    mid-run (a level of 'x' lost every batch size to a TypeError said as the model's; a
    warmup of 1.5 as "check the model") or to be used as given (a level of 1.5, a negative
    noise budget).

    Args:
        model, name, level: as profile_model's.
        counts: argument -> (value, least, None allowed).

    Raises:
        InputError: the first argument that cannot be, named with what to give.
    """
    if not isinstance(model, torch.nn.Module):
        raise InputError(
            f"model must be a torch.nn.Module, got {type(model).__name__}",
            fix="pass the model object; a demo or reference model by name: "
            "srifty_kit.measure.zoo.load_spec('mlp') gives its model and functions",
        )
    if name is not None and not (isinstance(name, str) and name.strip()):
        raise InputError(f"name must be a text label, got {name!r}", fix="e.g. name='resnet50'")
    check_level(level, fix="e.g. level=0.95")
    for arg, (value, least, optional) in counts.items():
        if value is None and optional:
            continue
        if not is_whole(value, least):
            raise InputError(
                f"{arg} must be a whole number >= {least}, got {value!r}",
                fix=f"give `{arg}` >= {least}" + (", or None" if optional else ""),
            )


def check_out_path(path: str | os.PathLike | None) -> None:
    """Refuse an output that cannot be written (suffix, folder, permissions) before anything
    is measured; None (no output) passes."""
    if path is not None:
        check_writable(path, TABLE_SUFFIXES)


def facts_path(path: str | os.PathLike) -> Path:
    """Where the facts JSON of a measurement table lives: ``p.csv`` -> ``p.facts.json``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.facts.json")


@dataclass
class ProfileResult:
    """Every measured step, a summary per batch size and the model's facts."""

    measurements: pd.DataFrame  # one row per step (design's measurement columns + extras)
    # per batch size: n, warmup_steps, n_eff, mean, mean_lo/hi, precision, drift, memory
    # (peak_memory_bytes; NaN where no step was measured), stop
    summary: pd.DataFrame
    facts: dict[str, Any] = field(default_factory=dict)  # FLOPs, params, noise scale, memory
    errors: dict[int, str] = field(default_factory=dict)  # batch size -> cause
    interrupted: bool = False
    # where the table was written: ``out``, or beside an older ``out`` when interrupted
    written: Path | None = None
    kept: str = ""  # where an interrupted run's rows are, in words ("in p.partial.csv; ...")
    earlier: str = ""  # where earlier unfinished runs' rows stay, in words ('' when none)
    # what an interrupt before the first step stopped, in words ('moving the model to cuda:0')
    stopped_while: str = ""

    def __getattr__(self, name: str) -> Any:
        # result.noise_scale, result.flops_per_sample, ... read from the facts
        facts = self.__dict__.get("facts", {})
        if name in facts:
            return facts[name]
        raise AttributeError(name)

    def summary_records(self) -> list[dict[str, Any]]:
        """The summary as JSON-ready records (missing values as None)."""
        return (
            self.summary.astype(object).where(self.summary.notna(), None).to_dict(orient="records")
        )

    def save(self, path: str | os.PathLike, finished: bool | None = None) -> tuple[Path, Path]:
        """Write the table (CSV/Parquet by suffix) and the facts JSON beside it, atomically.
        ``finished`` (default: not interrupted) goes in the facts: a later run with the same
        output keeps an unfinished run's rows rather than replacing them."""
        table = write_table(self.measurements, path)
        doc = {
            **self.facts,
            "errors": {str(k): v for k, v in self.errors.items()},
            "interrupted": self.interrupted,
            "finished": not self.interrupted if finished is None else finished,
            "summary": self.summary_records(),
        }
        return table, write_json(doc, facts_path(path))


def _forget_oom(model: torch.nn.Module, optimizer: torch.optim.Optimizer, dev: torch.device):
    """Drop gradients and cached blocks after a failed step, so the next one starts clean."""
    optimizer.zero_grad(set_to_none=True)
    model.zero_grad(set_to_none=True)
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()


class _Run:
    """The state of one profile_model call: rows so far, summaries, errors."""

    def __init__(self, spec: ModelSpec, dev: torch.device, opts: dict[str, Any]) -> None:
        self.spec, self.dev, self.opts = spec, dev, opts
        self.optimizer = spec.optimizer_fn(spec.model.parameters())
        self.rows: list[dict[str, Any]] = []
        self.summaries: list[dict[str, Any]] = []
        self.errors: dict[int, str] = {}
        self.mem = memory.PeakMemory(dev)
        label = host.instance_type(dev.type)
        self.constant = {
            "model": spec.name,
            "instance_type": label,
            "num_nodes": 1,
            "num_workers": 1,
            "gpus_per_node": max(1, host.max_world_size(dev.type)),
            "placement": "1",
            "host": host.hostname(),
            "device": str(dev),
            "run": f"{host.hostname()}@{host.now()}",  # this call: tells runs apart
        }

    def step(self, batch: Any) -> None:
        """One training step on ``batch`` (the caller times it, or uses it to warm up)."""
        train_step(self.spec.model, batch, self.spec.loss_fn, self.optimizer)

    def time_batch(self, b: int, seconds: float, bar: Any) -> None:
        """Warm up, then time steps at batch size ``b`` until precise or out of time."""
        o = self.opts
        batch = device_batch(self.spec.make_batch, b, self.dev)
        for _ in range(o["warmup"]):
            check_interrupt()
            self.step(batch)
        synchronize(self.dev)
        self.mem.reset()
        tracker = PrecisionTracker(o["level"], o["interval"])
        summary = {"local_bsz": b, "stop_reason": "interrupted", "error": None}
        self.summaries.append(summary)
        start = time.perf_counter()
        end, shown = start + seconds, start
        row = {**self.constant, "local_bsz": b, **o["extra"], "warmup": False}
        first = len(self.rows)
        try:
            while True:
                check_interrupt()  # an interrupt a library swallowed ends the run here
                t = timed_step(lambda: self.step(batch), self.dev)
                tracker.add(t)
                self.rows.append(
                    {**row, "step_time_s": t, "repeat": tracker.n - 1, "timestamp": host.now()}
                )
                now = time.perf_counter()
                if now - shown > 0.5:
                    bar.set_postfix(bsz=b, n=tracker.n, precision=f"{tracker.precision():.3f}")
                    shown = now
                reason = tracker.stop_reason(
                    o["target_precision"], o["min_steps"], o["max_steps"], now >= end
                )
                if reason:
                    summary["stop_reason"] = reason
                    break
        finally:
            summary.update(_batch_summary(tracker, o["interval"]))
            for i in range(summary["warmup_steps"]):  # kept in the table, marked
                self.rows[first + i]["warmup"] = True
            # no step ran, no peak of one: what the process held for other work is no step's
            summary["peak_memory_bytes"] = self.mem.peak_bytes() if tracker.n else math.nan
            summary["wall_s"] = time.perf_counter() - start

    def fail(self, b: int, err: BaseException) -> None:
        """Record why batch size ``b`` could not be measured; the others go on."""
        cause = step_cause(b, err)  # printed and written to the facts JSON
        self.errors[b] = cause
        done = next((s for s in self.summaries if s["local_bsz"] == b), None)
        if done is None:
            done = {"local_bsz": b, "n": 0}
            self.summaries.append(done)
        done.update({"stop_reason": "error", "error": cause})
        warn(f"batch size {b} not measured: {cause}", ProfileWarning)
        _forget_oom(self.spec.model, self.optimizer, self.dev)

    def fits(self, b: int) -> bool:
        """One training step at batch size b under the capped CUDA allocator."""
        try:
            return self._try_step(b)
        finally:  # the failed step's tensors are gone with its frame: free their blocks
            _forget_oom(self.spec.model, self.optimizer, self.dev)

    def _try_step(self, b: int) -> bool:
        try:
            batch = device_batch(self.spec.make_batch, b, self.dev)
            self.step(batch)
            synchronize(self.dev)
        except torch.OutOfMemoryError:
            return False
        return True


def _batch_summary(tracker: PrecisionTracker, interval: str) -> dict[str, Any]:
    """The summary of one batch size: counts, the interval, the level-shift flag."""
    est = tracker.estimate()
    kept = tracker.values[est.warmup_steps :]
    shift = variance.level_shift(kept)
    if np.isfinite(shift["shift_at"]):
        shift["shift_at"] = int(shift["shift_at"] + est.warmup_steps)
    return {
        "n": tracker.n,
        "warmup_steps": est.warmup_steps,
        "n_eff": est.n_eff,
        "mean": est.mean if tracker.n else math.nan,
        "mean_lo": est.time_lo,
        "mean_hi": est.hi,
        "precision": est.precision if tracker.n >= 2 else math.inf,
        "interval": interval,
        "batch_size": est.batch_size,
        **shift,
    }


def _max_batch(run: _Run, budget: int | None, limit: int) -> memory.MaxBatch:
    """CUDA: bisection under a capped allocator; CPU: extrapolate the measured peaks."""
    dev = run.dev
    budget = int(budget) if budget else memory.default_budget(dev)
    ok = [s for s in run.summaries if s.get("n") and s.get("peak_memory_bytes")]
    if dev.type != "cuda":
        return memory.extrapolate_max_batch(
            [s["local_bsz"] for s in ok], [s["peak_memory_bytes"] for s in ok], budget
        )
    total = torch.cuda.mem_get_info(dev)[1]
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(min(1.0, budget / total), dev)
    try:
        start = max((s["local_bsz"] for s in ok), default=1)
        return memory.bisect_max_batch(run.fits, start, budget, limit)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, dev)


def _snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def profile_model(
    model: torch.nn.Module,
    make_batch: Callable[[int], Any],
    loss_fn: Callable[[Any, Any], torch.Tensor],
    optimizer_fn: Callable[[Any], torch.optim.Optimizer],
    batch_sizes: Sequence[int],
    device: str = "auto",
    target_precision: float = 0.02,
    max_seconds: float = 60.0,
    *,
    name: str | None = None,
    level: float = 0.95,
    interval: str = "batch_means",
    warmup: int = 0,
    min_steps: int = 10,
    max_steps: int = 100_000,
    noise_repeats: int = 50,
    noise_batch_sizes: tuple[int, int] | None = None,
    noise_seconds: float | None = None,
    memory_budget_bytes: int | None = None,
    max_batch_limit: int = 65_536,
    out: str | os.PathLike | None = None,
    progress: bool = True,
    op_trace: bool | None = None,
) -> ProfileResult:
    """Profile training steps at each batch size; see the module docstring.

    ``interval`` is the stopping rule's interval of the mean: ``"batch_means"`` (steps taken
    as correlated, warm-up cut by MSER-5) or ``"iid"`` (Student's t, every step independent:
    the rule before; it stops too early on correlated steps). ``warmup`` steps are run untimed
    before each batch size's timing (none by default: the recorded warm-up is found by
    MSER-5 and marked). ``max_seconds`` bounds the measuring (the last step may overrun it;
    batch sizes it cuts short of the target keep their steps, and a ``BudgetWarning`` and the
    facts' ``budget_short`` say about what budget would reach it):
    a tenth of it (2 s at least) goes to the gradient noise scale, unless ``noise_seconds``
    is given (then on top); the noise scale compares ``noise_batch_sizes`` (default the
    smallest and largest batch sizes measured, a larger one accumulated from micro-batches);
    the model's weights are restored afterwards (it stays on ``device``). With ``out`` the
    table and its facts JSON are written after each batch size and when interrupted; where an
    older ``out`` (or its facts) is there, they go beside it (``p.partial.csv``) until the run
    finishes, so an interrupted run leaves the older files byte-identical; a partial file an
    earlier unfinished run left there is kept, and this run takes the next name
    (``p.partial.2.csv``) (``files.Staging``; ``result.written`` and ``result.kept`` say where
    the rows are, ``result.earlier`` where an earlier run's are). An unfinished run that found
    no older ``out`` left its rows in ``out`` itself (its facts say ``finished: false``): a
    run that finishes keeps them, and their facts, under the next partial name before it
    writes ``out`` (``p.partial.csv``; it works in ``p.partial.2.csv`` meanwhile), and
    ``result.earlier`` says where they went: nothing measured is replaced.
    An interrupt before the first step (finding the device, moving the model to it) returns
    an empty result that says what it stopped (``result.stopped_while``); nothing is written.
    ``op_trace`` (default: on a CUDA device only) profiles a few more steps at each measured
    batch size under ``torch.profiler`` and records where their device time goes, per operator
    class (``measure.op_trace``; facts ``op_trace``): what carries them to other GPUs class by
    class. Arguments that cannot be (a model that is no ``torch.nn.Module``, a level outside
    (0, 1), a negative or fractional count, a negative noise budget) are refused with an
    ``InputError`` naming the argument before anything is measured.
    """
    sizes = check_batch_sizes(batch_sizes)
    check_budget(target_precision, max_seconds)
    _check_options(
        model,
        name,
        level,
        {
            "warmup": (warmup, 0, False),
            "min_steps": (min_steps, 1, False),
            "max_steps": (max_steps, 1, False),
            "noise_repeats": (noise_repeats, 1, False),
            "memory_budget_bytes": (memory_budget_bytes, 1, True),
            "max_batch_limit": (max_batch_limit, 1, False),
        },
    )
    # 0 (falsy) keeps the default share; a negative one measured no noise scale, silently
    if noise_seconds is not None and not (is_number(noise_seconds) and 0 <= noise_seconds < 1e9):
        raise InputError(
            f"noise_seconds must be a number of seconds >= 0 or None, got {noise_seconds!r}",
            fix="e.g. noise_seconds=5, or None for a tenth of max_seconds",
        )
    if interval not in INTERVALS:
        raise InputError(f"unknown interval {interval!r}", fix="use " + " or ".join(INTERVALS))
    pair = _noise_pair(sizes, noise_batch_sizes)
    check_out_path(out)
    stage = None if out is None else Staging(out, lambda p: [facts_path(p)], unfinished_table)
    spec = ModelSpec(model, make_batch, loss_fn, optimizer_fn, name or type(model).__name__)
    opts = {
        "warmup": warmup,
        "level": level,
        "interval": interval,
        "min_steps": max(2, min_steps),
        "max_steps": max_steps,
        "target_precision": target_precision,
        "extra": {},
    }
    # seconds on CUDA (its start-up, copying the weights): an interrupt here says what it
    # stopped, and that nothing was measured
    doing = "finding the device"
    try:
        dev = resolve_device(device)
        watch = host.CpuWatch()
        wall0 = time.perf_counter()
        doing = "copying the model's weights"
        saved = _snapshot(model)
        doing = f"moving the model to {dev}"
        model.to(dev).train()
        doing = f"setting up the run on {dev}"
        run = _Run(spec, dev, opts)  # the optimizer, which machine this is
        check_interrupt()  # one that a library swallowed meanwhile
    except KeyboardInterrupt:
        empty = pd.DataFrame()
        return ProfileResult(
            empty, empty, {"model": spec.name}, stopped_while=doing, interrupted=True
        )
    facts: dict[str, Any] = {
        **run.constant,
        **parameter_facts(model),
        "target_precision": target_precision,
        "level": level,
        "interval": interval,
        "warmup_rule": "MSER-5" if interval == "batch_means" else "none",
        "max_seconds": max_seconds,
        "memory_method": run.mem.method,
    }
    interrupted = False
    phases = facts["phase_seconds"] = {}  # where the wall time went: is the overhead small?
    mark = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        phases[name] = round(now - mark, 4)
        mark = now

    try:
        facts.update(_preflight(run, sizes))
        phase("setup_and_flops")
        opts["extra"] = {k: facts[k] for k in ("flops_per_sample", "param_count", "grad_bytes")}
        timing_end = wall0 + max_seconds * (1 - NOISE_SHARE if noise_seconds is None else 1)
        with progress_bar(sizes, desc=f"profiling {spec.name}", show=progress) as bar:
            for i, b in enumerate(bar):
                share = max(0.0, timing_end - time.perf_counter()) / (len(sizes) - i)
                try:
                    run.time_batch(b, share, bar)
                except InputError:
                    raise
                except Exception as err:  # one batch size failing must not lose the others
                    check_interrupt()  # unless it was an interrupt in another guise
                    run.fail(b, err)
                if stage is not None and run.rows:
                    _result(run, facts, False, wall0).save(stage.working, finished=False)
        phase("timing")
        check_interrupt()
        short = _budget_short(run, phases["setup_and_flops"], noise_seconds is None)
        if short:
            facts["budget_short"] = short
            warn(budget_note(short), BudgetWarning)
        facts["other_processes_cores"] = round(watch.others_cores(), 2)
        busy = watch.busy_message() if dev.type == "cpu" else None
        if busy:
            facts["busy_note"] = busy
            warn(busy, ProfileWarning)
        model.load_state_dict(saved)  # the noise scale is measured at the given weights
        noise_time = noise_seconds if noise_seconds else max(2.0, NOISE_SHARE * max_seconds)
        measured = [s["local_bsz"] for s in run.summaries if s.get("n")]
        if noise_batch_sizes is None and measured:  # not from a batch size that failed
            pair = _noise_pair(measured, None)
        facts.update(_noise(run, pair, max(measured or sizes), noise_repeats, noise_time))
        phase("noise_scale")
        check_interrupt()
        facts.update(_max_batch_facts(run, memory_budget_bytes, max_batch_limit))
        phase("max_batch")
        if dev.type == "cuda" if op_trace is None else op_trace:
            facts["op_trace"] = _op_trace(run)
            phase("op_trace")
            check_interrupt()
        # the op mix (a meta-device pass) after the timing, so it spends none of its budget
        facts.update(_op_graph(spec))
        phase("op_mix")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        model.load_state_dict(saved)
    result = _result(run, facts, interrupted, wall0)
    if not result.measurements.empty:
        validate_measurements(result.measurements, source=f"profile of {spec.name}")
    elif run.errors and not interrupted:
        raise InputError(
            "no batch size could be measured: "
            + "; ".join(f"{b}: {e}" for b, e in run.errors.items()),
            fix="check the model, batch maker and optimizer on one batch by hand",
        )
    if stage is not None and not result.measurements.empty:
        # nothing measured, nothing written: an older file stays as it was; an interrupted
        # run's rows go beside an older file, a finished run's replace it
        result.written = stage.working if interrupted else stage.final
        if not interrupted:  # an unfinished run's rows at out: beside it, before it is replaced
            stage.set_aside()
        result.save(result.written)
        if not interrupted:
            stage.finish()
        result.kept = stage.kept() if interrupted else f"in {stage.final}"
        result.earlier = stage.note()
    return result


def _budget_short(run: _Run, setup_s: float, noise_shares: bool) -> dict[str, Any] | None:
    """The batch sizes the time budget cut short before the target precision, and about the
    ``max_seconds`` that would have reached it (None when none was cut short): the setup,
    the sizes that stopped as they were, and for each one cut short its warm-up steps and
    the steps it needs at its mean step time: the stopping rule's fewest, or as many more
    as its precision says (precision goes as 1/sqrt(steps))."""
    o = run.opts
    measured = [s for s in run.summaries if s.get("n")]
    short = [s for s in measured if s.get("stop_reason") == "time budget"]
    if not short:
        return None
    fewest = fewest_steps(o["interval"], o["min_steps"])
    seconds = setup_s
    for s in measured:
        if s.get("stop_reason") != "time budget":
            seconds += s.get("wall_s", 0.0)
            continue
        seconds += seconds_to_target(
            s["n"], s["precision"], o["target_precision"], fewest, o["warmup"], s["mean"]
        )
    seconds /= 1 - NOISE_SHARE if noise_shares else 1  # the noise scale's share of it
    return budget_short_facts(
        [(s["local_bsz"], s["n"]) for s in short], fewest, o["target_precision"], seconds
    )


def seconds_to_target(
    n: int, precision: float, target: float, fewest: int, warmup: int, mean_s: float
) -> float:
    """About the seconds one configuration needs to reach ``target``: its warm-up and the
    steps its ``precision`` after ``n`` steps asks (precision goes as 1/sqrt(steps)), at
    least the stopping rule's ``fewest``, at its mean step ``mean_s``."""
    ratio = precision / target
    need = max(fewest, math.ceil(n * ratio**2)) if math.isfinite(ratio) else fewest
    return (warmup + need) * mean_s


def budget_short_facts(
    short: list[tuple[Any, int]], fewest: int, target: float, seconds: float
) -> dict[str, Any]:
    """The ``facts['budget_short']`` that ``budget_note`` words: the configurations cut short
    (label, steps), the stopping rule's fewest steps, the target and the ``max_seconds``
    (rounded up) that would have reached it; the profile's and the distributed profile's."""
    return {
        "batch_sizes": [label for label, _ in short],
        "steps": [n for _, n in short],
        "fewest_steps": fewest,
        "target_precision": target,
        "max_seconds_needed": round_up(seconds),
    }


def round_up(seconds: float) -> float:
    """``seconds`` rounded up to two significant digits (6.31 -> 6.4, 123 -> 130)."""
    if seconds <= 0 or not math.isfinite(seconds):
        return seconds
    unit = 10.0 ** (math.floor(math.log10(seconds)) - 1)
    return round(math.ceil(seconds / unit - 1e-9) * unit, 10)


def budget_note(short: dict[str, Any], give: str = "max_seconds={}") -> str:
    """The one line on batch sizes the budget cut short (``facts['budget_short']``);
    ``give`` words the budget to give ('--max-seconds {}' on the command line)."""
    pairs = zip(short["batch_sizes"], short["steps"], strict=True)
    sizes = ", ".join(f"{b} ({counted(n, 'step')})" for b, n in pairs)
    word = "batch size" if len(short["batch_sizes"]) == 1 else "batch sizes"
    return (
        f"the time budget ran out before the target precision "
        f"(+-{100 * short['target_precision']:g}%) at {word} {sizes}: their rows are kept, "
        "but their means are not that precise; give "
        + give.format(plain(short["max_seconds_needed"]))
        + " or more (an estimate from the step times and spread measured; the stopping rule "
        f"needs {counted(short['fewest_steps'], 'step')} at the fewest)"
    )


def _preflight(run: _Run, sizes: list[int]) -> dict[str, Any]:
    """Check the loss on the first batch size that trains one step, and count its FLOPs.

    A batch size whose batch or step fails is left to the timing, which reports it and
    measures the others (a BatchNorm cannot train on a batch of 1); only a model that
    fails at every batch size is refused here."""
    causes, failed, too_big = [], None, {}
    for b in sizes:
        try:
            batch = device_batch(run.spec.make_batch, b, run.dev)
        except InputError:
            raise
        except Exception as err:
            check_interrupt()
            causes.append(f"{b}: {type(err).__name__}: {err}")
            if out_of_memory(err):
                too_big[b] = err
                _forget_oom(run.spec.model, run.optimizer, run.dev)
            continue
        _check_rows(batch, b)
        try:  # the first training step: a model, batch or loss that do not fit is the user's
            flops, loss = count_flops(run.spec.model, batch, run.spec.loss_fn, b)
        except InputError:
            raise
        except Exception as err:
            check_interrupt()
            failed = failed or (b, err)
            if out_of_memory(err):
                too_big[b] = err
            _forget_oom(run.spec.model, run.optimizer, run.dev)
            continue
        if not math.isfinite(loss):  # the steps time the same, but nothing learns from them
            warn(
                f"the loss at batch size {b} is {loss}: the steps are timed, but no gradient "
                "noise scale can be measured; check the model and loss_fn on one batch",
                ProfileWarning,
            )
        return {"flops_per_sample": flops, "flops_counted_at_batch": b}
    if len(too_big) == len(sizes):  # every size failed for want of memory: not the code's fault
        smallest = min(too_big)
        err = too_big[smallest]
        said = f"batch size {smallest}" if len(sizes) == 1 else f"every batch size from {smallest}"
        raise InputError(
            f"out of memory at {said}: {first_line(err)}",
            fix=f"give smaller `batch_sizes` ({smallest} does not fit in this device's memory)",
        ) from err
    if failed is not None:
        b, err = failed
        raise step_failed(b, err) from err
    raise InputError(
        "make_batch raised at every batch size: " + "; ".join(causes),
        fix="make make_batch(batch_size) return (inputs, targets)",
    )


def _op_trace(run: _Run) -> dict[str, Any]:
    """``op_trace.trace_batch`` at every batch size measured: the facts' ``op_trace``; a
    batch size whose traced steps fail is left out (its timings stand)."""
    batches = {}
    for s in run.summaries:
        b = s["local_bsz"]
        if s.get("error") or not s.get("n"):
            continue
        try:
            batch = device_batch(run.spec.make_batch, b, run.dev)
            batches[str(b)] = trace_batch(lambda batch=batch: run.step(batch), run.dev)
        except InputError:
            raise
        except Exception as err:
            check_interrupt()
            warn(f"batch size {b} not traced: {err}", ProfileWarning)
            _forget_oom(run.spec.model, run.optimizer, run.dev)
    cuda = run.dev.type == "cuda"
    if cuda and batches and not any(rec["busy_s"] > 0 for rec in batches.values()):
        warn(
            "the op trace saw no CUDA kernels (is CUPTI installed?): recorded, not used to "
            "carry this model to other GPUs",
            ProfileWarning,
        )
    return {
        "device": run.dev.type,
        "device_name": torch.cuda.get_device_name(run.dev) if cuda else host.cpu_model(),
        "steps_per_batch": TRACE_STEPS,
        "batches": batches,
    }


def _op_graph(spec: ModelSpec) -> dict[str, Any]:
    """The op mix (``opgraph.op_graph_facts``), or ``op_mix: None`` with the reason: the
    timings stand without it."""
    try:
        return opgraph.op_graph_facts_of(spec)
    except InputError as err:
        return {"op_mix": None, "op_mix_note": f"not computed: {err}"}


def facts_only(spec: ModelSpec | str, out: str | os.PathLike | None = None) -> dict[str, Any]:
    """The facts a profile records that need no timing, from a meta-device pass (no GPU, no
    arithmetic: seconds): parameters, gradient bytes, the op mix per class and FLOPs.

    Args:
        spec: a model spec or a name (``mlp``, ``cnn``, ``transformer``, a reference model of
            ``measure.zoo.REFERENCE_MODELS``, ``MODULE:CALLABLE``).
        out: a ``.json`` file to write atomically (the facts JSON of a profile); else none.

    Returns:
        The facts: ``model``, ``param_count``, ``grad_bytes``, ``flops_per_sample`` (forward
        and backward, as ``torch.utils.flop_counter`` counts them on the meta device) and
        everything :func:`opgraph.op_graph_facts` returns; ``facts_only: True``.

    Raises:
        InputError: an unknown model, or a step that cannot run on the meta device.
    """
    spec = load_spec(spec) if isinstance(spec, str) else spec
    if out is not None:
        check_writable(out, (".json",))
        _keep_measured_facts(Path(out))
    graph = opgraph.op_graph_facts_of(spec)
    phases = graph["phases"]
    facts = {
        "model": spec.name,
        **parameter_facts(spec.model),
        "flops_per_sample": phases["forward"]["flops_per_sample"]
        + phases["backward"]["flops_per_sample"],
        **graph,
        "facts_only": True,
        "timestamp": host.now(),
    }
    if out is not None:
        write_json(facts, out)
    return facts


def unfinished_table(table: Path) -> bool:
    """Whether ``table`` holds the rows of a run that did not finish (interrupted, failed, or
    still running when it last wrote them), as its facts JSON (``facts_path``) says; the
    profile's and the distributed profile's alike.

    Args:
        table: a measurement (or collectives) table a run wrote.

    Returns:
        True when its facts say ``finished: false`` or ``interrupted: true``; False when the
        table or its facts are missing or unreadable.
    """
    if not table.is_file():
        return False
    try:
        facts = json.loads(facts_path(table).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(facts, dict) and (
        facts.get("finished") is False or facts.get("interrupted") is True
    )


def _keep_measured_facts(out: Path) -> None:
    """Refuse to replace a file that is not a facts-only run's: a timed profile's facts hold
    what was measured (noise scale, memory, largest batch, per-batch summaries), which a
    facts-only run does not measure and would lose."""
    if not out.exists():
        return
    try:
        older = json.loads(out.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        older = None
    if isinstance(older, dict) and older.get("facts_only") is True:
        return  # an earlier facts-only run: replaced by this one
    what = "a timed profile's facts" if isinstance(older, dict) else "a file"
    raise InputError(
        f"holds {what} that a facts-only run would replace (the noise scale, memory and "
        "largest batch it measured would be lost)",
        source=str(out),
        fix=f"name the output another .json, e.g. {out.with_name(out.stem + '.op_mix.json')}",
    )


def _check_rows(batch: tuple[Any, Any], b: int) -> None:
    """The batch maker's tensors hold ``b`` samples (dimension 0): FLOPs and memory are per
    sample, and a maker that ignores its argument would time one size under every label."""
    for part, tensor in zip(("inputs", "targets"), batch, strict=True):
        first = tensor[0] if isinstance(tensor, tuple | list) and tensor else tensor
        if isinstance(first, torch.Tensor) and (first.ndim == 0 or first.shape[0] != b):
            shape = tuple(first.shape)
            raise InputError(
                f"make_batch({b}) returned {part} of shape {shape}, not {b} samples along "
                "dimension 0",
                fix="make make_batch(batch_size) return tensors with batch_size rows",
            )


def _noise_pair(sizes: list[int], given: tuple[int, int] | None) -> tuple[int, int]:
    """The two batch sizes of the noise scale: given (checked), else from the profiled ones."""
    if given is None:
        return noise_scale.noise_batch_sizes(sizes)
    pair = check_batch_sizes(given, what="noise batch sizes")
    if len(pair) != 2:
        raise InputError(
            "noise batch sizes "
            + ",".join(f"{g:g}" for g in given)
            + " are not two different sizes",
            fix="give a small and a large batch size, e.g. 8,1024",
        )
    return pair[0], pair[1]


def _noise(
    run: _Run, pair: tuple[int, int], micro: int, repeats: int, seconds: float
) -> dict[str, Any]:
    """The gradient noise scale at the model's given weights (None with a note on failure)."""
    try:
        est = noise_scale.measure(
            run.spec.model,
            run.spec.make_batch,
            run.spec.loss_fn,
            pair,
            run.dev,
            max_repeats=repeats,
            max_seconds=seconds,
            max_micro_batch=micro,
        )
        return est.to_dict()
    except Exception as err:  # the timings stand without it
        _forget_oom(run.spec.model, run.optimizer, run.dev)
        return {
            "noise_scale": None,
            "noise_scale_std": None,
            "noise_scale_batch_sizes": list(pair),
            "noise_scale_note": redact(f"not measured: {type(err).__name__}: {err}"),
        }


def _max_batch_facts(run: _Run, budget: int | None, limit: int) -> dict[str, Any]:
    try:
        mb = _max_batch(run, budget, limit)
    except Exception as err:  # the timings stand without it
        _forget_oom(run.spec.model, run.optimizer, run.dev)
        return {
            "max_batch_size": None,
            "max_batch_method": "none",
            "max_batch_note": redact(f"not found: {type(err).__name__}: {err}"),
        }
    return {
        "max_batch_size": mb.max_batch_size,
        "max_batch_method": mb.method,
        "memory_budget_bytes": mb.budget_bytes,
        "memory_bytes_per_sample": mb.bytes_per_sample,
        "memory_base_bytes": mb.base_bytes,
        "max_batch_trials": mb.trials,
        "max_batch_note": mb.note,
    }


def _result(run: _Run, facts: dict[str, Any], interrupted: bool, wall0: float) -> ProfileResult:
    table = pd.DataFrame(run.rows)
    summary = pd.DataFrame(run.summaries)
    if not summary.empty:
        summary = summary.sort_values("local_bsz", ignore_index=True)
        summary.insert(
            summary.columns.get_loc("precision") + 1
            if "precision" in summary
            else len(summary.columns),
            "target_precision",
            facts["target_precision"],
        )
    measured = float(table["step_time_s"].sum()) if not table.empty else 0.0
    wall = time.perf_counter() - wall0
    facts = {
        **facts,
        "wall_s": wall,
        "measured_s": measured,
        "overhead_frac": 1 - measured / wall if wall > 0 else None,
        "torch_threads": torch.get_num_threads(),
        "timestamp": host.now(),
    }
    return ProfileResult(table, summary, facts, dict(run.errors), interrupted)


def profile_spec(spec: ModelSpec | str, batch_sizes: Sequence[int], **kwargs: Any) -> ProfileResult:
    """:func:`profile_model` on a model spec or a name (``mlp``, ``cnn``, ``transformer``,
    ``MODULE:CALLABLE``)."""
    spec = load_spec(spec) if isinstance(spec, str) else spec
    kwargs.setdefault("name", spec.name)
    return profile_model(
        spec.model, spec.make_batch, spec.loss_fn, spec.optimizer_fn, batch_sizes, **kwargs
    )
