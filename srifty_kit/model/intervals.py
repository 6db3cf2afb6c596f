"""Prediction intervals by signed, normalized split conformal calibration on larger scales.

A held-out step's error in log space, r = log(measured / predicted), is modelled as spreading
like

    sigma(x) = sqrt(sigma0**2 + (sigma1 * share(x) * distance(x))**2)

where ``share`` is the part of the step that is synchronisation (d log T / d log T_s: the
network is what varies, compute barely does) and ``distance`` how far the configuration lies
beyond the fitted ones (1 inside; + log2 of each factor by which nodes or workers exceed the
largest fitted). sigma0**2 and sigma1**2 are a non-negative least-squares fit of the squared
held-out residuals on (1, (share * distance)**2) (``_scale_terms``), sigma0 never below the
in-sample spread of one-worker steps: held-out steps at a small sync share (a large batch) err
too, by what more workers on a host add to the compute (their scatter about the fit), and a
scale without that part would read their scores as the largest and stretch them over every sync
share, a width the steps where sync dominates never show (variance-function estimation from
squared residuals, Carroll & Ruppert, "Transformation and Weighting in Regression", 1988, ch.
3). The scores r / sigma(x) keep their sign: the interval runs from the lower to the upper
conformal quantile of them, each at (1 - level) / 2 of the tail, so a model that runs slow on
larger scales gets an interval shifted up, with as many held-out misses above it as below
(normalized split conformal, Lei, G'Sell, Rinaldo, Tibshirani & Wasserman, JASA 2018, section
5.2; one quantile per tail as in the asymmetric form of conformalized quantile regression,
Romano, Patterson & Candes, NeurIPS 2019). These scores come from folds that add workers at
node counts the fit has seen. The interval always holds the point and is never narrower than
the noise floor.

A node count beyond the fitted ones also moves the network (``NodeMove``): the step's log
error there is N(u * centre, (u * sd)**2 + scatter**2), with u = sync share * d**growth, d the
doublings (log2 of the node count over the largest fitted). ``growth`` says how the error
grows with the distance: 1 in proportion to it (a network that slows by the same factor at
every doubling), 0 not at all (the error is the step off the measured node counts, the same at
any distance beyond); it is learned with the hyperprior (``learn_prior``) from moves that
predict several node counts from one fit. Those moves reach only so far (the reference
clusters', 1.32 doublings: 2 -> 5 nodes); past that distance (``seen``) the error grows in
proportion to the distance again, u = share * seen**growth * d / seen, so a flat growth
learned on near moves is not stretched to 16 nodes from 4 (2 doublings) on no evidence.
``centre`` is the network's rate at one doubling, learned from held-out moves starting at 2
or more nodes (``move_rates``), pooled over every training model on that instance type and
under the hyperprior ``NODE_MOVE_PRIOR`` learned on the reference clusters (``network_move``,
``learn_prior``); ``sd`` is how unsure that rate is, ``scatter`` how far one configuration
strays from it. Those moves were whole (the added
workers came with them), and ``scatter`` is measured about them, so it already holds the
group's own error at the edge of what it measured (distance 1): a configuration's own part there
is the larger of the two, not their sum, and the rate's uncertainty adds in quadrature,

    half-width = sqrt(max(h_1, z * scatter)**2 + (z * u * sd)**2),   h_1 the group's own
                                                                      half-width at distance 1

``StepTimeModel`` warns beyond 8x the fitted scale.

**Run-to-run variance** (``run_variance``): how far a configuration's mean moves between runs,
VMs or hosts. The step-time model's interval describes another step measured the way the fitted
steps were. A new run on a new VM can differ by more: its mean step time moves by a between-run
factor (placement, neighbours, clocks) that steps within one run never show. Where the same
configuration was measured in more than one run, that factor's spread is estimated here and
``widen`` carries it into the prediction interval of ``interval_kind="new_run"``.

**Runs** are told apart, per configuration, by the first of
  - ``run``: one id per profiling call (the kit's profiler writes it);
  - ``repeat``, when it labels groups of several steps (several rows per configuration, host
    and repeat; with hosts, a run is a host and a repeat); where every row has its own
    ``repeat``, rows are steps (the profiler numbers its steps so) or run means, and no
    within-run spread can be told from the between-run one;
  - ``host``, when one configuration was measured on several hosts of its instance type.

**Estimator** (one-way random effects on the log of each run's mean, method of moments):
each run i of configuration c gives y_ci = log(mean of its kept steps) and v_ci, the variance
of that log mean from the autocorrelation-robust interval (``measure.variance.summarise``:
warm-up cut, batch means; 0 for a run that is one row). With k_c runs of configuration c,

    tau**2 = sum_c [ sum_i (y_ci - mean_i y_ci)**2 - (1 - 1/k_c) * sum_i v_ci ]
             / sum_c (k_c - 1),        floored at 0,

the unweighted (Hedges) estimator with configurations as fixed effects, pooled over the
configurations of one instance type (the VM is what varies). statsmodels' ``MixedLM`` would
fit the same variance components, but takes the steps within a run as independent: their
autocorrelation then reads as between-run variance (tests/model/test_run_variance.py shows
it); subtracting the robust within-run variance of each mean does not.

``widen``: half-width in log space ``sqrt(h**2 + (z * tau)**2)``, z the normal quantile of
the level. The step interval is calibrated on the fitted rows; where those already pool
several runs of every configuration it holds part of tau, and the new-run interval is then
on the wide side. On simulated ring all-reduce steps (24 configurations, runs 6% apart, steps
2% and lag-1 0.5 within; tests/model/test_run_variance.py), a new run's steps fell inside the
90% intervals: fitted on one run with six configurations repeated in two more, 62% (step) and
87% (new run); fitted on three runs of every configuration, 88% and 98%.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import nnls
from scipy.stats import f as f_dist
from scipy.stats import median_abs_deviation, norm

from srifty_kit.errors import InputError
from srifty_kit.measure.variance import steady, summarise, warmup_mask
from srifty_kit.model.fit import NOISE_FLOOR

MIN_SCORES = 10  # below this a group's own scores do not calibrate an interval
# log-sd of the error when nothing calibrates it (a handful of configurations): ~ +-40% at 90%
PRIOR_SD = 0.2
# node-count moves are learned from folds whose fit already spanned nodes: from one node the
# ring leaves the node for the first time, a change of links, not of how the network scales
FIRST_MULTI_NODE = 2
# rows whose step is less than this share synchronisation say too little about the network
# to learn its move from (their log ratio divided by the share would be mostly compute noise)
MIN_NODE_SHARE = 0.2
# the level whose interval's middle anchors the band of a move to new node counts
_MIDDLE_LEVEL = 0.9
# the exponents of distance that ``learn_prior`` chooses the hyperprior's growth among
GROWTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


@functools.lru_cache(maxsize=64)
def two_sided_z(level: float) -> float:
    """Gaussian quantile of a central interval at ``level``, cached: scipy's ppf costs more
    than the rest of a prediction call, and a search asks at one level many times."""
    return float(norm.ppf(0.5 + level / 2))


def reach(
    share: np.ndarray, doublings: np.ndarray, growth: float, seen: float = math.inf
) -> np.ndarray:
    """u = share * d**growth beyond the fitted node counts (d > 0), 0 within them; past
    ``seen`` doublings (the farthest move the growth was learned on) it goes on in proportion
    to the distance: u = share * seen**growth * d / seen."""
    d = np.asarray(doublings, float)
    near = np.maximum(np.minimum(d, seen), 1e-12)
    beyond = np.where(d > 0, near**growth * np.maximum(d / seen, 1.0), 0.0)
    return np.asarray(share, float) * beyond


def extrapolation(
    num_nodes: np.ndarray, num_workers: np.ndarray, max_nodes: float, max_workers: float
) -> tuple[np.ndarray, np.ndarray]:
    """How far configurations lie beyond the fitted ones: (distance, doublings).

    doublings = log2 of the factor by which the nodes exceed the largest fitted (0 inside);
    distance = 1 + doublings + log2 of the factor by which the workers exceed theirs.
    """
    doublings = np.log2(np.maximum(np.asarray(num_nodes, float) / max_nodes, 1.0))
    n = np.maximum(np.asarray(num_workers, float) / max_workers, 1.0)
    return 1.0 + doublings + np.log2(n), doublings


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


def signed_quantiles(scores: np.ndarray, level: float) -> tuple[float, float]:
    """Lower and upper split-conformal quantiles of signed scores, (1 - level) / 2 per tail.

    Each end is the ceil((m+1) * (1+level)/2)-th score from its own side. No scores: the
    Gaussian quantiles. Too few for the level: the extreme score, moved away from the median
    by the Gaussian tail ratio.
    """
    scores = np.sort(np.asarray(scores, float))
    m = scores.size
    z = two_sided_z(level)
    if m == 0:
        return -z, z
    rank = int(np.ceil((m + 1) * (1 + level) / 2))
    if rank <= m:
        return float(scores[m - rank]), float(scores[rank - 1])
    mid = float(np.median(scores))
    stretch = z / two_sided_z((m - 1) / (m + 1))  # the extremes sit at that central level
    return mid + (scores[0] - mid) * stretch, mid + (scores[-1] - mid) * stretch


@dataclass(frozen=True)
class NodeMove:
    """How far off the predicted step is at a node count never measured.

    A configuration's reach is u = share * d**growth: its sync share (d log T / d log T_s)
    times its distance d = log2 of its node count over the largest fitted, raised to
    ``growth``. Its log error there is

        log(T / T_hat) ~ N(u * centre, (u * sd)**2 + scatter**2)

    a network that is off by ``centre`` at one doubling of the ring, with ``sd`` the
    uncertainty of that rate for this group (shared by its configurations: the network's, and
    every model on it), and ``scatter`` how far single configurations stray from the rate at a
    new node count (their own, independent). ``growth`` 1 (files written before it) makes the
    error grow in proportion to the distance, 0 the same at every node count beyond, up to
    ``seen`` doublings; past them it grows in proportion (``reach``; inf in files before it).
    """

    centre: float
    sd: float
    scatter: float = 0.0
    source: str = ""  # where it was learned, in words (shown by StepTimeModel.summary)
    growth: float = 1.0  # u = share * d**growth
    seen: float = math.inf  # ... up to d = seen, then share * seen**growth * d / seen

    def reach(self, share: np.ndarray, doublings: np.ndarray) -> np.ndarray:
        """u of each configuration (0 where its node count was measured)."""
        return reach(share, doublings, self.growth, self.seen)

    def band(
        self, level: float, share: np.ndarray, doublings: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Centre and half-width (log space) of the move's error at ``level``; 0 where the
        node count was measured."""
        doublings = np.asarray(doublings, float)
        u = self.reach(share, doublings)
        spread = np.sqrt((u * self.sd) ** 2 + np.where(doublings > 0, self.scatter, 0.0) ** 2)
        return u * self.centre, two_sided_z(level) * spread


