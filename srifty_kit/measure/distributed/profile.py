"""Distributed measurements over torch.distributed: all-reduce sweeps and DDP training steps.

On one machine :func:`profile_distributed` starts its own worker processes (torch
multiprocessing, spawn) for each world size, with the rendezvous on 127.0.0.1 at a free
port; gloo on CPU, NCCL on CUDA (one process per GPU). A worker that dies, raises or stops
answering for ``timeout_s`` ends the run with :class:`WorkerFailed` within that timeout, and
a training step of the user's model that raises (the first one, or one after others had
trained) with :class:`WorkerInputError`, which names the batch size and the user's error; the
rows measured before are kept on the error (``err.result``) and written to ``out``, or
beside it (``d.partial.csv``) where an older ``out`` is there: only a finished run replaces
an older file, so an interrupted or failed one leaves it byte-identical. A partial file an
earlier unfinished run left is kept: the next run's go to ``d.partial.2.csv``, and so on.
Each table has its facts JSON beside it (``d.facts.json``: backend, instance type,
``finished``), as a profile's does: an unfinished run that found no older ``out`` left its
rows in ``out`` itself, and the run that finishes moves them to ``d.partial.csv`` (with
their facts) before it replaces ``out``.

Across machines the same entry point runs under ``torchrun``: it sees torchrun's environment
(RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR...) and measures that one world. For two
EC2 nodes with 4 GPUs each (same VPC, a security group that lets the nodes reach each other
on all TCP ports, the project installed on both), run on every node::

    torchrun --nnodes 2 --nproc-per-node 4 --node-rank $NODE_RANK \\
        --master-addr 10.0.1.23 --master-port 29500 \\
        --no-python srifty profile-dist --model mlp --batch-sizes 8,16 --out dist.csv \\
        --collectives-out allreduce.csv

with ``NODE_RANK`` 0 on the node whose private IP is ``--master-addr`` and 1 on the other
(for more nodes: ``--nnodes N`` and ranks 0..N-1). Rank 0 writes the files. Without GPUs use
``--nproc-per-node 1`` (gloo); with EFA, NCCL picks it up through the aws-ofi-nccl plugin.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from srifty_kit.errors import CommandFailed, InputError, counted, warn
from srifty_kit.measure import host
from srifty_kit.measure.distributed.launch import measure_world
from srifty_kit.measure.distributed.worker import Layout, Plan, init_group, run
from srifty_kit.measure.profile import (
    BudgetWarning,
    ProfileWarning,
    budget_note,
    budget_short_facts,
    check_batch_sizes,
    check_budget,
    check_out_path,
    facts_path,
    seconds_to_target,
    unfinished_table,
)
from srifty_kit.measure.stopping import batch_means_estimate, fewest_steps
from srifty_kit.measure.torch_step import resolve_device
from srifty_kit.measure.zoo import load_spec
from srifty_kit.tables.contracts import validate_measurements
from srifty_kit.tables.files import Staging, write_json, write_table
from srifty_kit.tables.progress import progress_bar

# 1 KB to 64 MB, a factor of 4 apart: latency-bound to bandwidth-bound messages
DEFAULT_SIZES = tuple(1024 * 4**k for k in range(9))
_TORCHRUN_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
_PG_EXTRA_S = 60.0  # the process group's own timeout is longer: the watchdog speaks first


class WorkerFailed(CommandFailed):
    """A worker died, raised or hung; ``result`` holds everything measured before."""

    def __init__(self, message: str, result: DistributedResult) -> None:
        super().__init__(message)
        self.result = result


class WorkerInputError(InputError):
    """Bad input that surfaced in a worker (a training step of the user's model that raised,
    a loss that is no scalar): one line naming the batch size and the user's error;
    ``result`` holds everything measured before, as on a ``WorkerFailed``."""

    def __init__(self, problem: str, result: DistributedResult, fix: str | None = None) -> None:
        super().__init__(problem, fix=fix)
        self.result = result


@dataclass
class DistributedResult:
    """DDP step rows (measurement table) and all-reduce samples (collectives table)."""

    measurements: pd.DataFrame
    collectives: pd.DataFrame
    interrupted: bool = False
    facts: dict[str, Any] = field(default_factory=dict)
    # (world size, batch size) -> why its first step failed: not measured, the others were
    errors: dict[tuple[int, int], str] = field(default_factory=dict)
    written: Path | None = None  # where the steps went (beside an older out if unfinished)
    written_collectives: Path | None = None
    kept: str = ""  # where an unfinished run's rows are, in words
    earlier: str = ""  # where earlier unfinished runs' rows stay, in words ('' when none)
    # what an interrupt before any worker started stopped, in words ('finding the device')
    stopped_while: str = ""

    def save(
        self,
        out: str | os.PathLike | None,
        collectives_out: str | os.PathLike | None = None,
        finished: bool | None = None,
    ) -> list[Path]:
        """Write the non-empty tables atomically (CSV/Parquet by suffix), each with its facts
        JSON beside it (``facts_path``).

        Args:
            out: where the DDP steps go (None: not written).
            collectives_out: where the all-reduce samples go (None: not written).
            finished: whether the run is done, in the facts (default: not interrupted); a
                later run with the same output keeps an unfinished run's rows.

        Returns:
            The paths written, tables and facts.
        """
        doc = {
            **self.facts,
            "interrupted": self.interrupted,
            "finished": not self.interrupted if finished is None else finished,
        }
        written = []
        for table, path in ((self.measurements, out), (self.collectives, collectives_out)):
            if path is not None and not table.empty:
                written.append(write_table(table, path))
                written.append(write_json(doc, facts_path(path)))
        return written

    def keep(self, stages: _Stages, finished: bool) -> None:
        """Write the tables where ``stages`` say (the outputs once finished, else beside an
        older file), record where, and drop partial files of a finished run; a finished run
        first moves an unfinished run's rows at its outputs aside (``Staging.set_aside``)."""
        out, coll = stages.paths(finished)
        if finished:
            stages.set_aside()
        self.save(out, coll, finished)
        self.written = out if out is not None and not self.measurements.empty else None
        if coll is not None and not self.collectives.empty:
            self.written_collectives = coll
        if finished:
            stages.finish()
        self.kept = stages.kept(finished)
        self.earlier = stages.note()


