"""Decision quality: fitted on small scales, deciding among measured larger ones, judged by truth.

Data: the real step times in ../shared/reference/measurements (or $SRIFTY_SHARED). Per cluster
the model is fitted on its small runs and decides among EVERY measured configuration of one
training model at one local batch (the larger, never-fitted ones included), for a job that
must finish by a deadline as cheaply as possible at 90% confidence:

  AWS g4dn.12xlarge   fitted on 1-3 nodes, deciding among 1-4 nodes
  Azure ND40rs_v2     fitted on the `placements` runs on at most 2 nodes, deciding among 1-5
  RTX 2080 Ti         fitted on the `placements` runs on at most 2 nodes, deciding among 1-3

A problem is one training model x local batch that has larger-scale rows x five deadlines
D = T_min * (T_small / T_min) ** f, f in 0.1, 0.3, 0.5, 0.7, 0.9, between the fastest true
time T_min and the fastest of the fitted node counts T_small (problems where the larger
scales are not faster, T_small < 1.05 T_min, are left out: nothing to decide beyond them).
Work: samples for 10 h on one worker of the smallest measured configuration (perfect scaling,
no noise scale), so times are hours and probes cost minutes. Truth: the measured step time of
each configuration (its even-spread placement, the median where several rows measure it);
price per node-hour from the embedded catalog for AWS and 1.0 for the other clusters (a
ratio to the oracle does not depend on it).

Policies, all on the same fitted rows:
  ours            srifty_kit.search with the candidates list: P(time <= D) >= 0.9 under the
                  model's joint belief, least expected cost
  ours, upper end the rule search used before: each configuration's two-sided 90% upper end
                  (StepTimeModel.predict) within D, least upper-end cost
  ours, point     the point estimate within D, least point cost
  pollux, point   Pollux's performance model (adaptdl 0.2.11, OSDI'21) fitted on the same rows,
                  its point estimate (it gives no interval); needs .bench-env (model_accuracy)
  ours, point x its held-out 90th percentile (diagnostic, not a policy)
                  the point estimate times the factor that 90% of the cluster's held-out
                  configurations' true steps lie below (read off the rows it is judged on): the
                  decisions a perfectly calibrated one-sided upper end on our point would make,
                  so its unanswered share is what the point's own errors leave, whatever the
                  interval
  ours, node-move prior of all three clusters (diagnostic, not a policy)
                  ours with the prior a user gets (intervals.NODE_MOVE_PRIOR's learning, on
                  every cluster's moves, this one's included): in-sample, it shows how much of
                  the gap to the diagnostic above is the prior's being carried from other
                  clusters
Each cluster's prior on node-count moves is learned on the OTHER clusters only
(model_accuracy's node_move_priors): no constant is chosen on the rows a cluster reports.

Probe arm: ours with one probe. The suggested probe (srifty_kit.decide.probes, expected value
of information, K=1) is looked up in the reference table, its rows appended to the fitted
ones, the model refitted on that training model's rows and the decision made again; beside it
the same with a random configuration beyond the fitted node counts, with the largest
configuration, and (a diagnostic, not a policy: it reads the judged rows) with the probe one
would choose knowing the truth, the cheapest configuration beyond the fitted node counts whose
true time clears D by one run's spread (measured once, it can answer at 90%): the gap from it
to the suggested probe is the choice of the probe, what it leaves unanswered is what even the
right run does not let the refitted model answer. Regret includes the probe's cost (200 steps
plus 5 minutes of start-up at its price). When the suggestion is "no probe is worth its cost",
no probe is run (nor when no configuration beyond clears D, in hindsight). The probe arms
run twice: for the job above (10 h on one worker, so minutes on the larger clusters, where a
probe alone can cost a third of the job) and for one 100x larger (1,000 h on one worker, a few
GPU-weeks), where the same probe is a small share of the cost. The decisions without a probe
do not depend on the job's size (times and costs scale with the work).

Metrics: unanswered = share of problems with no pick (every problem has an answer: the fastest
configuration meets D); of answerable = the same among problems some configuration answers at
90% (its true time clears D by more than a new run's spread, the 3% noise floor); miss = share
of picks whose true time exceeds D, with a 90% Wilson interval; regret = true cost / oracle's -
1 over the picks that meet D (mean and median).

    .venv/bin/python benchmarks/decision_quality.py [--quick]   # writes reports/benchmarks/
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd
from common import markdown_table, reference_measurements, write_report
from model_accuracy import as_prior, node_move_priors, node_move_rows, run_pollux
from scipy.stats import norm
from statsmodels.stats.proportion import proportion_confint

from srifty_kit.catalog.query import load_catalog
from srifty_kit.decide.job import Constraints, Job
from srifty_kit.decide.planner import search
from srifty_kit.decide.probes import LAUNCH_H, PROBE_STEPS, suggest_probes
from srifty_kit.model.estimator import StepTimeModel
from srifty_kit.model.fit import NOISE_FLOOR
from srifty_kit.model.physics import max_per_node, placement_max
from srifty_kit.tables.contracts import validate_catalog

LEVEL = 0.9
FRACTIONS = (0.1, 0.3, 0.5, 0.7, 0.9)
HOURS_ON_ONE = 10.0
# the probe arms again for a job 100x larger (1,000 hours on one worker): a probe's cost is fixed
# (200 steps and a start-up) while the job's grows, so its share of the regret shrinks
LARGE_JOB = 100.0
# a configuration answers a deadline at LEVEL only if it beats it by more than a run's own
# spread: a new run of it lands within NOISE_FLOOR (log sd) of the measured one
CLEAR = float(np.exp(norm.ppf(LEVEL) * NOISE_FLOOR))
# ... and once measured by ONE run, its level is known only to that run's spread: a new run
# differs from the measured one by sqrt(2) run spreads, so a measured configuration answers at
# LEVEL only below D / MEASURED_CLEAR
MEASURED_CLEAR = float(np.exp(norm.ppf(LEVEL) * NOISE_FLOOR * np.sqrt(2)))
KEYS = ["num_nodes", "num_workers"]
CLUSTERS = {  # name: (file, fitted rows, prior key in model_accuracy.node_move_priors)
    "AWS g4dn.12xlarge <=3 -> 4": (
        "aws_g4dn12xlarge_placements.csv",
        lambda t: t["num_nodes"] <= 3,
        "AWS g4dn.12xlarge",
    ),
    "Azure ND40rs_v2 <=2 -> 3-5": (
        "sia_azure_nd40rsv2.csv",
        lambda t: (t["campaign"] == "placements") & (t["num_nodes"] <= 2),
        "Azure ND40rs_v2",
    ),
    "RTX 2080 Ti <=2 -> 3": (
        "sia_rtx2080ti.csv",
        lambda t: (t["campaign"] == "placements") & (t["num_nodes"] <= 2),
        "RTX 2080 Ti",
    ),
}


def _catalog(table: pd.DataFrame) -> pd.DataFrame:
    """The embedded catalog's row for an EC2 type, else one with a unit price per node-hour."""
    itype = str(table["instance_type"].iloc[0])
    full = load_catalog()
    if itype in set(full["instance_type"]):
        return full[full["instance_type"] == itype].head(1).reset_index(drop=True)
    row = {c: None for c in full.columns}
    row.update(
        instance_type=itype,
        region="us-east-1",
        vcpus=1,
        memory_gib=1.0,
        gpu_count=int(table["gpus_per_node"].max()),
        gpu_model="",
        ondemand_usd_per_hr=1.0,
        source="unit price, benchmarks/decision_quality.py",
    )
    return validate_catalog(pd.DataFrame([row]))


