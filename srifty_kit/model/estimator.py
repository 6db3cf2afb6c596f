"""Step-time model of synchronous data-parallel training, with prediction intervals.

``StepTimeModel`` fits one set of ``physics.StepParams`` per training model and instance type
(``fit``), picks its structure by validation on held-out larger scales (``holdout``),
calibrates intervals on the same folds (``intervals``), keeps each group's result in
``groups``, and moves to instance types never measured through ``transfer``. It saves to
versioned, checksummed JSON through ``persist``. For a configuration x of group g = (training
model, instance type t):

    T_hat(x)   = physics.step_time(params_g, x)     params_g by ``fit.fit_group``, structure
                                                    by ``holdout.choose_structure``
    log T(x)   ~ N(log T_hat(x) + c(x), s(x)**2)     the belief (``posterior``), errors shared
                                                    per group and per network t
    predict    = T_hat(x), and its ``level`` interval; ``predict_draws`` joint draws
"""

from __future__ import annotations

import zlib
from dataclasses import replace

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from srifty_kit.catalog.kept import kept_rows, speeds, with_kept
from srifty_kit.catalog.query import load_catalog
from srifty_kit.errors import (
    InputError,
    check_level,
    counted,
    did_you_mean,
    is_number,
    is_whole,
    ratio_said,
    warn,
)
from srifty_kit.model import intervals, persist, posterior, roofline
from srifty_kit.model.device_curve import DeviceShape, learn_curves
from srifty_kit.model.fit import (
    DECAY_PRIOR,
    Fixed,
    aggregate,
    fit_group,
    learn_batch_correction,
    network_decay,
    unidentified,
    with_per_node,
)
from srifty_kit.model.groups import GroupFit, borrow, fixed_terms, single_worker_spread
from srifty_kit.model.holdout import (
    VARIANTS,
    HeldOut,
    batch_folds,
    choose_structure,
    probe_rows,
    rows_of,
    with_variant,
)
from srifty_kit.model.physics import BOUNDS, max_per_node
from srifty_kit.model.transfer import TransferFit, build_transfer
from srifty_kit.tables.contracts import (
    CATALOG,
    content_key,
    require_columns,
    row_labels,
    validate_configs,
    validate_measurements,
)

_PREDICTION_COLUMNS = ("step_time_s", "step_time_lo", "step_time_hi")
_BREAKDOWN_COLUMNS = ("compute_s", "sync_s", "step_time_s")

# a group measured on fewer configurations than this is carried over from a better-measured
# instance type and updated with its rows, when the catalog has the figures to do so
THIN_GROUP = 8
# predictions more than this factor beyond the largest fitted nodes or workers get a warning
FAR_BEYOND = 8
# a fit whose own steps fall inside its interval this much less often than its level is warned
OWN_COVERAGE_SLACK = 0.2
# what lets a carried fit predict configurations that synchronise (transfer.sync_missing)
_SYNC_FIX = "profile with srifty profile (it records grad_bytes)"
# the ``correction`` parameter: whether the per-batch compute correction is tried / kept
_CORRECTIONS = {"auto": (False, True), "none": (False,), "batch": (True,)}