@dataclass(frozen=True)
class NetworkPrior:
    """The population a network's move per doubling is drawn from (the hierarchy's top):

    rate_type ~ N(centre, between_types**2)     one per instance type (its network)
    rate      ~ N(rate_type, between_moves**2)  each model's move to a node count never
                                                measured (models and campaigns differ)
    log error ~ N(u * rate, ...)                each configuration, u = share * d**growth
    """

    centre: float
    between_types: float
    between_moves: float
    scatter: float = 0.0  # how far one configuration strays from its move's rate (log)
    source: str = ""
    growth: float = 1.0  # how the error grows with the distance d beyond: u = share * d**growth
    # the farthest distance the growth was learned on: beyond it nothing says the error stays
    # as flat as it was, so it grows in proportion to the distance again (``reach``)
    seen: float = math.inf


# The hyperprior, learned by ``learn_prior`` from every node-count move of the three
# reference clusters (../shared/reference/measurements: AWS g4dn.12xlarge 1-2 -> 3-4 and 1-3
# -> 4; Azure ND40rs_v2 1-2 -> 3-5, 1-3 -> 4-5, 1-4 -> 5; RTX 2080 Ti 1-2 -> 3 nodes), each
# fitted on the smaller node counts. Its growth 0 comes from the moves that span several node
# counts: AWS's 1-2 -> 3-4 and Azure's 1-2 -> 3-5 and 1-3 -> 4-5 erred as much at the nearer
# node counts as at the farther ones (Azure alone prefers 0.25 by a hair, AWS alone 0).
# ``benchmarks/model_accuracy.py`` prints it and fails when it is stale; the held-out figures
# there and in ``benchmarks/decision_quality.py`` use, for each cluster, the prior learned on
# the other two clusters only.
NODE_MOVE_PRIOR = NetworkPrior(
    0.007,
    0.082,
    0.149,
    0.088,
    "a prior learned on three reference clusters' node-count moves (intervals.NODE_MOVE_PRIOR)",
    0.0,
    1.322,
)


