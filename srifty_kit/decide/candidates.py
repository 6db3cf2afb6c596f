"""Candidate configurations as flat numpy arrays: enumeration over the catalog, prediction, cost.

A candidate is instance type x nodes x workers per node x local batch x pricing, or a mix of
two types. Everything is evaluated column-wise over arrays (no per-row Python): one call of
``StepTimeModel.predict_arrays`` per instance type, then broadcasting. Only the rows a user
sees become a DataFrame (``to_frame``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from srifty_kit.decide import hetero, spot
from srifty_kit.errors import InputError
from srifty_kit.model.efficiency import SECONDS_PER_HOUR, efficiency

if TYPE_CHECKING:  # pragma: no cover
    from srifty_kit.decide.job import Constraints, Job
    from srifty_kit.model.estimator import StepTimeModel

# the batch grid when the job names none: powers of two (memory permitting)
DEFAULT_LOCAL_BSZ = tuple(2**i for i in range(11))  # 1 .. 1024
# reference batch sizes used to read a type's compute line t = alpha + beta * b for mixes
_LINE_AT = (8.0, 64.0)


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
            gpus=num("gpu_count").astype(np.int64),
            vcpus=num("vcpus").astype(np.int64),
            gpu_mem=num("gpu_memory_gib"),
            ondemand=num("ondemand_usd_per_hr"),
            spot=num("spot_usd_per_hr"),
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

    def __len__(self) -> int:
        return len(self.cols["type"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def take(self, index: np.ndarray) -> Candidates:
        """The candidates at ``index`` (positions or a boolean mask)."""
        return Candidates({k: v[index] for k, v in self.cols.items()}, self.types, self.skipped)


def local_batches(job: Job, types: Types) -> list[np.ndarray]:
    """The memory-feasible local batches of each type: the job's grid under its memory cap."""
    grid = np.asarray(job.local_bsz or DEFAULT_LOCAL_BSZ, dtype=np.int64)
    out = []
    for mem in types.gpu_mem:
        cap = job.max_local_bsz(mem)
        out.append(grid[grid <= cap])
    return out


