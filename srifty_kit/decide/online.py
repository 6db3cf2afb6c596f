"""Online search (Scavenger-style): profile a few configurations, fit, decide, pick the next.

When no performance model exists yet, Scavenger (Tyagi & Sharma, "Scavenger: A Cloud Service
for Optimizing Cost and Performance of ML Training", CCGrid'23) profiles a handful of
configurations for a few iterations each, fits its model, and searches on. Here:

1. seed: the two extreme local batches at the smallest scale (one worker, and one full node);
2. fit ``StepTimeModel`` on everything measured so far and decide as the search decides
   (``planner.search`` among the environment's configurations): the recommendation is the
   cheapest (or fastest) configuration whose probability of meeting the deadline and budget,
   under the model's joint belief, reaches the confidence;
3. profile next the configuration with the largest  relative interval width x closeness to the
   best  (closeness = best / own objective value), i.e. where the model is unsure about
   something that could win;
4. stop when the recommendation has not changed for ``patience`` rounds, when the profiling
   budget is spent, or after ``max_profiles``.

The environment is an interface (``Environment``): ``MeasuredTable`` replays measurements (for
evaluation, with the oracle and regret), ``ProfilingRuns`` runs real profiling on this machine.
``benchmarks/online_search.py`` replays the reference EC2 measurements beside the rule that
chose the recommendation before (the least 90% upper end of cost among configurations whose
upper ends meet the constraints).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import pandas as pd

from srifty_kit.catalog.query import hourly_price, load_catalog
from srifty_kit.decide import candidates as cand
from srifty_kit.decide.planner import (
    Constraints,
    Evaluated,
    Job,
    SearchResult,
    evaluate,
    known_outcomes,
    select,
)
from srifty_kit.errors import InputError, check_interrupt
from srifty_kit.model.estimator import StepTimeModel
from srifty_kit.tables.contracts import validate_measurements

CONFIG_KEYS = ["model", "instance_type", "num_nodes", "num_workers", "local_bsz"]
_OBJECTIVE_COLUMN = {"cost": "cost_hi_usd", "time": "time_hi_h"}


@runtime_checkable
class Environment(Protocol):
    """Where configurations get measured, and what measuring costs."""

    catalog: pd.DataFrame  # catalog rows (prices, GPUs) of the environment's instance types

    def configurations(self) -> pd.DataFrame:
        """Every configuration that could be profiled (CONFIG_KEYS + gpus_per_node)."""
        ...

    def measure(self, config: pd.Series) -> tuple[pd.DataFrame, float]:
        """Profile one configuration: its measurement rows and what profiling it cost (USD)."""
        ...


@dataclass
class MeasuredTable:
    """Replays a measurement table: measuring a configuration returns its rows.

    Profiling cost: ``startup_h`` to bring the nodes up plus ``steps`` steps at the measured
    step time, billed for every node at the on-demand price.
    """

    measurements: pd.DataFrame
    catalog: pd.DataFrame
    steps: int = 100
    startup_h: float = 5 / 60  # launching instances and loading the model

    def __post_init__(self) -> None:
        self.measurements = validate_measurements(
            self.measurements,
            catalog=load_catalog if self.catalog is None else self.catalog,
        )

    def configurations(self) -> pd.DataFrame:
        """One row per distinct configuration in the table."""
        cols = [*CONFIG_KEYS, "gpus_per_node"]
        return self.measurements[cols].drop_duplicates().reset_index(drop=True)

    def measure(self, config: pd.Series) -> tuple[pd.DataFrame, float]:
        """The table's rows of ``config`` and the cost of measuring ``steps`` of them."""
        rows = self.measurements
        hit = np.ones(len(rows), bool)
        for k in CONFIG_KEYS:
            hit &= (rows[k] == config[k]).to_numpy()
        found = rows[hit]
        price = hourly_price(self.catalog, config["instance_type"])
        hours = self.startup_h + self.steps * float(found["step_time_s"].mean()) / 3600
        return found, hours * int(config["num_nodes"]) * price

    def truth(self) -> pd.DataFrame:
        """Mean measured step time (and sync time) of every configuration."""
        cols = ["step_time_s"] + (["sync_time_s"] if "sync_time_s" in self.measurements else [])
        return self.measurements.groupby([*CONFIG_KEYS, "gpus_per_node"], as_index=False)[
            cols
        ].mean()


