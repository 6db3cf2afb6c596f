"""The model's joint belief about run-mean step times: a Gaussian over log time, its draws.

For a configuration x of one training model on instance type t, the log of a run's mean
step time is believed to be

    log T(x) = log T_hat(x) + c(x)              point and the centre of its held-out error
               + w(x) * z_g                     the fit's own error, one z_g per (model, type)
               + v(x) * z_t                     the network's move to node counts never
                                                measured, one z_t per instance type
               + u(x) * z_p                     its placement's stray, one z_p per (group,
                                                nodes, workers): shared by its batch sizes
               + e(x) * eps_x                   what is left: independent per configuration

with z_g, z_t, z_p, eps_x independent standard normals. ``w`` is the calibrated spread of the
group's held-out errors at the scales it measured (``intervals.Spread``, less the noise floor);
``v`` the spread the network's move adds beyond the largest measured node count (its sync
share times how far beyond, raised to the move's growth: ``intervals.NodeMove``); ``e`` the
noise floor (two campaigns of the same configurations differ by about 3%, reference
measurements README, so no belief about a configuration is narrower than that) and, at a
node count never measured, the configuration's own stray from the network's rate (at a batch
size not run on a measured placement, how far such a batch strays: ``GroupFit.batch_sd``).
The stray is the configuration's (the same in every run of it), the floor the run's: e^2 =
stray^2 + floor^2, so a measured run reveals its own stray (``condition``) and a new run
still adds the floor. Of the stray's variance, the share ``GroupFit.placement_share`` reads
off the dense runs is its placement's (u^2): a run at one batch size tells about the others
on the same nodes and workers, in ``condition`` (a probe's simulation) as in ``observe``
(the refit). Because z_g and z_t are shared, every configuration of one type is judged
under the same unknown: if this network scales worse than believed at 8 nodes, it does at 16
too. A search that reads each configuration's own interval treats those errors as independent;
one that reads draws of this belief does not.

``Belief`` holds the arrays and answers the chance constraint in closed form (a Gaussian
marginal, exact under this belief); ``Belief.draws`` samples it jointly (shared z per group,
per network and per placement) for what needs the joint law: a saving's work and cost from
one draw, the value of a measurement not yet made (``Belief.condition``: the belief after
seeing one run's mean). ``observe`` conditions one group's belief on the runs made beyond its
fit (probes appended to the table, or a scale-out sweep), jointly: all of them inform the
shared z_g and z_t at once, a sweep of batch sizes on one placement as one placement's
evidence; and with three runs or more, the size of the shared errors and of the strays are
those under which the runs are most likely (neither below the fit's): a sweep that lands far
off in step moves everything beyond with it, one that scatters widens what it did not run
instead of pinning it. ``on_places`` conditions another batch size of a placement run
within the fit on that placement's runs (its z_p, a factor on the placement's sync time,
which its hosts and links set and the batch does not: read by Laplace's method through the
overlap, so a larger batch adds its compute to a network as slow as the runs showed).

How the group's spread splits into shared (w) and own (e) parts is read from the fit: a
configuration's own stray is at least how far the group's measured configurations scatter
about the fit (``GroupFit.own_scatter``); only the rest is shared. The split leaves each
marginal as it was and decides how far one run moves the others.
``Draws`` is ``StepTimeModel.predict_draws``' result, shaped like statsmodels' prediction
results: ``mean``, ``interval(level)``, ``prob_below(t)``, ``summary_frame(level)``.

**Beliefs about a carried type's factors** (``LogBeliefs``, used by ``transfer``): joint
lognormal beliefs about multiplicative factors, narrowed by measurements (Laplace). The logs of
the factors are jointly Gaussian: ``mean`` and ``cov``. Given residuals that are Gaussian with
a known noise sd, ``update`` returns the Laplace approximation of the posterior: the maximum a
posteriori point, found by ``scipy.optimize.least_squares`` on the data residuals stacked with
the prior's whitened residuals, and the inverse of J'J there as its covariance. When the
residuals are linear in the logs this is the exact conjugate posterior."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.linalg import cho_factor, cho_solve, solve_triangular
from scipy.optimize import least_squares, minimize
from scipy.special import ndtr, ndtri

from srifty_kit.errors import InputError, check_level
from srifty_kit.model.fit import NOISE_FLOOR
from srifty_kit.model.intervals import two_sided_z
from srifty_kit.model.physics import overlap, sync_share

# the level at which a group's interval offsets are read to turn them into a Gaussian: the
# calibration's own (signed conformal quantiles at 5% and 95%; ``intervals``)
READ_LEVEL = 0.9
# ``observe`` learns how far the shared errors and the configurations stray beyond the fit
# from the runs there when it has at least this many (a spread needs three), up to this
# factor on what the fit believed
MIN_RUNS = 3
MAX_SCALE = 10.0


@dataclass
class Belief:
    """Gaussian belief over log run-mean step time of N configurations (see the module)."""

    point: np.ndarray  # T_hat(x): the fitted physics, seconds
    centre: np.ndarray  # c(x): the median of log(T / T_hat)
    group_sd: np.ndarray  # w(x): loading on the group's shared error z_g
    network_sd: np.ndarray  # v(x): loading on the network's shared move z_t
    noise_sd: np.ndarray  # e(x): independent part
    group: np.ndarray  # label of each configuration's (model, type) group (ints)
    network: np.ndarray  # label of each configuration's network (instance type, ints)
    # u(x): loading on its placement's error z_p, shared by every batch size run on the same
    # nodes and workers of its group (None: 0, every stray its own)
    place_sd: np.ndarray | None = None
    nodes: np.ndarray | None = None  # its placement: nodes and workers (None: 0)
    workers: np.ndarray | None = None

    def __post_init__(self) -> None:
        shape = np.shape(self.centre)
        for name in ("place_sd", "nodes", "workers"):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(shape))

    def __len__(self) -> int:
        return int(np.size(self.point))

    @property
    def sd(self) -> np.ndarray:
        """Marginal sd of log T: sqrt(w^2 + v^2 + u^2 + e^2)."""
        return np.sqrt(self.group_sd**2 + self.network_sd**2 + self.place_sd**2 + self.noise_sd**2)

    def places(self) -> np.ndarray:
        """Each configuration's placement as an index (0..): same group, nodes and workers."""
        group = np.ravel(np.broadcast_to(self.group, np.shape(self.centre))).astype(np.int64)
        key = (group << 42) | np.ravel(place_key(self.nodes, self.workers))
        return np.unique(key, return_inverse=True)[1].reshape(np.shape(self.centre))

    @property
    def median(self) -> np.ndarray:
        """T_hat * exp(c): half the runs faster, half slower."""
        return self.point * np.exp(self.centre)

    @property
    def mean(self) -> np.ndarray:
        """E[T] = T_hat * exp(c + sd^2 / 2) (lognormal)."""
        return self.point * np.exp(self.centre + 0.5 * self.sd**2)

    def quantile(self, q: float | np.ndarray) -> np.ndarray:
        """The q-quantile of T (q in (0, 1))."""
        return self.point * np.exp(self.centre + ndtri(q) * self.sd)

    def interval(self, level: float) -> tuple[np.ndarray, np.ndarray]:
        """Central ``level`` interval of T: (lower, upper) ends."""
        z = two_sided_z(level)
        mid, sd = self.centre, self.sd
        return self.point * np.exp(mid - z * sd), self.point * np.exp(mid + z * sd)

    def prob_below(self, t: float | np.ndarray) -> np.ndarray:
        """P(T <= t) for each configuration (t broadcast); 0 where t <= 0."""
        t = np.asarray(t, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            x = (np.log(np.maximum(t, 1e-300)) - np.log(self.point) - self.centre) / self.sd
        return np.where(t > 0, ndtr(x), 0.0)

    def take(self, index: np.ndarray) -> Belief:
        """The belief about the configurations at ``index``."""
        return Belief(*(np.asarray(getattr(self, f))[index] for f in FIELDS))

    def draws(self, n: int, seed: int | np.random.Generator = 0) -> np.ndarray:
        """(n, N) joint draws of T: one z per group, per network and per placement shared by
        its rows."""
        rng = np.random.default_rng(seed)
        level, run = self.levels(n, rng)
        return self.point * np.exp(level + run * rng.standard_normal((n, len(self))))

    def levels(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(n, N) joint draws of each configuration's level (log T / T_hat without a run's
        own noise: its shared errors, its placement's and its own stray, persistent), and
        the sd a run adds to it (the noise floor)."""
        groups, g_of = np.unique(self.group, return_inverse=True)
        nets, t_of = np.unique(self.network, return_inverse=True)
        z_g = rng.standard_normal((n, groups.size))[:, g_of]
        z_t = rng.standard_normal((n, nets.size))[:, t_of]
        level = self.centre + self.group_sd * z_g + self.network_sd * z_t
        if np.any(self.place_sd > 0):
            places = self.places()
            z_p = rng.standard_normal((n, int(places.max()) + 1))[:, places]
            level = level + self.place_sd * z_p
        stray = stray_sd(self.noise_sd)
        level = level + stray * rng.standard_normal((n, len(self)))
        return level, np.sqrt(np.maximum(self.noise_sd**2 - stray**2, 0.0))

    def condition(self, at: int, log_ratio: float | np.ndarray, noise: float) -> Belief:
        """The belief after one run of configuration ``at`` measured log(T / T_hat) =
        ``log_ratio`` (a scalar, or an array of simulated outcomes: then every field gains a
        leading axis), each with measurement noise sd ``noise`` beyond a run's own.

        Gaussian conditioning. A configuration's independent part e(x) eps_x is its own stray
        (persistent: the same configuration strays the same way in every run) and a run's
        noise (the noise floor, new in every run): ``stray_sd``. The run measured at ``at``
        reveals its shared errors and its own stray; another configuration shares z_g with it
        when of the same group and z_t when of the same network, z_p when also on the same
        nodes and workers (another batch size of its placement), and keeps its own stray.
        A run beyond the measured node counts (``network_sd > 0`` there) moves only the
        configurations beyond them, as a fit with that run appended does (``observe``): those
        within were fitted on their own measurements, which the run does not change.
        """
        same_g = self.group == self.group[at]
        same_t = self.network == self.network[at]
        if self.network_sd[at] > 0:
            beyond = self.network_sd > 0
            same_g, same_t = same_g & beyond, same_t & beyond
        key = place_key(self.nodes, self.workers)
        same_p = same_g & (key == key[at])
        wg, wt, wp = self.group_sd[at], self.network_sd[at], self.place_sd[at]
        var_y = wg**2 + wt**2 + wp**2 + self.noise_sd[at] ** 2 + noise**2
        # covariance of each configuration's level with the measured run: the shared normals
        # (its placement's too, at other batch sizes), and for ``at`` itself also its stray
        own = np.arange(len(self)) == at
        stray = np.where(own, stray_sd(self.noise_sd), 0.0)
        place = np.where(same_p, self.place_sd, 0.0)
        cov = np.where(same_g, self.group_sd * wg, 0.0) + np.where(
            same_t, self.network_sd * wt, 0.0
        )
        cov = cov + place * wp + stray**2
        y = np.asarray(log_ratio, float)[..., None] - self.centre[at]
        centre = self.centre + cov * y / var_y
        # each row's level variance falls by what y explained: w^2 + v^2 (+ u^2 on the run's
        # placement, + stray^2 for ``at``) - cov^2 / var_y (exact for the marginal; the rest
        # of that row's shared part is kept as its group's); ``at`` keeps only a new run's
        # noise as its own
        touched = same_g | same_t
        left = self.group_sd**2 + self.network_sd**2 + place**2 + stray**2 - cov**2 / var_y
        group_sd = np.where(touched, np.sqrt(np.maximum(left, 0.0)), self.group_sd)
        network_sd = np.where(touched, 0.0, self.network_sd)
        place_sd = np.where(same_p, 0.0, self.place_sd)
        noise_sd = np.where(own, np.minimum(self.noise_sd, NOISE_FLOOR), self.noise_sd)
        shape = centre.shape
        return Belief(
            np.broadcast_to(self.point, shape),
            centre,
            np.broadcast_to(group_sd, shape),
            np.broadcast_to(network_sd, shape),
            np.broadcast_to(noise_sd, shape),
            np.broadcast_to(self.group, shape),
            np.broadcast_to(self.network, shape),
            np.broadcast_to(place_sd, shape),
            np.broadcast_to(self.nodes, shape),
            np.broadcast_to(self.workers, shape),
        )


def observe(belief: Belief, seen: Belief, log_ratio: np.ndarray, match: np.ndarray) -> Belief:
    """The belief about one group's configurations after runs of others of the same group.

    ``seen`` is the belief about the configurations run (all of this group and network, so
    all share its z = (z_g, z_t)), ``log_ratio`` their measured log(T / T_hat), ``match`` for
    each configuration of ``belief`` the position in ``seen`` of the same configuration, or
    -1. A configuration's stray is its placement's part u (``place_sd``: shared by every
    batch size run on its nodes and workers) and its own part v (what ``noise_sd`` holds
    beyond the floor):

        y_j = c_j + a_j'z + u_j p_c(j) + v_j q_j + n_j

    with z, p, q independent standard normals and n_j ~ N(0, floor^2) the run's noise. A sweep
    of ten batch sizes on one placement is then one placement's evidence about z, not ten
    independent runs'. With ``MIN_RUNS`` runs or more, the loadings a and the strays (u, v) of
    every configuration are first scaled by the factors under which the runs are most likely
    (``_scales``). With x = (z, p, q), H the runs' loadings (linear-Gaussian; Bishop, PRML,
    eq. 2.116-2.117):

        S = (I + H'H / floor^2)^-1,    m = S H' (y - c) / floor^2

    An asked configuration with loadings h on x moves by h'm. Its variance h'Sh is split into
    the part that goes through z (its new group and network loadings, L'(a + B'h_r) with
    B = S_rz S_zz^-1, L L' = S_zz), what its run placement's p keeps beyond z (its new
    placement loading) and the rest, its own; a placement never run keeps its own loading,
    and a new run adds the floor.

    Raises:
        ValueError: the shapes of ``seen`` and ``log_ratio`` disagree.
    """
    load_seen = np.column_stack([seen.group_sd, seen.network_sd])
    resid = np.asarray(log_ratio, float) - np.asarray(seen.centre, float)
    runs = resid.size
    if resid.shape != np.shape(seen.centre):
        raise ValueError("one measured log ratio per configuration seen")
    if runs == 0:
        return belief
    shape = np.shape(belief.centre)
    match = np.broadcast_to(np.asarray(match), shape)
    # each run's placement (0..C-1), and each asked configuration's among them or -1
    places, seen_cell = np.unique(place_key(seen.nodes, seen.workers), return_inverse=True)
    cell = lookup(places, np.broadcast_to(place_key(belief.nodes, belief.workers), shape))
    cells, floor2 = places.size, NOISE_FLOOR**2
    u_seen, v_seen = np.asarray(seen.place_sd, float), stray_sd(seen.noise_sd)
    wide, scale = (1.0, 1.0)
    if runs >= MIN_RUNS:
        wide, scale = _scales(load_seen, u_seen, v_seen, seen_cell, resid)
    # latents x = (z_g, z_t, p_1..p_C, q_1..q_J), each N(0, 1) a priori
    design = np.zeros((runs, 2 + cells + runs))
    design[:, :2] = wide * load_seen
    design[np.arange(runs), 2 + seen_cell] = scale * u_seen
    design[np.arange(runs), 2 + cells + np.arange(runs)] = scale * v_seen
    cov = np.linalg.inv(np.eye(design.shape[1]) + design.T @ design / floor2)
    mean = cov @ (design.T @ resid) / floor2
    s_zz, s_rz = cov[:2, :2], cov[2:, :2]
    lower = np.linalg.cholesky(0.5 * (s_zz + s_zz.T))
    beta = s_rz @ np.linalg.inv(s_zz)  # E[rest | z] = m_r + beta (z - m_z)
    rest = cov[2:, 2:] - beta @ s_rz.T  # what z leaves of the placements and strays
    # each asked configuration loads on its placement's p if run, and its own q if run itself
    u = scale * np.broadcast_to(np.asarray(belief.place_sd, float), shape)
    v = scale * stray_sd(np.broadcast_to(np.asarray(belief.noise_sd, float), shape))
    on_cell, hit = cell >= 0, match >= 0
    u_on, v_hit = np.where(on_cell, u, 0.0), np.where(hit, v, 0.0)
    ci, qi = np.maximum(cell, 0), cells + np.maximum(match, 0)
    load = wide * np.stack(
        [np.broadcast_to(belief.group_sd, shape), np.broadcast_to(belief.network_sd, shape)], -1
    )
    centre = np.broadcast_to(belief.centre, shape) + load @ mean[:2]
    centre = centre + u_on * mean[2:][ci] + v_hit * mean[2:][qi]
    through_z = load + u_on[..., None] * beta[ci] + v_hit[..., None] * beta[qi]
    left = u_on**2 * rest[ci, ci] + v_hit**2 * rest[qi, qi] + 2 * u_on * v_hit * rest[ci, qi]
    left = np.maximum(left, 0.0)
    # a run placement's p beyond z is shared by its batch sizes; the rest of ``left`` is own
    place = np.where(on_cell, np.sqrt(np.minimum(u_on**2 * rest[ci, ci], left)), u)
    own = np.where(hit, 0.0, v**2) + np.where(on_cell, left - place**2, 0.0)
    new_load = through_z @ lower
    return Belief(
        np.broadcast_to(belief.point, shape),
        centre,
        new_load[..., 0],
        new_load[..., 1],
        np.sqrt(floor2 + np.maximum(own, 0.0)),
        np.broadcast_to(belief.group, shape),
        np.broadcast_to(belief.network, shape),
        place,
        np.broadcast_to(belief.nodes, shape),
        np.broadcast_to(belief.workers, shape),
    )


def on_places(
    belief: Belief,
    seen: Belief,
    log_ratio: np.ndarray,
    seen_cell: np.ndarray,
    cell: np.ndarray,
    seen_parts: tuple[np.ndarray, np.ndarray],
    parts: tuple[np.ndarray, np.ndarray],
    gamma: float,
    exact: bool = True,
) -> tuple[Belief, np.ndarray | None]:
    """The belief about configurations on placements run within the fitted node counts, at
    batch sizes of their own, after the runs there.

    ``seen`` is the belief about the runs' configurations, ``log_ratio`` their measured
    log(T / T_hat), ``seen_cell`` each run's placement (0..C-1) and ``cell`` each asked
    configuration's among them or -1; ``seen_parts`` and ``parts`` the physics' (T_c, T_s)
    of each, ``gamma`` its overlap. The fit already holds the runs' shared errors (z_g, z_t:
    it was fitted on them), so what a placement's runs say beyond the fit is its own p_c. It
    acts through the network: a placement's hosts and links scale its sync time, which the
    batch size does not change, and the step follows through the overlap:

        T(p) = (T_c**gamma + (e**phi * T_s)**gamma) ** (1/gamma),  phi = (u_c / rms) * p
        r_j = y_j - c_j = log T_j(p_c) / T_hat_j + v_j q_j + n_j,  p_c ~ N(0, 1)

    with u_c the placement's loading (the root mean square of its runs' ``place_sd``), rms
    the root mean square of the runs' sync shares (so a step moves by about u p on average),
    v_j a run's own stray and n_j its noise. p_c is read by Laplace's method
    (``_place_modes``): its most likely value, its precision 1 + sum_j J_j**2 / (v_j**2 +
    floor**2) there, J_j = d log T_j / dp = (u_c / rms) * s_j(phi), s_j the sync share of
    the moved step (``physics.sync_share``). An asked configuration on c moves to
    log T_x(p_c) / T_hat_x and keeps J_x / sqrt(precision) as its placement's loading: a
    campaign whose 2-node runs all spent twice the physics in the network is believed so at
    a batch it did not run, its larger compute added to a network that slow (at a larger
    batch, as slow as its runs at smaller ones as far as they pin the factor). A
    configuration that was itself run (``place_sd`` 0 after ``_with_measured``) is unmoved.

    ``exact=False`` (model files before version 13) linearises at p = 0 with each
    configuration's own loading u: the step moves by J(0) p, one Gauss-Newton step, which
    is the conjugate Gaussian update those files made.

    Returns the belief and, exact, each asked configuration's log move of its point: the
    same update had every belief been centred on T_hat (0 off the run placements; None when
    not exact). The centre and a placement's factor trade one for one where the network
    holds the step, so read apart from the centre the runs land the point where they say and
    leave it at T_hat where the step is compute. One pass: the runs' setup and the asked
    configurations' physics serve both.
    """
    floor2 = NOISE_FLOOR**2
    seen_c, seen_s = (np.asarray(a, float) for a in seen_parts)
    rms = float(np.sqrt(np.mean(sync_share(seen_c, seen_s, gamma) ** 2)))
    if rms == 0.0:  # one worker everywhere: no network for a placement to move
        return belief, (np.zeros(np.shape(belief.centre)) if exact else None)
    per_p = np.asarray(seen.place_sd, float) / rms  # phi of each run per unit of p
    cells = int(np.max(seen_cell)) + 1
    if exact:  # one factor on a placement's sync at every batch: one scale per placement
        runs_on = np.bincount(seen_cell, minlength=cells)
        scale = np.sqrt(np.bincount(seen_cell, per_p**2, cells) / runs_on)
        per_p = scale[seen_cell]
    own = stray_sd(seen.noise_sd) ** 2 + floor2
    runs = (own, seen_c, seen_s, gamma, per_p, seen_cell, cells, exact)
    p, precision = _place_modes(np.asarray(log_ratio, float) - seen.centre, *runs)
    shape = np.shape(belief.centre)
    cell = np.broadcast_to(cell, shape)
    centre = np.array(np.broadcast_to(belief.centre, shape), dtype=float)
    place_sd = np.array(np.broadcast_to(belief.place_sd, shape), dtype=float)
    on = np.flatnonzero(cell >= 0)  # only these move: a search asks millions, few of them on
    at = cell.ravel()[on]
    t_c, t_s = (np.broadcast_to(a, shape).ravel()[on] for a in parts)
    x_per_p = place_sd.ravel()[on] / rms
    point = None
    if exact:  # its placement's scale; one that was run itself (0) stays unmoved
        x_per_p = np.where(x_per_p > 0, scale[at], 0.0)
        base = _log_overlap(t_c, t_s, gamma)
        share, moved = _through_overlap(t_c, t_s, gamma, x_per_p * p[at], base)
        slope = x_per_p * share
        p_point, _ = _place_modes(np.asarray(log_ratio, float), *runs)
        point = np.zeros(shape)
        point.reshape(-1)[on] = _through_overlap(t_c, t_s, gamma, x_per_p * p_point[at], base)[1]
    else:
        slope = x_per_p * sync_share(t_c, t_s, gamma)
        moved = slope * p[at]
    centre.reshape(-1)[on] += moved
    place_sd.reshape(-1)[on] = slope / np.sqrt(precision[at])
    return replace(belief, centre=centre, place_sd=place_sd), point


def _place_modes(
    target, own, t_c, t_s, gamma, per_p, cell, cells, exact
) -> tuple[np.ndarray, np.ndarray]:
    """Each placement's most likely p and the precision there (Laplace's method) for runs
    whose log(T / T_hat) less their centre is ``target``, with own variance ``own``, physics
    (``t_c``, ``t_s``) and phi = ``per_p`` * p on their placement ``cell`` (0..cells-1).
    Exact: Newton's step where the cost curves up, Gauss-Newton's elsewhere (runs their sync
    cannot reach leave residuals that flatten it), halved until it lowers the cost, until no
    placement moves. Not exact: one Gauss-Newton step from 0, the conjugate update of the
    linearised runs."""
    base = _log_overlap(t_c, t_s, gamma)

    def cost(p: np.ndarray) -> np.ndarray:  # each placement's -log posterior of p, + const
        with np.errstate(over="ignore", invalid="ignore"):  # a trial factor may overflow
            _, moved = _through_overlap(t_c, t_s, gamma, per_p * p[cell], base)
            return (p**2 + np.bincount(cell, (target - moved) ** 2 / own, cells)) / 2

    def derivatives(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The cost's gradient, its Gauss-Newton curvature (the precision) and its full
        curvature at p, per placement."""
        share, moved = _through_overlap(t_c, t_s, gamma, per_p * p[cell], base)
        slope, miss = per_p * share, target - moved
        grad = p - np.bincount(cell, slope * miss / own, cells)
        precision = 1.0 + np.bincount(cell, slope**2 / own, cells)
        # d slope / dp = per_p**2 * gamma * s (1 - s): the sync share's own growth with phi
        bend = np.bincount(cell, miss * per_p**2 * gamma * share * (1 - share) / own, cells)
        return grad, precision, precision - bend

    p = np.zeros(cells)
    grad, precision, curvature = derivatives(p)
    if not exact:
        return -grad / precision, precision
    now = cost(p)
    for _ in range(_PLACE_STEPS):
        step = -grad / np.where(curvature > 0, curvature, precision)
        for _ in range(_HALVINGS + 1):
            trial = cost(p + step)
            worse = ~(trial <= now)  # an overflowing factor (nan, inf) is worse
            if not worse.any():
                break
            step = np.where(worse, step / 2, step)
        step = np.where(worse, 0.0, step)
        if not step.any():  # settled: no placement's step lowers its cost
            break
        p, now = p + step, np.where(worse, now, trial)
        grad, precision, curvature = derivatives(p)
    return p, precision


