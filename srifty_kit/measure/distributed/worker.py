"""What each torch.distributed rank measures: all-reduce sweeps and DDP training steps.

Every rank takes part in every collective, so the ranks must agree when to stop: after each
sample they all-reduce (MAX) their own timings and a "my time is up" flag, and then apply the
same rule to the same numbers. Rank 0 hands each finished row to ``emit``.
"""

from __future__ import annotations

import datetime as dt
import gc
import math
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from srifty_kit.errors import InputError
from srifty_kit.measure import host
from srifty_kit.measure.stopping import PrecisionTracker
from srifty_kit.measure.torch_step import (
    count_flops,
    device_batch,
    parameter_facts,
    step_cause,
    step_failed,
    timed_step,
    train_step,
)
from srifty_kit.measure.zoo import load_spec

# (kind, payload): "row"/"collective"/"config"/"skipped" (a batch size whose step failed)
Emit = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Plan:
    """What to measure, identical on every rank (it is pickled to spawned workers)."""

    model: str | None  # model spec name; None: no training steps
    batch_sizes: tuple[int, ...]
    sizes_bytes: tuple[int, ...]  # all-reduce message sizes; empty: no sweep
    backend: str  # "gloo" | "nccl"
    device_type: str  # "cpu" | "cuda"
    seconds_per_config: float
    target_precision: float
    level: float
    warmup: int
    min_steps: int
    max_steps: int
    measure_sync: bool
    instance_type: str
    gpus_per_node: int
    timeout_s: float
    run: str = ""  # one id per profiling call (as profile_spec's): tells runs apart in a fit


@dataclass(frozen=True)
class Layout:
    """Where this rank sits: its rank, the world, the nodes."""

    rank: int
    world_size: int
    local_rank: int
    num_nodes: int
    placement: str
    host: str