def _node_counts(constraints: Constraints, vcpus: int) -> np.ndarray:
    top = constraints.max_nodes
    if constraints.vcpu_quota is not None:
        top = min(top, int(constraints.vcpu_quota // max(vcpus, 1)))
    return np.arange(1, top + 1, dtype=np.int64)


def _in_batch_range(job: Job, global_bsz: np.ndarray) -> np.ndarray:
    keep = global_bsz >= job.global_bsz_min
    if job.global_bsz_max is not None:
        keep &= global_bsz <= job.global_bsz_max
    return keep


def enumerate_single(job: Job, constraints: Constraints, types: Types) -> dict[str, np.ndarray]:
    """Every type x nodes x workers per node x local batch (one pricing; see ``price``)."""
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


def predict(
    model: StepTimeModel,
    job: Job,
    types: Types,
    cfg: dict[str, np.ndarray],
    level: float,
    catalog: pd.DataFrame,
    skipped: dict[str, str],
) -> dict[str, np.ndarray]:
    """Step time with its interval and breakdown for every configuration (one call per type).

    A mix is as slow as its slower half: each type's step is predicted on the whole cluster
    (all nodes, all workers) at its own local batch, and the larger is taken, so the
    all-reduce runs at the slower link's speed. A type the model cannot predict is dropped
    and recorded in ``skipped``.
    """
    n = cfg["type"].size
    mixed = cfg["type2"] >= 0
    nodes = cfg["nodes"] + cfg["nodes2"]
    workers = cfg["workers"] + cfg["workers2"]
    out = {
        k: np.full(n, np.nan)
        for k in ("step_time_s", "step_time_lo", "step_time_hi", "compute_s", "sync_s")
    }
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
        try:
            p = model.predict_arrays(
                job.model,
                str(types.names[t]),
                nodes[rows],
                workers[rows],
                bsz[s:e],
                gpus_per_node=int(types.gpus[t]),
                level=level,
                catalog=catalog,
            )
        except InputError as err:
            skipped[str(types.names[t])] = str(err)
            out["step_time_s"][rows] = np.inf  # marks the configuration for removal
            continue
        for k in out:
            prev = out[k][rows]
            out[k][rows] = np.where(np.isnan(prev), p[k], np.fmax(prev, p[k]))
    ok = np.isfinite(out["step_time_s"])
    return {**{k: v[ok] for k, v in cfg.items()}, **{k: v[ok] for k, v in out.items()}}


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
    """Time and cost to the target, with interval ends, on-demand and (if allowed) spot.

    time = S(B) x step time x (1 + c / tau) for checkpoint writes; the interval ends use the
    step-time interval ends (one allocation's network conditions persist through a run, so
    the interval of one step is kept, not narrowed by averaging). Spot rows, appended after
    the on-demand ones, add the reclaim overhead of ``spot``: its expected value, and its
    bound at the confidence level for the upper ends.
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
    eff = efficiency(big, work.noise_scale)
    run = {
        k: hours * out[s]
        for k, s in (
            ("time_h", "step_time_s"),
            ("time_lo_h", "step_time_lo"),
            ("time_hi_h", "step_time_hi"),
        )
    }
    out.update(
        global_bsz=big,
        steps=steps,
        throughput=throughput,
        efficiency=eff,
        goodput=throughput * eff,
        spot=is_spot,
        usd_per_hr=usd,
        **run,
        cost_usd=run["time_h"] * usd,
        cost_lo_usd=run["time_lo_h"] * usd,
        cost_hi_usd=run["time_hi_h"] * usd,
        spot_overhead_h=np.zeros(rows.size),
        expected_reclaims=np.zeros(rows.size),
    )
    if on_spot.size:
        hazard = per_cluster(cfg, types.hazard)[on_spot]
        tail = slice(n, None)
        mean = spot.expected_run(run["time_h"][tail], hazard, job.spot_policy, usd[tail], od[tail])
        high = spot.upper_run(
            run["time_hi_h"][tail],
            hazard,
            job.spot_policy,
            usd[tail],
            od[tail],
            constraints.confidence,
        )
        out["spot_overhead_h"][tail] = mean["time_h"] - run["time_h"][tail]
        out["expected_reclaims"][tail] = mean["reclaims"]
        out["time_h"][tail] = mean["time_h"]
        out["cost_usd"][tail] = mean["cost_usd"]
        out["time_hi_h"][tail] = high["time_h"]
        out["cost_hi_usd"][tail] = high["cost_usd"]
    return out


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
)


def to_frame(c: Candidates, index: np.ndarray | None = None) -> pd.DataFrame:
    """The candidates at ``index`` (all if None) as the result table."""
    cols = c.cols if index is None else {k: v[index] for k, v in c.cols.items()}
    ty = c.types
    mixed = cols["type2"] >= 0
    t2 = np.where(mixed, cols["type2"], 0)
    out = pd.DataFrame(
        {
            "instance_type": ty.names[cols["type"]],
            "region": ty.region[cols["type"]],
            "num_nodes": cols["nodes"],
            "gpus_per_node": ty.gpus[cols["type"]],
            "num_workers": cols["workers"],
            "local_bsz": cols["local_bsz"],
            "pricing": np.where(cols["spot"], "spot", "on-demand"),
            "instance_type_2": pd.array(np.where(mixed, ty.names[t2], None), dtype="string"),
            "num_nodes_2": pd.array(np.where(mixed, cols["nodes2"], 0), dtype="Int64"),
            "num_workers_2": pd.array(np.where(mixed, cols["workers2"], 0), dtype="Int64"),
            "local_bsz_2": pd.array(np.where(mixed, cols["local_bsz2"], 0), dtype="Int64"),
        }
    )
    for name in ("num_nodes_2", "num_workers_2", "local_bsz_2"):
        out.loc[~mixed, name] = pd.NA
    for name in RESULT_COLUMNS[11:]:
        out[name] = cols[name]
    return out[list(RESULT_COLUMNS)]
