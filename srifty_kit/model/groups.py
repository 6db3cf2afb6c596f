"""What was learned for one training model on one instance type, and how it predicts.

``GroupFit`` holds the fitted constants, the calibrated spread and the batch correction of a
group; ``borrow`` fills the terms a group could not identify from groups on the same machine.
A group predicts

    T_hat(x) = step_time(params, x) with compute times exp(corr(b))   (physics, fit)
    [lo, hi] = T_hat(x) * exp([-down(x), up(x)])                      (intervals.Spread)

and, where x itself was measured with run mean y (``measured``), believes its level
theta | y ~ N(c + V / (V + s**2) (y - c), V s**2 / (V + s**2)), s the noise floor and
V = max(V_fit, (y - c)**2 - s**2) the most likely V, at least the fit's: a run far off the
fit is believed where it lies. Another batch size of a measured placement is conditioned on
that placement's runs (``posterior.on_places``): their sync scaled by one factor, which the
batch does not change, and the asked batch's own compute added through the overlap,

    T(x) = (T_c(x)**gamma + (e**phi_c * T_s(x))**gamma) ** (1/gamma)

its point the conditioned median had every belief been centred on T_hat; beyond the batches
run there it strays on its own by how far:

    e(x)^2 += (s_b * max(d(x), 1))^2      d > 0: doublings of b beyond the batches run there

s_b learned from batch folds (each placement's largest, then smallest, batch held out). Runs
beyond the fitted node counts (``probes``: node counts measured at one worker count,
``holdout.probe_rows``) are not fitted; every configuration beyond those node counts is
conditioned on them jointly through the errors it shares with them (``posterior.observe``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from scipy.stats import median_abs_deviation

from srifty_kit.model import intervals, posterior
from srifty_kit.model.fit import NOISE_FLOOR, BatchCorrection
from srifty_kit.model.holdout import predict_rows
from srifty_kit.model.physics import (
    INTER_TERMS,
    INTRA_TERMS,
    StepParams,
    max_per_node,
    step_time,
    sync_share,
    underlap,
)
from srifty_kit.model.transfer import TransferFit

# the model-file version whose way of reading the runs a new fit keeps; the file version
# (persist.VERSION) is this number, so a change to how runs are read bumps both at once
PREDICTS = 13

# how much wider intervals get where a regime's terms were borrowed from other training models
# or fixed by assumption rather than fitted (a factor on the log half-width)
BORROWED_WIDEN = 3.0


@dataclass
class GroupFit:
    """What was learned for one training model on one instance type."""

    params: StepParams
    spread: intervals.Spread  # calibrated on held-out-scale folds (see intervals)
    max_nodes: int  # largest fitted configuration: extrapolation is measured from here
    max_workers: int
    structure: str = "full"
    loss: str = "relative"  # the step-time residual it was fitted with (fit.Fixed.loss)
    cv_error: float = float("nan")  # mean |log(observed/predicted)| on held-out scales
    n_configs: int = 0
    fixed: dict[str, str] = field(default_factory=dict)  # term -> why it was not fitted
    widen: dict[str, float] = field(default_factory=dict)  # regime -> interval factor
    correction: BatchCorrection | None = None  # learned per-batch compute factor (batch_correction)
    # configuration means it was fitted on: rows of (nodes, workers, local_bsz, log step time)
    measured: np.ndarray | None = None
    # the model-file version whose reading of the measured runs it keeps (``from_runs``,
    # ``from_places``, ``sizes_runs``, ``moves_places``): a file loads with its own (persist),
    # so it predicts what it did; a new fit reads them as this release does
    predicts_as: int = PREDICTS
    # s_b: log sd a batch size beyond those run on a measured placement adds, per doubling
    # beyond them (at least one doubling's):
    #     e(x)^2 += (s_b * max(d(x), 1))^2,  d = doublings of b beyond the batches run there
    # learned from batch folds (``holdout.batch_folds``) pooled over the network's models
    # (``StepTimeModel.fit``); 0 before version 11, and where too few folds were scored
    batch_sd: float = 0.0

    @property
    def from_runs(self) -> bool:
        """A measured configuration is predicted from its own run (model files before
        version 9 predicted the fitted physics there, and still do)."""
        return self.predicts_as >= 9

    @property
    def from_places(self) -> bool:
        """Another batch size of a measured placement is predicted from that placement's runs
        (files before version 10 predicted the physics there, and still do)."""
        return self.predicts_as >= 10

    @property
    def sizes_runs(self) -> bool:
        """A measured configuration whose run lies further off the fit than its spread says
        is believed where its run lies: the spread is sized to the run (``_with_measured``);
        files before version 12 kept the fit's, and still do."""
        return self.predicts_as >= 12

    @property
    def moves_places(self) -> bool:
        """Another batch size of a measured placement moves with its placement's runs through
        the overlap, its sync scaled as theirs was (``posterior.on_places``); files before
        version 13 moved it by its physics' sync share of their shift, and still do."""
        return self.predicts_as >= 13

    def predict(
        self, num_nodes, num_workers, local_bsz, per_node, level: float, beliefs: tuple = ()
    ) -> dict:
        """Point, interval and breakdown (numpy broadcasting); given ``beliefs`` = (group
        label, network label), also ``"belief"``: the ``posterior.Belief`` read from the same
        interval (one evaluation of the physics for both).

        A configuration that was measured is believed from its run (``_with_measured``),
        another batch size of a measured placement from that placement's runs (``_placed``),
        and configurations beyond the fitted node counts are conditioned on the runs measured
        there (``probes``): the interval of each is the conditioned belief's at ``level``
        and its point the conditioned median of a belief centred on T_hat (T_hat where the
        runs say nothing, the measured mean where they pin it). So ``predict`` says what the
        search believes; ``physics`` is the fit alone."""
        k, n, b = np.asarray(num_nodes), np.asarray(num_workers), np.asarray(local_bsz)
        shape = np.broadcast_shapes(np.shape(k), np.shape(n), np.shape(b))
        inside, probes = self.in_core, self.probes
        # each asked placement's key, once: the runs' lookups and the probes' read it
        place = _place_keys(k, n, shape) if inside.size or probes.size else None
        match, runs, cell, seen, placed = self._where_measured(place, b, shape, (k, n, per_node))
        asked = beliefs or ((0, 0) if seen.any() or placed.any() else ())
        out, belief = self._physics(k, n, b, per_node, level, asked)
        if belief is None:
            return out
        moved = seen | placed | ((k > self.max_nodes) if probes.size else False)
        moved = np.broadcast_to(moved, np.shape(belief.centre))
        if moved.any():
            # a conditioned belief is one Gaussian whatever the level asked: it reads the fit's
            # interval at the calibration's own level, so its intervals nest as the level rises
            read = posterior.READ_LEVEL
            prior = belief if level == read else self._physics(k, n, b, per_node, read, asked)[1]
            after = prior  # T_hat sits off its median (above where the fit erred low held out)
            if seen.any():
                after = _with_measured(after, inside, match, self.sizes_runs)
            shift = None  # a placed point's own move (files of version 13 on)
            if placed.any():
                after, shift = self._placed(after, out, runs, cell)
            if probes.size:
                after = self._observe(after, place, b, k > self.max_nodes, read, beliefs)
            # the point is the conditioned median had the belief been centred on T_hat: the
            # prior's centre weighs V_after / V_before in a Gaussian update, so T_hat stays
            # where the runs say nothing and goes to the run where they pin it (a shift by the
            # centre's move alone left a probed point below its own interval)
            weight = np.minimum(np.square(after.sd / np.maximum(prior.sd, 1e-150)), 1.0)
            moves = np.exp(after.centre - weight * prior.centre)
            if shift is not None:
                moves = np.where(placed, np.exp(shift), moves)
            if placed.any() and self.batch_sd > 0:  # widens about the same point
                after = self._batch_moved(after, runs, cell, b)
            lo, hi = after.interval(level)
            point = out["step_time_s"] * moves
            compute, sync = self._breakdown(point, out["compute_s"], out["sync_s"], moves)
            for name, value in (("step_time_s", point), ("step_time_lo", lo),
                                ("step_time_hi", hi), ("compute_s", compute),
                                ("sync_s", sync)):  # fmt: skip
                out[name] = np.where(moved, value, out[name])
            belief = posterior.Belief(
                *(np.where(moved, getattr(after, f), getattr(belief, f)) for f in posterior.FIELDS)
            )
        if beliefs:
            out["belief"] = belief
        return out

    def _breakdown(self, point, t_c, t_s, moves) -> tuple[np.ndarray, np.ndarray]:
        """Compute and sync of steps the runs moved to ``point`` off the physics' (``t_c``,
        ``t_s``) by the factor ``moves``: parts that explain the step. From version 13 what
        the runs moved is the network's where a step has one and is no faster than its
        compute alone: the compute stays the physics', the sync takes the rest through the
        overlap (a placement's hosts and links set its network time; on_places reads them
        so). Elsewhere, and in older files, both parts scale with the step."""
        compute, sync = t_c * moves, t_s * moves
        if not self.moves_places:
            return compute, sync
        netted = (t_s > 0) & (point >= t_c)
        rest = underlap(point, t_c, self.params.gamma)
        return np.where(netted, t_c, compute), np.where(netted, rest, sync)

    def routes(self, num_nodes, num_workers, local_bsz, per_node=None) -> np.ndarray:
        """How ``predict`` reaches each configuration, in words (``StepTimeModel.explain``):
        "its own run" where it was measured, "its placement's runs" at another batch size
        of nodes and workers measured within the fitted node counts, "the fitted physics +
        N probe run(s)" beyond them where runs were made there, else "the fitted physics".
        ``per_node`` (the busiest node's workers; default the even spread) as ``predict``:
        an uneven placement is read from the physics, never from the even spread's runs."""
        k, n, b = np.broadcast_arrays(*(np.asarray(a) for a in (num_nodes, num_workers, local_bsz)))
        per_node = max_per_node(k, n) if per_node is None else per_node
        out = np.full(k.shape, "the fitted physics", dtype=object)
        probes = self.probes
        if probes.size:
            runs = f"{len(probes)} probe run{'s' if len(probes) > 1 else ''}"
            out[k > self.max_nodes] = f"the fitted physics + {runs}"
        _, _, _, seen, placed = self._where_measured(
            _place_keys(k, n), b, k.shape, (k, n, per_node)
        )
        out[placed] = "its placement's runs"
        out[seen] = "its own run"
        return out

    def physics(self, num_nodes, num_workers, local_bsz, per_node, level: float) -> dict:
        """The fit alone: point, interval and breakdown of the fitted physics and its
        calibrated spread, measured or not (how well the model describes the measurements,
        where ``predict`` would return the runs themselves)."""
        return self._physics(num_nodes, num_workers, local_bsz, per_node, level)[0]

    @property
    def in_core(self) -> np.ndarray:
        """Measured configuration means within the fitted node counts: rows of (nodes,
        workers, local batch, log mean step); ``predict`` believes each at its run."""
        if self.measured is None:
            return np.zeros((0, 4))
        return self.measured[self.measured[:, 0] <= self.max_nodes]

    @property
    def probes(self) -> np.ndarray:
        """Measured configuration means beyond the fitted node counts (``holdout.probe_rows``):
        rows of (nodes, workers, local batch, log mean step); the fit conditions on them."""
        if self.measured is None:
            return np.zeros((0, 4))
        return self.measured[self.measured[:, 0] > self.max_nodes]

    def _where_measured(self, place, b, shape: tuple, spread=None) -> tuple:
        """Where the asked configurations (placement keys ``place``, local batches ``b``,
        broadcast to ``shape``) meet the runs within the fitted node counts, as this fit
        reads them: ``match`` (each one's run among ``in_core`` or -1), ``runs`` (each run's
        placement, 0..C-1), ``cell`` (the placement of each one ``placed``, else -1), ``seen``
        (believed from its own run) and ``placed`` (another batch of a measured placement,
        believed from that placement's runs). The first three are None without runs.
        ``spread`` (nodes, workers, busiest node's workers; default: every one even) says
        which spread their workers evenly: the runs kept are the even spread's
        (``_measured_means``), so an uneven one (1 + 3 workers on 2 nodes) is never "its own
        run" of the 2 x 2 run; it is ``placed``, its own physics moved by what the runs on
        those nodes and workers showed. Read only where there are runs (the search's hot
        path mostly has none)."""
        inside, none = self.in_core, np.zeros(shape, bool)
        if not inside.size:
            return None, None, None, none, none
        match = _match(inside, place, b)
        if spread is not None:
            match = np.where(_is_even(*spread, shape), match, -1)
        seen = match >= 0 if self.from_runs else none
        if not self.from_places:
            return match, None, None, seen, none
        known, runs = np.unique(_place_keys(inside[:, 0], inside[:, 1]), return_inverse=True)
        cell = posterior.lookup(known, place)
        placed = (cell >= 0) & ~seen
        return match, runs.ravel(), np.where(placed, cell, -1), seen, placed

    def _placed(self, belief, out, runs, cell) -> tuple[posterior.Belief, np.ndarray | None]:
        """``belief`` with each configuration on a placement measured within the fitted node
        counts (``cell``: its row among those placements, or -1; ``runs``: each measured
        configuration's) conditioned on that placement's runs at the batch sizes measured,
        through the network's part of the step (``posterior.on_places``; ``out``: the asked
        configurations' physics, whose parts are read only where ``cell`` is set); and, from
        version 13, the log move of their point (``posterior.on_places``; None before,
        where the point reads the prior's weight instead)."""
        inside = self.in_core
        k, n, b = (inside[:, i] for i in range(3))
        ran, seen = self._physics(k, n, b, max_per_node(k, n), posterior.READ_LEVEL, (0, 0))
        return posterior.on_places(
            belief,
            seen,
            inside[:, 3] - np.log(seen.point),
            runs,
            cell,
            (ran["compute_s"], ran["sync_s"]),
            (out["compute_s"], out["sync_s"]),
            self.params.gamma,
            self.moves_places,
        )

    def _batch_moved(self, belief, runs, cell, local_bsz) -> posterior.Belief:
        """``belief`` with the own stray of each configuration on a measured placement
        (``cell``, as in ``_placed``) at a batch beyond those run there widened by how far:
        e^2 + (s_b * max(d, 1))^2 (``batch_sd``). Between two batches run there the band is
        kept: held out there, it already covers what it states (``model_accuracy.py``)."""
        shape = np.shape(belief.centre)
        on = np.flatnonzero(np.broadcast_to(cell, shape) >= 0)  # only these can widen
        at = (np.broadcast_to(a, shape).ravel()[on] for a in (cell, local_bsz))
        d = _beyond_batches(self.in_core[:, 2], runs, *at)
        noise = np.array(np.broadcast_to(belief.noise_sd, shape), dtype=float)
        flat = noise.reshape(-1)  # a view: the copy above is contiguous
        flat[on] = np.where(d > 0, np.hypot(flat[on], self.batch_sd * np.maximum(d, 1.0)), flat[on])
        return replace(belief, noise_sd=noise)

    def batch_scores(self, held: np.ndarray) -> np.ndarray:
        """How much wider each held-out configuration's belief had to be: for rows of (nodes,
        workers, local batch, log mean step) on placements this fit measured at other batch
        sizes, the s_b (``batch_sd``) that puts each inside its ``posterior.READ_LEVEL``
        interval, the smallest s >= 0 with

            |y - log T_hat - c| <= z * sqrt(sd^2 + (s * max(d, 1))^2)    (d > 0 here)

        (c, sd: its belief from the placement's runs). Their conformal quantile is s_b."""
        k, n, b = (held[:, i] for i in range(3))
        read = posterior.READ_LEVEL
        belief = replace(self, batch_sd=0.0).predict(k, n, b, max_per_node(k, n), read, (0, 0))
        belief = belief["belief"]
        miss = (held[:, 3] - np.log(belief.point) - belief.centre) / intervals.two_sided_z(read)
        need = np.sqrt(np.maximum(miss**2 - belief.sd**2, 0.0))
        _, runs, cell, _, _ = self._where_measured(_place_keys(k, n), b, np.shape(k))
        return need / np.maximum(_beyond_batches(self.in_core[:, 2], runs, cell, b), 1.0)

    def _observe(self, belief, place, b, beyond, level, beliefs) -> posterior.Belief:
        """``belief`` conditioned jointly on the probes' runs (``posterior.observe``), for
        the configurations ``beyond`` the fitted node counts; those within keep theirs
        (``place``: each asked configuration's placement key, ``b`` its local batch)."""
        probes = self.probes
        pk, pn, pb = (probes[:, i] for i in range(3))
        _, seen = self._physics(pk, pn, pb, max_per_node(pk, pn), level, beliefs or (0, 0))
        shape = np.shape(belief.centre)
        match = _match(probes, place, b)
        after = posterior.observe(belief, seen, probes[:, 3] - np.log(seen.point), match)
        beyond = np.broadcast_to(beyond, shape)
        return posterior.Belief(
            *(np.where(beyond, getattr(after, f), np.broadcast_to(getattr(belief, f), shape))
              for f in posterior.FIELDS)
        )  # fmt: skip

    def _physics(
        self, num_nodes, num_workers, local_bsz, per_node, level: float, beliefs: tuple = ()
    ) -> tuple[dict, posterior.Belief | None]:
        """The fitted physics and its calibrated interval; the belief read from that interval
        when ``beliefs`` are given or the group has probes to condition on, else None."""
        factor = 1.0 if self.correction is None else self.correction.factor(local_bsz)
        total, t_c, t_s = step_time(
            self.params, num_nodes, num_workers, local_bsz, per_node, compute_factor=factor
        )
        k, n = np.asarray(num_nodes), np.asarray(num_workers)
        dist, doublings = intervals.extrapolation(k, n, self.max_nodes, self.max_workers)
        share = sync_share(t_c, t_s, self.params.gamma)
        down, up = self.spread.offsets(level, share, dist, doublings)
        if self.widen:  # borrowed terms (rare): the search's hot path skips this otherwise
            widen = np.where(k > 1, self.widen.get("inter", 1.0), 1.0)
            widen = widen * np.where((k == 1) & (n > 1), self.widen.get("intra", 1.0), 1.0)
            down, up = down * widen, up * widen
        lo, hi = total * np.exp(-down), total * np.exp(up)
        out = {
            "step_time_s": total,
            "step_time_lo": lo,
            "step_time_hi": hi,
            "compute_s": t_c,
            "sync_s": t_s,
        }
        if not beliefs and not self.probes.size:
            return out, None
        # the same offsets read as a Gaussian: the network's part separated
        within = self.spread.offsets(level, share, np.where(doublings > 0, 1.0, dist), 0.0)
        if self.widen:
            within = (within[0] * widen, within[1] * widen)
        # a configuration's own stray at a new node count is its own, not the network's
        node = self.spread.node
        stray = np.where(doublings > 0, node.scatter, 0.0) if node is not None else 0.0
        belief = posterior.from_offsets(
            total,
            (down, up),
            within,
            *(beliefs or (0, 0)),
            level=level,
            stray=stray,
            own=self.own_scatter(),
            share=self.placement_share(),
            nodes=k,
            workers=n,
        )
        return out, belief

    def own_scatter(self) -> float:
        """How far the measured configurations within the fitted node counts scatter about
        the fit: log sd beyond the noise floor, from the robust sd (normal-scaled MAD) of their
        log(mean / T_hat); 0 with fewer than 3. A configuration's own, not shared: the part of
        the group's spread one run of another configuration says nothing about."""
        _, resid = self._in_core_residuals()
        if resid.size < 3:
            return 0.0
        sd = float(median_abs_deviation(resid, scale="normal"))
        return float(np.sqrt(max(sd**2 - NOISE_FLOOR**2, 0.0)))

    def placement_share(self) -> float:
        """The share of a configuration's own stray that its placement (nodes, workers) holds,
        shared by every batch size run there: between-placement over total variance of the
        measured configurations' log(mean / T_hat) within the fitted node counts (one-way
        analysis of variance, each part unbiased). 0 (every stray its own, as before this
        was learned) when fewer than two placements were measured at two or more batches.

        It decides how much a sweep of batch sizes on one placement beyond the fit says about
        the network: with share 1 all of them are one placement's evidence, with 0 each is
        independent (``posterior.observe``)."""
        places, resid = self._in_core_residuals()
        if resid.size == 0:
            return 0.0
        _, idx, size = np.unique(places, axis=0, return_inverse=True, return_counts=True)
        idx = idx.ravel()
        if np.sum(size >= 2) < 2:
            return 0.0
        means = np.bincount(idx, resid) / size
        within = float(np.sum((resid - means[idx]) ** 2) / (resid.size - size.size))
        total = float(np.var(resid, ddof=1))
        return float(np.clip(1.0 - within / total, 0.0, 1.0)) if total > 0 else 0.0

    def _in_core_residuals(self) -> tuple[np.ndarray, np.ndarray]:
        """Placement (nodes, workers) and log(mean / T_hat) of each measured configuration
        within the fitted node counts (empty without measurements)."""
        inside = self.in_core
        if not inside.size:
            return np.zeros((0, 2)), np.zeros(0)
        k, n, b = (inside[:, i] for i in range(3))
        factor = 1.0 if self.correction is None else self.correction.factor(b)
        total, _, _ = step_time(self.params, k, n, b, max_per_node(k, n), compute_factor=factor)
        return inside[:, :2], inside[:, 3] - np.log(total)