def _profile_facts(table: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per training model, the profiler's flops_per_sample and grad_bytes where measured."""
    facts: dict[str, dict[str, float]] = {}
    for column in ("flops_per_sample", "grad_bytes"):
        if column not in table:
            continue
        values = pd.to_numeric(table[column], errors="coerce").groupby(table["model"]).median()
        for model, value in values.dropna().items():
            if value > 0:
                facts.setdefault(str(model), {})[column] = float(value)
    return facts


def _worst_node_count(nodes: np.ndarray, ratio: np.ndarray) -> str:
    """ ", worst at 3 nodes (steps 1.5x the fit)": the node count whose steps stray farthest
    (median log ratio of measured to fitted), to name where a fit misses its own runs."""
    log_ratio = np.log(np.asarray(ratio, float))
    counts = np.unique(nodes)
    medians = np.array([np.median(log_ratio[nodes == c]) for c in counts])
    worst = int(np.argmax(np.abs(medians)))
    steps = ratio_said(np.exp(medians[worst]))
    return f", worst at {counted(counts[worst], 'node')} (steps {steps}x the fit)"


def _warn_far_beyond(model: str, itype: str, fit, num_nodes, num_workers) -> None:
    """Warn when a configuration lies far beyond the scales its fit was measured at."""
    k = np.asarray(num_nodes, float) / max(fit.max_nodes, 1)
    n = np.asarray(num_workers, float) / max(fit.max_workers, 1)
    far = np.maximum(k, n) > FAR_BEYOND
    if far.any():
        warn(
            f"StepTimeModel: {model}/{itype}: {int(far.sum())} configuration(s) up to "
            f"{int(np.max(np.asarray(num_nodes)[far]))} nodes / "
            f"{int(np.max(np.asarray(num_workers)[far]))} workers lie more than {FAR_BEYOND}x "
            f"beyond the largest fitted ({fit.max_nodes} nodes, {fit.max_workers} workers): "
            "those predictions are extrapolations nothing measured supports"
        )


def _batch_ranges(table: pd.DataFrame) -> dict[tuple[str, str], tuple[int, int]]:
    """Smallest and largest local batch measured per (model, instance_type)."""
    bsz = table.groupby(["model", "instance_type"])["local_bsz"].agg(["min", "max"])
    return {(str(m), str(t)): (int(lo), int(hi)) for (m, t), (lo, hi) in bsz.iterrows()}


def _measured_means(configs: pd.DataFrame) -> np.ndarray:
    """(nodes, workers, local_bsz, log mean step) of the configurations measured with the
    even spread the predictions assume (other placements are other configurations)."""
    even = configs["per_node"].to_numpy() == max_per_node(
        configs["num_nodes"].to_numpy(), configs["num_workers"].to_numpy()
    )
    rows = configs[even]
    return np.column_stack(
        [
            rows[["num_nodes", "num_workers", "local_bsz"]].to_numpy(float),
            np.log(rows["step"].to_numpy(float)),
        ]
    )


def _batch_scores(
    fit: GroupFit, rows: pd.DataFrame, configs: pd.DataFrame, fixed: Fixed, correct: bool
) -> np.ndarray:
    """``GroupFit.batch_scores`` of the configurations each batch fold holds out
    (``holdout.batch_folds``), predicted from the rest by the group's chosen structure
    refitted without them (its calibrated spread kept: the band the search would read)."""
    out = [np.zeros(0)]
    for test in batch_folds(configs):
        part = configs[~test].reset_index(drop=True)
        params = fit_group(part, fixed)
        correction = learn_batch_correction(params, rows_of(rows, part)) if correct else None
        fold = replace(fit, params=params, correction=correction, measured=_measured_means(part))
        out.append(fold.batch_scores(_measured_means(configs[test].reset_index(drop=True))))
    return np.concatenate(out)


def _batch_moves(fits: dict[tuple[str, str], GroupFit], scores: dict) -> None:
    """Give each group its network's s_b (``GroupFit.batch_sd``): the conformal quantile at
    ``posterior.READ_LEVEL`` of the batch folds' scores of every model measured on the same
    instance type (one network's placements), 0 with fewer than ``intervals.MIN_SCORES``."""
    for itype in sorted({t for _, t in fits}):
        keys = [k for k in fits if k[1] == itype]
        pooled = np.concatenate([scores[k] for k in keys])
        if pooled.size < intervals.MIN_SCORES:
            continue
        sd = intervals.conformal_quantile(pooled, posterior.READ_LEVEL)
        for key in keys:
            fits[key].batch_sd = float(sd)


def _batch_note(fit: GroupFit) -> str:
    """'; a batch not run on a measured placement: log sd 0.068 per doubling away (...)'
    for a group whose batch folds learned a widening, else ''."""
    if fit.batch_sd <= 0:
        return ""
    return (
        f"; a batch not run on a measured placement: log sd {fit.batch_sd:.3f} per doubling "
        "away (batch folds of its type)"
    )


def _probe_note(fit: GroupFit) -> str:
    """'; conditioned on 1 run beyond 2 nodes (5 x 40)' for a group with probes, else ''."""
    runs = fit.probes
    if not len(runs):
        return ""
    shapes = ", ".join(dict.fromkeys(f"{int(k)} x {int(n)}" for k, n in runs[:, :2]))
    plural = "s" if len(runs) > 1 else ""
    return f"; conditioned on {len(runs)} run{plural} beyond {fit.max_nodes} nodes ({shapes})"


def _given_catalog(catalog) -> pd.DataFrame | None:
    """A catalog the caller passed, checked for the catalog contract's columns (None: the
    embedded one, loaded where it is needed). Only their presence: a datasheet row of a GPU
    outside EC2 (``benchmarks/gpu_catalog.csv``) leaves a host's cells, such as vcpus, empty,
    and the model reads only its GPU figures.

    Raises:
        InputError: not a table, or a required column missing (the contract's messages).
    """
    if catalog is None:
        return None
    require_columns(catalog, CATALOG, what="catalog")
    return catalog


def _check_fitted_gpus(configs: pd.DataFrame, given: pd.Series, fitted: pd.Series) -> None:
    """Refuse a ``gpus_per_node`` other than the one a fitted instance type was measured
    with: a node holds what it held in the runs (types outside the catalog included, which
    the catalog check cannot see), and part of a node is said by ``num_workers``."""
    wrong = (given.notna() & fitted.notna() & (given != fitted)).to_numpy()
    if not wrong.any():
        return
    first = int(np.flatnonzero(wrong)[0])
    itype, held = configs["instance_type"].iloc[first], int(fitted.iloc[first])
    raise InputError(
        f"gpus_per_node {given.iloc[first]:g} for {itype}, which the model was fitted "
        f"with {held} GPUs per node",
        source=configs.attrs.get("source"),
        column="gpus_per_node",
        rows=row_labels(configs, wrong),
        fix=f"give gpus_per_node {held} (what one node holds), or leave it out; a run on "
        "part of a node is said by num_workers and placement",
    )


class NotFitted(InputError, NotFittedError):
    """A StepTimeModel used before ``fit`` (or ``load``): an InputError (one line; the CLI's
    exit 2) that is also scikit-learn's ``NotFittedError``, which its estimators raise there
    and ``except NotFittedError`` in a user's code or a pipeline expects."""


def _label(name: str) -> int:
    """A stable integer label of a group or network name (the same across calls)."""
    return zlib.crc32(name.encode())


def _broadcast(pred: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every output at the inputs' common shape (compute depends on the batch only)."""
    shape = np.broadcast_shapes(*(np.shape(v) for v in pred.values()))
    return {
        k: v if np.shape(v) == shape else np.broadcast_to(v, shape).copy() for k, v in pred.items()
    }


class StepTimeModel(BaseEstimator):
    """Predicts the step time of data-parallel training configurations, with intervals."""

    def __init__(
        self,
        level: float = 0.9,
        structure: str = "auto",
        correction: str = "auto",
        decay_prior: float | None = None,
        node_move_prior: tuple[float, ...] | None = None,
    ) -> None:
        self.level = level
        self.structure = structure
        self.correction = correction
        self.decay_prior = decay_prior  # None: network.DECAY_PRIOR
        # (centre, between_types, between_moves, scatter[, growth[, seen]]) of
        # intervals.NetworkPrior (growth 1, seen inf when left out); None: NODE_MOVE_PRIOR
        self.node_move_prior = node_move_prior

    # -- fitting -------------------------------------------------------------------------
    def fit(
        self,
        measurements: pd.DataFrame,
        catalog: pd.DataFrame | None = None,
        device_shape: DeviceShape | None = None,
        facts: dict | None = None,
    ) -> StepTimeModel:
        """Fit every (model, instance_type) group of a measurement table.

        The fit reads top to bottom: validate the table, then per group aggregate the steps,
        choose the structure on held-out larger scales, fit it on every configuration of its
        dense part (node counts measured at one worker count beyond it are probes, which the
        belief conditions on: ``holdout.probe_rows``) and calibrate its intervals on the
        held-out residuals; then borrow the terms a group could
        not identify from groups on the same instance type, and carry a better-measured fit
        to thinly measured groups.

        Args:
            measurements: per-step samples or per-configuration means (the measurements
                contract; ``gpus_per_node`` may be absent for types in the catalog).
            catalog: the EC2 catalog for looking up GPU counts and carrying fits between
                types (default: the embedded one, loaded only if needed). The rows of the
                measured types are kept in the model (``catalog_rows_``).
            device_shape: how device curves move between accelerators (``device_curve``);
                default: learned from these measurements when they span enough
                accelerators, else ``device_curve.DEFAULT_SHAPE``.
            facts: profile facts with an op mix (one profile's NAME.facts.json as a dict, or
                {model: facts}): types never measured are carried by the roofline of the
                op mix (``transfer``, route "roofline (op mix)"); kept in ``op_mix_``. A CUDA
                op trace there (``srifty profile`` on a GPU) carries them from that GPU class
                by class (route "op trace (per class)"); kept in ``op_trace_``.

        Returns:
            self, fitted.

        Raises:
            InputError: a bad table, level, structure, correction, decay_prior (a number in
                the network decay's bounds, ``physics.BOUNDS``), node_move_prior or
                device_shape, or a malformed op mix.
        """
        self._check_options()
        if device_shape is not None and not isinstance(device_shape, DeviceShape):
            raise InputError(  # it reached learn_curves as an AttributeError
                f"device_shape must be a device_curve.DeviceShape, got "
                f"{type(device_shape).__name__}",
                fix="leave it out (learned from the measurements, else DEFAULT_SHAPE), or "
                "give device_curve.DeviceShape(...)",
            )
        catalog = _given_catalog(catalog)
        op_mix, op_trace = roofline.op_mixes_of(facts), roofline.op_traces_of(facts)
        table = with_per_node(
            validate_measurements(
                measurements, catalog=load_catalog if catalog is None else catalog
            )
        )
        # the between-run spread, from runs' own steps (warm-up marks included), then the
        # steps the profiler marked as warm-up leave the fit (they stay in the user's table)
        self.run_variance_ = intervals.run_variance(table)
        table = intervals.without_warmup(table)
        prior = DECAY_PRIOR if self.decay_prior is None else float(self.decay_prior)
        # a network's decay is learned where its groups were measured densely, like their
        # fits; the runs beyond (probes) are conditioned on, not fitted (``probe_rows``)
        probe = np.zeros(len(table), bool)
        for idx in table.groupby(["model", "instance_type"]).indices.values():
            probe[idx] = probe_rows(table.iloc[idx])
        self.network_decay_ = {
            str(t): network_decay(rows, prior) for t, rows in table[~probe].groupby("instance_type")
        }
        fits: dict[tuple[str, str], GroupFit] = {}
        borrowed: dict[tuple[str, str], set] = {}
        moves: dict[tuple[str, str], HeldOut] = {}
        batch_scores: dict[tuple[str, str], np.ndarray] = {}
        for key, rows in table.groupby(["model", "instance_type"], sort=True):
            decay = self.network_decay_[key[1]][0]
            fits[key], borrowed[key], moves[key], batch_scores[key] = self._fit_group(
                rows.reset_index(drop=True), decay
            )
        self._node_moves(fits, moves)
        _batch_moves(fits, batch_scores)
        self.profile_facts_ = _profile_facts(table)
        grad_bytes = {
            m: f["grad_bytes"] for m, f in self.profile_facts_.items() if "grad_bytes" in f
        }
        borrow(fits, borrowed, grad_bytes)
        rows_used = kept_rows(load_catalog() if catalog is None else catalog, {t for _, t in fits})
        curves, shape = learn_curves(table, speeds(rows_used), device_shape)
        measured = set(table["model"].astype(str))
        self._set_learned(
            persist.Learned(
                groups=fits,
                gpus_per_node={
                    str(t): int(g)
                    for t, g in table.groupby("instance_type")["gpus_per_node"].max().items()
                },
                local_bsz_range=_batch_ranges(table),
                profile_facts=self.profile_facts_,
                curves=curves,
                shape=shape,
                catalog=rows_used,
                run_variance=self.run_variance_,
                op_mix={m: x for m, x in op_mix.items() if m in measured},
                op_trace={m: x for m, x in op_trace.items() if m in measured},
            )
        )
        for key, rows in table.groupby(["model", "instance_type"], sort=True):
            if fits[key].n_configs < THIN_GROUP:
                self._transfer_thin(key, rows, catalog)
        self.fixed_terms_ = fixed_terms(self.groups_)
        for name, terms in self.fixed_terms_.items():
            lines = "; ".join(f"{t}: {why}" for t, why in terms.items())
            warn(f"StepTimeModel: {name}: fixed {lines}")
        self._warn_own_misses(table)
        return self

    def _warn_own_misses(self, table: pd.DataFrame) -> None:
        """Warn about a group whose own measured steps mostly fall outside its interval of one
        step (the fit's band of a run's mean, widened by one step's spread about it where runs
        were told apart, as predict's step interval is): the model then does not describe them
        (mixed campaigns, a missing term). ``table`` is the fitted one (``per_node``
        included); rows a carried fit cannot predict are left out."""
        level = self._level(None)
        for (m, t), rows in table.groupby(["model", "instance_type"], sort=True):
            fit = self.groups_[(m, t)]
            shape = [rows[c].to_numpy() for c in ("num_nodes", "num_workers", "local_bsz")]
            keep = ~fit.refused(*shape[:2]) if isinstance(fit, TransferFit) else slice(None)
            # the fit alone: predict would return each measured configuration's own run
            describe = fit.predict if isinstance(fit, TransferFit) else fit.physics
            pred = describe(*(a[keep] for a in shape), rows["per_node"].to_numpy()[keep], level)
            # the rows are single steps: one step's spread about its run's mean belongs in the
            # band they are held to, as in predict's step interval
            pred = intervals.apply_kind_arrays(pred, "step", level, t, self.run_variance_)
            step = rows["step_time_s"].to_numpy()[keep]
            inside = (step >= pred["step_time_lo"]) & (step <= pred["step_time_hi"])
            covered = float(np.mean(inside)) if np.size(inside) else 1.0
            if covered < self.level - OWN_COVERAGE_SLACK:
                where = _worst_node_count(shape[0][keep], step / pred["step_time_s"])
                warn(
                    f"StepTimeModel: {m}/{t}: only {covered:.0%} of the measured steps it was "
                    f"fitted on lie inside its {self.level:.0%} interval of one step; the model "
                    f"does not describe those measurements well{where} (mixed campaigns or "
                    "hosts, or a term it lacks); "
                    "it predicts the configurations measured from their runs"
                )

    def _node_prior(self) -> intervals.NetworkPrior:
        """The population of network moves a type's own are pooled with."""
        if self.node_move_prior is None:
            return intervals.NODE_MOVE_PRIOR
        centre, types, moves, scatter, *shape = (float(v) for v in self.node_move_prior)
        return intervals.NetworkPrior(
            centre, types, moves, scatter, "the node_move_prior given", *shape
        )

    def _check_options(self) -> None:
        check_level(self.level)
        prior = self.node_move_prior
        if prior is not None and not (
            isinstance(prior, tuple | list)
            and len(prior) in (4, 5, 6)
            and all(is_number(v) and not np.isnan(v) for v in prior)
            and all(np.isfinite(v) for v in prior[:5])
            and min(prior[1:3]) > 0
            and prior[3] >= 0
            and (len(prior) == 4 or 0 <= prior[4] <= 1)
            and (len(prior) < 6 or prior[5] > 0)
        ):
            raise InputError(
                "node_move_prior must be (centre, between_types, between_moves, scatter"
                "[, growth[, seen]]): finite numbers, the two spreads above 0, scatter not "
                f"negative, growth in [0, 1], seen above 0 (inf allowed), got {prior!r}",
                fix="e.g. (0.0, 0.2, 0.3, 0.05, 0.5, 1.5), or None for intervals.NODE_MOVE_PRIOR",
            )
        decay, (lo, hi) = self.decay_prior, BOUNDS["decay"]
        # outside the fit's own bounds a prior slows (or speeds) every multi-node step
        # without limit: 100 made an 8-node bert step 510 s, NaN stopped the fit in scipy
        if decay is not None and not (is_number(decay) and lo <= decay <= hi):
            raise InputError(
                f"decay_prior must be a number in [{lo:g}, {hi:g}] (the network decay's "
                f"bounds) or None, got {decay!r}",
                fix="e.g. 0.05, or None for fit.DECAY_PRIOR (no decay where none was measured)",
            )
        for value, allowed, what in (
            (self.structure, ("auto", *VARIANTS), "structure"),
            (self.correction, tuple(_CORRECTIONS), "correction"),
        ):
            if value not in allowed:
                raise InputError(
                    f"unknown {what} {value!r}{did_you_mean(value, allowed)}",
                    fix="use one of " + ", ".join(allowed),
                )

    def _set_learned(self, learned: persist.Learned) -> None:
        """Install a fitted state (from ``fit`` or a file) and what derives from it."""
        self.groups_ = learned.groups
        self.gpus_per_node_ = learned.gpus_per_node
        self.local_bsz_range_ = learned.local_bsz_range
        self.profile_facts_ = learned.profile_facts
        self.models_ = sorted({k[0] for k in learned.groups})
        self.instance_types_ = sorted({k[1] for k in learned.groups})
        self.fixed_terms_ = fixed_terms(learned.groups)
        self.device_curves_ = learned.curves
        self.device_shape_ = learned.shape
        self.catalog_rows_ = learned.catalog
        self.op_mix_ = learned.op_mix  # per model, the profile facts' op mix (roofline route)
        self.op_trace_ = learned.op_trace  # ... and op trace (a CUDA one: the trace route)
        if learned.run_variance is not None:
            self.run_variance_ = learned.run_variance
        else:
            self.__dict__.pop("run_variance_", None)  # a file without it: refit for new_run
        self.__dict__.pop("_transfers", None)
        self.__dict__.pop("_with_kept", None)

    def _transfer_thin(
        self, key: tuple[str, str], rows: pd.DataFrame, catalog: pd.DataFrame | None
    ) -> None:
        """Replace a thinly measured group by another type's fit carried over and updated
        with these rows, when the catalog allows (the update narrows its interval)."""
        try:
            carried = self._transfer(key[0], key[1], catalog, exclude=key[1])
        except InputError:
            return  # nothing to carry from: the group's own fit, with its fixed terms, stays
        self.groups_[key] = carried.update(rows)

    def _node_moves(
        self, fits: dict[tuple[str, str], GroupFit], moves: dict[tuple[str, str], HeldOut]
    ) -> None:
        """Give each group its network's move to more nodes (``intervals.network_move``):
        per instance type, the rates of every model's held-out node moves, pooled under the
        prior: one network, shared by every model measured on it."""
        prior = self._node_prior()
        for itype in sorted({t for _, t in fits}):
            keys = [k for k in fits if k[1] == itype]
            per = [
                intervals.move_rates(
                    moves[k].log_ratio,
                    moves[k].share,
                    moves[k].doublings,
                    moves[k].fold,
                    prior.growth,
                    prior.seen,
                )
                for k in keys
            ]
            rates = np.concatenate([p[0] for p in per])
            scatter = np.concatenate([p[1] for p in per])
            source = (
                f"{rates.size} held-out node move(s) of {itype} pooled with {prior.source}"
                if rates.size
                else prior.source
            )
            move = intervals.network_move(rates, scatter, prior, source)
            for key in keys:
                fits[key].spread.node = move

    def _fit_group(
        self, rows: pd.DataFrame, decay: float
    ) -> tuple[GroupFit, set, HeldOut, np.ndarray]:
        """One group: aggregate, choose the structure on held-out scales, fit, calibrate.
        Also returns its held-out steps at node counts their fold never saw (``_node_moves``)
        and the scores of its batch folds (``_batch_scores``, pooled by ``_batch_moves``);
        its spread's node move is None until ``_node_moves`` fills it when its own folds
        could not learn one. Rows beyond its dense part (``probe_rows``) are kept as measured
        means only: the belief conditions on them (``GroupFit.probes``)."""
        everything = aggregate(rows)
        measured = _measured_means(everything)
        rows = rows[~probe_rows(rows)].reset_index(drop=True)
        configs = everything[~probe_rows(everything)].reset_index(drop=True)
        base = unidentified(configs, decay)
        variants = tuple(VARIANTS) if self.structure == "auto" else (self.structure,)
        structure, correct, loss, held = choose_structure(
            rows, configs, variants, _CORRECTIONS[self.correction], decay
        )
        params = fit_group(configs, with_variant(base, structure, loss))
        correction = learn_batch_correction(params, rows) if correct else None
        within = held.within()
        moved = held.node_moves(intervals.FIRST_MULTI_NODE)
        spread = intervals.calibrate(
            within.log_ratio,
            within.share,
            within.distance,
            None,
            sigma0=single_worker_spread(params, correction, rows),
            moves=within.moves,
        )
        fixed = dict(base.reasons)
        if within.log_ratio.size < intervals.MIN_SCORES:
            fixed["interval"] = (
                f"only {within.log_ratio.size} held-out steps to calibrate on: prior width used"
            )
        fit = GroupFit(
            params=params,
            spread=spread,
            max_nodes=int(configs["num_nodes"].max()),
            max_workers=int(configs["num_workers"].max()),
            structure=structure,
            loss=loss,
            cv_error=held.error,
            n_configs=len(configs),
            fixed=fixed,
            correction=correction,
            measured=measured,
        )
        scores = _batch_scores(fit, rows, configs, with_variant(base, structure, loss), correct)
        return fit, set(base.borrowed), moved, scores

    # -- predicting ------------------------------------------------------------------------
    def predict_arrays(
        self,
        model: str,
        instance_type: str,
        num_nodes,
        num_workers,
        local_bsz,
        gpus_per_node: int | None = None,
        level: float | None = None,
        catalog: pd.DataFrame | None = None,
        interval_kind: str = "step",
    ) -> dict[str, np.ndarray]:
        """Vectorised prediction for one model and instance type; no table, no validation.

        The busiest node holds ceil(workers / nodes) workers. ``gpus_per_node`` is accepted
        for callers that pass the type's figure (the planner) and does not change the result.
        ``interval_kind`` as in ``predict``.
        """
        fit = self._group(model, instance_type, catalog)
        k, n = np.asarray(num_nodes), np.asarray(num_workers)
        b = np.asarray(local_bsz)
        pred = _broadcast(fit.predict(k, n, b, max_per_node(k, n), self._level(level)))
        between = getattr(self, "run_variance_", None)
        return intervals.apply_kind_arrays(
            pred, interval_kind, self._level(level), instance_type, between
        )

    def predict_belief(
        self,
        model: str,
        instance_type: str,
        num_nodes,
        num_workers,
        local_bsz,
        catalog: pd.DataFrame | None = None,
        with_parts: bool = False,
    ) -> posterior.Belief | tuple[posterior.Belief, dict[str, np.ndarray]]:
        """The joint belief about run-mean step times of one model on one instance type
        (``posterior.Belief``), vectorised like ``predict_arrays``; what a search decides on.

        Every configuration shares one error of this fit (z_g) and one of this type's
        network beyond its measured node counts (z_t) with the others of its group and type.

        Args:
            model, instance_type, num_nodes, num_workers, local_bsz, catalog: as in
                ``predict_arrays``.
            with_parts: also return the step's breakdown from the same evaluation of the
                physics (``compute_s``, ``sync_s``, and the point and interval at the belief's
                reading level), as ``(belief, parts)``.

        Raises:
            InputError: the model is not fitted or this type cannot be predicted.
        """
        fit = self._group(model, instance_type, catalog)
        k, n = np.asarray(num_nodes), np.asarray(num_workers)
        b = np.asarray(local_bsz)
        labels = (_label(f"{model}\0{instance_type}"), _label(instance_type))
        shape = np.broadcast_shapes(np.shape(k), np.shape(n), np.shape(b))
        k, n, b = (np.broadcast_to(a, shape) for a in (k, n, b))
        parts = fit.predict(k, n, b, max_per_node(k, n), posterior.READ_LEVEL, beliefs=labels)
        belief = parts.pop("belief")
        return (belief, _broadcast(parts)) if with_parts else belief

    def predict_draws(
        self,
        configs: pd.DataFrame,
        draws: int = 200,
        seed: int = 0,
        catalog: pd.DataFrame | None = None,
    ) -> posterior.Draws:
        """Joint draws of the run-mean step time of every configuration in ``configs``.

        Args:
            configs: the configurations contract (as ``predict``).
            draws: how many joint draws (rows of ``Draws.values``).
            seed: the random seed, a whole number >= 0 (``errors.is_whole``: 3.0 is 3; the
                same seed gives the same draws).
            catalog: figures of types the fit did not measure (as ``predict``).

        Returns:
            ``posterior.Draws``: ``mean``, ``interval(level)``, ``prob_below(t)``,
            ``summary_frame(level)``; configurations of one group or one instance type are
            drawn under shared errors.

        Raises:
            InputError: a bad table, draws or seed, or a configuration that cannot be predicted.
        """
        if not (is_whole(draws) and draws <= 100_000):
            raise InputError(f"draws must be a whole number 1..100000, got {draws!r}", fix="200")
        if not is_whole(seed, least=0):  # 3.0 is the seed 3, as suggest_probes' seed is
            raise InputError(f"seed must be a whole number >= 0, got {seed!r}", fix="seed=0")
        draws, seed = int(draws), int(seed)
        self._check_fitted()
        out = validate_configs(self._fill_gpus(configs), catalog=lambda: self._catalog(catalog))
        parts, order = [], []
        # by position, as _predict_table: two frames concatenated repeat index labels
        for at in out.groupby(["model", "instance_type"], sort=False).indices.values():
            rows = out.iloc[at]
            model, itype = rows["model"].iloc[0], rows["instance_type"].iloc[0]
            parts.append(
                self.predict_belief(
                    model,
                    itype,
                    rows["num_nodes"].to_numpy(),
                    rows["num_workers"].to_numpy(),
                    rows["local_bsz"].to_numpy(),
                    catalog,
                )
            )
            order.append(at)
        belief = posterior.concat(parts)
        values = np.empty((draws, len(out)))
        if order:
            values[:, np.concatenate(order)] = belief.draws(draws, seed)
        return posterior.Draws(out, values)

    def predict(
        self,
        configs: pd.DataFrame,
        level: float | None = None,
        catalog: pd.DataFrame | None = None,
        interval_kind: str = "step",
    ) -> pd.DataFrame:
        """``configs`` plus step_time_s and its interval step_time_lo..step_time_hi.

        ``interval_kind`` (stated in the ``interval_kind`` column): ``"step"``, another step
        measured the way the fitted ones were; ``"new_run"``, a step of a new run on a new VM:
        wider by the between-run spread (``run_variance_``) where the fitted table measured a
        configuration in more than one run (``run_variance``). ``level`` is the same for both.

        ``catalog`` gives the figures of types the fit did not measure (default: the embedded
        one); the rows the model was fitted with are added to it, and a catalog that
        contradicts them is an InputError naming the type and the column.
        """
        if catalog is not None:
            self.check_catalog(catalog)  # a conflict is refused before any work
        intervals.check_kind(interval_kind)
        pred = self._predict_table(configs, self._level(level), _PREDICTION_COLUMNS, catalog)
        between = getattr(self, "run_variance_", None)
        return intervals.apply_kind(pred, interval_kind, self._level(level), between)

    def explain(self, configs: pd.DataFrame) -> pd.DataFrame:
        """``configs`` plus compute_s, sync_s, overlap_s (time hidden by overlap), step_time_s
        and ``route``: for a fitted group "measured: " and how it was predicted ("its own
        run", "its placement's runs", "the fitted physics", "the fitted physics + N probe
        run(s)": ``GroupFit.routes``), else how its compute was carried to a type never
        measured ("op trace (per class)", "roofline (op mix)", "fp32-peak rule", ...;
        ``transfer``). Where runs moved a configuration off the physics, its compute stays the
        physics' and its sync takes what they showed (``GroupFit._breakdown``: the network's,
        where it has one and the step is no faster than its compute alone; else both parts
        scale with the step, as in model files before version 13)."""
        out = self._predict_table(configs, self._level(None), _BREAKDOWN_COLUMNS)
        out["overlap_s"] = out["compute_s"] + out["sync_s"] - out["step_time_s"]
        route = np.empty(len(out), dtype=object)
        for key, rows in out.groupby(["model", "instance_type"]).indices.items():
            fit = self.groups_.get(key)
            if isinstance(fit, GroupFit):
                at = out.iloc[rows]
                how = fit.routes(
                    at["num_nodes"],
                    at["num_workers"],
                    at["local_bsz"],
                    with_per_node(at)["per_node"],
                )
                route[rows] = ["measured: " + h for h in how]
            else:
                route[rows] = getattr(self._group(*key, None), "route", "") or "carried"
        out["route"] = route
        return out

    def _predict_table(
        self,
        configs: pd.DataFrame,
        level: float,
        columns: tuple[str, ...],
        catalog: pd.DataFrame | None = None,
    ) -> pd.DataFrame:
        self._check_fitted()
        out = validate_configs(self._fill_gpus(configs), catalog=lambda: self._catalog(catalog))
        table = with_per_node(out)
        for col in columns:
            out[col] = np.nan
        # by position: a table's index labels may repeat (two frames concatenated)
        for (model, itype), at in table.groupby(
            ["model", "instance_type"], sort=False
        ).indices.items():
            rows = table.iloc[at]
            try:
                fit = self._group(model, itype, catalog)
            except InputError as err:  # say which rows of which file could not be predicted
                mine = np.isin(np.arange(len(out)), at)
                rows = {} if err.rows else {"rows": row_labels(out, mine)}
                raise err.but(source=err.source or out.attrs.get("source"), **rows) from err
            shape = [rows[c].to_numpy() for c in ("num_nodes", "num_workers", "local_bsz")]
            _warn_far_beyond(model, itype, fit, *shape[:2])
            self._warn_batches_beyond(model, itype, shape[2], catalog)
            pred = fit.predict(*shape, rows["per_node"].to_numpy(), level)
            refused = fit.refused(*shape[:2]) if isinstance(fit, TransferFit) else None
            if refused is not None and refused.any():  # needs a sync time it cannot carry
                raise InputError(
                    fit.refusal(*shape[:2]),
                    source=out.attrs.get("source"),
                    column="num_workers",
                    rows=row_labels(out, np.isin(np.arange(len(out)), at[refused])),
                    fix="predict only one-worker configurations of this type, or " + _SYNC_FIX,
                )
            for col in columns:
                out.iloc[at, out.columns.get_loc(col)] = pred[col]
        return out

    def _warn_batches_beyond(
        self, model: str, itype: str, local_bsz: np.ndarray, catalog: pd.DataFrame | None
    ) -> None:
        """Warn (one line) when local batches lie FAR_BEYOND x outside the fitted range."""
        lo, hi = self.batch_range(model, itype, catalog)
        b = np.asarray(local_bsz, float)
        far = (b > hi * FAR_BEYOND) | (b < lo / FAR_BEYOND)
        if far.any():
            warn(
                f"StepTimeModel: {model}/{itype}: local batch up to {b[far].max():g} lies more "
                f"than {FAR_BEYOND}x outside the fitted {lo}-{hi}: extrapolated, not measured"
            )

    def _fill_gpus(self, configs: pd.DataFrame) -> pd.DataFrame:
        """Fill gpus_per_node of fitted instance types, so the catalog is only asked for others."""
        if not isinstance(configs, pd.DataFrame) or "instance_type" not in configs:
            return configs
        known = configs["instance_type"].map(self.gpus_per_node_)
        if "gpus_per_node" in configs:
            given = pd.to_numeric(configs["gpus_per_node"], errors="coerce")
            _check_fitted_gpus(configs, given, known)
            known = given.fillna(known)
        out = configs.copy()
        out["gpus_per_node"] = known
        return out

    def summary(self) -> pd.DataFrame:
        """One row per fitted group: how it was fitted, its held-out-scale error (NaN where
        nothing could be held out, or the group was carried) and what its interval widths
        were calibrated on."""
        self._check_fitted()
        rows = []
        for (m, t), fit in sorted(self.groups_.items()):
            carried = isinstance(fit, TransferFit)
            rows.append(
                {
                    "model": m,
                    "instance_type": t,
                    "fitted_as": f"carried {fit.source} by {fit.route or 'catalog figures'}"
                    if carried
                    else fit.structure
                    + (" + batch correction" if fit.correction else "")
                    + (", log loss" if fit.loss == "log" else "")
                    + _probe_note(fit),
                    "configs": fit.n_observed if carried else fit.n_configs,
                    "max_nodes": fit.max_nodes,
                    # NaN when nothing could be held out (one node, too few batches): not
                    # an infinite error, none measured
                    "held_out_error": np.expm1(fit.cv_error)
                    if not carried and np.isfinite(fit.cv_error)
                    else np.nan,
                    "interval_from": "the carried belief, narrowed by these measurements"
                    if carried
                    else fit.spread.basis(fit.max_nodes) + _batch_note(fit),
                    "fixed": ", ".join(self.fixed_terms_.get(f"{m}/{t}", {})),
                }
            )
        return pd.DataFrame(rows)

    # -- helpers ---------------------------------------------------------------------------
    def _group(
        self, model: str, instance_type: str, catalog: pd.DataFrame | None
    ) -> GroupFit | TransferFit:
        self._check_model(model)
        key = (model, instance_type)
        if key in self.groups_:
            return self.groups_[key]
        # carried fits are cached for the catalog last asked about (a search asks for the same
        # type a million times); one catalog at a time, so repeated searches do not pile up.
        # Known by its content: each search validates the catalog into a new frame, and a
        # panel re-searches on every control change
        held = self.__dict__.get("_transfers")
        if held is None or held[0] is not catalog:
            content = content_key(catalog)
            if held is None or held[1] != content:
                held = (catalog, content, {})
            self.__dict__["_transfers"] = held = (catalog, content, held[2])
        fits = held[2]
        if key not in fits:
            fits[key] = self._transfer(model, instance_type, catalog)
        return fits[key]

    def _transfer(
        self,
        model: str,
        instance_type: str,
        catalog: pd.DataFrame | None,
        exclude: str | None = None,
        **route,
    ) -> TransferFit:
        """Carry the best-measured fit of ``model`` to ``instance_type`` (see transfer).

        ``route`` overrides ``build_transfer``'s ``op_mix`` or ``constants``: the transfer
        benchmark carries with constants learned without the target, on this same path."""
        source_type = self._source(model, instance_type, exclude)
        fit = self.groups_[(model, source_type)]
        catalog = self._catalog(catalog)
        facts = self.profile_facts_.get(model, {})
        return build_transfer(
            fit.params,
            source_type,
            instance_type,
            catalog,
            facts.get("flops_per_sample"),
            facts.get("grad_bytes"),
            fit.correction,
            self.local_bsz_range_[(model, source_type)][0],
            self.device_curves_.get((model, source_type)),
            self.device_shape_,
            **{
                "op_mix": getattr(self, "op_mix_", {}).get(model),
                "op_trace": getattr(self, "op_trace_", {}).get(model),
                "bsz_range": self.local_bsz_range_[(model, source_type)],
                **route,
            },
        )

    def check_catalog(self, catalog: pd.DataFrame) -> None:
        """Refuse a catalog that contradicts the catalog rows this model was fitted with.

        Predictions and searches that pass the same catalog object reuse the merged result.

        Raises:
            InputError: the model is not fitted, or the catalog gives a fitted type other
                figures (the message names the type and the column). The embedded catalog
                states none (the model's rows win over it), but a copy of it edited after
                loading states what was edited, and is checked there like any catalog.
        """
        self._check_fitted()
        self._catalog(catalog)

    def _catalog(self, catalog: pd.DataFrame | None) -> pd.DataFrame:
        """``catalog`` (default: the embedded one) with the rows the model was fitted with
        (``catalog.kept.with_kept``: a conflict is an InputError), built once per catalog."""
        held = self.__dict__.get("_with_kept")
        if held is None or held[0] is not catalog:
            merged = with_kept(self.catalog_rows_, _given_catalog(catalog))
            held = self.__dict__["_with_kept"] = (catalog, merged)
        return held[1]

    def _source(self, model: str, instance_type: str, exclude: str | None = None) -> str:
        """The instance type whose fit of ``model`` is carried to others: the best measured
        (for a thin group, ``exclude``, only one measured on at least as many configurations)."""
        fewest = self.groups_[(model, exclude)].n_configs if exclude else 0
        sources = [
            (f.n_configs, t)
            for (m, t), f in self.groups_.items()
            if m == model and t != exclude and isinstance(f, GroupFit) and f.n_configs >= fewest
        ]
        if not sources:
            raise InputError(
                f"no measured fit of {model!r} to carry to {instance_type!r}",
                fix="measure this model on some instance type first",
            )
        return max(sources)[1]

    def batch_range(
        self, model: str, instance_type: str, catalog: pd.DataFrame | None = None
    ) -> tuple[int, int]:
        """Smallest and largest local batch the prediction for this pair rests on.

        A measured pair: its own measurements (``local_bsz_range_``). A type never measured
        but in the catalog: the measurements of the type its fit is carried from; beyond them
        compute is extrapolated along the fitted line.

        Args:
            model: a fitted training model.
            instance_type: the instance type a prediction is made for.
            catalog: the catalog that prediction uses (default: the embedded one), which must
                list a type the model was not fitted on.

        Returns:
            (smallest, largest) local batch.

        Raises:
            InputError: the model is not fitted, ``model`` was not fitted, or
                ``instance_type`` is neither fitted nor in the catalog (with "did you mean").
        """
        self._check_model(model)
        key = (model, instance_type)
        if key not in self.local_bsz_range_:
            self._check_type(instance_type, catalog)
            key = (model, self._source(model, instance_type))
        return self.local_bsz_range_[key]

    def _check_type(self, instance_type: str, catalog: pd.DataFrame | None) -> None:
        """Refuse a type the model was not fitted on that the catalog does not list, as
        ``predict`` does (validate_configs): a misspelt type has no range to borrow."""
        if instance_type in self.gpus_per_node_:
            return
        names = self._catalog(catalog)["instance_type"].astype(str).to_numpy()
        if (names == str(instance_type)).any():
            return
        known = sorted({*names, *map(str, self.gpus_per_node_)})
        raise InputError(
            f"instance type {instance_type!r} is not in the catalog"
            + did_you_mean(str(instance_type), known),
            column="instance_type",
            fix="give an instance type the model was fitted on or the catalog lists, or pass "
            "the catalog that lists it",
        )

    def _check_fitted(self) -> None:
        if not hasattr(self, "groups_"):
            raise NotFitted("this StepTimeModel is not fitted", fix="call fit(measurements)")

    def _check_model(self, model: str) -> None:
        self._check_fitted()
        if model not in self.models_:
            raise InputError(
                f"training model {model!r} was not fitted{did_you_mean(model, self.models_)}",
                column="model",
                fix="fit measurements of this model first; fitted: " + ", ".join(self.models_),
            )

    def _level(self, level: float | None) -> float:
        return check_level(self.level if level is None else level)

    # -- persistence -----------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the fitted model as versioned, checksummed JSON (atomic).

        Raises:
            InputError: the model is not fitted, ``path`` is not a file path or is a
                directory, or the file cannot be written (an existing file is left as it
                was; what could not be written is kept in a recovery file the message names).
        """
        self._check_fitted()
        persist.save(
            path,
            self.get_params(),
            persist.Learned(
                self.groups_,
                self.gpus_per_node_,
                self.local_bsz_range_,
                self.profile_facts_,
                self.device_curves_,
                self.device_shape_,
                self.catalog_rows_,
                getattr(self, "run_variance_", None),
                getattr(self, "op_mix_", {}),
                getattr(self, "op_trace_", {}),
            ),
        )

    @classmethod
    def load(cls, path) -> StepTimeModel:
        """Read a model written by ``save`` (by this or an earlier release of the same file
        version).

        Raises:
            InputError: the file is of another version, malformed or edited by hand.
        """
        init, learned = persist.load(path)
        try:
            model = cls(**init)
        except TypeError as err:
            raise InputError(
                f"malformed model file ({err})", source=str(path), fix=persist.FIX
            ) from err
        model._set_learned(learned)
        return model
