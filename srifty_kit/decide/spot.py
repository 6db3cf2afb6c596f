"""Spot reclaim risk: hazard from the catalog bucket; time and cost, closed form and Monte Carlo.

The conversion. AWS's Spot Instance Advisor buckets each type by "frequency of interruption":
the share of that type's spot capacity reclaimed over the trailing month
(https://aws.amazon.com/ec2/spot/instance-advisor/). We read a bucket as the monthly probability
that one instance is reclaimed, take the bucket's midpoint (25% for '>20%', which has no upper
edge: an assumption), and turn it into a constant hourly hazard per instance,

    lambda = -ln(1 - p_month) / 730 h          (730 h = 8760 h / 12 months)

A synchronous data-parallel job stops when ANY of its n nodes is reclaimed, so the cluster's
hazard is Lambda = n * lambda (independent reclaims; correlated reclaims would make it lower).

The run. W hours of uninterrupted training (checkpoint writes included), a checkpoint every
P = tau + c hours (tau of work, c to write it). Each interruption costs the restart R (new
instances, reload) plus the work since the last checkpoint, P/2 on average. To first order in
Lambda * (R + P) the interruptions are Poisson with mean Lambda * W, so with N of them

    T = W + N * (R + P/2)        E[T] = W + E[min(N, k)] * (R + P/2)

where k is the fallback (after k interruptions the job restarts on on-demand and runs there to
the end; k = None never falls back). ``simulate`` runs the exact process (reclaims while
re-doing lost work, lost work up to the last checkpoint) to check this and to give the
distribution; ``upper_run`` bounds the time and cost at a confidence level.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from srifty_kit.errors import InputError
from srifty_kit.tables.contracts import INTERRUPTION_BUCKETS

HOURS_PER_MONTH = 730.0

# monthly probability that one instance is reclaimed: the midpoint of each Spot Advisor bucket
BUCKET_MONTHLY_PROBABILITY: dict[str, float] = {
    "<5%": 0.025,
    "5-10%": 0.075,
    "10-15%": 0.125,
    "15-20%": 0.175,
    ">20%": 0.25,  # no upper edge published: our assumption, the worst bucket's lower edge + 5%
}
# a type whose bucket is unknown is treated as the worst bucket (conservative, never guessed low)
UNKNOWN_BUCKET = ">20%"


class SpotPolicy(NamedTuple):
    """How the job survives reclaims (hours)."""

    checkpoint_period_h: float  # P = tau + c: lost work on a reclaim is uniform on [0, P)
    restart_h: float  # R: replacing the instances and reloading the last checkpoint
    fallback_after: int | None = None  # k >= 1: after k reclaims run on on-demand; None: never


def hourly_hazard(bucket: object) -> np.ndarray:
    """Per-instance hourly reclaim hazard lambda = -ln(1 - p_month) / 730 for bucket labels."""
    labels = pd.Series(np.atleast_1d(np.asarray(bucket, dtype=object)))
    filled = labels.where(labels.notna(), UNKNOWN_BUCKET)
    unknown = ~filled.isin(list(INTERRUPTION_BUCKETS))
    if unknown.any():
        raise InputError(
            f"unknown spot interruption bucket {filled[unknown].iloc[0]!r}",
            column="spot_interruption_bucket",
            fix="use one of " + ", ".join(INTERRUPTION_BUCKETS),
        )
    p = filled.map(BUCKET_MONTHLY_PROBABILITY).to_numpy(dtype=float)
    return -np.log1p(-p) / HOURS_PER_MONTH


def _poisson_terms(mean: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """P(N >= j) for j = 1..k and P(N >= k + 1), N ~ Poisson(mean); recurrence, no scipy loop."""
    pmf = np.exp(-mean)
    cdf = pmf.copy()
    tails = []
    for j in range(1, k + 1):
        tails.append(1.0 - cdf)  # P(N >= j)
        pmf = pmf * mean / j
        cdf = cdf + pmf
    return np.array(tails), 1.0 - cdf


def _poisson_quantile(mean: np.ndarray, level: float, cap: int | None) -> np.ndarray:
    """Smallest n with P(N <= n) >= level, N ~ Poisson(mean), never above ``cap``."""
    mean = np.asarray(mean, dtype=float)
    out = np.zeros(mean.shape)
    pmf = np.exp(-mean)
    cdf = pmf.copy()
    open_ = cdf < level
    top = float(np.max(mean, initial=0.0))
    limit = cap if cap is not None else int(top + 10 * np.sqrt(top) + 20)
    j = 0
    while open_.any() and j < limit:
        j += 1
        out[open_] = j
        pmf = pmf * mean / j
        cdf = cdf + pmf
        open_ &= cdf < level
    return out


def expected_run(
    work_h: np.ndarray,
    cluster_hazard: np.ndarray,
    policy: SpotPolicy,
    spot_usd_per_hr: np.ndarray,
    ondemand_usd_per_hr: np.ndarray,
) -> dict[str, np.ndarray]:
    """Expected time, cost, reclaims and on-demand hours of a spot run (closed form, first order).

    With fallback after k: E[min(N, k)] = sum_{j=1..k} P(N >= j); the k-th reclaim comes at
    G_k ~ Gamma(k, Lambda) hours of progress, and the rest, E[(W - G_k)+] + P(N >= k)(R + P/2),
    runs on on-demand, where E[(W - G_k)+] = W P(N >= k) - (k / Lambda) P(N >= k + 1).
    """
    w = np.asarray(work_h, dtype=float)
    lam = np.asarray(cluster_hazard, dtype=float) * np.ones_like(w)
    penalty = policy.restart_h + policy.checkpoint_period_h / 2.0  # R + P/2 per reclaim
    mean = lam * w
    k = policy.fallback_after
    if k is None:
        reclaims = mean
        ondemand_h = np.zeros_like(w)
    else:
        tails, beyond = _poisson_terms(mean, k)
        reclaims = tails.sum(axis=0)
        reach = tails[k - 1]  # P(N >= k): the job falls back
        with np.errstate(divide="ignore", invalid="ignore"):
            rest = np.where(lam > 0, w * reach - k / np.where(lam > 0, lam, 1.0) * beyond, 0.0)
        ondemand_h = np.clip(rest, 0.0, None) + reach * penalty
    time_h = w + reclaims * penalty
    spot_h = time_h - ondemand_h
    cost = spot_h * np.asarray(spot_usd_per_hr) + ondemand_h * np.asarray(ondemand_usd_per_hr)
    return {"time_h": time_h, "cost_usd": cost, "reclaims": reclaims, "ondemand_h": ondemand_h}


def upper_run(
    work_h: np.ndarray,
    cluster_hazard: np.ndarray,
    policy: SpotPolicy,
    spot_usd_per_hr: np.ndarray,
    ondemand_usd_per_hr: np.ndarray,
    level: float,
) -> dict[str, np.ndarray]:
    """Time and cost a spot run stays under with probability ``level`` (conservative bound).

    n_q is the level-quantile of the reclaim count (Poisson, capped at k, its mean taken over
    the work plus the re-done work of n_q reclaims); each reclaim is charged R + P (a whole
    checkpoint period lost). Past the fallback every hour is charged at the higher price.
    """
    w = np.asarray(work_h, dtype=float)
    lam = np.asarray(cluster_hazard, dtype=float) * np.ones_like(w)
    k = policy.fallback_after
    first = _poisson_quantile(lam * w, level, k)
    n_q = _poisson_quantile(lam * (w + first * policy.checkpoint_period_h), level, k)
    time_h = w + n_q * (policy.restart_h + policy.checkpoint_period_h)
    spot = np.asarray(spot_usd_per_hr, dtype=float)
    dearer = np.maximum(spot, np.asarray(ondemand_usd_per_hr, dtype=float))
    fell_back = np.zeros_like(w, dtype=bool) if k is None else n_q >= k
    cost = time_h * np.where(fell_back, dearer, spot)
    return {"time_h": time_h, "cost_usd": cost, "reclaims": n_q}


def simulate(
    work_h: float,
    cluster_hazard: float,
    policy: SpotPolicy,
    spot_usd_per_hr: float,
    ondemand_usd_per_hr: float,
    runs: int = 10_000,
    seed: int | np.random.Generator | None = 0,
) -> pd.DataFrame:
    """Monte Carlo of ``runs`` spot runs: one row each with time_h, cost_usd, reclaims, fell_back.

    Exact process: reclaims arrive at rate Lambda while running (also while re-doing lost
    work), each loses the progress since the last checkpoint and waits R; after k reclaims the
    job restarts on on-demand and is not reclaimed again.
    """
    rng = np.random.default_rng(seed)
    period = policy.checkpoint_period_h
    done = np.zeros(runs)  # checkpointed progress, hours of work
    spot_h = np.zeros(runs)
    ondemand_h = np.zeros(runs)
    reclaims = np.zeros(runs, dtype=int)
    running = np.ones(runs, dtype=bool)  # still on spot and not finished
    k = policy.fallback_after
    while running.any():
        idx = np.flatnonzero(running)
        left = work_h - done[idx]
        # time to the next reclaim, never for a zero hazard
        gap = (
            rng.exponential(1.0 / cluster_hazard, idx.size)
            if cluster_hazard > 0
            else np.full(idx.size, np.inf)
        )
        finishes = gap >= left
        spot_h[idx[finishes]] += left[finishes]
        running[idx[finishes]] = False
        hit = idx[~finishes]
        progress = done[hit] + gap[~finishes]
        done[hit] = np.floor(progress / period) * period
        reclaims[hit] += 1
        spot_h[hit] += gap[~finishes]
        if k is not None:
            switch = hit[reclaims[hit] >= k]
            ondemand_h[switch] += policy.restart_h + (work_h - done[switch])
            running[switch] = False
            hit = hit[reclaims[hit] < k]
        spot_h[hit] += policy.restart_h
    fell_back = np.zeros(runs, dtype=bool) if k is None else reclaims >= k
    return pd.DataFrame(
        {
            "time_h": spot_h + ondemand_h,
            "cost_usd": spot_h * spot_usd_per_hr + ondemand_h * ondemand_usd_per_hr,
            "reclaims": reclaims,
            "fell_back": fell_back,
        }
    )


def young_daly_interval(write_h: float, cluster_hazard: float) -> float:
    """Young's optimum checkpoint interval, tau* = sqrt(2 c M), in hours of work.

    Young, "A first order approximation to the optimum checkpoint interval", CACM 17(9), 1974;
    Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
    FGCS 22(3), 2006, shows it is the first-order term of the exact optimum (good while
    c << M). Here c is the time to write one checkpoint and M = 1 / Lambda the cluster's mean
    time between reclaims.

    Args:
        write_h: c, hours to write one checkpoint (> 0).
        cluster_hazard: Lambda, the cluster's reclaims per hour (> 0).

    Returns:
        tau* in hours; inf when nothing is reclaimed or a checkpoint costs nothing to write
        (then never checkpointing, or always, is free: no finite optimum).
    """
    if not (write_h > 0 and cluster_hazard > 0):
        return float("inf")
    return float(np.sqrt(2.0 * write_h / cluster_hazard))