def move_rates(
    log_ratio, share, doublings, fold, growth: float = 1.0, seen: float = math.inf
) -> tuple[np.ndarray, np.ndarray]:
    """Per held-out move (fold): its rate, the least-squares slope through 0 of log(measured /
    predicted) on the reach u (``reach``), and the RMS of its steps about that line (their
    scatter). Folds with fewer than ``MIN_SCORES`` steps or no reach are left out."""
    r = np.asarray(log_ratio, float)
    u = reach(share, doublings, growth, seen)
    fold = np.asarray(fold)
    lines = [_rate_line(r[fold == f], u[fold == f]) for f in np.unique(fold)]
    lines = [line for line in lines if line is not None]
    return np.array([line[0] for line in lines]), np.array([line[1] for line in lines])


def _rate_line(r: np.ndarray, u: np.ndarray) -> tuple[float, float, np.ndarray] | None:
    """One move's rate (slope through 0 of r on u), the RMS of r about it and the mask of the
    steps it stands on; None below ``MIN_SCORES`` usable steps (finite r, u > 0)."""
    keep = np.isfinite(r) & (u > 0)
    if keep.sum() < MIN_SCORES:
        return None
    rate = float(np.sum(u[keep] * r[keep]) / np.sum(u[keep] ** 2))
    return rate, float(np.sqrt(np.mean((r[keep] - rate * u[keep]) ** 2))), keep


