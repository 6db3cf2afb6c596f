"""Search EC2 configurations for a training job under a deadline and budget at a stated confidence.

``search(model, catalog, Job(...), Constraints(...))`` enumerates every candidate
(``candidates``), or takes the list given, and keeps those whose probability of meeting the
deadline and budget is at least the confidence under the model's joint belief
(``model.posterior``; P is exact under it, ``candidates.meet_probability``), ranks them by the
objective in the coordinates of the Pareto front (``_rank``), and returns the ranked table, the
front of the time at the confidence and the expected cost (``pareto.FRONT_TIME``,
``FRONT_COST``: every objective's pick is a point of it; as shown, without the points less
than 3% faster than a cheaper one shown, the knee and the pick always:
``pareto.distinct_mask``), its knee, the pick, and why the pick beats the
cheapest instance per hour. Infeasible constraints give an empty result that says which constraint
binds and the nearest feasible point; they never raise.

``search`` is ``select(evaluate(...))``: ``evaluate`` does the expensive half once (every
candidate predicted with its belief and priced), ``select`` re-filters and re-ranks those
arrays for another deadline, budget, objective or lower node limit — what an interactive panel
calls on each move; ``Evaluated.at`` prices the same predictions for another confidence, spot
choice or amount of work without predicting them again.

On the level: a deadline "at confidence 0.9" means P(time <= deadline) >= 0.9 for the run's
mean step; ``time_hi_h`` is that one-sided 90% quantile, so ``time_hi_h <= deadline`` is the
same test. A run's step noise averages out over the run; the belief's spread is what the
model does not know about the configuration, plus run-to-run noise."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from srifty_kit.decide import candidates as cand
from srifty_kit.decide import hetero, spot
from srifty_kit.decide.explanation import Explanation, explain
from srifty_kit.decide.job import Constraints, Job
from srifty_kit.decide.pareto import (
    FRONT_COST,
    FRONT_TIME,
    distinct_mask,
    knee_index,
    knee_score,
    pareto_mask,
)
from srifty_kit.errors import InputError, did_you_mean, is_whole, rows_named, warn
from srifty_kit.tables.contracts import (
    CANDIDATES,
    require_columns,
    row_labels,
    validate_catalog,
)

if TYPE_CHECKING:  # pragma: no cover
    from srifty_kit.model.estimator import StepTimeModel

OBJECTIVES = ("cost", "time", "throughput-per-dollar", "knee")
MIX_POOL = 4  # mixes pair the best few types alone, by cost and by time (up to 2 x this many)


@dataclass
class SearchResult:
    """What ``search`` found: ranked table, Pareto front, knee, pick and the reasoning.

    ``pareto`` is the front as shown (CLI, JSON, panel, report) over the time at the
    confidence and the expected cost (``pareto.FRONT_TIME``, ``FRONT_COST``): fastest first, a
    point only when it is at least ``pareto.FRONT_NOISE`` (3%) faster than the next cheaper one
    shown, the knee and the pick always; ``pareto_all`` is the exact front, every
    non-dominated point. Every objective's pick is a point of both.
    """

    ranked: pd.DataFrame
    pareto: pd.DataFrame
    knee: pd.Series | None
    pick: pd.Series | None
    why: Explanation  # the reasons as data; ``explanation`` is their text
    # instance type (or a listed cluster, "16 x g4dn.12xlarge") -> why left out
    skipped: dict[str, str] = field(default_factory=dict)
    n_candidates: int = 0
    n_feasible: int = 0
    candidates: cand.Candidates | None = field(default=None, repr=False)
    feasible_mask: np.ndarray | None = field(default=None, repr=False)
    job: Job | None = field(default=None, repr=False)
    model: StepTimeModel | None = field(default=None, repr=False)
    catalog: pd.DataFrame | None = field(default=None, repr=False)
    constraints: Constraints | None = field(default=None, repr=False)
    pareto_all: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def feasible(self) -> bool:
        """Whether any configuration meets the constraints."""
        return self.pick is not None

    @property
    def explanation(self) -> str:
        """Why the pick (or why nothing is feasible), in sentences."""
        return self.why.text()

    @property
    def infeasible_reason(self) -> str | None:
        """The explanation when nothing is feasible, else None."""
        return None if self.feasible else self.why.text()

    @property
    def nearest(self) -> pd.Series | None:
        """The configuration closest to feasible when nothing is feasible, else None."""
        return self.why.nearest

    def sample(self, n: int = 5000, seed: int = 0) -> pd.DataFrame:
        """Up to ``n`` evaluated candidates (feasible or not) for cost-time plots."""
        if self.candidates is None:
            return pd.DataFrame(columns=list(cand.RESULT_COLUMNS))
        rng = np.random.default_rng(seed)
        size = len(self.candidates)
        idx = np.sort(rng.choice(size, min(n, size), replace=False))
        out = cand.to_frame(self.candidates, idx)
        out["feasible"] = self.feasible_mask[idx]
        return out

    def spot_runs(
        self, row: pd.Series | None = None, runs: int = 10_000, seed: int = 0
    ) -> pd.DataFrame:
        """Monte Carlo of ``runs`` spot runs of a result row (default: the pick): the
        distribution of its time and cost to finish (``spot.simulate``)."""
        row = self.pick if row is None else row
        if row is None or row["pricing"] != "spot":
            raise InputError(
                "spot runs need a spot configuration",
                fix="pass a row whose pricing is 'spot' (search with spot=True)",
            )
        types = self.candidates.types
        mixed = isinstance(row.get("instance_type_2"), str)
        cfg = {
            "type": np.array([_position(types, row, "instance_type")]),
            "nodes": np.array([row["num_nodes"]]),
            "type2": np.array([_position(types, row, "instance_type_2") if mixed else -1]),
            "nodes2": np.array([row["num_nodes_2"] if mixed else 0]),
        }

        def cluster(per_node: np.ndarray) -> float:
            return float(cand.per_cluster(cfg, per_node)[0])

        work_h = float(row["time_h"] - row["spot_overhead_h"])
        return spot.simulate(
            work_h,
            cluster(types.hazard),
            self.job.spot_policy,
            float(row["usd_per_hr"]),
            cluster(types.ondemand),
            runs,
            seed,
        )

    def controller_trace(
        self,
        row: pd.Series | None = None,
        steps: int = 30,
        deadband: float = 0.05,
        noise: float = 0.0,
    ) -> pd.DataFrame:
        """OmniLearn's controller on a two-type row (default: the pick), from an even split of
        its global batch, with each worker's compute line from the model (hetero)."""
        row = self.pick if row is None else row
        if row is None or not isinstance(row.get("instance_type_2"), str):
            raise InputError(
                "the controller needs a mix of two instance types",
                fix="pass a row with instance_type_2 (search with mixes=True)",
            )
        types = self.candidates.types
        which = np.array(
            [_position(types, row, "instance_type"), _position(types, row, "instance_type_2")]
        )
        alpha, beta = cand.compute_lines(self.model, self.job, types, which, self.catalog)
        counts = [int(row["num_workers"]), int(row["num_workers_2"])]
        return hetero.simulate_controller(
            np.repeat(alpha[which], counts),
            np.repeat(beta[which], counts),
            int(row["global_bsz"]),
            steps=steps,
            deadband=deadband,
            noise=noise,
        )