# Newton steps for a placement's p (one unknown each), each halved up to _HALVINGS times
# until it lowers the cost: from p = 0 they settle within a few; more change nothing a run
# could tell
_PLACE_STEPS = 12
_HALVINGS = 20


def _log_overlap(t_c, t_s, gamma) -> np.ndarray:
    """log T of steps with parts (``t_c``, ``t_s``), never -inf."""
    return np.log(np.maximum(overlap(t_c, t_s, gamma), 1e-300))


def _through_overlap(t_c, t_s, gamma, phi, base) -> tuple[np.ndarray, np.ndarray]:
    """Of steps whose sync time is scaled by e**phi: the sync share of the moved step
    (d log T / d phi) and log T(phi) / T(0) (``base``: log T(0), ``_log_overlap``)."""
    moved_s = np.exp(phi) * t_s
    moved = np.maximum(overlap(t_c, moved_s, gamma), 1e-300)
    return np.minimum(moved_s / moved, 1.0) ** gamma, np.log(moved) - base


def place_key(nodes, workers) -> np.ndarray:
    """One integer per (nodes, workers), 42 bits (each below 2**21: contracts cap them at a
    million), so a group label or a local batch fits above or below it."""
    k, n = (np.minimum(np.asarray(a, float).astype(np.int64), 2**21 - 1) for a in (nodes, workers))
    return (k << 21) | n