def _robust(values: np.ndarray) -> tuple[float, float]:
    """Median and the normal-scaled MAD (a normal's sd, robust to one odd campaign or model)."""
    return float(np.median(values)), float(median_abs_deviation(values, scale="normal"))


def network_move(
    rates: np.ndarray, scatter: np.ndarray, prior: NetworkPrior, source: str
) -> NodeMove:
    """The ``NodeMove`` of every model on one network from its held-out moves (one rate and
    scatter per model and move, ``move_rates``), partially pooled with ``prior``.

    The network's rate is the median of its moves' rates, with the standard error of a median
    (1.25 sd / sqrt(m)), combined with the prior's centre by precision; the spread of one move
    about it is its moves' robust sd with the prior's counted as one more move. A network
    with one or two moves takes their mean, with the prior's spread; with none, the prior.
    The scatter is the median of its moves' and the prior's. The rate is kept at 0 or above:
    beyond the measured node counts a ring never gets cheaper per byte than the ring model
    fitted below them, so a negative rate is a slow smaller campaign (a campaign effect), not a
    network that keeps speeding up with every doubling.
    """
    rates = np.asarray(rates, float)
    spread, mean, var = prior.between_moves, prior.centre, prior.between_types**2
    if rates.size:
        if rates.size >= 3:  # enough to see how far moves scatter, and a robust centre
            own, sd = _robust(rates)
            spread = float(np.sqrt((rates.size * sd**2 + spread**2) / (rates.size + 1)))
            var_own = (1.25 * spread) ** 2 / rates.size
        else:
            own, var_own = float(np.mean(rates)), spread**2 / rates.size
        w_prior, w_own = 1.0 / var, 1.0 / var_own
        mean = (w_prior * prior.centre + w_own * own) / (w_prior + w_own)
        var = 1.0 / (w_prior + w_own)
    stray = float(np.median(np.append(np.asarray(scatter, float), prior.scatter)))
    sd = float(np.sqrt(var + spread**2))
    return NodeMove(float(max(mean, 0.0)), sd, stray, source, prior.growth, prior.seen)


def _moves_by_cluster(rows: pd.DataFrame, growth: float) -> tuple[dict, float, float]:
    """Per cluster, the rates and strays of its (move, model) folds at ``growth``; the
    profile log-likelihood of every fold's steps about its own rate line (each fold its own
    Gaussian scatter): sum over folds of -n/2 * log(mean squared residual); and the farthest
    distance (doublings) of those steps."""
    per, loglik, seen = {}, 0.0, 0.0
    for cluster, g in rows.groupby("cluster"):
        rates, strays = [], []
        for _, m in g.groupby(["move", "model"]):
            d = m["doublings"].to_numpy(float)
            line = _rate_line(m["log_ratio"].to_numpy(float), reach(m["share"], d, growth))
            if line is not None:
                rate, stray, keep = line
                loglik -= keep.sum() / 2 * np.log(max(stray**2, 1e-12))
                seen = max(seen, float(d[keep].max()))
                rates.append(rate)
                strays.append(stray)
        per[cluster] = (np.array(rates), np.array(strays))
    return per, loglik, seen


def learn_prior(rows: pd.DataFrame, source: str, growths: tuple = GROWTHS) -> NetworkPrior:
    """The hyperprior from held-out node moves of several clusters: rows with columns cluster,
    move, model, log_ratio, share, doublings; a move is one fit (of the node counts up to
    some k) and every larger node count it predicts.

    ``growth``, of ``growths``, is the one under which each model's move is best explained by
    one rate times d**growth (the largest profile likelihood, ``_moves_by_cluster``): only
    moves that predict several node counts tell growths apart; without them it stays 1.
    Then each model's rate per move (``move_rates``); per cluster their median; the centre is
    the median of the clusters', between_types their robust sd (at least the sd of a median of
    the clusters' moves: two or three clusters cannot say less), between_moves the median over
    clusters of their moves' robust sd, scatter the median of every move's. ``seen`` is the
    farthest distance (doublings) of the steps it learned on: the growth holds up to there."""
    fits = {g: _moves_by_cluster(rows, g) for g in growths}
    best = max(fits[g][1] for g in growths)
    # ties (no move spans several node counts): the largest growth, the widest far out
    growth = max(g for g in growths if fits[g][1] >= best - 1e-9)
    medians, spreads, counts, strays = [], [], [], []
    for rates, stray in fits[growth][0].values():
        strays.extend(stray.tolist())
        if rates.size < 3:
            continue
        mid, sd = _robust(rates)
        medians.append(mid)
        spreads.append(sd)
        counts.append(rates.size)
    if not medians:
        return NODE_MOVE_PRIOR
    within = float(np.median(spreads))
    centre, between = (
        _robust(np.array(medians))
        if len(medians) > 2
        else (
            float(np.mean(medians)),
            float(np.std(medians, ddof=1)) if len(medians) > 1 else within,
        )
    )
    floor = 1.25 * within / np.sqrt(min(counts))
    return NetworkPrior(
        centre,
        max(between, floor),
        within,
        float(np.median(strays)),
        source,
        float(growth),
        fits[growth][2],
    )


