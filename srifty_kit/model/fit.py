"""Bounded least-squares fit of ``StepParams`` to the measured configurations of one group.

A group is one training model on one instance type. Rows are configuration means (the
per-step spread kept as ``step_sd`` and ``count``); residuals are relative, because the error
that matters is a percentage, and robust (soft L1), because cloud measurements have outliers.
Terms the rows cannot identify are fixed before the fit, each with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from srifty_kit.model.physics import (
    BOUNDS,
    INTER_TERMS,
    INTRA_TERMS,
    PARAM_NAMES,
    StepParams,
    placement_max,
    step_time,
)

CONFIG_KEYS = ("num_nodes", "num_workers", "local_bsz", "per_node")
NOISE_FLOOR = 0.03  # relative step-time noise between campaigns (reference measurements README)
_F_SCALE = 0.05  # soft-L1 turns from quadratic to linear at a 5% relative residual


@dataclass
class Fixed:
    """Terms held at a value during a fit, and why (shown to the user)."""

    values: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    # terms no row depends on: held at 0 in the fit, filled afterwards from other groups
    borrowed: set[str] = field(default_factory=set)
    # the step-time residual: "relative" (predicted - measured) / measured, or "log"
    # log(predicted / measured); held-out-scale validation picks one per group (holdout)
    loss: str = "relative"

    def fix(self, name: str, value: float, reason: str) -> None:
        """Hold ``name`` at ``value``; the first reason given for a term is kept."""
        self.values[name] = float(value)
        self.reasons.setdefault(name, reason)


def with_per_node(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` plus ``per_node`` (busiest node's workers) and ``sync_time_s`` (NaN if absent)."""
    table = rows.copy()
    placement = table["placement"] if "placement" in table else pd.Series(None, index=table.index)
    table["per_node"] = [
        placement_max(p, int(k), int(n))
        for p, k, n in zip(placement, table["num_nodes"], table["num_workers"], strict=True)
    ]
    if "sync_time_s" not in table:
        table["sync_time_s"] = np.nan
    return table


def aggregate(table: pd.DataFrame) -> pd.DataFrame:
    """Configuration means of rows from ``with_per_node``, with the samples' spread and count."""
    grouped = table.groupby(list(CONFIG_KEYS), sort=True)
    out = grouped.agg(
        step=("step_time_s", "mean"),
        step_sd=("step_time_s", "std"),
        count=("step_time_s", "size"),
        sync=("sync_time_s", "mean"),
    ).reset_index()
    out["step_sd"] = out["step_sd"].fillna(0.0)
    return out


def weights(configs: pd.DataFrame) -> np.ndarray:
    """Inverse relative standard error of each mean, floored at the noise floor; mean 1."""
    se = configs["step_sd"].to_numpy() / np.sqrt(configs["count"].to_numpy())
    rel = se / configs["step"].to_numpy()
    w = 1.0 / np.sqrt(rel**2 + NOISE_FLOOR**2)
    return w / w.mean()


def unidentified(configs: pd.DataFrame, decay: float = 0.0) -> Fixed:
    """Terms these configurations cannot pin down, fixed to a neutral value with the reason.

    ``decay`` is the network's, decided once per instance type (``network.network_decay``):
    always held, never fitted per group.
    """
    fixed = Fixed()
    fixed.values["decay"] = float(decay)
    k = configs["num_nodes"].to_numpy()
    g = configs["per_node"].to_numpy()
    n = configs["num_workers"].to_numpy()
    if configs["local_bsz"].nunique() < 2:
        fixed.fix("alpha_c", 0.0, "one local batch size only: compute taken proportional to it")
    intra_g = np.unique(g[(k == 1) & (n > 1)])
    if intra_g.size == 0:
        for name in INTRA_TERMS:
            fixed.fix(name, 0.0, "no multi-worker single-node measurements")
            fixed.borrowed.add(name)
    elif intra_g.size < 2:
        fixed.fix("lat_intra", 0.0, "one single-node worker count only: latency not separable")
    multi = k > 1
    if not multi.any():
        for name in INTER_TERMS:
            fixed.fix(name, 0.0, "no multi-node measurements")
            fixed.borrowed.add(name)
    else:
        if np.unique(g[multi]).size < 2:
            fixed.fix("share", 0.0, "one workers-per-node count across nodes: contention unknown")
        if np.unique(k[multi]).size < 2:
            # 2(k-1) * lat_inter is one constant over a single node count: only the bandwidth
            # term's 2(n-1)/n would tell them apart, and it barely moves; held at NCCL's
            # network latency scale (tens of microseconds per step, tuning.cc), i.e. ~0
            fixed.fix("lat_inter", 0.0, "one multi-node count: latency not separable")
    if configs["sync"].isna().all() and len(configs) < 12:
        fixed.fix("gamma", 1.0, "no sync_time_s and few configurations: overlap not separable")
    return fixed


