"""Candidate configurations as flat numpy arrays: enumeration over the catalog, prediction, cost.

A candidate is instance type x nodes x workers per node x local batch x pricing, or a mix of
two types. Everything is evaluated column-wise over arrays (no per-row Python): one call of
``StepTimeModel.predict_arrays`` per instance type, then broadcasting. Only the rows a user
sees become a DataFrame (``to_frame``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.special import ndtri

from srifty_kit.decide import hetero, spot
from srifty_kit.errors import InputError
from srifty_kit.model.efficiency import SECONDS_PER_HOUR, efficiency
from srifty_kit.model.posterior import Belief

if TYPE_CHECKING:  # pragma: no cover
    from srifty_kit.decide.job import Constraints, Job
    from srifty_kit.model.estimator import StepTimeModel

# the batch grid when the job names none: powers of two (memory permitting)
DEFAULT_LOCAL_BSZ = tuple(2**i for i in range(11))  # 1 .. 1024
# reference batch sizes used to read a type's compute line t = alpha + beta * b for mixes
_LINE_AT = (8.0, 64.0)


def _price(usd: np.ndarray) -> np.ndarray:
    """Prices with 0 and below taken as unknown (NaN): a "$0" pick is never offered."""
    return np.where(usd > 0, usd, np.nan)


@dataclass
class Types:
    """The instance types in play: one entry per catalog row, as arrays."""

    names: np.ndarray  # instance_type
    region: np.ndarray
    gpus: np.ndarray  # GPUs per node: the most workers one node runs
    vcpus: np.ndarray
    gpu_mem: np.ndarray  # GiB per GPU (NaN when unknown)
    ondemand: np.ndarray  # USD per node-hour
    spot: np.ndarray  # USD per node-hour, NaN where the catalog has no spot price
    hazard: np.ndarray  # per-node hourly reclaim hazard (spot.hourly_hazard of the bucket)

    @classmethod
    def from_catalog(cls, rows: pd.DataFrame) -> Types:
        """Arrays of the catalog rows given (already filtered)."""

        def num(col: str) -> np.ndarray:
            return pd.to_numeric(rows[col], errors="coerce").to_numpy(dtype=float)

        return cls(
            names=rows["instance_type"].astype(str).to_numpy(),
            region=rows["region"].astype(str).to_numpy(),
            gpus=_count(num("gpu_count")),
            # a type off EC2 (a user's on-premises row) may give no vCPUs: 0, which no EC2
            # vCPU quota counts (``_quota_nodes``)
            vcpus=_count(num("vcpus")),
            gpu_mem=num("gpu_memory_gib"),
            # a price of 0 is no price (a placeholder, never a free instance): unknown
            ondemand=_price(num("ondemand_usd_per_hr")),
            spot=_price(num("spot_usd_per_hr")),
            hazard=spot.hourly_hazard(rows["spot_interruption_bucket"].to_numpy(dtype=object)),
        )

    def __len__(self) -> int:
        return len(self.names)


@dataclass
class Candidates:
    """Equal-length arrays, one element per candidate (see ``ARRAYS``)."""

    cols: dict[str, np.ndarray]
    types: Types
    skipped: dict[str, str] = field(default_factory=dict)  # instance type -> why left out
    # a given list's own columns beyond the contract's, one row per listed row (``cols["row"]``
    # points into it): passed through to the result table (design.md: extra columns are kept)
    extra: pd.DataFrame | None = None

    def __len__(self) -> int:
        return len(self.cols["type"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def take(self, index: np.ndarray) -> Candidates:
        """The candidates at ``index`` (positions or a boolean mask)."""
        cols = {k: v[index] for k, v in self.cols.items()}
        return Candidates(cols, self.types, self.skipped, self.extra)


def local_batches(job: Job, types: Types) -> list[np.ndarray]:
    """The memory-feasible local batches of each type: the job's grid under its memory cap."""
    grid = np.asarray(job.local_bsz or DEFAULT_LOCAL_BSZ, dtype=np.int64)
    out = []
    for mem in types.gpu_mem:
        cap = job.max_local_bsz(mem)
        out.append(grid[grid <= cap])
    return out


