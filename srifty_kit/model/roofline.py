"""Carry a measured step to another GPU by the roofline of the model's own op mix.

A one-GPU step at local batch ``b`` is a floor, then linear past a knee of sharpness ``p``:

    t(b) = (O^p + (b * s)^p)^(1/p)

``O`` is the fixed overhead (kernel launches, the host's input pipeline, a GPU not yet full)
and ``s`` the time per sample. Both are fitted on the source GPU's measured curve. ``s`` is
split by the op mix (``measure.opgraph``): each class ``c`` of operators is bound by
arithmetic or by memory, whichever its roofline says against the GPU's ridge point
``eta_a P / (eta_m BW)``:

    s_g = sum_c max(F_c / (eta_a,g * P_c,g), B_c / (eta_m,g * BW_g))

(``F_c``, ``B_c`` FLOPs and bytes per sample; ``P_c,g`` the tensor peak of the training dtype
for tensor-core operators, the fp32 peak otherwise). The target's slope is the source's
times the ratio of the two rooflines; the target's floor the source's times the ratio of
the two machines' host factors ``h``. Achieved efficiencies ``eta`` and host factors are
learned per reference GPU, pooled towards the population (a GPU never measured gets the
population's). A GPU that runs tensor-class operators on a tensor-core peak above its fp32
one (TF32 on the A100) reaches a far smaller share of it than a GPU without reaches of its
fp32 peak, so ``eta_a`` is pooled within each kind, and a tensor-core GPU never measured
gets its kind's (``_unseen``). The prediction is the source's *measured* step times the
ratio of the two curves, so a target identical to the source gets the source's time back.

The part of the source's slope its roofline does not explain (an operator far below its
class's peak) moves as the fallback moves a slope. Without facts (the fallback) the slope
moves with ``(P32_s / P32_t)^(1 - w) (BW_s / BW_t)^w`` and the floor with
``(h_t / h_s)^(1 - phi) (P32_s / P32_t)^phi``; ``(w, phi) = (0, 1)`` is the fp32-peak rule,
and ``(w, phi)`` is chosen so that its worst held-out pair is no worse than that rule's. The
op-mix route's slope and floor are blended with the fallback's in logs, at weights ``lambda``
and ``lambda_O``. Whatever the route, the carried floor is then held within a band around the
op graph's own (the launches one step makes times the learned cost per launch):

    O_graph exp(-k sd) <= O_t <= O_graph exp(k sd)

so that a source whose host caps its steps (a slow input pipeline) does not carry that cap to
a machine that need not have it. ``lambda``, ``lambda_O`` and ``k`` are chosen together on
held-out carries between the reference GPUs, like ``(w, phi)``: for their worst pair against
the fp32-peak rule. Spreads are on the log scale (a location and a scale); one
or two measured steps on the target update the floor and slope errors as a linear-Gaussian
model (``Carry.update``). ``Carry.route`` says which route a prediction took (for ``explain``).

With a CUDA op trace of the source (``measure.op_trace``: the step's device time per operator
class, its host part and what no operator claimed), the step is carried class by class
instead (:func:`traced_step`, Habitat's rule per class): each class's measured time by the
ratio of its own roofline on the two GPUs, so no efficiency is assumed, the host part by the
host factor. No reference campaign holds such traces, so its spread is the fallback's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy import optimize, stats

from srifty_kit.errors import InputError

SHARPNESS = 2.0  # p in t = (O^p + (b s)^p)^(1/p): the knee's sharpness
STEP_SD_FLOOR = 0.03  # one measured step's log misfit is never below the ~3% noise floor
W_GRID = np.linspace(0.0, 1.0, 6)  # the fallback's bandwidth weight w, searched
# the floor's exponent phi on the fp32 ratio. Searched over 0..1 it was picked by the V100's
# host-bound rows (phi = 1 with the T4 held out) and made every pair into the T4 worse, so it
# is held at 0: a floor is host and launch time, which no GPU figure moves.
PHI_GRID = (0.0,)
# Without facts the floor may move with the fp32 ratio too: (w, phi) = (0, 1) is the fp32-peak
# rule itself, so the search below always has it to fall back on.
FALLBACK_PHI = (0.0, 0.5, 1.0)
# The op-mix route's floor and slope are blended with the fallback's, lambda searched the same
# way (lambda = 0 with the fallback at the fp32 rule is the rule itself).
LAMBDA_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
# k of the band the op graph holds a carried floor in (``_floor_band``), searched the same way
# once lambda is chosen (inf: no band, the carry as it was, so the search can always fall back)
BAND_GRID = (np.inf, 4.0, 3.0, 2.5, 2.0, 1.5, 1.0)
# Where on the target's batch range one measured step goes: a position q in log batch (0 the
# smallest, 1 the largest), chosen on held-out carries between the reference GPUs
# (``learn``): a step at the smallest batch is mostly floor and leaves the slope's error, one at
# the largest mostly slope; the curve's misfit between them decides which helps the most.
PROBE_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
# The correlation rho of a carry's floor and slope errors (a target faster or slower overall
# moves both), chosen with q on the same held-out carries: one step then moves the part it
# does not see as well. The interval's scale is calibrated under each rho.
CORRELATION_GRID = (0.0, 0.3, 0.6, 0.9)
TENSOR = "tensor"  # the op class that runs on tensor cores when the dtype allows


class GpuFigures(NamedTuple):
    """One GPU's datasheet figures, as the roofline uses them."""

    fp32_tflops: float  # P32: dense fp32 peak, in  t = F / (eta_a * P32)  for non-tensor ops
    tensor_tflops: float  # P_tensor: dense tensor peak of the training dtype (P32 if none)
    mem_bw_gbps: float  # BW: memory bandwidth, in  t = B / (eta_m * BW)


class Efficiency(NamedTuple):
    """What one GPU achieves, on the log scale (0 = the figure itself, or the population)."""

    log_arith: float  # log eta_a: achieved share of the arithmetic peak
    log_mem: float  # log eta_m: achieved share of the memory bandwidth
    log_host: float  # log h: the floor relative to the population's  O_g,m = o_m * h_g


@dataclass(frozen=True)
class Learned:
    """Efficiencies per GPU and the population's, the carry spreads, and where they came from."""

    per_gpu: dict[str, Efficiency]  # pooled estimates of the reference GPUs learned on
    population: Efficiency  # what a GPU never measured gets (eta_a: if without tensor cores)
    between_sd: Efficiency  # sd of each log efficiency across GPUs (partial pooling's tau)
    floor_sd: float  # log sd of a carried floor O against the target's own (held out)
    slope_sd: float  # log sd of a carried slope s (op-mix route)
    fallback_slope_sd: float  # log sd of a carried slope s (no facts)
    step_sd: float  # log sd of one step around its GPU's fitted curve
    scale: float  # multiplies every spread: calibrated to cover 90% of held-out carries
    bandwidth_weight: float  # w of the fallback slope ratio
    floor_exponent: float = 0.0  # phi in  O_t = O_s * (h_t / h_s)^(1-phi) * (P32_s / P32_t)^phi
    fallback_floor_exponent: float = 0.0  # the same phi, for the route without facts
    # lambda in  log x_t = lambda log x_roofline + (1 - lambda) log x_fallback  (x = O, s)
    mix_weight: float = 1.0
    # lambda_O in  log O_t = lambda_O log O_roofline + (1 - lambda_O) log O_fallback: the
    # floor's own weight, where it was learned apart from the slope's; None: lambda (constants
    # learned before it was, and the carry once a step is measured)
    floor_mix_weight: float | None = None
    sharpness: float = SHARPNESS
    basis: str = ""  # which rows chose the constants
    # log sd of a step whose slope is predicted outright from the op mix at the population's
    # efficiencies (no source GPU to take a ratio to: a CPU profile), at each reference GPU
    # and model's largest measured batch (``_absolute_sd``)
    absolute_sd: float = 1.0
    # the machine (instance type) each reference GPU was measured on: its host factor is that
    # machine's, so another machine with the same GPU gets the population's host factor
    machines: Mapping[str, str] = field(default_factory=dict)
    # q of PROBE_GRID: where one measured step on the target narrows the carry most (0, the
    # smallest batch, for constants learned before it was)
    probe_quantile: float = 0.0
    # rho of CORRELATION_GRID: corr(log floor error, log slope error) of a carry (0, as
    # before, for constants learned before it was)
    correlation: float = 0.0
    # Once a step is measured on the target its level is the step's, and what the carry adds
    # is the curve's shape (how the step grows with the batch), which the op mix may predict
    # better than the level: the fields above a carry uses then (mix_weight, floor_sd,
    # slope_sd, scale, correlation, probe_quantile), chosen for the error one measured step
    # leaves on held-out carries (``_after_step``). {}: the cold ones (constants learned
    # before it was, or without op mixes).
    after_step: Mapping[str, float] = field(default_factory=dict)
    # The fields the route without facts (no op mix: the fallback alone) uses instead of the
    # ones above (floor_sd, scale, correlation), calibrated on its own held-out carries, so
    # that what the op mix's weights and band are learned as leaves its interval as it was.
    # {}: the ones above (constants learned before it was, or without op mixes, where the
    # ones above are the fallback's).
    without_facts: Mapping[str, float] = field(default_factory=dict)
    # tau in  O_g,m = L_m * tau * h_g : the floor per operator launched (L_m the op graph's
    # ``launches_per_step``), the population's, in seconds, learned on the reference models
    # without recurrent layers; 0 where no reference model's facts count launches (then a
    # CPU profile's floor is its own intercept, ``graph_floor``)
    launch_s: float = 0.0
    # log sd of that floor against a reference model's own, the model held out of tau: over
    # the models without recurrent layers, and over every model (``launch_sd_recurrent``, for
    # a model with recurrent layers: cuDNN launches per time step inside them, which the op
    # graph does not count)
    launch_sd: float = 1.0
    launch_sd_recurrent: float = 1.0
    # log eta_a of the population of GPUs whose tensor-class operators run on a tensor-core
    # peak above their fp32 one (TF32 on the A100): a share of that peak, which such a GPU
    # reaches far less of than a GPU without tensor cores reaches of its fp32 peak, so the
    # two are pooled apart (``population.log_arith`` is the other kind's). None: no such
    # GPU was learned on (``_unseen``)
    tensor_log_arith: float | None = None
    # k in  exp(-k sd) <= O_carried / O_graph <= exp(k sd): the band around the op graph's own
    # floor (``graph_floor``, sd ``launch_sd``) that a carried floor is held in
    # (``_floor_band``); inf: no band (constants learned before it was, or without launches)
    graph_band: float = np.inf

    def measured(self) -> Learned:
        """The constants a carry uses once a step on the target is measured (``after_step``
        over the cold ones). The op graph's band and the floor's own weight are the cold
        carry's alone: once a step sets the level, the source's floor and slope carry only the
        curve's shape, and clipping or weighting one of them apart from the other bends it
        (``benchmarks/transfer_accuracy.py`` measured one step worse through the band)."""
        cold_only = {"graph_band": np.inf, "floor_mix_weight": None}
        return replace(self, **{**cold_only, **self.after_step}, after_step={})