def equal_weights(*labels: np.ndarray) -> np.ndarray:
    """Row weights under which every value of the first labels weighs the same, then within
    it every value of the next, and so on (e.g. clusters, then the moves of each)."""
    frame = pd.DataFrame(
        {depth: np.asarray(values).astype(str) for depth, values in enumerate(labels)}
    )
    if frame.empty:
        return np.ones(0)
    weight = np.full(len(frame), 1.0 / frame[0].nunique())
    for depth in range(1, len(labels)):  # a parent's share split among its children
        weight /= frame.groupby(list(range(depth)))[depth].transform("nunique").to_numpy()
    return weight / frame.groupby(list(range(len(labels))))[0].transform("size").to_numpy()


def _weighted_quantiles(x: np.ndarray, weight: np.ndarray, probs: tuple) -> np.ndarray:
    """Quantiles of ``x`` under ``weight`` (inverse of the weighted empirical CDF)."""
    order = np.argsort(x)
    cum = np.cumsum(weight[order])
    cum = (cum - 0.5 * weight[order]) / cum[-1]
    return np.interp(probs, cum, x[order])


@dataclass
class Spread:
    """The calibrated shape and scale of a group's prediction error (log space)."""

    sigma0: float  # error sd of a configuration without synchronisation
    sigma1: float  # ... per unit of sync share times extrapolation distance
    scores: np.ndarray  # signed log ratio / sigma of held-out steps: the conformal scores
    moves: tuple[str, ...] = ()  # what the calibration folds held out, in words
    node: NodeMove | None = None  # the error of a move to a new node count

    def basis(self, max_nodes: int) -> str:
        """Where the width comes from, in words: the folds, the prior, or neither."""
        if self.scores.size == 0:
            said = "prior width: too few held-out steps to calibrate on"
        else:
            said = f"held out {'; '.join(self.moves)} ({self.scores.size} steps)"
        if self.node is not None:
            said += f"; beyond {max_nodes} node{'' if max_nodes == 1 else 's'} {self.node.source}"
        return said

    @functools.cached_property
    def _middle(self) -> float:
        """Middle of the 90% interval's scores: where a new node count's band is anchored."""
        return sum(signed_quantiles(self.scores, _MIDDLE_LEVEL)) / 2

    def sigma(self, share: np.ndarray, distance: np.ndarray) -> np.ndarray:
        """sigma(x) of each configuration."""
        return np.sqrt(self.sigma0**2 + (self.sigma1 * share * distance) ** 2)

    def offsets(
        self, level: float, share: np.ndarray, distance: np.ndarray, doublings: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Log offsets (down, up) of the interval's ends from the point at ``level``.

        ``doublings``: log2 of each configuration's node count over the largest fitted (0
        within). The ends are the point times exp(-down) and exp(up). Both are at least 0
        (the interval holds the point) and together at least the noise floor's width.
        """
        doublings = np.asarray(doublings, float)
        moved = doublings > 0
        if self.node is not None:
            # the node move's band was learned from whole moves (more workers included), so
            # the group's own part stays at the edge of what it measured
            distance = np.where(moved, 1.0, distance)
        sigma = self.sigma(share, distance)
        q_lo, q_hi = signed_quantiles(self.scores, level)
        lower, upper = q_lo * sigma, q_hi * sigma  # signed log offsets of the two ends
        if self.node is not None:
            # scatter was measured about whole moves: it holds the group's own error at the
            # edge, so the larger of the two counts, not both
            shift, _ = self.node.band(level, share, doublings)
            z = two_sided_z(level)
            rate = z * self.node.reach(share, doublings) * self.node.sd
            # each side's own part runs from the middle of the 90% interval, the same at
            # every level: read from the level's own middle, the scatter's band would move
            # down with it when a higher level reaches one more low score, and the upper end
            # would fall as the level rose. At 90% this is max(half, z * scatter) each side.
            middle = self._middle * sigma
            up = np.maximum(upper, middle + z * self.node.scatter) - middle
            down = middle - np.minimum(lower, middle - z * self.node.scatter)
            lower = np.where(moved, middle + shift - np.hypot(down, rate), lower)
            upper = np.where(moved, middle + shift + np.hypot(up, rate), upper)
        # at least the noise floor's width, around the interval's own middle
        floor = two_sided_z(level) * NOISE_FLOOR
        middle, half = (upper + lower) / 2, np.maximum((upper - lower) / 2, floor)
        return np.maximum(half - middle, 0.0), np.maximum(middle + half, 0.0)


def calibrate(
    log_ratio: np.ndarray,
    share: np.ndarray,
    distance: np.ndarray,
    node: NodeMove | None,
    sigma0: float = NOISE_FLOOR,
    moves: tuple[str, ...] = (),
) -> Spread:
    """Fit sigma1 to held-out residuals (sigma0 given) and keep their signed scores.

    Args:
        log_ratio, share, distance: the held-out steps of folds that add workers at node
            counts the fit has seen (``holdout.HeldOut.within``).
        node: the error of a move to a new node count (``node_move`` or the prior; None
            while the estimator has yet to pool it across the models of one network).
        sigma0: the spread of steps without synchronisation, from in-sample one-worker
            residuals: the least the fitted sigma0 may be (a held-out fold with every step
            at one sync share cannot tell the two terms apart).
        moves: what the folds held out, in words.

    Returns:
        The calibrated ``Spread`` (signed).
    """
    log_ratio = np.asarray(log_ratio, float)
    sigma0 = max(float(sigma0), NOISE_FLOOR)
    if log_ratio.size < MIN_SCORES:
        return Spread(max(PRIOR_SD, sigma0), PRIOR_SD, np.array([]), moves, node=node)
    x2 = (np.asarray(share, float) * np.asarray(distance, float)) ** 2
    sigma0, sigma1 = _scale_terms(log_ratio**2, x2, sigma0)
    scores = log_ratio / np.sqrt(sigma0**2 + sigma1**2 * x2)  # r / sigma(x), signed
    return Spread(sigma0, sigma1, scores, moves, node=node)


def _scale_terms(r2: np.ndarray, x2: np.ndarray, sigma0: float) -> tuple[float, float]:
    """(sigma0, sigma1) of r^2 = sigma0^2 + sigma1^2 x^2 by least squares, both >= 0.

    sigma1 alone with ``sigma0`` given, or both where the steps tell an intercept above it
    apart from the slope (the F-test of the one added term at the conventional 5%): steps at
    one x cannot, and then the term that grows with the distance keeps their spread, so an
    interval still widens beyond what was held out."""

    def slope(s0: float) -> float:  # sigma1^2 given sigma0
        return max(float(np.sum(x2 * (r2 - s0**2)) / max(np.sum(x2**2), 1e-300)), 0.0)

    fixed = float(np.sum((r2 - sigma0**2 - slope(sigma0) * x2) ** 2))
    (intercept, _), norm_free = nnls(np.column_stack([np.ones_like(x2), x2]), r2)
    free, dof = norm_free**2, r2.size - 2
    if intercept > sigma0**2 and dof > 0 and free > 0:
        if f_dist.sf((fixed - free) / (free / dof), 1, dof) < 0.05:
            sigma0 = float(np.sqrt(intercept))
    return sigma0, max(float(np.sqrt(slope(sigma0))), NOISE_FLOOR)


# --- run-to-run variance ----------------------------------------------------------------

INTERVAL_KINDS = ("step", "new_run")
RUN_CONFIG = ("model", "num_nodes", "num_workers", "local_bsz", "placement")
RUN_COLUMNS = (
    "instance_type",
    "between_sd",
    "within_sd",
    "configs",
    "runs",
    "runs_by",
    "note",
)


def run_labels(table: pd.DataFrame) -> tuple[pd.Series | None, str]:
    """The run of each row and the column that told it (None, "" when no runs are told)."""
    keys = _run_keys(table)
    if "run" in table and table["run"].notna().any():
        return table["run"].astype(str), "run"
    hosts = ["host"] if "host" in table else []
    if (
        "repeat" in table
        and table.groupby([*keys, *hosts, "repeat"], dropna=False).size().max() > 1
    ):
        label = table["repeat"].astype(str)
        if hosts:
            return table["host"].astype(str) + "/" + label, "host and repeat"
        return label, "repeat"
    if hosts and table.groupby(keys, dropna=False)["host"].nunique().max() > 1:
        return table["host"].astype(str), "host"
    return None, ""


def _run_keys(table: pd.DataFrame) -> list[str]:
    return ["instance_type", *(k for k in RUN_CONFIG if k in table.columns)]


def _run_order(rows: pd.DataFrame) -> pd.DataFrame:
    for column in ("repeat", "timestamp"):
        if column in rows:
            return rows.sort_values(column, kind="stable")
    return rows


def run_means(table: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration and run: log of the run's mean step and its variance.

    Columns: the configuration keys, ``run``, ``steps`` (rows of the run), ``log_mean``,
    ``log_var`` (variance of ``log_mean`` from the run's own steps; 0 for a one-row run) and
    ``log_sd_step`` (the spread of one step around the run's mean, log scale; NaN for one row).
    """
    labels, _ = run_labels(table)
    keys = _run_keys(table)
    columns = [*keys, "run", "steps", "log_mean", "log_var", "log_sd_step"]
    if labels is None:
        return pd.DataFrame(columns=columns)
    marked = "warmup" in table
    rows = []
    for key, group in table.assign(_run=labels).groupby([*keys, "_run"], dropna=False, sort=True):
        group = _run_order(group)
        x = group["step_time_s"].to_numpy(float)
        warm = warmup_mask(group["warmup"]) if marked else None
        if x.size == 1:
            mean, var, sd = float(x[0]), 0.0, math.nan
        else:
            est = summarise(x, warmup=warm)
            mean = est.mean
            var = (est.std**2 / est.n_eff) / mean**2 if est.n_eff > 0 and mean > 0 else math.nan
            sd = est.std / mean if mean > 0 else math.nan
        if not mean > 0:
            continue
        rows.append(
            {
                **dict(zip([*keys, "run"], key, strict=True)),
                "steps": x.size,
                "log_mean": math.log(mean),
                "log_var": var,
                "log_sd_step": sd,
            }
        )
    return pd.DataFrame(rows, columns=columns)


