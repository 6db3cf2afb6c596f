"""How an instance type's network slows as a ring spans more nodes: the shared ``decay``.

``physics`` multiplies inter-node synchronisation by ``1 + decay * log2(k/2)``. The decay is a
property of the network, not of a training model, so it is estimated once per instance type
from every model measured on it:

    log s(t, m, g, k) = c(t, m, g) + log(1 + decay * log2(k/2)) + e

where s is the exposed sync time per unit of ring traffic 2(n-1)/n (median over local batch
sizes) of model m with g workers per node on k nodes of type t, and c(t, m, g) absorbs
everything else (gradient bytes, NIC contention). The fit is least absolute deviations over a
grid of decay values, each c at its median: one model whose sync behaves oddly does not set it.
A network latency paid per node crossing (physics' 2(k-1) * lat_inter) also grows s with k and
is read as decay here; the per-group fit then finds less latency, so the two are not counted
twice in a prediction.

Two node counts are not used to learn it: the first multi-node count (2), where the ring first
leaves the node and whose campaign was found inconsistent with larger ones (the reference
g4dn.12xlarge runs are slower per byte at 2 nodes than at 3 and 4: fitting through it would set
the growth to zero), and so at least two node counts of 3 or more are needed. With fewer, the
stated prior ``DECAY_PRIOR`` is used and the reason says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from srifty_kit.model.physics import BOUNDS, network_slowdown

# The prior, chosen by validation across clusters (benchmarks/model_accuracy.py, scale-out
# table): estimated with ``estimate_decay`` on the OTHER reference clusters and applied to each
# cluster's held-out larger runs, a shared growth (0.24 for Azure ND40rs_v2, from the AWS
# g4dn.12xlarge runs; 0.06 for the RTX 2080 Ti cluster; 0.02 for AWS) moved the held-out MAPE
# from 19.7% to 23.7% on Azure, 5.9% to 6.0% on AWS and 5.6% to 5.5% on RTX: how a network
# slows with more nodes did not carry from one cluster to another. So no growth is assumed
# where a type's own runs cannot show it; the node-move prior of ``intervals``
# (NODE_MOVE_PRIOR) widens and shifts the interval there instead.
DECAY_PRIOR = 0.0
_GRID = np.round(np.arange(BOUNDS["decay"][0], BOUNDS["decay"][1] + 1e-9, 0.01), 2)
MIN_COUNTS = 2  # node counts of 3 or more needed to learn the decay from the data
_SERIES = ["instance_type", "model", "per_node"]  # one offset c per series


def _per_byte(table: pd.DataFrame) -> pd.DataFrame:
    """Median exposed sync per unit of ring traffic, per (model, per_node, num_nodes >= 3)."""
    rows = table[(table["num_nodes"] >= 3) & table["sync_time_s"].notna()]
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
        than ``MIN_COUNTS`` node counts of 3 or more have sync times.
    """
    if "sync_time_s" not in table or "per_node" not in table:
        return None
    cells = _per_byte(table)
    if cells["num_nodes"].nunique() < MIN_COUNTS:
        return None
    # only (model, per_node) series seen at two or more of those node counts say anything
    series = cells.groupby(_SERIES)["num_nodes"].transform("nunique") >= 2
    cells = cells[series]
    if cells.empty:
        return None
    y = np.log(cells["per_byte"].to_numpy())
    group = cells.groupby(_SERIES).ngroup().to_numpy()
    k = cells["num_nodes"].to_numpy(float)
    return float(_GRID[np.argmin([_lad(y - np.log(network_slowdown(d, k)), group) for d in _GRID])])


def _lad(r: np.ndarray, group: np.ndarray) -> float:
    """Sum of absolute residuals after each group's median offset."""
    offsets = pd.Series(r).groupby(group).transform("median").to_numpy()
    return float(np.abs(r - offsets).sum())


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
        counts = sorted(int(k) for k in table.loc[table["num_nodes"] >= 3, "num_nodes"].unique())
        return learned, f"learned from {', '.join(map(str, counts))}-node sync times"
    return float(prior), (
        f"prior {prior:g}: fewer than {MIN_COUNTS} node counts of 3 or more measured "
        "(network.DECAY_PRIOR says where the prior comes from)"
    )