class _Stages:
    """The steps' and the collectives' ``files.Staging``: an older output is replaced only
    by a finished run; until then (and when interrupted or failed) rows go beside it."""

    def __init__(self, out, collectives_out) -> None:
        def stage(path) -> Staging | None:
            if path is None:
                return None
            return Staging(path, lambda p: [facts_path(p)], unfinished_table)

        self.out, self.coll = stage(out), stage(collectives_out)

    def paths(self, finished: bool) -> tuple[Path | None, Path | None]:
        """Where the steps and the collectives go: the outputs once ``finished``, else the
        working paths (beside an older file)."""

        def where(stage: Staging | None) -> Path | None:
            if stage is None:
                return None
            return stage.final if finished else stage.working

        return where(self.out), where(self.coll)

    def set_aside(self) -> None:
        """The run finished: before it replaces its outputs, keep an unfinished run's rows
        there under the partial names (``Staging.set_aside``)."""
        for stage in (self.out, self.coll):
            if stage is not None:
                stage.set_aside()

    def finish(self) -> None:
        """The run finished and its tables are in place: drop partial files."""
        for stage in (self.out, self.coll):
            if stage is not None:
                stage.finish()

    def note(self) -> str:
        """Where earlier unfinished runs' rows stay beside the outputs ('' when none)."""
        stages = [s for s in (self.out, self.coll) if s is not None]
        return "; ".join(filter(None, (s.note() for s in stages)))

    def kept(self, finished: bool) -> str:
        """Where the rows are, in words, for the command's last line."""
        stages = [s for s in (self.out, self.coll) if s is not None]
        if finished:
            return "in " + " and ".join(str(s.final) for s in stages)
        return " and ".join(s.kept() for s in stages)


def under_torchrun() -> bool:
    """True inside a process that torchrun (or another launcher with its env) started."""
    return all(k in os.environ for k in _TORCHRUN_ENV)


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows) if rows else pd.DataFrame()


def _check_worlds(world_sizes: Sequence[int], device_type: str) -> list[int]:
    worlds = check_batch_sizes(world_sizes, what="world sizes")
    allowed = host.max_world_size(device_type)
    over = [w for w in worlds if w > allowed]
    if over:
        unit = "GPUs" if device_type == "cuda" else f"2 x {host.cpu_cores()} cores"
        raise InputError(
            f"world size {over[0]} is more than this machine runs at once ({allowed}: {unit})",
            fix=f"use world sizes up to {allowed} here, or run across nodes with torchrun",
        )
    return worlds