def _with_measured(
    belief: posterior.Belief, measured: np.ndarray, match: np.ndarray, sized: bool = True
) -> posterior.Belief:
    """The belief where a configuration was measured, given its measured mean y:

        theta ~ N(c, V)            the configuration's own level, as the fit believes it
                                   (its shared errors and its own stray)
        y = theta + e_old          the measured run;  a new run = theta + e_new
        e ~ N(0, floor**2)         run to run (the noise floor)

    so theta | y ~ N(c + V / (V + floor**2) (y - c), V floor**2 / (V + floor**2)), and a new
    run adds its own noise. Where the fit is sure (V small) the measurement moves it little;
    where the physics strays from a measured configuration, the measurement wins. ``match``
    is each configuration's row in ``measured`` or -1 (``_match``).

    ``sized``: V is taken as at least the V under which the run is most likely,

        V' = max(V, (y - c)^2 - floor^2)

    so a run far further off the fit than its band said (a campaign's odd placement, a
    fit that misses one regime) is believed near where it lies, not halfway between; files
    before version 12 kept V and still do.
    """
    shape = np.shape(belief.centre)
    flat = np.broadcast_to(np.asarray(belief.point), shape)
    match = np.broadcast_to(match, shape)
    seen = match >= 0
    if not seen.any():
        return belief
    y = np.where(seen, measured[np.maximum(match, 0), 3] - np.log(flat), 0.0)
    level = belief.group_sd**2 + belief.network_sd**2 + belief.place_sd**2
    level = level + posterior.stray_sd(belief.noise_sd) ** 2
    if sized:
        level = np.maximum(level, np.square(y - belief.centre) - NOISE_FLOOR**2)
    gain = level / np.maximum(level + NOISE_FLOOR**2, 1e-300)
    return replace(
        belief,
        centre=np.where(seen, belief.centre + gain * (y - belief.centre), belief.centre),
        group_sd=np.where(seen, np.sqrt(level * (1.0 - gain)), belief.group_sd),
        network_sd=np.where(seen, 0.0, belief.network_sd),
        place_sd=np.where(seen, 0.0, belief.place_sd),
        noise_sd=np.where(seen, NOISE_FLOOR, belief.noise_sd),
    )


