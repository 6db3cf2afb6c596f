"""How variable step times are: per-configuration statistics, bootstrap intervals, drift, n.

Every function takes a measurement table (one row per step) and returns a DataFrame with one
row per configuration; intervals are columns (``mean_lo``/``mean_hi``...), and the confidence
``level`` is an argument, statsmodels-style.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from srifty_kit.errors import InputError
from srifty_kit.measure.stopping import PrecisionTracker

CONFIG_KEYS = ("model", "instance_type", "num_nodes", "num_workers", "local_bsz", "placement")


def _tracker(values: Sequence[float] | np.ndarray, level: float) -> PrecisionTracker:
    """The stopping rule's tracker fed ``values``: the same interval the profiler stops on."""
    tracker = PrecisionTracker(level)
    for v in np.asarray(values, dtype=float):
        tracker.add(float(v))
    return tracker


def precision(values: Sequence[float] | np.ndarray, level: float = 0.95) -> float:
    """Relative half-width of the t confidence interval of the mean of ``values``."""
    return _tracker(values, level).precision()


def samples_needed(
    cv: float | np.ndarray, target_precision: float, level: float = 0.95
) -> np.ndarray:
    """Smallest n whose t interval of the mean is within ``target_precision`` of the mean.

    With coefficient of variation ``cv``: the smallest n with t_{n-1} * cv / sqrt(n) <= target.
    """
    cv = np.atleast_1d(np.asarray(cv, dtype=float))
    finite = np.isfinite(cv)
    z = stats.norm.ppf(0.5 + level / 2)
    # the normal quantile is below Student's t: its n is a lower bound; step up to the first n
    # that meets the target (a few steps at most, the t and normal quantiles converge fast)
    n = np.where(
        finite, np.maximum(2, np.ceil((z * np.where(finite, cv, 0) / target_precision) ** 2)), 2
    )
    for _ in range(1000):
        short = finite & (stats.t.ppf(0.5 + level / 2, n - 1) * cv / np.sqrt(n) > target_precision)
        if not short.any():
            break
        n = n + short
    return np.where(finite, n, np.nan)


def outliers(values: Sequence[float] | np.ndarray, threshold: float = 3.5) -> np.ndarray:
    """Mask of outliers by the modified z-score |0.6745 (x - median) / MAD| > threshold.

    Iglewicz and Hoaglin (1993), "How to Detect and Handle Outliers": 3.5 is their cut-off.
    """
    x = np.asarray(values, dtype=float)
    med = np.median(x)
    mad = np.median(np.abs(x - med))
    if mad == 0:
        return x != med if len(x) > 2 else np.zeros(len(x), bool)
    return np.abs(0.6745 * (x - med) / mad) > threshold


def _groups(
    table: pd.DataFrame, by: Sequence[str] | None, value: str
) -> tuple[list[str], list[tuple[tuple, np.ndarray]]]:
    """Sample arrays per configuration, each in measurement order (by ``repeat`` if present)."""
    if value not in table.columns:
        raise InputError(f"no column {value!r}", source="measurements", column=value)
    keys = [k for k in (CONFIG_KEYS if by is None else by) if k in table.columns]
    missing = [k for k in (by or ()) if k not in table.columns]
    if missing:
        raise InputError(f"no column {missing[0]!r} to group by", column=missing[0])
    ordered = table.sort_values("repeat", kind="stable") if "repeat" in table else table
    out = []
    if not keys:
        return keys, [((), ordered[value].to_numpy(dtype=float))]
    for key, group in ordered.groupby(keys, dropna=False, sort=True):
        out.append((key if isinstance(key, tuple) else (key,), group[value].to_numpy(float)))
    return keys, out


def _bootstrap(
    x: np.ndarray, statistic, level: float, n_resamples: int, rng: np.random.Generator
) -> tuple[float, float]:
    """scipy's bootstrap interval; BCa up to 1000 samples (its jackknife is O(n^2) memory)."""
    if len(x) < 2:
        return math.nan, math.nan
    if np.ptp(x) == 0:
        return float(x[0]), float(x[0])
    method = "BCa" if len(x) <= 1000 else "percentile"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap(
            (x,),
            statistic,
            confidence_level=level,
            n_resamples=n_resamples,
            method=method,
            vectorized=True,
            axis=-1,
            rng=rng,
            batch=200,
        )
    lo, hi = res.confidence_interval
    if not (np.isfinite(lo) and np.isfinite(hi)):  # BCa can fail on lumpy data
        lo, hi = np.percentile(res.bootstrap_distribution, [50 - 50 * level, 50 + 50 * level])
    return float(lo), float(hi)


