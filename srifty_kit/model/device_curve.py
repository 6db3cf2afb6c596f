"""Compute time against local batch size on an accelerator: a floor, then linear once it is full.

One training step's compute on one accelerator, at a local batch of ``b`` samples:

    T_c(b) = (F**p + (c * b)**p) ** (1/p)

    F   the floor: a batch that does not fill the device still pays the host's dispatch, one
        launch per kernel, and a whole wave of thread blocks per kernel however few of its
        slots are used (kernel time grows with the number of waves: Habitat, Yu et al., ATC'21)
    c   seconds per sample once the batch fills the device: from there time is linear in b
    p   the knee's sharpness: utilisation c*b / T_c(b) rises towards 1 as b passes F/c, the
        batch that fills the device; one shape constant for every model and accelerator

Carried to another accelerator with the catalog's figures (``DeviceShape.carry``):

    s   = fp32_peak**(1-w) * memory_bandwidth**w      the accelerator's speed, per GPU
    c'  = c * s / s'                                  a full device works at its speed
    F'  = F * (s / s')**phi                           phi = 0 (FLOOR_GRID): the floor is host
                                                      work and wave latency, which a larger
                                                      device does not shorten

so the knee F'/c' moves with the device: a faster accelerator needs a larger batch to fill.
``DeviceShape`` holds the shape constants (p, w, phi) and how far a carried curve misses: the
log-sd of the floor's factor and of the per-sample factor between accelerators, and one step's
misfit around the carried curve. ``learn_shape`` learns all of them from every measured
accelerator by carrying each one's curves to each other one and scoring them against the
measured steps, cold and after one measured step.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import least_squares, nnls

from srifty_kit.model.fit import NOISE_FLOOR
from srifty_kit.model.intervals import conformal_quantile, two_sided_z
from srifty_kit.model.physics import overlap

MIN_BATCH_SIZES = 3  # fewer distinct batch sizes cannot place a floor and a slope
MIN_TYPES = 3  # accelerators needed to learn a shape; fewer: DEFAULT_SHAPE
CALIBRATION_LEVEL = 0.9  # the interval level the learned spreads are calibrated at
# the shape constants tried by learn_shape (a grid: each choice is a physical statement)
SHARPNESS_GRID = (1.0, 1.5, 2.0, 3.0)  # p: 1 adds floor and line; 3 is nearly their max
BANDWIDTH_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)  # w: 0 speed is the fp32 peak, 1 the bandwidth
# phi: held at 0. A floor is host dispatch, kernel launches and one wave's latency, none of
# which a faster device shortens; with four accelerators to learn from, letting phi move
# chose phi = 1 when the T4 was held out and put its carried floors at twice the measured
FLOOR_GRID = (0.0,)
# soft-L1 scale of the shape's loss on log errors: a carried model 10% off counts in full,
# one off by a factor 10 (a machine whose host is ten times slower) does not pick the shape
_SHAPE_F_SCALE = 0.1
_CURVE_F_SCALE = 0.05  # the same for one curve's own fit: 5%, the measurements' noise
# a curve's (log F, log c) never less sure than this from its own fit: a batch range that
# never leaves the floor says little about the slope
_CURVE_PRIOR_SD = 1.0


@dataclass(frozen=True)
class DeviceCurve:
    """One training model's compute on one accelerator: T_c(b) = (F**p + (c*b)**p)**(1/p)."""

    floor_s: float  # F
    per_sample_s: float  # c
    sharpness: float  # p
    # covariance of (log F, log c) from the fit: var log F, their covariance, var log c
    log_cov: tuple[float, float, float]
    misfit: float  # robust sd of the log residuals of the measured batches around the curve
    batch_sizes: int  # distinct local batches it was fitted on

    def time(self, local_bsz: np.ndarray) -> np.ndarray:
        """T_c at each local batch."""
        b = np.asarray(local_bsz, float)
        return overlap(self.floor_s, self.per_sample_s * b, self.sharpness)

    @property
    def knee(self) -> float:
        """F / c: the local batch that fills the device."""
        return self.floor_s / self.per_sample_s


@dataclass(frozen=True)
class DeviceShape:
    """What every accelerator's curve shares, and how far one carried to another misses."""

    sharpness: float  # p in T_c = (F**p + (c*b)**p)**(1/p)
    bandwidth_weight: float  # w in s = fp32_peak**(1-w) * memory_bandwidth**w
    floor_exponent: float  # phi in F' = F * (s/s')**phi
    host_sd: float  # log-sd of the carried floor's factor h (the host and launch part)
    compute_sd: float  # log-sd of the carried per-sample time's factor e (efficiency)
    noise_sd: float  # one step's log misfit around the carried curve, once updated
    basis: str  # which measurements chose these numbers, in words

    def carry(self, curve: DeviceCurve, speed_from: float, speed_to: float) -> tuple[float, float]:
        """(F', c'): ``curve`` moved from an accelerator of speed ``speed_from`` to ``speed_to``."""
        ratio = speed_from / speed_to
        return curve.floor_s * ratio**self.floor_exponent, curve.per_sample_s * ratio


