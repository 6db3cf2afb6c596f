"""Everything estimated from the measurements themselves: a group's ``StepParams``, its
per-batch compute correction, and its network's decay.

**A group's constants.** A bounded least-squares fit of ``StepParams`` to the measured
configurations of one group. A group is one training model on one instance type. Rows are
configuration means (the per-step spread kept as ``step_sd`` and ``count``); residuals are
relative, because the error that matters is a percentage, and robust (soft L1), because cloud
measurements have outliers. Terms the rows cannot identify are fixed before the fit, each with
the reason.

**The per-batch correction of compute time** (``learn_batch_correction``), kept only where
held-out scales gain. Compute time is not always linear in the local batch (cuDNN picks other
kernels, padding to tensor-core multiples, data-dependent work as in YOLOv3). Compute does not
depend on the cluster's size, so a correction learned from small clusters at a batch size
carries to large ones: the median of log(measured / linear compute) at each measured batch
size, from the rows where compute is measured (step - sync, or one-worker steps), interpolated
linearly in log(local_bsz) between them and held constant beyond. (np.interp rather than a
scikit-learn neighbours model: it is the same two-neighbour interpolation and a million
candidates in the search cost ~20 ms instead of a sort.)

**The network's decay** (``network_decay``): how an instance type's network slows as a ring
spans more nodes, shared by every model on it. ``physics`` multiplies inter-node
synchronisation by ``1 + decay * log2(k/2)``. The decay is a property of the network, not of a
training model, so it is estimated once per instance type from every model measured on it:

    log s(t, m, g, k) = c(t, m, g) + log(1 + decay * log2(k/2)) + e

where s is the exposed sync time per unit of ring traffic 2(n-1)/n (median over local batch
sizes) of model m with g workers per node on k nodes of type t, and c(t, m, g) absorbs
everything else (gradient bytes, NIC contention). The fit minimises a Cauchy loss of e
(``_cauchy``, scale the noise floor) over a grid of decay values, each c at its median: a model
whose sync behaves oddly, or one campaign at one node count, does not set it. A network latency
paid per node crossing (physics' 2(k-1) * lat_inter) also grows s with k and is read as decay
here; the per-group fit then finds less latency, so the two are not counted twice.

Every multi-node count counts (2 nodes, where the ring first leaves the node and the decay term
is 0, anchors each series); at least three are needed, so that an odd campaign at one of them
stands out against the others. With fewer, the stated prior ``DECAY_PRIOR`` is used and the
reason says so. The decay stays in [0, 4]; what it cannot carry beyond the measured node counts
the network's move does (``intervals.network_move``, learned from held-out moves).
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
    compute_time,
    network_slowdown,
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

    ``decay`` is the network's, decided once per instance type (``fit.network_decay``):
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


# --- the per-batch correction of compute time -------------------------------------------

MIN_BATCH_SIZES = 3  # fewer distinct batch sizes: the linear model is all there is to say


@dataclass
class BatchCorrection:
    """log compute factor at measured batch sizes, interpolated between them."""

    log_bsz: np.ndarray
    log_factor: np.ndarray

    def factor(self, local_bsz: np.ndarray) -> np.ndarray:
        """Multiplier of T_c at each batch size."""
        log_b = np.log(np.asarray(local_bsz, float))
        return np.exp(np.interp(log_b, self.log_bsz, self.log_factor))


def learn_batch_correction(params: StepParams, rows: pd.DataFrame) -> BatchCorrection | None:
    """The correction from ``rows`` (with per_node, sync_time_s), or None if not learnable."""
    step = rows["step_time_s"].to_numpy(float)
    sync = rows["sync_time_s"].to_numpy(float)
    single = rows["num_workers"].to_numpy() == 1
    measured = np.where(np.isnan(sync), np.where(single, step, np.nan), step - sync)
    b = rows["local_bsz"].to_numpy(float)
    ok = measured > 0
    if np.unique(b[ok]).size < MIN_BATCH_SIZES:
        return None
    ratio = pd.Series(np.log(measured[ok] / compute_time(params, b[ok])))
    mean = ratio.groupby(b[ok]).median()
    return BatchCorrection(np.log(mean.index.to_numpy(float)), mean.to_numpy())


# --- the network's decay, shared by every model on one instance type --------------------

# The prior, chosen by validation across clusters (benchmarks/model_accuracy.py, scale-out
# table): estimated with ``estimate_decay`` on the OTHER reference clusters and applied to each
# cluster's held-out larger runs, a shared growth (0.10 for Azure ND40rs_v2, 0.05 for AWS
# g4dn.12xlarge, 0.01 for the RTX 2080 Ti cluster) moved the held-out MAPE from 19.7% to 20.7%
# on Azure, 5.9% to 6.2% on AWS and 5.6% to 5.5% on RTX: how a network slows with more nodes
# did not carry from one cluster to another. So no growth is assumed where a type's own runs
# cannot show it; the node-move prior of ``intervals`` (NODE_MOVE_PRIOR) widens and shifts the
# belief there instead.
DECAY_PRIOR = 0.0
_DECAY_GRID = np.round(np.arange(BOUNDS["decay"][0], BOUNDS["decay"][1] + 1e-9, 0.01), 2)
FIRST_RING = 2  # the first node count whose ring crosses nodes: physics' decay is 0 there
# multi-node counts needed to learn the decay: with three, one count's odd campaign stands out
# against the trend of the other two (the robust loss gives it little weight); with two it cannot
MIN_DECAY_COUNTS = 3
_DECAY_SERIES = ["instance_type", "model", "per_node"]  # one offset c per series


def _per_byte(table: pd.DataFrame) -> pd.DataFrame:
    """Median exposed sync per unit of ring traffic, per (model, per_node, num_nodes >= 3)."""
    rows = table[(table["num_nodes"] >= FIRST_RING) & table["sync_time_s"].notna()]
    rows = rows[rows["sync_time_s"] > 0]
    n = rows["num_workers"].to_numpy(float)
    per = rows["sync_time_s"] / (2.0 * (n - 1.0) / n)
    keys = [rows["instance_type"], rows["model"], rows["per_node"], rows["num_nodes"]]
    return per.groupby(keys).median().rename("per_byte").reset_index()


def estimate_decay(table: pd.DataFrame) -> float | None:
    """The decay of one network from its measurements, or None when they cannot show it.

    Args:
        table: measurements of one instance type (several training models welcome), with
            ``per_node`` (``fit.with_per_node``) and ``sync_time_s``.

    Returns:
        The least-absolute-deviation decay on the grid 0, 0.01, ... 4, or None when fewer
        than ``MIN_DECAY_COUNTS`` multi-node counts have sync times.
    """
    if "sync_time_s" not in table or "per_node" not in table:
        return None
    cells = _per_byte(table)
    if cells["num_nodes"].nunique() < MIN_DECAY_COUNTS:
        return None
    # only (model, per_node) series seen at two or more of those node counts say anything
    series = cells.groupby(_DECAY_SERIES)["num_nodes"].transform("nunique") >= 2
    cells = cells[series]
    if cells.empty:
        return None
    y = np.log(cells["per_byte"].to_numpy())
    group = cells.groupby(_DECAY_SERIES).ngroup().to_numpy()
    k = cells["num_nodes"].to_numpy(float)
    return float(
        _DECAY_GRID[
            np.argmin([_cauchy(y - np.log(network_slowdown(d, k)), group) for d in _DECAY_GRID])
        ]
    )


def _cauchy(r: np.ndarray, group: np.ndarray) -> float:
    """Cauchy (Student-t, 1 dof) loss of log residuals after each group's median offset:

        loss = sum log(1 + ((r - median_g r) / s)**2),    s = NOISE_FLOOR

    It grows only logarithmically with a residual, so one campaign far off the trend costs
    little more than a near miss, where a squared or absolute loss would bend the trend to it."""
    offsets = pd.Series(r).groupby(group).transform("median").to_numpy()
    return float(np.log1p(((r - offsets) / NOISE_FLOOR) ** 2).sum())


def network_decay(table: pd.DataFrame, prior: float = DECAY_PRIOR) -> tuple[float, str]:
    """The decay to use for one instance type, and where it came from (shown to the user).

    Args:
        table: that type's measurements (``per_node`` and ``sync_time_s`` columns).
        prior: the value used when the measurements cannot show it.

    Returns:
        ``(decay, source)``.
    """
    learned = estimate_decay(table)
    if learned is not None:
        counts = sorted(
            int(k) for k in table.loc[table["num_nodes"] >= FIRST_RING, "num_nodes"].unique()
        )
        return learned, f"learned from {', '.join(map(str, counts))}-node sync times"
    return float(prior), (
        f"prior {prior:g}: fewer than {MIN_DECAY_COUNTS} multi-node counts measured "
        "(fit.DECAY_PRIOR says where the prior comes from)"
    )