# -- the curve: floor, then linear ---------------------------------------------------------


def _curve(floor: np.ndarray, slope: np.ndarray, b: np.ndarray, p: float) -> np.ndarray:
    """t(b) = (O^p + (b s)^p)^(1/p), vectorised."""
    return (floor**p + (b * slope) ** p) ** (1.0 / p)


def _floor_share(floor: np.ndarray, slope: np.ndarray, b: np.ndarray, p: float) -> np.ndarray:
    """d log t / d log O: the share of the step that moves with the floor (1 - the slope's)."""
    return floor**p / (floor**p + (b * slope) ** p)


def fit_curve(bsz: Sequence[float], step_s: Sequence[float], p: float = SHARPNESS):
    """(floor O, slope s) of one measured curve, least squares on the log scale.

    Args:
        bsz, step_s: the measured local batches and step seconds (at least one).
        p: the knee's sharpness.

    Returns:
        (floor_s, slope_s_per_sample), both positive.
    """
    b, t = np.asarray(bsz, float), np.asarray(step_s, float)
    return _fit_curve(tuple(b.tolist()), tuple(t.tolist()), float(p))


@functools.lru_cache(maxsize=4096)
def _fit_curve(bsz: tuple[float, ...], step_s: tuple[float, ...], p: float):
    """:func:`fit_curve` on hashable arguments, remembered: learning carries one source
    curve under every setting it tries (thousands of carries of a few dozen curves), and the
    fit is the same each time."""
    b, t = np.asarray(bsz, float), np.asarray(step_s, float)
    if b.size == 1:  # one step: all floor would be a guess; split as at the knee
        return float(t[0] / 2 ** (1 / p)), float(t[0] / 2 ** (1 / p) / b[0])
    x0 = np.log([t.min(), max(t.max() - t.min(), 1e-3 * t.max()) / b.max()])

    def resid(x: np.ndarray) -> np.ndarray:
        return np.log(_curve(np.exp(x[0]), np.exp(x[1]), b, p)) - np.log(t)

    fit = optimize.least_squares(resid, x0, loss="soft_l1", f_scale=0.05)
    return float(np.exp(fit.x[0])), float(np.exp(fit.x[1]))


# -- the roofline of the op mix ------------------------------------------------------------


def _mix_arrays(op_mix: Mapping[str, Mapping[str, float]]) -> tuple[np.ndarray, ...]:
    """(FLOPs per sample, bytes per sample, is-tensor) over the GPU classes of an op mix."""
    names = [c for c in op_mix if c not in ("host", "optimizer")]  # per-sample GPU work
    flops = np.array([float(op_mix[c].get("flops_per_sample", 0.0)) for c in names])
    moved = np.array([float(op_mix[c].get("bytes_per_sample", 0.0)) for c in names])
    return flops, moved, np.array([c == TENSOR for c in names])


def _peaks(fig: GpuFigures, tensor: np.ndarray) -> np.ndarray:
    """P_c in TFLOP/s: the tensor peak of the training dtype for tensor-core classes, fp32
    otherwise."""
    return np.where(tensor, fig.tensor_tflops, fig.fp32_tflops)


def _roofline_s(op_mix, fig: GpuFigures, eff: Efficiency) -> float:
    """s = sum_c max(F_c / (eta_a P_c), B_c / (eta_m BW)): seconds per sample."""
    flops, moved, tensor = _mix_arrays(op_mix)
    peak = _peaks(fig, tensor) * 1e12 * np.exp(eff.log_arith)
    bw = fig.mem_bw_gbps * 1e9 * np.exp(eff.log_mem)
    return float(np.sum(np.maximum(flops / peak, moved / bw)))


def arithmetic_share(op_mix, fig: GpuFigures, eff: Efficiency | None = None) -> float:
    """The share of the per-sample roofline time bound by arithmetic on ``fig`` (for explain)."""
    eff = eff or Efficiency(0.0, 0.0, 0.0)
    flops, moved, tensor = _mix_arrays(op_mix)
    peak = _peaks(fig, tensor) * 1e12 * np.exp(eff.log_arith)
    t_a, t_m = flops / peak, moved / (fig.mem_bw_gbps * 1e9 * np.exp(eff.log_mem))
    total = np.maximum(t_a, t_m)
    return float(np.sum(np.where(t_a >= t_m, total, 0.0)) / max(np.sum(total), 1e-300))


def _fallback_ratio(src: GpuFigures, dst: GpuFigures, w: float) -> float:
    """s_t / s_s = (P32_s / P32_t)^(1-w) * (BW_s / BW_t)^w."""
    return (src.fp32_tflops / dst.fp32_tflops) ** (1 - w) * (src.mem_bw_gbps / dst.mem_bw_gbps) ** w


def figures(row: Mapping[str, Any], dtype: str = "fp32", allow_tf32: bool = True) -> GpuFigures:
    """A catalog row's figures for training in ``dtype`` (fp32, tf32, fp16, bf16).

    fp32 training runs tensor-core operators in TF32 where the GPU has it and ``allow_tf32``
    (PyTorch's cuDNN default); a GPU without the dtype's tensor cores runs them at fp32 peak.

    Raises:
        InputError: the row lacks the fp32 peak or the memory bandwidth, or is not a CUDA GPU.
    """
    kind = row.get("accelerator_kind")
    if isinstance(kind, str) and kind and kind != "GPU":
        raise InputError(
            f"{row.get('gpu_model')} is a {kind} accelerator, not a CUDA GPU",
            fix="carry only between CUDA GPUs",
        )
    fp32, bw = _num(row.get("gpu_fp32_tflops")), _num(row.get("gpu_mem_bw_gbps"))
    if not (fp32 > 0 and bw > 0):
        raise InputError(
            f"no fp32 peak or memory bandwidth for {row.get('gpu_model') or row}",
            fix="use a catalog row with gpu_fp32_tflops and gpu_mem_bw_gbps",
        )
    column = {
        "fp32": "gpu_tf32_tflops" if allow_tf32 else None,
        "tf32": "gpu_tf32_tflops",
        "fp16": "gpu_fp16_tflops",
        "bf16": "gpu_bf16_tflops",
    }
    if dtype not in column:
        raise InputError(f"unknown dtype {dtype!r}", fix="use fp32, tf32, fp16 or bf16")
    tensor = _num(row.get(column[dtype])) if column[dtype] else np.nan
    return GpuFigures(fp32, tensor if tensor > 0 else fp32, bw)


