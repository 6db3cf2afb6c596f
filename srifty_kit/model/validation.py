"""Validation on held-out larger node counts: the split notebook 02 fits and scores, in words.

The model is for predicting clusters larger than any measured, so notebook 02 fits one
training model's rows up to a node count and scores the rows above it. A table with one node
count (a profile of this machine) or a cut at its largest holds nothing out; the fitted rows
are then scored, and the line says so rather than calling them held out.

    fit    = {x : nodes(x) <= cut}       cut = fit_max_nodes, else the largest count - 1
    scored = {x : nodes(x) >  cut}       (the fitted rows when that is empty: in sample)
    MAPE   = mean over scored steps of |T_hat(x) / T(x) - 1|
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

import numpy as np
import pandas as pd

from srifty_kit.errors import InputError, counted, did_you_mean, plain


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
