"""Notebooks 01's and 02's tables as a reader sees them: what the level-shift columns mean in
every row; the fit summary whole.

``variance.detect_drift`` and the profile summary keep the level-shift test's numbers as data:
``shift`` is the largest change of level the CUSUM test found and ``shift_p`` its p-value,
whether flagged or not, and all of them are NaN where no test was made (too few steps after
the warm-up cut). Shown as they are, a run where nothing drifted reads as ``False`` beside a
``+27%`` shift, or as empty cells, which a reader takes for a failure. ``profile_table`` says
instead: a sentence on what was flagged, tested and not tested, ``drift`` as yes, no or not
tested, the shift in percent at a whole step. Every step time carries its unit ("61.7 ms", not
0.061684), shares are percents and counts whole. ``summary_table`` shows notebook 02's
``StepTimeModel.summary()`` with its texts uncut (pandas cuts a cell at 50 characters).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from srifty_kit.errors import counted, duration
from srifty_kit.measure.stopping import MIN_BATCHES
from srifty_kit.measure.variance import DRIFT_ALPHA, MIN_SHIFT

__all__ = ["profile_table", "shift_sentence", "summary_table"]

SHIFT_COLUMNS = ("shift", "shift_at", "shift_p")  # NaN together where no shift was tested
NOT_TESTED = "not tested"
# step-time statistics in seconds (variance.describe, the profile summary); "*_s" columns too
SECONDS = ("mean", "mean_lo", "mean_hi", "std", "median", "p5", "p95", "p95_lo", "p95_hi")
SHARES = ("precision", "cv", "outlier_frac")  # relative to the mean, or of the steps
COUNTS = ("n_needed", "n_more")  # steps, floats only because they may be infinite


def _seconds(value: float) -> str:
    return duration(value) if math.isfinite(value) else "—"


def _share(value: float) -> str:
    return f"{value:.1%}" if math.isfinite(value) else "—"


def _count(value: float) -> str:
    return f"{value:,.0f}" if math.isfinite(value) else "—"


def _untested(frame: pd.DataFrame) -> pd.Series:
    """The rows where no level shift was tested: their shift columns are NaN, or, without
    those columns, fewer than ``MIN_BATCHES`` steps were kept after the warm-up cut."""
    shown = [c for c in SHIFT_COLUMNS if c in frame]
    if shown:
        return frame[shown].isna().all(axis=1)
    if {"n", "warmup_steps"} <= set(frame.columns):
        return (frame["n"] - frame["warmup_steps"]) < MIN_BATCHES
    return pd.Series(False, index=frame.index)


def _why_untested(rows: pd.DataFrame) -> str:
    """Why these rows had no level-shift test, as far as their columns tell."""
    short = f"fewer than {MIN_BATCHES} steps after the warm-up cut"
    known = {"n", "warmup_steps"} <= set(rows.columns)
    if known and ((rows["n"] - rows["warmup_steps"]) < MIN_BATCHES).all():
        return f"{short}, which says nothing either way; measure longer (a larger max_seconds)"
    return f"{short}, or steps too alike to test"


def _where(frame: pd.DataFrame, rows: pd.Series) -> str:
    """'at batch size 8', 'at batch sizes 4 and 16' where the batch size tells the table's
    rows apart, else 'in 2 configurations'."""
    if "local_bsz" not in frame or not frame["local_bsz"].is_unique:
        return "in " + counted(int(rows.sum()), "configuration")
    sizes = [str(int(b)) for b in frame.loc[rows, "local_bsz"]]
    listed = sizes[0] if len(sizes) == 1 else ", ".join(sizes[:-1]) + " and " + sizes[-1]
    return f"at batch size{'s' if len(sizes) > 1 else ''} {listed}"


def _moved(row: pd.Series) -> str:
    """'+28.2% at step 41' for a flagged row, from the columns it has ('' without them)."""
    said = []
    if "shift" in row and math.isfinite(row["shift"]):
        said.append(f"{row['shift']:+.1%}")
    if "shift_at" in row and math.isfinite(row["shift_at"]):
        said.append(f"at step {int(row['shift_at'])}")
    return " ".join(said)


def shift_sentence(frame: pd.DataFrame) -> str:
    """What a table's level-shift columns say, in a sentence or three: flagged where and by
    how much, none where, not tested where and why.

    Args:
        frame: ``variance.detect_drift``'s table or a profile summary (or a selection of
            their columns), with a ``drift`` column.

    Returns:
        The sentences, e.g. "No level shift at batch sizes 4, 8 and 16 (CUSUM: p < 1% and a
        change of 2% or more); `shift` is the largest change of level the test found, too
        small or too uncertain to count." ('' for an empty table).

    Raises:
        KeyError: ``frame`` has no ``drift`` column.
    """
    if frame.empty:
        return ""
    untested = _untested(frame)
    flagged = frame["drift"].astype(bool) & ~untested
    calm = ~flagged & ~untested
    rule = f"(CUSUM: p < {DRIFT_ALPHA:.0%} and a change of {MIN_SHIFT:.0%} or more)"
    said = []
    if flagged.any():
        moves = [m for m in (_moved(frame.loc[i]) for i in frame.index[flagged]) if m]
        how = f": {'; '.join(moves)}" if moves else ""
        said.append(
            f"Level shift {_where(frame, flagged)}{how} {rule}. The steps after it ran at "
            "another level (a noisy neighbour, throttling); they are kept, and the "
            "configuration is worth measuring again."
        )
        if calm.any():
            said.append(f"No shift {_where(frame, calm)}.")
    elif calm.any():
        meaning = ""
        if "shift" in frame:
            meaning = (
                "; `shift` is the largest change of level the test found, too small or too "
                "uncertain to count"
            )
        said.append(f"No level shift {_where(frame, calm)} {rule}{meaning}.")
    if untested.any():
        said.append(f"Not tested {_where(frame, untested)}: {_why_untested(frame[untested])}.")
    return " ".join(said)


def profile_table(frame: pd.DataFrame) -> Any:
    """One of notebook 01's tables (the profile summary, ``variance.detect_drift``'s,
    ``describe``'s, ``plan_samples``', or a selection of their columns) as the notebook shows
    it: no index; step times with their unit (``errors.duration``), ``precision``, ``cv`` and
    ``outlier_frac`` in percent, ``n_eff`` to one decimal, steps needed whole, "—" for a
    number that is missing or infinite; ``drift`` as yes, no or "not tested"; ``shift`` as a
    signed percent, ``shift_at`` a whole step, ``shift_p`` to two digits; with a ``drift``
    column, ``shift_sentence`` above the table, so a run where nothing drifted says so
    instead of showing empty cells.

    Args:
        frame: the table; other columns are shown as they are.

    Returns:
        A pandas Styler (``display`` renders it; ``.data`` is ``frame`` unchanged).
    """
    styler = frame.style.hide(axis="index")
    formats: dict[str, Any] = {
        **{c: _seconds for c in frame.columns if c in SECONDS or str(c).endswith("_s")},
        **dict.fromkeys(SHARES, _share),
        **dict.fromkeys(COUNTS, _count),
        "n_eff": "{:.1f}",
        "lag1": "{:.2f}",
        "shift": "{:+.1%}",
        "shift_at": "{:.0f}",
        "shift_p": "{:.2g}",
        "drift": lambda v: "yes" if v else "no",
    }
    styler = styler.format({c: f for c, f in formats.items() if c in frame}, na_rep="—")
    if "drift" not in frame:
        return styler
    untested = _untested(frame)
    if untested.any():
        styler = styler.format(lambda _: NOT_TESTED, subset=(frame.index[untested], ["drift"]))
    return styler.set_caption(shift_sentence(frame)).set_table_styles(
        [{"selector": "caption", "props": "caption-side: top; text-align: left;"}],
        overwrite=False,
    )


def summary_table(summary: pd.DataFrame) -> Any:
    """``StepTimeModel.summary()`` as notebook 02 shows it: no index, every text whole
    (``interval_from`` runs past the 50 characters a displayed DataFrame keeps, and the notes
    under it point at it), ``held_out_error`` to two decimals as ``holdout.fold_error_line``
    writes it, "—" where nothing could be held out, an empty ``fixed`` as "none".

    Args:
        summary: ``StepTimeModel.summary()``, or a selection of its columns.

    Returns:
        A pandas Styler (``display`` renders it; ``.data`` is ``summary`` unchanged).
    """
    formats: dict[str, Any] = {
        "held_out_error": "{:.2f}",
        "fixed": lambda v: v or "none",
    }
    return (
        summary.style.hide(axis="index")
        .format({c: f for c, f in formats.items() if c in summary}, na_rep="—")
        # left-aligned prose that wraps, instead of one right-aligned line per cell
        .set_properties(
            subset=[c for c in summary.columns if summary[c].dtype == object],
            **{"text-align": "left", "white-space": "normal"},
        )
    )
