"""The tradeoffs notebook 05 teaches, as pure functions of the fitted model and the catalog.

(a) ``scaling``: workers x batch x statistical efficiency -> time and cost to the target, and
where adding workers stops paying; (b) ``spot_tradeoff``: spot against on-demand under reclaims
(interruption rate, checkpoint interval, restart) -> expected cost, its spread, deadline risk;
(c) ``controller_lesson``: OmniLearn's proportional controller on a two-type cluster, step by
step, with one worker slowing down mid-run; (d) ``deadline_judgement``: the same deadline
judged by the point estimate and by the interval's upper end, and how often each pick misses
it, simulated from the model's own interval. Each returns a result with a ``text()`` that
answers its lesson's question in numbers; the widgets (present.lessons) only display them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from srifty_kit.decide import candidates as cand
from srifty_kit.decide import hetero, spot
from srifty_kit.decide.explanation import config_phrase, money
from srifty_kit.decide.job import Constraints, Job
from srifty_kit.decide.planner import Evaluated, evaluate_configs, predicted, priced, select
from srifty_kit.errors import InputError
from srifty_kit.model.intervals import two_sided_z

if TYPE_CHECKING:  # pragma: no cover
    from srifty_kit.model.estimator import StepTimeModel


def _hours(h: float) -> str:
    if h >= 100:
        return f"{h:,.0f} h"
    if h >= 1:
        return f"{h:.3g} h"
    return f"{h * 60:.3g} min"


def _types(catalog: pd.DataFrame, names: tuple[str, ...]) -> cand.Types:
    """The catalog's rows of ``names`` (first region each), in that order, as arrays."""
    from srifty_kit.catalog.query import lookup

    rows = lookup(catalog.drop_duplicates("instance_type"), list(names), list(catalog.columns))
    types = cand.Types.from_catalog(rows)
    for name, gpus in zip(types.names, types.gpus, strict=True):
        if gpus < 1:
            raise InputError(
                f"{name} has no GPU: data-parallel GPU training cannot run there",
                column="instance_type",
                fix="pick an instance type with GPUs",
            )
    return types


# -- (a) workers x batch x statistical efficiency ---------------------------------------------


def worker_counts(gpus_per_node: int, max_nodes: int) -> np.ndarray:
    """1, 2, ... workers on one node, then whole nodes: gpus, 2 gpus, ... max_nodes gpus."""
    one = np.arange(1, gpus_per_node + 1)
    return np.concatenate([one, gpus_per_node * np.arange(2, max_nodes + 1)]).astype(np.int64)


@dataclass(frozen=True)
class Scaling:
    """Time and cost to the target as workers grow on one instance type (one row per count)."""

    table: pd.DataFrame  # evaluate_configs columns + speedup (time(1 worker) / time)
    instance_type: str
    local_bsz: int
    noise_scale: float | None
    level: float

    @property
    def cheapest(self) -> pd.Series:
        """The worker count with the lowest cost upper end: beyond it, workers buy time."""
        return self.table.loc[self.table["cost_hi_usd"].idxmin()]

    @property
    def fastest(self) -> pd.Series:
        """The worker count with the lowest time upper end: beyond it, workers buy nothing."""
        return self.table.loc[self.table["time_hi_h"].idxmin()]

    def text(self) -> str:
        """Where adding workers stops paying, in numbers."""
        c, f = self.cheapest, self.fastest
        pct = f"{self.level:.0%}"
        scale = (
            f"noise scale {self.noise_scale:g}"
            if self.noise_scale is not None
            else "no noise scale (perfect scaling assumed)"
        )
        lines = [
            f"{self.instance_type}, local batch {self.local_bsz}, {scale}; upper ends at {pct}."
        ]
        if c["num_workers"] == f["num_workers"]:
            lines.append(
                f"Cheapest and fastest at {c['num_workers']} workers (global batch "
                f"{c['global_bsz']}, statistical efficiency {c['efficiency']:.2f}): "
                f"{_hours(c['time_hi_h'])} for {money(c['cost_hi_usd'])}. Past it adding "
                "workers stops paying at all: the job gets slower and dearer."
            )
            return "\n".join(lines)
        lines.append(
            f"Cheapest at {c['num_workers']} workers (global batch {c['global_bsz']}, "
            f"statistical efficiency {c['efficiency']:.2f}): {_hours(c['time_hi_h'])} for "
            f"{money(c['cost_hi_usd'])}. Beyond it, each added worker buys time with money."
        )
        if f["num_workers"] == self.table["num_workers"].max():
            lines.append(
                f"Still getting faster at {f['num_workers']} workers, the most tried: "
                f"{_hours(f['time_hi_h'])} for {money(f['cost_hi_usd'])}, "
                f"{f['speedup']:.3g}x one worker."
            )
        else:
            lines.append(
                f"Fastest at {f['num_workers']} workers (global batch {f['global_bsz']}, "
                f"efficiency {f['efficiency']:.2f}): {_hours(f['time_hi_h'])} for "
                f"{money(f['cost_hi_usd'])}, {f['speedup']:.3g}x one worker. Past it adding "
                "workers stops paying at all: the job gets slower and dearer."
            )
        return "\n".join(lines)


