"""Gradient noise scale B_simple = tr(Sigma)/|G|^2 from gradient norms at two batch sizes.

McCandlish, Kaplan, Amodei et al. (2018), "An Empirical Model of Large-Batch Training",
arXiv:1812.06162, Appendix A.1. For a mean gradient estimate over a batch of B samples,
E[|G_B|^2] = |G|^2 + tr(Sigma)/B, so two batch sizes B_small < B_big give unbiased estimates

    |G|^2     ~= (B_big |G_Bbig|^2 - B_small |G_Bsmall|^2) / (B_big - B_small)
    tr(Sigma) ~= (|G_Bsmall|^2 - |G_Bbig|^2) / (1/B_small - 1/B_big)

and B_simple = tr(Sigma) / |G|^2 (the paper's section 2). The ratio is taken of the means over
repeats, as the paper advises; its spread comes from a bootstrap over the repeats.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from srifty_kit.measure.torch_step import device_batch, forward_loss, grad_sq_norm


def simple_noise_scale(
    sq_small: np.ndarray | float, sq_big: np.ndarray | float, b_small: int, b_big: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B_simple, |G|^2, tr(Sigma)) from mean squared gradient norms; vectorised over arrays."""
    sq_small = np.asarray(sq_small, dtype=float)
    sq_big = np.asarray(sq_big, dtype=float)
    g2 = (b_big * sq_big - b_small * sq_small) / (b_big - b_small)  # |G|^2, Appendix A.1
    trace = (sq_small - sq_big) / (1.0 / b_small - 1.0 / b_big)  # tr(Sigma), Appendix A.1
    with np.errstate(divide="ignore", invalid="ignore"):
        # both estimates are of positive quantities; while noise makes either one not positive
        # the ratio says nothing
        b_simple = np.where((g2 > 0) & (trace > 0), trace / g2, np.nan)
    return b_simple, g2, trace