def _even(table: pd.DataFrame) -> pd.DataFrame:
    """Rows whose placement is the even spread the model predicts (or has none)."""
    busiest = [
        placement_max(p, int(k), int(n))
        for p, k, n in zip(
            table["placement"], table["num_nodes"], table["num_workers"], strict=True
        )
    ]
    even = max_per_node(table["num_nodes"].to_numpy(), table["num_workers"].to_numpy())
    return table[np.asarray(busiest) == even]


def _space(table: pd.DataFrame, model: str, bsz: int) -> pd.DataFrame:
    """Every measured configuration of one model and batch, with its true step (median)."""
    rows = _even(table[(table["model"] == model) & (table["local_bsz"] == bsz)])
    truth = rows.groupby(KEYS, as_index=False)["step_time_s"].median()
    truth["instance_type"] = str(table["instance_type"].iloc[0])
    truth["local_bsz"] = bsz
    return truth


def _pick(frame: pd.DataFrame, ok: np.ndarray, cost: np.ndarray) -> int | None:
    """Position of the least ``cost`` among ``ok`` rows, None when none."""
    if not ok.any():
        return None
    return int(np.flatnonzero(ok)[np.argmin(cost[ok])])


class Problem:
    """One training model x batch: its space, truth, work and deadlines."""

    def __init__(self, table, model, bsz, small_nodes, price, scale: float = 1.0):
        self.model, self.bsz, self.price = model, bsz, price
        self.space = _space(table, model, bsz)
        first = self.space.sort_values(KEYS).iloc[0]
        hours = HOURS_ON_ONE * scale
        samples = hours * 3600 / first["step_time_s"] * first["num_workers"] * bsz
        self.job = Job(model, samples=float(samples))
        s = self.space
        self.steps = samples / (s["num_workers"] * bsz)
        self.true_h = (self.steps * s["step_time_s"] / 3600).to_numpy()
        self.cost_rate = (s["num_nodes"] * price).to_numpy()
        t_min = self.true_h.min()
        t_small = self.true_h[s["num_nodes"].to_numpy() <= small_nodes].min()
        self.deadlines = (
            [t_min * (t_small / t_min) ** f for f in FRACTIONS] if t_small >= 1.05 * t_min else []
        )
        self.small_nodes = small_nodes

    def candidates(self) -> pd.DataFrame:
        return self.space[["instance_type", "num_nodes", "num_workers", "local_bsz"]]

    def judge(self, pos: int | None, deadline: float, extra_usd: float = 0.0) -> dict:
        """The truth about a pick: answered, met, regret against the oracle."""
        cost = self.true_h * self.cost_rate
        meets = self.true_h <= deadline * (1 + 1e-9)
        oracle = cost[meets].min()
        # answerable: some configuration clears D by more than a new run's spread
        answerable = bool((self.true_h * CLEAR <= deadline).any())
        margin = float(deadline / self.true_h.min())  # how far the fastest clears D
        if pos is None:
            return {
                "margin": margin,
                "answered": False,
                "met": np.nan,
                "regret": np.nan,
                "probe_usd": extra_usd,
                "answerable": answerable,
            }
        met = bool(meets[pos])
        regret = (cost[pos] + extra_usd) / oracle - 1 if met else np.nan
        return {
            "margin": margin,
            "answered": True,
            "met": met,
            "regret": regret,
            "probe_usd": extra_usd,
            "answerable": answerable,
        }

    def rule(self, step: np.ndarray, deadline: float) -> int | None:
        """Least cost among configurations whose time from ``step`` meets the deadline."""
        hours = self.steps.to_numpy() * step / 3600
        return _pick(self.space, hours <= deadline, hours * self.cost_rate)