def lookup(known: np.ndarray, asked: np.ndarray) -> np.ndarray:
    """For each of ``asked`` (integer keys, any shape), its position in ``known`` (keys,
    unique), or -1: a sorted search, no Python loop (a search asks about a million)."""
    known = np.asarray(known)
    if known.size == 0:
        return np.full(np.shape(asked), -1)
    order = np.argsort(known)
    at = np.clip(np.searchsorted(known[order], asked), 0, known.size - 1)
    return np.where(known[order][at] == asked, order[at], -1)


def _scales(load, place, stray, cell, resid) -> tuple[float, float]:
    """The factors (each at least 1) on the runs' shared loadings A and on their strays
    (placement part u, own part v) under which their residuals are most likely:

        resid ~ N(0, k_a^2 A A' + k_s^2 (U_cell + diag(v^2)) + floor^2 I)

    U_cell[i, j] = u_i u_j on one placement. Several runs beyond the fit show how far this
    network and its configurations stray there; the fit only saw within."""
    loads = load @ load.T
    same = cell[:, None] == cell[None, :]
    strays = np.outer(place, place) * same + np.diag(stray**2)
    floor = NOISE_FLOOR**2 * np.eye(resid.size)

    def cost(log_k: np.ndarray) -> float:
        k_a, k_s = np.exp(2 * log_k)
        factor = cho_factor(k_a * loads + k_s * strays + floor)
        return float(np.sum(np.log(np.diag(factor[0]))) + resid @ cho_solve(factor, resid) / 2)

    top = np.log(MAX_SCALE)
    best = minimize(cost, np.full(2, 0.1), method="L-BFGS-B", bounds=[(0.0, top)] * 2)
    return float(np.exp(best.x[0])), float(np.exp(best.x[1]))