def _position(types: cand.Types, row: pd.Series, column: str) -> int:
    """Where a result row's instance type (in its region) sits in the searched types."""
    hit = (types.names == row[column]) & (types.region == row["region"])
    return int(np.flatnonzero(hit)[0])


def _empty(c: cand.Candidates) -> cand.Candidates:
    return c.take(np.zeros(0, np.int64))


def _select_types(catalog: pd.DataFrame, constraints: Constraints) -> tuple[pd.DataFrame, dict]:
    """Catalog rows allowed by the constraints; unknown names are InputErrors."""
    from srifty_kit.catalog.query import filter_catalog, lookup, offered

    skipped: dict[str, str] = {}
    rows = catalog
    if constraints.regions is not None:
        regions = sorted(rows["region"].astype(str).unique())
        for r in constraints.regions:
            if r not in regions:
                raise InputError(
                    f"region {r!r} is not in the catalog{did_you_mean(r, regions)}",
                    column="region",
                    fix="use one of " + ", ".join(regions),
                )
        rows = rows[rows["region"].isin(constraints.regions)]
    if constraints.families is not None:
        rows = filter_catalog(rows, family=list(constraints.families))
    named = constraints.instance_types is not None
    if named:
        lookup(
            rows.drop_duplicates("instance_type"),
            list(constraints.instance_types),
            ["instance_type"],
        )
        rows = rows[rows["instance_type"].isin(constraints.instance_types)]
    gpus = pd.to_numeric(rows["gpu_count"], errors="coerce").fillna(0)
    for t in rows.loc[gpus <= 0, "instance_type"] if named else ():
        skipped[str(t)] = "no GPU: data-parallel GPU training cannot run there"
    rows = rows[gpus > 0]
    if not named and "accelerator_kind" in rows:
        other = rows["accelerator_kind"].fillna("GPU").astype(str) != "GPU"
        for t in rows.loc[other, "instance_type"]:
            skipped[str(t)] = "not a GPU (a CUDA profile does not carry over); name it to include"
        rows = rows[~other]
    if not named and "offered_in_region" in rows:
        gone = ~offered(rows)
        for t in rows.loc[gone, "instance_type"]:
            skipped[str(t)] = "not offered in the region any more; name it to include"
        rows = rows[~gone]
    if constraints.min_gpu_memory_gib is not None:
        least = constraints.min_gpu_memory_gib
        mem = pd.to_numeric(rows["gpu_memory_gib"], errors="coerce")
        small = ~(mem >= least).to_numpy()  # unknown memory is not enough either
        for t, m in zip(rows.loc[small, "instance_type"], mem[small], strict=True):
            has = "unknown" if np.isnan(m) else f"{m:g} GiB"
            skipped[str(t)] = f"GPU memory under {least:g} GiB (one GPU has {has})"
        rows = rows[~small]
    if constraints.vcpu_quota is not None:
        vcpus = pd.to_numeric(rows["vcpus"], errors="coerce")
        over = (vcpus > constraints.vcpu_quota).to_numpy()
        for t, v in zip(rows.loc[over, "instance_type"], vcpus[over], strict=True):
            quota = constraints.vcpu_quota
            skipped[str(t)] = f"over the vCPU quota of {quota} (one node has {int(v)} vCPUs)"
        rows = rows[~over]
    priced = pd.to_numeric(rows["ondemand_usd_per_hr"], errors="coerce") > 0  # 0: unknown
    for t in rows.loc[~priced, "instance_type"]:
        skipped[str(t)] = "no on-demand price in the catalog (a price of 0 is taken as none)"
    return rows[priced].reset_index(drop=True), skipped


