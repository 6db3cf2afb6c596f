"""Transfer of a fitted step-time model to instance types never measured, from catalog figures.

Compute moves by peak arithmetic throughput times an efficiency factor; synchronisation moves
by gradient bytes over link bandwidth times an efficiency factor. Each factor is a lognormal
belief: wide before the target type is measured, narrowed by a conjugate normal update in log
space as its steps arrive (``TransferFit.update``), so the interval shrinks with evidence.

Two routes for compute, the better one available is taken:
  ratio: the source type has catalog figures:  beta_c' = beta_c * peak_src / peak_dst
         (times sqrt of the memory-bandwidth ratio over the peak ratio when both are known)
  flops: the profile counted FLOPs per sample:  beta_c' = flops_per_sample / (peak_dst * eff)
The fixed cost alpha_c scales with beta_c (same work mix, faster machine).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy.stats import norm

from .batch_fix import BatchCorrection
from .errors import InputError
from .step_physics import StepParams, step_time, sync_share

PEAK_COLUMN = "gpu_fp32_tflops"  # dense fp32 peak per GPU: training without mixed precision
MEMORY_COLUMN = "gpu_mem_bw_gbps"  # memory bandwidth per GPU
# Beliefs, as (median, log-sd). Assumptions, stated so they can be argued with:
# - achieved fraction of the dense fp32 peak in training: ~0.15-0.8 across CNNs and
#   transformers (e.g. ResNet-50 on a T4 reaches ~0.6 of 8.1 TFLOP/s in the Pollux g4dn traces:
#   ~24.6 GFLOP per sample fwd+bwd at ~210 samples/s); median 0.4, a factor 2 either way at 1 sd
COMPUTE_EFFICIENCY = (0.4, np.log(2.0))
# - the same model on another GPU keeps its fraction of peak within ~1.5x (one sd)
EFFICIENCY_RATIO = (1.0, np.log(1.5))
# - NCCL/gloo over TCP reaches about half the advertised NIC rate; a factor 2 at one sd
NETWORK_EFFICIENCY = (0.5, np.log(2.0))
# - inside a node without NVLink the ring runs over PCIe 3.0 x16: 15.75 GB/s per direction
#   (PCI-SIG 3.0 spec, 126 Gbit/s); the network efficiency belief applies to it too
INTRA_NODE_GBPS = 126.0
# one step's own scatter around its configuration's mean (reference README: ~3%) plus the
# structure's misfit: the spread of a single new observation given exact constants
STEP_NOISE = 0.05


@dataclass
class Belief:
    """Lognormal belief about a multiplicative factor: log-mean and log-sd."""

    mu: float
    sd: float

    @classmethod
    def prior(cls, median_and_sd: tuple[float, float]) -> Belief:
        """From (median, log-sd)."""
        return cls(float(np.log(median_and_sd[0])), float(median_and_sd[1]))

    def update(self, log_obs: np.ndarray, noise_sd: float = STEP_NOISE) -> Belief:
        """Posterior after observing log(factor) values with Gaussian noise (conjugate)."""
        log_obs = np.asarray(log_obs, float)
        if log_obs.size == 0:
            return self
        precision = 1.0 / self.sd**2 + log_obs.size / noise_sd**2
        mu = (self.mu / self.sd**2 + log_obs.sum() / noise_sd**2) / precision
        return Belief(float(mu), float(np.sqrt(1.0 / precision)))


@dataclass
class TransferFit:
    """A step-time model carried to another instance type: constants plus their beliefs.

    ``base`` holds the constants at efficiency 1; the point prediction divides compute by
    the compute efficiency and sync by the network efficiency (their medians).
    """

    base: StepParams
    compute: Belief
    network: Belief
    source: str  # where the constants came from, for the user
    n_observed: int = 0
    notes: list[str] = field(default_factory=list)
    max_nodes: int = 1  # kept for the interface of fitted groups
    max_workers: int = 1
    # the source's per-batch compute shape, carried: the same layers at the same batch sizes
    correction: BatchCorrection | None = None

    def _factor(self, local_bsz) -> np.ndarray | float:
        return 1.0 if self.correction is None else self.correction.factor(local_bsz)

    def params(self) -> StepParams:
        """Point constants: the beliefs' medians applied."""
        c, s = np.exp(-self.compute.mu), np.exp(-self.network.mu)
        b = self.base
        return b._replace(
            alpha_c=b.alpha_c * c,
            beta_c=b.beta_c * c,
            lat_intra=b.lat_intra * s,
            bw_intra=b.bw_intra * s,
            lat_inter=b.lat_inter * s,
            bw_inter=b.bw_inter * s,
        )

    def predict(self, num_nodes, num_workers, local_bsz, per_node, level: float) -> dict:
        """Point, interval and breakdown (numpy broadcasting)."""
        p = self.params()
        total, t_c, t_s = step_time(
            p, num_nodes, num_workers, local_bsz, per_node, self._factor(local_bsz)
        )
        # delta method in log space: d log T / d log T_c = 1 - sync share
        f_c = 1.0 - sync_share(t_c, t_s, p.gamma)
        sd = np.sqrt(
            (f_c * self.compute.sd) ** 2 + ((1 - f_c) * self.network.sd) ** 2 + STEP_NOISE**2
        )
        h = norm.ppf(0.5 + level / 2) * sd
        return {
            "step_time_s": total,
            "step_time_lo": total * np.exp(-h),
            "step_time_hi": total * np.exp(h),
            "compute_s": t_c,
            "sync_s": t_s,
        }

    def update(self, rows: pd.DataFrame) -> TransferFit:
        """A new fit whose beliefs have seen measured steps of the target type.

        Single-worker steps inform the compute efficiency; the multi-worker ones, their sync
        (``sync_time_s``, else the step less the compute predicted now) the network one.
        """
        p = self.params()
        k, n, b = (rows[c].to_numpy(float) for c in ("num_nodes", "num_workers", "local_bsz"))
        g = np.ceil(n / k)
        step = rows["step_time_s"].to_numpy(float)
        t_c1 = (self.base.alpha_c + self.base.beta_c * b) * self._factor(b)  # at efficiency 1
        single = n == 1
        compute = self.compute.update(np.log(t_c1[single] / step[single]))
        sync = (
            rows["sync_time_s"].to_numpy(float)
            if "sync_time_s" in rows
            else np.full(step.shape, np.nan)
        )
        guess = step - (p.alpha_c + p.beta_c * b) * self._factor(b)
        sync = np.where(np.isnan(sync), guess, sync)
        base_s = step_time(self.base._replace(alpha_c=0.0, beta_c=0.0), k, n, b, g)[2]
        ok = ~single & (sync > 0) & (base_s > 0)
        network = self.network.update(np.log(base_s[ok] / sync[ok]))
        return TransferFit(
            self.base,
            compute,
            network,
            self.source,
            self.n_observed + len(rows),
            [*self.notes, f"updated with {len(rows)} measured steps of the target type"],
            max(self.max_nodes, int(k.max())),
            max(self.max_workers, int(n.max())),
            self.correction,
        )

    def to_json(self) -> dict:
        """Plain JSON-ready dict."""
        return {
            "kind": "transfer",
            "base": self.base._asdict(),
            "compute": [self.compute.mu, self.compute.sd],
            "network": [self.network.mu, self.network.sd],
            "source": self.source,
            "n_observed": self.n_observed,
            "notes": list(self.notes),
            "max_nodes": self.max_nodes,
            "max_workers": self.max_workers,
            "correction": None if self.correction is None else self.correction.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict) -> TransferFit:
        """Inverse of ``to_json``."""
        return cls(
            base=StepParams(**{k: float(v) for k, v in data["base"].items()}),
            compute=Belief(*map(float, data["compute"])),
            network=Belief(*map(float, data["network"])),
            source=str(data["source"]),
            n_observed=int(data["n_observed"]),
            notes=[str(x) for x in data["notes"]],
            max_nodes=int(data["max_nodes"]),
            max_workers=int(data["max_workers"]),
            correction=BatchCorrection.from_json(data.get("correction")),
        )