def stray_sd(noise_sd: np.ndarray) -> np.ndarray:
    """The persistent part of each configuration's independent error: what its e(x) holds
    beyond a run's own noise (the noise floor), sqrt(e^2 - floor^2), 0 where none."""
    noise_sd = np.asarray(noise_sd, float)
    return np.sqrt(np.maximum(noise_sd**2 - NOISE_FLOOR**2, 0.0))


FIELDS = (
    "point",
    "centre",
    "group_sd",
    "network_sd",
    "noise_sd",
    "group",
    "network",
    "place_sd",
    "nodes",
    "workers",
)


def concat(beliefs: list[Belief]) -> Belief:
    """One belief of the configurations of several (labels must already be distinct)."""
    if not beliefs:
        empty = np.zeros(0)
        return Belief(empty, empty, empty, empty, empty, empty.astype(int), empty.astype(int))
    return Belief(*(np.concatenate([getattr(b, f) for b in beliefs]) for f in FIELDS))


def from_offsets(
    point: np.ndarray,
    full: tuple[np.ndarray, np.ndarray],
    within: tuple[np.ndarray, np.ndarray],
    group: int,
    network: int,
    level: float = READ_LEVEL,
    stray: float | np.ndarray = 0.0,
    own: float | np.ndarray = 0.0,
    share: float = 0.0,
    nodes: np.ndarray | None = None,
    workers: np.ndarray | None = None,
) -> Belief:
    """A belief from an interval's log offsets (down, up) read at ``level``: ``full`` with
    the network's move beyond the measured node counts, ``within`` without it.

    The centre is the middle of the full interval, the total sd its half-width over z. Each
    configuration's own part (independent of the others) is the noise floor and its stray:
    the larger of ``stray`` (its stray from the network's move, beyond the measured node
    counts) and ``own`` (how far the group's measured configurations scatter about its fit,
    log sd beyond the floor; per configuration for a carried fit: what one measured step
    would leave of its error). The network's loading is what the move adds in quadrature less
    the stray it brings; the rest of the within spread is the group's shared error. How the
    variance is split does not change a configuration's marginal; it decides how much one
    measured run says about the others (``condition``, ``observe``). ``share`` of the stray's
    variance is its placement's (``nodes``, ``workers``), shared by every batch size run on
    it (``GroupFit.placement_share``).
    """
    z = two_sided_z(level)
    down, up = (np.asarray(a, float) for a in full)
    down0, up0 = (np.asarray(a, float) for a in within)
    centre = (up - down) / 2.0
    sd = np.maximum((up + down) / (2.0 * z), NOISE_FLOOR)
    sd_within = np.minimum(np.maximum((up0 + down0) / (2.0 * z), NOISE_FLOOR), sd)
    # no configuration's own part is wider than its whole within spread
    own = np.minimum(
        np.asarray(own, float), np.sqrt(np.maximum(sd_within**2 - NOISE_FLOOR**2, 0.0))
    )
    stray = np.maximum(np.asarray(stray, float), own)
    network_sd = np.sqrt(np.maximum(sd**2 - sd_within**2 - (stray**2 - own**2), 0.0))
    group_sd = np.sqrt(np.maximum(sd_within**2 - NOISE_FLOOR**2 - own**2, 0.0))
    share = float(np.clip(share, 0.0, 1.0))
    noise = np.sqrt(NOISE_FLOOR**2 + (1.0 - share) * stray**2) * np.ones(np.shape(sd))
    n = np.shape(point)
    return Belief(
        np.asarray(point, float),
        np.broadcast_to(centre, n).astype(float),
        np.broadcast_to(group_sd, n).astype(float),
        np.broadcast_to(network_sd, n).astype(float),
        np.broadcast_to(noise, n).astype(float),
        np.full(n, group, dtype=np.int64),
        np.full(n, network, dtype=np.int64),
        np.broadcast_to(np.sqrt(share) * stray, n).astype(float),
        None if nodes is None else np.broadcast_to(nodes, n),
        None if workers is None else np.broadcast_to(workers, n),
    )


