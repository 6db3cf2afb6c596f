"""Cross-validation that holds out the largest scales: picks the structure, yields the scores.

Random rows would reward interpolation; the model is used to predict clusters larger than any
measured, so every fold (``scale_folds``) trains on the smaller configurations and
scores the larger ones. The same held-out residuals calibrate the prediction intervals.

For fold j with scale cut (k_j, n_j) (nodes, then workers):

    train_j = {x : (k(x), n(x)) < (k_j, n_j)}      test_j = the rest
    r(x)    = log(T_measured(x) / T_hat_j(x))       T_hat_j fitted on train_j only
    error   = mean over folds and test rows of |r|  (``choose_structure`` keeps the least)

The same cut, said to a user (notebook 02, ``split_by_nodes``): one training model's rows
fitted up to a node count and scored above it. A table with one node count (a profile of this
machine) or a cut at its largest holds nothing out; the fitted rows are then scored, and the
line says so rather than calling them held out.

    fit    = {x : nodes(x) <= cut}       cut = fit_max_nodes, else the largest count - 1
    scored = {x : nodes(x) >  cut}       (the fitted rows when that is empty: in sample)
    MAPE   = mean over scored steps of |T_hat(x) / T(x) - 1|
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from srifty_kit.errors import InputError, counted, did_you_mean, plain
from srifty_kit.model.fit import (
    CONFIG_KEYS,
    BatchCorrection,
    Fixed,
    fit_group,
    learn_batch_correction,
    unidentified,
)
from srifty_kit.model.intervals import extrapolation
from srifty_kit.model.physics import StepParams, step_time, sync_share

# structures tried, simplest last; each holds some terms at their neutral value
VARIANTS: dict[str, dict[str, float]] = {
    "full": {},
    "no-latency": {"lat_intra": 0.0, "lat_inter": 0.0},
    "no-contention": {"share": 0.0},
    "bandwidth-only": {"lat_intra": 0.0, "lat_inter": 0.0, "share": 0.0},
}


@dataclass
class HeldOut:
    """Held-out residuals of one structure over all folds."""

    log_ratio: np.ndarray  # log(observed / predicted) of each held-out step
    distance: np.ndarray  # extrapolation distance of its configuration from its fold's fit
    share: np.ndarray  # synchronisation's share of its predicted step (intervals.Spread)
    moves: tuple[str, ...] = ()  # what each fold held out, in words (fold_move)
    fold: np.ndarray = field(default_factory=lambda: np.array([], int))  # each step's fold
    # log2 of each step's node count over its fold's largest fitted one (0: nodes it saw)
    doublings: np.ndarray = field(default_factory=lambda: np.array([], float))
    fit_nodes: tuple[int, ...] = ()  # the largest node count each fold was fitted on

    @property
    def error(self) -> float:
        """Mean absolute log ratio: about the mean absolute percentage error, symmetric."""
        return float(np.mean(np.abs(self.log_ratio))) if self.log_ratio.size else np.inf

    def within(self) -> HeldOut:
        """The steps at node counts their fold's fit had measured (more workers, same nodes)."""
        return self._rows(self.doublings <= 0)

    def node_moves(self, from_nodes: int) -> HeldOut:
        """The steps at node counts beyond their fold's fit, of folds fitted on at least
        ``from_nodes`` nodes."""
        reached = np.asarray(self.fit_nodes, int)[self.fold] >= from_nodes
        return self._rows((self.doublings > 0) & reached)

    def _rows(self, keep: np.ndarray) -> HeldOut:
        folds = sorted(set(self.fold[keep].tolist()))
        renumber = np.zeros(len(self.moves), int)
        renumber[folds] = np.arange(len(folds))
        return HeldOut(
            self.log_ratio[keep],
            self.distance[keep],
            self.share[keep],
            tuple(self.moves[f] for f in folds),
            renumber[self.fold[keep]],
            self.doublings[keep],
            tuple(self.fit_nodes[f] for f in folds),
        )


_EMPTY = HeldOut(np.array([]), np.array([]), np.array([]))


LOSSES = ("relative", "log")  # step-time residuals tried (fit.Fixed.loss)


class Choice(NamedTuple):
    """What held-out-scale validation chose for a group, and its held-out residuals."""

    structure: str
    correct: bool  # learn the per-batch compute correction
    loss: str
    held: HeldOut


