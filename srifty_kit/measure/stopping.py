"""The adaptive stopping rule: when the mean of the steps measured so far is precise enough.

Successive training steps are not independent: the lag-1 autocorrelation of step times within
a configuration is typically 0.2-0.7 (caches, clocks, other processes), so the Student-t
interval of the mean, which assumes independence, is too narrow and a rule built on it stops
too early. Two interval rules, chosen by ``interval``:

``"batch_means"`` (default)
    1. **Warm-up** by MSER-5 (White 1997; White, Cobb & Spratt 2000): the steps are grouped
       in batches of 5; the cut is the number of leading batches d (at most half of them)
       that minimises the squared standard error of the mean of what is left,
       ``sum((z_j - mean(z_d:))**2) / (m - d)**2``, among the cuts whose steps are slower on
       average than the rest (a warm-up slows steps down; a run whose first part was faster
       had its level rise later, which is drift, not warm-up: see ``variance.level_shift``).
       The cut steps stay in the table, marked. Where the minimum over every cut (but the last
       ``max(5, m/10)`` batches, where the statistic is erratic) lies in the second half, the
       warm-up is not over yet (the run is still getting faster): the interval is not settled
       and the run goes on (the check of Hoad, Robinson & Davies 2010).
    2. **Batch means** over the kept steps (non-overlapping batches of b steps, the oldest
       remainder left out of the batches): ``var(mean) = var(batch means) / m`` with ``m``
       batches, and Student's t on ``m - 1`` degrees of freedom. The batch size b is read
       from the data, as the larger of
         - the smallest power of two whose batch means pass the von Neumann test for lag-1
           autocorrelation at ``LAG1_ALPHA`` (one-sided; the LBATCH rule of Fishman &
           Yarberry 1997, "An implementation of the batch means method"), and
         - the size at which an AR(1) with the kept steps' lag-1 autocorrelation rho would
           bias the batch-means variance by less than ``MAX_BIAS`` (the bias is about
           ``2 rho / ((1 - rho**2) b)``; Song & Schmeiser 1995).
       With fewer than ``MIN_BATCHES`` batches at that size the interval is not *settled*:
       the rule does not stop on it, and where a run ends so (step limit, time budget) the
       variance of the mean is the larger of the batch means' (the largest batch size with
       ``MIN_BATCHES`` batches) and the AR(1) one, ``var(step) (1 + rho) / ((1 - rho) n)``:
       batch means too short for the correlation would understate it.
    3. The **effective sample size** is ``n_kept * var(step) / (b * var(batch means))``: how
       many independent steps the kept ones are worth.

``"iid"``
    The rule as it was: Student's t over every step as if independent, no warm-up cut.

The batch-means estimate costs O(n) numpy work, so the tracker recomputes it only when the
number of steps has grown by ``CHECK_GROWTH`` (1%) since the last look (every step up to
100): the rule stops at most 1% of the steps later than an every-step check would, and its
cost stays a small fraction of the steps' own time.

The constants below were chosen by comparing variants of the rule on simulated AR(1) step
times (lag-1 0-0.9, 5% and 15% variation, +-1% target at 95%, 200-300 sequential runs per
cell, seeds other than the benchmark's), never on measured steps. MAX_BIAS 0.1 left the mildly
correlated, short runs at 88-91% coverage; 0.05 brought every cell to 94-97% for about twice
the steps on correlated series. benchmarks/variance_coverage.py reports the chosen rule on
fresh simulated series and on the demo models measured here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri, stdtrit  # normal and Student-t quantiles, lighter than stats

INTERVALS = ("batch_means", "iid")
MSER_BATCH = 5  # MSER-5: batches of five steps for the warm-up cut
MIN_BATCHES = 20  # fewer batch means than this do not settle an interval
LAG1_ALPHA = 0.2  # one-sided level of the von Neumann test on the batch means
MAX_BIAS = 0.05  # largest AR(1) bias of the batch-means variance accepted
CHECK_GROWTH = 0.01  # recompute once the steps have grown by this share (every step to 100)


def fewest_steps(interval: str, min_steps: int) -> int:
    """The fewest steps the rule can stop on: ``min_steps``, and with batch means the
    ``MIN_BATCHES`` batch means (of one step at least) an interval needs to settle."""
    return max(min_steps, MIN_BATCHES if interval == "batch_means" else 2)


@functools.lru_cache(maxsize=4096)
def t_quantile(n: int, level: float) -> float:
    """Two-sided Student-t quantile for a mean of n samples (n-1 degrees of freedom)."""
    return float(stdtrit(n - 1, 0.5 + level / 2))


@dataclass(frozen=True)
class MeanEstimate:
    """The interval of a configuration's mean after ``n`` steps, and what it rests on."""

    n: int  # steps measured
    warmup_steps: int  # leading steps cut as warm-up (kept in the table, marked)
    mean: float  # mean of the kept steps
    std: float  # their standard deviation
    lo: float  # interval of the mean at the tracker's level
    hi: float
    n_eff: float  # effective sample size of the kept steps
    batch_size: int  # steps per batch mean (1: the steps looked independent)
    settled: bool  # enough uncorrelated batch means to stop on this interval

    @property
    def time_lo(self) -> float:
        """The lower end as a table of times shows it: cut at 0, since a mean of step times
        is never negative (a few wild batches can put ``mean - half`` below it). The cut
        keeps the interval's coverage; ``precision`` and the stopping rule use ``lo``."""
        return max(self.lo, 0.0) if np.isfinite(self.lo) else self.lo

    @property
    def half_width(self) -> float:
        """Half-width of the interval (inf when there is none yet)."""
        return (self.hi - self.lo) / 2 if np.isfinite(self.hi - self.lo) else math.inf

    @property
    def precision(self) -> float:
        """Half-width relative to the mean (0.02 = within +-2%)."""
        return self.half_width / self.mean if self.mean > 0 else math.inf