def _p95(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.percentile(x, 95, axis=axis)


def describe(
    table: pd.DataFrame,
    by: Sequence[str] | None = None,
    value: str = "step_time_s",
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per configuration: n, mean, std, CV, median, p5, p95, bootstrap CIs of mean and p95.

    ``n_resamples=0`` skips the bootstrap: the mean's interval is then Student's t and the
    p95's is not given (fast, for printed summaries).
    """
    keys, groups = _groups(table, by, value)
    rng = np.random.default_rng(seed)
    rows = []
    for key, x in groups:
        mean = float(np.mean(x))
        std = float(np.std(x, ddof=1)) if len(x) > 1 else math.nan
        tracker = _tracker(x, level)
        if n_resamples:
            mean_lo, mean_hi = _bootstrap(x, np.mean, level, n_resamples, rng)
            p95_lo, p95_hi = _bootstrap(x, _p95, level, n_resamples, rng)
        else:
            (mean_lo, mean_hi), p95_lo, p95_hi = tracker.interval(), math.nan, math.nan
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "n": len(x),
                "mean": mean,
                "std": std,
                "cv": std / mean if mean > 0 else math.nan,
                "median": float(np.median(x)),
                "p5": float(np.percentile(x, 5)),
                "p95": float(np.percentile(x, 95)),
                "mean_lo": mean_lo,
                "mean_hi": mean_hi,
                "p95_lo": p95_lo,
                "p95_hi": p95_hi,
                "precision": tracker.precision(),
            }
        )
    out = pd.DataFrame(rows)
    out.attrs["level"] = level
    return out


def plan_samples(
    table: pd.DataFrame,
    target_precision: float = 0.02,
    by: Sequence[str] | None = None,
    value: str = "step_time_s",
    level: float = 0.95,
) -> pd.DataFrame:
    """Per configuration: precision reached and how many samples the target needs."""
    if not target_precision > 0:
        raise InputError(f"target precision must be > 0, got {target_precision}")
    keys, groups = _groups(table, by, value)
    rows = []
    for key, x in groups:
        cv = float(np.std(x, ddof=1) / np.mean(x)) if len(x) > 1 else math.nan
        need = samples_needed(cv, target_precision, level)[0]
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "n": len(x),
                "cv": cv,
                "precision": precision(x, level),
                "n_needed": need,
                "n_more": max(0.0, need - len(x)) if np.isfinite(need) else math.nan,
            }
        )
    out = pd.DataFrame(rows)
    out.attrs["level"] = level
    return out


def _drift_one(x: np.ndarray, alpha: float, warmup_frac: float, min_change: float) -> dict:
    """Trend (Theil-Sen slope, Kendall's tau), early-steps test and outliers of one series."""
    n = len(x)
    flags = outliers(x)
    row: dict = {"n": n, "n_outliers": int(flags.sum()), "outlier_frac": float(flags.mean())}
    if n < 8:
        return {
            **row,
            "change": math.nan,
            "change_lo": math.nan,
            "change_hi": math.nan,
            "trend_p": math.nan,
            "warmup_p": math.nan,
            "verdict": "too few samples",
        }
    steps = np.arange(n)
    med = float(np.median(x))
    slope, _, lo, hi = stats.theilslopes(x, steps, alpha=1 - alpha)  # scipy: confidence degree
    # relative change of the robust line from the first to the last step
    span = (n - 1) / med
    tau = stats.kendalltau(steps, x)
    k = max(2, int(round(warmup_frac * n)))
    early = stats.mannwhitneyu(x[:k], x[k:], alternative="greater")
    early_slower = early.pvalue < alpha and np.median(x[:k]) > np.median(x[k:]) * (1 + min_change)
    change = slope * span
    trending = tau.pvalue < alpha and abs(change) > min_change
    if early_slower or (trending and change < 0):
        verdict = "warming up"
    elif trending and change > 0:
        verdict = "slowing down (throttling?)"
    else:
        verdict = "stable"
    return {
        **row,
        "change": change,
        "change_lo": lo * span,
        "change_hi": hi * span,
        "trend_p": float(tau.pvalue),
        "warmup_p": float(early.pvalue),
        "verdict": verdict,
    }


def detect_drift(
    table: pd.DataFrame,
    by: Sequence[str] | None = None,
    value: str = "step_time_s",
    alpha: float = 0.05,
    warmup_frac: float = 0.1,
    min_change: float = 0.05,
) -> pd.DataFrame:
    """Per configuration: drift over the run (warm-up not over, throttling) and outlier counts.

    ``change`` is the Theil-Sen line's rise from first to last step relative to the median, with
    its ``1 - alpha`` interval; a trend counts when Kendall's tau test rejects at ``alpha`` and
    the change exceeds ``min_change``. "warming up" also means the first ``warmup_frac`` of the
    steps are slower than the rest (one-sided Mann-Whitney U).
    """
    keys, groups = _groups(table, by, value)
    rows = [
        {**dict(zip(keys, key, strict=True)), **_drift_one(x, alpha, warmup_frac, min_change)}
        for key, x in groups
    ]
    out = pd.DataFrame(rows)
    out.attrs["alpha"] = alpha
    return out
