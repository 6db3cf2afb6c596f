"""Why a search picked what it picked, as data; the words are rendered from the data.

``explain`` returns an ``Explanation``: the pick, the cheapest-per-hour cluster it is compared
with and the ratios between them, or, when nothing is feasible, which constraint binds and the
nearest configuration. ``Explanation.text()`` renders it for people; programs (tests, widgets)
read the fields.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from srifty_kit.decide import candidates as cand
from srifty_kit.errors import counted, duration, hours, ratio_said

if TYPE_CHECKING:  # pragma: no cover
    from srifty_kit.decide.job import Constraints, Job


def config_phrase(row: pd.Series) -> str:
    """'2 x g5.12xlarge (8 workers x batch 32), on-demand' — a configuration in one phrase."""
    text = f"{row['num_nodes']} x {row['instance_type']}"
    if isinstance(row.get("instance_type_2"), str):
        text += f" + {row['num_nodes_2']} x {row['instance_type_2']}"
        batch = (
            f"{_workers(row['num_workers'])} x batch {row['local_bsz']} + "
            f"{row['num_workers_2']} x {row['local_bsz_2']}"
        )
    else:
        batch = f"{_workers(row['num_workers'])} x batch {row['local_bsz']}"
    return f"{text} ({batch}), {row['pricing']}"


def _workers(n: int) -> str:
    return f"{n} worker" + ("" if n == 1 else "s")


def money(x: float) -> str:
    """Dollars as a report shows them: cents below $100, whole dollars above, and two
    significant digits below a cent ("$0.0001", never "$0.00" for an amount that is not 0)."""
    if 0 < abs(x) < 0.005:
        return f"${x:.2g}"
    return f"${x:,.2f}" if x < 100 else f"${x:,.0f}"


def money_apart(a: float, b: float) -> tuple[str, str]:
    """Two amounts as ``money`` shows them, or, where they would read the same but differ
    (a probe's $0.04 against its expected saving of $0.04), each with one more digit until
    they read apart (at most four decimals): a sentence that weighs one against the other
    must not show them equal.

    Args:
        a, b: dollars.

    Returns:
        The two amounts in words.
    """
    said = money(a), money(b)
    if said[0] != said[1] or a == b:
        return said
    for digits in (3, 4):
        said = f"${a:,.{digits}f}", f"${b:,.{digits}f}"
        if said[0] != said[1]:
            break
    return said


def _alike(ratio: float) -> bool:
    """Within 2% either way: '1x' would say nothing, '1.01x' more than a prediction knows."""
    return abs(np.log(ratio)) < np.log(1.02)


def _times(ratio: float) -> str:
    """How much faster, in words: '1.3x faster', '2x slower', or 'about as fast' (``_alike``)."""
    if _alike(ratio):
        return "about as fast"
    return f"{ratio_said(ratio)}x faster" if ratio > 1 else f"{ratio_said(1 / ratio)}x slower"


def _as_much(ratio: float) -> str:
    """A cost ratio in words: '1.3x as much', '0.77x as much', or 'about as much'."""
    return "about as much" if _alike(ratio) else f"{ratio_said(ratio)}x as much"


def _runs_under(level: float) -> str:
    """The share of runs a quantile at ``level`` bounds, in words: 'half of runs', '80% of runs'."""
    return "half of runs" if round(level, 6) == 0.5 else f"{level:.0%} of runs"


def _reads_below(lead: float, bound: float, said: Callable[[float], str]) -> bool:
    """Whether the bound at the confidence, as printed, reads below the figure it follows.

    A wide belief (a type never measured, a spot run's reclaims) skews the run's outcomes up:
    their mean then lies above their median, and at a confidence near 50% above the quantile
    too. "expected $1,036 (up to $435 at 50%)" is right, but reads as a bug.
    """
    return bound < lead and said(bound) != said(lead)


def _outcome(row: pd.Series, level: float) -> str:
    """Time and cost to finish: the cost is the expected one (``cost_mean_usd``, the mean over
    the model's belief, what the cost objective ranks by), with its upper end and, labelled,
    the central estimate (``cost_usd``, what a run at the believed median step costs). Where
    the end at the confidence reads below the figure it follows (``_reads_below``), it is said
    as the share of runs under it, and, where the gap is more than 2%, the expectation as
    skewed up by a wide belief."""
    pct = f"{level:.0%}"
    t, t_hi = row["time_h"], row["time_hi_h"]
    if _reads_below(t, t_hi, hours):
        when = f"{hours(t)} ({_runs_under(level)} finish within {hours(t_hi)})"
    else:
        when = f"{hours(t)} (up to {hours(t_hi)} at {pct})"
    mean, bound, central = row["cost_mean_usd"], row["cost_hi_usd"], row["cost_usd"]
    if not _reads_below(mean, bound, money):
        return (
            f"{when} for an expected {money(mean)} (up to {money(bound)} at {pct}; "
            f"central estimate {money(central)})"
        )
    # the skew is named only where it is more than a hair (``_alike``)
    why = "" if _alike(mean / bound) else "skewed up by a wide belief: "
    tail = (
        ", the central estimate"
        if money(central) == money(bound)
        else f"; central estimate {money(central)}"
    )
    cost = f"expected {money(mean)} ({why}{_runs_under(level)} cost under {money(bound)}{tail})"
    return f"{when} for an {cost}"


def _breakdown(row: pd.Series, job: Job) -> str:
    overlap = row["compute_s"] + row["sync_s"] - row["step_time_s"]
    parts = [
        f"a step takes {duration(row['step_time_s'])}: compute "
        f"{duration(row['compute_s'])}, gradient all-reduce {duration(row['sync_s'])}"
        + (f" ({duration(overlap)} of it hidden under compute)" if overlap > 1e-9 else "")
    ]
    if job.noise_scale is not None:
        # the efficiency is against the reference batch (Pollux's), the one the steps come
        # from: steps x global batch x efficiency is the job's samples
        parts.append(
            f"statistical efficiency {row['efficiency']:.3g} at global batch "
            f"{row['global_bsz']} against the reference batch {job.reference_bsz:g} "
            f"(noise scale {job.noise_scale:g}), {row['steps']:,.0f} steps to the target"
        )
    else:
        parts.append(
            f"{row['steps']:,.0f} steps at global batch {row['global_bsz']} "
            "(no noise scale given: perfect scaling with batch assumed)"
        )
    if row["pricing"] == "spot":
        parts.append(
            f"spot reclaims add {hours(row['spot_overhead_h'])} on average "
            f"({row['expected_reclaims']:.2g} reclaims expected)"
        )
    return "; ".join(parts)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _cheapest_per_hour(c: cand.Candidates, pick: int) -> int | None:
    """The cheapest-per-hour single-type cluster with as many GPUs as the pick, same pricing.

    That is what a tool picking the lowest hourly price for a resource request would rent;
    it gets its own best batch (lowest cost upper end). None if the pick is that cluster.
    """
    single = c["type2"] < 0
    same = (
        single
        & (c["workers"] == c["workers"][pick] + c["workers2"][pick])
        & (c["spot"] == c["spot"][pick])
    )
    if not same.any():
        same = single & (c["spot"] == c["spot"][pick])
    pool = np.flatnonzero(same)
    hourly = c["usd_per_hr"][pool]
    cheapest = pool[hourly <= hourly.min() * (1 + 1e-9)]
    best = int(cheapest[np.argmin(c["cost_hi_usd"][cheapest])])
    same_cluster = all(c[k][best] == c[k][pick] for k in ("type", "nodes", "type2"))
    return None if same_cluster else best


@dataclass(frozen=True)
class Explanation:
    """Why a search result is what it is.

    Feasible results fill ``pick`` and, unless the pick is itself the cheapest cluster per
    hour with as many GPUs, ``cheapest_per_hour`` with the ratios to it. Infeasible results
    fill ``binding`` and ``nearest``.
    """

    objective: str
    level: float  # the confidence the upper ends are taken at
    job: Job = field(repr=False)
    deadline_h: float | None = None
    budget_usd: float | None = None
    pick: pd.Series | None = None
    cheapest_per_hour: pd.Series | None = None
    # the cheapest-per-hour cluster against the pick: its hourly price is 1/hourly_ratio of
    # the pick's; the pick finishes speedup x sooner (upper ends); cost ratios alt / pick, of
    # the upper ends (cost_hi_ratio) and of the expected costs (cost_ratio: cost_mean_usd)
    hourly_ratio: float = float("nan")
    speedup: float = float("nan")
    cost_hi_ratio: float = float("nan")
    cost_ratio: float = float("nan")
    alternative_misses: tuple[str, ...] = ()  # "deadline" / "budget" the alternative breaks
    # infeasible: "deadline", "budget", "deadline+budget", or "filters" (nothing to evaluate)
    binding: str | None = None
    nearest: pd.Series | None = None
    nearest_point_meets: bool = False  # its point estimate meets the constraints
    filtered_out: dict[str, str] = field(default_factory=dict)
    types_left: int = 0  # "filters": instance types that passed them (the job left none)

    @property
    def feasible(self) -> bool:
        """Whether a configuration meets the constraints."""
        return self.pick is not None

    @property
    def nearest_misses(self) -> tuple[str, ...]:
        """The constraints ("deadline", "budget") the nearest configuration breaks at the
        confidence (its ``time_hi_h``, its ``cost_hi_usd``); () when there is none."""
        row = self.nearest
        if row is None:
            return ()
        return tuple(
            name
            for name, bound, end in (
                ("deadline", self.deadline_h, "time_hi_h"),
                ("budget", self.budget_usd, "cost_hi_usd"),
            )
            if bound is not None and row[end] > bound
        )

    def text(self) -> str:
        """The explanation in sentences."""
        return _render_pick(self) if self.feasible else _render_infeasible(self)

    def __str__(self) -> str:
        return self.text()


def explain(
    c: cand.Candidates,
    pick: int | None,
    job: Job,
    constraints: Constraints,
    objective: str,
) -> Explanation:
    """Why candidate ``pick`` wins, or (``pick`` None) why nothing is feasible.

    Args:
        c: the evaluated candidates.
        pick: the position of the recommended candidate, or None when none is feasible.
        job, constraints, objective: what the search was asked.

    Returns:
        The ``Explanation``.
    """
    common = {
        "objective": objective,
        "level": constraints.confidence,
        "job": job,
        "deadline_h": constraints.deadline_h,
        "budget_usd": constraints.budget_usd,
    }
    if pick is None:
        return _infeasible(c, constraints, common)
    p = cand.to_frame(c, np.array([pick])).iloc[0]
    alt = _cheapest_per_hour(c, pick)
    if alt is None:
        return Explanation(pick=p, **common)
    a = cand.to_frame(c, np.array([alt])).iloc[0]
    misses = []
    if constraints.deadline_h is not None and a["time_hi_h"] > constraints.deadline_h:
        misses.append("deadline")
    if constraints.budget_usd is not None and a["cost_hi_usd"] > constraints.budget_usd:
        misses.append("budget")
    return Explanation(
        pick=p,
        cheapest_per_hour=a,
        hourly_ratio=float(p["usd_per_hr"] / a["usd_per_hr"]),
        speedup=float(a["time_hi_h"] / p["time_hi_h"]),
        cost_hi_ratio=float(a["cost_hi_usd"] / p["cost_hi_usd"]),
        cost_ratio=float(a["cost_mean_usd"] / p["cost_mean_usd"]),
        alternative_misses=tuple(misses),
        **common,
    )


def _left_out_types(skipped: dict[str, str]) -> set[str]:
    """The instance types ``skipped`` names, by themselves or by a listed cluster of them
    ("2 x g4dn.12xlarge")."""
    return {key.split(" x ", 1)[-1] for key in skipped}


def _infeasible(c: cand.Candidates, constraints: Constraints, common: dict) -> Explanation:
    """Which constraint binds, and the nearest configuration that would satisfy a relaxed one."""
    if len(c) == 0:
        return Explanation(
            binding="filters",
            filtered_out=dict(c.skipped),
            # types the model could not predict were left out too, and a listed type whose
            # clusters the node limit or the quota left out ("2 x g4dn.12xlarge"): only the
            # others count
            types_left=len(set(map(str, c.types.names)) - _left_out_types(c.skipped)),
            **common,
        )
    t, k = c["time_hi_h"], c["cost_hi_usd"]
    deadline, budget = constraints.deadline_h, constraints.budget_usd
    time_ok = t <= deadline if deadline is not None else np.ones(len(c), bool)
    cost_ok = k <= budget if budget is not None else np.ones(len(c), bool)
    if not time_ok.any():
        binding, i = "deadline", int(np.argmin(t))
    elif not cost_ok.any():
        binding, i = "budget", int(np.argmin(k))
    else:
        binding, i = "deadline+budget", int(np.argmin(np.maximum(t / deadline, k / budget)))
    row = cand.to_frame(c, np.array([i])).iloc[0]
    point_ok = (deadline is None or row["time_h"] <= deadline) and (
        budget is None or row["cost_usd"] <= budget
    )
    return Explanation(binding=binding, nearest=row, nearest_point_meets=bool(point_ok), **common)


def _render_pick(e: Explanation) -> str:
    p, level = e.pick, e.level
    lines = [
        f"Pick ({e.objective}): {config_phrase(p)} at {money(p['usd_per_hr'])}/h finishes in "
        f"{_outcome(p, level)}.",
        _sentence(_breakdown(p, e.job)),
    ]
    a = e.cheapest_per_hour
    if a is None:
        lines.append("It is also the cheapest cluster per hour with this many GPUs.")
        return "\n".join(lines)
    pct = f"{level:.0%}"
    bound, mean = e.cost_hi_ratio, e.cost_ratio
    misses = [_misses(e, m) for m in e.alternative_misses]
    head = (
        f"Why not the cheapest per hour? {config_phrase(a)} rents for "
        f"{money(a['usd_per_hr'])}/h (the pick costs {_as_much(e.hourly_ratio)} per hour) and "
        f"would take {_outcome(a, level)} to finish; the pick is {_times(e.speedup)} at {pct}"
    )
    if bound > 1 and mean > 1:
        verdict = f"so it costs {_as_much(bound)} as the pick to finish ({_as_much(mean)} expected)"
    elif bound > 1:
        verdict = (
            f"so it costs less on average but up to {_as_much(bound)} as the pick at {pct}: "
            "its prediction is less certain"
        )
    elif mean > 1:  # the pick is ranked by the expected cost, which the bound does not say
        verdict = (
            f"so it costs more on average ({_as_much(mean)} as the pick expected), though "
            f"{_as_much(bound)} at {pct}: its prediction is less certain"
        )
    else:
        verdict = f"though it costs {_as_much(bound)} as the pick to finish even at {pct}"
    tail = f", and it {' and '.join(misses)}" if misses else ""
    if bound <= 1 and not misses:
        tail += f"; the pick wins on the objective '{e.objective}'"
    lines.append(f"{head}, {verdict}{tail}.")
    return "\n".join(lines)


def _misses(e: Explanation, constraint: str) -> str:
    """'misses the 24 h deadline' or 'breaks the $50.00 budget'."""
    if constraint == "deadline":
        return f"misses the {e.deadline_h:g} h deadline"
    return f"breaks the {money(e.budget_usd)} budget"


def _nearest_verdict(e: Explanation) -> str:
    """Every constraint the nearest configuration breaks at the confidence, by how much, and
    the one it meets: a budget that binds may hide that the cheapest also misses the deadline."""
    row, misses = e.nearest, e.nearest_misses
    if not misses:  # each end within its bound, not both together
        return ""
    by = {
        "deadline": hours(row["time_hi_h"] - (e.deadline_h or 0.0)),
        "budget": money(row["cost_hi_usd"] - (e.budget_usd or 0.0)),
    }
    said = " and ".join(f"{_misses(e, m)} by {by[m]}" for m in misses)
    kept = [
        f"meets the {e.deadline_h:g} h deadline"
        if name == "deadline"
        else f"stays within the {money(e.budget_usd)} budget"
        for name, bound in (("deadline", e.deadline_h), ("budget", e.budget_usd))
        if bound is not None and name not in misses
    ]
    return f" At {e.level:.0%} it {said}" + (f" but {kept[0]}" if kept else "") + "."


def _render_infeasible(e: Explanation) -> str:
    level = f"{e.level:.0%}"
    if e.binding == "filters" and e.types_left:
        # types passed, yet the job's own bounds left none of their clusters: widening the
        # type filters (what the message below says) would change nothing
        job = e.job
        batches = (
            f"global batch {job.global_bsz_min}..{job.global_bsz_max or 'any'}, local "
            f"batches {', '.join(map(str, job.local_bsz)) if job.local_bsz else '1..1024'}"
        )
        return (
            f"No configuration to evaluate: {counted(e.types_left, 'instance type')} "
            f"{'passes' if e.types_left == 1 else 'pass'} the filters, but none of their "
            f"clusters fits the job ({batches}, within GPU memory and the node limit). Widen "
            "the job's global_bsz_min/global_bsz_max or local_bsz, or its memory figures."
        )
    if e.binding == "filters":
        # one count per reason (the part before any parenthesis), most common first
        kinds = Counter(r.split(" (")[0] for r in e.filtered_out.values())
        why = "; ".join(f"{n} {reason}" for reason, n in kinds.most_common())
        widen = "families, instance types, memory or the vCPU quota"
        if any(r.startswith("over the node limit") for r in kinds):  # a listed cluster's
            widen = "families, instance types, memory, the vCPU quota or the node limit"
        return (
            "No configuration to evaluate: no instance type passes the filters"
            + (f" ({why})" if why else "")
            + f". Widen {widen}."
        )
    if e.binding == "deadline":
        binds = (
            f"the deadline binds: no configuration finishes within {e.deadline_h:g} h "
            f"at {level} confidence"
        )
    elif e.binding == "budget":
        binds = (
            f"the budget binds: no configuration finishes under {money(e.budget_usd)} "
            f"at {level} confidence"
        )
    else:
        binds = (
            "the deadline and the budget bind together: each alone can be met, "
            f"not both at {level} confidence"
        )
    needs = _outcome(e.nearest, e.level)
    text = f"Infeasible: {binds}. Nearest: {config_phrase(e.nearest)} needs {needs}."
    text += _nearest_verdict(e)
    if e.nearest_point_meets:
        text += (
            " Its point estimate meets the constraints: a lower confidence, or measuring "
            "this configuration to narrow its interval, may make it feasible."
        )
    return text