PRICINGS = ("on-demand", "spot")


# what makes two candidates one configuration (gpus_per_node follows from the type)
_SAME = ("instance_type", "num_nodes", "num_workers", "local_bsz", "pricing")


def unique_candidates(table: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """A candidates table with each configuration once, and a note naming the rows dropped
    ("" when none): a row repeating an earlier configuration (same instance type, nodes,
    workers, local batch and pricing; 32 and 32.0 are one batch, spaces around a name and the
    case of a pricing do not count) would be ranked twice.

    Args:
        table: the candidates as read (rows named as ``tables.contracts.row_labels`` and
            ``errors.rows_named`` do: a CSV's line numbers, a Parquet or JSON file's rows
            said to be counted from 0, a DataFrame's own index labels).

    Returns:
        (the table without the repeats, its ``attrs`` kept; the note).
    """
    key = pd.DataFrame(index=table.index)
    for col in (c for c in _SAME if c in table):
        values = table[col]
        if col in ("instance_type", "pricing"):
            text = values.astype("string").str.strip()
            key[col] = text.str.lower() if col == "pricing" else text
        else:  # text the contract will refuse stays as it is
            number = pd.to_numeric(values, errors="coerce")
            key[col] = number.astype(object).where(number.notna(), values)
    repeated = key.astype(str).duplicated().to_numpy()
    if not repeated.any():
        return table, ""
    lines = row_labels(table, repeated)
    source = table.attrs.get("source", "candidates")
    note = (
        f"{source}: dropped {len(lines)} "
        f"row{'s' if len(lines) > 1 else ''} repeating a configuration listed before "
        f"({rows_named(lines, source=source)}): each configuration is ranked once"
    )
    out = table[~repeated].reset_index(drop=True)
    out.attrs = dict(table.attrs)
    return out, note


def _refuse_types_without_gpus(table: pd.DataFrame, catalog: pd.DataFrame, source: str) -> None:
    """Refuse the first listed type the catalog knows with no GPU (a c5.xlarge), naming the
    GPU types to list instead: a GPU type of its family or size when one is alike (did you
    mean), else the nearest GPU names. Before, it was filled with 0 GPUs per node and refused
    as "more workers than num_nodes x gpus_per_node can hold", which hides the cause."""
    import difflib

    from srifty_kit.catalog.query import instance_family

    every = catalog.drop_duplicates("instance_type")
    count = pd.to_numeric(every["gpu_count"], errors="coerce")
    kind = (
        every["accelerator_kind"].fillna("GPU").astype(str)
        if "accelerator_kind" in every
        else pd.Series("GPU", index=every.index)
    )
    gpu = sorted(every.loc[(count > 0) & (kind == "GPU"), "instance_type"].astype(str))
    none = set(every.loc[count == 0, "instance_type"].astype(str))
    names = table["instance_type"].astype("string").str.strip()
    bad = names.isin(none).fillna(False).to_numpy()
    if not bad.any():
        return
    name = str(names[bad].iloc[0])
    family, size = instance_family(pd.Series([name])).iloc[0], name.partition(".")[2]
    alike = [t for t in gpu if t.startswith(f"{family}.") or t.partition(".")[2] == size]
    hint = did_you_mean(name, alike)
    if hint:
        fix = f"list a GPU instance type{hint}"
    else:
        nearest = difflib.get_close_matches(name, gpu, n=3, cutoff=0)
        fix = "list a GPU instance type, e.g. " + ", ".join(repr(t) for t in nearest)
    raise InputError(
        f"instance type {name!r} has no GPU: data-parallel GPU training cannot run there",
        source=source,
        column="instance_type",
        rows=row_labels(table, (names == name).fillna(False).to_numpy()),
        fix=fix,
    )


def validate_candidates(table: pd.DataFrame, job: Job, catalog: pd.DataFrame) -> pd.DataFrame:
    """Check a candidates table (``design.md``: instance_type, num_nodes, num_workers,
    local_bsz; optional pricing, gpus_per_node) and return it validated, one row each.

    Raises:
        InputError: a missing or bad column, an unknown instance type (with "did you mean"),
            a type the catalog lists without a GPU (with GPU types to list instead), a
            pricing other than on-demand or spot, or an empty table.
    """
    from srifty_kit.tables.contracts import validate_configs

    require_columns(table, CANDIDATES, what="candidates")  # a table, with its columns
    source = table.attrs.get("source", "candidates")
    if table.empty:
        raise InputError("the candidates table has no rows", source=source, fix="list at least one")
    with_model = table.assign(model=job.model)
    known = set(catalog["instance_type"].astype(str))
    for name in (
        with_model["instance_type"].astype(str).unique() if "instance_type" in table else ()
    ):
        if name not in known:
            raise InputError(
                f"instance type {name!r} is not in the catalog{did_you_mean(name, sorted(known))}",
                source=source,
                column="instance_type",
                fix="use a catalog instance type, or pass a catalog that has it (--catalog)",
            )
    _refuse_types_without_gpus(with_model, catalog, source)
    out = validate_configs(with_model, source=source, catalog=catalog)
    if "pricing" in out:
        # an empty cell (the contract allows one) asks for no pricing: as without the column
        text = out["pricing"].astype("string").str.strip().str.lower()
        given = text.fillna("") != ""
        pricing = text.astype(object).where(given, None)
        bad = given & ~pricing.isin(PRICINGS)
        if bad.any():
            raise InputError(
                f"pricing must be on-demand or spot, got {out['pricing'][bad].iloc[0]!r}",
                source=source,
                column="pricing",
                rows=row_labels(out, bad.to_numpy()),
                fix="write on-demand or spot (or leave the column out)",
            )
        out["pricing"] = pricing
    # repeats are dropped only once every row passed: a refusal names the rows of the table
    # as given, and a table refused says nothing of its repeats
    out, note = unique_candidates(out)
    if note:
        warn(note)
    return out.reset_index(drop=True)


def _allowed(
    catalog: pd.DataFrame, constraints: Constraints, listed: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """The listed rows the constraints allow, their types' catalog rows (one each), and why
    each other row was left out: its type (``_select_types``' checks, and the families and
    instance types asked for) or its cluster ("16 x g4dn.12xlarge": more nodes than
    ``max_nodes``, more vCPUs than the quota). A list names its types, so what an enumeration
    leaves out unless named (retired types, other accelerators) is kept."""
    from srifty_kit.catalog.query import filter_catalog, instance_family, lookup

    # a misspelt filter is refused with "did you mean", as an enumeration refuses it
    if constraints.families is not None:
        filter_catalog(catalog, family=list(constraints.families))
    if constraints.instance_types is not None:
        every = catalog.drop_duplicates("instance_type")
        lookup(every, list(constraints.instance_types), ["instance_type"])
    names = listed["instance_type"].astype(str)
    listed_types = pd.Series(names.unique())
    wanted = np.ones(len(listed_types), bool)
    if constraints.instance_types is not None:
        wanted &= listed_types.isin(constraints.instance_types).to_numpy()
    if constraints.families is not None:
        wanted &= instance_family(listed_types).isin(constraints.families).to_numpy()
    skipped = {
        t: "not among the instance types asked for (by name, family or GPU)"
        for t in listed_types[~wanted]
    }
    rows = catalog.iloc[:0]
    if wanted.any():
        named = replace(constraints, instance_types=tuple(listed_types[wanted]), families=None)
        rows, dropped = _select_types(catalog, named)
        skipped.update(dropped)
    rows = rows.drop_duplicates("instance_type").reset_index(drop=True)
    vcpus = names.map(dict(zip(rows["instance_type"], rows["vcpus"], strict=True)))
    nodes = listed["num_nodes"].to_numpy()
    over_nodes = nodes > constraints.max_nodes
    over_quota = np.zeros(len(listed), bool)
    if constraints.vcpu_quota is not None:
        over_quota = nodes * pd.to_numeric(vcpus).to_numpy() > constraints.vcpu_quota
    allowed = names.isin(set(rows["instance_type"])).to_numpy()
    for i in np.flatnonzero(allowed & (over_nodes | over_quota)):
        n, t = int(nodes[i]), names.iloc[i]
        skipped[f"{n} x {t}"] = (
            f"over the node limit of {constraints.max_nodes}"
            if over_nodes[i]
            else f"over the vCPU quota of {constraints.vcpu_quota} "
            f"({n} nodes of {int(vcpus.iloc[i])} vCPUs)"
        )
    keep = allowed & ~over_nodes & ~over_quota
    return listed[keep].reset_index(drop=True), rows, skipped


def _listed(
    model: StepTimeModel,
    catalog: pd.DataFrame,
    job: Job,
    constraints: Constraints,
    listed: pd.DataFrame,
) -> cand.Candidates:
    """The candidates of a given list, predicted and priced (only their own pricing), less
    the rows the constraints rule out (``_allowed``)."""
    listed, rows, skipped = _allowed(catalog, constraints, listed)
    types = cand.Types.from_catalog(rows)
    cfg = cand.from_table(listed, types)
    cfg["row"] = np.arange(len(listed))
    asked = listed["pricing"].to_numpy() if "pricing" in listed else np.full(len(listed), None)
    on_spot = asked == "spot"
    # a spot row of a type without a spot price cannot be priced
    for t in listed["instance_type"][on_spot & np.isnan(types.spot[cfg["type"]])].unique():
        skipped[str(t)] = "no spot price in the catalog for its spot rows"
    cfg = cand.predict(model, job, types, cfg, constraints.confidence, catalog, skipped)
    spot_too = constraints.spot or bool(on_spot.any())
    cols = cand.price(job, replace(constraints, spot=spot_too), types, cfg)
    # a row's own pricing, or without one (no column, an empty cell) the search's: on-demand,
    # and spot too where allowed
    own = asked[cols["row"]]
    keep = np.where(pd.isna(own), constraints.spot | ~cols["spot"], cols["spot"] == (own == "spot"))
    # a row without a pricing beside the same configuration with one asks for it twice
    same = pd.DataFrame({k: cols[k] for k in ("type", "nodes", "workers", "local_bsz", "spot")})
    keep &= ~same[keep].duplicated().reindex(same.index, fill_value=False).to_numpy()
    # the list's own columns ride along; a result column of the same name keeps the result's
    known = {c.name for c in CANDIDATES} | {"model", "placement"} | set(cand.RESULT_COLUMNS)
    extra = listed[[c for c in listed.columns if c not in known]]
    return cand.Candidates({k: v[keep] for k, v in cols.items()}, types, skipped, extra)


def _evaluate(
    model: StepTimeModel,
    catalog: pd.DataFrame,
    job: Job,
    constraints: Constraints,
    listed: pd.DataFrame | None = None,
) -> tuple[cand.Candidates, dict[str, np.ndarray] | None]:
    """The candidates, and the single-type predictions they were priced from where nothing
    else went into them (an enumeration without mixes; else None): ``Evaluated.at``."""
    if listed is not None:
        return _listed(model, catalog, job, constraints, listed), None
    rows, skipped = _select_types(catalog, constraints)
    types = cand.Types.from_catalog(rows)
    level = constraints.confidence
    cfg = cand.enumerate_single(job, constraints, types)
    cfg = cand.predict(model, job, types, cfg, level, catalog, skipped)
    cols = cand.price(job, constraints, types, cfg)
    if not constraints.mixes:
        return cand.Candidates(cols, types, skipped), cfg
    if len(types) > 1 and cols["type"].size:
        pool = _mix_pool(cols)
        mixes = cand.enumerate_mixes(job, constraints, types, pool)
        mixes = cand.split_mixes(model, job, types, mixes, catalog)
        mixes = cand.predict(model, job, types, mixes, level, catalog, skipped)
        more = cand.price(job, constraints, types, mixes)
        cols = {k: np.concatenate([cols[k], more[k]]) for k in cols}
    return cand.Candidates(cols, types, skipped), None


def _mix_pool(cols: dict[str, np.ndarray]) -> np.ndarray:
    """The types that do best alone, by cost upper end and by time upper end."""
    frame = pd.DataFrame(
        {"type": cols["type"], "cost": cols["cost_hi_usd"], "time": cols["time_hi_h"]}
    )
    best = frame.groupby("type").min()
    picks = set(best.nsmallest(MIX_POOL, "cost").index)
    picks |= set(best.nsmallest(MIX_POOL, "time").index)
    return np.array(sorted(picks), dtype=np.int64)


def _feasible(c: cand.Candidates, constraints: Constraints) -> np.ndarray:
    """P(time <= deadline and cost <= budget) >= confidence, under the model's belief; the
    probability is left in the candidates' ``p_meet`` for the rows a user sees."""
    p = cand.meet_probability(c.cols, constraints.deadline_h, constraints.budget_usd)
    c.cols["p_meet"] = p
    # a hair of slack: the quantile ends and the probability are the same number computed
    # two ways, and a pick shown "up to D" must not be refused for a rounding error
    return p >= constraints.confidence - 1e-9


def _rank(
    c: cand.Candidates, idx: np.ndarray, front: np.ndarray, objective: str, top: int
) -> np.ndarray:
    """Positions (into ``idx``) of the best ``top`` candidates for the objective, best first.

    Every objective ranks in the front's coordinates (``FRONT_TIME``, ``FRONT_COST``), so its
    pick is a point of the front it is drawn with: "cost" the least expected cost, "time" the
    least time at the confidence, "knee" the least of the two scaled over the front (what
    ``knee_index`` minimises), "throughput-per-dollar" the most goodput per dollar-hour among
    the front's points (the rest follow). Ties go to the lower expected cost, then the shorter
    time; "cost" ties to the shorter time.
    """
    ft, fk = c[FRONT_TIME][idx], c[FRONT_COST][idx]
    if objective == "cost":
        return _lexsmallest((ft, fk), top)
    if objective == "time":
        return _lexsmallest((fk, ft), top)
    if objective == "throughput-per-dollar":
        # a rate says nothing of the belief's spread or of spot reclaims: only the front's
        # points compete, so a point beaten on both time and expected cost is never picked
        keys = (ft, fk, -c["goodput"][idx] / c["usd_per_hr"][idx])
        on, off = np.flatnonzero(front), np.flatnonzero(~front)
        best = [at[_lexsmallest(tuple(k[at] for k in keys), top)] for at in (on, off)]
        return np.concatenate(best)[:top]
    # knee: t + c scaled over the front (in its coordinates), what the knee minimises
    return _lexsmallest((ft, fk, knee_score(ft, fk, front)), top)


def _lexsmallest(keys: tuple[np.ndarray, ...], top: int) -> np.ndarray:
    """Positions of the ``top`` smallest rows by ``keys`` (the last key first, as
    ``np.lexsort``), best first; only the rows nearest on the last key are sorted."""
    primary = keys[-1]
    m = min(primary.size, max(top * 8, 64))
    near = np.argpartition(primary, m - 1)[:m] if m < primary.size else np.arange(primary.size)
    order = np.lexsort(tuple(x[near] for x in keys))
    return near[order][:top]


def _check_ranking(objective: str, top: int) -> None:
    if not is_whole(top):
        raise InputError(f"top must be a whole number >= 1, got {top!r}", fix="e.g. 10")
    if objective not in OBJECTIVES:
        raise InputError(
            f"unknown objective {objective!r}{did_you_mean(objective, OBJECTIVES)}",
            fix="use one of " + ", ".join(OBJECTIVES),
        )


@dataclass(frozen=True)
class Evaluated:
    """Every candidate of one model, catalog, job and constraints, predicted and priced once.

    The expensive half of ``search`` (enumeration, predictions with intervals at the
    confidence level, time and cost); ``select`` re-filters and re-ranks it for any deadline,
    budget and objective without predicting again, and for a lower ``max_nodes`` where that
    keeps a subset (``narrows``). The deadline and budget in ``constraints`` are what it was
    evaluated with; they do not shape the candidates.
    """

    candidates: cand.Candidates
    model: StepTimeModel
    catalog: pd.DataFrame
    job: Job
    constraints: Constraints
    enumerated: bool = True  # False: the candidates are a given list (``candidates=``)
    # the single-type predictions the candidates were priced from, before pricing (``at``),
    # and the node limit they were enumerated to
    kept: dict[str, np.ndarray] | None = field(default=None, repr=False, compare=False)
    kept_top: int = 0
    # ``within``'s last answer, by its node limit (one: each holds a copy of the candidates)
    narrowed: dict[int, cand.Candidates] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.candidates)

    @property
    def narrows(self) -> bool:
        """Whether a lower ``max_nodes`` keeps a subset of these candidates: those of an
        enumeration one type at a time, where each candidate's prediction and price are its
        own. Two-type mixes are built from the best single types found up to the node limit
        (``_mix_pool``), and a given list says what was left out and why: both need a new
        ``evaluate``."""
        return self.enumerated and not self.constraints.mixes

    def allows(self, constraints: Constraints) -> bool:
        """Whether ``select`` can answer ``constraints`` from these candidates: they differ
        from the evaluated ones only in deadline and budget, or also in a ``max_nodes`` no
        higher than the evaluated one where the candidates ``narrows``."""
        free = {"deadline_h": None, "budget_usd": None}
        if replace(constraints, **free) == replace(self.constraints, **free):
            return True
        lower = constraints.max_nodes <= self.constraints.max_nodes
        free["max_nodes"] = self.constraints.max_nodes
        return (
            self.narrows
            and lower
            and replace(constraints, **free) == replace(self.constraints, **free)
        )

    def at(self, constraints: Constraints, job: Job | None = None) -> Evaluated | None:
        """The evaluation for ``constraints`` (and ``job``) made from this one without
        predicting again, where they differ from the evaluated ones only in what prices the
        predictions (the confidence: each step's quantiles are its belief's; spot allowed or
        not; the job's work, noise scale, checkpoints and spot policy:
        ``candidates.same_configurations``) and in a ``max_nodes`` no higher than the one the
        predictions were enumerated to (the deadline and budget are ``select``'s). It is what
        ``evaluate`` returns for them: the same rows in the same order (an enumeration's rows
        of fewer nodes come in the order they come in a larger one), priced by the same code;
        only the rows within ``max_nodes`` are priced. None where this one kept no predictions
        (a given list, or mixes: those are built from the best single types at the old
        prices) or the constraints or job differ in more.

        Args:
            constraints: the new constraints.
            job: the new job (None: the evaluated one).

        Returns:
            An ``Evaluated`` for ``constraints`` keeping the same predictions, or None.
        """
        job = self.job if job is None else job
        if self.kept is None or constraints.max_nodes > self.kept_top:
            return None
        if not cand.same_configurations(job, self.job):
            return None
        free = {"deadline_h": None, "budget_usd": None, "max_nodes": 1}
        free.update(confidence=0.5, spot=False)  # what prices, not what is predicted
        if replace(constraints, **free) != replace(self.constraints, **free):
            return None
        cfg = self.kept
        if constraints.max_nodes < self.kept_top:
            inside = cfg["nodes"] <= constraints.max_nodes
            cfg = {k: v[inside] for k, v in cfg.items()}
        cfg = cand.at_level(cfg, constraints.confidence)
        c = self.candidates
        cols = cand.price(job, constraints, c.types, cfg)
        priced = cand.Candidates(cols, c.types, c.skipped)
        return replace(self, candidates=priced, constraints=constraints, job=job, narrowed={})

    def within(self, max_nodes: int) -> cand.Candidates:
        """The candidates of at most ``max_nodes`` nodes (both types of a mix together): what
        ``evaluate`` at that limit makes when the candidates ``narrows``."""
        c = self.candidates
        if max_nodes >= self.constraints.max_nodes:
            return c
        if max_nodes not in self.narrowed:
            self.narrowed.clear()
            self.narrowed[max_nodes] = c.take(c["nodes"] + c["nodes2"] <= max_nodes)
        return self.narrowed[max_nodes]


def _check_arguments(model, job, constraints) -> None:
    """Refuse arguments of the wrong kind in one line each, before any work: the usual slips
    are a model file's path for the model and the job and constraints swapped (a catalog that
    is no table is the catalog contract's to refuse: ``validate_catalog``)."""
    usage = "search(model, catalog, Job(...), Constraints(...))"
    if isinstance(model, (str, os.PathLike)):
        raise InputError(
            f"model must be a fitted StepTimeModel, got the path {str(model)!r}",
            fix="load it first: StepTimeModel.load(path)",
        )
    if getattr(model, "models_", None) is None:
        from srifty_kit.model.estimator import NotFitted  # scikit-learn's NotFittedError too

        raise NotFitted("the performance model is not fitted", fix="fit or load it first")
    if not isinstance(job, Job):
        raise InputError(f"job must be a Job, got {type(job).__name__}", fix=usage)
    if constraints is not None and not isinstance(constraints, Constraints):
        raise InputError(
            f"constraints must be Constraints or None, got {type(constraints).__name__}",
            fix=usage,
        )


def evaluate(
    model: StepTimeModel,
    catalog: pd.DataFrame | None = None,
    job: Job | None = None,
    constraints: Constraints | None = None,
    candidates: pd.DataFrame | None = None,
) -> Evaluated:
    """Enumerate (or take ``candidates``), predict and price every candidate for ``job``
    (the expensive half of ``search``; the same checks of its arguments)."""
    _check_arguments(model, job, constraints)
    constraints = constraints or Constraints()
    fitted = model.models_
    if catalog is None:
        from srifty_kit.catalog.query import load_catalog

        catalog = load_catalog()
    else:  # one that contradicts the model's own catalog rows is refused before any work
        catalog = validate_catalog(catalog)
        model.check_catalog(catalog)
    if job.model not in fitted:
        raise InputError(
            f"training model {job.model!r} is not in the performance model"
            f"{did_you_mean(job.model, fitted)}",
            fix="use one of " + ", ".join(fitted),
        )
    listed = None if candidates is None else validate_candidates(candidates, job, catalog)
    candidates, predicted = _evaluate(model, catalog, job, constraints, listed)
    return Evaluated(
        candidates,
        model,
        catalog,
        job,
        constraints,
        enumerated=listed is None,
        kept=predicted,
        kept_top=constraints.max_nodes,
    )


def select(
    evaluated: Evaluated,
    constraints: Constraints | None = None,
    *,
    objective: str = "cost",
    top: int = 10,
) -> SearchResult:
    """Filter ``evaluated`` by the deadline and budget of ``constraints`` (default: the
    evaluated ones) and rank it by ``objective``: what ``search`` returns for the same inputs,
    without predicting again; a lower ``max_nodes`` keeps the candidates within it where
    ``Evaluated.narrows``. Other constraints that change the candidates (confidence, spot,
    mixes, filters, a higher ``max_nodes``) need a new ``evaluate``."""
    _check_ranking(objective, top)
    constraints = evaluated.constraints if constraints is None else constraints
    if not evaluated.allows(constraints):
        raise InputError(
            "these constraints change the candidates, not only the deadline, the budget or "
            "(without mixes) a lower max_nodes",
            fix="evaluate(model, catalog, job, constraints) again",
        )
    c, job = evaluated.within(constraints.max_nodes), evaluated.job
    ok = _feasible(c, constraints)
    idx = np.flatnonzero(ok)
    common = {
        "skipped": dict(c.skipped),
        "n_candidates": len(c),
        "n_feasible": int(idx.size),
        "job": job,
        "model": evaluated.model,
        "catalog": evaluated.catalog,
        "candidates": c,
        "feasible_mask": ok,
        "constraints": constraints,
    }
    if idx.size == 0:
        why = explain(c, None, job, constraints, objective)
        empty = cand.to_frame(_empty(c))
        return SearchResult(empty, empty.copy(), None, None, why, pareto_all=empty.copy(), **common)
    front = pareto_mask(c[FRONT_TIME][idx], c[FRONT_COST][idx])
    ranked_pos = _rank(c, idx, front, objective, top)
    front_idx = idx[front]
    front_idx = front_idx[np.argsort(c[FRONT_TIME][front_idx], kind="stable")]  # fastest first
    ranked = cand.to_frame(c, idx[ranked_pos])
    exact = cand.to_frame(c, front_idx)
    at = knee_index(exact[FRONT_TIME], exact[FRONT_COST])
    knee = exact.iloc[at]
    picked = int(idx[ranked_pos[0]])
    # the front shown: a point within the noise floor of a cheaper one's time is left out,
    # but never the knee nor the pick (every objective's pick is a point of the front drawn)
    keep = [at, *np.flatnonzero(front_idx == picked)]
    shown = exact[distinct_mask(exact[FRONT_TIME].to_numpy(), keep=keep)].reset_index(drop=True)
    pick = ranked.iloc[0]
    why = explain(c, picked, job, constraints, objective)
    return SearchResult(ranked, shown, knee, pick, why, pareto_all=exact, **common)


def search(
    model: StepTimeModel,
    catalog: pd.DataFrame | None = None,
    job: Job | None = None,
    constraints: Constraints | None = None,
    *,
    objective: str = "cost",
    top: int = 10,
    candidates: pd.DataFrame | None = None,
) -> SearchResult:
    """Rank EC2 configurations for ``job`` under ``constraints`` (see the module docstring):
    ``select(evaluate(model, catalog, job, constraints, candidates), ...)``.

    Args:
        model: a fitted ``StepTimeModel``.
        catalog: the EC2 catalog (default: the embedded one).
        job: the training job.
        constraints: deadline, budget, confidence and what may be enumerated.
        objective: what the pick minimises among the feasible, always a point of the
            front: "cost" (expected cost), "time" (time at the confidence), "knee", or
            "throughput-per-dollar" (most goodput per dollar-hour among the front's points).
        top: how many ranked rows to return.
        candidates: decide among exactly these configurations (columns instance_type,
            num_nodes, num_workers, local_bsz; optional pricing, gpus_per_node) instead of
            enumerating the catalog; a row repeating an earlier configuration is dropped
            with a warning (``unique_candidates``); a row the constraints rule out (its
            type by the filters, its cluster by ``max_nodes`` or the vCPU quota) is left out
            and said in ``skipped``.

    Returns:
        A ``SearchResult``; ``pick`` is None (with the reason) when nothing meets the
        constraints at the confidence.

    Raises:
        InputError: a bad job, constraints, catalog or candidates table.
    """
    _check_ranking(objective, top)
    evaluated = evaluate(model, catalog, job, constraints, candidates)
    return select(evaluated, objective=objective, top=top)


def _catalog_types(catalog: pd.DataFrame | None, names: pd.Series) -> cand.Types:
    if catalog is None:
        from srifty_kit.catalog.query import load_catalog

        catalog = load_catalog()
    rows = catalog[catalog["instance_type"].isin(set(names.astype(str)))]
    return cand.Types.from_catalog(rows.drop_duplicates("instance_type").reset_index(drop=True))


def evaluate_configs(
    model: StepTimeModel,
    catalog: pd.DataFrame | None,
    job: Job,
    constraints: Constraints,
    configs: pd.DataFrame,
) -> pd.DataFrame:
    """Predicted time and cost (with interval ends) of the given configurations: the search's
    own arithmetic on a table (one row per configuration and pricing)."""
    return priced(job, constraints, *predicted(model, catalog, job, constraints, configs))


def predicted(
    model: StepTimeModel,
    catalog: pd.DataFrame | None,
    job: Job,
    constraints: Constraints,
    configs: pd.DataFrame,
) -> tuple[cand.Types, dict[str, np.ndarray]]:
    """The types and predicted step times of the given configurations, ready for ``priced``:
    the step time does not depend on the job's checkpointing or target, so one prediction
    serves every job that differs only there.

    Raises:
        InputError: a configuration's instance type cannot be predicted.
    """
    types = _catalog_types(catalog, configs["instance_type"])
    skipped: dict[str, str] = {}
    cfg = cand.predict(
        model, job, types, cand.from_table(configs, types), constraints.confidence, catalog, skipped
    )
    if skipped:
        name, why = next(iter(skipped.items()))
        raise InputError(f"cannot predict {name}: {why}", column="instance_type")
    return types, cfg


def priced(
    job: Job, constraints: Constraints, types: cand.Types, cfg: dict[str, np.ndarray]
) -> pd.DataFrame:
    """Time and cost to ``job``'s target of configurations from ``predicted`` (a row per
    configuration and pricing)."""
    return cand.to_frame(cand.Candidates(cand.price(job, constraints, types, cfg), types))


def known_outcomes(
    catalog: pd.DataFrame | None, job: Job, constraints: Constraints, measured: pd.DataFrame
) -> pd.DataFrame:
    """Time and cost to the target of configurations whose step time is known (no model):
    ``measured`` has one row per configuration with its mean step_time_s (and, from another
    predictor, step_time_lo / step_time_hi; absent, the interval is the point)."""
    types = _catalog_types(catalog, measured["instance_type"])
    cfg = cand.from_table(measured, types)

    def column(name: str, default: np.ndarray) -> np.ndarray:
        return measured[name].to_numpy(float) if name in measured else default

    step = measured["step_time_s"].to_numpy(float)
    sync = column("sync_time_s", np.zeros(step.size))
    cfg.update(
        step_time_s=step,
        step_time_lo=column("step_time_lo", step),
        step_time_hi=column("step_time_hi", step),
        compute_s=step - sync,
        sync_s=sync,
    )
    cfg = cand.from_interval(cfg, constraints.confidence)
    return cand.to_frame(cand.Candidates(cand.price(job, constraints, types, cfg), types))