def _num(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return np.nan
    return out


# -- carrying one curve --------------------------------------------------------------------


@dataclass(frozen=True)
class Carry:
    """A source curve carried to a target: the target's floor and slope, their log spreads,
    and how to read the source's measured steps. ``at(batches)`` predicts; ``update`` folds in
    measured target steps (Bayesian, log scale)."""

    floor: float  # O_t = O_s * h_t / h_s
    slope: float  # s_t = s_s * roofline_t / roofline_s  (or the fallback ratio)
    source_floor: float
    source_slope: float
    source_bsz: np.ndarray
    source_step: np.ndarray
    prior_cov: np.ndarray  # 2x2 covariance of (log floor error, log slope error)
    step_sd: float
    route: str
    sharpness: float = SHARPNESS
    mean: np.ndarray = field(default_factory=lambda: np.zeros(2))  # posterior mean of errors
    measured: int = 0
    probe_quantile: float = 0.0  # Learned.probe_quantile: where one step helps the most
    floor_moved: bool = False  # the op graph's band moved the carried floor (``_floor_band``)

    def probe_batch(self, batches: Sequence[float]) -> float:
        """The batch of ``batches`` (those the target can run, or the job's) at which one
        measured step narrows this carry most: the one nearest the learned position
        ``probe_quantile`` of their range in log batch.

        Raises:
            InputError: no positive batch.
        """
        return float(position_batch(np.asarray(batches, float), self.probe_quantile))

    def _base(self, b: np.ndarray) -> np.ndarray:
        """The source's measured step at b: the fitted curve times the measured residual,
        interpolated in log batch (held at the ends)."""
        p = self.sharpness
        fitted = _curve(self.source_floor, self.source_slope, b, p)
        own = _curve(self.source_floor, self.source_slope, self.source_bsz, p)
        resid = np.log(self.source_step / own)
        order = np.argsort(self.source_bsz)
        r = np.interp(np.log(b), np.log(self.source_bsz[order]), resid[order])
        return fitted * np.exp(r)

    def _parts(self, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(log location before the update, floor share) at b."""
        p = self.sharpness
        ratio = _curve(self.floor, self.slope, b, p) / _curve(
            self.source_floor, self.source_slope, b, p
        )
        return np.log(self._base(b) * ratio), _floor_share(self.floor, self.slope, b, p)

    def at(self, batches: Sequence[float]) -> pd.DataFrame:
        """The predicted step at each batch: ``location``/``scale`` (log), ``step_time_s``
        (the median), ``floor_share`` and the ``route``."""
        b = np.asarray(batches, float)
        loc, scale, share = self._moments(b)
        return pd.DataFrame(
            {
                "local_bsz": b,
                "location": loc,
                "scale": scale,
                "step_time_s": np.exp(loc),
                "floor_share": share,
                "route": self.route,
            }
        )

    def _moments(self, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(log location, log scale, floor share) at b: :meth:`at` without the frame."""
        loc, share = self._parts(b)
        w = np.stack([share, 1 - share], axis=1)
        var = np.einsum("ij,jk,ik->i", w, self.prior_cov, w) + self.step_sd**2
        return loc + w @ self.mean, np.sqrt(var), share

    def interval(self, batches: Sequence[float], level: float = 0.9) -> pd.DataFrame:
        """:meth:`at` plus ``step_time_lo``/``step_time_hi`` at ``level``."""
        out = self.at(batches)
        z = stats.norm.ppf(0.5 + level / 2)
        out["step_time_lo"] = np.exp(out["location"] - z * out["scale"])
        out["step_time_hi"] = np.exp(out["location"] + z * out["scale"])
        return out

    def update(self, bsz: Sequence[float], step_s: Sequence[float]) -> Carry:
        """The carry after measured steps on the target (one or two, any batch).

        log y_i = loc(b_i) + w(b_i) . delta + e_i,  delta ~ N(0, prior_cov),  e ~ N(0, step_sd^2)
        with w = (floor share, slope share): the posterior of delta, the floor's and the
        slope's log errors. One step at a small batch mostly fixes the floor, a second at a
        large one the slope.
        """
        b, y = np.asarray(bsz, float), np.asarray(step_s, float)
        if b.size == 0:
            return self
        if b.size != y.size or not np.all(y > 0):
            raise InputError("measured steps need one positive time per batch size")
        loc, share = self._parts(b)
        w = np.stack([share, 1 - share], axis=1)
        prec = np.linalg.inv(self.prior_cov) + w.T @ w / self.step_sd**2
        cov = np.linalg.inv(prec)
        mean = cov @ (w.T @ (np.log(y) - loc)) / self.step_sd**2
        route = f"{self.route}; updated by {b.size} measured step(s) on the target"
        return replace(self, prior_cov=cov, mean=mean, measured=b.size, route=route)


def _floor_band(
    op_mix: Mapping[str, Mapping[str, float]] | None,
    learned: Learned,
    target_gpu: str | None = None,
    target_machine: str | None = None,
) -> np.ndarray | None:
    """The band the op graph holds a carried floor in, (low, high) seconds, or None (no band
    learned, no op mix, or no launch count):

        O_graph exp(-k sd) <= O_t <= O_graph exp(k sd)     O_graph = L tau h_t  (graph_floor)

    A source whose floor its own GPU does not explain (a machine whose host input pipeline
    holds every step to ~0.1 s: the V100 reference's ncf and cifar10 steps, 10x and 2.5x the
    other machines') carries it to a GPU whose host need not have it; the op graph knows
    nothing of the source, so it bounds how far the measured step may pull the floor from what
    the model's launches cost. sd is the op graph's own held-out one (``launch_sd``, or
    ``launch_sd_recurrent``), so a model whose floor it predicts poorly gets a wide band. The
    slope gets none: the op mix's roofline misses a host-bound slope by 10-500x (ncf) and a
    recurrent one on a tensor-core GPU by several times, and a slope band made held-out pairs
    worse than the rule at every k tried."""
    k = learned.graph_band
    if op_mix is None or not np.isfinite(k):
        return None
    floor = graph_floor(op_mix, learned, target_gpu, target_machine)
    if floor is None:
        return None
    return floor[0] * np.exp(k * floor[1] * np.array([-1.0, 1.0]))


def probe_batch(batches: Sequence[float], learned: Learned) -> float:
    """The batch of ``batches`` at which one measured step on a target narrows a carry made
    with ``learned`` most (``Carry.probe_batch`` before any carry is made): the position
    learned for the carry that reads the step (``Learned.measured``).

    Raises:
        InputError: no positive batch.
    """
    return position_batch(np.asarray(batches, float), learned.measured().probe_quantile)


def carry(
    op_mix: Mapping[str, Mapping[str, float]] | None,
    source: GpuFigures,
    source_bsz: Sequence[float],
    source_step_s: Sequence[float],
    target: GpuFigures,
    learned: Learned,
    source_gpu: str | None = None,
    target_gpu: str | None = None,
    source_machine: str | None = None,
    target_machine: str | None = None,
) -> Carry:
    """Carry one model's measured steps on ``source`` to ``target``.

    Args:
        op_mix: the facts' ``op_mix`` (``measure.opgraph``), or None for the fallback route.
        source, target: the two GPUs' figures (:func:`figures`).
        source_bsz, source_step_s: the source's measured local batches and step seconds.
        learned: :func:`learn`'s result.
        source_gpu, target_gpu: names in ``learned.per_gpu`` (a GPU not there gets the
            population's efficiencies).
        source_machine, target_machine: the instance types, when known: a machine other
            than the one its GPU was learned on (``learned.machines``) gets the population's
            host factor (None: the GPU's own).

    Returns:
        A :class:`Carry`; ``.at(batches)`` gives location/scale/step_time_s and the route.

    Raises:
        InputError: no measured source step, or a non-positive one.
    """
    b, t = np.asarray(source_bsz, float), np.asarray(source_step_s, float)
    if b.size == 0 or not np.all(t > 0) or b.size != t.size:
        raise InputError("the source needs at least one measured step (positive seconds)")
    p = learned.sharpness
    floor_s, slope_s = fit_curve(b, t, p)
    e_s = _eff(learned, source_gpu, source_machine, source)
    e_t = _eff(learned, target_gpu, target_machine, target)
    known = [n for n in (source_gpu, target_gpu) if n in learned.per_gpu]
    who = f"learned efficiencies of {', '.join(known)}" if known else "population efficiencies"
    # the fallback: s_t = s_s * fallback ratio,  O_t = O_s * (h_t/h_s)^(1-phi) * (P32_s/P32_t)^phi
    phi = learned.fallback_floor_exponent
    host = np.exp((e_t.log_host - e_s.log_host) * (1 - phi))
    floor_t = floor_s * host * _fp32_ratio(source, target) ** phi
    slope_t = slope_s * _fallback_ratio(source, target, learned.bandwidth_weight)
    route = (
        f"slope by fp32^{1 - learned.bandwidth_weight:.1f} x "
        f"bandwidth^{learned.bandwidth_weight:.1f} ratio; floor by host factor^{1 - phi:.1f} "
        f"x fp32 ratio^{phi:.1f}; {who}"
    )
    if op_mix is not None and _roofline_s(op_mix, source, e_s) > 0:
        lam = learned.mix_weight
        roof_s = _roofline_s(op_mix, source, e_s)
        roof = _roofline_s(op_mix, target, e_t) / roof_s
        # the part of the measured slope the roofline explains moves with the roofline; what
        # it does not (an operator slower than its class, e.g. an RNN without tensor cores)
        # moves as the fallback moves a slope:  s_t = min(s_s, r_s) r_t/r_s + (s_s - r_s)+ f
        explained = min(slope_s, roof_s)
        slope_mix = explained * roof + (slope_s - explained) * slope_t / slope_s
        roof_floor = floor_s * np.exp(e_t.log_host - e_s.log_host)
        # log x_t = lambda log x_roofline + (1 - lambda) log x_fallback, the floor at its own
        # lambda_O where one was learned
        lam_o = lam if learned.floor_mix_weight is None else learned.floor_mix_weight
        floor_t = roof_floor**lam_o * floor_t ** (1 - lam_o)
        slope_t = slope_mix**lam * slope_t ** (1 - lam)
        arith = arithmetic_share(op_mix, target, e_t)
        route = (
            f"roofline of the op mix ({arith:.0%} of the per-sample work arithmetic-bound on "
            f"the target; floor by host factor), weight {lam:.2f}"
            + (f" (the floor's {lam_o:.2f})" if lam_o != lam else "")
            + " against the fallback ("
            + route
            + ")"
        )
        slope_sd, own = learned.slope_sd, {}
    else:
        route = "no op mix: " + route
        slope_sd, own = learned.fallback_slope_sd, learned.without_facts
    same = source_gpu is not None and (source_gpu, source_machine) == (target_gpu, target_machine)
    band = None if same else _floor_band(op_mix, learned, target_gpu, target_machine)
    moved = band is not None and not band[0] <= floor_t <= band[1]
    if band is not None:
        floor_t = float(np.clip(floor_t, *band))
        route += f"; floor held within {learned.graph_band:g} sd of the op graph's" + (
            " (moved into it: the source's floor is not its operators')" if moved else ""
        )
    k, floor_sd = own.get("scale", learned.scale), own.get("floor_sd", learned.floor_sd)
    cov = _prior_cov(k * floor_sd, k * slope_sd, own.get("correlation", learned.correlation))
    cov = cov * (1e-6 if same else 1)
    return Carry(
        floor=float(floor_t),
        slope=float(slope_t),
        source_floor=floor_s,
        source_slope=slope_s,
        source_bsz=b,
        source_step=t,
        prior_cov=cov,
        step_sd=k * learned.step_sd,
        route=route,
        sharpness=p,
        probe_quantile=learned.measured().probe_quantile,
        floor_moved=moved,
    )


def _prior_cov(floor_sd: float, slope_sd: float, rho: float) -> np.ndarray:
    """2x2 covariance of (log floor error, log slope error) with correlation rho."""
    off = rho * floor_sd * slope_sd
    return np.array([[floor_sd**2, off], [off, slope_sd**2]])


def position_batch(batches: np.ndarray, q: float) -> float:
    """The batch of ``batches`` nearest position q (0 the smallest, 1 the largest) of their
    range in log batch.

    Raises:
        InputError: no positive batch.
    """
    b = np.unique(batches[np.isfinite(batches) & (batches > 0)])
    if b.size == 0:
        raise InputError("no batch to measure at", fix="pass the local batches the target runs")
    lo, hi = np.log(b[0]), np.log(b[-1])
    return float(b[np.argmin(np.abs(np.log(b) - (lo + q * (hi - lo))))])


def _updated_resid(
    share: np.ndarray, resid: np.ndarray, j: int, cov: np.ndarray, step_sd: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each step's log residual after the update by step j alone (``Carry.update``'s
    posterior mean, w = (share, 1 - share)): r_i - w_i . cov' w_j r_j / step_sd^2; and the
    sd of the updated prediction, sqrt(w_i . cov' w_i + step_sd^2). Scaling ``cov`` by k^2
    and ``step_sd`` by k leaves the residuals as they are and scales the sd by k."""
    w = np.stack([share, 1 - share], axis=1)
    post = np.linalg.inv(np.linalg.inv(cov) + np.outer(w[j], w[j]) / step_sd**2)
    sd = np.sqrt(np.einsum("ij,jk,ik->i", w, post, w) + step_sd**2)
    return resid - w @ (post @ w[j]) * resid[j] / step_sd**2, sd


def _after_one_step(
    used: pd.DataFrame, cov: np.ndarray, step_sd: float, q: float
) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]:
    """Per held-out pair: the log residuals of the carries' other steps after one measured
    step at position q, and their sds (``_updated_resid``)."""
    per_pair: dict[tuple[str, str], list] = {}
    for row in used.itertuples():
        b = np.asarray(row.bsz, float)
        if b.size < 2:
            continue
        j = int(np.flatnonzero(b == position_batch(b, q))[0])
        r, sd = _updated_resid(row.share, row.resid, j, cov, step_sd)
        per_pair.setdefault((row.source, row.target), []).append(
            (np.delete(r, j), np.delete(sd, j))
        )
    return {k: tuple(np.concatenate(x) for x in zip(*v, strict=True)) for k, v in per_pair.items()}


def _probe_error(used: pd.DataFrame, cov: np.ndarray, step_sd: float) -> dict[float, float]:
    """Per q of PROBE_GRID: the mean over pairs of the held-out carries' absolute percentage
    error at their other steps after one measured step at q."""
    errs = {}
    for q in PROBE_GRID:
        pairs = _after_one_step(used, cov, step_sd, q).values()
        errs[q] = np.mean([np.mean(np.abs(np.exp(-r) - 1)) for r, _ in pairs]) if pairs else np.inf
    return errs


def _one_step_setting(
    frames: list[tuple[pd.DataFrame, float]],
    used: pd.DataFrame,
    floor_sd: float,
    slope_sd: float,
    step_sd: float,
    level: float,
) -> tuple[float, float, float, float]:
    """(scale k, rho, q, error): for each rho of CORRELATION_GRID the scale that covers
    ``level`` of the held-out carried steps (``frames``: each route's carries and its slope
    sd), then the (rho, q) whose one step leaves ``used``'s other steps (carried with
    ``slope_sd``) with the lowest mean error (ties to the smaller rho and q), and that
    error."""
    best = None
    for rho in CORRELATION_GRID:
        k = _scale(frames, floor_sd, step_sd, rho, level)
        errs = _probe_error(used, _prior_cov(k * floor_sd, k * slope_sd, rho), k * step_sd)
        for q, err in errs.items():
            if best is None or err < best[0] - 1e-12:
                best = (err, k, rho, q)
    if best is None or not np.isfinite(best[0]):
        return _scale(frames, floor_sd, step_sd, 0.0, level), 0.0, 0.0, np.inf
    return best[1], best[2], best[3], best[0]


def _scale(
    frames: list[tuple[pd.DataFrame, float]],
    floor_sd: float,
    step_sd: float,
    rho: float,
    level: float,
) -> float:
    """The factor on every spread that puts ``level`` of the held-out carried steps inside."""
    z = stats.norm.ppf(0.5 + level / 2)
    ratios = []
    for frame, sd in frames:
        share = np.concatenate(frame["share"].values)
        resid = np.concatenate(frame["resid"].values)
        var = (
            (share * floor_sd) ** 2
            + ((1 - share) * sd) ** 2
            + 2 * rho * share * (1 - share) * floor_sd * sd
            + step_sd**2
        )
        ratios.append(np.abs(resid) / (z * np.sqrt(var)))
    return float(np.quantile(np.concatenate(ratios), level)) if ratios else 1.0


def _fp32_ratio(src: GpuFigures, dst: GpuFigures) -> float:
    """P32_s / P32_t: how much faster the target's fp32 peak is."""
    return src.fp32_tflops / dst.fp32_tflops


def host_ratio(
    learned: Learned, gpus: tuple[str | None, str | None], machines: tuple = (None, None)
) -> float:
    """h_t / h_s: the target machine's host factor over the source's (``carry``'s floor
    ratio on the op-mix route); ``gpus`` and ``machines`` are (source, target)."""
    e_s, e_t = (_eff(learned, g, m) for g, m in zip(gpus, machines, strict=True))
    return float(np.exp(e_t.log_host - e_s.log_host))


def _eff(
    learned: Learned,
    gpu: str | None,
    machine: str | None = None,
    fig: GpuFigures | None = None,
) -> Efficiency:
    """A GPU's efficiencies (for one not learned, its kind's population: ``_unseen`` with
    its figures ``fig``); the host factor only on the machine it was learned on, when
    ``machine`` is given."""
    eff = learned.per_gpu[gpu] if gpu in learned.per_gpu else _unseen(learned, fig)
    if machine is not None and learned.machines.get(gpu or "") != machine:
        eff = eff._replace(log_host=learned.population.log_host)
    return eff


def _tensor_kind(fig: GpuFigures) -> bool:
    """Whether a GPU runs tensor-class operators on a tensor-core peak above its fp32 one."""
    return fig.tensor_tflops > fig.fp32_tflops


def _unseen(learned: Learned, fig: GpuFigures | None) -> Efficiency:
    """The population's efficiencies for a GPU never learned on, of its kind:

        log eta_a = tensor_log_arith                      a tensor-core GPU, such learned
                  = log eta_a,fp32 - 1/2 log(P_t / P32)   a tensor-core GPU, none learned

    With no tensor-core GPU learned on, its achieved tensor rate eta_a P_t is taken at the
    geometric middle of what the fp32 GPUs' share allows, from no gain over its fp32 peak
    (eta_a,fp32 P32) to the whole datasheet ratio (eta_a,fp32 P_t): nothing measured says
    where between them it lies (log-uniform), and either end is off by sqrt(P_t / P32)."""
    pop = learned.population
    if fig is None or not _tensor_kind(fig):
        return pop
    if learned.tensor_log_arith is not None:
        return pop._replace(log_arith=learned.tensor_log_arith)
    return pop._replace(log_arith=pop.log_arith - 0.5 * np.log(fig.tensor_tflops / fig.fp32_tflops))


def absolute(
    op_mix: Mapping[str, Mapping[str, float]],
    target: GpuFigures,
    learned: Learned,
    target_gpu: str | None = None,
) -> tuple[float, float, str]:
    """A slope from the op mix alone, with no source GPU to take a ratio to (a CPU profile).

        s_t = sum_c max(F_c / (eta_a P_c), B_c / (eta_m BW))   at the target's efficiencies

    Args:
        op_mix: the facts' ``op_mix``.
        target: the target GPU's figures.
        learned: :func:`learn`'s result (efficiencies, ``absolute_sd``, ``scale``).
        target_gpu: the target's name in ``learned.per_gpu`` (else the population's).

    Returns:
        (seconds per sample, its log sd, the route in words).

    Raises:
        InputError: the op mix has no GPU work.
    """
    eff = _eff(learned, target_gpu, fig=target)
    slope = _roofline_s(op_mix, target, eff)
    if not slope > 0:
        raise InputError("the op mix has no per-sample GPU work to carry")
    sd = learned.scale * learned.absolute_sd
    arith = arithmetic_share(op_mix, target, eff)
    who = "learned" if target_gpu in learned.per_gpu else "the population's"
    route = (
        f"roofline of the op mix alone ({arith:.0%} arithmetic-bound, {who} efficiencies; "
        f"x/÷ {np.exp(1.645 * sd):.1f} at 90% on the per-sample part of the step: no GPU step "
        "measured)"
    )
    return slope, sd, route


def predict_step(
    op_mix, source, source_bsz, source_step_s, target, learned, batches, **names
) -> pd.DataFrame:
    """:func:`carry` then ``.at(batches)``: location, scale (log), step_time_s, route."""
    return carry(op_mix, source, source_bsz, source_step_s, target, learned, **names).at(batches)


# -- carrying a traced step class by class (a CUDA op trace) --------------------------------

TRACE_FIELDS = ("step_s", "launch_s", "busy_s")


def traced_step(
    record: Mapping[str, Any],
    op_mix: Mapping[str, Mapping[str, float]],
    b: float,
    source: GpuFigures,
    target: GpuFigures,
    host: float = 1.0,
) -> float:
    """One traced step at local batch ``b`` (``measure.op_trace.trace_batch``'s record) on
    ``target``, each operator class moved by its own roofline ratio (Habitat's rule, per class
    rather than per kernel; no efficiencies: the source's measured time already holds them):

        d_c' = d_c * max(F_c / P_c,t, B_c / BW_t) / max(F_c / P_c,s, B_c / BW_s)
               F_c, B_c = FLOPs and bytes of class c at b (op mix: per step + b per sample)
        u'   = u * BW_s / BW_t              device time no operator claimed: memory-bound
        T'   = max(L h, sum_c d_c' + u') + max(T - max(L, D), 0) h

    with T the step, L its host part (``launch_s``), D the device's (``busy_s``) and ``h`` the
    ratio of the two machines' host factors. Carried to its own GPU it gives T back.
    """
    names = list(record["classes"])
    d = np.array([float(record["classes"][c]) for c in names])
    mix = [op_mix.get(c, {}) for c in names]
    f, m = (
        np.array(
            [x.get(f"{what}_per_step", 0.0) + b * x.get(f"{what}_per_sample", 0.0) for x in mix]
        )
        for what in ("flops", "bytes")
    )
    tensor = np.array([c == TENSOR for c in names])
    bw = source.mem_bw_gbps / target.mem_bw_gbps
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.maximum(f / _peaks(target, tensor), m * 1e3 / target.mem_bw_gbps) / np.maximum(
            f / _peaks(source, tensor), m * 1e3 / source.mem_bw_gbps
        )
    ratio = np.where(np.isfinite(ratio) & (ratio > 0), ratio, bw)  # no work known: memory
    step, launch, busy = (float(record[k]) for k in TRACE_FIELDS)
    device = float(np.sum(d * ratio)) + max(busy - float(np.sum(d)), 0.0) * bw
    return max(launch * host, device) + max(step - max(launch, busy), 0.0) * host


def trace_ratio(
    trace: Mapping[str, Any],
    op_mix: Mapping[str, Mapping[str, float]],
    batches: Sequence[float],
    source: GpuFigures,
    target: GpuFigures,
    host: float = 1.0,
) -> np.ndarray:
    """Target step over source step at ``batches``: :func:`traced_step`'s ratio at each
    traced batch, interpolated in log batch between them (held beyond the ends).

    Args:
        trace: a checked op trace (:func:`check_trace`) with at least one batch.
        op_mix, source, target, host: as in :func:`traced_step`.
        batches: local batches to give the ratio at.

    Returns:
        The ratio at each of ``batches``.
    """
    traced = sorted((int(b), rec) for b, rec in trace["batches"].items())
    at = np.array([b for b, _ in traced], float)
    log_ratio = [
        np.log(traced_step(rec, op_mix, b, source, target, host) / float(rec["step_s"]))
        for b, rec in traced
    ]
    return np.exp(np.interp(np.log(np.asarray(batches, float)), np.log(at), log_ratio))


def traced_curve(
    carried: Carry,
    trace: Mapping[str, Any],
    op_mix: Mapping[str, Mapping[str, float]],
    batches: Sequence[float],
    source: GpuFigures,
    target: GpuFigures,
    host: float = 1.0,
) -> tuple[float, float]:
    """(floor, slope) on ``target``: the source curve of ``carried`` (its ``source_floor``,
    ``source_slope``) at ``batches`` times :func:`trace_ratio`, refitted (:func:`fit_curve`)."""
    p = carried.sharpness
    at_source = _curve(carried.source_floor, carried.source_slope, np.asarray(batches, float), p)
    moved = at_source * trace_ratio(trace, op_mix, batches, source, target, host)
    return fit_curve(batches, moved, p)


def trace_matches(trace: Mapping[str, Any], gpu_model: str) -> bool:
    """Whether ``trace`` was taken on a CUDA GPU named ``gpu_model`` (the catalog's name as
    a word of the device's, e.g. "T4" in "Tesla T4", not "L4" in "NVIDIA L40S") and saw its
    kernels at every traced batch (a profiler without CUPTI sees none)."""
    if trace.get("device") != "cuda" or not gpu_model or not trace.get("batches"):
        return False
    if not all(float(rec["busy_s"]) > 0 for rec in trace["batches"].values()):
        return False
    word = re.escape(str(gpu_model).lower())
    name = str(trace.get("device_name")).lower()
    return re.search(rf"(?<![a-z0-9]){word}(?![a-z0-9])", name) is not None


def check_trace(trace: Any, model: str = "") -> dict[str, Any]:
    """A profile's ``op_trace`` checked: {"device", "device_name", "batches": {local batch:
    {step_s, launch_s, busy_s, classes: {class: seconds}}}}, every time a number >= 0.

    Raises:
        InputError: naming the model and what is malformed.
    """
    where = f" of {model}" if model else ""
    fix = "record it again with srifty profile --op-trace"
    if not isinstance(trace, Mapping) or not isinstance(trace.get("batches"), Mapping):
        raise InputError(f"the op trace{where} is not a mapping with 'batches'", fix=fix)
    batches = {}
    for b, rec in trace["batches"].items():
        try:
            bsz = int(b)
            values = {k: float(rec[k]) for k in TRACE_FIELDS}
            classes = {str(c): float(t) for c, t in rec["classes"].items()}
        except (TypeError, ValueError, KeyError, AttributeError):
            raise InputError(f"the op trace{where} at batch {b!r} is malformed", fix=fix) from None
        times = [*values.values(), *classes.values()]
        if bsz < 1 or not all(np.isfinite(t) and t >= 0 for t in times) or values["step_s"] <= 0:
            raise InputError(
                f"the op trace{where} at batch {b!r} has a time that is not a number >= 0",
                fix=fix,
            )
        batches[str(bsz)] = {**values, "classes": classes}
    return {
        "device": str(trace.get("device", "")),
        "device_name": str(trace.get("device_name", "")),
        "batches": batches,
    }


def op_traces_of(facts: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Per training model, the op trace in profile facts (as :func:`op_mixes_of` reads them);
    models without one are left out.

    Raises:
        InputError: facts that are not mappings, or a malformed trace.
    """
    return _per_model(facts, "op_trace", check_trace)


# -- learning across the reference GPUs ----------------------------------------------------


def _fits(curves: pd.DataFrame, p: float) -> pd.DataFrame:
    """Fitted (floor, slope) and the log residual sd of every (gpu, model) curve."""
    rows = []
    for (gpu, model), c in curves.groupby(["gpu", "model"], sort=True):
        floor, slope = fit_curve(c["local_bsz"], c["step_time_s"], p)
        own = _curve(floor, slope, c["local_bsz"].to_numpy(float), p)
        r = np.log(c["step_time_s"].to_numpy() / own)
        rows.append({"gpu": gpu, "model": model, "floor": floor, "slope": slope, "resid": r})
    return pd.DataFrame(rows)


def _polish(fits: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(log h_g, a_m) of  log O_g,m = a_m + log h_g  by median polish, mean log h = 0."""
    table = np.log(fits.pivot(index="gpu", columns="model", values="floor"))
    h = pd.Series(0.0, index=table.index)
    for _ in range(20):
        a = table.sub(h, axis=0).median(axis=0)
        h = table.sub(a, axis=1).median(axis=1)
        h -= h.mean()
    return h, a


def _host_factors(h: pd.Series) -> tuple[dict[str, float], float]:
    """log h_g of :func:`_polish` as a dict, and the between-GPU sd of log h."""
    sd = float(np.sqrt(np.mean(h**2) * len(h) / max(len(h) - 1, 1))) if len(h) > 1 else 0.5
    return h.to_dict(), sd


def launches_of(op_mix: Mapping[str, Mapping[str, float]] | None) -> float | None:
    """The operators one step launches (the op mix's ``host.launches_per_step``), or None
    (no op mix, or facts written before launches were counted)."""
    n = (op_mix or {}).get("host", {}).get("launches_per_step")
    return float(n) if n else None


def recurrent(op_mix: Mapping[str, Mapping[str, float]] | None) -> bool:
    """Whether an op mix's model has recurrent layers (``host.recurrent_layers``)."""
    return bool((op_mix or {}).get("host", {}).get("recurrent_layers", 0))


def _launch_cost(a: pd.Series, facts: Mapping[str, Any]) -> tuple[float, float, float]:
    """(tau, log sd, log sd with recurrent models) of  a_m = log L_m + log tau + e_m  (a_m of
    :func:`_polish`): the population's floor per launch, the median over the models without
    recurrent layers, and the rms of e_m with model m held out of that median, over those
    models and over every model; (0, 1, 1) with fewer than two such models whose facts count
    launches."""
    per = pd.Series({m: a[m] - np.log(n) for m in a.index if (n := launches_of(facts.get(m)))})
    plain = [m for m in per.index if not recurrent(facts.get(m))]
    if len(plain) < 2:
        return 0.0, 1.0, 1.0
    held_out = pd.Series(
        {m: per[m] - per[plain].drop(m, errors="ignore").median() for m in per.index}
    )
    return float(np.exp(per[plain].median())), _rms(held_out[plain]), _rms(held_out)


def graph_floor(
    op_mix: Mapping[str, Mapping[str, float]] | None,
    learned: Learned,
    target_gpu: str | None = None,
    machine: str | None = None,
) -> tuple[float, float, str] | None:
    """A step's floor on a GPU from the op graph alone, with no GPU step measured:

        O = L * tau * h_g      L launches per step, tau the population's cost per launch,
                               h_g the target machine's host factor (the population's, 1,
                               for a machine the reference campaigns never measured)

    Args:
        op_mix: the facts' op mix (its ``host.launches_per_step``).
        learned: :func:`learn`'s result (``launch_s``; ``launch_sd``, or
            ``launch_sd_recurrent`` for a model with recurrent layers).
        target_gpu, machine: the target, as :func:`host_ratio` looks its host factor up.

    Returns:
        (floor seconds, its log sd, the route in words), or None without a launch count or
        a learned ``launch_s``.
    """
    n = launches_of(op_mix)
    if n is None or not learned.launch_s > 0:
        return None
    h = float(np.exp(_eff(learned, target_gpu, machine).log_host))
    rnn = recurrent(op_mix)
    # already held-out spreads (each model out of tau): not scaled
    sd = learned.launch_sd_recurrent if rnn else learned.launch_sd
    words = (
        f"floor from the op graph: {n:.0f} launches"
        + (" (recurrent layers: cuDNN's launches per time step not counted)" if rnn else "")
        + f" x {1e6 * learned.launch_s:.0f} us "
        f"x host factor {h:.2f} = {1e3 * n * learned.launch_s * h:.3g} ms, x/÷ "
        f"{np.exp(1.645 * sd):.1f} at 90%"
    )
    return n * learned.launch_s * h, sd, words


def _efficiency_fit(fits, facts, figs) -> tuple[dict[str, tuple[float, float]], float]:
    """Per GPU (log eta_a, log eta_m) from its models' fitted slopes (least squares in log
    under Cauchy's loss), and the residuals' robust sd (normal-scaled median absolute
    residual)."""
    out, resid = {}, []
    for gpu, own in fits.groupby("gpu"):
        mixes = [facts[m] for m in own["model"]]
        slopes = own["slope"].to_numpy()

        def r(x: np.ndarray, mixes=mixes, slopes=slopes, gpu=gpu) -> np.ndarray:
            eff = Efficiency(x[0], x[1], 0.0)
            pred = np.array([_roofline_s(m, figs[gpu], eff) for m in mixes])
            return np.log(np.maximum(pred, 1e-300)) - np.log(slopes)

        # a slope no roofline explains (a host-bound model: ncf's per-sample host work is
        # 10-500x its roofline) must not set eta: Cauchy's loss redescends, so its pull
        # fades with its residual; soft_l1's stays constant and, with four or six models a
        # GPU, dragged every eta down by about as much as that one model asked
        fit = optimize.least_squares(r, np.log([0.5, 0.5]), loss="cauchy", f_scale=0.3)
        out[gpu] = (float(fit.x[0]), float(fit.x[1]))
        resid.extend(r(fit.x))
    # nor may that model's residual set the standard error that decides how far each GPU's
    # eta is pooled: as an rms it shrank every GPU's eta (the A100's TF32 share among them)
    # back to the population's
    return out, 1.4826 * float(np.median(np.abs(resid))) if resid else 0.5


def _pool(raw: dict[str, float], se: float) -> tuple[dict[str, float], float, float]:
    """Partial pooling of per-GPU log values: (pooled, population mean, between sd tau)."""
    v = np.array(list(raw.values()))
    mu = float(v.mean())
    tau2 = max(float(v.var(ddof=1)) - se**2, 0.01) if v.size > 1 else 0.25
    k = tau2 / (tau2 + se**2)
    return {g: mu + k * (x - mu) for g, x in raw.items()}, mu, float(np.sqrt(tau2))


def _pool_by_kind(
    raw: dict[str, float], se: float, figs: Mapping[str, GpuFigures]
) -> tuple[dict[str, float], float, float | None, float]:
    """``_pool`` of log eta_a within each kind of GPU (``_tensor_kind``): (pooled, the fp32
    kind's mean, the tensor kind's, the between-GPU sd of the larger kind). Without a
    tensor-core GPU the tensor kind's mean is None (``_unseen`` derives it); with tensor-core
    GPUs alone both means are theirs (nothing says what a GPU without them reaches)."""
    kinds = {k: {g: x for g, x in raw.items() if _tensor_kind(figs[g]) == k} for k in (0, 1)}
    pooled, mu, tau = {}, {}, {}
    for k, own in kinds.items():
        if own:
            part, mu[k], tau[k] = _pool(own, se)
            pooled.update(part)
    if not kinds[1]:
        return pooled, mu[0], None, tau[0]
    if not kinds[0]:
        return pooled, mu[1], mu[1], tau[1]
    return pooled, mu[0], mu[1], tau[0 if len(kinds[0]) >= len(kinds[1]) else 1]


def _base_learn(curves, facts, figs, p=SHARPNESS, w=0.5) -> Learned:
    """Efficiencies and host factors from ``curves`` (no spreads yet: unit placeholders)."""
    fits = _fits(curves, p)
    log_host, per_model = _polish(fits)
    host, host_sd = _host_factors(log_host)
    with_mix = fits[fits["model"].isin([m for m in facts if facts[m] is not None])]
    raw, resid_sd = _efficiency_fit(with_mix, facts, figs) if len(with_mix) else ({}, 0.5)
    n = max(1, with_mix["model"].nunique())
    se = resid_sd / np.sqrt(n)
    mu_tc = None
    if raw:
        arith, mu_a, mu_tc, tau_a = _pool_by_kind({g: v[0] for g, v in raw.items()}, se, figs)
        mem, mu_m, tau_m = _pool({g: v[1] for g, v in raw.items()}, se)
    else:  # no model has facts: the roofline route is never taken
        arith, mem, mu_a, mu_m, tau_a, tau_m = {}, {}, 0.0, 0.0, 0.0, 0.0
    per_gpu = {g: Efficiency(arith.get(g, mu_a), mem.get(g, mu_m), host[g]) for g in host}
    step = np.concatenate(fits["resid"].to_list()) if len(fits) else np.zeros(1)
    tau, tau_sd, recurrent_sd = _launch_cost(per_model, facts)
    return Learned(
        per_gpu=per_gpu,
        population=Efficiency(mu_a, mu_m, 0.0),
        between_sd=Efficiency(tau_a, tau_m, host_sd),
        floor_sd=1.0,
        slope_sd=1.0,
        fallback_slope_sd=1.0,
        step_sd=max(STEP_SD_FLOOR, float(np.std(step))),
        scale=1.0,
        bandwidth_weight=w,
        sharpness=p,
        launch_s=tau,
        launch_sd=tau_sd,
        launch_sd_recurrent=recurrent_sd,
        tensor_log_arith=mu_tc,
        basis=f"{curves['gpu'].nunique()} GPUs ({', '.join(sorted(curves['gpu'].unique()))}), "
        f"{len(curves)} one-GPU steps",
    )


def _settings(route: str, fb: tuple[float, ...] | None = None) -> list[dict[str, float]]:
    """The Learned overrides the inner carries try: the fallback's (w, phi) grid; or, with the
    fallback ``fb`` = (w, phi) already chosen, the op-mix route's blend weights lambda (the
    slope's) and lambda_O (the floor's), each carried without the op graph's band and then
    held in each finite band k (``_inner_carries``): the three are chosen together, since the
    band is what lets a weight through that one source's host cap would otherwise veto."""
    if route == "fallback":
        return [
            {"bandwidth_weight": w, "fallback_floor_exponent": phi}
            for w in W_GRID
            for phi in FALLBACK_PHI
        ]
    w, phi = fb or (0.0, 1.0)
    chosen = {"bandwidth_weight": w, "fallback_floor_exponent": phi, "graph_band": np.inf}
    return [
        {**chosen, "mix_weight": lam, "floor_mix_weight": lam_o}
        for lam in LAMBDA_GRID
        for lam_o in LAMBDA_GRID
    ]


def _held_out_bases(curves, facts, figs, p) -> dict[str, Learned]:
    """Per GPU, :func:`_base_learn` on the other GPUs' curves: what a carry into it is made
    with (learned once; every inner route and ``_absolute_sd`` reads them)."""
    return {
        gpu: _base_learn(curves[curves["gpu"] != gpu], facts, figs, p)
        for gpu in sorted(curves["gpu"].unique())
    }


def _inner_carries(curves, facts, figs, p, route: str, fb, bases) -> pd.DataFrame:
    """Every ordered pair of the given GPUs, the target held out of what is learned
    (``bases``: :func:`_held_out_bases`), under each setting of ``route``: the carried
    floor's and slope's log errors and each step's log residual. The op-mix route's carries
    come once per weight setting without a band (``graph_band`` inf) and once per finite k of
    ``BAND_GRID``: the band only clips the carried floor, so each is that carry, clipped."""
    gpus = sorted(curves["gpu"].unique())
    fits = _fits(curves, p).set_index(["gpu", "model"])
    bands = [k for k in BAND_GRID if np.isfinite(k)] if route != "fallback" else []
    rows = []
    for target in gpus:
        base = bases[target]
        for source in gpus:
            if source == target:
                continue
            for model, src in curves[curves["gpu"] == source].groupby("model"):
                dst = curves[(curves["gpu"] == target) & (curves["model"] == model)]
                mix = facts.get(model) if route != "fallback" else None
                if dst.empty or (route != "fallback" and mix is None):
                    continue
                own = fits.loc[(target, model)]
                held = {k: _floor_band(mix, replace(base, graph_band=k), target) for k in bands}
                for setting in _settings(route, fb):
                    c = carry(
                        mix,
                        figs[source],
                        src["local_bsz"],
                        src["step_time_s"],
                        figs[target],
                        replace(base, **setting),
                        source_gpu=source,
                        target_gpu=target,
                    )
                    banded = [(setting, c)] + [
                        ({**setting, "graph_band": k}, _clipped(c, b)) for k, b in held.items()
                    ]
                    b, y = dst["local_bsz"].to_numpy(float), dst["step_time_s"].to_numpy()
                    for used, ck in banded:
                        loc, _, share = ck._moments(b)
                        rows.append(
                            {
                                **used,
                                "source": source,
                                "target": target,
                                "model": model,
                                "floor_err": np.log(ck.floor / own["floor"]),
                                "slope_err": np.log(ck.slope / own["slope"]),
                                "share": share,
                                "bsz": b,
                                "resid": np.log(y) - loc,
                            }
                        )
    return pd.DataFrame(rows)


def _clipped(c: Carry, band: np.ndarray | None) -> Carry:
    """``c`` with its floor held in ``band`` (as :func:`carry` holds it; None: no band)."""
    return c if band is None else replace(c, floor=float(np.clip(c.floor, *band)))


def _minimax_setting(inner: pd.DataFrame, keys: list[str], rule: tuple) -> tuple:
    """The setting (values of ``keys``) whose worst held-out pair, relative to the fp32-peak
    rule (the setting ``rule``), is best: the rule it must never be worse than is one of the
    candidates, so on the pairs it was chosen on it is never worse; ties go to the lower mean
    error, then to the setting that departs from the rule in fewer of ``keys`` (a setting
    that changes no held-in carry, such as a band no carry reaches, is not chosen over the
    one without it)."""
    ape = inner.assign(ape=inner["resid"].map(lambda r: np.mean(np.abs(np.exp(-r) - 1))))
    per_pair = ape.groupby([*keys, "source", "target"])["ape"].mean()
    base = per_pair.xs(rule, level=keys).rename("rule")
    joined = per_pair.rename("ape").reset_index().merge(base.reset_index(), on=["source", "target"])
    joined["rel"] = joined["ape"] / joined["rule"]
    by = joined.groupby(keys).agg(worst=("rel", "max"), mean=("ape", "mean"))
    by[["worst", "mean"]] = by[["worst", "mean"]].round(6)  # what floating-point noise moves
    by["changes"] = [
        sum(a != b for a, b in zip(k if isinstance(k, tuple) else (k,), rule, strict=True))
        for k in by.index
    ]
    best = by.sort_values(["worst", "mean", "changes"]).index[0]
    return best if isinstance(best, tuple) else (best,)


def _best_mean(inner: pd.DataFrame, key: str | list[str]) -> float | tuple:
    """The value of ``key`` (a tuple of values, for a list of keys) with the lowest mean over
    held-out pairs of their MAPE."""
    keys = [key] if isinstance(key, str) else list(key)
    ape = inner.assign(ape=inner["resid"].map(lambda r: np.mean(np.abs(np.exp(-r) - 1))))
    per_pair = ape.groupby([*keys, "source", "target"])["ape"].mean()
    best = per_pair.groupby(level=keys).mean().idxmin()
    return float(best) if isinstance(key, str) else tuple(best)


def learn(
    curves: pd.DataFrame,
    facts: Mapping[str, Mapping[str, Mapping[str, float]] | None],
    figs: Mapping[str, GpuFigures],
    sharpness: float = SHARPNESS,
    level: float = 0.9,
    machines: Mapping[str, str] | None = None,
    criterion: str = "minimax",
) -> Learned:
    """Learn efficiencies, host factors and carry spreads from reference GPUs' curves.

    The spreads, the fallback's weights, the op mix's weight lambda and the op graph's floor
    band k come from carries between the given GPUs with each target held out of what is
    learned (nested leave-one-GPU-out); ``scale`` widens every spread until ``level`` of those
    held-out carried steps lie inside.

    Args:
        curves: one-GPU steps with columns ``gpu``, ``model``, ``local_bsz``, ``step_time_s``.
        facts: model -> op mix (or None where the model's facts are unknown).
        figs: gpu -> :class:`GpuFigures`.
        sharpness: p of the curve.
        level: the interval level the scale is calibrated for.
        machines: gpu -> the instance type it was measured on (``Learned.machines``).
        criterion: how the op mix's weights (lambda, lambda_O) and the band k are chosen
            on the held-out carries: ``"minimax"`` (their worst pair against the fp32-peak
            rule) or ``"mean"``.

    Returns:
        :class:`Learned`, ``basis`` naming the GPUs and rows behind every constant.

    Raises:
        InputError: fewer than two GPUs, or a GPU without figures.
    """
    gpus = sorted(curves["gpu"].unique())
    if len(gpus) < 2:
        raise InputError("learning needs curves on at least two GPUs")
    missing = [g for g in gpus if g not in figs]
    if missing:
        raise InputError(f"no figures for {', '.join(missing)}", fix="pass each GPU's figures")
    base = _base_learn(curves, facts, figs, sharpness)
    if len(gpus) < 3:  # nothing to hold out while learning: the between-GPU sds stand in
        tau = base.between_sd
        return replace(base, floor_sd=tau.log_host, slope_sd=tau.log_mem, fallback_slope_sd=1.0)
    bases = _held_out_bases(curves, facts, figs, sharpness)
    fallback = _inner_carries(curves, facts, figs, sharpness, "fallback", None, bases)
    keys = ["bandwidth_weight", "fallback_floor_exponent"]
    w, fb_phi = _minimax_setting(fallback, keys, (0.0, 1.0))
    fallback = fallback[(fallback[keys[0]] == w) & (fallback[keys[1]] == fb_phi)]
    joint = _inner_carries(curves, facts, figs, sharpness, "mix", (w, fb_phi), bases)
    mix = joint[joint["graph_band"] == np.inf] if len(joint) else joint
    # after a step, one weight for the floor and the slope (``Learned.measured``)
    one = mix[mix["floor_mix_weight"] == mix["mix_weight"]] if len(mix) else mix
    measured = _after_step(one, base.step_sd, level)
    lam, lam_o, band = 1.0, 1.0, np.inf
    if len(mix):
        # the op-mix route's weights and the op graph's band together: by default, like the
        # fallback, for their worst held-out pair against the rule (lambda = lambda_O = 0, no
        # band: the fallback, itself never worse than the rule); criterion "mean": for the
        # mean error over pairs, which keeps no such promise on any pair. Chosen apart, the
        # one source whose host caps its floor (the V100 reference's) vetoed every weight but
        # 0 before the band could hold its floor. The spreads below stay the carry's without
        # the band: the op graph alone shares the scale, and calibrated on the banded
        # carries (their floors' rms smaller) it rose and widened that route, where the band
        # changes nothing. The rule without facts keeps its own (``without_facts``).
        keys = ["mix_weight", "floor_mix_weight", "graph_band"]
        if criterion == "minimax":
            lam, lam_o, band = map(float, _minimax_setting(joint, keys, (0.0, 0.0, np.inf)))
        else:
            lam, lam_o, band = map(float, _best_mean(joint, keys))
        mix = mix[(mix["mix_weight"] == lam) & (mix["floor_mix_weight"] == lam_o)]

    used = mix if len(mix) else fallback
    floor_sd = _rms(used["floor_err"])
    fb_sd = _rms(fallback["slope_err"])
    slope_sd = _rms(mix["slope_err"]) if len(mix) else fb_sd
    # second moments about 0, as the sds; the scale, the floor-slope correlation and where
    # one step on the target helps most, chosen together on the same held-out carries
    frames = [(f, sd) for f, sd in ((mix, slope_sd), (fallback, fb_sd)) if not f.empty]
    k, rho, probe_q, _ = _one_step_setting(frames, used, floor_sd, slope_sd, base.step_sd, level)
    without_facts = {}
    if len(mix):  # the fallback's own, as they are when the op mix has no weight
        fb_floor_sd = _rms(fallback["floor_err"])
        fb = _one_step_setting(
            [(fallback, fb_sd)], fallback, fb_floor_sd, fb_sd, base.step_sd, level
        )
        without_facts = {"floor_sd": fb_floor_sd, "scale": fb[0], "correlation": fb[1]}
    return replace(
        base,
        floor_sd=floor_sd,
        slope_sd=slope_sd,
        fallback_slope_sd=fb_sd,
        scale=k,
        bandwidth_weight=float(w),
        fallback_floor_exponent=float(fb_phi),
        mix_weight=float(lam),
        floor_mix_weight=None if lam_o == lam else lam_o,
        graph_band=band,
        probe_quantile=probe_q,
        correlation=rho,
        absolute_sd=_absolute_sd(curves, facts, figs, sharpness, bases),
        machines=dict(machines or {}),
        after_step=measured,
        without_facts=without_facts,
        basis=base.basis
        + "; spreads, w, phi, lambda, the op graph's band, scale, correlation and the one-step "
        f"position, cold and after a measured step, from {len(used)} held-out carries between "
        "them",
    )


def _rms(x: pd.Series) -> float:
    """Root mean square (1 when empty): a spread about 0, as the carry spreads are."""
    return float(np.sqrt(np.mean(np.square(x)))) if len(x) else 1.0


def _after_step(mix: pd.DataFrame, step_sd: float, level: float) -> dict[str, float]:
    """``Learned.after_step``: of the op-mix weights the held-out carries ``mix`` were made
    with, the one (with its spreads, scale, rho and q) whose one measured step leaves their
    other steps with the lowest mean error; {} without carries. Chosen apart from the cold
    weight: the cold one must never be worse than the fp32 rule on a pair, while after a
    step the level is the step's and only the curve's shape is carried."""
    best = None
    for lam, carries in mix.groupby("mix_weight", sort=True) if len(mix) else ():
        floor_sd, slope_sd = _rms(carries["floor_err"]), _rms(carries["slope_err"])
        for rho in CORRELATION_GRID:  # the error does not depend on the scale (see above)
            errs = _probe_error(carries, _prior_cov(floor_sd, slope_sd, rho), step_sd)
            for q, err in errs.items():
                if best is None or err < best[0] - 1e-12:
                    best = (err, lam, floor_sd, slope_sd, rho, q, carries)
    if best is None or not np.isfinite(best[0]):
        return {}
    _, lam, floor_sd, slope_sd, rho, q, carries = best
    # the scale that puts ``level`` of the other steps inside the interval one step leaves
    # (the cold scale covers the cold carries; one step changes what is left to cover)
    pairs = _after_one_step(carries, _prior_cov(floor_sd, slope_sd, rho), step_sd, q).values()
    z = stats.norm.ppf(0.5 + level / 2)
    ratios = np.concatenate([np.abs(r) / (z * sd) for r, sd in pairs])
    return {
        "mix_weight": float(lam),
        "floor_sd": floor_sd,
        "slope_sd": slope_sd,
        "scale": float(np.quantile(ratios, level)),
        "correlation": float(rho),
        "probe_quantile": float(q),
    }


def _absolute_sd(curves, facts, figs, p: float, bases) -> float:
    """Log rms of the step a slope predicted from the op mix alone makes, at the population
    efficiencies learned without that GPU (what a CPU profile's carry to a new GPU faces):

        e = log(t(O, s_mix, b_max) / t(O, s, b_max))   per GPU and model

    with O and s the GPU's own fitted floor and slope, s_mix the op mix's roofline and b_max
    the largest batch measured, where the step leans on the slope most. Scored on the step, not
    on the slope itself: a host-bound model's fitted slope (ncf's: its step flat over every
    measured batch) is a sliver that no op mix predicts and no step depends on; its log error
    (a factor of 10 to 240 on the reference GPUs) would otherwise set every model's width.
    ``bases``: :func:`_held_out_bases` of ``curves``."""
    errs = []
    fits = _fits(curves, p)
    b_max = curves.groupby(["gpu", "model"])["local_bsz"].max()
    for gpu in sorted(curves["gpu"].unique()):
        base = bases[gpu]
        for _, row in fits[fits["gpu"] == gpu].iterrows():
            mix = facts.get(row["model"])
            if mix is not None:
                pred = max(_roofline_s(mix, figs[gpu], _eff(base, gpu, fig=figs[gpu])), 1e-300)
                b = np.array([float(b_max[gpu, row["model"]])])
                own = _curve(np.array(row["floor"]), np.array(row["slope"]), b, p)
                errs.append(float(np.log(_curve(np.array(row["floor"]), pred, b, p) / own)[0]))
    return float(np.sqrt(np.mean(np.square(errs)))) if errs else 1.0


# -- the learned constants as JSON (data/roofline_reference.json) ---------------------------

REFERENCE_FILE = "roofline_reference.json"  # in srifty_kit's data folder
_EFFS = ("per_gpu", "population", "between_sd")
_OVERRIDES = ("machines", "after_step", "without_facts")  # mappings, not numbers


def learned_doc(learned: Learned) -> dict[str, Any]:
    """A JSON-ready dict of ``learned`` (the inverse of :func:`learned_of`)."""
    doc = {k: v for k, v in vars(learned).items() if k not in _EFFS}
    for name in ("tensor_log_arith", "floor_mix_weight"):
        if doc[name] is None:
            del doc[name]  # omitted, it loads as the default
    if not np.isfinite(learned.graph_band):
        del doc["graph_band"]  # no band: omitted (JSON has no inf), it loads as the default
    doc["machines"] = dict(learned.machines)
    for name in ("after_step", "without_facts"):
        doc[name] = {k: float(v) for k, v in getattr(learned, name).items()}
    doc["per_gpu"] = {g: list(map(float, e)) for g, e in learned.per_gpu.items()}
    doc["population"] = list(map(float, learned.population))
    doc["between_sd"] = list(map(float, learned.between_sd))
    return doc


def learned_of(doc: Mapping[str, Any]) -> Learned:
    """The :class:`Learned` of a :func:`learned_doc` dict.

    Raises:
        InputError: a field is missing or not a number.
    """
    try:
        scalars = {
            k: (str(doc[k]) if k == "basis" else float(doc[k]))
            for k in Learned.__dataclass_fields__
            if k not in (*_EFFS, *_OVERRIDES) and k in doc
        }
        overrides = {}
        for name in _OVERRIDES[1:]:
            given = {str(k): float(v) for k, v in doc.get(name, {}).items()}
            unknown = sorted(set(given) - set(Learned.__dataclass_fields__))
            if unknown:
                raise KeyError(f"{name}: {', '.join(unknown)}")
            overrides[name] = given
        return Learned(
            per_gpu={str(g): Efficiency(*map(float, e)) for g, e in doc["per_gpu"].items()},
            population=Efficiency(*map(float, doc["population"])),
            between_sd=Efficiency(*map(float, doc["between_sd"])),
            machines={str(g): str(t) for g, t in doc.get("machines", {}).items()},
            **overrides,
            **scalars,
        )
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"malformed roofline constants: {err}") from err


def reference_learned() -> Learned | None:
    """The constants learned on every reference GPU (``data/roofline_reference.json``,
    written by ``benchmarks/transfer_accuracy.py --write-constants``), or None without it."""
    import json
    from importlib import resources

    path = resources.files("srifty_kit.data").joinpath(REFERENCE_FILE)
    try:
        text = path.read_text()
    except (FileNotFoundError, OSError):
        return None
    doc = json.loads(text)
    return learned_of(doc["learned"])


# -- op mixes from profile facts ------------------------------------------------------------


def check_op_mix(op_mix: Any, model: str = "") -> dict[str, dict[str, float]]:
    """An op mix as ``measure.opgraph`` writes it, checked: {class: {flops_per_sample,
    bytes_per_sample, ...}} with finite numbers at or above 0.

    Raises:
        InputError: not a mapping of classes to mappings of such numbers.
    """
    where = f" of {model!r}" if model else ""
    fix = "give the facts JSON `srifty profile` (or `--facts-only`) wrote"
    if not isinstance(op_mix, Mapping) or not op_mix:
        raise InputError(f"the op mix{where} is not a mapping of operator classes", fix=fix)
    out = {}
    for cls, row in op_mix.items():
        if not isinstance(row, Mapping):
            raise InputError(f"op mix{where}: class {cls!r} is not a mapping", fix=fix)
        values = {}
        for key, value in row.items():
            number = _num(value)
            if not (np.isfinite(number) and number >= 0):
                raise InputError(
                    f"op mix{where}: {cls}.{key} is {value!r}, not a number >= 0", fix=fix
                )
            values[str(key)] = number
        out[str(cls)] = values
    return out


def op_mixes_of(facts: Mapping[str, Any] | None) -> dict[str, dict[str, dict[str, float]]]:
    """Per training model, the op mix in profile facts.

    Args:
        facts: one profile's facts (a dict with ``model`` and ``op_mix``, as ``srifty profile``
            writes NAME.facts.json), or a mapping of model name to such facts; None: none.

    Returns:
        {model: op mix}; models whose facts hold no op mix (``op_mix: None``) are left out.

    Raises:
        InputError: facts that are not mappings, or a malformed op mix.
    """
    return _per_model(facts, "op_mix", check_op_mix)


def _per_model(facts: Mapping[str, Any] | None, key: str, check) -> dict[str, Any]:
    """{model: ``check``(its facts' ``key``, model)} of one profile's facts or of a mapping
    of them (None: empty), leaving out models whose facts hold no ``key``."""
    if facts is None:
        return {}
    if not isinstance(facts, Mapping):
        raise InputError("facts must be a mapping", fix="a profile's facts JSON, read as a dict")
    if "op_mix" in facts or "model" in facts:  # one profile's facts
        facts = {str(facts.get("model", "")): facts}
    out = {}
    for model, one in facts.items():
        if not isinstance(one, Mapping):
            raise InputError(
                f"the facts of {model!r} are not a mapping",
                fix="give {model: that profile's facts JSON read as a dict}, or one profile's",
            )
        if one.get(key) is not None:
            out[str(model)] = check(one[key], str(model))
    return out