@dataclass
class ProfilingRuns:
    """Real profiling on this machine: DDP steps of a zoo model (``measure.distributed``).

    Configurations are world sizes (workers on this one node) x local batches; the cost is
    the wall time of each profiling run at ``usd_per_hr`` (this machine's price).
    """

    spec: str = "mlp"
    world_sizes: tuple[int, ...] = (1, 2)
    batch_sizes: tuple[int, ...] = (8, 32)
    usd_per_hr: float = 1.0
    seconds: float = 4.0  # measuring budget per configuration
    catalog: pd.DataFrame = field(init=False)
    instance_type: str = field(init=False)

    def __post_init__(self) -> None:
        from srifty_kit.measure import host

        self.instance_type = host.instance_type("cpu")
        gpus = max(self.world_sizes)
        self.catalog = pd.DataFrame(
            [
                {
                    "instance_type": self.instance_type,
                    "region": "local",
                    "vcpus": host.cpu_cores(),
                    "memory_gib": 1.0,
                    "gpu_count": gpus,
                    "gpu_model": None,
                    "gpu_memory_gib": None,
                    "network_gbps": None,
                    "efa_supported": False,
                    "ondemand_usd_per_hr": self.usd_per_hr,
                    "spot_usd_per_hr": None,
                    "spot_interruption_bucket": None,
                    "gpu_fp16_tflops": None,
                    "gpu_fp32_tflops": None,
                    "gpu_mem_bw_gbps": None,
                    "source": "this machine",
                }
            ]
        )

    def configurations(self) -> pd.DataFrame:
        """World sizes x batch sizes on this machine."""
        return pd.DataFrame(
            [
                {
                    "model": self.spec,
                    "instance_type": self.instance_type,
                    "num_nodes": 1,
                    "num_workers": w,
                    "local_bsz": b,
                    "gpus_per_node": max(self.world_sizes),
                }
                for w in self.world_sizes
                for b in self.batch_sizes
            ]
        )

    def measure(self, config: pd.Series) -> tuple[pd.DataFrame, float]:
        """Run DDP steps of one configuration here (gloo on 127.0.0.1 on CPU)."""
        from srifty_kit.measure.distributed.profile import profile_distributed

        start = time.perf_counter()
        result = profile_distributed(
            self.spec,
            world_sizes=(int(config["num_workers"]),),
            batch_sizes=(int(config["local_bsz"]),),
            max_seconds=self.seconds,
            progress=False,
        )
        rows = result.measurements.assign(
            model=self.spec,
            instance_type=self.instance_type,
            gpus_per_node=int(config["gpus_per_node"]),
        )
        return rows, (time.perf_counter() - start) / 3600 * self.usd_per_hr


@dataclass
class OnlineResult:
    """What the online search did and recommends."""

    recommendation: pd.Series | None  # the search's pick then; None if nothing meets
    history: pd.DataFrame  # one row per profiled configuration: what, cost, recommendation then
    profiling_cost_usd: float
    measurements: pd.DataFrame  # every row measured
    model: StepTimeModel
    stopped: str  # why the search stopped
    nearest: pd.Series | None = None  # when nothing meets the constraints: least violating
    result: SearchResult | None = None  # the last decision (its explanation, front, ranking)


def _seed(space: pd.DataFrame) -> pd.DataFrame:
    """Scavenger's start: extreme local batches at the smallest scale (one worker, one node)."""
    small = space[space["num_nodes"] == space["num_nodes"].min()]
    picks = []
    for workers in (small["num_workers"].min(), small["num_workers"].max()):
        rows = small[small["num_workers"] == workers]
        picks += [rows.loc[rows["local_bsz"].idxmin()], rows.loc[rows["local_bsz"].idxmax()]]
    return pd.DataFrame(picks).drop_duplicates(CONFIG_KEYS)