def _is_even(k, n, per_node, shape: tuple) -> np.ndarray:
    """Whether each asked configuration spreads its workers evenly (its busiest node holds
    ``max_per_node``), broadcast to ``shape`` (``GroupFit._where_measured``)."""
    return np.broadcast_to(np.asarray(per_node) == max_per_node(k, n), shape)


def _match(measured: np.ndarray, place: np.ndarray, b) -> np.ndarray:
    """For each asked configuration (its placement key ``place``, ``_place_keys``, and local
    batch ``b`` broadcast to it), its row in ``measured`` (rows of nodes, workers, local
    batch, ...), or -1 (``posterior.lookup``)."""
    known = _config_key(_place_keys(measured[:, 0], measured[:, 1]), measured[:, 2])
    return posterior.lookup(known, _config_key(place, np.broadcast_to(b, np.shape(place))))


def _beyond_batches(run_bsz, runs: np.ndarray, cell: np.ndarray, local_bsz) -> np.ndarray:
    """How many doublings each asked local batch lies beyond the batches run on its placement
    (``cell``, the placement's index in ``runs``, each run's): log2 of it over the largest run
    there, or of the smallest over it; 0 between them and where ``cell`` is -1."""
    cells = int(np.max(runs)) + 1
    log_b = np.log2(run_bsz)
    top, low = np.full(cells, -np.inf), np.full(cells, np.inf)
    np.maximum.at(top, runs, log_b)
    np.minimum.at(low, runs, log_b)
    asked = np.log2(np.maximum(np.asarray(local_bsz, float), 1.0))
    at = np.maximum(cell, 0)
    beyond = np.maximum(np.maximum(asked - top[at], low[at] - asked), 0.0)
    return np.where(cell >= 0, beyond, 0.0)


