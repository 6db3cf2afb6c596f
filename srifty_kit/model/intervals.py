"""Prediction intervals by normalized split conformal calibration on held-out larger scales.

A held-out step's error in log space is modelled as spreading like

    sigma(x) = sqrt(sigma0**2 + (sigma1 * share(x) * distance(x))**2)

where ``share`` is the part of the step that is synchronisation (d log T / d log T_s: the
network is what varies, compute barely does) and ``distance`` how far the configuration lies
beyond the fitted ones (1 inside; + log2 of each factor by which nodes or workers exceed the
largest fitted). sigma0 is the in-sample spread of one-worker steps, sigma1 a least-squares
fit of the squared held-out residuals; the conformal quantile q of |log ratio| / sigma(x)
then makes the half-width q * sigma(x) cover the requested share of held-out steps.
(Normalized split conformal: Lei, G'Sell, Rinaldo, Tibshirani & Wasserman, JASA 2018, section 5.2.)

When the fit spans a single multi-node count, extrapolation to other node counts was never
validated; a stated prior on the network time of an unmeasured node count is added then.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from srifty_kit.model.fit import NOISE_FLOOR

MIN_SCORES = 10  # below this a group's own scores do not calibrate an interval
# log-sd of the error when nothing calibrates it (a handful of configurations): ~ +-40% at 90%
PRIOR_SD = 0.2
# Network time at a node count never measured, when no fold could validate such a move:
# lognormal, within a factor 2 either way at 90% (1.5 at one sd). An assumption: cloud
# networks vary between clusters (Srifty, MLSys'22). Its size was read off the reference
# g4dn.12xlarge traces, where the 2-node runs moved each gradient byte ~1.8x slower than the
# 3- and 4-node runs: benchmarks/model_accuracy.py says so beside the coverage it gives.
NODE_COUNT_FACTOR90 = 2.0
NODE_COUNT_SD = float(np.log(NODE_COUNT_FACTOR90) / norm.ppf(0.95))


@functools.lru_cache(maxsize=64)
def two_sided_z(level: float) -> float:
    """Gaussian quantile of a central interval at ``level``, cached: scipy's ppf costs more
    than the rest of a prediction call, and a search asks at one level many times."""
    return float(norm.ppf(0.5 + level / 2))


def extrapolation_distance(
    num_nodes: np.ndarray, num_workers: np.ndarray, max_nodes: float, max_workers: float
) -> np.ndarray:
    """1 inside the fitted range; + log2 of each factor by which nodes or workers exceed it."""
    k = np.maximum(np.asarray(num_nodes, float) / max_nodes, 1.0)
    n = np.maximum(np.asarray(num_workers, float) / max_workers, 1.0)
    return 1.0 + np.log2(k) + np.log2(n)


def conformal_quantile(scores: np.ndarray, level: float) -> float:
    """The split-conformal quantile: the ceil((m+1) * level)-th smallest of m scores.

    No scores: the Gaussian quantile (sigma is then a prior sd). Too few for the level: the
    largest, stretched by the Gaussian tail ratio (conformal would say infinity).
    """
    scores = np.sort(np.asarray(scores, float))
    m = scores.size
    z = two_sided_z(level)
    if m == 0:
        return z
    rank = int(np.ceil((m + 1) * level))
    if rank > m:
        return float(scores[-1] * z / two_sided_z(m / (m + 1)))
    return float(scores[rank - 1])


@dataclass
class Spread:
    """The calibrated shape and scale of a group's prediction error (log space)."""

    sigma0: float  # error sd of a configuration without synchronisation
    sigma1: float  # ... per unit of sync share times extrapolation distance
    scores: np.ndarray  # |log ratio| / sigma of held-out steps: the conformal scores
    node_prior: bool = False  # add NODE_COUNT_SD beyond the fitted node counts
    moves: tuple[str, ...] = ()  # what the calibration folds held out, in words

    def basis(self, max_nodes: int) -> str:
        """Where the width comes from, in words: the folds, the prior, or neither."""
        if self.scores.size == 0:
            return "prior width: too few held-out steps to calibrate on"
        said = f"held out {'; '.join(self.moves)} ({self.scores.size} steps)"
        if self.node_prior:
            said += (
                f"; beyond {max_nodes} nodes a prior (network time within "
                f"x{NODE_COUNT_FACTOR90:g} at 90%)"
            )
        return said

    def sigma(self, share: np.ndarray, distance: np.ndarray) -> np.ndarray:
        """sigma(x) of each configuration."""
        return np.sqrt(self.sigma0**2 + (self.sigma1 * share * distance) ** 2)

    def half_width(
        self, level: float, share: np.ndarray, distance: np.ndarray, new_nodes: np.ndarray
    ) -> np.ndarray:
        """Half-width in log space of the interval at ``level`` for each configuration."""
        q = conformal_quantile(self.scores, level)
        h = q * self.sigma(share, distance)
        z = two_sided_z(level)
        if self.node_prior:
            h = np.sqrt(h**2 + np.where(new_nodes, z * share * NODE_COUNT_SD, 0.0) ** 2)
        return np.maximum(h, z * NOISE_FLOOR)


def calibrate(
    log_ratio: np.ndarray,
    share: np.ndarray,
    distance: np.ndarray,
    node_prior: bool,
    sigma0: float = NOISE_FLOOR,
    moves: tuple[str, ...] = (),
) -> Spread:
    """Fit sigma1 to held-out residuals (sigma0 given) and keep their normalized scores.

    ``sigma0`` is the spread of steps without synchronisation, from in-sample one-worker
    residuals: held-out rows are multi-worker, so they cannot separate it from sigma1.
    """
    log_ratio = np.asarray(log_ratio, float)
    sigma0 = max(float(sigma0), NOISE_FLOOR)
    if log_ratio.size < MIN_SCORES:
        return Spread(max(PRIOR_SD, sigma0), PRIOR_SD, np.array([]), node_prior, moves)
    x2 = (np.asarray(share, float) * np.asarray(distance, float)) ** 2
    # least squares of r^2 - sigma0^2 = sigma1^2 x^2, sigma1^2 >= 0
    sigma1_sq = float(np.sum(x2 * (log_ratio**2 - sigma0**2)) / max(np.sum(x2**2), 1e-300))
    spread = Spread(
        sigma0, max(np.sqrt(max(sigma1_sq, 0.0)), NOISE_FLOOR), np.array([]), node_prior, moves
    )
    spread.scores = np.abs(log_ratio) / spread.sigma(share, distance)
    return spread