def _ours(model, catalog, problem, deadline):
    """search with the candidates list; the result and the pick's position in the space."""
    result = search(
        model,
        catalog,
        problem.job,
        Constraints(deadline_h=deadline, confidence=LEVEL, max_nodes=64),
        candidates=problem.candidates(),
        top=1,
    )
    if result.pick is None:
        return result, None
    hit = (problem.space["num_nodes"] == result.pick["num_nodes"]) & (
        problem.space["num_workers"] == result.pick["num_workers"]
    )
    return result, int(np.flatnonzero(hit.to_numpy())[0])


def _fit(rows, prior) -> StepTimeModel:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return StepTimeModel(level=LEVEL, node_move_prior=prior).fit(rows)


def _probe_rows(table, model, bsz, nodes, workers) -> pd.DataFrame:
    rows = table[
        (table["model"] == model)
        & (table["local_bsz"] == bsz)
        & (table["num_nodes"] == nodes)
        & (table["num_workers"] == workers)
    ]
    return _even(rows)


def _probe_cost(problem, pos) -> float:
    s = problem.space.iloc[pos]
    hours = PROBE_STEPS * s["step_time_s"] / 3600 + LAUNCH_H
    return float(hours * s["num_nodes"] * problem.price)


LARGE_TAG = f", {HOURS_ON_ONE * LARGE_JOB:,.0f} h job"
CALIBRATED = "ours, point x its held-out 90th percentile (diagnostic)"
HINDSIGHT = "probe chosen in hindsight (diagnostic)"
IN_SAMPLE = "ours, node-move prior of all three clusters (diagnostic)"


def _hindsight(problem, deadline) -> int | None:
    """The probe a user who knew the truth would make: the truly cheapest configuration beyond
    the fitted node counts whose true time clears ``deadline`` by one run's spread (so that,
    measured once, it answers at LEVEL); None when none does (no probe: the decision stands).
    A diagnostic: it reads the judged rows."""
    beyond = problem.space["num_nodes"].to_numpy() > problem.small_nodes
    ok = beyond & (problem.true_h * MEASURED_CLEAR <= deadline)
    return _pick(problem.space, ok, problem.true_h * problem.cost_rate)


