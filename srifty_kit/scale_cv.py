"""Cross-validation that holds out the largest scales: picks the structure, yields the scores.

Random rows would reward interpolation; the model is used to predict clusters larger than any
measured, so every fold (``intervals.scale_folds``) trains on the smaller configurations and
scores the larger ones. The same held-out residuals calibrate the prediction intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .batch_fix import BatchCorrection, learn
from .intervals import extrapolation_distance, fold_move, scale_folds
from .step_fit import CONFIG_KEYS, Fixed, fit_group, unidentified
from .step_physics import StepParams, step_time, sync_share

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
    moves: tuple[str, ...] = ()  # what each fold held out, in words (intervals.fold_move)

    @property
    def error(self) -> float:
        """Mean absolute log ratio: about the mean absolute percentage error, symmetric."""
        return float(np.mean(np.abs(self.log_ratio))) if self.log_ratio.size else np.inf


_EMPTY = HeldOut(np.array([]), np.array([]), np.array([]))


def with_variant(base: Fixed, variant: str) -> Fixed:
    """``base`` plus the terms the structure ``variant`` switches off."""
    fixed = Fixed(dict(base.values), dict(base.reasons), set(base.borrowed))
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


def _rows_of(rows: pd.DataFrame, configs: pd.DataFrame) -> pd.DataFrame:
    return rows.merge(configs[list(CONFIG_KEYS)], on=list(CONFIG_KEYS))


def held_out(
    rows: pd.DataFrame, configs: pd.DataFrame, variant: str, correct: bool = False
) -> HeldOut:
    """Fit on the small part of each fold, keep the residuals of the large part's steps."""
    ratios, distances, shares, moves = [], [], [], []
    for train, test in scale_folds(configs):
        part = configs[train].reset_index(drop=True)
        moves.append(fold_move(part, configs[test]))
        params = fit_group(part, with_variant(unidentified(part), variant))
        correction = learn(params, _rows_of(rows, part)) if correct else None
        test_rows = _rows_of(rows, configs[test])
        pred, share = predict_rows(params, test_rows, correction)
        ratios.append(np.log(test_rows["step_time_s"].to_numpy() / pred))
        shares.append(share)
        distances.append(
            extrapolation_distance(
                test_rows["num_nodes"].to_numpy(),
                test_rows["num_workers"].to_numpy(),
                part["num_nodes"].max(),
                part["num_workers"].max(),
            )
        )
    if not ratios:
        return _EMPTY
    return HeldOut(*(np.concatenate(a) for a in (ratios, distances, shares)), tuple(moves))


def choose_structure(
    rows: pd.DataFrame,
    configs: pd.DataFrame,
    variants: tuple[str, ...] = tuple(VARIANTS),
    corrections: tuple[bool, ...] = (False, True),
) -> tuple[str, bool, HeldOut]:
    """(structure, use the batch correction, its held-out residuals) with the lowest
    held-out-scale error; ('full', False) when nothing can be held out."""
    results = {
        (name, correct): held_out(rows, configs, name, correct)
        for name in variants
        for correct in corrections
    }
    best = min(results, key=lambda key: results[key].error)
    if not np.isfinite(results[best].error):
        first = (variants[0], False)
        return *first, results.get(first, _EMPTY)
    return *best, results[best]