def _place_keys(nodes, workers, shape: tuple | None = None) -> np.ndarray:
    """``posterior.place_key`` of (nodes, workers), broadcast to ``shape`` when given."""
    if shape is not None:
        nodes, workers = np.broadcast_to(nodes, shape), np.broadcast_to(workers, shape)
    return posterior.place_key(nodes, workers)


def _config_key(place: np.ndarray, local_bsz) -> np.ndarray:
    """One integer per (placement key, local batch): the placement's key, the batch below it
    (larger batches never match a measured one)."""
    b = np.minimum(np.asarray(local_bsz, float).astype(np.int64), 2**21 - 1)
    return (place << 21) | b


def single_worker_spread(
    params: StepParams, correction: BatchCorrection | None, rows: pd.DataFrame
) -> float:
    """Robust sd (1.4826 MAD) of log(step / predicted) over one-worker steps: compute noise."""
    one = rows[rows["num_workers"] == 1]
    if len(one) < 3:
        return 0.0
    pred, _ = predict_rows(params, one, correction)
    r = np.log(one["step_time_s"].to_numpy() / pred)
    return float(median_abs_deviation(r, scale="normal"))


def fixed_terms(groups: dict) -> dict[str, dict[str, str]]:
    """Per 'model/instance_type', the terms not fitted from its own rows and why."""
    out = {}
    for (m, t), fit in groups.items():
        if isinstance(fit, TransferFit):
            out[f"{m}/{t}"] = {"transfer": f"from {fit.source}: " + "; ".join(fit.notes)}
        elif fit.fixed:
            out[f"{m}/{t}"] = dict(fit.fixed)
    return out