def _probe_arms(base, problem, result, pos, deadline, arms, refit, catalog, tag) -> list[dict]:
    """The decision after one probe: the suggested one (none when no probe is worth its cost:
    the decision stands), and each of ``arms`` (name: position in the space), refitted and
    decided again; regret includes the probe's cost."""
    probes = suggest_probes(result, k=1)
    suggested = None
    if not probes.empty:
        p = probes.iloc[0]
        hit = (problem.space["num_nodes"] == p["num_nodes"]) & (
            problem.space["num_workers"] == p["num_workers"]
        )
        suggested = int(np.flatnonzero(hit.to_numpy())[0])
    out = []
    for arm, probe_pos in {"suggested probe": suggested, **arms}.items():
        name = f"ours + {arm}{tag}"
        if probe_pos is None:
            out.append({**base, "policy": name, **problem.judge(pos, deadline)})
            continue
        _, after = _ours(refit(probe_pos), catalog, problem, deadline)
        cost = _probe_cost(problem, probe_pos)
        out.append({**base, "policy": name, **problem.judge(after, deadline, cost)})
    return out


def held_out_quantile(problems, small_nodes: int) -> float:
    """The factor over the point estimate that LEVEL of the held-out configurations' true
    steps lie below: read off the very rows the decisions are judged on, so an arm that uses
    it is a diagnostic (what a perfectly calibrated upper end on our point would answer),
    never a policy."""
    ratios = []
    for problem, _, pred in problems:
        beyond = problem.space["num_nodes"].to_numpy() > small_nodes
        truth = problem.space["step_time_s"].to_numpy()
        ratios.append(truth[beyond] / pred["step_time_s"].to_numpy()[beyond])
    return float(np.quantile(np.concatenate(ratios), LEVEL))