@dataclass
class Draws:
    """Joint draws of run-mean step times of a configurations table (``predict_draws``)."""

    configs: pd.DataFrame  # the configurations, one row per column of ``values``
    values: np.ndarray  # (draws, configurations) seconds

    @property
    def mean(self) -> np.ndarray:
        """Mean step time of each configuration over the draws."""
        return self.values.mean(axis=0)

    def interval(self, level: float = 0.9) -> pd.DataFrame:
        """The central ``level`` interval of each configuration, as columns lower/upper."""
        check_level(level)
        lo, hi = np.quantile(self.values, [(1 - level) / 2, (1 + level) / 2], axis=0)
        return pd.DataFrame({"lower": lo, "upper": hi}, index=self.configs.index)

    def prob_below(self, t: float | np.ndarray) -> np.ndarray:
        """Share of draws at or under ``t`` (seconds; broadcast over configurations).

        Raises:
            InputError: ``t`` is not a number (or array of numbers), or is NaN, where a
                share of 0 would read as an answer (a NaN deadline, say, from a table's
                empty cell).
        """
        try:
            seconds = np.asarray(t, float)
        except (TypeError, ValueError) as err:
            raise InputError(
                f"t must be seconds: a number or an array of numbers, got {t!r}",
                fix="e.g. draws.prob_below(0.5)",
            ) from err
        if np.isnan(seconds).any():
            raise InputError(
                "t is NaN: no share of draws lies under it",
                fix="give the step time in seconds to compare the draws with",
            )
        return np.mean(self.values <= seconds, axis=0)

    def summary_frame(self, level: float = 0.9) -> pd.DataFrame:
        """configs plus mean, median and the interval ends at ``level`` (statsmodels' shape)."""
        out = self.configs.copy()
        out["mean"] = self.mean
        out["median"] = np.median(self.values, axis=0)
        ends = self.interval(level)
        out["lower"], out["upper"] = ends["lower"].to_numpy(), ends["upper"].to_numpy()
        return out