def _start(configs: pd.DataFrame) -> dict[str, float]:
    """A physically sensible starting point from simple averages of the data."""
    b = configs["local_bsz"].to_numpy(float)
    step = configs["step"].to_numpy()
    sync = configs["sync"].fillna(0.0).to_numpy()
    comp = np.clip(step - sync, 1e-6, None)
    if np.unique(b).size > 1:
        beta, alpha = np.polyfit(b, comp, 1)
    else:
        beta, alpha = np.median(comp / b), 0.0
    k = configs["num_nodes"].to_numpy()
    n = configs["num_workers"].to_numpy()
    fallback = 0.1 * float(np.median(step))
    multi_intra = (k == 1) & (n > 1)
    has_sync = configs["sync"].notna().to_numpy()
    intra = sync[multi_intra & has_sync]
    inter = sync[(k > 1) & has_sync]
    return {
        "alpha_c": max(float(alpha), 1e-6),
        "beta_c": max(float(beta), 1e-9),
        "lat_intra": 1e-4,
        "bw_intra": float(np.median(intra)) if intra.size else fallback,
        "lat_inter": 1e-4,
        "bw_inter": float(np.median(inter)) if inter.size else fallback,
        "share": 0.3,
        "gamma": 1.0 if has_sync.any() else 1.5,
    }


def fit_group(configs: pd.DataFrame, fixed: Fixed) -> StepParams:
    """Least-squares constants of one group, holding ``fixed`` terms at their values."""
    start = _start(configs)
    free = [name for name in PARAM_NAMES if name not in fixed.values]
    lower = np.array([BOUNDS[name][0] for name in free])
    upper = np.array([BOUNDS[name][1] for name in free])
    x0 = np.clip([start[name] for name in free], lower + 1e-12, np.minimum(upper, 1e6) - 1e-12)
    shape = [configs[c].to_numpy(float) for c in CONFIG_KEYS]
    step = configs["step"].to_numpy()
    sync = configs["sync"].to_numpy()
    has_sync = ~np.isnan(sync)
    w = weights(configs)

    def params(x: np.ndarray) -> StepParams:
        values = dict(fixed.values)
        values.update(zip(free, x, strict=True))
        return StepParams(**{k: float(v) for k, v in values.items()})

    def residuals(x: np.ndarray) -> np.ndarray:
        total, t_c, _ = step_time(params(x), *shape)
        if fixed.loss == "log":
            r_step = w * np.log(np.maximum(total, 1e-300) / step)
        else:
            r_step = w * (total - step) / step
        # measured sync is the all-reduce time left exposed after the backward pass (what
        # overlap did not hide): T - T_c; it separates compute from communication
        r_sync = (w * (total - t_c - sync) / step)[has_sync]
        return np.concatenate([r_step, r_sync])

    if not free:
        return params(np.array([]))
    sol = least_squares(
        residuals,
        x0,
        bounds=(lower, upper),
        loss="soft_l1",
        f_scale=_F_SCALE,
        x_scale="jac",
        max_nfev=2000,
    )
    return params(sol.x)
