"""Prediction intervals by split conformal calibration on folds that hold out the largest scales.

Scores are |log(observed step / predicted step)| of held-out steps, divided by how far the
held-out configuration lies beyond the fitted ones (``extrapolation_distance``), so that an
interval's half-width in log space is ``quantile * distance``: it grows with the number of
nodes and workers beyond what was measured. (Split conformal: Vovk, Gammerman & Shafer,
"Algorithmic Learning in a Random World", 2005; Lei et al., JASA 2018.)
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm

from .step_fit import NOISE_FLOOR

MIN_SCORES = 10  # below this a group's own scores do not calibrate an interval
# half-width (log space, per unit of distance) assumed when nothing calibrates it: about +-35%
# at 90%; wide on purpose, it only serves models fitted on a handful of configurations
PRIOR_HALF_WIDTH = 0.3


def extrapolation_distance(
    num_nodes: np.ndarray, num_workers: np.ndarray, max_nodes: float, max_workers: float
) -> np.ndarray:
    """1 inside the fitted range; + log2 of each factor by which nodes or workers exceed it."""
    k = np.maximum(np.asarray(num_nodes, float) / max_nodes, 1.0)
    n = np.maximum(np.asarray(num_workers, float) / max_workers, 1.0)
    return 1.0 + np.log2(k) + np.log2(n)


def conformal_quantile(scores: np.ndarray, level: float) -> float:
    """The split-conformal quantile: the ceil((m+1) * level)-th smallest of m scores."""
    scores = np.sort(np.asarray(scores, float))
    m = scores.size
    rank = int(np.ceil((m + 1) * level))
    if m == 0:
        return PRIOR_HALF_WIDTH * norm.ppf(0.5 + level / 2) / norm.ppf(0.95)
    if rank > m:  # too few scores for this level: the largest, stretched by the tail ratio
        return float(scores[-1] * norm.ppf(0.5 + level / 2) / norm.ppf(0.5 + (m / (m + 1)) / 2))
    return float(scores[rank - 1])


def noise_half_width(level: float) -> float:
    """Half-width (log space) that measurement noise alone gives at ``level``."""
    return float(norm.ppf(0.5 + level / 2) * NOISE_FLOOR)


def half_width(scores: np.ndarray, level: float, distance: np.ndarray) -> np.ndarray:
    """Half-width in log space of the interval at ``level`` for each configuration."""
    q = max(conformal_quantile(scores, level), noise_half_width(level))
    return q * np.asarray(distance, float)


def bounds(
    point: np.ndarray, scores: np.ndarray, level: float, distance: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) of the interval around ``point`` (multiplicative, so lo stays above zero)."""
    h = half_width(scores, level, distance)
    return point * np.exp(-h), point * np.exp(h)


def scale_folds(configs: pd.DataFrame, max_folds: int = 4) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) masks that each hold out every configuration at or above a scale cut.

    Scale orders by nodes, then workers. The cuts are the largest node count (the move the
    model is used for) and steps through the largest worker counts; a fold is kept only when
    its training part still spans the regimes (single/multi node) its test part needs.
    """
    k = configs["num_nodes"].to_numpy()
    n = configs["num_workers"].to_numpy()
    levels = sorted(set(zip(k.tolist(), n.tolist(), strict=True)))
    top_k = max(k)
    cuts = []
    if top_k > 1:
        cuts.append((top_k, 0))  # leave the largest node count out
    top_levels = [lv for lv in levels if lv[0] == top_k]
    for frac in (0.25, 0.5, 0.75):
        idx = int(round(frac * len(top_levels)))
        if 0 < idx < len(top_levels):
            cuts.append(top_levels[idx])
    folds = []
    for cut in dict.fromkeys(cuts):
        test = np.array([(a, b) >= cut for a, b in zip(k, n, strict=True)])
        train = ~test
        if train.sum() < 3 or test.sum() == 0:
            continue
        if (k[test] > 1).any() and not (k[train] > 1).any():
            continue  # multi-node terms would not be identified: nothing to learn from it
        if (n[test] > 1).any() and not (n[train] > 1).any():
            continue
        folds.append((train, test))
    return folds[:max_folds]
