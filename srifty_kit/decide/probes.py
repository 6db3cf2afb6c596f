"""The next measurement to make: short probe runs ranked by their expected value of information.

A probe is a short run (``steps`` steps) of one candidate configuration. Its value is what it
is expected to save on the decision (Raiffa & Schlaifer's preposterior analysis; Howard,
"Information value theory", IEEE Trans. SSC 1966):

    saving(probe) = E_truth[ loss(decide now) ] - E_truth, outcome[ loss(decide after probe) ]

Truths are joint draws of the model's belief (``model.posterior``): one shared error per group
and per network, so a probe of 8 nodes of a type tells about 12 and 16 nodes of it too. A
probe's outcome is its run's mean step under that truth (a new run: its own run effect); the
belief after it is the Gaussian conditioning ``Belief.condition``, and the decision after it is
the search's own rule (the cheapest expected cost among those meeting the constraints at the
confidence). The loss of a decision under a truth is what the job then costs:

    loss = true cost of the pick                       it meets the deadline and budget
         = true cost of the pick + of the fallback     it misses: run again on the fallback
         = twice the true cost of the fallback         no pick

where the fallback is the candidate most likely to meet the constraints; or, where the job
already has a way to run known to do (a week's job as it ran: ``fallback_usd``), that way at
its known cost, paid once when nothing is picked. A question left
without an answer is priced like a miss: the user runs the fallback with no assurance that it
meets the deadline and budget, and pays for a run that may have to be made again; so a probe
is worth making when it lets the search answer at the stated confidence, not only when it
changes which configuration it picks. A probe is suggested when its expected saving exceeds its own
cost (``steps`` steps plus ``launch_h`` of start-up, at the on-demand price of its nodes).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from srifty_kit.decide import candidates as cand
from srifty_kit.decide.planner import SearchResult
from srifty_kit.errors import InputError, is_number, is_whole
from srifty_kit.model.efficiency import SECONDS_PER_HOUR
from srifty_kit.model.posterior import Belief

LAUNCH_H = 5 / 60  # starting the nodes and the job before the first timed step (assumed)
PROBE_STEPS = 200  # enough steps for the stopping rule's warm-up cut and a stable mean
_POOL = 1500  # candidates the value of information is computed over (by closeness)
_PROBES = 24  # probe configurations tried
MAX_PROBES = 20  # the most probes one call suggests (``k``; ``srifty search --suggest-probes``)


@dataclass(frozen=True)
class _Pool:
    """The candidates a decision can realistically land on, as arrays."""

    index: np.ndarray  # positions in the search's candidates
    belief: Belief  # run time in hours
    per_hour: np.ndarray  # expected cost per expected hour
    deadline: float
    budget: float
    confidence: float

    def bound(self) -> np.ndarray:
        """The run-time bound the deadline and budget set for each candidate."""
        return np.minimum(self.deadline, self.budget / np.maximum(self.per_hour, 1e-300))


def _pool(result: SearchResult) -> _Pool:
    c = result.candidates.cols
    cons = result.constraints
    deadline = np.inf if cons.deadline_h is None else float(cons.deadline_h)
    budget = np.inf if cons.budget_usd is None else float(cons.budget_usd)
    p = cand.meet_probability(c, cons.deadline_h, cons.budget_usd)
    # the decision lands among the likely-feasible cheap ones: keep those closest to it
    closeness = np.where(p >= 1e-3, c["cost_mean_usd"], np.inf)
    order = np.argsort(-p if not np.isfinite(closeness).any() else closeness, kind="stable")
    index = np.sort(order[: min(_POOL, order.size)])
    belief = cand.belief_of({k: v[index] for k, v in c.items()})
    per_hour = c["cost_usd"][index] / np.maximum(c["time_h"][index], 1e-300)
    return _Pool(index, belief, per_hour, deadline, budget, float(cons.confidence))


def _decide(pool: _Pool, belief: Belief) -> np.ndarray:
    """The search's rule per leading row of ``belief``: the cheapest expected cost among
    candidates meeting the constraints at the confidence; -1 where none does."""
    p = belief.prob_below(pool.bound())
    expected = belief.mean * pool.per_hour
    score = np.where(p >= pool.confidence - 1e-9, expected, np.inf)
    pick = np.argmin(score, axis=-1)
    found = np.take_along_axis(score, pick[..., None], axis=-1)[..., 0]
    return np.where(np.isfinite(found), pick, -1)


def _loss(
    pool: _Pool, pick: np.ndarray, truth: np.ndarray, fallback: int, known: float | None = None
) -> np.ndarray:
    """What the job costs under each truth (rows of ``truth``, hours) for ``pick``; with
    ``known``, the fallback is a way to run known to do, at that cost."""
    rows = np.arange(truth.shape[0])
    cost = truth * pool.per_hour
    meets = (truth <= pool.deadline) & (cost <= pool.budget)
    back = cost[:, fallback] if known is None else np.full(truth.shape[0], known)
    unanswered = 2.0 * back if known is None else back
    chosen = np.where(pick >= 0, pick, fallback)
    paid = cost[rows, chosen]
    hit = meets[rows, chosen]
    return np.where(pick < 0, unanswered, np.where(hit, paid, paid + back))


def _truths(belief: Belief, n: int, rng: np.random.Generator) -> tuple[np.ndarray, tuple]:
    """(n, N) truths of run time, and each configuration's level they were drawn around: its
    shared errors, its placement's and its own stray (persistent), to which a run adds its
    own noise."""
    level, run = belief.levels(n, rng)
    return belief.point * np.exp(level + run * rng.standard_normal((n, len(belief)))), (level, run)


def _probe_choices(result: SearchResult, pool: _Pool) -> np.ndarray:
    """Pool positions worth probing: distinct configurations (type, nodes, workers), the most
    uncertain about the decision first."""
    c = result.candidates.cols
    idx = pool.index
    p = pool.belief.prob_below(pool.bound())
    # a probe that can change the answer sits near the boundary and is unsure
    interest = pool.belief.sd * (0.05 + p * (1.0 - p))
    keys = pd.DataFrame(
        {
            "type": c["type"][idx],
            "nodes": c["nodes"][idx],
            "workers": c["workers"][idx],
            "mixed": c["type2"][idx] >= 0,
            "interest": interest,
        }
    )
    keys = keys[~keys["mixed"]].sort_values("interest", ascending=False, kind="stable")
    keys = keys.drop_duplicates(["type", "nodes", "workers"])
    return keys.index.to_numpy()[:_PROBES]


def suggest_probes(
    result: SearchResult,
    k: int = 1,
    steps: int = PROBE_STEPS,
    outcomes: int = 256,
    seed: int = 0,
    launch_h: float = LAUNCH_H,
    fallback_usd: float | None = None,
) -> pd.DataFrame:
    """Up to ``k`` short runs whose expected saving on this decision exceeds their cost.

    Args:
        result: a ``search`` result (its candidates, job and constraints are used).
        k: how many probes at most (the k best, each valued alone).
        steps: steps of each probe run.
        outcomes: simulated truths per probe (the expectation's sample size).
        seed: random seed (the same seed gives the same suggestion).
        launch_h: start-up hours paid before the first step.
        fallback_usd: what the job costs run the way it is known to finish (a week's job as
            it ran), paid once when nothing meets the constraints and again after a pick that
            misses; None: the candidate most likely to meet them, with no assurance, so an
            unanswered question costs it twice.

    Returns:
        One row per suggested probe, best first: the configuration columns (instance_type,
        num_nodes, num_workers, local_bsz, gpus_per_node, pricing), ``steps``, ``cost_usd``
        (the probe's price), ``expected_saving_usd`` (before its cost), ``net_usd``,
        ``p_meet_now`` and ``answer_rate`` (how often a decision exists after it). Empty when no
        probe is worth its cost.

    Raises:
        InputError: ``result`` is not a search's result; k, steps or outcomes not a whole
            number in range; seed not a whole number >= 0; launch_h not a finite number of
            hours >= 0; fallback_usd not a finite number of dollars >= 0.
    """
    if not isinstance(result, SearchResult):
        raise InputError(
            f"result must be what search() returns, got {type(result).__name__}",
            fix="suggest_probes(search(model, catalog, job, constraints), k=1)",
        )
    for name, value, top in (
        ("k", k, MAX_PROBES),
        ("steps", steps, 100_000),
        ("outcomes", outcomes, 10_000),
    ):
        if not (is_whole(value) and value <= top):
            raise InputError(f"{name} must be a whole number 1..{top}, got {value!r}", fix="e.g. 1")
    if not is_whole(seed, least=0):
        raise InputError(f"seed must be a whole number >= 0, got {seed!r}", fix="seed=0")
    # a negative start-up made a probe cheaper than its own steps; NaN made none worth it
    if not (is_number(launch_h) and 0 <= launch_h < np.inf):
        raise InputError(
            f"launch_h must be a finite number of hours >= 0, got {launch_h!r}",
            fix=f"e.g. {LAUNCH_H:.3g} (five minutes to start the nodes), or 0",
        )
    if fallback_usd is not None and not (is_number(fallback_usd) and 0 <= fallback_usd < np.inf):
        raise InputError(
            f"fallback_usd must be a finite number of dollars >= 0, got {fallback_usd!r}",
            fix="what the job cost the way it ran, or None",
        )
    k, steps, outcomes, seed = int(k), int(steps), int(outcomes), int(seed)
    known = None if fallback_usd is None else float(fallback_usd)
    columns = [
        "instance_type",
        "num_nodes",
        "num_workers",
        "local_bsz",
        "gpus_per_node",
        "pricing",
        "steps",
        "cost_usd",
        "expected_saving_usd",
        "net_usd",
        "p_meet_now",
        "answer_rate",
    ]
    if result.candidates is None or len(result.candidates) == 0 or result.constraints is None:
        return pd.DataFrame(columns=columns)
    pool = _pool(result)
    rng = np.random.default_rng(seed)
    truth, (level, run) = _truths(pool.belief, outcomes, rng)
    now = _decide(pool, pool.belief)
    p_now = pool.belief.prob_below(pool.bound())
    fallback = int(np.lexsort((pool.belief.mean * pool.per_hour, -p_now))[0])
    loss_now = _loss(pool, np.full(outcomes, int(now)), truth, fallback, known)
    c, types = result.candidates.cols, result.candidates.types
    rows = []
    for j in _probe_choices(result, pool):
        b = pool.belief
        # the probe's run: the truth's level of that configuration, and the run's own noise
        y = level[:, j] + run[j] * rng.standard_normal(outcomes)
        after = _decide(pool, b.condition(int(j), y, 0.0))
        loss_after = _loss(pool, after, truth, fallback, known)
        i = pool.index[j]
        # the probe runs on-demand (as it is said) whatever pricing its candidate row has: a
        # spot row's own hourly figure is the spot price, which under-priced the run (a probe
        # is one type, never a mix: ``_probe_choices``)
        od_per_hr = float(c["nodes"][i] * types.ondemand[c["type"][i]])
        if not np.isfinite(od_per_hr):
            od_per_hr = pool.per_hour[j]
        probe_h = steps * c["step_time_s"][i] / SECONDS_PER_HOUR + launch_h
        cost = float(probe_h * od_per_hr)
        saving = float(np.mean(loss_now) - np.mean(loss_after))
        rows.append(
            {
                "position": int(i),
                "steps": int(steps),
                "cost_usd": cost,
                "expected_saving_usd": saving,
                "net_usd": saving - cost,
                "p_meet_now": float(p_now[j]),
                "answer_rate": float(np.mean(after >= 0)),
            }
        )
    if not rows:
        return pd.DataFrame(columns=columns)
    table = pd.DataFrame(rows)
    table = table[table["net_usd"] > 0].sort_values("net_usd", ascending=False).head(k)
    frame = cand.to_frame(result.candidates, table["position"].to_numpy())
    out = frame[["instance_type", "num_nodes", "num_workers", "local_bsz", "gpus_per_node"]]
    out = out.assign(pricing="on-demand").reset_index(drop=True)
    for name in columns[6:]:
        out[name] = table[name].to_numpy()
    return out[columns]


def probe_sentence(probes: pd.DataFrame) -> str:
    """The first probe in one sentence, its configuration named as the pick's is ("Measure
    8 x g4dn.12xlarge (32 workers x batch 128), on-demand, for 200 steps, ...").

    Args:
        probes: ``suggest_probes``' table (best first), or None or empty.

    Returns:
        The sentence; when there is no probe, that no measurement is worth its cost.
    """
    from srifty_kit.decide.explanation import config_phrase, money_apart

    if probes is None or probes.empty:
        return "No short measurement is worth its cost for this decision."
    p = probes.iloc[0]  # its counts are ints (``suggest_probes``), as config_phrase prints them
    # a probe is suggested only where its saving exceeds its cost: the two must read so
    cost, saving = money_apart(float(p["cost_usd"]), float(p["expected_saving_usd"]))
    return (
        f"Measure {config_phrase(p)}, for {int(p['steps'])} steps, about "
        f"{cost}, to decide; expected saving {saving}."
    )
