"""The adaptive stopping rule: running mean and variance, and the t interval's precision."""

from __future__ import annotations

import functools
import math

from scipy.special import stdtrit  # Student's t quantile; lighter to import than scipy.stats


@functools.lru_cache(maxsize=4096)
def t_quantile(n: int, level: float) -> float:
    """Two-sided Student-t quantile for a mean of n samples (n-1 degrees of freedom)."""
    return float(stdtrit(n - 1, 0.5 + level / 2))


class PrecisionTracker:
    """Running mean and variance (Welford) and the relative half-width of the t interval."""

    def __init__(self, level: float = 0.95) -> None:
        self.level = level
        self.n = 0
        self.mean = 0.0
        self._m2 = 0.0

    def add(self, x: float) -> None:
        """Take one sample."""
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self._m2 += delta * (x - self.mean)

    @property
    def std(self) -> float:
        """Sample standard deviation (nan below two samples)."""
        return math.sqrt(self._m2 / (self.n - 1)) if self.n > 1 else math.nan

    def half_width(self) -> float:
        """Half-width of the t confidence interval of the mean."""
        if self.n < 2:
            return math.inf
        return t_quantile(self.n, self.level) * self.std / math.sqrt(self.n)

    def interval(self) -> tuple[float, float]:
        """The t confidence interval of the mean (nan below two samples)."""
        if self.n < 2:
            return math.nan, math.nan
        half = self.half_width()
        return self.mean - half, self.mean + half

    def precision(self) -> float:
        """Half-width of the interval relative to the mean (0.02 = within +-2%)."""
        return self.half_width() / self.mean if self.n >= 2 and self.mean > 0 else math.inf

    def stop_reason(
        self, target_precision: float, min_steps: int, max_steps: int, time_up: bool
    ) -> str | None:
        """Why sampling stops now ("precision reached", "step limit", "time budget"), or None."""
        if self.n >= min_steps and self.precision() <= target_precision:
            return "precision reached"
        if self.n >= max_steps:
            return "step limit"
        if time_up:
            return "time budget"
        return None
