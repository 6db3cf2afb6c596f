"""Two-type clusters: batch split by worker speed, step time of a mix, OmniLearn's batch controller.

Steady state. In synchronous training every worker waits for the slowest, so a mix of two
instance types runs best when each worker's local batch is proportional to its speed and all
compute times match (OmniLearn: Tyagi & Sharma, "OmniLearn: A Framework for Distributed Deep
Learning over Heterogeneous Clusters", arXiv:2503.17469, 2025). With compute time linear in the
local batch, t_i(b) = alpha_i + beta_i * b, equal times t and a fixed global batch
B = W_a * b_a + W_b * b_b give

    t = (B + sum_i W_i alpha_i / beta_i) / (sum_i W_i / beta_i),   b_i = (t - alpha_i) / beta_i

The gradient all-reduce runs over every worker, so its time is bounded by the slower link: the
mix's step is the larger of the two types' predicted steps, each evaluated on the whole
cluster (all nodes, all workers) at that type's own local batch.

Controller. OmniLearn reaches that split at run time without a model, with a proportional
controller on each worker's measured compute time t_i against the mean t_bar:

    delta_b_i = -(b_i / t_i) * (t_i - t_bar)        (b_i / t_i: the worker's samples per second)

applied only outside a deadband |t_i - t_bar| > deadband * t_bar (to ignore noise), clamped to
[min_bsz, max_bsz], with the global batch held fixed. ``simulate_controller`` runs it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def proportional_split(
    global_bsz: np.ndarray,
    workers_a: np.ndarray,
    workers_b: np.ndarray,
    alpha_a: np.ndarray,
    beta_a: np.ndarray,
    alpha_b: np.ndarray,
    beta_b: np.ndarray,
    min_bsz: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Local batches (b_a, b_b) with equal compute times and W_a b_a + W_b b_b = B (vectorised).

    Where equal times would push one type below ``min_bsz`` it keeps ``min_bsz`` and the other
    type takes the rest of the global batch.
    """
    big = np.asarray(global_bsz, dtype=float)
    wa, wb = np.asarray(workers_a, dtype=float), np.asarray(workers_b, dtype=float)
    ra, rb = wa / beta_a, wb / beta_b  # each type's samples per second of compute per worker set
    t = (big + ra * alpha_a + rb * alpha_b) / (ra + rb)
    b_a = (t - alpha_a) / beta_a
    b_a = np.clip(b_a, min_bsz, (big - wb * min_bsz) / wa)
    return b_a, (big - wa * b_a) / wb


def integer_split(
    global_bsz: np.ndarray, workers_a: np.ndarray, workers_b: np.ndarray, b_a: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Whole local batches near (b_a, rest) and the global batch they actually make."""
    wa, wb = np.asarray(workers_a), np.asarray(workers_b)
    ia = np.maximum(np.rint(b_a), 1)
    ib = np.maximum(np.rint((np.asarray(global_bsz, float) - wa * ia) / wb), 1)
    return ia.astype(np.int64), ib.astype(np.int64), (wa * ia + wb * ib).astype(np.int64)


def _even_split(total: int, n: int) -> np.ndarray:
    out = np.full(n, total // n, dtype=float)
    out[: total - int(out.sum())] += 1
    return out


def _hold_total(batch: np.ndarray, total: int, low: float, high: float) -> np.ndarray:
    """Whole batches in [low, high] summing to ``total``, nearest ``batch`` (largest remainder)."""
    scaled = np.clip(batch * total / batch.sum(), low, high)
    whole = np.floor(scaled)
    short = int(total - whole.sum())
    if short > 0:
        order = np.argsort(-(scaled - whole))
        for i in order:
            if short == 0:
                break
            if whole[i] + 1 <= high:
                whole[i] += 1
                short -= 1
    elif short < 0:
        for i in np.argsort(scaled - whole):
            if short == 0:
                break
            if whole[i] - 1 >= low:
                whole[i] -= 1
                short += 1
    return whole


def simulate_controller(
    alpha: np.ndarray,
    beta: np.ndarray,
    global_bsz: int,
    steps: int = 30,
    deadband: float = 0.05,
    min_bsz: int = 1,
    max_bsz: int | None = None,
    noise: float = 0.0,
    seed: int | np.random.Generator | None = 0,
    slow_worker: int = 0,
    slow_at: int | None = None,
    slow_factor: float = 1.0,
) -> pd.DataFrame:
    """OmniLearn's controller from an even split: one row per step and worker.

    Worker i computes b_i samples in alpha_i + beta_i * b_i seconds (times a lognormal factor of
    spread ``noise``); the step takes the slowest worker's time. From step ``slow_at`` on (None:
    never), worker ``slow_worker`` computes ``slow_factor`` times slower: a noisy neighbour or
    thermal throttling mid-run. Columns: step, worker, local_bsz, compute_s, step_time_s.
    """
    alpha, beta = np.asarray(alpha, float), np.asarray(beta, float)
    n = alpha.size
    high = float(max_bsz) if max_bsz is not None else float(global_bsz)
    rng = np.random.default_rng(seed)
    batch = _even_split(int(global_bsz), n)
    slower = np.ones(n)
    rows = []
    for step in range(steps):
        if slow_at is not None and step == slow_at:
            slower[slow_worker] = slow_factor
        times = (alpha + beta * batch) * slower * np.exp(noise * rng.standard_normal(n))
        rows.append(
            pd.DataFrame(
                {
                    "step": step,
                    "worker": np.arange(n),
                    "local_bsz": batch.astype(int),
                    "compute_s": times,
                    "step_time_s": times.max(),
                }
            )
        )
        mean = times.mean()
        outside = np.abs(times - mean) > deadband * mean
        delta = np.where(outside, -(batch / times) * (times - mean), 0.0)
        if not outside.any():
            continue
        batch = _hold_total(np.clip(batch + delta, min_bsz, high), int(global_bsz), min_bsz, high)
    return pd.concat(rows, ignore_index=True)


def controller_summary(trace: pd.DataFrame, deadband: float = 0.05) -> dict[str, float]:
    """Steps until compute times sit inside the deadband, and the step time saved vs even."""
    spread = trace.groupby("step")["compute_s"].agg(lambda t: (t.max() - t.min()) / t.mean())
    per_step = trace.groupby("step")["step_time_s"].first()
    inside = np.flatnonzero(spread.to_numpy() <= 2 * deadband)
    settled = int(inside[0]) if inside.size else -1
    even, final = float(per_step.iloc[0]), float(per_step.iloc[-1])
    return {
        "steps_to_settle": settled,
        "even_step_time_s": even,
        "final_step_time_s": final,
        "step_time_saved": 1.0 - final / even,
    }
