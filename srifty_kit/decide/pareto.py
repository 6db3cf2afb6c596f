"""The cost-time tradeoff: Pareto front (paretoset), its knee and the front worth showing.

The front is over (time at the confidence, expected cost): ``FRONT_TIME`` and ``FRONT_COST``,
the columns the search, the panel's figure, notebook 03's figure and ``srifty search`` draw or
list it in, and the search ranks every objective in them, so each objective's pick (the cost
objective's: the least expected cost within the deadline) is always on it.

The exact front keeps a point that is faster by any amount, however small: a configuration
0.003% faster at 2.4x the cost is on it. Such a margin is far inside what the model knows
(run-to-run noise alone is about 3% of a step), so the front a reader sees keeps a faster
point only when it is at least ``FRONT_NOISE`` (3%) faster than the next cheaper point shown
(``distinct_mask``), or when it is the knee or the pick.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

# the front's coordinates, the search's and every figure's of it: the time to finish at the
# confidence (what a deadline is held to) and the expected cost (what the cost objective
# ranks by). The front is then the pick for each deadline: its point left of a deadline and
# lowest is what a search with that deadline picks by cost.
FRONT_TIME = "time_hi_h"
FRONT_COST = "cost_mean_usd"
_BINS = 512
# the noise floor of a time on the shown front: a point must be this much (relative) faster
# than the next cheaper point shown to be shown (the reference clusters' run-to-run spread)
FRONT_NOISE = 0.03


def _surely_dominated(t: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Points some strictly faster point beats on cost: they cannot be on the front.

    Times are cut into bins; a point whose cost is at least the cheapest cost of any bin
    wholly faster than its own is dominated. This only removes points, never decides the front:
    that is paretoset's job, on the few survivors (its algorithm is quadratic in the worst case
    and took tens of seconds on a million candidates).
    """
    lt = np.log(t)
    low, span = lt.min(), lt.max() - lt.min()
    if not np.isfinite(span) or span <= 0:
        return np.zeros(t.size, bool)
    b = np.minimum(((lt - low) * (_BINS / span)).astype(np.int64), _BINS - 1)
    cheapest = np.full(_BINS, np.inf)
    np.minimum.at(cheapest, b, c)
    faster = np.concatenate([[np.inf], np.minimum.accumulate(cheapest)[:-1]])
    return c >= faster[b]


def pareto_mask(time_h: np.ndarray, cost_usd: np.ndarray) -> np.ndarray:
    """True where no other point is at least as fast and as cheap and better in one of them."""
    t, c = np.asarray(time_h, float), np.asarray(cost_usd, float)
    out = np.zeros(t.size, bool)
    if t.size == 0:
        return out
    from paretoset import paretoset  # imports numba when present: only when a front is needed

    keep = np.flatnonzero(~_surely_dominated(t, c))
    # numba's first call compiles for seconds; the numpy algorithm is quicker for one search
    out[keep] = paretoset(
        np.column_stack([t[keep], c[keep]]), sense=["min", "min"], distinct=True, use_numba=False
    )
    return out


def knee_score(
    time_h: np.ndarray, cost_usd: np.ndarray, front: np.ndarray | None = None
) -> np.ndarray:
    """Each point's time plus cost, both scaled to [0, 1] over the front's points.

    The chord joining the front's two ends is then score 1 and the knee is the front's point
    of least score (the Kneedle idea: Satopaa et al., ICDCS workshops 2011).

    Args:
        time_h: time to finish at the confidence (``FRONT_TIME``) of each point.
        cost_usd: the expected cost (``FRONT_COST``) of each point.
        front: which points are the front's (default: all of them).

    Returns:
        The score of every point, scaled by the front's span on each axis (a front with no
        span on an axis adds 0 for its points on that axis).
    """
    t, c = np.asarray(time_h, float), np.asarray(cost_usd, float)
    on = np.ones(t.size, bool) if front is None else np.asarray(front, bool)

    def scaled(x: np.ndarray) -> np.ndarray:
        low, span = x[on].min(), x[on].max() - x[on].min()
        return (x - low) / span if span > 0 else np.where(x > low, np.inf, 0.0)

    return scaled(t) + scaled(c)


def knee_index(time_h: np.ndarray, cost_usd: np.ndarray) -> int:
    """Position of the knee of a front: the point of least ``knee_score``, farthest below the
    chord joining the front's two ends; ties go to the cheaper point, then the faster (as
    every objective of the search breaks them).

    Raises:
        ValueError: the front is empty.
    """
    t = np.asarray(time_h, float)
    c = np.asarray(cost_usd, float)
    if t.size == 0:
        raise ValueError("an empty front has no knee")
    return int(np.lexsort((t, c, knee_score(t, c)))[0])


def distinct_mask(
    time_h: np.ndarray, keep: int | Iterable[int] | None = None, rel: float = FRONT_NOISE
) -> np.ndarray:
    """Which points of a front, sorted fastest first, are worth showing.

    From the slowest (cheapest) point on, a faster point is shown only when its time is at
    least ``rel`` below that of the last point shown: one within the noise floor costs more
    for a gain the model cannot tell from noise. Every point left out is then within ``rel``
    in time of a shown point that costs less.

    Args:
        time_h: the front's times, fastest first.
        keep: positions always shown (the knee, the pick), one or several.
        rel: the noise floor, relative.

    Returns:
        A boolean mask over ``time_h``.
    """
    t = np.asarray(time_h, float)
    kept = set() if keep is None else {int(keep)} if np.ndim(keep) == 0 else set(map(int, keep))
    out = np.zeros(t.size, bool)
    last = np.inf
    for i in range(t.size - 1, -1, -1):
        if i in kept or t[i] <= last * (1.0 - rel):
            out[i] = True
            last = t[i]
    return out