# --- beliefs about a carried type's factors ---------------------------------------------


@dataclass
class LogBeliefs:
    """Gaussian belief about the logs of named multiplicative factors."""

    names: tuple[str, ...]
    mean: np.ndarray  # log of each factor's median
    cov: np.ndarray  # covariance of the logs

    @classmethod
    def prior(cls, **median_and_sd: tuple[float, float]) -> LogBeliefs:
        """Independent lognormal priors, each given as (median, log-sd)."""
        names = tuple(median_and_sd)
        mean = np.log([float(median_and_sd[k][0]) for k in names])
        sd = np.array([float(median_and_sd[k][1]) for k in names])
        return cls(names, mean, np.diag(sd**2))

    def index(self, name: str) -> int:
        """Position of ``name`` in ``mean``."""
        return self.names.index(name)

    def sd(self, name: str) -> float:
        """Marginal log-sd of one factor."""
        i = self.index(name)
        return float(np.sqrt(self.cov[i, i]))

    def log_sd(self, grads: list[np.ndarray]) -> np.ndarray:
        """sd of a log quantity whose gradient in the logs is ``grads`` (delta method)."""
        var = 0.0
        for i, gi in enumerate(grads):
            var = var + gi * gi * self.cov[i, i]
            for j in range(i):
                var = var + 2.0 * gi * grads[j] * self.cov[i, j]
        return np.sqrt(var)

    def observed(self, grad: np.ndarray, noise_sd: float) -> LogBeliefs:
        """The belief after one observation, at its median, of a log quantity whose gradient
        in the logs is ``grad`` (one value per factor), with noise sd ``noise_sd``: the
        linear-Gaussian posterior, cov - cov g g' cov / (g' cov g + noise_sd^2), which is
        ``update``'s for such an observation without its optimisation (the mean stays)."""
        g = np.asarray(grad, float)
        lean = self.cov @ g
        cov = self.cov - np.outer(lean, lean) / (g @ lean + noise_sd**2)
        return LogBeliefs(self.names, self.mean, 0.5 * (cov + cov.T))

    def update(self, residuals: Callable[[np.ndarray], np.ndarray], noise_sd: float) -> LogBeliefs:
        """Posterior after data whose ``residuals(log_factors)`` are N(0, noise_sd**2)."""
        if residuals(self.mean).size == 0:
            return self
        chol = cho_factor(self.cov, lower=True)
        lower = np.tril(chol[0])

        def stacked(theta: np.ndarray) -> np.ndarray:
            prior = solve_triangular(lower, theta - self.mean, lower=True)
            return np.concatenate([residuals(theta) / noise_sd, prior])

        sol = least_squares(stacked, self.mean, jac="3-point")
        precision = sol.jac.T @ sol.jac
        cov = cho_solve(cho_factor(precision), np.eye(len(self.names)))
        return LogBeliefs(self.names, sol.x, 0.5 * (cov + cov.T))