@dataclass
class NoiseScale:
    """The gradient noise scale of a model at its current weights, with its spread."""

    noise_scale: float | None  # B_simple, samples
    noise_scale_std: float | None  # bootstrap standard deviation over repeats
    noise_scale_lo: float | None  # bootstrap percentile interval at ``level``
    noise_scale_hi: float | None
    level: float
    grad_norm_sq: float  # |G|^2 estimate
    grad_trace_cov: float  # tr(Sigma) estimate
    batch_sizes: tuple[int, int]  # (B_small, B_big)
    repeats: int
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready fields (prefixed ``noise_scale_`` where ambiguous)."""
        out = asdict(self)
        out["noise_scale_level"] = out.pop("level")
        out["noise_scale_batch_sizes"] = list(out.pop("batch_sizes"))
        out["noise_scale_repeats"] = out.pop("repeats")
        out["noise_scale_note"] = out.pop("note")
        return out


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def estimate(
    sq_small: np.ndarray,
    sq_big: np.ndarray,
    b_small: int,
    b_big: int,
    level: float = 0.9,
    n_resamples: int = 2000,
    seed: int = 0,
) -> NoiseScale:
    """B_simple from per-repeat |G_B|^2 at two batch sizes, with a bootstrap spread."""
    sq_small, sq_big = np.asarray(sq_small, float), np.asarray(sq_big, float)
    point, g2, trace = (
        float(v) for v in simple_noise_scale(sq_small.mean(), sq_big.mean(), b_small, b_big)
    )
    rng = np.random.default_rng(seed)
    i = rng.integers(0, len(sq_small), (n_resamples, len(sq_small)))
    j = rng.integers(0, len(sq_big), (n_resamples, len(sq_big)))
    boot, _, _ = simple_noise_scale(
        sq_small[i].mean(axis=1), sq_big[j].mean(axis=1), b_small, b_big
    )
    defined = boot[np.isfinite(boot)]
    note = ""
    if not (np.isfinite(sq_small).all() and np.isfinite(sq_big).all()):
        note = "the gradient is not finite (NaN or infinite): check the loss on one batch"
    elif not math.isfinite(point):
        note = (
            "|G|^2 or tr(Sigma) estimate not positive: noise swamps the difference "
            "between the two batch sizes; take more repeats"
        )
    elif len(defined) < 0.9 * n_resamples:
        note = "unstable: undefined in over 10% of the resamples; take more repeats"
    # no spread around an estimate that is undefined: the resamples where the ratio happens to
    # be defined are not an interval of it (they said 'n/a +- 948')
    if len(defined) >= 2 and math.isfinite(point):
        lo, hi = np.percentile(defined, [50 - 50 * level, 50 + 50 * level])
        std = float(np.std(defined, ddof=1))
    else:
        lo = hi = std = math.nan
    return NoiseScale(
        _finite(point),
        _finite(std),
        _finite(lo),
        _finite(hi),
        level,
        g2,
        trace,
        (int(b_small), int(b_big)),
        int(min(len(sq_small), len(sq_big))),
        note,
    )


def noise_batch_sizes(batch_sizes: list[int]) -> tuple[int, int]:
    """The two batch sizes to compare: the smallest and largest profiled, else b/2 and b."""
    lo, hi = min(batch_sizes), max(batch_sizes)
    if lo < hi:
        return lo, hi
    return (max(1, hi // 2), hi) if hi >= 2 else (1, 2)


def _settled(
    sq_small: list[float], sq_big: list[float], b_small: int, b_big: int, target: float
) -> bool:
    """Whether |G|^2 and tr(Sigma) are both known to +-target (two standard errors)."""
    if len(sq_small) < 5:
        return False
    _, g2, trace = simple_noise_scale(np.array(sq_small), np.array(sq_big), b_small, b_big)
    n = len(g2)  # one pair of estimates per repeat; their mean is the pooled estimate
    for est in (g2, trace):
        mean = abs(float(est.mean()))
        if mean == 0 or 2 * float(est.std(ddof=1)) / np.sqrt(n) > target * mean:
            return False
    return True


def measure(
    model: torch.nn.Module,
    make_batch: Callable[[int], Any],
    loss_fn: Callable[[Any, Any], Any],
    batch_sizes: tuple[int, int],
    device: torch.device,
    max_repeats: int = 50,
    max_seconds: float = 10.0,
    level: float = 0.9,
    target_precision: float = 0.1,
    max_micro_batch: int | None = None,
) -> NoiseScale:
    """|G_B|^2 on fresh batches at two batch sizes, weights held fixed, then :func:`estimate`.

    Repeats until |G|^2 and tr(Sigma) are both within ``target_precision`` (two standard
    errors over the repeats), ``max_seconds`` is spent (two repeats at least, for a spread),
    or ``max_repeats``. Batches above ``max_micro_batch`` are accumulated in micro-batches,
    so B_big can approach the noise scale itself, where the estimate is best conditioned.
    """
    b_small, b_big = batch_sizes
    micro = max(1, max_micro_batch or b_big)
    sq: dict[int, list[float]] = {b_small: [], b_big: []}
    deadline = time.perf_counter() + max_seconds
    model.train()
    for r in range(max(2, max_repeats)):
        for b in (b_small, b_big):
            model.zero_grad(set_to_none=True)
            # a batch larger than fits is accumulated from micro-batches: the batch-mean
            # gradient is the size-weighted mean of the micro-batch means
            for start in range(0, b, micro):
                size = min(micro, b - start)
                batch = device_batch(make_batch, size, device)
                (forward_loss(model, batch, loss_fn) * (size / b)).backward()
            sq[b].append(grad_sq_norm(model))
        if r >= 1 and time.perf_counter() > deadline:
            break
        if _settled(sq[b_small], sq[b_big], b_small, b_big, target_precision):
            break
    model.zero_grad(set_to_none=True)
    return estimate(np.array(sq[b_small]), np.array(sq[b_big]), b_small, b_big, level)
