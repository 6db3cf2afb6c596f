"""The equations of one synchronous data-parallel step: compute, ring all-reduce, overlap.

Pure, vectorised numpy over any broadcastable arrays; no fitting, no tables. The fitted
numbers live in ``StepParams``; ``estimator`` estimates them and ``transfer`` moves them to
other machines.

A step on ``n`` workers spread over ``k`` nodes, at most ``g`` workers on one node, with a
local batch of ``b`` samples per worker, takes

    T_c = alpha_c + beta_c * b                                   (forward + backward)
    T_s = 2(g-1) * lat_intra + 2(g-1)/g * bw_intra                  if k == 1  (PCIe/NVLink ring)
    T_s = [2(k-1) * lat_inter + 2(n-1)/n * bw_inter * g**share]
          * (1 + decay * log2(k/2))                                 if k > 1   (ring over NICs)
    T   = (T_c**gamma + T_s**gamma) ** (1/gamma)                    (overlap, as Pollux, OSDI'21)

The ring all-reduce cost 2(n-1)/n * bytes / bandwidth + 2(n-1) * latency is the standard
alpha-beta model (Thakur, Rabenseifner & Gropp, "Optimization of collective communication
operations in MPICH", IJHPCA 2005). ``bw_*`` fold the gradient bytes into the inverse
bandwidth, so they are seconds. Across nodes the ring's 2(n-1) steps are not alike: NCCL's
own cost model (src/graph/tuning.cc, ring all-reduce) charges the network latency only to
the 2(k-1) steps that cross a node boundary and the PCIe/NVLink latency (microseconds) to the
other 2(n-k), so the inter-node latency grows with the number of NODES, not of workers. The
intra-node hops are left out across nodes: a fitted ``lat_intra`` is PCIe sharing of a ring
confined to one node (it often sits at MAX_LATENCY_S, far above a real PCIe hop), and in a
pipelined ring that spans nodes the slowest link, the NIC, sets the pace. The bandwidth term
saturates: 2(n-1)/n is 1 at n=2 and below 2 at any n. ``g**share`` is the NIC contention
seen on PCIe-only nodes (g4dn): with ``share=0`` a topology-aware ring crosses the NIC once
per node whatever ``g`` is; with ``share=1`` every worker on the node pushes its own flow
through the NIC.

``1 + decay * log2(k/2)`` is the network's efficiency falling as the ring spans more nodes
(shared links and switches, incast, the slowest of k links): 1 at two nodes, where the
inter-node constants are measured, growing ever more slowly beyond. It is a property of the
instance type's network, one value shared by every training model measured on it
(``fit.network_decay``), never a per-model constant the rows of one model cannot identify.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class StepParams(NamedTuple):
    """Fitted constants of one training model on one instance type (seconds unless noted)."""

    alpha_c: float  # T_c = alpha_c + beta_c * b: fixed cost of a step (launch, optimizer)
    beta_c: float  # ... + beta_c * b: seconds per sample of local batch
    lat_intra: float  # T_s = 2(g-1) * lat_intra + ...: one ring step inside a node
    bw_intra: float  # ... + 2(g-1)/g * bw_intra: gradient bytes / intra-node bandwidth
    lat_inter: float  # T_s = 2(k-1) * lat_inter + ...: one ring step across nodes
    bw_inter: float  # ... + 2(n-1)/n * bw_inter * g**share: gradient bytes / NIC bandwidth
    share: float  # exponent of g in the NIC term, in [0, 1] (contention on the NIC)
    gamma: float  # T = (T_c**gamma + T_s**gamma)**(1/gamma), >= 1; 1 means no overlap
    # T_s(k > 1) * (1 + decay * log2(k/2)): the network slowing as the ring spans more nodes;
    # one value per instance type (network.network_decay); 0 in files written before it
    decay: float = 0.0


PARAM_NAMES: tuple[str, ...] = StepParams._fields

# One ring step's latency: tens of microseconds to ~1 ms for NCCL over TCP in a datacenter,
# a few ms for gloo on CPUs; fitted values beyond this are contention in disguise, and a
# "latency" of 30 ms per step extrapolates to absurd times on larger rings.
MAX_LATENCY_S = 5e-3

# physical bounds of each constant: (lower, upper); the fit never leaves them
BOUNDS: dict[str, tuple[float, float]] = {
    "alpha_c": (0.0, np.inf),
    "beta_c": (0.0, np.inf),
    "lat_intra": (0.0, MAX_LATENCY_S),
    "bw_intra": (0.0, np.inf),
    "lat_inter": (0.0, MAX_LATENCY_S),
    "bw_inter": (0.0, np.inf),
    "share": (0.0, 1.0),
    "gamma": (1.0, 10.0),
    "decay": (0.0, 4.0),
}

# terms that only matter for some configurations: which rows identify each one
INTRA_TERMS = ("lat_intra", "bw_intra")
INTER_TERMS = ("lat_inter", "bw_inter", "share")


def max_per_node(num_nodes: np.ndarray, num_workers: np.ndarray) -> np.ndarray:
    """Workers on the busiest node when they are spread as evenly as possible."""
    return np.ceil(np.asarray(num_workers, float) / np.asarray(num_nodes, float))


def placement_max(placement: object, num_nodes: int, num_workers: int) -> int:
    """Busiest node of a Pollux-style placement string ('13' = 1 worker + 3 workers).

    Falls back to the even spread when the string does not describe these workers.
    """
    text = "" if placement is None else str(placement).strip()
    if text.isdigit() and len(text) == num_nodes and sum(map(int, text)) == num_workers:
        return max(map(int, text))
    return int(max_per_node(np.array(num_nodes), np.array(num_workers)))


def compute_time(p: StepParams, local_bsz: np.ndarray) -> np.ndarray:
    """T_c: forward and backward of one local batch."""
    return p.alpha_c + p.beta_c * np.asarray(local_bsz, float)


def sync_time(
    p: StepParams, num_nodes: np.ndarray, num_workers: np.ndarray, per_node: np.ndarray
) -> np.ndarray:
    """T_s: one ring all-reduce of the gradients; 0 for a single worker."""
    n = np.asarray(num_workers, float)
    k = np.asarray(num_nodes, float)
    g = np.asarray(per_node, float)
    intra = 2.0 * (g - 1.0) * p.lat_intra + 2.0 * (g - 1.0) / g * p.bw_intra
    # 2(k-1) ring steps cross the network (NCCL tuning.cc); the 2(n-k) PCIe hops: see above
    inter = 2.0 * (k - 1.0) * p.lat_inter + 2.0 * (n - 1.0) / n * p.bw_inter * g**p.share
    if p.decay:
        inter = inter * network_slowdown(p.decay, k)
    return np.where(k > 1, inter, intra)


def network_slowdown(decay: float, num_nodes: np.ndarray) -> np.ndarray:
    """1 + decay * log2(k/2) for k >= 2 nodes (1 below): network time relative to 2 nodes."""
    k = np.maximum(np.asarray(num_nodes, float), 2.0)
    return 1.0 + decay * np.log2(k / 2.0)


def overlap(t_c: np.ndarray, t_s: np.ndarray, gamma: float) -> np.ndarray:
    """T: compute and sync combined; gamma=1 adds them, large gamma approaches max."""
    if gamma == 1.0:
        return t_c + t_s
    if gamma == 2.0:  # host/device overlap of carried fits (transfer): no powers
        return np.hypot(t_c, t_s)
    # scale by the larger term so gamma up to 10 never overflows
    top = np.maximum(np.maximum(t_c, t_s), 1e-300)
    return top * ((t_c / top) ** gamma + (t_s / top) ** gamma) ** (1.0 / gamma)


def underlap(total: np.ndarray, known: np.ndarray, gamma: float) -> np.ndarray:
    """The other part of ``overlap``: t with (known**gamma + t**gamma)**(1/gamma) == total.

    0 where ``known`` alone already exceeds ``total``.
    """
    if gamma == 2.0:  # seconds: squares neither overflow nor underflow
        return np.sqrt(np.maximum(total * total - np.square(known), 0.0))
    top = np.maximum(total, 1e-300)
    rest = np.maximum(1.0 - (np.asarray(known, float) / top) ** gamma, 0.0)
    return top * rest ** (1.0 / gamma)


def sync_share(t_c: np.ndarray, t_s: np.ndarray, gamma: float) -> np.ndarray:
    """d log T / d log T_s = T_s**gamma / (T_c**gamma + T_s**gamma): the step's sync part."""
    if gamma == 1.0:  # the common fitted value: no powers (a million candidates in a search)
        return t_s / np.maximum(t_c + t_s, 1e-300)
    if gamma == 2.0:
        c, s = np.square(t_c), np.square(t_s)
        return s / np.maximum(c + s, 1e-300)
    top = np.maximum(np.maximum(t_c, t_s), 1e-300)
    c, s = (t_c / top) ** gamma, (t_s / top) ** gamma
    return s / (c + s)