def borrow(
    fits: dict[tuple[str, str], GroupFit],
    borrowed: dict[tuple[str, str], set],
    grad_bytes: dict[str, float] | None = None,
) -> None:
    """Fill terms a group could not identify from groups on the same instance type.

    Bandwidth terms are gradient bytes over a link's bandwidth: with ``grad_bytes`` known
    for the group and its donors (profiler column), a missing term is the group's bytes times
    the donors' median seconds per byte of that link; else a missing inter-node term is the
    group's own intra-node term times the donors' inter/intra ratio (same machine, same
    links). Other terms take the donors' median. With no donor, the inter-node term is 1.1x
    the intra-node one (the prior AdaptDL's ``fit_perf_params`` enforces: the network is no
    faster than the links inside a node).
    """
    grad_bytes = grad_bytes or {}
    for key, terms in borrowed.items():
        if not terms:
            continue
        fit = fits[key]
        donors = [
            (k[0], f.params)
            for k, f in fits.items()
            if k != key and k[1] == key[1] and not (terms & borrowed.get(k, set()))
        ]
        values = fit.params._asdict()
        own_bytes = grad_bytes.get(key[0])
        for name in sorted(terms):
            per_byte = [getattr(d, name) / grad_bytes[m] for m, d in donors if grad_bytes.get(m)]
            if name.startswith("bw_") and own_bytes and per_byte:
                values[name] = own_bytes * float(np.median(per_byte))
            elif name == "bw_inter" and values["bw_intra"] > 0:
                ratios = [d.bw_inter / d.bw_intra for _, d in donors if d.bw_intra > 0]
                values[name] = values["bw_intra"] * (float(np.median(ratios)) if ratios else 1.1)
            elif donors:
                values[name] = float(np.median([getattr(d, name) for _, d in donors]))
            how = (
                f"borrowed from {len(donors)} other model(s) on {key[1]}"
                if donors
                else ("no other model on this instance type to borrow from")
            )
            fit.fixed[name] = f"{fit.fixed.get(name, 'not identified')}; {how}"
        fit.params = StepParams(**values)
        if terms & set(INTER_TERMS):
            fit.widen["inter"] = BORROWED_WIDEN
        if terms & set(INTRA_TERMS):
            fit.widen["intra"] = BORROWED_WIDEN