# The shape learned (``learn_shape``) from the single-GPU steps of six training models on the
# five accelerators of the team's reference measurements (T4 g4dn.12xlarge, V100 Azure
# ND40rs_v2, A100 DGX, Quadro RTX 6000, RTX 2080 Ti; figures from benchmarks/gpu_catalog.csv),
# used when a fit measured fewer than MIN_TYPES accelerators. All five chose every number here:
# benchmarks/transfer_accuracy.py scores each pair with a shape learned without its target,
# and tests/model/test_transfer.py checks these values against learn_shape on those rows.
# The floor's spread is wide because one machine's host is: the ND40rs_v2 traces pay ~100 ms a
# step for models other machines run in ~10.
DEFAULT_SHAPE = DeviceShape(
    sharpness=1.5,
    bandwidth_weight=1.0,
    floor_exponent=0.0,
    host_sd=1.597,
    compute_sd=0.3745,
    noise_sd=0.2068,
    basis="learned from the team's reference measurements (five accelerators, six models)",
)


def speed(fp32_tflops: float, mem_bw_gbps: float, bandwidth_weight: float) -> float:
    """s = fp32_peak**(1-w) * memory_bandwidth**w: an accelerator's speed (only ratios matter)."""
    return float(fp32_tflops ** (1.0 - bandwidth_weight) * mem_bw_gbps**bandwidth_weight)


def measured_compute(rows: pd.DataFrame) -> pd.DataFrame:
    """(local_bsz, compute_s) of the rows whose compute was measured: one-worker steps, and
    step - sync where ``sync_time_s`` was measured (the sync left exposed after compute)."""
    step = rows["step_time_s"].to_numpy(float)
    sync = (
        pd.to_numeric(rows["sync_time_s"], errors="coerce").to_numpy(float)
        if "sync_time_s" in rows
        else np.full(len(rows), np.nan)
    )
    single = rows["num_workers"].to_numpy() == 1
    compute = np.where(np.isfinite(sync) & ~single, step - sync, np.where(single, step, np.nan))
    ok = np.isfinite(compute) & (compute > 0)
    return pd.DataFrame(
        {"local_bsz": rows["local_bsz"].to_numpy(float)[ok], "compute_s": compute[ok]}
    )


def _by_batch(local_bsz, compute_s) -> tuple[np.ndarray, np.ndarray]:
    """Distinct batches and the geometric mean compute at each."""
    logs = pd.Series(np.log(np.asarray(compute_s, float))).groupby(np.asarray(local_bsz, float))
    mean = logs.mean()
    return mean.index.to_numpy(float), np.exp(mean.to_numpy())


def fit_curve(local_bsz, compute_s, sharpness: float) -> DeviceCurve | None:
    """The curve through measured compute (one value per step or per batch), or None when
    fewer than MIN_BATCH_SIZES distinct batches were measured.

    Robust least squares (soft L1) on log residuals of the per-batch geometric means; the
    covariance of (log F, log c) is the Gauss-Newton one at the residuals' robust sd, with a
    weak prior (log-sd _CURVE_PRIOR_SD) so that a range that never leaves the floor leaves the
    slope uncertain rather than undefined.
    """
    b, t = _by_batch(local_bsz, compute_s)
    if b.size < MIN_BATCH_SIZES:
        return None
    p = float(sharpness)
    log_t = np.log(t)

    def residuals(x: np.ndarray) -> np.ndarray:
        return np.log(overlap(np.exp(x[0]), np.exp(x[1]) * b, p)) - log_t

    start = np.array([np.log(t.min()), np.log(t[-1] / b[-1])])
    sol = least_squares(residuals, start, loss="soft_l1", f_scale=_CURVE_F_SCALE)
    floor, slope = np.exp(sol.x)
    r = residuals(sol.x)
    misfit = max(float(1.4826 * np.median(np.abs(r))), NOISE_FLOOR)
    a = _floor_share(floor, slope * b, p)
    jac = np.column_stack([a, 1.0 - a])
    ridge = (misfit / _CURVE_PRIOR_SD) ** 2
    cov = misfit**2 * np.linalg.inv(jac.T @ jac + ridge * np.eye(2))
    return DeviceCurve(
        float(floor),
        float(slope),
        p,
        (float(cov[0, 0]), float(cov[0, 1]), float(cov[1, 1])),
        misfit,
        int(b.size),
    )


