"""Transfer of a fitted step-time model to instance types never measured, from catalog figures.

A carried step splits compute into a host part and a device part (symbols as in physics):

    H   = alpha_c * h                      host: Python, the dispatcher, one kernel launch per
                                           op, the optimizer's loop. The measured intercept, kept
                                           at the source's value times a host factor h: a faster
                                           accelerator does not remove it (never below
                                           HOST_FLOOR_MIN_S unless a measured step was quicker)
    D   = D1(b) / e                        device: the batch's work at efficiency 1 over the
                                           achieved efficiency e
    T_c = (H**g + D**g) ** (1/g)           g = HOST_GAMMA: CUDA runs asynchronously, the device
                                           works while the host dispatches, so a step costs about
                                           the larger of the two, not their sum
    T_s = S1 / n                           the ring all-reduce at the typical rates (``SYNC_PRIOR``
                                           from the gradient size) over the network factor n;
                                           T = (T_c**gamma + T_s**gamma)**(1/gamma)

T_c moves by one of six routes, the first one available taken (``TransferFit.route`` names
it, ``StepTimeModel.explain`` shows it per prediction):
  op trace (per class): the profile facts hold an op mix and an op trace taken by CUDA on the
         source type's GPU (``measure.op_trace``), and the roofline constants are there. The
         source's compute curve, refitted as below, is multiplied at each batch by the trace's
         ratio (``roofline.trace_ratio``: every operator class by the ratio of its own
         roofline on the two GPUs, the host's part by the host factor) and refitted; beliefs
         from the fallback's spreads (no reference campaign holds traces to learn its own).
  roofline (op mix): the profile facts hold an op mix (``measure.opgraph``), both types have
         fp32 peak and memory bandwidth, and the shipped roofline constants are there
         (``roofline.reference_learned``). The source's compute curve over its measured batches
         is refitted as t(b) = (O**p + (b s)**p)**(1/p) and carried by ``roofline.carry``:
         the slope by the ratio of the two GPUs' rooflines of the op mix, the floor by their
         machines' host factors, then held within a learned band around the floor the op
         graph gives the target (launches x cost per launch: a host that caps the source's
         steps is not carried to a target that need not have it); H = O', D = s' b, g = p,
         beliefs from the carry's held-out spreads. A CPU source (no figures): a CPU's step
         time says nothing of a GPU's, so only the op graph and the learned constants reach
         it: s' from the op mix at the population's efficiencies (``roofline.absolute``), H
         from the operators one step launches times the learned cost per launch
         (``roofline.graph_floor``); facts written before launches were counted keep the
         source's intercept as H, as on the flops route.
  fp32-peak rule: the same without an op mix: ``roofline.carry``'s fallback, whose weights
         are chosen so that its worst held-out pair is no worse than the fp32-peak ratio
         (with the shipped constants it is that ratio, floor and slope alike).
  curve: (without the roofline constants) the source type has catalog figures and a device
         curve (``device_curve``: a floor F, then c seconds per sample once the batch fills the
         device, measured on at least three batch sizes). The curve moves to the target by its
         speed and size (``DeviceShape.carry``): H = F' (the floor, with its belief h),
         D = c' * b (with e), and g is the shape's sharpness, so below the knee F'/c' the step
         sits on the floor and above it grows linearly; the beliefs' spreads are the shape's,
         learned by carrying every measured accelerator's curves to every other one, plus the
         source curve's own uncertainty.
  ratio: the source type has an fp32 peak (the curve and roofline routes need both types'
         bandwidth too). Its measured alpha_c + beta_c*b already overlaps host and device:
         the device part is what is left once the host floor is taken out by the same smooth
         max, D_src = ((alpha_c + beta_c*b)**g - alpha_c**g)**(1/g), and it moves by the
         accelerator speed-up, D1 = D_src * peak_src / peak_dst (geometric mean with the
         memory-bandwidth ratio when both are known). A type with the source's figures gets
         the source's prediction back; at large batches the whole line moves with the
         accelerator, at small ones the host floor stays.
  flops: the profile counted FLOPs per sample, no op mix (a CPU source has no device part):
         D1 = flops_per_sample * b / peak_dst.
h, e and n are a joint lognormal belief (``posterior.LogBeliefs``): wide before the target type
is measured, narrowed by its measured steps (``TransferFit.update``, the Bayesian posterior
under the same belief: each step informs the factor it is sensitive to, a step on the floor the
host factor and a step past the knee the efficiency, so predictions at batches never measured
are no worse than the cold ones in expectation), and the interval shrinks only as far as that.
The interval is the delta method's in the logs, widened where needed so that neither end lies
below that end of any part's own interval: a smooth max is at least each part.

Synchronisation moves with the gradient size (profile facts) or the network figures; where
neither is known, one-worker configurations are still carried and only those that synchronise
are refused (``sync_missing``).

Known limits, measured against real runs (benchmarks/transfer_accuracy.py): a floor from
the op graph's launches misses a reference model's own by a factor of about 1.5 at one sd,
and a recurrent model's by an order of magnitude (cuDNN launches per time step); a
machine's host floor is not in its catalog figures (the Azure ND40rs_v2 traces pay ~100 ms
per step where other machines pay ~10: carried from such a machine the floor is held near the
op graph's, but carried to one nothing says what its host costs); and the reference clusters'
networks differ by more than any catalog figure says (``SYNC_PRIOR``: x/÷ 8.4 at 90%; the DGX
A100's NVLink and eight rails sync 4-8x faster than the rest), so a carried sync is wide
until a multi-worker run of the type is measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import optimize

from srifty_kit.errors import InputError
from srifty_kit.model import posterior, roofline
from srifty_kit.model.device_curve import DeviceCurve, DeviceShape, speed
from srifty_kit.model.fit import CONFIG_KEYS, BatchCorrection, aggregate, with_per_node
from srifty_kit.model.intervals import two_sided_z
from srifty_kit.model.physics import (
    StepParams,
    compute_time,
    overlap,
    sync_share,
    sync_time,
    underlap,
)
from srifty_kit.model.posterior import LogBeliefs

PEAK_COLUMN = "gpu_fp32_tflops"  # dense fp32 peak per GPU: training without mixed precision
MEMORY_COLUMN = "gpu_mem_bw_gbps"  # memory bandwidth per GPU
# Smooth max of host and device time. gamma=1 would add them (no overlap), gamma -> inf take
# the larger. Eager steps sit between: the device queue runs ahead of a host-bound stretch and
# drains in a device-bound one, and a step mixes both (many small kernels in the optimizer and
# normalisation, a few large ones in the matmuls). 2 puts a balanced step at 1.41x either
# part, halfway in log between sum (2x) and max (1x). An assumption, stated to be argued with.
HOST_GAMMA = 2.0
# Beliefs, as (median, log-sd). Assumptions, stated so they can be argued with:
# - host factor h, GPU source to GPU target by catalog ratio: the same framework launches the
#   same ops (a few to ~20 us each, tens to hundreds per step, plus the optimizer) from host
#   CPUs of the same class (2.5-3.5 GHz server cores on every GPU instance type); median 1, a
#   factor 2 at one sd
HOST_RATIO = (1.0, np.log(2.0))
# - host factor h from a profile's intercept (usually a CPU here): it is host work too
#   (dispatch per op, the optimizer's loop over parameters), part of it arithmetic a GPU would
#   do faster, while a GPU adds a launch per op: median 1, a factor 2.5 at one sd
HOST_FLOPS = (1.0, np.log(2.5))
# - the host floor is never below the host work of the smallest eager training step: ~20 ops
#   (one layer's forward, the loss, autograd's backward, an optimizer step) at ~5 us of
#   dispatch and launch each, unless a measured step was quicker (CUDA graphs, a compiled
#   step). A fitted intercept below it is noise, or was fixed at 0 when a single batch size
#   was measured; a carried step must not become nanoseconds through it
HOST_FLOOR_MIN_S = 1e-4
# - achieved fraction of the dense fp32 peak in training: ~0.15-0.8 across CNNs and
#   transformers (e.g. ResNet-50 on a T4 reaches ~0.6 of 8.1 TFLOP/s in the Pollux g4dn traces:
#   ~24.6 GFLOP per sample fwd+bwd at ~210 samples/s); median 0.4, a factor 2 either way at 1 sd
COMPUTE_EFFICIENCY = (0.4, np.log(2.0))
# - the same model on another GPU keeps its fraction of peak within ~1.5x (one sd)
EFFICIENCY_RATIO = (1.0, np.log(1.5))
# - a source's fitted sync time moved to another network by the ratio of the two types'
#   network_gbps (no gradient size known): median 1, and the log sd by which two networks'
#   achieved shares of their rates differ for one model, learned by ``learn_network_ratio``
#   on the reference clusters with a stated network (AWS g4dn.12xlarge, Azure ND40rs_v2, DGX
#   A100: three pairs, six models, two nodes). It replaced a hand-set factor 2 (log sd 0.69);
#   ``benchmarks/transfer_accuracy.py`` prints each pair's spread and fails when it is stale
NETWORK_RATIO = (1.0, 0.96)
# - inside a node the ring's nominal link is PCIe 3.0 x16: 15.75 GB/s per direction (PCI-SIG
#   3.0 spec, 126 Gbit/s); the catalog says nothing of NVLink, so ``SyncPrior.eff_intra`` is a
#   share of this rate whatever the node's links are
INTRA_NODE_GBPS = 126.0


class SyncPrior(NamedTuple):
    """What a carried fit believes of synchronisation on links it never measured, from the
    gradient size (profile facts) and the target's catalog figures:

        T_s = 2(g-1) lat_intra + 2(g-1)/g G / (eff_intra INTRA_NODE_GBPS)    one node
        T_s = 2(k-1) lat_inter + 2(n-1)/n G / (eff_inter network_gbps)       k > 1 nodes
        log T_s,true ~ N(log T_s, log_sd**2)  one draw per type, shared by its models'
                                              configurations (the belief's network factor)

    (physics' ring with its NIC contention and decay off: what the reference clusters'
    exposed sync times taught, ``learn_sync_prior``).
    """

    lat_intra: float  # seconds per ring step inside a node: launch, handshake, a slower
    #                   worker's wait (the measured sync counts it), at the typical rate
    lat_inter: float  # seconds per ring step that crosses a node boundary
    eff_intra: float  # achieved share of INTRA_NODE_GBPS
    eff_inter: float  # achieved share of the catalog's network_gbps
    log_sd: float  # a new type's log T_s about the above: between types and models, and within
    source: str = ""

    def applied(self, params: StepParams, grad_bytes, network_gbps) -> StepParams:
        """``params`` with this ring's sync terms (what ``physics.sync_time`` reads) for
        ``grad_bytes`` over links of ``network_gbps`` (numbers, or arrays of one per
        configuration); a network_gbps of 0 or NaN leaves nothing to cross nodes with
        (bw_inter 0)."""
        net = np.asarray(network_gbps, float)
        known = net > 0
        inter = np.where(
            known, grad_bytes / _gbytes_per_s(self.eff_inter * np.where(known, net, 1.0)), 0.0
        )
        intra = np.asarray(grad_bytes / _gbytes_per_s(self.eff_intra * INTRA_NODE_GBPS), float)
        return params._replace(
            lat_intra=self.lat_intra,
            bw_intra=float(intra) if intra.ndim == 0 else intra,
            lat_inter=self.lat_inter,
            bw_inter=float(inter) if inter.ndim == 0 else inter,
            share=0.0,
            decay=0.0,
        )


# Learned by ``learn_sync_prior`` from the exposed sync time of every multi-worker row of the
# five reference clusters (../shared/reference/measurements: AWS g4dn.12xlarge 50 Gbit,
# Azure ND40rs_v2 100 Gbit, DGX A100 1,600 Gbit; one-node rows also of the Quadro RTX 6000
# and RTX 2080 Ti machines, whose network the campaigns do not state), with the gradient
# bytes of ``measure.reference_models``. Before it a hand-set belief (half the link's rate,
# x/÷ 2, 20 and 50 us a ring step) held 22-54% of a held-out cluster's sync times in its 90%
# interval (mean 40%): across nodes the measured sync was 3.9-7.4x its median, and a small
# model's sync is milliseconds of fixed cost a step, not microseconds. Learned with each
# cluster held out, 42-100% (mean 79%; the DGX's NVLink and eight rails sync faster than the
# others teach). ``benchmarks/transfer_accuracy.py`` prints these and fails when this is stale.
SYNC_PRIOR = SyncPrior(
    1.04e-3,
    3.32e-3,
    0.485,
    0.188,
    1.29,
    "a belief learned on the sync times of five reference clusters (transfer.SYNC_PRIOR)",
)
# one step's own scatter around its configuration's mean (reference README: ~3%) plus the
# structure's misfit: the spread of a single new observation given exact constants
STEP_NOISE = 0.05
# the factors of the belief, in the order of LogBeliefs.mean: H = alpha_c * exp(+host),
# D = D1 * exp(-compute), T_s = S1 * exp(-network)
FACTORS = ("host", "compute", "network")
_SIGN = np.array([1.0, -1.0, -1.0])


@dataclass
class TransferFit:
    """A step-time model carried to another instance type: constants plus their beliefs.

    ``base`` holds the constants at factor 1: alpha_c the host floor, beta_c the device line's
    seconds per sample, the sync terms at network efficiency 1. The point prediction applies
    the beliefs' medians.
    """

    base: StepParams
    # D1 = ((device_intercept + beta_c*b)**g - device_hidden**g)**(1/g): the source's line at
    # the target's speed, less the host floor it contained (both 0 on the flops route)
    device_intercept: float
    device_hidden: float
    beliefs: LogBeliefs
    source: str  # where the constants came from, for the user
    n_observed: int = 0
    notes: list[str] = field(default_factory=list)
    max_nodes: int = 1  # kept for the interface of fitted groups
    max_workers: int = 1
    # the source's per-batch compute shape, carried: the same layers at the same batch sizes
    correction: BatchCorrection | None = None
    # T_c = (H**g + D**g)**(1/g): HOST_GAMMA on the ratio and flops routes, the device
    # curve's sharpness on the curve route
    host_gamma: float = HOST_GAMMA
    noise: float = STEP_NOISE  # one step's log-sd around the carried structure
    # why sync inside one node / across nodes cannot be carried ('' when it can): those
    # configurations predict inf (refused), one-worker ones are carried
    sync_missing: tuple[str, str] = ("", "")
    route: str = ""  # how T_c was carried, in words (explain's route column)
    # roofline routes from a GPU: (alpha_c, beta_c, O, s) of the source, its compute line and
    # the curve refitted to it. T_c = (H**g + D**g)**(1/g) * m(b), m = line(b) / curve(b)
    # (``correction`` applies to the line): the source's own compute at the target's speed,
    # so a target identical to the source gets the source's compute back at any batch
    source_curve: tuple[float, float, float, float] | None = None
    # the roofline route's carry for once a step on the target is measured
    # (``roofline.Learned.after_step``): (O', s', 2x2 cov of the host and compute factors,
    # noise, route); ``update`` starts from it. Not saved: a carried fit in a model file has
    # been updated already
    measured_curve: tuple | None = None
    # where in the range of the batches asked about, in log batch (0 the smallest, 1 the
    # largest), one measured step narrows this carry most: the roofline constants'
    # ``Learned.measured().probe_quantile``, the middle without them. Not saved either
    probe_quantile: float = 0.5

    def _parts(self, theta: np.ndarray, num_nodes, num_workers, local_bsz, per_node) -> tuple:
        """(H, D, T_s) at log factors ``theta`` (numpy broadcasting)."""
        b = np.asarray(local_bsz, float)
        line = self.device_intercept + self.base.beta_c * b
        factor = 1.0 if self.correction is None else self.correction.factor(b)
        m = 1.0
        if self.source_curve is not None:  # the source's line over its refitted curve
            a_s, b_s, floor_s, slope_s = self.source_curve
            g = self.host_gamma
            m = (a_s + b_s * b) * factor / (floor_s**g + (b * slope_s) ** g) ** (1 / g)
        else:
            line = line * factor
        scale = np.exp(_SIGN * theta)
        host = self.base.alpha_c * scale[0] * m
        if self.device_hidden > 0:
            line = underlap(line, self.device_hidden, HOST_GAMMA)
        device = line * scale[1] * m
        sync = sync_time(self.base, num_nodes, num_workers, per_node) * scale[2]
        return host, device, sync

    def _step(self, host, device, sync) -> tuple[np.ndarray, np.ndarray]:
        """(T, T_c) from the parts."""
        t_c = overlap(host, device, self.host_gamma)
        return overlap(t_c, sync, self.base.gamma), t_c

    def predict(
        self, num_nodes, num_workers, local_bsz, per_node, level: float, beliefs: tuple = ()
    ) -> dict:
        """Point, interval and breakdown (numpy broadcasting); inf where a configuration needs
        a synchronisation time that could not be carried (``refused`` says why). Given
        ``beliefs`` = (group label, network label), also ``"belief"``: the ``posterior.Belief``
        read from the same interval (its point inf where refused, too)."""
        parts = self._parts(self.beliefs.mean, num_nodes, num_workers, local_bsz, per_node)
        total, t_c, lo, hi = self._interval(parts, level)
        out = {
            "step_time_s": total,
            "step_time_lo": lo,
            "step_time_hi": hi,
            "compute_s": t_c,
            "sync_s": parts[2],
        }
        if beliefs:
            # a carried fit's error is its group's, shared by its configurations, except what
            # one measured step would leave of it: each configuration's own part, so that a
            # probe valued on this belief (``decide.probes``) reveals what the update would
            offsets = (np.log(total / lo), np.log(hi / total))
            left = self._left_after_one_step(num_nodes, num_workers, local_bsz, per_node, level)
            belief = posterior.from_offsets(
                total, offsets, offsets, *beliefs, level=level, own=left
            )
        refused = self.refused(num_nodes, num_workers)
        if np.any(refused):
            out = {k: np.where(refused, np.inf, v) for k, v in out.items()}
            if beliefs:
                belief.point = np.where(refused, np.inf, belief.point)
        if beliefs:
            out["belief"] = belief
        return out

    def _grads(self, parts: tuple) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """(T, T_c, d log T / d log factor for each factor) from the parts."""
        total, t_c = self._step(*parts)
        # d log T / d log H = (1 - s) w, / d log D = (1 - s)(1 - w), / d log T_s = s, with s
        # the sync share of T and w the host share of T_c
        w = sync_share(parts[1], parts[0], self.host_gamma)
        s = sync_share(t_c, parts[2], self.base.gamma)
        grads = [(1.0 - s) * w * _SIGN[0], (1.0 - s) * (1.0 - w) * _SIGN[1], s * _SIGN[2]]
        return total, t_c, grads

    def _spread(self, parts: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(T, T_c, log sd of T) from the parts at the beliefs' medians (delta method in log
        space, plus one step's noise)."""
        total, t_c, grads = self._grads(parts)
        return total, t_c, np.sqrt(self.beliefs.log_sd(grads) ** 2 + self.noise**2)

    def _interval(self, parts: tuple, level: float) -> tuple[np.ndarray, ...]:
        """(T, T_c, lower end, upper end) at ``level`` from the parts at the beliefs' medians."""
        total, t_c, log_sd = self._spread(parts)
        z = two_sided_z(level)
        spread = np.exp(z * log_sd)
        lo, hi = total / spread, total * spread
        # a smooth max is at least each of its parts, so every quantile of the step is at
        # least that quantile of each part: the interval never ends below a part's own ends
        for part, name in zip(parts, FACTORS, strict=True):
            h_part = z * np.hypot(self.beliefs.sd(name), self.noise)
            lo = np.maximum(lo, part * np.exp(-h_part))
            hi = np.maximum(hi, part * np.exp(h_part))
        return total, t_c, lo, hi

    def _left_after_one_step(
        self, num_nodes, num_workers, local_bsz, per_node, level: float
    ) -> np.ndarray:
        """Each configuration's log sd once one step is measured on the target: the update
        this fit makes from a step of one worker at ``probe_quantile`` of the asked batches'
        range in log batch (where a measured step narrows the carry most), read at each as
        ``predict`` reads it at ``level`` (``_interval``'s log half-width over z: with each
        part's own ends, which the floor keeps where a step on the slope does not narrow it).

        A linear-Gaussian update's spread does not depend on the value measured, only on where
        it was measured, so it is taken in closed form (``LogBeliefs.observed``). What it
        leaves is the curve's shape away from that batch, the network's belief (one worker
        does not synchronise) and the carry's own noise, less half of what it leaves at the
        measured batch itself, which conditioning on the probe's run gives back.
        """
        b = np.asarray(local_bsz, float)
        seen = b[np.isfinite(b) & (b > 0)]
        if seen.size == 0:
            return np.zeros(np.shape(b))
        at = np.array([roofline.position_batch(seen, self.probe_quantile)])
        fit = self._as_measured() if self.measured_curve is not None else self
        grad = [g[0] for g in fit._grads(fit._parts(fit.beliefs.mean, 1.0, 1.0, at, 1.0))[2]]
        # what ``update`` leaves after one step of one worker (no sync residual) there
        after = replace(fit, beliefs=fit.beliefs.observed(np.array(grad), fit.noise))

        def read(*config) -> np.ndarray:
            _, _, lo, hi = after._interval(after._parts(after.beliefs.mean, *config), level)
            return np.log(hi / lo) / (2 * two_sided_z(level))

        left = read(num_nodes, num_workers, local_bsz, per_node)
        # conditioning on a run of the probe adds the probe's own part (var_y in
        # ``Belief.condition``) to every other configuration's: half of what the update leaves
        # at the measured batch, given to each, comes back that way
        at_step = read(1.0, 1.0, at, 1.0)
        return np.sqrt(np.maximum(left**2 - 0.5 * at_step[0] ** 2, 0.0))

    def refused(self, num_nodes, num_workers) -> np.ndarray:
        """Which configurations need a synchronisation time this fit cannot carry."""
        k, n = np.asarray(num_nodes), np.asarray(num_workers)
        intra, inter = (bool(reason) for reason in self.sync_missing)
        return ((k == 1) & (n > 1) & intra) | ((k > 1) & inter)

    def refusal(self, num_nodes, num_workers) -> str:
        """Why the configurations ``refused`` marks cannot be predicted, in words."""
        k = np.asarray(num_nodes)
        across = bool(np.any(self.refused(num_nodes, num_workers) & (k > 1)))
        return self.sync_missing[1] if across else self.sync_missing[0]

    def update(self, rows: pd.DataFrame) -> TransferFit:
        """A new fit whose beliefs have seen measured steps of the target type.

        Each configuration's mean step is one observation of log T; where ``sync_time_s`` was
        measured on several workers, also of the exposed sync T - T_c (as in fit).
        """
        if any(self.sync_missing):  # steps that synchronise cannot inform what is missing
            rows = rows[~self.refused(rows["num_nodes"], rows["num_workers"])]
        if rows.empty:
            return self
        if self.measured_curve is not None:  # the first steps measured: read with its carry
            return self._as_measured().update(rows)
        configs = aggregate(with_per_node(rows))
        k, n, b, g = (configs[c].to_numpy(float) for c in CONFIG_KEYS)
        step = configs["step"].to_numpy(float)
        sync = configs["sync"].to_numpy(float)
        has_sync = (n > 1) & np.isfinite(sync)

        def residuals(theta: np.ndarray) -> np.ndarray:
            total, t_c = self._step(*self._parts(theta, k, n, b, g))
            exposed = (total - t_c - sync) / step
            return np.concatenate([np.log(total / step), exposed[has_sync]])

        return replace(
            self,
            beliefs=self.beliefs.update(residuals, self.noise),
            n_observed=self.n_observed + len(rows),
            notes=[*self.notes, f"updated with {_steps(len(rows))} of the target type"],
            route=f"{self.route}, updated by {_steps(len(rows))}",
            max_nodes=max(self.max_nodes, int(k.max())),
            max_workers=max(self.max_workers, int(n.max())),
        )

    def _as_measured(self) -> TransferFit:
        """This fit with the carry meant for measured steps (``measured_curve``) in place of
        the cold one: its floor and slope, their covariance and noise; the network's belief
        is kept."""
        floor, slope, cov, noise, route = self.measured_curve
        full = self.beliefs.cov.copy()
        full[:2, :2] = cov
        return replace(
            self,
            base=self.base._replace(alpha_c=floor, beta_c=slope),
            beliefs=LogBeliefs(self.beliefs.names, self.beliefs.mean.copy(), full),
            noise=noise,
            route=route,
            measured_curve=None,
        )


def _steps(n: int) -> str:
    return f"{n} measured step{'' if n == 1 else 's'}"


def _figures(catalog: pd.DataFrame | None, instance_type: str) -> pd.Series | None:
    """The catalog row of a type, or None when the catalog does not list it."""
    if catalog is None:
        return None
    # one row by position: a boolean mask over the frame copied every column (a search
    # carries dozens of types, each looked up twice)
    at = np.flatnonzero(catalog["instance_type"].to_numpy() == instance_type)
    return None if at.size == 0 else catalog.iloc[at[0]]


def _number(row: pd.Series | None, column: str) -> float | None:
    if row is None or column not in row.index or pd.isna(row[column]):
        return None
    value = float(row[column])
    return value if value > 0 else None


def _gbytes_per_s(gbits: float) -> float:
    return gbits * 1e9 / 8.0


def _compute_route(
    params: StepParams,
    src: pd.Series | None,
    peak_dst: float,
    dst: pd.Series,
    flops_per_sample: float | None,
) -> tuple[float, float, dict[str, tuple[float, float]], list[str]] | None:
    """(beta_c, scale of the source line, priors of host and compute, notes), or None."""
    peak_src = _number(src, PEAK_COLUMN)
    if peak_src is not None:
        scale = peak_src / peak_dst
        compute_sd = EFFICIENCY_RATIO[1]
        notes = [f"device work scaled by {PEAK_COLUMN} {peak_src:g} -> {peak_dst:g}"]
        mem_src, mem_dst = _number(src, MEMORY_COLUMN), _number(dst, MEMORY_COLUMN)
        if mem_src and mem_dst:
            # training mixes compute-bound (convolutions, matmuls) and memory-bound layers
            # (normalisation, activations, optimizer): the geometric mean of the two speed-ups,
            # with the gap between them added to the belief's spread
            gap = 0.5 * np.log((mem_src / mem_dst) / scale)
            scale = float(np.sqrt(scale * mem_src / mem_dst))
            compute_sd = float(np.hypot(compute_sd, gap))
            notes.append(f"and by {MEMORY_COLUMN} {mem_src:g} -> {mem_dst:g} (geometric mean)")
        priors = {"host": HOST_RATIO, "compute": (EFFICIENCY_RATIO[0], compute_sd)}
        return params.beta_c * scale, scale, priors, notes
    if flops_per_sample:
        notes = [f"device work from {flops_per_sample:.3g} FLOP/sample at {peak_dst:g} TFLOP/s"]
        priors = {"host": HOST_FLOPS, "compute": COMPUTE_EFFICIENCY}
        return flops_per_sample / (peak_dst * 1e12), 0.0, priors, notes
    return None


def _curve_route(
    curve: DeviceCurve | None,
    shape: DeviceShape | None,
    src: pd.Series | None,
    dst: pd.Series,
) -> tuple[float, float, np.ndarray, list[str]] | None:
    """(F', c', covariance of the host and compute factors, notes), or None without a curve
    or without both types' peak and bandwidth."""
    figures = [_number(row, c) for row in (src, dst) for c in (PEAK_COLUMN, MEMORY_COLUMN)]
    if curve is None or shape is None or None in figures:
        return None
    w = shape.bandwidth_weight
    speed_src, speed_dst = speed(*figures[:2], w), speed(*figures[2:], w)
    floor, slope = shape.carry(curve, speed_src, speed_dst)
    # H = F' exp(+host), D = c' b exp(-compute): the source fit's error in log F adds to the
    # host factor, its error in log c to minus the compute factor
    var_f, cov_fc, var_c = curve.log_cov
    cov = np.array([[shape.host_sd**2 + var_f, -cov_fc], [-cov_fc, shape.compute_sd**2 + var_c]])
    notes = [
        f"device curve of the source: a floor of {1e3 * curve.floor_s:.3g} ms, then "
        f"{1e3 * curve.per_sample_s:.3g} ms per sample past batch {curve.knee:.0f} "
        f"({curve.batch_sizes} batch sizes measured)",
        f"carried by speed {PEAK_COLUMN}**{1 - w:g} x {MEMORY_COLUMN}**{w:g} "
        f"{speed_src:.4g} -> {speed_dst:.4g}: a floor of {1e3 * floor:.3g} ms, "
        f"{1e3 * slope:.3g} ms per sample past batch {floor / slope:.0f}",
        f"curve shape {shape.basis}",
    ]
    return floor, slope, cov, notes


def _sync_route(
    params: StepParams,
    src: pd.Series | None,
    dst: pd.Series,
    grad_bytes: float | None,
    target_type: str,
    prior: SyncPrior,
) -> tuple[StepParams, tuple[float, float], str, tuple[str, str]]:
    """(params with the target's sync terms, network belief, note, why intra / inter cannot
    be carried).

    From the gradient size the links are the target's, at ``prior``'s constants (the source's
    latencies, NIC contention and decay belong to its own links: gloo over CPU loopback pays
    milliseconds a step on a busy 2-core host). Without it, a measured source's fitted sync
    moves by the ratio of the two types' network_gbps. What cannot be carried is 0 in the
    constants and named in the last item: one-worker configurations never need it, the others
    are refused.
    """
    net_dst = _number(dst, "network_gbps")
    net_src = _number(src, "network_gbps")
    no_net = f"the catalog has no network_gbps for {target_type!r}"
    if grad_bytes:
        note = f"sync from {grad_bytes:.3g} gradient bytes over the links ({prior.source})"
        params = prior.applied(params, grad_bytes, net_dst or 0.0)
        across = (
            ""
            if net_dst
            else f"cannot carry synchronisation across nodes to {target_type!r}: {no_net}"
        )
        return params, (1.0, prior.log_sd), note, ("", across)
    if net_src and net_dst and params.bw_inter > 0:
        # the source's fitted seconds already include its efficiency: compare like with like
        note = f"sync scaled by network_gbps {net_src:g} -> {net_dst:g}"
        params = params._replace(bw_inter=params.bw_inter * net_src / net_dst)
        return params, NETWORK_RATIO, note, ("", "")
    inside = (
        ""
        if params.bw_intra > 0
        else f"cannot carry synchronisation inside a node to {target_type!r}: no grad_bytes "
        "measured and no multi-worker run of the source"
    )
    across = (
        f"cannot carry synchronisation across nodes to {target_type!r}: no grad_bytes "
        "measured and no network figures for both types"
    )
    note = "sync: only what the measurements support (see the refused configurations)"
    return params._replace(bw_inter=0.0), NETWORK_RATIO, note, (inside, across)


# every ring constant 0: what ``SyncPrior.applied`` fills in for learning and scoring
_NO_STEP = StepParams(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)


def sync_table(rows: pd.DataFrame, grad_bytes, network_gbps) -> pd.DataFrame:
    """The rows a sync belief is learned from: several workers, a positive sync time, a model
    with gradient bytes, and across nodes a type with a known network; with ``per_node``,
    ``grad_bytes`` and ``network_gbps`` (NaN where unknown) columns."""
    table = with_per_node(rows)
    table = table[
        (table["num_workers"] > 1)
        & (table["sync_time_s"] > 0)
        & table["model"].isin([m for m, b in grad_bytes.items() if b and b > 0])
    ]
    table = table.assign(
        grad_bytes=table["model"].map(grad_bytes).astype(float),
        network_gbps=table["instance_type"]
        .map(lambda t: network_gbps.get(t, np.nan))
        .astype(float),
    )
    return table[(table["num_nodes"] == 1) | (table["network_gbps"] > 0)]


def ring_seconds(prior: SyncPrior, table: pd.DataFrame) -> np.ndarray:
    """``prior``'s T_s for each row of ``table`` (columns num_nodes, num_workers, per_node,
    grad_bytes, network_gbps), by ``physics.sync_time``."""
    k, n, g = (table[c].to_numpy(float) for c in ("num_nodes", "num_workers", "per_node"))
    params = prior.applied(_NO_STEP, table["grad_bytes"].to_numpy(float), table["network_gbps"])
    return sync_time(params, k, n, g)


def _achieved(rows: pd.DataFrame, grad_bytes, network_gbps) -> pd.Series:
    """Per (instance type, model): the median log of the sync time at the fewest nodes above
    one over the gradient's time at the NIC's full rate, 2(n-1)/n G / network_gbps."""
    table = sync_table(rows, grad_bytes, network_gbps)
    table = table[table["num_nodes"] > 1]
    table = table[
        table["num_nodes"] == table.groupby("instance_type")["num_nodes"].transform("min")
    ]
    ideal = ring_seconds(SyncPrior(0.0, 0.0, 1.0, 1.0, 0.0), table)
    logs = pd.Series(np.log(table["sync_time_s"].to_numpy(float) / ideal), index=table.index)
    return logs.groupby([table["instance_type"], table["model"]]).median()


def learn_network_ratio(
    rows: pd.DataFrame, grad_bytes: Mapping[str, float], network_gbps: Mapping[str, float]
) -> tuple[float, dict[tuple[str, str], float]]:
    """The log sd of a sync time moved between two networks by their network_gbps ratio
    (``NETWORK_RATIO``'s): for every pair of instance types and every model measured on both,
    the difference of their achieved shares of their NIC rates (``_achieved``); its root mean
    square about 0 (the ratio's median is 1).

    Args:
        rows, grad_bytes, network_gbps: as :func:`learn_sync_prior` takes them.

    Returns:
        (log sd, each pair's root mean square over its models).

    Raises:
        InputError: no two types with a model measured across nodes on both.
    """
    achieved = _achieved(rows, grad_bytes, network_gbps).unstack("instance_type")
    pairs = {}
    for i, a in enumerate(achieved.columns):
        for b in achieved.columns[i + 1 :]:
            diff = (achieved[a] - achieved[b]).dropna()
            if len(diff):
                pairs[(a, b)] = diff.to_numpy()
    if not pairs:
        raise InputError(
            "no two instance types with one model measured across nodes on both",
            column="sync_time_s",
            fix="give multi-node rows with sync_time_s of two types with network_gbps",
        )
    every = np.concatenate(list(pairs.values()))
    rms = {k: float(np.sqrt(np.mean(v**2))) for k, v in pairs.items()}
    return float(np.sqrt(np.mean(every**2))), rms


def learn_sync_prior(
    rows: pd.DataFrame,
    grad_bytes: Mapping[str, float],
    network_gbps: Mapping[str, float],
    source: str = "",
) -> SyncPrior:
    """Learn a :class:`SyncPrior` from measured multi-worker steps of several instance types.

    The four constants are fitted to log ``sync_time_s`` (soft-L1, so a campaign's stray rows
    do not lead; each (type, model, one node or several) weighted alike, however many rows
    it has); ``log_sd`` is the spread of the residuals: of each group's median between the
    groups, plus within them, since a new type's models differ as these did.

    Args:
        rows: measurements with ``model``, ``instance_type``, ``num_nodes``, ``num_workers``,
            ``sync_time_s`` (optionally ``placement``); rows of one worker, without a positive
            sync time or of a model without gradient bytes are left out, and rows across nodes
            of a type without ``network_gbps``.
        grad_bytes: model -> gradient bytes all-reduced each step.
        network_gbps: instance type -> its catalog ``network_gbps``.
        source: where the rows came from, for the prior's ``source``.

    Returns:
        The :class:`SyncPrior`.

    Raises:
        InputError: no row is left to learn from.
    """
    table = sync_table(rows, grad_bytes, network_gbps)
    if table.empty:
        raise InputError(
            "no multi-worker row with a sync time to learn the sync prior from",
            column="sync_time_s",
            fix="give rows of several workers with sync_time_s, of models in grad_bytes",
        )
    y = np.log(table["sync_time_s"].to_numpy(float))
    inter = (table["num_nodes"] > 1).to_numpy()
    group = pd.Series(list(zip(table["instance_type"], table["model"], inter, strict=True)))
    weight = 1.0 / np.sqrt(group.map(group.value_counts()).to_numpy(float))

    def ring(x: np.ndarray) -> np.ndarray:  # x = log(lat_intra, lat_inter, eff_intra, eff_inter)
        return ring_seconds(SyncPrior(*np.exp(x), 0.0), table)

    def resid(x: np.ndarray) -> np.ndarray:
        return (np.log(ring(x)) - y) * weight

    x0 = np.log([1e-4, 1e-4, 0.5, 0.5])
    x = optimize.least_squares(resid, x0, loss="soft_l1", f_scale=0.3).x
    r = pd.Series(y - np.log(ring(x)))
    medians = r.groupby(group).transform("median")
    between = float(r.groupby(group).median().std(ddof=1)) if group.nunique() > 1 else 0.0
    log_sd = float(np.hypot(between, np.std(r - medians)))
    lat_i, lat_e, eff_i, eff_e = (float(v) for v in np.exp(x))
    return SyncPrior(lat_i, lat_e, eff_i, eff_e, log_sd, source)


def _host_floor(
    params: StepParams, correction: BatchCorrection | None, min_bsz: float | None
) -> float:
    """The fitted intercept, raised to the smallest eager step's host work unless a measured
    step (at ``min_bsz``, the smallest batch measured) was quicker than that."""
    if min_bsz is not None:
        factor = 1.0 if correction is None else float(correction.factor(min_bsz))
        if float(compute_time(params, min_bsz)) * factor < HOST_FLOOR_MIN_S:
            return params.alpha_c  # e.g. CUDA graphs or a compiled step: less host work
    return max(params.alpha_c, HOST_FLOOR_MIN_S)


# how many batch sizes of the source's fitted compute line the roofline curve is refitted on
ROOFLINE_POINTS = 8


def _gpu_figures(row: pd.Series | None) -> roofline.GpuFigures | None:
    """A catalog row's roofline figures, or None (no row, not a CUDA GPU, a figure missing)."""
    if row is None:
        return None
    try:
        return roofline.figures(row.to_dict())
    except InputError:
        return None


def _roofline_route(
    params: StepParams,
    correction: BatchCorrection | None,
    bsz_range: tuple[float, float],
    src: pd.Series | None,
    dst: pd.Series,
    op_mix: dict | None,
    constants: roofline.Learned | None,
    names: tuple[str, str],
    op_trace: dict | None = None,
) -> tuple | None:
    """(floor O', slope s', 2x2 cov of (host, compute) factors, noise sd, sharpness, route,
    notes, ``TransferFit.source_curve``, ``TransferFit.measured_curve``) carried by
    ``roofline``, or None where it cannot (no constants, no figures of the target, a CPU
    source without an op mix). With an op mix and a CUDA ``op_trace`` taken on the source's
    GPU, the curve is carried class by class (``roofline.trace_ratio``) with the fallback's
    spread."""
    fig_dst = _gpu_figures(dst)
    if constants is None or fig_dst is None:
        return None
    fig_src = _gpu_figures(src)
    gpu_dst = str(dst.get("gpu_model"))
    if fig_src is None:  # a CPU (or a type without figures): only the op mix reaches a GPU
        if not op_mix:
            return None
        slope, sd, words = roofline.absolute(op_mix, fig_dst, constants, gpu_dst)
        graph = roofline.graph_floor(op_mix, constants, gpu_dst, names[1])
        if graph is not None:  # the op graph's launches: no CPU timing reaches the GPU
            host, host_sd, floor_words = graph
            route = "roofline (op graph alone)"
        else:  # facts written before launches were counted: the CPU's own intercept
            host, host_sd = _host_floor(params, correction, bsz_range[0]), HOST_FLOPS[1]
            floor_words = (
                f"host floor: the source's fitted intercept {params.alpha_c:.3g} s (at least "
                f"{HOST_FLOOR_MIN_S:g} s), x/÷ {np.exp(1.645 * host_sd):.1f} at 90%; profile "
                "again for a floor from the op graph's launches, which no CPU load moves"
            )
            route = "roofline (op mix, CPU profile)"
        cov = np.diag([host_sd**2, sd**2])
        noise = constants.scale * constants.step_sd
        notes = [floor_words, words]
        return host, slope, cov, noise, constants.sharpness, route, notes, None, None
    lo, hi = (float(b) for b in bsz_range)
    b = np.unique(np.geomspace(lo, max(hi, lo), ROOFLINE_POINTS).round(6))
    t = compute_time(params, b) * (1.0 if correction is None else correction.factor(b))

    def carried(learned: roofline.Learned) -> roofline.Carry:
        return roofline.carry(
            op_mix or None,
            fig_src,
            b,
            np.maximum(t, 1e-9),
            fig_dst,
            learned,
            source_gpu=str(src.get("gpu_model")),
            target_gpu=gpu_dst,
            source_machine=names[0],
            target_machine=names[1],
        )

    # H = O' exp(+host): the floor's error; D = s' b exp(-compute): minus the slope's
    signs = np.array([[1.0, -1.0], [-1.0, 1.0]])
    c = carried(constants)
    cov = c.prior_cov * signs
    src_curve = (params.alpha_c, params.beta_c, c.source_floor, c.source_slope)
    gpus = (str(src.get("gpu_model")), gpu_dst)
    traced = _traced_curve(op_trace, op_mix, b, c, (fig_src, fig_dst), constants, gpus, names)
    if traced is not None:  # the fallback's spread: no reference traces to learn its own
        return (*traced[:2], cov, c.step_sd, c.sharpness, *traced[2:], src_curve, None)
    measured = None
    if op_mix and constants.after_step:
        after = constants.measured()
        m = carried(after)
        lam = after.mix_weight
        words = f"roofline (op mix at weight {lam:.2f}: the curve's shape once a step is measured)"
        measured = (m.floor, m.slope, m.prior_cov * signs, m.step_sd, words)
    if op_mix and max(constants.mix_weight, constants.floor_mix_weight or 0.0) > 0:
        route = "roofline (op mix)"
    elif op_mix:  # the held-out pairs gave the op mix no weight against the fallback
        route = "fp32-peak rule (op mix given weight 0 by the held-out pairs)"
    elif (constants.bandwidth_weight, constants.fallback_floor_exponent) == (0.0, 1.0):
        route = "fp32-peak rule"
    else:
        route = "fallback rule (fp32/bandwidth blend, never worse than fp32 held out)"
    if c.floor_moved:
        route += "; floor held near the op graph's (the source's is not its operators')"
    notes = [
        f"compute curve of the source refitted on {b.size} batches {lo:g}-{hi:g}: a floor of "
        f"{1e3 * c.source_floor:.3g} ms, {1e3 * c.source_slope:.3g} ms per sample",
        f"carried: {c.route}: a floor of {1e3 * c.floor:.3g} ms, {1e3 * c.slope:.3g} ms per sample",
        f"roofline constants: {constants.basis}",
    ]
    return c.floor, c.slope, cov, c.step_sd, c.sharpness, route, notes, src_curve, measured


def _traced_curve(trace, op_mix, b, carried, figs, constants, gpus, machines) -> tuple | None:
    """(floor O', slope s', route, notes) of the trace route (``roofline.traced_curve`` on
    ``carried``, the carry refitted on the source's compute at ``b``); None without an op mix
    or a CUDA op trace taken on the source's GPU (``gpus``: source, target)."""
    if not (trace and op_mix and roofline.trace_matches(trace, gpus[0])):
        return None
    host = roofline.host_ratio(constants, gpus, machines)
    floor, slope = roofline.traced_curve(carried, trace, op_mix, b, *figs, host=host)
    traced = ", ".join(sorted(trace["batches"], key=int))
    notes = [
        f"op trace of {trace['device_name']} at batches {traced}: each operator class carried "
        f"by its own roofline ratio, the host part by a host factor of {host:.2f}: a floor of "
        f"{1e3 * floor:.3g} ms, {1e3 * slope:.3g} ms per sample",
        f"spread: the fallback's ({constants.basis}); no reference campaign holds op traces "
        "to learn this route's own",
    ]
    return floor, slope, "op trace (per class)", notes


def _curve_fit(
    base: StepParams,
    cov: np.ndarray,
    network: tuple[float, float],
    source: str,
    notes: list[str],
    **fields,
) -> TransferFit:
    """A carried fit whose compute is a curve already moved to the target (floor and slope in
    ``base``, their log covariance ``cov``): the host and device factors are 1, and the
    network's efficiency keeps its own belief (median, log-sd)."""
    full = np.zeros((3, 3))
    full[:2, :2] = cov
    full[2, 2] = network[1] ** 2
    beliefs = LogBeliefs(FACTORS, np.log([1.0, 1.0, network[0]]), full)
    return TransferFit(base, 0.0, 0.0, beliefs, source, 0, notes, **fields)


def build_transfer(
    params: StepParams,
    source_type: str,
    target_type: str,
    catalog: pd.DataFrame | None,
    flops_per_sample: float | None = None,
    grad_bytes: float | None = None,
    correction: BatchCorrection | None = None,
    min_bsz: float | None = None,
    curve: DeviceCurve | None = None,
    shape: DeviceShape | None = None,
    op_mix: dict | None = None,
    bsz_range: tuple[float, float] | None = None,
    constants: roofline.Learned | None | str = "reference",
    op_trace: dict | None = None,
    sync_prior: SyncPrior = SYNC_PRIOR,
) -> TransferFit:
    """Carry ``params`` fitted on ``source_type`` to ``target_type`` using catalog figures.

    Args:
        params, correction: the source's fitted constants and per-batch correction.
        source_type, target_type, catalog: the two types and the catalog with their figures.
        flops_per_sample, grad_bytes: profile facts (the flops route; sync by gradient size).
        min_bsz: the smallest local batch measured on the source: caps the assumed smallest
            host floor (host work never exceeds a measured step).
        curve, shape: the source's device curve and how curves move (the curve route).
        op_mix: the profile facts' op mix (``measure.opgraph``): opens the roofline route.
        bsz_range: the source's smallest and largest measured local batch (the batches its
            compute curve is refitted on for the roofline routes; default ``min_bsz`` alone).
        constants: the roofline's learned constants; ``"reference"`` (default) the shipped
            ones (``roofline.reference_learned``), None to leave the roofline routes out.
        op_trace: the profile facts' op trace (``measure.op_trace``): with the op mix and
            taken on the source's GPU (CUDA), the trace route.
        sync_prior: the belief about the target's links when ``grad_bytes`` is known
            (:class:`SyncPrior`; default the learned ``SYNC_PRIOR``).

    Returns:
        A :class:`TransferFit` whose ``route`` names how compute was carried.

    Raises:
        InputError: the target is not in the catalog, or no compute route is possible (the
            message names the missing figure and, where the catalog says it, why it is
            unknown); synchronisation that cannot be carried only refuses the configurations
            that need it.
    """
    dst = _figures(catalog, target_type)
    src = _figures(catalog, source_type)
    fix = "profile the model on this instance type, or give a catalog with its figures"
    if dst is None:
        raise InputError(
            f"instance type {target_type!r} is not in the catalog and was never "
            "measured for this model",
            column="instance_type",
            fix=fix,
        )
    peak_dst = _number(dst, PEAK_COLUMN)
    if peak_dst is None:
        why = dst.get("gpu_figures_source") if "gpu_figures_source" in dst.index else None
        why = f" ({why})" if isinstance(why, str) and why else ""
        raise InputError(
            f"the catalog has no {PEAK_COLUMN} for {target_type!r}{why}: cannot "
            "carry compute time there",
            column=PEAK_COLUMN,
            fix=fix,
        )
    params, network, sync_note, missing = _sync_route(
        params, src, dst, grad_bytes, target_type, sync_prior
    )
    extra = {"sync_missing": missing}
    if isinstance(constants, str):
        constants = roofline.reference_learned()
    lo = min_bsz if min_bsz is not None else 1.0
    roof = _roofline_route(
        params,
        correction,
        bsz_range or (lo, lo),
        src,
        dst,
        op_mix,
        constants,
        (source_type, target_type),
        op_trace,
    )
    if roof is not None:
        floor, slope, cov, noise, sharpness, route, notes, src_curve, measured = roof
        extra["probe_quantile"] = constants.measured().probe_quantile
        return _curve_fit(
            params._replace(alpha_c=floor, beta_c=slope),
            cov,
            network,
            f"{source_type} -> {target_type}",
            [*notes, sync_note],
            correction=correction,
            host_gamma=sharpness,
            noise=noise,
            route=route,
            source_curve=src_curve,
            measured_curve=measured,
            **extra,
        )
    carried = _curve_route(curve, shape, src, dst)
    if carried is not None:
        floor, slope, cov, notes = carried
        return _curve_fit(
            params._replace(alpha_c=floor, beta_c=slope),
            cov,
            network,
            f"{source_type} -> {target_type}",
            [*notes, sync_note],
            host_gamma=shape.sharpness,
            noise=shape.noise_sd,
            route="device curve",
            **extra,
        )
    compute = _compute_route(params, src, peak_dst, dst, flops_per_sample)
    if compute is None:
        raise InputError(
            f"cannot carry compute time from {source_type!r} to {target_type!r}: "
            f"no {PEAK_COLUMN} for the source and no flops_per_sample measured",
            column="flops_per_sample",
            fix="profile with srifty profile (it counts FLOPs per sample)",
        )
    beta, scale, priors, notes = compute
    host = _host_floor(params, correction, min_bsz)
    raised = "" if host == params.alpha_c else f" raised to {host:.3g} s (smallest eager step)"
    notes = [
        f"host floor: fitted intercept {params.alpha_c:.3g} s{raised}, not scaled by the "
        "accelerator",
        *notes,
        sync_note,
    ]
    base = params._replace(alpha_c=host, beta_c=beta)
    # base holds the constants at factor 1; the beliefs' medians are applied when predicting
    beliefs = LogBeliefs.prior(**priors, network=network)
    return TransferFit(
        base,
        params.alpha_c * scale,
        host * scale,
        beliefs,
        f"{source_type} -> {target_type}",
        0,
        notes,
        correction=correction,
        route="fp32/bandwidth ratio" if scale else "FLOPs count (CPU profile)",
        **extra,
    )