def with_variant(base: Fixed, variant: str, loss: str = "relative") -> Fixed:
    """``base`` plus the terms the structure ``variant`` switches off, fitted with ``loss``."""
    fixed = Fixed(dict(base.values), dict(base.reasons), set(base.borrowed), loss)
    for name, value in VARIANTS[variant].items():
        fixed.fix(name, value, f"structure '{variant}' chosen by held-out-scale validation")
    return fixed


def predict_rows(
    params: StepParams, rows: pd.DataFrame, correction: BatchCorrection | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Point step time and its sync share for rows that carry the configuration keys."""
    shape = [rows[c].to_numpy(float) for c in CONFIG_KEYS]
    factor = 1.0 if correction is None else correction.factor(rows["local_bsz"].to_numpy())
    total, t_c, t_s = step_time(params, *shape, compute_factor=factor)
    return total, sync_share(t_c, t_s, params.gamma)


def rows_of(rows: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    """The steps of ``rows`` whose configuration (``CONFIG_KEYS``) is one of ``configs``."""
    return rows.merge(configs[list(CONFIG_KEYS)], on=list(CONFIG_KEYS))


def scale_folds(configs: pd.DataFrame, max_folds: int = 4) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) masks that each hold out every configuration at or above a scale cut.

    Scale orders by nodes, then workers. The cuts are the largest node count (the move the
    model is used for) and steps through the worker counts of the largest node count measured
    at two or more of them; a fold is kept only when
    its training part still spans the regimes (single/multi node) its test part needs.
    """
    k = configs["num_nodes"].to_numpy()
    n = configs["num_workers"].to_numpy()
    levels = sorted(set(zip(k.tolist(), n.tolist(), strict=True)))
    top_k = max(k)
    cuts = []
    if top_k > 1:
        cuts.append((top_k, 0))  # leave the largest node count out
    if top_k > 3:  # and the one below it: a second move of the network between node counts
        cuts.append((top_k - 1, 0))
    # the worker cuts go through the largest node count measured at two or more worker counts:
    # a node count measured once (a probe run appended to the table) has nothing to cut
    by_nodes = {}
    for lv in levels:
        by_nodes.setdefault(lv[0], []).append(lv)
    wide = [kk for kk in sorted(by_nodes, reverse=True) if len(by_nodes[kk]) >= 2]
    top_levels = by_nodes[wide[0]] if wide else []
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


def batch_folds(configs: pd.DataFrame, min_batches: int = 3) -> list[np.ndarray]:
    """Masks of the configurations each batch fold holds out: the largest local batch, then
    the smallest, of every placement (nodes, workers, per node) measured at ``min_batches``
    or more (so two or more stay for its runs to say something).

    A search free to change the batch asks about batch sizes nobody ran on nodes and workers
    somebody did; the scale folds never hold one out, so these calibrate that error
    (``groups.GroupFit.batch_sd``)."""
    place = configs.groupby(["num_nodes", "num_workers", "per_node"])["local_bsz"]
    many = place.transform("nunique").to_numpy() >= min_batches
    bsz = configs["local_bsz"].to_numpy()
    folds = [many & (bsz == place.transform(end).to_numpy()) for end in ("max", "min")]
    return [test for test in folds if test.any()]


def probe_rows(rows: pd.DataFrame) -> np.ndarray:
    """Which rows of one group the fit conditions on rather than fits: those at node counts
    above the largest measured at two or more worker counts, when that one is multi-node.

    A node count measured at one worker count only is a probe run appended to the table
    (``srifty search --suggest-probes``) or a scale-out point: one configuration cannot tell
    the network's terms apart, and a robust fit would treat its residual as an outlier. The
    fit keeps to the dense part (which identifies the network) and the belief conditions on
    the rest (``groups.GroupFit.probes``, ``posterior.observe``). Rows are the measurements
    contract's or ``aggregate``'s (num_nodes, num_workers); returns a boolean mask.
    """
    k = rows["num_nodes"].to_numpy()
    counts = rows.groupby("num_nodes")["num_workers"].nunique()
    dense = counts.index[counts.to_numpy() >= 2]
    if dense.size == 0 or int(dense.max()) < 2:
        return np.zeros(k.size, bool)
    return k > int(dense.max())


def fold_move(train: pd.DataFrame, test: pd.DataFrame) -> str:
    """What a fold asked of the fit, in words: '1-2 -> 3-4 nodes' (fitted -> predicted) or
    '<=8 -> 9-12 workers on 3 nodes'."""
    k_fit, k_new = int(train["num_nodes"].max()), test["num_nodes"]
    if (k_new > k_fit).all():
        return f"{_span(train['num_nodes'])} -> {_span(k_new)} nodes"
    n_fit = int(train.loc[train["num_nodes"] == k_fit, "num_workers"].max())
    nodes = "node" if k_fit == 1 else "nodes"
    return f"<={n_fit} -> {_span(test['num_workers'])} workers on {k_fit} {nodes}"


def _span(values: pd.Series) -> str:
    lo, hi = int(values.min()), int(values.max())
    return str(lo) if lo == hi else f"{lo}-{hi}"


@dataclass
class _Fold:
    """One fold's fitted part and held-out steps, and what about them no structure changes."""

    part: pd.DataFrame  # the configurations fitted
    train_rows: pd.DataFrame  # their steps (the batch correction learns on them)
    test_rows: pd.DataFrame  # the held-out steps
    move: str  # fold_move, in words
    fit_nodes: int  # the largest node count fitted
    distance: np.ndarray  # each held-out step's extrapolation distance
    doublings: np.ndarray  # log2 of its node count over fit_nodes (0 within)


def _folds(rows: pd.DataFrame, configs: pd.DataFrame) -> list[_Fold]:
    """The folds of ``scale_folds``, with their rows merged once for every structure tried."""
    out = []
    for train, test in scale_folds(configs):
        part = configs[train].reset_index(drop=True)
        test_rows = rows_of(rows, configs[test])
        fit_nodes = int(part["num_nodes"].max())
        distance, doublings = extrapolation(
            test_rows["num_nodes"].to_numpy(),
            test_rows["num_workers"].to_numpy(),
            fit_nodes,
            part["num_workers"].max(),
        )
        move = fold_move(part, configs[test])
        out.append(
            _Fold(part, rows_of(rows, part), test_rows, move, fit_nodes, distance, doublings)
        )
    return out


def held_out(
    folds: list[_Fold],
    variant: str,
    corrections: tuple[bool, ...] = (False,),
    decay: float = 0.0,
    loss: str = "relative",
) -> dict[bool, HeldOut]:
    """Fit on the small part of each fold, keep the residuals of the large part's steps:
    per batch-correction choice, from one fit per fold (the correction is learned after it)."""
    if not folds:
        return dict.fromkeys(corrections, _EMPTY)
    ratios = {c: [] for c in corrections}
    shares = {c: [] for c in corrections}
    for fold in folds:
        params = fit_group(fold.part, with_variant(unidentified(fold.part, decay), variant, loss))
        for correct in corrections:
            correction = learn_batch_correction(params, fold.train_rows) if correct else None
            pred, share = predict_rows(params, fold.test_rows, correction)
            ratios[correct].append(np.log(fold.test_rows["step_time_s"].to_numpy() / pred))
            shares[correct].append(share)
    index = np.concatenate([np.full(f.distance.size, i) for i, f in enumerate(folds)])
    return {
        correct: HeldOut(
            np.concatenate(ratios[correct]),
            np.concatenate([f.distance for f in folds]),
            np.concatenate(shares[correct]),
            tuple(f.move for f in folds),
            index,
            np.concatenate([f.doublings for f in folds]),
            tuple(f.fit_nodes for f in folds),
        )
        for correct in corrections
    }


def choose_structure(
    rows: pd.DataFrame,
    configs: pd.DataFrame,
    variants: tuple[str, ...] = tuple(VARIANTS),
    corrections: tuple[bool, ...] = (False, True),
    decay: float = 0.0,
    losses: tuple[str, ...] = LOSSES,
) -> Choice:
    """The structure, batch correction and loss with the lowest held-out-scale error, with
    its held-out residuals; ('full', no correction, the first loss) when nothing can be held
    out. ``decay`` is the instance type's network decay, held in every fold."""
    folds = _folds(rows, configs)
    fitted = {
        (name, loss): held_out(folds, name, corrections, decay, loss)
        for name in variants
        for loss in losses
    }
    results = {  # in this order, so that ties go to the simpler choice as they always did
        (name, correct, loss): fitted[(name, loss)][correct]
        for name in variants
        for correct in corrections
        for loss in losses
    }
    best = min(results, key=lambda key: results[key].error)
    if not np.isfinite(results[best].error):
        first = (variants[0], False, losses[0])
        return Choice(*first, results.get(first, _EMPTY))
    return Choice(*best, results[best])


class NodeSplit(NamedTuple):
    """The rows the model is fitted on and the rows it is scored on."""

    fit: pd.DataFrame  # nodes <= cut
    scored: pd.DataFrame  # nodes > cut; the fitted rows when nothing is held out
    held_out: bool  # whether ``scored`` lies beyond the fit
    cut: int  # the largest node count fitted


def split_by_nodes(
    table: pd.DataFrame,
    training_model: str,
    fit_max_nodes: int | None = None,
    source: str | None = None,
) -> NodeSplit:
    """``training_model``'s rows fitted up to ``fit_max_nodes`` nodes (None: all but the
    largest node count, at least 1), scored above it.

    An InputError names what to fix: a training model the table does not hold (with the ones
    it does), a cut that is not a whole number of nodes or that leaves nothing to fit.
    """
    for column in ("model", "num_nodes"):
        if column not in table.columns:
            raise InputError(f"no column {column!r}", source=source, column=column)
    models = sorted(table["model"].dropna().astype(str).unique())
    rows = table[table["model"].astype(str) == str(training_model)]
    if rows.empty:
        raise InputError(
            f"no rows of training model {training_model!r}{did_you_mean(training_model, models)}",
            source=source,
            column="model",
            fix="give one of " + ", ".join(models) if models else "give a table with rows",
        )
    nodes = rows["num_nodes"].to_numpy()
    if fit_max_nodes is None:
        cut = max(1, int(nodes.max()) - 1)
    elif (
        isinstance(fit_max_nodes, bool)
        or not isinstance(fit_max_nodes, numbers.Real)
        or not np.isfinite(fit_max_nodes)
        or fit_max_nodes != int(fit_max_nodes)
        or fit_max_nodes < 1
    ):
        raise InputError(
            f"fit_max_nodes {plain(fit_max_nodes)} is not a whole number of nodes",
            fix="give 1 or more, or None for all but the largest node count",
        )
    else:
        cut = int(fit_max_nodes)
    if cut < nodes.min():
        raise InputError(
            f"fit_max_nodes {cut} leaves nothing to fit: {training_model!r} was measured on "
            f"{int(nodes.min())} nodes at the fewest",
            source=source,
            fix=f"give fit_max_nodes {int(nodes.min())} or more",
        )
    fit, held = rows[nodes <= cut], rows[nodes > cut]
    if held.empty:
        return NodeSplit(fit, fit, False, cut)
    return NodeSplit(fit, held, True, cut)


def score_line(
    pred: pd.DataFrame, split: NodeSplit, level: float, measured: str = "measured_s"
) -> str:
    """The MAPE of ``pred`` against its ``measured`` column and how many steps fall inside,
    above and below the interval at ``level``, called held out only when they were."""
    ratio = pred["step_time_s"] / pred[measured]
    mape = float((ratio - 1).abs().mean())
    above = float((pred[measured] > pred["step_time_hi"]).mean())  # a deadline misses these
    below = float((pred[measured] < pred["step_time_lo"]).mean())
    shares = (
        f"{mape:.1%}; {1 - above - below:.0%} of steps inside the {level:.0%} interval, "
        f"{above:.0%} above it, {below:.0%} below"
    )
    if split.held_out:
        return f"held-out MAPE {shares}"
    nodes = counted(split.cut, "node")
    return (
        f"nothing held out (no configuration above {nodes}): scored on the fitted steps, "
        f"which say how well it describes them, not how it predicts larger ones; "
        f"in-sample MAPE {shares}"
    )


def middle_batch(configs: pd.DataFrame) -> pd.DataFrame:
    """The configurations at the middle local batch of ``configs``' rows: their lower median,
    always a batch that was run (the plain median of rows split evenly between two batches,
    8 and 16, is 12, which none was). Notebook 02 draws its breakdown there."""
    if configs.empty:
        raise InputError("no configurations to break down", fix="give at least one row")
    bsz = configs["local_bsz"].quantile(0.5, interpolation="lower")
    return configs[configs["local_bsz"] == bsz]


def fold_error_line(summary: pd.DataFrame) -> str:
    """What ``StepTimeModel.summary``'s ``held_out_error`` is, in the unit a reader compares.

    It is a fraction (0.42: 42%), ``exp(mean |log(measured / predicted)|) - 1`` over the
    steps the fit's own scale folds held out: fits on the smaller configurations of the fitted
    rows predicting their larger ones (``interval_from`` names the folds). It is not the MAPE
    of notebook 02's held-out line, which scores the final fit on rows it never saw.

    Args:
        summary: ``StepTimeModel.summary()`` (``model``, ``instance_type``, ``held_out_error``).

    Returns:
        One line per group, joined by newlines.
    """
    lines = []
    for row in summary.itertuples():
        error = row.held_out_error
        name = f"{row.model}/{row.instance_type}"
        if not np.isfinite(error):
            lines.append(f"{name}: held_out_error empty: nothing could be held out while fitting")
            continue
        lines.append(
            f"{name}: held_out_error {error:.2f} = {error:.0%}, the typical miss "
            "(exp(mean |log(measured / predicted)|) - 1) while fitting, when fits on its "
            "smaller configurations predicted its larger ones (the folds in interval_from); "
            "not the MAPE of the final fit below"
        )
    return "\n".join(lines)


# the interval's ends, in log step time, differ by more than this factor before it is called
# lopsided (an interval even in log time reaches further above than below in percent)
_LOPSIDED = 1.25


def interval_line(model, pred: pd.DataFrame, level: float) -> str:
    """How far the interval reaches below and above the point, and why, read from the fit.

    The reach is the median over ``pred``'s rows of ``1 - step_time_lo / step_time_s`` and
    ``step_time_hi / step_time_s - 1``. The why is the fit's. Errors are ratios: an interval
    even in log step time reaches further above than below in percent (+30% and -23% are one
    factor of 1.3). Beyond that, the ends are the signed split-conformal quantiles of the
    errors its scale folds made (``intervals.Spread``), so when most of those steps ran
    faster than predicted the interval reaches further below; and beyond the fitted node
    counts the network's learned move rate (``NodeMove.centre``) shifts its middle.

    Args:
        model: a fitted ``StepTimeModel`` (its ``groups_``).
        pred: its predictions (``model``, ``instance_type``, ``num_nodes``, ``step_time_s``,
            ``step_time_lo``, ``step_time_hi``).
        level: the interval's level (for the words only).

    Returns:
        One line per (model, instance type) of ``pred``, joined by newlines.
    """
    lines = []
    for (m, t), rows in pred.groupby(["model", "instance_type"], sort=True):
        low = rows["step_time_lo"] / rows["step_time_s"]
        high = rows["step_time_hi"] / rows["step_time_s"]
        below, above = float(np.median(1 - low)), float(np.median(high - 1))
        said = (
            f"{m}/{t}: the {level:.0%} interval reaches {below:.0%} below the point and "
            f"{above:.0%} above it (median over these configurations)"
        )
        down, up = float(np.median(-np.log(low))), float(np.median(np.log(high)))
        if max(down, up) > _LOPSIDED * min(down, up):
            said += f": lopsided, wider {'below' if down > up else 'above'} even in log step time"
        elif max(below, above) > _LOPSIDED * min(below, above):
            said += (
                ": even in log step time (errors are ratios: a factor above is as likely as "
                "its inverse below), so wider above in percent"
            )
        else:
            said += ": about even"
        fit = model.groups_.get((m, t))
        spread = getattr(fit, "spread", None)
        if spread is None:  # carried to hardware never measured: no folds of its own
            lines.append(said + "; carried from another instance type's fit")
            continue
        if spread.scores.size:
            faster = float(np.mean(spread.scores < 0))
            said += (
                f"; its ends are the signed {(1 - level) / 2:.0%} and {(1 + level) / 2:.0%} "
                f"quantiles of the errors the fit made predicting its own larger "
                f"configurations while fitting (interval_from), not mirrored: "
                f"{faster:.0%} of those {counted(spread.scores.size, 'step')} ran faster than "
                f"predicted, {1 - faster:.0%} slower"
            )
        else:
            said += "; its width is a prior (too few held-out steps to calibrate on)"
        node = spread.node
        if node is not None and node.centre != 0 and (rows["num_nodes"] > fit.max_nodes).any():
            said += (
                f"; beyond {counted(fit.max_nodes, 'node')} its middle moves "
                f"{'up' if node.centre > 0 else 'down'}: the network was found "
                f"{'slower' if node.centre > 0 else 'faster'} than predicted at each doubling "
                f"of nodes (NodeMove centre {node.centre:+.2f})"
            )
        lines.append(said)
    return "\n".join(lines)