def between_run_variance(means: pd.DataFrame) -> tuple[float, int, int]:
    """(tau**2, configurations with >= 2 runs, their runs) from ``run_means`` rows of one
    instance type: the pooled method-of-moments estimator of the module docstring."""
    keys = [k for k in ("model", *RUN_CONFIG[1:]) if k in means.columns]
    num, den, configs, runs = 0.0, 0, 0, 0
    for _, group in means.dropna(subset=["log_var"]).groupby(keys, dropna=False):
        k = len(group)
        if k < 2:
            continue
        y = group["log_mean"].to_numpy()
        v = group["log_var"].to_numpy()
        num += float(np.sum((y - y.mean()) ** 2) - (1 - 1 / k) * np.sum(v))
        den += k - 1
        configs += 1
        runs += k
    if den == 0:
        return math.nan, 0, 0
    return max(num / den, 0.0), configs, runs


def run_variance(table: pd.DataFrame) -> pd.DataFrame:
    """Per instance type: the between-run sd of log mean step time and what it rests on.

    ``between_sd`` is 0 where runs were told apart but differ no more than their own steps
    explain, NaN where no configuration was measured in two runs with steps to tell within
    from between (``note`` says which).
    """
    labels, by = run_labels(table)
    means = run_means(table)
    rows = []
    for itype in sorted(table["instance_type"].astype(str).unique()):
        mine = means[means["instance_type"].astype(str) == itype]
        tau2, configs, runs = between_run_variance(mine) if len(mine) else (math.nan, 0, 0)
        within = _pooled_sd(mine)
        if labels is None:
            note = (
                "no runs told apart: no run column, no repeat labelling several steps, "
                "one host per configuration"
            )
        elif configs == 0:
            note = f"runs told apart by {by!r}, but no configuration has two of them"
        elif (mine["steps"] <= 1).all():
            tau2, note = math.nan, "every run is one row: within and between cannot be told apart"
        else:
            note = f"{configs} configuration(s) measured in {runs} runs (by {by!r})"
        rows.append(
            {
                "instance_type": itype,
                "between_sd": math.sqrt(tau2) if np.isfinite(tau2) else math.nan,
                "within_sd": within,
                "configs": configs,
                "runs": runs,
                "runs_by": by,
                "note": note,
            }
        )
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