def step_time(
    p: StepParams,
    num_nodes: np.ndarray,
    num_workers: np.ndarray,
    local_bsz: np.ndarray,
    per_node: np.ndarray,
    compute_factor: np.ndarray | float = 1.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(T, T_c, T_s) of one step for every configuration, broadcast together.

    ``compute_factor`` multiplies T_c (a learned per-batch-size correction, see batch_correction).
    """
    t_c = compute_time(p, local_bsz) * compute_factor
    t_s = sync_time(p, num_nodes, num_workers, per_node)
    return overlap(t_c, t_s, p.gamma), t_c, t_s


def simulate(
    p: StepParams,
    num_nodes: np.ndarray,
    num_workers: np.ndarray,
    local_bsz: np.ndarray,
    noise: float = 0.03,
    repeats: int = 1,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Synthetic measurements from known constants: lognormal noise of relative size ``noise``.

    For teaching and testing: a fit of these rows should give back ``p``'s predictions.
    """
    rng = np.random.default_rng(seed)
    k, n, b = (np.repeat(np.asarray(a), repeats) for a in (num_nodes, num_workers, local_bsz))
    total, t_c, _ = step_time(p, k, n, b, max_per_node(k, n))
    factor = np.exp(rng.normal(0.0, noise, size=total.shape))
    return {
        "num_nodes": k,
        "num_workers": n,
        "local_bsz": b,
        "step_time_s": total * factor,
        # what a profiler records (the table contract): the all-reduce time the backward
        # pass left exposed, T - T_c, not the all-reduce's own time T_s, which overlap hides
        "sync_time_s": (total - t_c) * factor,
    }
