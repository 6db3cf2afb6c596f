"""Peak memory of training steps and the largest batch under a memory budget.

On CUDA the caching allocator's peak is exact, and the largest batch is found by trying steps
under a capped allocator and bisecting on out-of-memory. On CPU an out-of-memory is the
kernel killing the process, so the peak resident set size (Linux VmHWM, reset through
/proc/self/clear_refs) is measured per batch size and its linear growth is extrapolated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

_CLEAR_REFS = "/proc/self/clear_refs"
_RESET_PEAK_RSS = "5"  # proc(5): writing 5 resets the peak resident set size (VmHWM)


def _vm_hwm_bytes() -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class PeakMemory:
    """Peak memory between ``reset()`` and ``peak_bytes()``; ``method`` says how it is read."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        if device.type == "cuda":
            self.method = "cuda allocator peak"
        elif _vm_hwm_bytes() is not None and self._try_clear():
            self.method = "process peak RSS"
        else:
            self.method = "process RSS after the steps"  # no resettable peak on this OS

    @staticmethod
    def _try_clear() -> bool:
        try:
            with open(_CLEAR_REFS, "w") as fh:
                fh.write(_RESET_PEAK_RSS)
            return True
        except OSError:
            return False

    def reset(self) -> None:
        """Start a new peak."""
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        elif self.method == "process peak RSS":
            self._try_clear()

    def peak_bytes(self) -> int:
        """The peak since the last reset."""
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        if self.method == "process peak RSS":
            return int(_vm_hwm_bytes() or 0)
        import psutil

        return int(psutil.Process().memory_info().rss)


def default_budget(device: torch.device) -> int:
    """The device's whole memory: GPU memory on CUDA, the machine's RAM on CPU."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[1])
    import psutil

    return int(psutil.virtual_memory().total)


@dataclass
class MaxBatch:
    """The largest batch size that fits ``budget_bytes`` and how it was found."""

    max_batch_size: int | None
    method: str  # "bisection on CUDA out-of-memory" | "extrapolation of peak memory" | "none"
    budget_bytes: int
    bytes_per_sample: float | None = None  # slope of the linear fit (extrapolation)
    base_bytes: float | None = None  # intercept: model, optimizer state, runtime
    trials: int = 0  # steps tried (bisection)
    note: str = ""


def extrapolate_max_batch(
    batch_sizes: Sequence[int], peaks: Sequence[float], budget_bytes: int
) -> MaxBatch:
    """Fit peak = base + per_sample * batch and solve for the budget (least squares)."""
    b = np.asarray(batch_sizes, float)
    m = np.asarray(peaks, float)
    method = "extrapolation of peak memory"
    if len(np.unique(b)) < 2:
        return MaxBatch(None, method, budget_bytes, note="needs two batch sizes or more")
    per_sample, base = np.polyfit(b, m, 1)
    # growth under a page, or under 0.1% of the peak, across the batches is noise, not a slope
    grown = per_sample * (b.max() - b.min())
    if grown <= max(4096.0, 1e-3 * float(np.mean(m))):
        return MaxBatch(
            None,
            method,
            budget_bytes,
            float(per_sample),
            float(base),
            note="memory did not grow measurably with the batch: profile larger batches",
        )
    largest = math.floor((budget_bytes - base) / per_sample)
    note = "" if largest <= 8 * b.max() else "far beyond the batches measured: a rough guess"
    return MaxBatch(
        max(0, largest), method, budget_bytes, float(per_sample), float(base), note=note
    )


def bisect_max_batch(
    fits: Callable[[int], bool], known_ok: int, budget_bytes: int, limit: int = 2**20
) -> MaxBatch:
    """Largest b with ``fits(b)``: double from ``known_ok`` until a failure, then bisect.

    Assumes memory grows with the batch (fits is monotone); ``limit`` bounds the search.
    """
    trials = 0

    def probe(b: int) -> bool:
        nonlocal trials
        trials += 1
        return fits(b)

    lo, hi = 0, None
    if probe(known_ok):
        lo, b = known_ok, 2 * known_ok
        while b <= limit:
            if not probe(b):
                hi = b
                break
            lo, b = b, 2 * b
    else:
        hi = known_ok
    method = "bisection on CUDA out-of-memory"
    if hi is None:
        return MaxBatch(lo, method, budget_bytes, trials=trials, note=f"search stopped at {lo}")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if probe(mid):
            lo = mid
        else:
            hi = mid
    return MaxBatch(
        lo,
        method,
        budget_bytes,
        trials=trials,
        note="" if lo else "not even one sample fits the budget",
    )