def run_cluster(name, folder, prior, shipped, quick: bool, rng) -> list[dict]:
    """Every problem of one cluster under every policy (``shipped``: the node-move prior
    learned on every cluster, this one included, for the in-sample diagnostic arm)."""
    file, fitted, _ = CLUSTERS[name]
    table = pd.read_csv(folder / file)
    if "campaign" not in table:
        table["campaign"] = "placements"
    table["placement"] = table["placement"].astype("string")
    train = table[fitted(table)].reset_index(drop=True)
    small_nodes = int(train["num_nodes"].max())
    catalog = _catalog(table)
    price = float(catalog["ondemand_usd_per_hr"].iloc[0])
    started = time.perf_counter()
    model = _fit(train, prior)
    fit_s = time.perf_counter() - started
    in_sample = _fit(train, shipped)
    larger = table[table["num_nodes"] > small_nodes]
    pairs = sorted(set(zip(larger["model"], larger["local_bsz"], strict=True)))
    if quick:
        pairs = pairs[:: max(len(pairs) // 8, 1)]
    problems = {}
    for m, bsz in pairs:
        problem = Problem(table, m, int(bsz), small_nodes, price)
        if problem.deadlines:
            configs = problem.space.assign(model=m)
            problems[m, bsz] = (problem, configs, model.predict(configs, level=LEVEL))
    calibrated = held_out_quantile(problems.values(), small_nodes)
    out = []
    refits: dict[tuple, StepTimeModel] = {}
    for (m, bsz), (problem, configs, pred) in problems.items():
        big = Problem(table, m, int(bsz), small_nodes, price, scale=LARGE_JOB)
        pollux = run_pollux(train[train["model"] == m], configs)
        own_rows = train[train["model"] == m]

        def refit(pos, own_rows=own_rows, m=m, bsz=bsz, problem=problem):
            s = problem.space.iloc[pos]
            key = (m, bsz, int(s["num_nodes"]), int(s["num_workers"]))
            if key not in refits:
                extra = _probe_rows(table, m, bsz, key[2], key[3])
                refits[key] = _fit(pd.concat([own_rows, extra], ignore_index=True), prior)
            return refits[key]

        beyond = np.flatnonzero(problem.space["num_nodes"].to_numpy() > small_nodes)
        random_pos = int(rng.choice(beyond))
        largest_pos = int(
            np.lexsort((problem.space["num_workers"], problem.space["num_nodes"]))[-1]
        )
        # how far above its truth the model's 90% upper end puts the truly fastest
        # configuration: a deadline it clears by less cannot be promised without measuring
        fastest = int(np.argmin(problem.true_h))
        truth = problem.space["step_time_s"].iloc[fastest]
        fastest_upper = float(pred["step_time_hi"].iloc[fastest] / truth)
        for f, deadline in zip(FRACTIONS, problem.deadlines, strict=True):
            base = {
                "cluster": name,
                "model": m,
                "local_bsz": bsz,
                "fraction": f,
                "fastest_upper": fastest_upper,
            }
            result, pos = _ours(model, catalog, problem, deadline)
            out.append({**base, "policy": "ours", **problem.judge(pos, deadline)})
            upper = problem.rule(pred["step_time_hi"].to_numpy(), deadline)
            out.append({**base, "policy": "ours, upper end", **problem.judge(upper, deadline)})
            point = problem.rule(pred["step_time_s"].to_numpy(), deadline)
            out.append({**base, "policy": "ours, point", **problem.judge(point, deadline)})
            known = problem.rule(pred["step_time_s"].to_numpy() * calibrated, deadline)
            out.append({**base, "policy": CALIBRATED, **problem.judge(known, deadline)})
            _, own = _ours(in_sample, catalog, problem, deadline)
            out.append({**base, "policy": IN_SAMPLE, **problem.judge(own, deadline)})
            if pollux is not None:
                pp = problem.rule(np.asarray(pollux[m], float), deadline)
                out.append({**base, "policy": "pollux, point", **problem.judge(pp, deadline)})
            arms = {
                "random probe": random_pos,
                "largest probe": largest_pos,
                HINDSIGHT: _hindsight(problem, deadline),
            }
            out += _probe_arms(base, problem, result, pos, deadline, arms, refit, catalog, "")
            big_deadline = big.deadlines[FRACTIONS.index(f)]
            big_result, big_pos = _ours(model, catalog, big, big_deadline)
            out += _probe_arms(
                base, big, big_result, big_pos, big_deadline, arms, refit, catalog, LARGE_TAG
            )
    for row in out:
        row["fit_s"] = fit_s
        row["calibrated"] = calibrated
    return out


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per cluster and policy: unanswered, miss rate (Wilson 90%), regret."""
    rows = []
    for (cluster, policy), g in frame.groupby(["cluster", "policy"], sort=False):
        picks = g[g["answered"]]
        misses = int((picks["met"] == False).sum())  # noqa: E712 (NaN-aware)
        lo, hi = (
            proportion_confint(misses, len(picks), alpha=0.1, method="wilson")
            if len(picks)
            else (np.nan, np.nan)
        )
        regret = g["regret"].dropna()
        rows.append(
            {
                "cluster": cluster,
                "policy": policy,
                "problems": len(g),
                "unanswered": f"{1 - g['answered'].mean():.1%}",
                "unanswered, of answerable": f"{1 - g.loc[g['answerable'], 'answered'].mean():.1%}",
                "picks missing D": f"{misses / max(len(picks), 1):.1%} [{lo:.1%}, {hi:.1%}]",
                "regret mean / median": f"{regret.mean():.1%} / {regret.median():.1%}",
                "probe $ (mean)": f"{g['probe_usd'].mean():.2f}",
            }
        )
    return pd.DataFrame(rows)


def by_fraction(frame: pd.DataFrame) -> pd.DataFrame:
    """Per cluster and deadline fraction f: how many problems are answerable at LEVEL, how far
    D lies above the fastest time against how far the model's upper end does, and the share
    unanswered by ours and by ours after the suggested probe (of all, of answerable)."""
    rows = []
    for (cluster, f), g in frame.groupby(["cluster", "fraction"], sort=False):
        row = {"cluster": cluster, "f": f}
        ours = g[g["policy"] == "ours"]
        row["answerable"] = f"{ours['answerable'].mean():.0%}"
        row["D over the fastest (median)"] = f"+{ours['margin'].median() - 1:.1%}"
        row["fastest's 90% upper end over its truth (median)"] = (
            f"+{ours['fastest_upper'].median() - 1:.1%}"
        )
        row["fastest's upper end clears D"] = (
            f"{(ours['fastest_upper'] <= ours['margin']).mean():.0%}"
        )
        for policy in ("ours", "ours + suggested probe", f"ours + suggested probe{LARGE_TAG}"):
            h = g[g["policy"] == policy]
            fair = h[h["answerable"]]
            row[f"{policy}: unanswered (of answerable)"] = (
                f"{1 - h['answered'].mean():.0%} ({1 - fair['answered'].mean():.0%})"
                if len(fair)
                else f"{1 - h['answered'].mean():.0%} (-)"
            )
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["cluster", "f"], kind="stable")


def left_unanswered(frame: pd.DataFrame) -> pd.DataFrame:
    """Per cluster and probe arm: the answerable problems still unanswered after the probe,
    and how many of them only a configuration inside one run's band answers (its true time
    between D / MEASURED_CLEAR and D / CLEAR: known exactly it would answer, measured once it
    cannot, for one run's mean holds its level only to a run's spread)."""
    rows = []
    arms = [
        f"ours + {a}{t}"
        for t in ("", LARGE_TAG)
        for a in ("suggested probe", "largest probe", HINDSIGHT)
    ]
    for (cluster, policy), g in frame.groupby(["cluster", "policy"], sort=False):
        if policy not in arms:
            continue
        left = g[g["answerable"] & ~g["answered"]]
        band = left[left["margin"] < MEASURED_CLEAR]
        rows.append(
            {
                "cluster": cluster,
                "policy": policy,
                "answerable": int(g["answerable"].sum()),
                "left unanswered": len(left),
                f"of them inside one run's band (D/{MEASURED_CLEAR:.3f}..D/{CLEAR:.3f})": (
                    f"{len(band)} ({len(band) / max(len(left), 1):.0%})"
                ),
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    """Run every cluster, print and write the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="every 8th problem pair only")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    folder = reference_measurements().parent
    priors = {k: as_prior(v) for k, v in node_move_priors(node_move_rows(folder)).items()}
    rng = np.random.default_rng(0)
    records = []
    for name, (file, _, key) in CLUSTERS.items():
        if not (folder / file).is_file():
            print(f"{name}: {file} absent, skipped")
            continue
        started = time.perf_counter()
        records += run_cluster(name, folder, priors[key], priors["all"], args.quick, rng)
        print(f"{name}: {time.perf_counter() - started:.0f} s", flush=True)
    frame = pd.DataFrame(records)
    table = summary(frame)
    fits = frame.groupby("cluster")["fit_s"].first().map(lambda s: f"{s:.1f} s")
    factors = frame.groupby("cluster", sort=False)["calibrated"].first()
    text = (
        "## Summary\n\n"
        + markdown_table(table)
        + "\n\nThe factor over our point that 90% of each cluster's held-out configurations' "
        "true steps lie below (the first diagnostic's): "
        + ", ".join(f"{c}: {x:.3f}" for c, x in factors.items())
        + ".\n\n## Unanswered by deadline\n\n"
        + f"Answerable: some configuration's true time is below D / {CLEAR:.3f}, i.e. clears it "
        "by more than a new run's own spread at 90% (the 3% noise floor): a configuration "
        "whose measured mean sits closer to D than that misses it in more than one run of "
        "ten, so no rule that keeps its 90% promise may pick it, measured or not.\n\n"
        + "*D over the fastest*: how far the deadline lies above the truly fastest "
        "configuration's time; *its 90% upper end over its truth*: how far above that time the "
        "model fitted without a probe puts the configuration's 90% upper end (its step "
        "interval). Where the second exceeds the first, not even the fastest configuration can "
        "be promised at 90% before something beyond the fitted node counts is measured.\n\n"
        + markdown_table(by_fraction(frame))
        + "\n\n## What one probe leaves unanswered\n\n"
        "A probe measures its configuration in one run: afterwards the model knows that "
        "configuration's level to within that run's spread, so to promise 90% for a new run "
        f"its measured mean must clear D by {MEASURED_CLEAR:.3f}x, not the {CLEAR:.3f}x that "
        "makes a problem answerable (a level known exactly). Problems whose every answer lies "
        "between the two stay unanswered after any single probe.\n\n"
        + markdown_table(left_unanswered(frame))
        + "\n\nFit time of the model on each cluster's fitted rows (every training model, 2 "
        "cores): "
        + ", ".join(f"{c}: {s}" for c, s in fits.items())
        + ".\n"
        + ("\n(--quick: every 8th model x batch pair only)\n" if args.quick else "")
        + (
            ""
            if (frame["policy"] == "pollux, point").any()
            else "\nPollux's rows are missing: .bench-env was not found (create it as "
            "benchmarks/model_accuracy.py's docstring says, then run this again).\n"
        )
    )
    print(text)
    write_report(
        "decision_quality",
        "# Decision quality (benchmarks/decision_quality.py)\n\n"
        + __doc__.split("\n\n", 1)[1].split("    .venv")[0]
        + text,
    )


if __name__ == "__main__":
    main()