def _floor_share(floor, line, p: float) -> np.ndarray:
    """d log T_c / d log F = F**p / (F**p + line**p): how much of the step the floor is."""
    ratio = np.asarray(line, float) / floor
    return 1.0 / (1.0 + ratio**p)


@dataclass
class _Carried:
    """Every carried curve of one shape choice, scored against the target's measured steps;
    one array per carried curve, its batches in ascending order."""

    log_error: list[np.ndarray]  # log(measured / carried) at each measured batch of a target
    floor_share: list[np.ndarray]  # d log T_c / d log F there
    source_cov: list[tuple[float, float, float]]  # the source curve's own (log F, log c) fit

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(log error, floor share, variance from the source fit) of every carried step."""
        if not self.log_error:
            return np.array([]), np.array([]), np.array([])
        src = [
            a * a * vf + 2 * a * (1 - a) * cfc + (1 - a) ** 2 * vc
            for a, (vf, cfc, vc) in zip(self.floor_share, self.source_cov, strict=True)
        ]
        return np.concatenate(self.log_error), np.concatenate(self.floor_share), np.concatenate(src)

    def after_one_step(self, var_host: float, var_compute: float, noise: float) -> np.ndarray:
        """|error| / sd of every carried step but the first of its curve, once the first (the
        smallest batch) has updated the belief: the linear-Gaussian posterior in the logs,
        r = a log h - (1-a) log e + noise, as ``transfer`` updates it."""
        scores = []
        for r, a, (vf, cfc, vc) in zip(
            self.log_error, self.floor_share, self.source_cov, strict=True
        ):
            if r.size < 2:
                continue
            prior = np.array([[var_host + vf, -cfc], [-cfc, var_compute + vc]])
            g = np.column_stack([a, -(1.0 - a)])
            gain = prior @ g[0] / (g[0] @ prior @ g[0] + noise**2)
            post = prior - np.outer(gain, g[0] @ prior)
            rest = g[1:]
            sd = np.sqrt(np.einsum("ij,jk,ik->i", rest, post, rest) + noise**2)
            scores.append(np.abs(r[1:] - rest @ (gain * r[0])) / sd)
        return np.concatenate(scores) if scores else np.array([])


def _carry_all(
    curves: dict[tuple[str, str], DeviceCurve],
    steps: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]],
    speeds: dict[str, tuple[float, float]],
    w: float,
    phi: float,
) -> _Carried:
    """Carry every curve to every other measured accelerator of the same training model."""
    carried = _Carried([], [], [])
    for (model, src), curve in curves.items():
        for (other, dst), (b, t) in steps.items():
            if other != model or dst == src:
                continue
            ratio = speed(*speeds[src], w) / speed(*speeds[dst], w)
            floor, slope = curve.floor_s * ratio**phi, curve.per_sample_s * ratio
            pred = overlap(floor, slope * b, curve.sharpness)
            carried.log_error.append(np.log(t / pred))
            carried.floor_share.append(_floor_share(floor, slope * b, curve.sharpness))
            carried.source_cov.append(curve.log_cov)
    return carried


def _soft_l1(r: np.ndarray, scale: float) -> float:
    return float(np.mean(2.0 * scale**2 * (np.sqrt(1.0 + (r / scale) ** 2) - 1.0)))


def _cold_scale(r: np.ndarray, base: np.ndarray, src: np.ndarray, noise: float, z: float) -> float:
    """The factor k with |r| <= z * sqrt(k**2 * base + src + noise**2) at CALIBRATION_LEVEL's
    share of the carried steps: each step's own k, then their conformal quantile."""
    need = np.sqrt(np.maximum((r / z) ** 2 - noise**2 - src, 0.0) / base)
    return conformal_quantile(need, CALIBRATION_LEVEL)


def _update_noise(
    carried: _Carried, var_host: float, var_compute: float, noise: float, z: float
) -> float:
    """The smallest step misfit (at least ``noise``) with which one measured step leaves
    intervals that cover CALIBRATION_LEVEL of the other carried steps (bisection in log)."""

    def covered(sd: float) -> bool:
        scores = carried.after_one_step(var_host, var_compute, sd)
        return scores.size == 0 or conformal_quantile(scores, CALIBRATION_LEVEL) <= z

    if covered(noise):
        return noise
    low, high = np.log(noise), np.log(1.0)
    if not covered(1.0):
        return 1.0
    for _ in range(30):
        mid = 0.5 * (low + high)
        low, high = (low, mid) if covered(float(np.exp(mid))) else (mid, high)
    return float(np.exp(high))


