"""Online search (decide.online) replayed on real EC2 measurements, beside the rule it used before.

Data: aws_g4dn12xlarge_placements.csv in ../shared/reference/measurements (or $SRIFTY_SHARED):
real g4dn.12xlarge step times, 1-4 nodes, every placement and local batch. For each of its six
training models the search starts with nothing measured and "profiles" a configuration by
replaying its measured rows (``MeasuredTable``: 100 steps plus five minutes of start-up at the
embedded catalog's on-demand price per node). The job: as many samples as ten hours on one GPU
at that model's smallest measured batch, and one a hundred times larger (1,000 hours), where
the same runs are a small share of what is at stake. Two questions per model and job:

  cheapest   no deadline: the cheapest configuration
  deadline   D = T_min * (T_1 / T_min) ** 0.5, halfway in log between the truly fastest
             configuration's time T_min and the fastest one-node time T_1, at 90% confidence

Policies: the same search (Scavenger's start: the extreme batches on one node; next the
configuration whose interval is widest relative to its closeness to the best; stop when the
recommendation held for three rounds, or after 12 configurations), recommending
  ours       what ``planner.search`` picks among the measured table's configurations:
             the least expected cost among those whose probability of meeting the deadline,
             under the model's joint belief, is at least 90% (``online_search``)
  before     the least 90% upper end of cost among the configurations whose 90% upper end of
             time meets the deadline (each configuration's own interval: the rule online
             search used before; kept here only as the baseline)

Truth: each configuration's mean measured step. Metrics: answered (a pick at all), met (its
true time meets D), regret = its true cost over the cheapest configuration that truly meets
the constraints - 1; profiled and their cost; and "all in", the regret with the profiling cost
added to the job's (what the question cost to answer).

    .venv/bin/python benchmarks/online_search.py
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
from common import markdown_table, reference_measurements, write_report

from srifty_kit import StepTimeModel
from srifty_kit.catalog.query import load_catalog
from srifty_kit.decide import online
from srifty_kit.decide.online import MeasuredTable, online_search
from srifty_kit.decide.planner import Constraints, Job, known_outcomes

FILE = "aws_g4dn12xlarge_placements.csv"
PICK_KEYS = ("instance_type", "num_nodes", "num_workers", "local_bsz", "pricing")
MAX_PROFILES = 12
LEVEL = 0.9
JOBS = (10.0, 1000.0)  # hours on one GPU: a small job, and one where profiling is cheap


def before(env: MeasuredTable, job: Job, cons: Constraints, patience: int = 3) -> dict:
    """The search as it was before (module docstring): the same start, the same next
    configuration (``online._next_config``) and the same stop, but the recommendation is the
    least 90% upper end of cost among configurations whose upper ends meet the constraints."""
    space = env.configurations().reset_index(drop=True)
    queue = [row for _, row in online._seed(space).iterrows()]
    measured, done, spent, stable, last, pick, predicted = [], set(), 0.0, 0, None, None, None
    while len(done) < min(MAX_PROFILES, len(space)):
        config = queue.pop(0) if queue else online._next_config(predicted, job, cons, "cost", done)
        if config is None:
            break
        rows, cost = env.measure(config)
        spent += cost
        done.add(online._key(config))
        measured.append(rows)
        if not queue and len(done) >= 2:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = StepTimeModel().fit(pd.concat(measured, ignore_index=True), env.catalog)
            predicted, _ = online._evaluate(model, env, job, cons, space)
            ok = online._meets(predicted, cons, "time_hi_h", "cost_hi_usd")
            cost_hi = predicted["cost_hi_usd"].to_numpy()
            pick = (
                predicted.iloc[int(np.flatnonzero(ok)[np.argmin(cost_hi[ok])])]
                if ok.any()
                else None
            )
            now = None if pick is None else tuple(pick[k] for k in PICK_KEYS)
            stable = stable + 1 if now == last and now is not None else 0
            last = now
            if stable >= patience:
                break
    return {"pick": pick, "spent": spent, "profiled": len(done), "stable": stable >= patience}


def judge(pick: pd.Series | None, truth: pd.DataFrame, cons: Constraints) -> dict:
    """The truth about a pick: answered, met, regret against the cheapest that truly meets."""
    meets = np.ones(len(truth), bool)
    if cons.deadline_h is not None:
        meets &= (truth["time_h"] <= cons.deadline_h * (1 + 1e-9)).to_numpy()
    oracle = float(truth.loc[meets, "cost_usd"].min())
    if pick is None:
        return {"answered": False, "met": np.nan, "regret": np.nan, "oracle_usd": oracle}
    hit = np.ones(len(truth), bool)
    for k in PICK_KEYS:
        hit &= (truth[k] == pick[k]).to_numpy()
    row = truth[hit].iloc[0]
    met = bool(cons.deadline_h is None or row["time_h"] <= cons.deadline_h * (1 + 1e-9))
    return {
        "answered": True,
        "met": met,
        "regret": float(row["cost_usd"] / oracle - 1) if met else np.nan,
        "oracle_usd": oracle,
        "true_usd": float(row["cost_usd"]),
    }


def questions(
    table: pd.DataFrame, model: str, hours_on_one: float
) -> tuple[Job, dict[str, Constraints]]:
    """The job and the two questions asked of one training model (module docstring)."""
    rows = table[table["model"] == model]
    one = rows[rows["num_workers"] == 1]
    first = one[one["local_bsz"] == one["local_bsz"].min()]
    samples = hours_on_one * 3600 / first["step_time_s"].mean() * first["local_bsz"].iloc[0]
    job = Job(model, samples=float(samples))
    means = rows.groupby(["num_nodes", "num_workers", "local_bsz"], as_index=False)[
        "step_time_s"
    ].mean()
    hours = samples / (means["num_workers"] * means["local_bsz"]) * means["step_time_s"] / 3600
    t_min, t_1 = hours.min(), hours[means["num_nodes"] == 1].min()
    deadline = float(t_min * (t_1 / t_min) ** 0.5)
    return job, {
        "cheapest": Constraints(confidence=LEVEL),
        "deadline": Constraints(deadline_h=deadline, confidence=LEVEL),
    }


def main() -> None:
    """Every model x job x question under both policies; print and write the tables."""
    warnings.simplefilter("ignore")
    table = pd.read_csv(reference_measurements().parent / FILE)
    catalog = load_catalog()
    records = []
    for model in sorted(table["model"].unique()):
        env = MeasuredTable(table[table["model"] == model], catalog)
        for hours in JOBS:
            job, asked = questions(table, model, hours)
            truth = known_outcomes(catalog, job, Constraints(confidence=LEVEL), env.truth())
            for name, cons in asked.items():
                started = time.perf_counter()
                ours = online_search(env, job, cons, max_profiles=MAX_PROFILES)
                ours_s = time.perf_counter() - started
                started = time.perf_counter()
                old = before(env, job, cons)
                old_s = time.perf_counter() - started
                runs = (
                    (
                        "ours",
                        ours.recommendation,
                        ours.profiling_cost_usd,
                        len(ours.history),
                        ours_s,
                        ours.stopped,
                    ),
                    (
                        "before",
                        old["pick"],
                        old["spent"],
                        old["profiled"],
                        old_s,
                        "stable" if old["stable"] else "max_profiles",
                    ),
                )
                for policy, pick, spent, profiled, seconds, stopped in runs:
                    j = judge(pick, truth, cons)
                    all_in = (
                        (j["true_usd"] + spent) / j["oracle_usd"] - 1
                        if j["met"] is True
                        else np.nan
                    )
                    records.append(
                        {
                            "model": model,
                            "job": f"{hours:,.0f} h",
                            "question": name,
                            "policy": policy,
                            "pick": None if pick is None else tuple(pick[k] for k in PICK_KEYS),
                            **j,
                            "profiled": profiled,
                            "profiling_usd": spent,
                            "all_in": all_in,
                            "seconds": seconds,
                            "stopped": stopped,
                        }
                    )
        print(f"{model}: done", flush=True)
    frame = pd.DataFrame(records)
    text = render(frame)
    print(text)
    write_report(
        "online_search",
        "# Online search (benchmarks/online_search.py)\n\n"
        + __doc__.split("\n\n", 1)[1].split("    .venv")[0]
        + text,
    )


def _pct(x: float) -> str:
    return "-" if not np.isfinite(x) else f"{x:.1%}"


def render(frame: pd.DataFrame) -> str:
    """The summary per question and policy, then every run."""
    rows = []
    for (job, q, policy), g in frame.groupby(["job", "question", "policy"], sort=False):
        misses = int((g["met"] == False).sum())  # noqa: E712 (NaN: no pick)
        rows.append(
            {
                "job": job,
                "question": q,
                "policy": policy,
                "runs": len(g),
                "answered": f"{g['answered'].mean():.0%}",
                "picks missing D": f"{misses} of {int(g['answered'].sum())}",
                "regret mean / median": (
                    f"{_pct(g['regret'].mean())} / {_pct(g['regret'].median())}"
                ),
                "profiled (mean)": f"{g['profiled'].mean():.1f}",
                "profiling $ (mean)": f"{g['profiling_usd'].mean():.2f}",
                "all in, mean / median": (
                    f"{_pct(g['all_in'].mean())} / {_pct(g['all_in'].median())}"
                ),
                "seconds (mean)": f"{g['seconds'].mean():.1f}",
            }
        )
    each = frame.assign(
        regret=frame["regret"].map(_pct),
        all_in=frame["all_in"].map(_pct),
        profiling_usd=frame["profiling_usd"].map(lambda x: f"{x:.2f}"),
        oracle_usd=frame["oracle_usd"].map(lambda x: f"{x:.2f}"),
    )[
        [
            "model",
            "job",
            "question",
            "policy",
            "answered",
            "met",
            "regret",
            "profiled",
            "profiling_usd",
            "all_in",
            "oracle_usd",
            "stopped",
        ]
    ]
    keys = ["model", "job", "question"]
    ours = frame[frame["policy"] == "ours"].set_index(keys)
    old = frame[frame["policy"] == "before"].set_index(keys).loc[ours.index]
    differ = np.array([a != b for a, b in zip(ours["pick"], old["pick"], strict=True)])
    same = int((~differ).sum())
    better = int((ours["regret"] < old["regret"] - 1e-9)[differ].sum())
    worse = int((ours["regret"] > old["regret"] + 1e-9)[differ].sum())
    said = (
        f"The two recommend the same configuration in {same} of {len(ours)} runs (the job's "
        "size changes neither rule's picks, only what the profiling weighs against them); "
        f"where they differ, ours ends with the lower regret in {better}, the higher in "
        f"{worse}.\n\n"
    )
    return (
        "## Summary\n\n"
        + said
        + markdown_table(pd.DataFrame(rows))
        + "\n\n## Every run\n\n"
        + markdown_table(each)
        + "\n"
    )


if __name__ == "__main__":
    main()