def _key(row: pd.Series) -> tuple:
    return tuple(row[k].item() if hasattr(row[k], "item") else row[k] for k in CONFIG_KEYS)


def _evaluate(model, env, job, constraints, space) -> tuple[pd.DataFrame, Evaluated]:
    """The environment's configurations predicted and priced once, as the search does: the
    table the next configuration is chosen from, and the evaluation the search decides on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluated = evaluate(model, env.catalog, job, constraints, space)
    return cand.to_frame(evaluated.candidates), evaluated


def _meets(table: pd.DataFrame, constraints: Constraints, time: str, cost: str) -> np.ndarray:
    """Rows whose ``time`` column is within the deadline and ``cost`` within the budget."""
    ok = np.ones(len(table), bool)
    if constraints.deadline_h is not None:
        ok &= (table[time] <= constraints.deadline_h).to_numpy()
    if constraints.budget_usd is not None:
        ok &= (table[cost] <= constraints.budget_usd).to_numpy()
    return ok


def _violation(table: pd.DataFrame, constraints: Constraints, end: str) -> np.ndarray:
    """How far time and cost at one interval end (lo, hi) exceed the constraints (<= 1: met)."""
    worst = np.zeros(len(table))
    if constraints.deadline_h is not None:
        worst = np.maximum(worst, table[f"time_{end}_h"].to_numpy() / constraints.deadline_h)
    if constraints.budget_usd is not None:
        worst = np.maximum(worst, table[f"cost_{end}_usd"].to_numpy() / constraints.budget_usd)
    return worst


def _next_score(table: pd.DataFrame, constraints: Constraints, objective: str) -> np.ndarray:
    """Relative interval width x closeness to the best, among configurations that could still
    meet the constraints at their optimistic (lower) ends; if none could, the least violating."""
    possible = _violation(table, constraints, "lo") <= 1
    if not possible.any():
        return -_violation(table, constraints, "lo")
    width = ((table["step_time_hi"] - table["step_time_lo"]) / table["step_time_s"]).to_numpy()
    value = table[_OBJECTIVE_COLUMN[objective].replace("_hi", "")].to_numpy()
    closeness = value[possible].min() / value
    return np.where(possible, width * closeness, -np.inf)


def _next_config(
    predicted: pd.DataFrame, job: Job, constraints: Constraints, objective: str, done: set[tuple]
) -> pd.Series | None:
    """The untried configuration with the best uncertainty x closeness score (None: all tried)."""
    table = predicted.assign(model=job.model)
    untried = ~pd.MultiIndex.from_frame(table[CONFIG_KEYS]).isin(list(done))
    if not untried.any():
        return None
    score = _next_score(table, constraints, objective)
    return table.iloc[int(np.flatnonzero(untried)[np.argmax(score[untried])])]


def online_search(
    env: Environment,
    job: Job,
    constraints: Constraints | None = None,
    *,
    objective: str = "cost",
    profiling_budget_usd: float | None = None,
    max_profiles: int = 12,
    patience: int = 3,
    progress: bool = False,
) -> OnlineResult:
    """Profile, fit and decide until the recommendation is stable (see the module docstring).

    Args:
        env: where configurations are measured (``MeasuredTable``, ``ProfilingRuns``).
        job: the training job the decision is for.
        constraints: deadline, budget and confidence, as for ``planner.search``.
        objective: "cost" or "time", what the recommendation minimises among those meeting
            the constraints at the confidence.
        profiling_budget_usd: stop once profiling has cost this much. It is checked after
            each run (a run's cost is known once it is done); that run's measurements are kept.
        max_profiles: the most configurations profiled.
        patience: stop once the recommendation held for this many rounds.
        progress: show a progress bar.

    Returns:
        ``OnlineResult``: the search's pick on everything measured (None, with ``nearest``,
        when nothing meets the constraints at the confidence), every run, the last decision
        and why the search stopped. Ctrl-C stops it too, keeping everything measured so far.

    Raises:
        InputError: an objective other than "cost" or "time"; what ``planner.search``
            refuses (a bad job or constraints).
    """
    from srifty_kit.tables.progress import progress_bar

    constraints = constraints or Constraints()
    if objective not in _OBJECTIVE_COLUMN:
        raise InputError(
            f"online search optimises 'cost' or 'time', not {objective!r}", fix="objective='cost'"
        )
    space = env.configurations().reset_index(drop=True)
    limit = min(max_profiles, len(space))
    measured: list[pd.DataFrame] = []
    done: set[tuple] = set()
    history = []
    spent, stable, last, stopped = 0.0, 0, None, "max_profiles"
    queue = [row for _, row in _seed(space).iterrows()]
    model = StepTimeModel()
    # predicted: the space under the latest fitted model; result: the search's decision on it
    rec = nearest = predicted = result = None
    bar = progress_bar(total=limit, desc="online search", show=progress)
    try:
        while len(done) < limit:
            check_interrupt()  # one a library swallowed still ends the search
            if not queue and predicted is None:
                predicted, _ = _evaluate(model, env, job, constraints, space)
            config = (
                queue.pop(0)
                if queue
                else _next_config(predicted, job, constraints, objective, done)
            )
            if config is None:
                stopped = "everything profiled"
                break
            rows, cost = env.measure(config)
            spent += cost
            done.add(_key(config))
            measured.append(rows)
            bar.update(1)
            now = None
            if not queue and len(done) >= 2:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = StepTimeModel().fit(pd.concat(measured, ignore_index=True), env.catalog)
                predicted, evaluated = _evaluate(model, env, job, constraints, space)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = select(evaluated, objective=objective, top=1)
                rec, nearest = result.pick, result.nearest
                now = (
                    None
                    if rec is None
                    else tuple(
                        rec[k]
                        for k in (
                            "instance_type",
                            "num_nodes",
                            "num_workers",
                            "local_bsz",
                            "pricing",
                        )
                    )
                )
                stable = stable + 1 if now == last and now is not None else 0
                last = now
            history.append(
                {
                    **config[CONFIG_KEYS].to_dict(),
                    "cost_usd": cost,
                    "spent_usd": spent,
                    "recommendation": now,
                    # its probability of meeting the deadline and budget, under the belief then
                    "p_meet": np.nan if now is None else float(rec["p_meet"]),
                }
            )
            if stable >= patience:
                stopped = "stable"
                break
            if profiling_budget_usd is not None and spent >= profiling_budget_usd:
                stopped = "profiling budget"
                break
    except KeyboardInterrupt:
        stopped = "interrupted"
    finally:
        bar.close()
    if rec is None:
        stopped += "; no profiled model meets the constraints at this confidence"
    table = pd.concat(measured, ignore_index=True) if measured else pd.DataFrame()
    return OnlineResult(
        rec,
        pd.DataFrame(history),
        spent,
        table,
        model,
        stopped,
        None if rec is not None else nearest,
        result,
    )


def regret(
    result: OnlineResult,
    env: MeasuredTable,
    job: Job,
    constraints: Constraints | None = None,
    objective: str = "cost",
) -> dict[str, float]:
    """True outcome of the recommendation against the oracle's (measured step times)."""
    constraints = constraints or Constraints()
    truth = known_outcomes(env.catalog, job, constraints, env.truth())
    column = "cost_usd" if objective == "cost" else "time_h"
    ok = _meets(truth, constraints, "time_h", "cost_usd")
    oracle = float(truth.loc[ok, column].min())
    r = result.recommendation
    if r is None:
        return {
            "recommended": float("nan"),
            "oracle": oracle,
            "regret": float("nan"),
            "profiling_cost_usd": result.profiling_cost_usd,
            "profiled": float(len(result.history)),
        }
    mine = truth[
        (truth["instance_type"] == r["instance_type"])
        & (truth["num_nodes"] == r["num_nodes"])
        & (truth["num_workers"] == r["num_workers"])
        & (truth["local_bsz"] == r["local_bsz"])
        & (truth["pricing"] == r["pricing"])
    ]
    true_value = float(mine[column].iloc[0])
    return {
        "recommended": true_value,
        "oracle": oracle,
        "regret": true_value / oracle - 1,
        "profiling_cost_usd": result.profiling_cost_usd,
        "profiled": float(len(result.history)),
    }