def profile_distributed(
    model: str | None = "mlp",
    world_sizes: Sequence[int] | None = (1, 2),
    batch_sizes: Sequence[int] = (8,),
    backend: str = "auto",
    device: str = "auto",
    target_precision: float = 0.02,
    max_seconds: float = 60.0,
    *,
    sizes_bytes: Sequence[int] = (),
    measure_sync: bool = True,
    timeout_s: float = 120.0,
    level: float = 0.95,
    warmup: int = 5,
    min_steps: int = 10,
    max_steps: int = 100_000,
    out: str | os.PathLike | None = None,
    collectives_out: str | os.PathLike | None = None,
    progress: bool = True,
) -> DistributedResult:
    """DDP training steps of ``model`` (a spec name, see :mod:`srifty_kit.zoo`) and all-reduce
    samples of ``sizes_bytes`` at each world size; see the module docstring.

    ``max_seconds`` is the measuring budget, shared equally by every (world size, batch size)
    and (world size, message size); process start-up and warm-up come on top. A batch size
    whose first training step fails (a BatchNorm cannot train on a batch of 1) is not
    measured at that world size, with a ``ProfileWarning`` and its cause in
    ``result.errors``, and the others are; a model that fails at every batch size is an
    ``InputError``. Configurations the budget cut short of ``target_precision`` keep their
    steps, with a ``BudgetWarning`` and ``facts['budget_short']`` (``budget_short``), as
    ``profile_spec`` does.
    """
    check_out_path(out)
    check_out_path(collectives_out)
    if model is not None:
        try:  # an unknown name fails here, before any process starts
            load_spec(model)
        except KeyboardInterrupt:  # while the model was built: nothing measured or written
            return DistributedResult(pd.DataFrame(), pd.DataFrame(), interrupted=True)
    batches = check_batch_sizes(batch_sizes) if model is not None else []
    sizes = check_batch_sizes(sizes_bytes, what="message sizes") if sizes_bytes else []
    if not batches and not sizes:
        raise InputError("nothing to measure", fix="give a model and batch sizes, or sizes_bytes")
    check_budget(target_precision, max_seconds)
    try:  # seconds on CUDA (its start-up): an interrupt says what it stopped
        device_type = resolve_device(device).type
        here = host.instance_type(device_type), max(1, host.max_world_size(device_type))
    except KeyboardInterrupt:
        empty = pd.DataFrame()
        return DistributedResult(empty, empty, interrupted=True, stopped_while="finding the device")
    if backend == "auto":
        backend = "nccl" if device_type == "cuda" else "gloo"
    if backend not in ("gloo", "nccl") or (backend == "nccl" and device_type != "cuda"):
        raise InputError(
            f"backend {backend!r} does not run on {device_type}",
            fix="use gloo on CPU, nccl (or gloo) on CUDA",
        )
    torchrun = under_torchrun()
    worlds = (
        [int(os.environ["WORLD_SIZE"])]
        if torchrun
        else _check_worlds(world_sizes or (1,), device_type)
    )
    if torchrun and world_sizes and list(world_sizes) != worlds:
        raise InputError(
            f"world sizes {list(world_sizes)} differ from torchrun's {worlds[0]}",
            fix="leave --world-sizes out under torchrun",
        )
    per = max_seconds / (len(worlds) * (len(batches) + len(sizes)))
    plan = Plan(
        model,
        tuple(batches),
        tuple(sizes),
        backend,
        device_type,
        per,
        target_precision,
        level,
        warmup,
        max(2, min_steps),
        max_steps,
        measure_sync,
        *here,
        timeout_s + _PG_EXTRA_S,
        f"{host.hostname()}@{host.now()}",
    )
    stages = _Stages(out, collectives_out)  # what is there now is kept until the run ends
    if torchrun:
        result = _under_torchrun(plan, stages)
    else:
        result = _spawn_worlds(plan, worlds, timeout_s, stages, progress)
    short = budget_short(result.measurements, plan, max_seconds)
    if short and not result.interrupted:
        result.facts["budget_short"] = short
        warn(budget_note(short), BudgetWarning)
    for (world, b), cause in result.errors.items():
        warn(f"world size {world}, batch size {b} not measured: {cause}", ProfileWarning)
    return result


def budget_short(steps: pd.DataFrame, plan: Plan, max_seconds: float) -> dict[str, Any] | None:
    """The (world size, batch size) configurations whose steps the time budget cut short of
    the target precision, in ``profile``'s ``budget_short`` form (``budget_note`` words it),
    with about the ``max_seconds`` that would have reached it; None when none was.

    Each configuration's precision is the stopping rule's (``batch_means_estimate`` of its
    steps in order); one that stopped at ``max_steps`` was not cut short. The budget is
    shared equally, so the configuration that needs the most time sets it: its warm-up and
    the steps its precision asks (precision goes as 1/sqrt(steps)) at its mean step, times
    the number of shares.
    """
    if steps.empty:
        return None
    fewest = fewest_steps("batch_means", plan.min_steps)
    short, need_s = [], 0.0
    order = "repeat" if "repeat" in steps else None
    for (world, b), rows in steps.groupby(["num_workers", "local_bsz"], sort=True):
        values = (rows.sort_values(order) if order else rows)["step_time_s"].to_numpy(float)
        est = batch_means_estimate(values, plan.level)
        if values.size >= plan.max_steps or est.precision <= plan.target_precision:
            continue
        short.append((f"{b} at world size {world}", values.size))
        need_s = max(
            need_s,
            seconds_to_target(
                values.size,
                est.precision,
                plan.target_precision,
                fewest,
                plan.warmup,
                float(values.mean()),
            ),
        )
    if not short:
        return None
    seconds = max_seconds * need_s / plan.seconds_per_config
    return budget_short_facts(short, fewest, plan.target_precision, seconds)