def _count(values: np.ndarray) -> np.ndarray:
    """Whole counts of a catalog column, 0 where it gives none (NaN cast to int is garbage)."""
    return np.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0).astype(np.int64)


def _quota_nodes(quota: int | None, vcpus: int) -> int:
    """The most nodes of a type with ``vcpus`` vCPUs that fit the vCPU quota: no limit without
    a quota or a vCPU count (a type off EC2, which no EC2 quota counts)."""
    if quota is None or vcpus <= 0:
        return np.iinfo(np.int64).max
    return int(quota // vcpus)


def _node_counts(constraints: Constraints, vcpus: int) -> np.ndarray:
    top = min(constraints.max_nodes, _quota_nodes(constraints.vcpu_quota, vcpus))
    return np.arange(1, top + 1, dtype=np.int64)


def _in_batch_range(job: Job, global_bsz: np.ndarray) -> np.ndarray:
    keep = global_bsz >= job.global_bsz_min
    if job.global_bsz_max is not None:
        keep &= global_bsz <= job.global_bsz_max
    return keep


# The most configurations one search enumerates: what its arrays hold in memory. Measured
# (`srifty search` on the embedded catalog at --max-nodes 200 and 800, peak RSS): about 340
# bytes per configuration at its peak, so the cap is about 1.3 GiB.
MAX_CANDIDATES = 4_000_000
BYTES_PER_CANDIDATE = 340


def check_size(constraints: Constraints, count: Callable[[int], int]) -> None:
    """Refuse a search whose enumeration would not fit, before any array is made.

    Args:
        constraints: the search's constraints (``max_nodes`` is what usually grows it).
        count: configurations the enumeration makes at a given ``max_nodes`` (non-decreasing).

    Raises:
        InputError: more than ``MAX_CANDIDATES``; it gives the estimate (configurations and
            memory) and the largest ``max_nodes`` that fits.
    """
    n = count(constraints.max_nodes)
    if n <= MAX_CANDIDATES:
        return
    low, high = 0, constraints.max_nodes  # the largest max_nodes that fits: count is monotone
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if count(mid) <= MAX_CANDIDATES else (low, mid - 1)
    gib = n * BYTES_PER_CANDIDATE / 2**30
    fit = f"give `max_nodes` at most {low:,}, or " if low >= 1 else ""
    raise InputError(
        f"max_nodes {constraints.max_nodes:,} would enumerate about {n:.2g} configurations "
        f"(about {gib:,.0f} GiB of memory); one search holds at most {MAX_CANDIDATES:,}",
        fix=fit + "narrow the search with `families`, `instance_types` or `local_bsz`",
    )


def _single_count(job: Job, constraints: Constraints, types: Types) -> Callable[[int], int]:
    sizes = np.array([b.size for b in local_batches(job, types)], dtype=np.int64)
    quota = np.array([_quota_nodes(constraints.vcpu_quota, int(v)) for v in types.vcpus])
    gpus = np.maximum(types.gpus, 0)
    return lambda top: int((np.minimum(top, quota) * gpus * sizes).sum())


# the job's fields that decide which configurations are enumerated and how fast each steps
# (``local_batches``, ``_in_batch_range``, ``predict``); the rest (its work to the target, its
# checkpoints, its spot policy) only price them (``price``)
JOB_SHAPE = (
    "model",
    "local_bsz",
    "global_bsz_min",
    "global_bsz_max",
    "memory_per_sample_gib",
    "model_memory_gib",
)


def same_configurations(a: Job, b: Job) -> bool:
    """Whether two jobs enumerate and predict the same configurations (``JOB_SHAPE``): then
    one's predictions price the other's candidates."""
    return all(getattr(a, f) == getattr(b, f) for f in JOB_SHAPE)


def enumerate_single(job: Job, constraints: Constraints, types: Types) -> dict[str, np.ndarray]:
    """Every type x nodes x workers per node x local batch (one pricing; see ``price``).

    Raises:
        InputError: the enumeration would exceed ``MAX_CANDIDATES`` (``check_size``).
    """
    check_size(constraints, _single_count(job, constraints, types))
    batches = local_batches(job, types)
    parts = []
    for t in range(len(types)):
        nodes = _node_counts(constraints, int(types.vcpus[t]))
        per_node = np.arange(1, int(types.gpus[t]) + 1, dtype=np.int64)
        if nodes.size == 0 or batches[t].size == 0:
            continue
        n, w, b = (a.ravel() for a in np.meshgrid(nodes, per_node, batches[t], indexing="ij"))
        workers = n * w
        keep = _in_batch_range(job, workers * b)
        parts.append((np.full(keep.sum(), t, np.int64), n[keep], workers[keep], b[keep]))
    if not parts:
        return _empty_config()
    t, n, w, b = (np.concatenate(x) for x in zip(*parts, strict=True))
    none = np.full(t.size, -1, np.int64)
    zero = np.zeros(t.size, np.int64)
    return {
        "type": t,
        "nodes": n,
        "workers": w,
        "local_bsz": b,
        "type2": none,
        "nodes2": zero,
        "workers2": zero,
        "local_bsz2": zero,
    }


def _empty_config() -> dict[str, np.ndarray]:
    e = np.zeros(0, np.int64)
    return {
        k: e
        for k in (
            "type",
            "nodes",
            "workers",
            "local_bsz",
            "type2",
            "nodes2",
            "workers2",
            "local_bsz2",
        )
    }


def enumerate_mixes(
    job: Job, constraints: Constraints, types: Types, pool: np.ndarray
) -> dict[str, np.ndarray]:
    """Two-type clusters from ``pool`` (type positions): nodes a + b <= max_nodes, all GPUs used.

    The global batch is (W_a + W_b) x each grid batch; the local batches come later from the
    speed-proportional split (``split_mixes``), once the compute lines are known.
    """
    grid = np.asarray(job.local_bsz or DEFAULT_LOCAL_BSZ, dtype=np.int64)
    quota = constraints.vcpu_quota
    nodes = [min(constraints.max_nodes, _quota_nodes(quota, int(types.vcpus[a]))) for a in pool]

    def count(top: int) -> int:  # the meshgrid below: na x nb x grid per pair, before a + b
        n = [min(top, c) for c in nodes]
        return sum(n[i] * n[j] for i in range(len(n)) for j in range(i + 1, len(n))) * grid.size

    check_size(constraints, count)
    parts = []
    for i, a in enumerate(pool):
        for b in pool[i + 1 :]:
            na = _node_counts(constraints, int(types.vcpus[a]))
            nb = _node_counts(constraints, int(types.vcpus[b]))
            x, y, g = (v.ravel() for v in np.meshgrid(na, nb, grid, indexing="ij"))
            keep = x + y <= constraints.max_nodes
            if constraints.vcpu_quota is not None:
                keep &= x * types.vcpus[a] + y * types.vcpus[b] <= constraints.vcpu_quota
            x, y, g = x[keep], y[keep], g[keep]
            wa, wb = x * types.gpus[a], y * types.gpus[b]
            big = (wa + wb) * g
            keep = _in_batch_range(job, big)
            m = int(keep.sum())
            parts.append(
                (np.full(m, a), x[keep], wa[keep], big[keep], np.full(m, b), y[keep], wb[keep])
            )
    if not parts:
        return _empty_config()
    ta, na, wa, big, tb, nb, wb = (
        np.concatenate(p).astype(np.int64) for p in zip(*parts, strict=True)
    )
    return {
        "type": ta,
        "nodes": na,
        "workers": wa,
        "local_bsz": big,
        "type2": tb,
        "nodes2": nb,
        "workers2": wb,
        "local_bsz2": np.zeros_like(ta),
    }


def from_table(table: pd.DataFrame, types: Types) -> dict[str, np.ndarray]:
    """Single-type configurations of a table (model, instance_type, num_nodes, ...) as arrays."""
    position = {str(name): i for i, name in enumerate(types.names)}
    t = table["instance_type"].astype(str).map(position)
    if t.isna().any():
        missing = str(table["instance_type"][t.isna()].iloc[0])
        raise InputError(
            f"instance type {missing!r} has no catalog row (no price)",
            column="instance_type",
            fix="add it to the catalog, or drop its rows",
        )
    n = len(table)
    zero = np.zeros(n, np.int64)
    return {
        "type": t.to_numpy(np.int64),
        "nodes": table["num_nodes"].to_numpy(np.int64),
        "workers": table["num_workers"].to_numpy(np.int64),
        "local_bsz": table["local_bsz"].to_numpy(np.int64),
        "type2": np.full(n, -1),
        "nodes2": zero,
        "workers2": zero,
        "local_bsz2": zero,
    }


def compute_lines(
    model: StepTimeModel, job: Job, types: Types, which: np.ndarray, catalog: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """alpha, beta of t_compute = alpha + beta * b for each type (one worker, one node)."""
    alpha = np.full(len(types), np.nan)
    beta = np.full(len(types), np.nan)
    b = np.asarray(_LINE_AT)
    for t in which:
        p = model.predict_arrays(
            job.model,
            str(types.names[t]),
            np.ones(2),
            np.ones(2),
            b,
            gpus_per_node=int(types.gpus[t]),
            catalog=catalog,
        )
        c = p["compute_s"]
        beta[t] = max((c[1] - c[0]) / (b[1] - b[0]), 1e-12)
        alpha[t] = max(c[0] - beta[t] * b[0], 0.0)
    return alpha, beta


def split_mixes(
    model: StepTimeModel,
    job: Job,
    types: Types,
    cfg: dict[str, np.ndarray],
    catalog: pd.DataFrame,
) -> dict[str, np.ndarray]:
    """Give each mix its speed-proportional whole local batches and drop memory-infeasible ones."""
    if cfg["type"].size == 0:
        return cfg
    used = np.unique(np.concatenate([cfg["type"], cfg["type2"]]))
    alpha, beta = compute_lines(model, job, types, used, catalog)
    ta, tb = cfg["type"], cfg["type2"]
    big = cfg["local_bsz"]  # enumerate_mixes parks the global batch here
    b_a, _ = hetero.proportional_split(
        big, cfg["workers"], cfg["workers2"], alpha[ta], beta[ta], alpha[tb], beta[tb]
    )
    ia, ib, _ = hetero.integer_split(big, cfg["workers"], cfg["workers2"], b_a)
    caps = np.array([job.max_local_bsz(m) for m in types.gpu_mem], dtype=float)
    keep = (ia <= caps[ta]) & (ib <= caps[tb])
    out = {k: v[keep] for k, v in cfg.items()}
    out["local_bsz"], out["local_bsz2"] = ia[keep], ib[keep]
    return out


# the belief arrays a candidate carries from ``StepTimeModel.predict_belief`` (log space)
BELIEF = ("log_centre", "sd_group", "sd_network", "sd_place", "sd_noise", "group", "network")


def predict(
    model: StepTimeModel,
    job: Job,
    types: Types,
    cfg: dict[str, np.ndarray],
    level: float,
    catalog: pd.DataFrame,
    skipped: dict[str, str],
) -> dict[str, np.ndarray]:
    """Step time, its belief and breakdown for every configuration (two calls per type).

    ``step_time_s`` is the believed median of a run's mean step, ``step_time_lo`` and
    ``step_time_hi`` its (1 - level) and ``level`` quantiles (one-sided: the step a run stays
    under with probability ``level``); ``BELIEF`` the Gaussian's parts in log space
    (``model.posterior.Belief``), so a search can compute probabilities and draws.
    A mix is as slow as its slower half: each type's step is predicted on the whole cluster
    (all nodes, all workers) at its own local batch, and the half with the larger median is
    taken, with its belief, so the all-reduce runs at the slower link's speed. A type the
    model cannot predict is dropped and recorded in ``skipped``.
    """
    n = cfg["type"].size
    mixed = cfg["type2"] >= 0
    nodes = cfg["nodes"] + cfg["nodes2"]
    workers = cfg["workers"] + cfg["workers2"]
    names = ("step_time_s", "compute_s", "sync_s", *BELIEF)
    out = {k: np.full(n, np.nan) for k in names}
    # every (type, position) pair to predict: the first half of each config, then second halves
    who = np.concatenate([cfg["type"], cfg["type2"][mixed]])
    pos = np.concatenate([np.arange(n), np.flatnonzero(mixed)])
    bsz = np.concatenate([cfg["local_bsz"], cfg["local_bsz2"][mixed]])
    order = np.argsort(who, kind="stable")
    who, pos, bsz = who[order], pos[order], bsz[order]
    starts = np.flatnonzero(np.diff(who, prepend=-1))
    ends = np.append(starts[1:], who.size)[: starts.size]
    for s, e in zip(starts, ends, strict=True):
        t = int(who[s])
        rows = pos[s:e]
        args = (job.model, str(types.names[t]), nodes[rows], workers[rows], bsz[s:e])
        try:
            b, p = model.predict_belief(*args, catalog=catalog, with_parts=True)
        except InputError as err:
            skipped[str(types.names[t])] = str(err)
            out["step_time_s"][rows] = np.inf  # marks the configuration for removal
            continue
        median = b.median
        this = {
            "step_time_s": median,
            "compute_s": p["compute_s"],
            "sync_s": p["sync_s"],
            "log_centre": b.centre,
            "sd_group": b.group_sd,
            "sd_network": b.network_sd,
            "sd_place": b.place_sd,
            "sd_noise": b.noise_sd,
            "group": b.group.astype(float),
            "network": b.network.astype(float),
        }
        prev = out["step_time_s"][rows]
        take = np.isnan(prev) | (median > prev)  # the slower half of a mix decides
        for k in out:
            out[k][rows] = np.where(take, this[k], out[k][rows])
    # a mix's placement is two types' nodes: its stray is its own
    out["sd_noise"] = np.where(mixed, np.hypot(out["sd_noise"], out["sd_place"]), out["sd_noise"])
    out["sd_place"] = np.where(mixed, 0.0, out["sd_place"])
    ok = np.isfinite(out["step_time_s"])
    return at_level(
        {**{k: v[ok] for k, v in cfg.items()}, **{k: v[ok] for k, v in out.items()}}, level
    )


def at_level(cfg: dict[str, np.ndarray], level: float) -> dict[str, np.ndarray]:
    """``cfg`` (``predict``'s) with ``step_time_lo`` and ``step_time_hi`` at ``level``: the
    (1 - level) and ``level`` quantiles of each configuration's belief, median x exp(-+ z sd),
    z the one-sided normal quantile (a new dict; the arrays it shares are not changed)."""
    sd = log_sd({**cfg, "sd_spot": 0.0})  # the step's own belief: no reclaims priced yet
    q = _quantile_z(level)
    median = cfg["step_time_s"]
    return {
        **cfg,
        "step_time_lo": median * np.exp(-q * sd),
        "step_time_hi": median * np.exp(q * sd),
    }


def from_interval(cfg: dict[str, np.ndarray], level: float) -> dict[str, np.ndarray]:
    """``cfg`` with a belief read off given step_time_lo / step_time_hi (one-sided ``level``
    quantiles, e.g. of another predictor, or equal to the point when the time is known): the
    whole spread independent per configuration."""
    step, lo, hi = cfg["step_time_s"], cfg["step_time_lo"], cfg["step_time_hi"]
    q = max(_quantile_z(level), 1e-9)
    sd = np.log(np.maximum(hi, 1e-300) / np.maximum(lo, 1e-300)) / (2.0 * q)
    zero = np.zeros(step.size)
    out = dict(cfg)
    out.update(
        log_centre=zero.copy(),
        sd_group=zero.copy(),
        sd_network=zero.copy(),
        sd_place=zero.copy(),
        sd_noise=sd,
        group=np.arange(step.size, dtype=float),
        network=np.arange(step.size, dtype=float),
    )
    return out


# the level the spread spot reclaims add is read at when the confidence asked is lower
SPREAD_LEVEL = 0.9


def _quantile_z(level: float) -> float:
    """The standard normal's ``level`` quantile (one-sided)."""
    return float(ndtri(level))


def log_sd(cols: dict[str, np.ndarray]) -> np.ndarray:
    """Marginal sd of log run time of each candidate (``model.posterior.Belief.sd``), with
    the spread the spot reclaims add where priced on spot (``price``)."""
    return np.sqrt(
        cols["sd_group"] ** 2
        + cols["sd_network"] ** 2
        + cols["sd_place"] ** 2
        + cols["sd_noise"] ** 2
        + cols["sd_spot"] ** 2
    )


def per_cluster(cfg: dict[str, np.ndarray], per_node: np.ndarray) -> np.ndarray:
    """A per-node figure summed over the cluster: n_a x f(a) (+ n_b x f(b) for a mix)."""
    mixed = cfg["type2"] >= 0
    second = per_node[np.where(mixed, cfg["type2"], 0)]
    return cfg["nodes"] * per_node[cfg["type"]] + np.where(mixed, cfg["nodes2"] * second, 0.0)


def price(
    job: Job,
    constraints: Constraints,
    types: Types,
    cfg: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Time and cost to the target, with their quantiles, on-demand and (if allowed) spot.

    time = S(B) x step time x (1 + c / tau) for checkpoint writes; ``efficiency`` is Pollux's
    E(B_ref) / E(B), relative to the job's reference batch (above 1 below it), so that ``steps x
    global_bsz x efficiency`` is the job's samples and ``samples / goodput`` its training time
    (``time_h`` before checkpoint writes and spot overhead). ``time_h`` is the believed median,
    ``time_hi_h`` the time a run stays under with probability ``constraints.confidence`` and
    ``time_lo_h`` the (1 - confidence) quantile (one-sided ends, so ``time_hi_h <= deadline`` is
    the chance constraint P(time <= deadline) >= confidence); ``time_mean_h`` and
    ``cost_mean_usd`` the expectations a cost objective minimises. A run's mean step is what
    decides, not one step's: its noise averages out over a run (``model.posterior``). Spot rows,
    appended after the on-demand ones, add the reclaim overhead of ``spot``: its expected value,
    and its bound at the confidence for the upper ends; the spread the reclaims add is kept as
    ``sd_spot`` so that probabilities (``meet_probability``) agree with those ends (read at
    ``SPREAD_LEVEL`` where the confidence is lower: a bound near the median says little of a
    spread, and at 50% nothing).
    """
    work = job.work
    n = cfg["type"].size
    sp = per_cluster(cfg, types.spot)
    on_spot = np.flatnonzero(np.isfinite(sp)) if constraints.spot else np.zeros(0, np.int64)
    rows = np.concatenate([np.arange(n), on_spot])
    out = {k: v[rows] for k, v in cfg.items()} if on_spot.size else dict(cfg)
    is_spot = np.arange(rows.size) >= n
    big = out["workers"] * out["local_bsz"] + out["workers2"] * out["local_bsz2"]
    steps = work.steps_at(big)
    hours = steps * ((1.0 + job.checkpoint_write_h / job.checkpoint_interval_h) / SECONDS_PER_HOUR)
    od = per_cluster(cfg, types.ondemand)[rows]
    usd = np.where(is_spot, sp[rows], od)
    throughput = big / out["step_time_s"]
    # Pollux's efficiency against the batch the work was counted at, E(B_ref) / E(B): the
    # one that agrees with the steps, steps x B x efficiency = the samples given, so that
    # samples / goodput is the training time (before checkpoint writes and spot reclaims)
    eff = efficiency(big, work.noise_scale, work.reference_bsz)
    run = {
        k: hours * out[s]
        for k, s in (
            ("time_h", "step_time_s"),
            ("time_lo_h", "step_time_lo"),
            ("time_hi_h", "step_time_hi"),
        )
    }
    sd = log_sd({**out, "sd_spot": np.zeros(rows.size)})
    out.update(
        global_bsz=big,
        steps=steps,
        throughput=throughput,
        efficiency=eff,
        goodput=throughput * eff,
        spot=is_spot,
        usd_per_hr=usd,
        **run,
        time_mean_h=run["time_h"] * _lognormal_factor(sd),
        cost_usd=run["time_h"] * usd,
        cost_lo_usd=run["time_lo_h"] * usd,
        cost_hi_usd=run["time_hi_h"] * usd,
        cost_mean_usd=run["time_h"] * usd * _lognormal_factor(sd),
        spot_overhead_h=np.zeros(rows.size),
        expected_reclaims=np.zeros(rows.size),
        time_factor=hours,  # run hours per second of mean step (spot: with its overhead)
        sd_spot=np.zeros(rows.size),
    )
    if on_spot.size:
        hazard = per_cluster(cfg, types.hazard)[on_spot]
        tail = slice(n, None)
        work_h = run["time_h"][tail]
        mean = spot.expected_run(work_h, hazard, job.spot_policy, usd[tail], od[tail])
        high = spot.upper_run(
            run["time_hi_h"][tail],
            hazard,
            job.spot_policy,
            usd[tail],
            od[tail],
            constraints.confidence,
        )
        # the reclaims' own spread: what makes the bound's log distance from the expected run
        # wider than the step's belief alone (0 where it is not); read at the confidence, or
        # at SPREAD_LEVEL where the confidence is lower: the nearer a level lies to the
        # median, the less its bound says of a spread (at 50% it is the median: nothing)
        level = max(constraints.confidence, SPREAD_LEVEL)
        q = _quantile_z(level)
        bound = high["time_h"]
        if level != constraints.confidence:  # the step's own upper end at that level, bounded
            at = work_h * np.exp(q * sd[tail])
            bound = spot.upper_run(at, hazard, job.spot_policy, usd[tail], od[tail], level)
            bound = bound["time_h"]
        reach = np.log(np.maximum(bound, 1e-300) / np.maximum(mean["time_h"], 1e-300))
        out["sd_spot"][tail] = np.sqrt(np.maximum((reach / q) ** 2 - sd[tail] ** 2, 0))
        out["time_factor"][tail] = hours[tail] * mean["time_h"] / np.maximum(work_h, 1e-300)
        ratio = mean["cost_usd"] / np.maximum(mean["time_h"], 1e-300)
        out["spot_overhead_h"][tail] = mean["time_h"] - work_h
        out["expected_reclaims"][tail] = mean["reclaims"]
        out["time_h"][tail] = mean["time_h"]
        out["cost_usd"][tail] = mean["cost_usd"]
        out["time_hi_h"][tail] = high["time_h"]
        out["cost_hi_usd"][tail] = high["cost_usd"]
        spread = _lognormal_factor(np.hypot(sd[tail], out["sd_spot"][tail]))
        out["time_mean_h"][tail] = mean["time_h"] * spread
        out["cost_mean_usd"][tail] = mean["time_h"] * ratio * spread
    return out


def _lognormal_factor(sd: np.ndarray) -> np.ndarray:
    """E[exp(X)] / exp(median) = exp(sd^2 / 2) of a normal X, capped where it would overflow."""
    return np.exp(np.minimum(0.5 * np.square(sd), 700.0))


def belief_of(cols: dict[str, np.ndarray]) -> Belief:
    """The candidates' run times in hours as a ``model.posterior.Belief`` (spot rows with
    their expected overhead in the point and the reclaims' spread in the independent part)."""
    return Belief(
        cols["step_time_s"] * cols["time_factor"] * np.exp(-cols["log_centre"]),
        cols["log_centre"],
        cols["sd_group"],
        cols["sd_network"],
        np.hypot(cols["sd_noise"], cols["sd_spot"]),
        cols["group"].astype(np.int64),
        cols["network"].astype(np.int64),
        cols["sd_place"],
        cols["nodes"] + cols["nodes2"],
        cols["workers"] + cols["workers2"],
    )


def meet_probability(
    cols: dict[str, np.ndarray], deadline_h: float | None, budget_usd: float | None
) -> np.ndarray:
    """P(time <= deadline and cost <= budget) of each candidate under the model's belief.

    Cost is time times the hourly price (spot: the expected cost per expected hour), so both
    constraints are one bound on the run time, and the probability is exact under the belief.
    """
    bound = np.full(cols["type"].size, np.inf)
    if deadline_h is not None:
        bound = np.minimum(bound, deadline_h)
    if budget_usd is not None:
        per_hour = cols["cost_usd"] / np.maximum(cols["time_h"], 1e-300)
        bound = np.minimum(bound, budget_usd / np.maximum(per_hour, 1e-300))
    if deadline_h is None and budget_usd is None:
        return np.ones(cols["type"].size)
    return belief_of(cols).prob_below(bound)


# the user-facing columns, in order, and how each comes from the arrays
RESULT_COLUMNS = (
    "instance_type",
    "region",
    "num_nodes",
    "gpus_per_node",
    "num_workers",
    "local_bsz",
    "pricing",
    "instance_type_2",
    "num_nodes_2",
    "num_workers_2",
    "local_bsz_2",
    "global_bsz",
    "usd_per_hr",
    "step_time_s",
    "step_time_lo",
    "step_time_hi",
    "compute_s",
    "sync_s",
    "throughput",
    "efficiency",
    "goodput",
    "steps",
    "time_h",
    "time_lo_h",
    "time_hi_h",
    "cost_usd",
    "cost_lo_usd",
    "cost_hi_usd",
    "spot_overhead_h",
    "expected_reclaims",
    "time_mean_h",
    "cost_mean_usd",
    "p_meet",
)


def to_frame(c: Candidates, index: np.ndarray | None = None) -> pd.DataFrame:
    """The candidates at ``index`` (all if None) as the result table, a given list's own
    columns (``Candidates.extra``) after the result's."""
    cols = c.cols if index is None else {k: v[index] for k, v in c.cols.items()}
    ty = c.types
    mixed = cols["type2"] >= 0
    t2 = np.where(mixed, cols["type2"], 0)

    def second(name: str) -> pd.arrays.IntegerArray:  # the mix's second type, NA without one
        return pd.arrays.IntegerArray(np.where(mixed, cols[name], 0).astype(np.int64), ~mixed)

    out = {
        "instance_type": ty.names[cols["type"]],
        "region": ty.region[cols["type"]],
        "num_nodes": cols["nodes"],
        "gpus_per_node": ty.gpus[cols["type"]],
        "num_workers": cols["workers"],
        "local_bsz": cols["local_bsz"],
        "pricing": np.where(cols["spot"], "spot", "on-demand"),
        "instance_type_2": pd.array(np.where(mixed, ty.names[t2], None), dtype="string"),
        "num_nodes_2": second("nodes2"),
        "num_workers_2": second("workers2"),
        "local_bsz_2": second("local_bsz2"),
    }
    n = mixed.size
    for name in RESULT_COLUMNS[11:]:
        out[name] = cols[name] if name in cols else np.full(n, np.nan)
    # one constructor call: a column at a time costs a block insert each (the panel's hot path)
    frame = pd.DataFrame(out, columns=list(RESULT_COLUMNS))
    if c.extra is None or c.extra.columns.empty:
        return frame
    theirs = c.extra.iloc[cols["row"]].reset_index(drop=True)
    return pd.concat([frame, theirs], axis=1)