def mser_cut(values: np.ndarray, batch: int = MSER_BATCH) -> int:
    """MSER-``batch`` warm-up: how many leading steps to cut (a multiple of ``batch``)."""
    return mser(values, batch)[0]


def mser(values: np.ndarray, batch: int = MSER_BATCH) -> tuple[int, bool]:
    """MSER-``batch`` warm-up: (steps to cut, whether the warm-up looks over).

    The cut d (in batches, at most half of them) minimises
    ``sum_{j>d} (z_j - mean(z_{d:}))**2 / (m - d)**2`` over the batch means z_1..z_m, among
    the cuts whose batches are slower on average than those kept. The warm-up looks over
    unless the minimum over all cuts but the last ``max(5, m // 10)`` lies beyond m / 2.
    """
    x = np.asarray(values, float)
    m = x.size // batch
    if m < 4:
        return 0, True
    z = x[: m * batch].reshape(m, batch).mean(axis=1)
    z = z - z.mean()  # centred: the suffix sums below lose nothing to cancellation
    count = np.arange(m, 0, -1, dtype=float)  # m - d for d = 0..m-1
    s1 = np.cumsum(z[::-1])[::-1]
    s2 = np.cumsum((z * z)[::-1])[::-1]
    stat = (s2 - s1 * s1 / count) / count**2
    head = np.cumsum(z)[:-1] / np.arange(1, m)  # mean of the first d batches, d = 1..m-1
    slower = np.concatenate([[True], head > s1[1:] / count[1:]])
    allowed = np.where(slower, stat, np.inf)
    half = m // 2
    anywhere = int(np.argmin(allowed[: max(1, m - max(5, m // 10) + 1)]))
    return int(np.argmin(allowed[: half + 1])) * batch, anywhere <= half


def von_neumann_c(z: np.ndarray) -> float:
    """Von Neumann's C = 1 - DW/2 (DW the Durbin-Watson statistic of z - mean(z)): about
    the lag-1 autocorrelation, ~N(0, (m-2)/(m**2-1)) for m independent values."""
    d = z - z.mean()
    ss = float(d @ d)
    if ss <= 0:
        return 0.0
    diff = np.diff(d)
    return 1.0 - float(diff @ diff) / (2.0 * ss)


def lag1(values: np.ndarray) -> float:
    """Lag-1 autocorrelation (the standard biased estimator; 0 for a constant series)."""
    d = values - values.mean()
    ss = float(d @ d)
    return float(d[1:] @ d[:-1]) / ss if ss > 0 else 0.0


def _batch_means(x: np.ndarray, b: int) -> np.ndarray:
    m = x.size // b
    return x[x.size - m * b :].reshape(m, b).mean(axis=1)


def choose_batch_size(kept: np.ndarray) -> tuple[int, bool]:
    """(batch size, settled) for the kept steps; see the module docstring."""
    n = kept.size
    rho = min(max(lag1(kept), 0.0), 0.99) if n > 2 else 0.0
    least = max(1, math.ceil(2 * rho / ((1 - rho * rho) * MAX_BIAS)))
    z_alpha = float(ndtri(1 - LAG1_ALPHA))
    b = 1
    while n // b >= MIN_BATCHES:
        m = n // b
        if b >= least:
            c = von_neumann_c(_batch_means(kept, b))
            if c <= z_alpha * math.sqrt((m - 2) / (m * m - 1)):
                return b, True
        b *= 2
    # no batch size passes with MIN_BATCHES batches: show the largest that has them
    return max(1, n // MIN_BATCHES) if n >= MIN_BATCHES else 1, False


def batch_means_estimate(
    values: np.ndarray, level: float, warmup: bool = True, marked: int | None = None
) -> MeanEstimate:
    """MSER-5 warm-up cut, then the batch-means interval of the mean (module docstring).

    ``marked``: the leading steps already marked as warm-up (the profiler's marks), cut
    instead of MSER's own; whether the warm-up looks over is still MSER's reading of every
    step, so a profile's rows give back the interval its summary showed.
    """
    x = np.asarray(values, float)
    n = x.size
    cut, warm_over = mser(x) if warmup else (0, True)
    if warmup and marked is not None:
        cut = marked
    kept = x[cut:]
    k = kept.size
    mean = float(kept.mean()) if k else math.nan
    std = float(kept.std(ddof=1)) if k > 1 else math.nan
    if k < 2:
        return MeanEstimate(n, cut, mean, std, math.nan, math.nan, float(k), 1, False)
    b, settled = choose_batch_size(kept)
    settled = settled and warm_over
    z = _batch_means(kept, b)
    m = z.size
    if m < 2 or std == 0:
        # a constant series: the mean is known exactly
        half = 0.0 if std == 0 else math.inf
        return MeanEstimate(n, cut, mean, std, mean - half, mean + half, float(k), b, std == 0)
    var_mean = float(z.var(ddof=1)) / m
    if not settled:  # batches too short for the correlation: not below the AR(1) variance
        rho = min(max(lag1(kept), 0.0), 0.99)
        var_mean = max(var_mean, std * std * (1 + rho) / ((1 - rho) * k))
    half = t_quantile(m, level) * math.sqrt(var_mean)
    n_eff = std * std / var_mean if var_mean > 0 else float(k)
    return MeanEstimate(n, cut, mean, std, mean - half, mean + half, n_eff, b, settled)


def iid_estimate(values: np.ndarray, level: float) -> MeanEstimate:
    """Student's t interval over every step as if independent (no warm-up cut)."""
    x = np.asarray(values, float)
    n = x.size
    mean = float(x.mean()) if n else math.nan
    std = float(x.std(ddof=1)) if n > 1 else math.nan
    if n < 2:
        return MeanEstimate(n, 0, mean, std, math.nan, math.nan, float(n), 1, False)
    half = t_quantile(n, level) * std / math.sqrt(n)
    return MeanEstimate(n, 0, mean, std, mean - half, mean + half, float(n), 1, True)


class PrecisionTracker:
    """The stopping rule over steps as they come: every step kept, the interval of their mean.

    ``interval="iid"`` is the rule before autocorrelation was accounted for (running Welford
    mean and variance, Student's t, every step checked); ``"batch_means"`` is the module's.
    """

    def __init__(self, level: float = 0.95, interval: str = "batch_means") -> None:
        if interval not in INTERVALS:
            raise ValueError(f"interval must be one of {INTERVALS}, not {interval!r}")
        self.level = level
        self.interval_rule = interval
        self.n = 0
        self._welford_mean = 0.0
        self._m2 = 0.0
        self._buf = np.empty(256)
        self._cached: MeanEstimate | None = None
        self._next_check = 0

    def add(self, x: float) -> None:
        """Take one sample."""
        if self.n == self._buf.size:
            self._buf = np.concatenate([self._buf, np.empty(self._buf.size)])
        self._buf[self.n] = x
        self.n += 1
        delta = x - self._welford_mean
        self._welford_mean += delta / self.n
        self._m2 += delta * (x - self._welford_mean)

    @property
    def values(self) -> np.ndarray:
        """Every sample so far, in order (a view: do not modify)."""
        return self._buf[: self.n]

    def estimate(self) -> MeanEstimate:
        """The interval of the mean over the samples so far (computed once per sample count)."""
        if self._cached is None or self._cached.n != self.n:
            if self.interval_rule == "iid":
                half = self._iid_half_width()
                mean = self._welford_mean if self.n else math.nan
                lo, hi = (mean - half, mean + half) if self.n >= 2 else (math.nan, math.nan)
                self._cached = MeanEstimate(
                    self.n, 0, mean, self.std, lo, hi, float(self.n), 1, self.n >= 2
                )
            else:
                self._cached = batch_means_estimate(self.values, self.level)
        return self._cached

    def _iid_half_width(self) -> float:
        if self.n < 2:
            return math.inf
        return t_quantile(self.n, self.level) * self.std / math.sqrt(self.n)

    @property
    def mean(self) -> float:
        """Mean of the kept samples (after the warm-up cut; all of them under "iid")."""
        if self.interval_rule == "iid":
            return self._welford_mean
        return self.estimate().mean if self.n else 0.0

    @property
    def std(self) -> float:
        """Sample standard deviation of all samples (nan below two)."""
        return math.sqrt(self._m2 / (self.n - 1)) if self.n > 1 else math.nan

    def half_width(self) -> float:
        """Half-width of the interval of the mean."""
        return self.estimate().half_width if self.n >= 2 else math.inf

    def interval(self) -> tuple[float, float]:
        """The interval of the mean (nan below two samples)."""
        if self.n < 2:
            return math.nan, math.nan
        est = self.estimate()
        return est.lo, est.hi

    def precision(self) -> float:
        """Half-width of the interval relative to the mean (0.02 = within +-2%)."""
        return self.estimate().precision if self.n >= 2 else math.inf

    def _precise(self, target_precision: float) -> bool:
        if self.interval_rule == "iid":
            mean = self._welford_mean
            return mean > 0 and self._iid_half_width() / mean <= target_precision
        if self.n < self._next_check:
            return False
        self._next_check = self.n + max(1, math.ceil(self.n * CHECK_GROWTH) if self.n > 100 else 1)
        est = self.estimate()
        return est.settled and est.precision <= target_precision

    def stop_reason(
        self, target_precision: float, min_steps: int, max_steps: int, time_up: bool
    ) -> str | None:
        """Why sampling stops now ("precision reached", "step limit", "time budget"), or None."""
        if self.n >= min_steps and self._precise(target_precision):
            return "precision reached"
        if self.n >= max_steps:
            return "step limit"
        if time_up:
            return "time budget"
        return None