def _figures(catalog: pd.DataFrame | None, instance_type: str) -> pd.Series | None:
    """The catalog row of a type, or None when the catalog does not list it."""
    if catalog is None:
        return None
    rows = catalog[catalog["instance_type"] == instance_type]
    return None if rows.empty else rows.iloc[0]


def _number(row: pd.Series | None, column: str) -> float | None:
    if row is None or column not in row.index or pd.isna(row[column]):
        return None
    value = float(row[column])
    return value if value > 0 else None


def _gbytes_per_s(gbits: float) -> float:
    return gbits * 1e9 / 8.0


def build_transfer(
    params: StepParams,
    source_type: str,
    target_type: str,
    catalog: pd.DataFrame | None,
    flops_per_sample: float | None = None,
    grad_bytes: float | None = None,
    correction: BatchCorrection | None = None,
) -> TransferFit:
    """Carry ``params`` fitted on ``source_type`` to ``target_type`` using catalog figures.

    Raises InputError naming the missing figure when neither route is possible.
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
        raise InputError(
            f"the catalog has no {PEAK_COLUMN} for {target_type!r}: cannot "
            "carry compute time there",
            column=PEAK_COLUMN,
            fix=fix,
        )
    peak_src = _number(src, PEAK_COLUMN)
    notes = []
    if peak_src is not None:
        scale = peak_src / peak_dst
        compute = Belief.prior(EFFICIENCY_RATIO)
        notes.append(f"compute scaled by {PEAK_COLUMN} {peak_src:g} -> {peak_dst:g}")
        mem_src, mem_dst = _number(src, MEMORY_COLUMN), _number(dst, MEMORY_COLUMN)
        if mem_src and mem_dst:
            # training mixes compute-bound (convolutions, matmuls) and memory-bound layers
            # (normalisation, activations, optimizer): the geometric mean of the two speed-ups,
            # with the gap between them added to the belief's spread
            gap = 0.5 * np.log((mem_src / mem_dst) / scale)
            scale = float(np.sqrt(scale * mem_src / mem_dst))
            compute = Belief(compute.mu, float(np.hypot(compute.sd, gap)))
            notes.append(f"and by {MEMORY_COLUMN} {mem_src:g} -> {mem_dst:g} (geometric mean)")
        alpha, beta = params.alpha_c * scale, params.beta_c * scale
    elif flops_per_sample:
        peak = peak_dst * 1e12
        beta = flops_per_sample / peak
        alpha = params.alpha_c * beta / params.beta_c if params.beta_c > 0 else 0.0
        compute = Belief.prior(COMPUTE_EFFICIENCY)
        notes.append(f"compute from {flops_per_sample:.3g} FLOP/sample at {peak_dst:g} TFLOP/s")
    else:
        raise InputError(
            f"cannot carry compute time from {source_type!r} to {target_type!r}: "
            f"no {PEAK_COLUMN} for the source and no flops_per_sample measured",
            column="flops_per_sample",
            fix="profile with srifty profile (it counts FLOPs per sample)",
        )
    net_dst = _number(dst, "network_gbps")
    net_src = _number(src, "network_gbps")
    intra_bw = _gbytes_per_s(INTRA_NODE_GBPS)
    lat_intra, lat_inter = params.lat_intra, params.lat_inter
    if grad_bytes:
        bw_intra = grad_bytes / intra_bw
        bw_inter = grad_bytes / _gbytes_per_s(net_dst) if net_dst else np.nan
        network = Belief.prior(NETWORK_EFFICIENCY)
        notes.append(f"sync from {grad_bytes:.3g} gradient bytes over the links")
    elif net_src and net_dst and params.bw_inter > 0:
        # the source's fitted seconds already include its efficiency: compare like with like
        bw_inter = params.bw_inter * net_src / net_dst
        bw_intra = params.bw_intra
        network = Belief.prior((1.0, NETWORK_EFFICIENCY[1]))
        notes.append(f"sync scaled by network_gbps {net_src:g} -> {net_dst:g}")
    else:
        raise InputError(
            f"cannot carry synchronisation time to {target_type!r}: no "
            "grad_bytes measured and no network figures for both types",
            column="grad_bytes",
            fix="profile with srifty profile (it records grad_bytes) or measure a multi-worker run",
        )
    if np.isnan(bw_inter):
        raise InputError(
            f"the catalog has no network_gbps for {target_type!r}", column="network_gbps", fix=fix
        )
    base = params._replace(
        alpha_c=alpha,
        beta_c=beta,
        bw_intra=bw_intra,
        bw_inter=bw_inter,
        lat_intra=lat_intra,
        lat_inter=lat_inter,
    )
    # the priors' medians are efficiencies; keep base at efficiency 1 so updates act on them
    return TransferFit(
        base, compute, network, f"{source_type} -> {target_type}", 0, notes, correction=correction
    )
