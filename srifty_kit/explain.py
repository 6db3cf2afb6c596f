"""Words for a search result: why the pick wins, why not the cheapest per hour, what binds."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from . import candidates as cand

if TYPE_CHECKING:  # pragma: no cover
    from .job import Constraints, Job


def describe(row: pd.Series) -> str:
    """'2 x g5.12xlarge (8 workers x batch 32), on-demand' — a configuration in one phrase."""
    text = f"{row['num_nodes']} x {row['instance_type']}"
    if isinstance(row.get("instance_type_2"), str):
        text += f" + {row['num_nodes_2']} x {row['instance_type_2']}"
        batch = (f"{_workers(row['num_workers'])} x batch {row['local_bsz']} + "
                 f"{row['num_workers_2']} x {row['local_bsz_2']}")
    else:
        batch = f"{_workers(row['num_workers'])} x batch {row['local_bsz']}"
    return f"{text} ({batch}), {row['pricing']}"


def _workers(n: int) -> str:
    return f"{n} worker" + ("" if n == 1 else "s")


def _hours(h: float) -> str:
    """Hours as people say them: '2.5 h', '12 min', '40 s'."""
    if h >= 1:
        return f"{h:.3g} h"
    if h * 60 >= 1:
        return f"{h * 60:.2g} min"
    return f"{h * 3600:.2g} s"


def _money(x: float) -> str:
    return f"${x:,.2f}" if x < 100 else f"${x:,.0f}"


def _outcome(row: pd.Series, level: float) -> str:
    pct = f"{level:.0%}"
    return (f"{_hours(row['time_h'])} (up to {_hours(row['time_hi_h'])} at {pct}) and "
            f"{_money(row['cost_usd'])} (up to {_money(row['cost_hi_usd'])})")


def _breakdown(row: pd.Series, job: Job) -> str:
    overlap = row["compute_s"] + row["sync_s"] - row["step_time_s"]
    parts = [f"a step takes {row['step_time_s'] * 1000:.3g} ms: compute "
             f"{row['compute_s'] * 1000:.3g} ms, gradient all-reduce {row['sync_s'] * 1000:.3g} ms"
             + (f" ({overlap * 1000:.3g} ms of it hidden under compute)" if overlap > 1e-9 else "")]
    if job.noise_scale is not None:
        parts.append(f"statistical efficiency {row['efficiency']:.2f} at global batch "
                     f"{row['global_bsz']} (noise scale {job.noise_scale:g}), "
                     f"{row['steps']:,.0f} steps to the target")
    else:
        parts.append(f"{row['steps']:,.0f} steps at global batch {row['global_bsz']} "
                     "(no noise scale given: perfect scaling with batch assumed)")
    if row["pricing"] == "spot":
        parts.append(f"spot reclaims add {_hours(row['spot_overhead_h'])} on average "
                     f"({row['expected_reclaims']:.2g} reclaims expected)")
    return "; ".join(parts)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _cheapest_per_hour(c: cand.Candidates, pick: int) -> int | None:
    """The cheapest-per-hour single-type cluster with as many GPUs as the pick, same pricing.

    That is what a tool picking the lowest hourly price for a resource request would rent;
    it gets its own best batch (lowest cost upper end). None if the pick is that cluster.
    """
    single = c["type2"] < 0
    same = single & (c["workers"] == c["workers"][pick] + c["workers2"][pick]) & (
        c["spot"] == c["spot"][pick])
    if not same.any():
        same = single & (c["spot"] == c["spot"][pick])
    pool = np.flatnonzero(same)
    hourly = c["usd_per_hr"][pool]
    cheapest = pool[hourly <= hourly.min() * (1 + 1e-9)]
    best = int(cheapest[np.argmin(c["cost_hi_usd"][cheapest])])
    same_cluster = all(c[k][best] == c[k][pick] for k in ("type", "nodes", "type2"))
    return None if same_cluster else best


def explain_pick(c: cand.Candidates, pick: int, job: Job, constraints: Constraints,
                 objective: str) -> str:
    """Why the pick: its outcome, its time breakdown, and the cheapest-per-hour comparison."""
    level = constraints.confidence
    rows = cand.to_frame(c, np.array([pick]))
    p = rows.iloc[0]
    lines = [f"Pick ({objective}): {describe(p)} at {_money(p['usd_per_hr'])}/h finishes in "
             f"{_outcome(p, level)}.",
             _sentence(_breakdown(p, job))]
    alt = _cheapest_per_hour(c, pick)
    if alt is None:
        lines.append("It is also the cheapest cluster per hour with this many GPUs.")
        return "\n".join(lines)
    a = cand.to_frame(c, np.array([alt])).iloc[0]
    pct = f"{level:.0%}"
    hourly = p["usd_per_hr"] / a["usd_per_hr"]
    speed = a["time_hi_h"] / p["time_hi_h"]
    bound = a["cost_hi_usd"] / p["cost_hi_usd"]
    mean = a["cost_usd"] / p["cost_usd"]
    misses = []
    if constraints.deadline_h is not None and a["time_hi_h"] > constraints.deadline_h:
        misses.append(f"misses the {constraints.deadline_h:g} h deadline")
    if constraints.budget_usd is not None and a["cost_hi_usd"] > constraints.budget_usd:
        misses.append(f"breaks the {_money(constraints.budget_usd)} budget")
    head = (f"Why not the cheapest per hour? {describe(a)} rents for "
            f"{_money(a['usd_per_hr'])}/h (the pick costs {hourly:.2g}x more per hour) and would "
            f"take {_outcome(a, level)} to finish; the pick is {speed:.2g}x faster at {pct}")
    if bound > 1 and mean > 1:
        verdict = f"so it costs {bound:.2g}x the pick's cost to finish ({mean:.2g}x expected)"
    elif bound > 1:
        verdict = (f"so it costs less on average but up to {bound:.2g}x the pick's cost at "
                   f"{pct}: its prediction is less certain")
    else:
        verdict = f"though it is {1 / bound:.2g}x cheaper to finish even at {pct}"
    tail = f", and it {' and '.join(misses)}" if misses else ""
    if bound <= 1 and not misses:
        tail += f"; the pick wins on the objective '{objective}'"
    lines.append(f"{head}, {verdict}{tail}.")
    return "\n".join(lines)


def infeasible(c: cand.Candidates, job: Job, constraints: Constraints
               ) -> tuple[str, pd.Series | None]:
    """Which constraint binds, and the nearest configuration that would satisfy a relaxed one."""
    level = f"{constraints.confidence:.0%}"
    if len(c) == 0:
        why = "; ".join(f"{t}: {r}" for t, r in list(c.skipped.items())[:5])
        return ("No configuration to evaluate: no instance type passes the filters"
                + (f" ({why})" if why else "") + ". Widen families, instance types or memory.",
                None)
    t, k = c["time_hi_h"], c["cost_hi_usd"]
    deadline, budget = constraints.deadline_h, constraints.budget_usd
    time_ok = t <= deadline if deadline is not None else np.ones(len(c), bool)
    cost_ok = k <= budget if budget is not None else np.ones(len(c), bool)
    if not time_ok.any():
        i = int(np.argmin(t))
        binds = (f"the deadline binds: no configuration finishes within {deadline:g} h at "
                 f"{level} confidence")
    elif not cost_ok.any():
        i = int(np.argmin(k))
        binds = (f"the budget binds: no configuration finishes under {_money(budget)} at "
                 f"{level} confidence")
    else:
        i = int(np.argmin(np.maximum(t / deadline, k / budget)))
        binds = (f"the deadline and the budget bind together: each alone can be met, not both "
                 f"at {level} confidence")
    row = cand.to_frame(c, np.array([i])).iloc[0]
    needs = _outcome(row, constraints.confidence)
    text = f"Infeasible: {binds}. Nearest: {describe(row)} needs {needs}."
    point_ok = (deadline is None or row["time_h"] <= deadline) and (
        budget is None or row["cost_usd"] <= budget)
    if point_ok:
        text += (" Its point estimate meets the constraints: a lower confidence, or measuring "
                 "this configuration to narrow its interval, may make it feasible.")
    return text, row
