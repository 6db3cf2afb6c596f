"""How variable step times are: per-configuration statistics, intervals, warm-up, drift, n.

Every function takes a measurement table (one row per step) and returns a DataFrame with one
row per configuration (per configuration and ``run`` when the table has runs); intervals are
columns (``mean_lo``/``mean_hi``...), and the confidence ``level`` is an argument,
statsmodels-style. Steps are taken in measurement order (``repeat``) and are not assumed
independent: the interval of the mean is the stopping rule's (``stopping``: MSER-5 warm-up
cut, batch means with a batch size read from the data), and rows the profiler marked in the
``warmup`` column are left out of every statistic but the counts.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pandas as pd
from scipy import stats

from srifty_kit.errors import InputError
from srifty_kit.measure.stopping import (
    INTERVALS,
    MIN_BATCHES,
    MeanEstimate,
    PrecisionTracker,
    batch_means_estimate,
    iid_estimate,
    lag1,
    mser_cut,
)

CONFIG_KEYS = ("model", "instance_type", "num_nodes", "num_workers", "local_bsz", "placement")
RUN_COLUMN = "run"  # one profiling run (the profiler writes one id per call)
WARMUP_COLUMN = "warmup"  # True on the steps the warm-up rule cut (kept, left out of means)
# Level shift (CUSUM): flagged when the sup of the standardised CUSUM of the kept steps has a
# p-value under DRIFT_ALPHA (Kolmogorov distribution: 1.63 at 1%) and the means before and
# after the most likely break differ by MIN_SHIFT or more. DRIFT_ALPHA: a nominal 1% of steady
# configurations flagged; on simulated steady AR(1) series (rho 0-0.8, 100-2000 steps) the
# rate measured 1-3% (7% for 100 steps at rho 0.8), a 5% shift mid-run was found 98-100% of
# the time in 500-2000 independent steps, 18-100% as correlation grows (tests/measure). MIN_SHIFT:
# smaller shifts are within the 3% noise floor between campaigns (reference data README).
DRIFT_ALPHA = 0.01
MIN_SHIFT = 0.02

__all__ = [
    "CONFIG_KEYS",
    "DRIFT_ALPHA",
    "MIN_SHIFT",
    "PrecisionTracker",
    "autocorrelation",
    "describe",
    "detect_drift",
    "level_shift",
    "outliers",
    "plan_samples",
    "precision",
    "samples_needed",
    "steady",
    "summarise",
    "warmup_mask",
]


def steady(table: pd.DataFrame) -> pd.DataFrame:
    """The rows not marked as warm-up (all of them when there is no ``warmup`` column)."""
    if WARMUP_COLUMN not in table:
        return table
    return table[~warmup_mask(table[WARMUP_COLUMN])]


def warmup_mask(column: pd.Series) -> np.ndarray:
    """The ``warmup`` column as booleans: True/1/"true" marked, anything else (NaN too) not."""
    if column.dtype == bool:
        return column.to_numpy()
    text = column.astype(str).str.strip().str.lower()
    return text.isin(("true", "1", "1.0", "yes")).to_numpy()


def summarise(
    values: Sequence[float] | np.ndarray,
    level: float = 0.95,
    warmup: np.ndarray | None = None,
    interval: str = "batch_means",
) -> MeanEstimate:
    """The interval of the mean of one configuration's steps (in measurement order).

    ``warmup``: the profiler's marks (a boolean per step); without them the warm-up is cut by
    MSER-5 here. Marks on the leading steps are cut as marked, and MSER-5 over every step
    still says whether the warm-up looks over, as it did when the profiler stopped: the
    interval and ``n_eff`` are the profile summary's. ``interval="iid"`` is Student's t over
    every step (no cut).
    """
    x = np.asarray(values, dtype=float)
    if interval not in INTERVALS:
        raise InputError(f"unknown interval {interval!r}", fix="use " + " or ".join(INTERVALS))
    if interval == "iid":
        return iid_estimate(x, level)
    if warmup is None:
        return batch_means_estimate(x, level)
    cut = int(warmup.sum())
    if warmup[:cut].all():  # the profiler's marks: a leading run of steps
        return batch_means_estimate(x, level, marked=cut)
    kept = batch_means_estimate(x[~warmup], level, warmup=False)
    return replace(kept, n=len(x), warmup_steps=int(warmup.sum()))


def precision(
    values: Sequence[float] | np.ndarray, level: float = 0.95, interval: str = "batch_means"
) -> float:
    """Relative half-width of the interval of the mean of ``values`` (the stopping rule's)."""
    return summarise(values, level, interval=interval).precision


def samples_needed(
    cv: float | np.ndarray, target_precision: float, level: float = 0.95
) -> np.ndarray:
    """Smallest n whose t interval of the mean is within ``target_precision`` of the mean.

    With coefficient of variation ``cv``: the smallest n with t_{n-1} * cv / sqrt(n) <= target.
    For correlated steps pass ``cv * sqrt(n / n_eff)``: n is then in independent-step units
    scaled back to steps (``plan_samples`` does so).
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
) -> tuple[list[str], list[tuple[tuple, np.ndarray, np.ndarray | None]]]:
    """Per configuration (and run): the samples in measurement order (by ``repeat`` if
    present) and the warm-up marks (None when the table has none)."""
    if value not in table.columns:
        raise InputError(f"no column {value!r}", source="measurements", column=value)
    missing = [k for k in (by or ()) if k not in table.columns]
    if missing:
        raise InputError(f"no column {missing[0]!r} to group by", column=missing[0])
    wanted = (*CONFIG_KEYS, RUN_COLUMN) if by is None else by
    keys = [k for k in wanted if k in table.columns]
    ordered = table.sort_values("repeat", kind="stable") if "repeat" in table else table
    marked = WARMUP_COLUMN in ordered

    def arrays(frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray | None]:
        warm = warmup_mask(frame[WARMUP_COLUMN]) if marked else None
        return frame[value].to_numpy(dtype=float), warm

    if not keys:
        return keys, [((), *arrays(ordered))]
    out = []
    for key, group in ordered.groupby(keys, dropna=False, sort=True):
        out.append((key if isinstance(key, tuple) else (key,), *arrays(group)))
    return keys, out


def _kept(x: np.ndarray, warm: np.ndarray | None) -> np.ndarray:
    return x[~warm] if warm is not None else x[mser_cut(x) :]


def _bootstrap(
    x: np.ndarray,
    statistic,
    level: float,
    n_resamples: int,
    rng: np.random.Generator,
    block: int = 1,
) -> tuple[float, float]:
    """scipy's bootstrap interval over whole blocks of ``block`` consecutive steps (the
    batch size the mean's interval used, so correlated steps are resampled together); BCa
    up to 1000 blocks (its jackknife is O(m^2) memory)."""
    m = len(x) // block
    if m < 2:
        return math.nan, math.nan
    if np.ptp(x) == 0:
        return float(x[0]), float(x[0])
    blocks = x[len(x) - m * block :].reshape(m, block)

    def on_blocks(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        picked = blocks[idx]  # (..., m, block)
        return statistic(picked.reshape(*picked.shape[:-2], -1), axis=-1)

    method = "BCa" if m <= 1000 else "percentile"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap(
            (np.arange(m),),
            on_blocks,
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


def _lag1(x: np.ndarray) -> float:
    """stopping.lag1, undefined (NaN) for fewer than 3 steps or a constant series."""
    return math.nan if len(x) < 3 or np.ptp(x) == 0 else lag1(x)


def describe(
    table: pd.DataFrame,
    by: Sequence[str] | None = None,
    value: str = "step_time_s",
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    interval: str = "batch_means",
) -> pd.DataFrame:
    """Per configuration: counts, warm-up cut, effective sample size, the mean with its
    interval, spread and percentiles, and a bootstrap interval of the p95.

    ``n`` counts every step, ``warmup_steps`` those cut as warm-up (the profiler's marks, else
    MSER-5 here), ``n_eff`` what the kept ones are worth as independent steps; the mean's
    interval is the stopping rule's (``interval``). The p95's interval resamples whole batches
    of the size the mean's interval chose (``n_resamples=0`` skips it: fast, for printed
    summaries).
    """
    keys, groups = _groups(table, by, value)
    rng = np.random.default_rng(seed)
    rows = []
    for key, x, warm in groups:
        est = summarise(x, level, warm, interval)
        # the steps the interval kept (its MSER cut is est.warmup_steps: not run again)
        kept = x if interval == "iid" else x[~warm] if warm is not None else x[est.warmup_steps :]
        if n_resamples and len(kept) >= 2:
            p95_lo, p95_hi = _bootstrap(kept, _p95, level, n_resamples, rng, est.batch_size)
        else:
            p95_lo, p95_hi = math.nan, math.nan
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "n": len(x),
                "warmup_steps": est.warmup_steps,
                "n_eff": est.n_eff,
                "lag1": _lag1(kept),
                "mean": est.mean,
                "std": est.std,
                "cv": est.std / est.mean if est.mean > 0 else math.nan,
                "median": float(np.median(kept)) if len(kept) else math.nan,
                "p5": float(np.percentile(kept, 5)) if len(kept) else math.nan,
                "p95": float(np.percentile(kept, 95)) if len(kept) else math.nan,
                "mean_lo": est.time_lo,
                "mean_hi": est.hi,
                "p95_lo": p95_lo,
                "p95_hi": p95_hi,
                "precision": est.precision,
                "batch_size": est.batch_size,
                "settled": est.settled,
            }
        )
    out = pd.DataFrame(rows)
    out.attrs["level"] = level
    out.attrs["interval"] = interval
    return out


def plan_samples(
    table: pd.DataFrame,
    target_precision: float = 0.02,
    by: Sequence[str] | None = None,
    value: str = "step_time_s",
    level: float = 0.95,
) -> pd.DataFrame:
    """Per configuration: precision reached and how many steps the target needs.

    The steps needed count the warm-up already cut and the correlation measured so far: with
    ``n_eff`` effective steps among ``k`` kept, the target needs ``samples_needed`` of the
    variation ``cv * sqrt(k / n_eff)``.
    """
    if not target_precision > 0:
        raise InputError(f"target precision must be > 0, got {target_precision}")
    keys, groups = _groups(table, by, value)
    rows = []
    for key, x, warm in groups:
        est = summarise(x, level, warm)
        kept = len(x) - est.warmup_steps
        cv = est.std / est.mean if kept > 1 and est.mean > 0 else math.nan
        inflation = kept / est.n_eff if est.n_eff > 0 else math.nan
        need = samples_needed(cv * math.sqrt(max(inflation, 1.0)), target_precision, level)[0]
        need = need + est.warmup_steps if np.isfinite(need) else need
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "n": len(x),
                "n_eff": est.n_eff,
                "cv": cv,
                "precision": est.precision,
                "n_needed": need,
                "n_more": max(0.0, need - len(x)) if np.isfinite(need) else math.nan,
            }
        )
    out = pd.DataFrame(rows)
    out.attrs["level"] = level
    return out


def level_shift(
    values: Sequence[float] | np.ndarray, alpha: float = DRIFT_ALPHA, min_shift: float = MIN_SHIFT
) -> dict:
    """CUSUM test for a change of level in steps taken as kept (warm-up already cut).

    The CUSUM of the deviations from the mean, divided by the long-run standard deviation
    and sqrt(n), tends to a Brownian bridge without a change; its largest absolute value is
    then Kolmogorov distributed (``scipy.stats.kstwobign``). The step of that largest value is
    the most likely break; ``shift`` is the relative change of the mean there. The long-run
    standard deviation is the batch-means one (so autocorrelation is not mistaken for a
    shift) of the steps less their mean on each side of that break (so a shift is not
    mistaken for autocorrelation, which would hide it). ``drift`` is True when
    ``p < alpha`` and ``|shift| >= min_shift``.
    """
    y = np.asarray(values, dtype=float)
    n = y.size
    none = {"drift": False, "shift": math.nan, "shift_at": math.nan, "shift_p": math.nan}
    if n < MIN_BATCHES or np.ptp(y) == 0:
        return none
    path = np.cumsum(y - y.mean())[:-1]
    k = int(np.argmax(np.abs(path)))
    resid = np.concatenate([y[: k + 1] - y[: k + 1].mean(), y[k + 1 :] - y[k + 1 :].mean()])
    est = batch_means_estimate(resid + y.mean(), 0.95, warmup=False)
    long_run_sd = est.std * math.sqrt(n / est.n_eff) if est.n_eff > 0 else math.nan
    if not long_run_sd > 0:
        return none
    stat = abs(path[k]) / (long_run_sd * math.sqrt(n))
    p = float(stats.kstwobign.sf(stat))
    before, after = y[: k + 1].mean(), y[k + 1 :].mean()
    shift = float(after / before - 1) if before > 0 else math.nan
    return {
        "drift": bool(p < alpha and abs(shift) >= min_shift),
        "shift": shift,
        "shift_at": k + 1,
        "shift_p": p,
    }


def _drift_one(
    x: np.ndarray, warm: np.ndarray | None, alpha: float, warmup_frac: float, min_change: float
) -> dict:
    """Trend (Theil-Sen slope, Kendall's tau), early steps, level shift and outliers."""
    n = len(x)
    flags = outliers(x)
    kept = _kept(x, warm)
    shift = level_shift(kept)
    if np.isfinite(shift["shift_at"]):  # counted in the whole series, warm-up included
        shift["shift_at"] = int(shift["shift_at"] + n - len(kept))
    row: dict = {
        "n": n,
        "warmup_steps": n - len(kept),
        "n_outliers": int(flags.sum()),
        "outlier_frac": float(flags.mean()) if n else math.nan,
        **shift,
    }
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
    said = []
    if early_slower or (trending and change < 0):
        said.append("warming up")
    elif trending and change > 0:
        said.append("slowing down (throttling?)")
    if row["drift"]:
        said.append(f"level shift ({row['shift']:+.1%} at step {row['shift_at']})")
    elif len(kept) < MIN_BATCHES:
        # level_shift did not test these steps: "stable" would claim a check never made
        said.append(
            f"too few steps to judge a level shift ({len(kept)} after the warm-up cut, "
            f"{MIN_BATCHES} needed)"
        )
    verdict = "; ".join(said) or "stable"
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
    """Per configuration: drift over the run (warm-up not over, throttling, a level shift)
    and outlier counts. Every sample is kept; this only says what it sees.

    ``change`` is the Theil-Sen line's rise from first to last step relative to the median, with
    its ``1 - alpha`` interval; a trend counts when Kendall's tau test rejects at ``alpha`` and
    the change exceeds ``min_change``. "warming up" also means the first ``warmup_frac`` of the
    steps are slower than the rest (one-sided Mann-Whitney U). ``drift`` is the level-shift
    flag of :func:`level_shift` (CUSUM over the steps after the warm-up cut, at
    ``DRIFT_ALPHA``), with ``shift``, ``shift_at`` (step index in the whole series, warm-up
    counted) and ``shift_p``; with fewer than ``MIN_BATCHES`` steps after the warm-up cut no
    shift is tested (``drift`` False, ``shift`` NaN) and ``verdict`` says "too few steps to
    judge a level shift" instead of "stable". ``verdict`` is "too few samples" under 8 steps.

    Args: ``table`` a measurement table (one row per step); ``by`` the columns that make a
    configuration (default: the configuration keys and ``run``); ``value`` the column timed;
    ``alpha``, ``warmup_frac``, ``min_change`` as above.
    Returns one row per configuration. Raises ``InputError`` when ``value`` or a ``by``
    column is missing.
    """
    keys, groups = _groups(table, by, value)
    rows = [
        {**dict(zip(keys, key, strict=True)), **_drift_one(x, warm, alpha, warmup_frac, min_change)}
        for key, x, warm in groups
    ]
    out = pd.DataFrame(rows)
    out.attrs["alpha"] = alpha
    return out


def autocorrelation(
    table: pd.DataFrame,
    nlags: int = 20,
    by: Sequence[str] | None = None,
    value: str = "step_time_s",
    level: float = 0.95,
) -> pd.DataFrame:
    """Per configuration and lag 1..``nlags``: the autocorrelation of the kept steps
    (``statsmodels.tsa.stattools.acf``) and the half-width of the band within which an
    independent series' would fall at ``level`` (``z / sqrt(n)``, n the kept steps)."""
    from statsmodels.tsa.stattools import acf

    z = float(stats.norm.ppf(0.5 + level / 2))
    keys, groups = _groups(table, by, value)
    frames = []
    for key, x, warm in groups:
        kept = _kept(x, warm)
        lags = min(nlags, len(kept) - 1)
        if lags < 1 or np.ptp(kept) == 0:
            continue
        r = np.asarray(acf(kept, nlags=lags))
        frames.append(
            pd.DataFrame(
                {
                    **{k: [v] * lags for k, v in zip(keys, key, strict=True)},
                    "lag": np.arange(1, lags + 1),
                    "acf": r[1:],
                    "band": z / math.sqrt(len(kept)),
                }
            )
        )
    columns = [*keys, "lag", "acf", "band"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