def _spawn_worlds(plan, worlds, timeout_s, stages: _Stages, progress) -> DistributedResult:
    sink: dict[str, list] = {"row": [], "collective": [], "skipped": []}
    failure, interrupted = None, False
    try:
        with progress_bar(worlds, desc="distributed", show=progress) as bar:
            for world in bar:
                failure = measure_world(world, plan, sink, timeout_s, bar)
                if failure:
                    break
                _result(sink, False, plan).save(*stages.paths(finished=False), finished=False)
    except KeyboardInterrupt:
        interrupted = True
    result = _result(sink, interrupted, plan)
    result.keep(stages, finished=not (interrupted or failure))
    if failure:
        kept = (
            f"; {counted(len(result.measurements), 'step')} and "
            f"{counted(len(result.collectives), 'all-reduce sample')} measured before are kept "
            f"{result.kept}"
        )
        if result.measurements.empty and result.collectives.empty:  # no file to point at
            kept = "; nothing was measured before it, so nothing was written" + "".join(
                f"; {p} is as it was" for p in stages.paths(finished=True) if p and p.exists()
            )
        if failure.bad_input:
            raise WorkerInputError(failure.line + kept, result, fix=failure.fix)
        raise WorkerFailed(failure.line + kept, result)
    return result


def _result(sink: dict[str, list], interrupted: bool, plan: Plan) -> DistributedResult:
    steps = _frame(sink["row"])
    if not steps.empty:
        # every step of this call is one run: a fit then tells one step's spread about its
        # run's mean from the spread between runs (model.intervals.run_variance)
        steps["run"] = plan.run
        validate_measurements(steps, source="distributed profile")
    coll = _frame(sink["collective"])
    if not coll.empty:
        # bus bandwidth as nccl-tests defines it for all-reduce (its doc/PERFORMANCE.md):
        # algbw = bytes / time, busbw = algbw * 2 (n - 1) / n, comparable across world sizes
        coll["algbw_gbps"] = coll["bytes"] / coll["seconds"] / 1e9
        n = coll["world_size"]
        coll["busbw_gbps"] = coll["algbw_gbps"] * 2 * (n - 1) / n
    facts = {
        "backend": plan.backend,
        "instance_type": plan.instance_type,
        "seconds_per_config": plan.seconds_per_config,
    }
    errors = {(s["num_workers"], s["local_bsz"]): s["cause"] for s in sink["skipped"]}
    return DistributedResult(steps, coll, interrupted, facts, errors)


def _under_torchrun(plan: Plan, stages: _Stages) -> DistributedResult:
    """This process is one rank of a torchrun world: measure, and let rank 0 keep the rows."""
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    init_group(plan.backend, "env://", rank, world, plan.timeout_s)
    try:
        hosts: list[Any] = [None] * world
        dist.all_gather_object(hosts, (host.hostname(), plan.instance_type))
        nodes = max(1, math.ceil(world / local_world))
        types = sorted({t for _, t in hosts})
        plan = dataclasses.replace(
            plan, instance_type="+".join(types), gpus_per_node=max(plan.gpus_per_node, local_world)
        )
        lay = Layout(
            rank,
            world,
            local_rank,
            nodes,
            str(local_world) * nodes,
            ",".join(sorted({h for h, _ in hosts})),
        )
        sink: dict[str, list] = {"row": [], "collective": [], "skipped": []}

        def keep(kind: str, payload: dict[str, Any]) -> None:
            if kind in sink:
                sink[kind].append(payload)
            elif kind == "config" and rank == 0:  # a configuration ended: keep it on disk
                _result(sink, False, plan).save(*stages.paths(finished=False), finished=False)

        run(plan, lay, keep)
        result = _result(sink, False, plan)
        if rank == 0:
            result.keep(stages, finished=True)
        return result
    finally:
        dist.destroy_process_group()


def allreduce_sweep(
    world_sizes: Sequence[int] | None = (2,),
    sizes_bytes: Sequence[int] = DEFAULT_SIZES,
    backend: str = "auto",
    device: str = "auto",
    target_precision: float = 0.05,
    max_seconds: float = 60.0,
    **kwargs: Any,
) -> pd.DataFrame:
    """All-reduce seconds per message size and world size, every sample (collectives table)."""
    return profile_distributed(
        None,
        world_sizes,
        (),
        backend,
        device,
        target_precision,
        max_seconds,
        sizes_bytes=sizes_bytes,
        **kwargs,
    ).collectives