def learn_shape(
    compute: pd.DataFrame, speeds: dict[str, tuple[float, float]]
) -> DeviceShape | None:
    """The shape constants and carried spreads that the measured accelerators support.

    Args:
        compute: measured compute, columns model, instance_type, local_bsz, compute_s (one
            row per step or per batch; see ``measured_compute``).
        speeds: (fp32 TFLOP/s, memory GB/s) per instance type; types without are left out.

    Returns:
        The shape, or None when fewer than MIN_TYPES accelerators have curves of a training
        model measured on another one too.

    How: for each sharpness, one curve per (model, type); for each (sharpness, w, phi) on the
    grids, every curve carried to every other measured type of its model, scored by a robust
    mean of log errors; the best choice is kept. Its errors then give the spreads: one step's
    misfit from the curves' own residuals (their CALIBRATION_LEVEL quantile), the floor's and
    the per-sample factor's log-sd by non-negative least squares of the squared errors on
    their sensitivities, both scaled so that intervals built from them cover
    CALIBRATION_LEVEL of the carried steps (split conformal on these carried curves).
    """
    compute = compute[compute["instance_type"].astype(str).isin(list(speeds))]
    steps = {
        (str(m), str(t)): _by_batch(rows["local_bsz"], rows["compute_s"])
        for (m, t), rows in compute.groupby(["model", "instance_type"], sort=True)
    }
    steps = {k: v for k, v in steps.items() if v[0].size >= MIN_BATCH_SIZES}
    shared = pd.Series([m for m, _ in steps]).value_counts()
    steps = {k: v for k, v in steps.items() if shared[k[0]] >= 2}
    types = sorted({t for _, t in steps})
    if len(types) < MIN_TYPES:
        return None
    fitted = {p: {k: fit_curve(b, t, p) for k, (b, t) in steps.items()} for p in SHARPNESS_GRID}
    best, carried = None, None
    for p, w, phi in itertools.product(SHARPNESS_GRID, BANDWIDTH_GRID, FLOOR_GRID):
        result = _carry_all(fitted[p], steps, speeds, w, phi)
        loss = _soft_l1(result.flat()[0], _SHAPE_F_SCALE)
        if best is None or loss < best[0]:
            best, carried = (loss, p, w, phi), result
    _, p, w, phi = best
    own = np.concatenate([np.log(t / fitted[p][k].time(b)) for k, (b, t) in steps.items()])
    z = two_sided_z(CALIBRATION_LEVEL)
    noise = max(conformal_quantile(np.abs(own), CALIBRATION_LEVEL) / z, NOISE_FLOOR)
    r, a, src = carried.flat()
    design = np.column_stack([a * a, (1.0 - a) ** 2])
    (var_host, var_compute), _ = nnls(design, r * r - noise**2 - src)
    var_host, var_compute = max(var_host, NOISE_FLOOR**2), max(var_compute, NOISE_FLOOR**2)
    k = _cold_scale(r, design @ np.array([var_host, var_compute]), src, noise, z)
    # one step's misfit, calibrated where it matters most: after one measured step the
    # belief rests on it, so it is widened until the carried steps' other batches are covered
    # at the level (from the curves' own residuals up); then the cold scale again with it
    noise = _update_noise(carried, k * k * var_host, k * k * var_compute, noise, z)
    k = _cold_scale(r, design @ np.array([var_host, var_compute]), src, noise, z)
    pairs = len({(m, t) for m, t in steps})
    return DeviceShape(
        sharpness=p,
        bandwidth_weight=w,
        floor_exponent=phi,
        host_sd=float(k * np.sqrt(var_host)),
        compute_sd=float(k * np.sqrt(var_compute)),
        noise_sd=float(noise),
        basis=f"learned from {pairs} measured curves on {len(types)} accelerators "
        f"({', '.join(types)}), {r.size} carried steps",
    )


def learn_curves(
    table: pd.DataFrame,
    speeds: dict[str, tuple[float, float]],
    shape: DeviceShape | None = None,
) -> tuple[dict[tuple[str, str], DeviceCurve], DeviceShape]:
    """Every (model, instance_type) group's curve, and the shape they were fitted with.

    ``shape`` when given (say, learned on other measurements); else learned from these groups
    when MIN_TYPES accelerators with figures allow (``learn_shape``); else DEFAULT_SHAPE.
    """
    parts = [
        measured_compute(rows).assign(model=str(m), instance_type=str(t))
        for (m, t), rows in table.groupby(["model", "instance_type"], sort=True)
    ]
    compute = pd.concat(parts, ignore_index=True)
    if shape is None:
        shape = learn_shape(compute, speeds) or DEFAULT_SHAPE
    curves = {}
    for (m, t), rows in compute.groupby(["model", "instance_type"], sort=True):
        curve = fit_curve(rows["local_bsz"], rows["compute_s"], shape.sharpness)
        if curve is not None:
            curves[(str(m), str(t))] = curve
    return curves, shape