def _agree(values: list[float], time_up: bool, device: torch.device) -> tuple[list[float], bool]:
    """Element-wise MAX of every rank's values and of the time-up flags (float64, exact)."""
    t = torch.tensor([*values, float(time_up)], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    out = t.tolist()
    return out[:-1], out[-1] > 0


def _barrier(device: torch.device) -> None:
    if device.type == "cuda":
        dist.barrier(device_ids=[device.index or 0])
    else:
        dist.barrier()


def _sample(
    plan: Plan,
    lay: Layout,
    device: torch.device,
    measure: Callable[[], list[float]],
    row: Callable[[list[float]], dict[str, Any]],
    kind: str,
    emit: Emit,
    min_steps: int | None = None,
) -> None:
    """Sample until the shared rule stops: precision reached, step limit or anyone's time up.

    Every rank applies the rule to the same agreed (MAX) values, so all stop together; the
    first value is the one whose precision counts. Rank 0 emits one row per sample.
    """
    tracker = PrecisionTracker(plan.level)
    end = time.perf_counter() + plan.seconds_per_config
    least = plan.min_steps if min_steps is None else min_steps
    while True:
        values, time_up = _agree(measure(), time.perf_counter() >= end, device)
        if lay.rank == 0:
            emit(kind, {**row(values), "repeat": tracker.n, "timestamp": host.now()})
        tracker.add(values[0])
        if tracker.stop_reason(plan.target_precision, least, plan.max_steps, time_up):
            return


def _base_row(plan: Plan, lay: Layout, device: torch.device) -> dict[str, Any]:
    return {
        "instance_type": plan.instance_type,
        "num_nodes": lay.num_nodes,
        "num_workers": lay.world_size,
        "gpus_per_node": plan.gpus_per_node,
        "placement": lay.placement,
        "host": lay.host,
        "device": device.type,
        "backend": plan.backend,
    }


def allreduce_sweep(plan: Plan, lay: Layout, device: torch.device, emit: Emit) -> None:
    """Time all_reduce of float32 tensors of each size; every sample is a row."""
    base = _base_row(plan, lay, device)
    for nbytes in plan.sizes_bytes:
        emit("config", {"what": f"all-reduce of {nbytes} bytes", "rank": lay.rank})
        x = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
        for _ in range(min(plan.warmup, 2)):  # big messages are slow: two warm-ups suffice
            dist.all_reduce(x)
        sent = x.numel() * 4  # whole float32 elements

        def once(x: torch.Tensor = x) -> list[float]:
            _barrier(device)  # start together, so the time is the collective's, not a wait
            return [timed_step(lambda: dist.all_reduce(x), device)]

        def row(times: list[float], sent: int = sent) -> dict[str, Any]:
            return {
                **base,
                "op": "all_reduce",
                "bytes": sent,
                "world_size": lay.world_size,
                "seconds": times[0],
            }

        # big messages are slow: five samples may be all the budget allows
        _sample(plan, lay, device, once, row, "collective", emit, min(plan.min_steps, 5))


def _first_steps(
    spec: Any, model: torch.nn.Module, plan: Plan, lay: Layout, device: torch.device, emit: Emit
) -> tuple[float | None, list[int]]:
    """One plain training step at each batch size (counting the FLOPs of the first that
    trains): the model, batch or loss that do not fit are the user's.

    A batch size whose step fails on any rank is skipped by every rank (they agree, so the
    collectives still match) and rank 0 emits it as ``skipped`` with the cause; the others
    are measured (a BatchNorm cannot train on a batch of 1). A model that fails at every
    batch size is refused. Returns the FLOPs per sample and the batch sizes to measure.
    """
    flops, counted, failed = None, False, {}
    for b in plan.batch_sizes:
        try:
            got, _ = count_flops(model, device_batch(spec.make_batch, b, device), spec.loss_fn, b)
        except InputError:
            raise
        except Exception as err:  # reported below; the other batch sizes go on
            failed[b] = err
            model.zero_grad(set_to_none=True)
            gc.collect()
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        if not counted:
            flops, counted = got, True
    causes: list[Any] = [None] * lay.world_size
    dist.all_gather_object(causes, {b: step_cause(b, err) for b, err in failed.items()})
    skipped: dict[int, str] = {}
    for said in causes:  # the lowest rank's cause of each batch size
        for b, cause in said.items():
            skipped.setdefault(b, cause)
    sizes = [b for b in plan.batch_sizes if b not in skipped]
    if not sizes:
        b = plan.batch_sizes[0]
        hint = f" (srifty profile --batch-sizes {b} shows it on one process)"
        if b in failed:
            raise step_failed(b, failed[b], hint) from failed[b]
        raise InputError(
            f"a training step at batch size {b} failed on another rank: {skipped[b]}",
            fix="make make_batch(batch_size) return (inputs, targets) that the model and "
            "loss_fn take; try one step by hand" + hint,
        )
    if lay.rank == 0:
        for b in sorted(skipped):
            emit("skipped", {"num_workers": lay.world_size, "local_bsz": b, "cause": skipped[b]})
    return flops, sizes


def ddp_steps(plan: Plan, lay: Layout, device: torch.device, emit: Emit) -> None:
    """Time DistributedDataParallel training steps at each local batch size.

    With ``measure_sync`` each synchronised step is paired with one under ``no_sync()`` (the
    same step without the gradient all-reduce, the way AdaptDL's profiler separates an
    accumulation step from an optimizer step): ``compute_time_s`` is that step's time and
    ``sync_time_s = max(0, step_time_s - compute_time_s)`` the all-reduce time it exposes.
    """
    from torch.nn.parallel import DistributedDataParallel as DDP

    spec = load_spec(plan.model)
    model = spec.model.to(device).train()
    flops, sizes = _first_steps(spec, model, plan, lay, device, emit)
    ddp = DDP(model, device_ids=[device.index or 0] if device.type == "cuda" else None)
    optimizer = spec.optimizer_fn(ddp.parameters())
    base = {
        "model": spec.name,
        **_base_row(plan, lay, device),
        "flops_per_sample": flops,
        **parameter_facts(model),
    }
    for b in sizes:
        emit("config", {"what": f"DDP steps at batch size {b}", "rank": lay.rank})
        batch = device_batch(spec.make_batch, b, device)
        trained = [0]  # synchronised steps at this batch size that ran to the end

        def synced(batch: Any = batch, trained: list[int] = trained) -> None:
            train_step(ddp, batch, spec.loss_fn, optimizer)
            trained[0] += 1

        def local(batch: Any = batch) -> None:
            with ddp.no_sync():
                train_step(ddp, batch, spec.loss_fn, optimizer)

        def pair(synced: Any = synced, local: Any = local) -> list[float]:
            times = [timed_step(synced, device)]
            return times + [timed_step(local, device)] if plan.measure_sync else times

        def row(times: list[float], b: int = b) -> dict[str, Any]:
            step, compute = times[0], times[1] if plan.measure_sync else math.nan
            return {
                **base,
                "local_bsz": b,
                "step_time_s": step,
                "compute_time_s": compute,
                "sync_time_s": max(0.0, step - compute) if plan.measure_sync else math.nan,
            }

        try:
            for _ in range(plan.warmup):
                synced()
                if plan.measure_sync:
                    local()
            _sample(plan, lay, device, pair, row, "row", emit)
        except (InputError, dist.DistError):
            raise  # the user's mistake as said; a collective that failed is the group's
        except Exception as err:  # the user's model, batch or loss raised in a later step
            hint = f" (srifty profile --batch-sizes {b} runs these steps in one process)"
            raise step_failed(b, err, hint, after=trained[0]) from err


def run(plan: Plan, lay: Layout, emit: Emit) -> None:
    """Everything the plan asks for, on this rank (the process group is already up)."""
    device = (
        torch.device("cuda", lay.local_rank) if plan.device_type == "cuda" else torch.device("cpu")
    )
    if device.type == "cuda":
        torch.cuda.set_device(device)
    if plan.sizes_bytes:
        allreduce_sweep(plan, lay, device, emit)
    if plan.model is not None and plan.batch_sizes:
        ddp_steps(plan, lay, device, emit)


def init_group(backend: str, init_method: str, rank: int, world: int, timeout_s: float) -> None:
    """Join the process group (the group's timeout bounds every collective)."""
    dist.init_process_group(
        backend,
        init_method=init_method,
        rank=rank,
        world_size=world,
        timeout=dt.timedelta(seconds=timeout_s),
    )


def spawned_worker(rank: int, world: int, port: int, plan: Plan, threads: int, q: Any) -> None:
    """Body of one spawned worker: join the group, measure, report through the queue."""
    torch.set_num_threads(threads)  # the workers share the cores instead of fighting over them
    try:
        init_group(plan.backend, f"tcp://127.0.0.1:{port}", rank, world, plan.timeout_s)
        lay = Layout(rank, world, rank, 1, str(world), host.hostname())
        run(plan, lay, lambda kind, payload: q.put((kind, payload)))
        q.put(("done", {"rank": rank}))
    except BaseException as err:  # noqa: BLE001 - reported to the parent, then the exit says so
        bad_input = isinstance(err, InputError)
        frame = traceback.extract_tb(err.__traceback__)[-1:] if err.__traceback__ else []
        where = f" at {Path(frame[0].filename).name}:{frame[0].lineno}" if frame else ""
        # bad input: its line and its fix apart, so that the parent says the fix last
        cause = str(err.but(fix=None)) if bad_input else f"{type(err).__name__}: {err}{where}"
        fix = err.fix if bad_input else None
        q.put(("error", {"rank": rank, "cause": cause, "fix": fix, "input_error": bad_input}))
        q.close()
        q.join_thread()
        os._exit(1)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
