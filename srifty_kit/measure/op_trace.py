"""Where a training step's time goes on the device that ran it, per operator class.

Habitat (Yu et al., USENIX ATC'21) carries a step to another GPU kernel by kernel, scaling
each measured kernel by the ratio of the resource that bounds it. This module measures what
that needs at the granularity the op mix knows FLOPs and bytes for (``measure.opgraph``'s
classes): a few training steps at one batch size under ``torch.profiler``, giving

  step_s    wall time of a step, the device synchronised
  launch_s  the host's part: from the step's start until its last operator is issued (no
            synchronise; on a GPU the kernels may still be running)
  busy_s    device time of every kernel (on a CPU: the operators' own time)
  classes   the operators' device time by class (tensor, elementwise, normalisation,
            reduction, embedding, and optimizer: everything inside ``optimizer.step()``);
            what the profiler gives no launching operator stays in busy_s only

``model.roofline.traced_step`` carries each class by its own roofline ratio. On a CPU, host
and device are one and a CPU's time says nothing of a GPU's: a CPU trace is recorded for
what it shows (where the step's time goes) and never opens the trace route. The record's
contract is checked where it is read (``model.roofline.check_trace``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from srifty_kit.errors import InputError
from srifty_kit.measure.opgraph import OP_CLASSES, op_class
from srifty_kit.measure.torch_step import OPTIMIZER_RANGE, synchronize

TRACE_STEPS = 3  # profiled steps per batch size (after one warm-up step)


def trace_batch(
    step: Callable[[], None], device: torch.device, steps: int = TRACE_STEPS
) -> dict[str, Any]:
    """Profile ``steps`` calls of ``step`` (one training step at one batch size).

    Args:
        step: runs one training step (``measure.torch_step.train_step``, whose optimizer
            step is labelled ``OPTIMIZER_RANGE``).
        device: where it runs: CUDA kernels are timed on a ``cuda`` device, operators' own
            CPU time elsewhere.
        steps: how many steps to profile (after one warm-up step outside the profiler).

    Returns:
        Per step, in seconds: ``step_s``, ``launch_s``, ``busy_s`` and ``classes`` ({class:
        seconds} over ``OP_CLASSES``), as the module describes.

    Raises:
        InputError: ``steps`` below 1.
    """
    from torch.profiler import ProfilerActivity, profile

    if not (isinstance(steps, int) and steps >= 1):
        raise InputError(f"steps must be a whole number >= 1, got {steps!r}", fix="3")
    cuda = device.type == "cuda"
    step()
    synchronize(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    walls, launches = [], []
    prof = profile(activities=activities)
    with _quiet_stderr():  # the profiler's C++ side logs its start and stop there
        prof.start()
    try:
        for _ in range(steps):
            synchronize(device)
            start = time.perf_counter()
            step()
            launched = time.perf_counter()
            synchronize(device)
            walls.append(time.perf_counter() - start)
            launches.append(launched - start)
    finally:
        with _quiet_stderr():
            prof.stop()
    classes, busy = _device_time(prof.events(), cuda)
    return {
        "step_s": sum(walls) / steps,
        "launch_s": sum(launches) / steps,
        "busy_s": max(busy, sum(classes.values())) / steps,
        "classes": {c: t / steps for c, t in classes.items()},
    }


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null for the block (what C++ writes there too)."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _device_time(events: Any, cuda: bool) -> tuple[dict[str, float], float]:
    """({class: seconds}, all kernels' seconds) of a profiler's events: an aten operator's
    self device time (its kernels, not its children's) goes to its class, or to
    ``optimizer`` when it started inside the optimizer's range."""
    windows = [(e.time_range.start, e.time_range.end) for e in events if e.name == OPTIMIZER_RANGE]
    classes = dict.fromkeys(OP_CLASSES, 0.0)
    kernels = 0.0
    for e in events:
        if cuda and _is_kernel(e):
            kernels += e.time_range.elapsed_us() * 1e-6
        if not e.name.startswith("aten::"):
            continue
        own = _self_device_us(e) if cuda else e.self_cpu_time_total
        if own <= 0:
            continue
        start = e.time_range.start
        inside = any(a <= start < b for a, b in windows)
        cls = "optimizer" if inside else op_class(e.name.removeprefix("aten::"))
        classes[cls] += own * 1e-6
    return classes, kernels


def _is_kernel(event: Any) -> bool:
    """A device-side event (a CUDA kernel, a copy or a memset), not a host operator."""
    return str(getattr(event, "device_type", "")).endswith("CUDA")


def _self_device_us(event: Any) -> float:
    # the name changed in torch 2.4 (self_cuda_time_total before)
    for name in ("self_device_time_total", "self_cuda_time_total"):
        value = getattr(event, name, None)
        if value is not None:
            return float(value)
    return 0.0