def scaling(
    model: StepTimeModel,
    catalog: pd.DataFrame,
    job: Job,
    instance_type: str,
    local_bsz: int,
    max_nodes: int = 16,
    level: float = 0.9,
) -> Scaling:
    """Predicted time and cost to ``job``'s target on 1 .. max_nodes nodes of one type at a
    fixed local batch: the global batch, and with it the steps to the target (statistical
    efficiency, from ``job.noise_scale``), grow with the workers."""
    if not (isinstance(local_bsz, int | np.integer) and local_bsz >= 1):
        raise InputError(f"local batch must be a whole number >= 1, got {local_bsz!r}")
    types = _types(catalog, (instance_type,))
    workers = worker_counts(int(types.gpus[0]), max_nodes)
    nodes = -(-workers // int(types.gpus[0]))
    configs = pd.DataFrame(
        {
            "model": job.model,
            "instance_type": instance_type,
            "num_nodes": nodes,
            "num_workers": workers,
            "local_bsz": int(local_bsz),
        }
    )
    table = evaluate_configs(model, catalog, job, Constraints(confidence=level), configs)
    table["speedup"] = table["time_hi_h"].iloc[0] / table["time_hi_h"]
    return Scaling(table, instance_type, int(local_bsz), job.noise_scale, level)


# -- (b) spot against on-demand ----------------------------------------------------------------


@dataclass(frozen=True)
class SpotTradeoff:
    """One configuration on on-demand and on spot: expected and simulated outcomes."""

    ondemand: pd.Series  # evaluate_configs row: time_h, cost_usd (work with checkpoint writes)
    expected: dict[str, float]  # spot.expected_run: time_h, cost_usd, reclaims, ondemand_h
    runs: pd.DataFrame  # spot.simulate: one row per simulated spot run
    by_interval: pd.DataFrame  # checkpoint interval -> expected spot cost and time, miss share
    bucket: str
    checkpoint_interval_h: float
    restart_h: float
    deadline_h: float

    @property
    def miss_share(self) -> float:
        """Share of simulated spot runs that end after the deadline."""
        return float((self.runs["time_h"] > self.deadline_h).mean())

    def text(self) -> str:
        """Expected cost, its spread and the deadline risk of spot against on-demand."""
        od, e = self.ondemand, self.expected
        q = self.runs["cost_usd"].quantile([0.5, 0.9, 0.99])
        saving = 1 - e["cost_usd"] / od["cost_usd"]
        best = self.by_interval.loc[self.by_interval["cost_usd"].idxmin()]
        lines = [
            f"{config_phrase(od)}: on-demand {_hours(od['time_h'])} for {money(od['cost_usd'])}.",
            f"Spot (reclaim bucket {self.bucket}, checkpoint every "
            f"{_hours(self.checkpoint_interval_h)}, restart {_hours(self.restart_h)}): "
            f"expected {_hours(e['time_h'])} for {money(e['cost_usd'])} "
            f"({e['reclaims']:.2g} reclaims on average), "
            + (f"{saving:.0%} cheaper" if saving >= 0 else f"{-saving:.0%} dearer")
            + f"; simulated cost median {money(q[0.5])}, p90 {money(q[0.9])}, "
            f"p99 {money(q[0.99])} over {len(self.runs):,} runs.",
        ]
        lines.append(
            f"Deadline {_hours(self.deadline_h)}: {self.miss_share:.1%} of spot runs miss it; "
            "on-demand " + ("meets it." if od["time_h"] <= self.deadline_h else "misses it too.")
        )
        lines.append(
            f"Cheapest checkpoint interval tried: {_hours(best['checkpoint_interval_h'])} "
            f"(expected {money(best['cost_usd'])}); shorter ones pay for writing checkpoints, "
            "longer ones for re-doing lost work."
        )
        return "\n".join(lines)


def _ondemand(
    model: StepTimeModel,
    catalog: pd.DataFrame,
    job: Job,
    instance_type: str,
    num_nodes: int,
    local_bsz: int,
    level: float,
) -> Callable[[Job], pd.Series]:
    """The evaluate_configs row of whole nodes of one type, on-demand, as a function of the
    job: the model predicts the step once, each job (another checkpoint interval) re-prices."""
    gpus = int(_types(catalog, (instance_type,)).gpus[0])
    configs = pd.DataFrame(
        {
            "model": [job.model],
            "instance_type": [instance_type],
            "num_nodes": [num_nodes],
            "num_workers": [gpus * num_nodes],
            "local_bsz": [int(local_bsz)],
        }
    )
    constraints = Constraints(confidence=level)
    types, cfg = predicted(model, catalog, job, constraints, configs)
    return lambda j: priced(j, constraints, types, cfg).iloc[0]


def spot_deadline(
    model: StepTimeModel,
    catalog: pd.DataFrame,
    job: Job,
    instance_type: str,
    num_nodes: int,
    local_bsz: int,
    slack: float = 0.03,
    level: float = 0.9,
) -> float:
    """A deadline ``slack`` beyond the predicted on-demand time (job's checkpoint interval)."""
    row = _ondemand(model, catalog, job, instance_type, num_nodes, local_bsz, level)(job)
    return float(row["time_h"]) * (1 + slack)


def listed_bucket(catalog: pd.DataFrame, instance_type: str) -> str:
    """The catalog's Spot Advisor interruption bucket of a type; ``spot.UNKNOWN_BUCKET``
    (the worst) where it lists none."""
    listed = catalog.loc[catalog["instance_type"] == instance_type, "spot_interruption_bucket"]
    return str(listed.iloc[0]) if len(listed) and pd.notna(listed.iloc[0]) else spot.UNKNOWN_BUCKET


CHECKPOINT_GRID_H = tuple(np.round(np.geomspace(1 / 60, 8, 24), 6))  # 1 min .. 8 h


def spot_tradeoff(
    model: StepTimeModel,
    catalog: pd.DataFrame,
    job: Job,
    instance_type: str,
    num_nodes: int,
    local_bsz: int,
    bucket: str | None = None,
    deadline_h: float | None = None,
    slack: float = 0.03,
    level: float = 0.9,
    runs: int = 2000,
    seed: int = 0,
) -> SpotTradeoff:
    """Whole nodes of ``instance_type`` on on-demand and on spot with ``job``'s checkpoint
    interval, checkpoint size and restart; reclaims at the Spot Advisor ``bucket`` (default:
    the catalog's). The expected run is spot.expected_run's closed form, the spread and the
    deadline risk spot.simulate's runs, on the model's predicted (point) time. Without a
    ``deadline_h`` the deadline is the on-demand time plus ``slack`` of it."""
    types = _types(catalog, (instance_type,))
    bucket = bucket or listed_bucket(catalog, instance_type)
    hazard = float(spot.hourly_hazard(bucket)[0]) * num_nodes
    spot_usd = float(types.spot[0]) * num_nodes
    if not np.isfinite(spot_usd):
        raise InputError(f"the catalog has no spot price for {instance_type!r}")

    ondemand = _ondemand(model, catalog, job, instance_type, num_nodes, local_bsz, level)
    od = ondemand(job)
    od_usd = float(od["usd_per_hr"])
    if deadline_h is None:
        deadline_h = float(od["time_h"]) * (1 + slack)
    expected = spot.expected_run(
        np.array([od["time_h"]]), hazard, job.spot_policy, spot_usd, od_usd
    )
    sim = spot.simulate(float(od["time_h"]), hazard, job.spot_policy, spot_usd, od_usd, runs, seed)
    grid = []
    for tau in CHECKPOINT_GRID_H:
        j = replace(job, checkpoint_interval_h=float(tau))
        work = float(ondemand(j)["time_h"])
        e = spot.expected_run(np.array([work]), hazard, j.spot_policy, spot_usd, od_usd)
        s = spot.simulate(work, hazard, j.spot_policy, spot_usd, od_usd, runs, seed)
        grid.append(
            {
                "checkpoint_interval_h": float(tau),
                "time_h": float(e["time_h"][0]),
                "cost_usd": float(e["cost_usd"][0]),
                "miss_share": float((s["time_h"] > deadline_h).mean()),
            }
        )
    return SpotTradeoff(
        od,
        {k: float(v[0]) for k, v in expected.items()},
        sim,
        pd.DataFrame(grid),
        bucket,
        job.checkpoint_interval_h,
        job.restart_h,
        deadline_h,
    )


# -- (c) the proportional controller on a mixed cluster ----------------------------------------


@dataclass(frozen=True)
class ControllerLesson:
    """The controller's run on a two-type cluster, and what it settled to."""

    trace: pd.DataFrame  # hetero.simulate_controller's rows, plus instance_type per worker
    instance_types: tuple[str, str]
    workers: tuple[int, int]
    global_bsz: int
    deadband: float
    slow_at: int
    slow_factor: float

    def _settle(self, start: int, stop: int) -> int:
        """First step in [start, stop) from which the controller changes no batch again
        before ``stop`` (every worker inside its deadband); -1 if it still moves at the end."""
        part = self.trace[(self.trace["step"] >= start) & (self.trace["step"] < stop)]
        batches = part.pivot(index="step", columns="worker", values="local_bsz").to_numpy()
        moved = np.flatnonzero((np.diff(batches, axis=0) != 0).any(axis=1))
        first = 0 if moved.size == 0 else int(moved[-1]) + 1
        return -1 if first >= len(batches) - 1 else start + first

    @property
    def summary(self) -> dict[str, float]:
        """Step times: even split, settled, right after the slowdown (what keeping the old
        split would cost on every later step), settled again, last."""
        per_step = self.trace.groupby("step")["step_time_s"].first()
        last = int(per_step.index.max())
        return {
            "even_step_s": float(per_step.iloc[0]),
            "settled_at": self._settle(0, self.slow_at),
            "settled_step_s": float(per_step.iloc[self.slow_at - 1]),
            "slowed_step_s": float(per_step.iloc[self.slow_at]),
            "resettled_at": self._settle(self.slow_at + 1, last + 1),
            "final_step_s": float(per_step.iloc[-1]),
        }

    def text(self) -> str:
        """How the controller converges, and what it does when a worker slows down."""
        s = self.summary
        a, b = self.instance_types
        wa, wb = self.workers
        first = self.trace[self.trace["step"] == 0]
        settled = self.trace[self.trace["step"] == self.slow_at - 1]
        by_type = settled.groupby("instance_type", sort=False)["local_bsz"].mean()
        lines = [
            f"{wa} workers on {a} + {wb} on {b}, global batch {self.global_bsz} (local "
            f"{int(first['local_bsz'].iloc[0])} each to start).",
            f"Even split: {s['even_step_s'] * 1000:.4g} ms per step (the slower type waits). "
            + (
                f"The controller settles by step {s['settled_at']} at "
                f"{s['settled_step_s'] * 1000:.4g} ms, local batches "
                + ", ".join(f"{t} {v:.3g}" for t, v in by_type.items())
                + f" ({1 - s['settled_step_s'] / s['even_step_s']:.0%} faster per step)."
                if s["settled_at"] >= 0
                else "It has not settled before the slowdown."
            ),
        ]
        if self.slow_factor != 1:
            lines.append(
                f"Worker 0 ({a}) turns {self.slow_factor:.3g}x slower at step {self.slow_at}: "
                f"the step jumps to {s['slowed_step_s'] * 1000:.4g} ms; "
                + (
                    f"the controller re-settles by step {s['resettled_at']} at "
                    f"{s['final_step_s'] * 1000:.4g} ms, where keeping the old split would "
                    f"stay at {s['slowed_step_s'] * 1000:.4g} ms."
                    if s["resettled_at"] >= 0
                    else f"by the last step it is at {s['final_step_s'] * 1000:.4g} ms "
                    "(not yet settled)."
                )
            )
        return "\n".join(lines)


def controller_lesson(
    model: StepTimeModel,
    catalog: pd.DataFrame,
    job: Job,
    instance_types: tuple[str, str] = ("g4dn.12xlarge", "g6.12xlarge"),
    num_nodes: tuple[int, int] = (1, 1),
    local_bsz: int = 64,
    steps: int = 40,
    slow_at: int = 20,
    slow_factor: float = 1.0,
    deadband: float = 0.05,
) -> ControllerLesson:
    """Each worker's compute line from the model (candidates.compute_lines, one per type), an
    even split of workers x ``local_bsz``, and the controller run with worker 0 slowed by
    ``slow_factor`` from step ``slow_at``."""
    if not 1 <= slow_at < steps:
        raise InputError(f"slow_at must be within 1..{steps - 1}, got {slow_at}")
    if not slow_factor > 0:
        raise InputError(f"slow_factor must be > 0, got {slow_factor}")
    types = _types(catalog, tuple(instance_types))
    alpha, beta = cand.compute_lines(model, job, types, np.arange(2), catalog)
    counts = [int(types.gpus[i]) * int(num_nodes[i]) for i in range(2)]
    total = sum(counts) * int(local_bsz)
    trace = hetero.simulate_controller(
        np.repeat(alpha, counts),
        np.repeat(beta, counts),
        total,
        steps=steps,
        deadband=deadband,
        slow_at=slow_at,
        slow_factor=slow_factor,
    )
    names = np.repeat(np.asarray(instance_types, dtype=object), counts)
    trace["instance_type"] = names[trace["worker"].to_numpy()]
    return ControllerLesson(
        trace,
        (str(instance_types[0]), str(instance_types[1])),
        (counts[0], counts[1]),
        total,
        deadband,
        slow_at,
        float(slow_factor),
    )


# -- (d) point estimate against the upper end ------------------------------------------------


def simulate_runs(row: pd.Series, level: float, runs: int, rng: np.random.Generator) -> np.ndarray:
    """Hours to the target of ``runs`` runs of one on-demand configuration, drawn from the
    model's own interval: log(time / point) is a split normal whose halves put the interval's
    ends at the two-sided ``level`` quantiles (the interval may be asymmetric)."""
    z = two_sided_z(level)
    above = np.log(row["time_hi_h"] / row["time_h"]) / z
    below = np.log(row["time_h"] / row["time_lo_h"]) / z
    u = rng.standard_normal(runs)
    return row["time_h"] * np.exp(u * np.where(u > 0, above, below))


@dataclass(frozen=True)
class Judgement:
    """One deadline judged two ways: by the point estimate and by the upper end."""

    table: pd.DataFrame  # one row per rule: the pick, its times and costs, the miss share
    runs: dict[str, np.ndarray]  # rule -> simulated hours of its pick
    deadline_h: float
    level: float
    extra: dict[str, str] = field(default_factory=dict)  # rule -> why there is no pick

    def histogram(self, bins: int = 40) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Shares of each rule's simulated runs in ``bins`` log-spaced bins over all of them:
        (edges, rule -> shares)."""
        every = np.concatenate([*self.runs.values(), [self.deadline_h]])
        edges = np.geomspace(every.min(), every.max() * (1 + 1e-9), bins + 1)
        return edges, {rule: np.histogram(t, edges)[0] / t.size for rule, t in self.runs.items()}

    def text(self) -> str:
        """How often each pick misses the deadline, and what the safe one costs more."""
        pct = f"{self.level:.0%}"
        lines = [f"Deadline {_hours(self.deadline_h)}, intervals at {pct}:"]
        rows = {r["rule"]: r for _, r in self.table.iterrows()}
        for rule, label in (("point", "point estimate"), ("upper", f"upper end at {pct}")):
            if rule not in rows:
                lines.append(f"Judged by the {label}: {self.extra.get(rule, 'no pick')}.")
                continue
            r = rows[rule]
            lines.append(
                f"Judged by the {label}: {config_phrase(r)}, predicted {_hours(r['time_h'])} "
                f"(up to {_hours(r['time_hi_h'])}), {money(r['cost_usd'])}; misses the "
                f"deadline in {r['miss_share']:.1%} of {len(self.runs[rule]):,} simulated runs."
            )
        if {"point", "upper"} <= rows.keys():
            more = rows["upper"]["cost_usd"] / rows["point"]["cost_usd"] - 1
            lines.append(
                f"The upper end's pick costs {more:+.0%} against the point estimate's, "
                "for that difference in misses."
            )
        return "\n".join(lines)


def deadline_judgement(
    evaluated: Evaluated, deadline_h: float, runs: int = 10_000, seed: int = 0
) -> Judgement:
    """The cheapest on-demand configuration meeting ``deadline_h`` by its point estimate and
    by its upper end (the search's own rule: ``select``), each run ``runs`` times from the
    model's interval (``simulate_runs``): how often each misses."""
    if not deadline_h > 0:
        raise InputError(f"deadline must be > 0, got {deadline_h}")
    if evaluated.constraints.spot:
        raise InputError(
            "judge the deadline on on-demand candidates", fix="evaluate with spot=False"
        )
    c = evaluated.candidates
    level = evaluated.constraints.confidence
    ondemand = ~c["spot"]
    rng = np.random.default_rng(seed)
    rows, sims, extra = [], {}, {}
    ok = np.flatnonzero(ondemand & (c["time_h"] <= deadline_h))
    if ok.size:
        best = ok[np.lexsort((c["time_h"][ok], c["cost_usd"][ok]))[0]]
        rows.append(("point", cand.to_frame(c, np.array([best])).iloc[0]))
    else:
        extra["point"] = "no configuration's point estimate meets it"
    constraints = replace(evaluated.constraints, deadline_h=deadline_h, budget_usd=None)
    result = select(evaluated, constraints, objective="cost", top=1)
    if result.feasible:
        rows.append(("upper", result.pick))
    else:
        extra["upper"] = "no configuration's upper end meets it"
    out = []
    for rule, row in rows:
        t = simulate_runs(row, level, runs, rng)
        sims[rule] = t
        out.append({"rule": rule, **row.to_dict(), "miss_share": float((t > deadline_h).mean())})
    table = pd.DataFrame(out)
    return Judgement(table, sims, float(deadline_h), level, extra)