def _pooled_sd(means: pd.DataFrame) -> float:
    """One step's spread about its run's mean, pooled over ``run_means`` rows: the square
    root of the runs' variances weighted by their degrees of freedom,

        s**2 = sum_i (n_i - 1) * s_i**2 / sum_i (n_i - 1)

    (NaN where no run has two steps). Pooled, not the median run's: a noisier configuration
    weighs by its variance, so about as many of all the steps fall outside ``level``'s band
    as the level says, where a median run's spread left the noisier ones' steps outside."""
    sd = means["log_sd_step"].to_numpy(float)
    dof = means["steps"].to_numpy(float) - 1
    keep = np.isfinite(sd) & (dof > 0)
    if not keep.any():
        return math.nan
    return float(np.sqrt(np.sum(dof[keep] * sd[keep] ** 2) / np.sum(dof[keep])))


def check_kind(kind: str) -> str:
    """``kind`` if it is an interval kind, else an InputError naming them."""
    if kind not in INTERVAL_KINDS:
        raise InputError(
            f"unknown interval kind {kind!r}",
            fix='use "step" (another step of a run like the measured ones) or "new_run" '
            "(a step of a new run on a new VM)",
        )
    return kind


def widen(
    point: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    level: float,
    between_sd: float | np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The new-run interval: the step interval's log half-width and the between-run sd at
    ``level`` added in quadrature (NaN sd: nothing to add)."""
    sd = np.nan_to_num(np.asarray(between_sd, float), nan=0.0)
    point = np.asarray(point, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.maximum(np.log(np.asarray(hi, float) / point), np.log(point / np.asarray(lo, float)))
    h = np.sqrt(h**2 + (two_sided_z(level) * sd) ** 2)
    return point * np.exp(-h), point * np.exp(h)


def _between_sd(between: pd.DataFrame | None, kind: str) -> pd.Series:
    """Between-run sd per instance type for ``kind`` (an InputError when it is unknown)."""
    if between is None:
        raise InputError(
            f'this model holds no between-run run_variance for interval kind "{kind}" '
            "(a model file does not keep it)",
            fix="fit the model on the measurements to predict new-run intervals",
        )
    return between.set_index("instance_type")["between_sd"]


def _within_sd(between: pd.DataFrame | None) -> pd.Series:
    """One step's spread about its run's mean (log sd) per instance type, where the fitted
    table told runs apart (``run_variance``'s ``within_sd``); empty where none was measured."""
    if between is None or "within_sd" not in between:
        return pd.Series(dtype=float)
    return between.set_index("instance_type")["within_sd"]


def _of_type(between: pd.DataFrame | None, column: str, instance_type: str) -> float:
    """``column`` of ``instance_type``'s row of ``run_variance``'s table (NaN: none)."""
    if between is None or column not in between:
        return math.nan
    hit = between[column].to_numpy(float)[between["instance_type"].to_numpy() == instance_type]
    return float(hit[0]) if hit.size else math.nan


def with_step_noise(
    point: np.ndarray, lo: np.ndarray, hi: np.ndarray, level: float, step_sd: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The interval of one step rather than of a run's mean: each end's log distance from the
    point and one step's spread about its run's mean (``step_sd``, log) at ``level`` added in
    quadrature, each side its own (NaN sd: nothing to add),

        h_lo' = sqrt(h_lo**2 + (z * s)**2),   h_hi' = sqrt(h_hi**2 + (z * s)**2)

    The belief is of a run's mean step, which a run's many steps average; a single step
    strays from that mean by what its run's steps showed (a CPU profile's by 10%, a GPU's
    by a few percent)."""
    s = two_sided_z(level) * np.nan_to_num(np.asarray(step_sd, float), nan=0.0)
    point = np.asarray(point, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        h_lo = np.log(point / np.asarray(lo, float))
        h_hi = np.log(np.asarray(hi, float) / point)
    return point * np.exp(-np.sqrt(h_lo**2 + s**2)), point * np.exp(np.sqrt(h_hi**2 + s**2))


def _of_one_step(
    point: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    level: float,
    within: float | np.ndarray,
    between_sd: float | np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """A run mean's interval made one step's (``with_step_noise``) and, for a new run
    (``between_sd`` given), widened by the between-run spread (``widen``)."""
    if np.any(np.asarray(within, float) > 0):  # NaN compares False: no step spread measured
        lo, hi = with_step_noise(point, lo, hi, level, within)
    if between_sd is not None:
        lo, hi = widen(point, lo, hi, level, between_sd)
    return lo, hi


def apply_kind(
    pred: pd.DataFrame, kind: str, level: float, between: pd.DataFrame | None
) -> pd.DataFrame:
    """``pred`` with its interval for ``kind``, an ``interval_kind`` column saying which and,
    for new runs, the ``between_run_sd`` added (NaN: none measured for that type, none added).
    Either kind is of one step: one step's spread about its run's mean, where the fitted
    table measured it (``_within_sd``), widens the belief's interval of the mean
    (``with_step_noise``).
    """
    check_kind(kind)
    out = pred
    types = out["instance_type"].astype(str)
    within = types.map(_within_sd(between)).to_numpy(float)
    sd = types.map(_between_sd(between, kind)).to_numpy(float) if kind == "new_run" else None
    out["step_time_lo"], out["step_time_hi"] = _of_one_step(
        out["step_time_s"].to_numpy(),
        out["step_time_lo"].to_numpy(),
        out["step_time_hi"].to_numpy(),
        level,
        within,
        sd,
    )
    if sd is not None:
        out["between_run_sd"] = sd
    out["interval_kind"] = kind
    out.attrs["interval_kind"] = kind
    return out


def apply_kind_arrays(
    pred: dict[str, np.ndarray],
    kind: str,
    level: float,
    instance_type: str,
    between: pd.DataFrame | None,
) -> dict[str, np.ndarray]:
    """``apply_kind`` for the estimator's array predictions of one instance type."""
    check_kind(kind)
    # one type's row, read without building an index: this runs per type in every search
    within = _of_type(between, "within_sd", instance_type)
    sd = _between_sd(between, kind).get(str(instance_type), math.nan) if kind == "new_run" else None
    lo, hi = _of_one_step(
        pred["step_time_s"], pred["step_time_lo"], pred["step_time_hi"], level, within, sd
    )
    return {**pred, "step_time_lo": lo, "step_time_hi": hi}


def without_warmup(table: pd.DataFrame) -> pd.DataFrame:
    """The rows a fit uses: all but the steps the profiler marked as warm-up."""
    return steady(table)
