"""The tradeoffs notebook 05 teaches, as pure functions of the fitted model and the catalog.

(a) ``scaling``: workers x batch x statistical efficiency -> time to the target, and where
adding workers stops making the job faster, judged by the point estimate and by the upper end;
(b) ``spot_tradeoff``: spot against on-demand under reclaims (interruption rate, checkpoint
interval, restart) -> expected cost relative to its cheapest plan, Young/Daly's interval, the
deadline risk; (c) ``controller_lesson``: OmniLearn's proportional controller on a two-type
cluster, step by step, with worker 0 slowing down mid-run; (d) ``deadline_judgement``: the
same deadline judged by the point estimate and by the interval's upper end, and how often each
pick misses it, simulated from the model's own belief (``run_times``, the one place the
lessons turn a prediction into draws). Each says what rests on measurements and what was never
measured (``basis``), and each result has a ``text()`` that answers its lesson's question in
numbers; the widgets (present.lessons) only display them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from srifty_kit.decide import candidates as cand
from srifty_kit.decide import hetero, spot
from srifty_kit.decide.explanation import config_phrase, money
from srifty_kit.decide.job import Constraints, Job
from srifty_kit.decide.planner import Evaluated, evaluate_configs, predicted, priced, select
from srifty_kit.errors import InputError, counted, duration, hours
from srifty_kit.model.efficiency import efficiency

if TYPE_CHECKING:  # pragma: no cover
    from srifty_kit.model.estimator import StepTimeModel


def _types(catalog: pd.DataFrame, names: tuple[str, ...]) -> cand.Types:
    """The catalog's rows of ``names`` (first region each), in that order, as arrays."""
    import warnings

    from srifty_kit.catalog.query import lookup

    rows = lookup(catalog.drop_duplicates("instance_type"), list(names), list(catalog.columns))
    with warnings.catch_warnings():  # a datasheet row (not EC2) may not know its vCPUs
        warnings.filterwarnings("ignore", "invalid value encountered in cast", RuntimeWarning)
        types = cand.Types.from_catalog(rows)
    for name, gpus in zip(types.names, types.gpus, strict=True):
        if gpus < 1:
            raise InputError(
                f"{name} has no GPU: data-parallel GPU training cannot run there",
                column="instance_type",
                fix="pick an instance type with GPUs",
            )
    return types


# -- what rests on measurements ----------------------------------------------------------------


@dataclass(frozen=True)
class Basis:
    """What the model's prediction for one training model on one instance type rests on."""

    instance_type: str
    source: str | None  # None: this type was measured; else the measured type carried to it
    nodes: int  # the most nodes measured (on this type, or on the source)

    @property
    def measured(self) -> bool:
        """Whether this instance type itself was measured."""
        return self.source is None

    def beyond(self, num_nodes: int) -> bool:
        """Whether ``num_nodes`` lies past the node counts the prediction rests on."""
        return int(num_nodes) > self.nodes

    def phrase(self) -> str:
        """'g4dn.12xlarge measured on 1-4 nodes', or 'g6.12xlarge never measured: carried
        from g4dn.12xlarge (measured on 1-4 nodes)'."""
        nodes = f"1-{self.nodes} nodes" if self.nodes > 1 else "1 node"
        if self.measured:
            return f"{self.instance_type} measured on {nodes}"
        return (
            f"{self.instance_type} never measured: carried from {self.source} (measured on {nodes})"
        )

    def why_wide(self, num_nodes: int) -> str:
        """Which parts of a prediction on ``num_nodes`` nodes were never measured ('' if none)."""
        parts = []
        if not self.measured:
            parts.append(f"{self.instance_type} was never measured (carried from {self.source})")
        if self.beyond(num_nodes):
            parts.append(f"{num_nodes} nodes is beyond the {self.nodes} measured")
        return "; ".join(parts)


def basis(model: StepTimeModel, workload: str, instance_type: str) -> Basis:
    """Whether ``model`` measured ``workload`` on ``instance_type`` and on how many nodes, or
    which measured type it carries the prediction from (the best-measured one).

    Args:
        model: a fitted StepTimeModel (read through its public ``summary()``).
        workload: the training model's name.
        instance_type: any instance type.

    Returns:
        A ``Basis``.

    Raises:
        InputError: the model has no measured fit of ``workload``.
    """
    s = model.summary()
    rows = s[s["model"] == workload]
    carried = rows["fitted_as"].astype(str).str.startswith("carried")
    measured = rows[~carried]
    if measured.empty:
        raise InputError(
            f"no measured fit of {workload!r}",
            column="model",
            fix="fit measurements of this training model first",
        )
    own = rows[rows["instance_type"] == instance_type]
    if len(own) and not str(own["fitted_as"].iloc[0]).startswith("carried"):
        return Basis(instance_type, None, int(own["max_nodes"].iloc[0]))
    if len(own):  # a thin group carried from another measured type
        source = str(own["fitted_as"].iloc[0]).removeprefix("carried").strip()
    else:
        source = str(measured.sort_values("configs", kind="stable")["instance_type"].iloc[-1])
    nodes = measured.loc[measured["instance_type"] == source, "max_nodes"]
    return Basis(instance_type, source, int(nodes.iloc[0]) if len(nodes) else 1)


def measured_types(model: StepTimeModel, workload: str) -> list[str]:
    """The instance types on which ``model`` measured ``workload`` (sorted)."""
    s = model.summary()
    rows = s[(s["model"] == workload) & ~s["fitted_as"].astype(str).str.startswith("carried")]
    return sorted(rows["instance_type"].astype(str))


def measured_steps(
    measurements: pd.DataFrame | None,
    workload: str,
    instance_type: str,
    local_bsz: int,
    gpus_per_node: int,
    tolerance: float = 0.02,
) -> pd.DataFrame:
    """The measured mean step time per worker count of ``workload`` on ``instance_type`` at
    the measured local batch nearest ``local_bsz`` (within ``tolerance`` of it: campaigns
    measure 257 where a lesson says 256), workers packed on as few nodes as hold them
    (num_nodes = ceil(workers / gpus)), as the lessons place them; empty when nothing was
    measured there. Columns: num_nodes, num_workers, measured_bsz, measured_step_s."""
    cols = ["num_nodes", "num_workers", "measured_bsz", "measured_step_s"]
    if measurements is None or measurements.empty:
        return pd.DataFrame(columns=cols)
    m = measurements
    m = m[
        (m["model"] == workload)
        & (m["instance_type"] == instance_type)
        & (m["num_nodes"] == -(-m["num_workers"] // int(gpus_per_node)))
    ]
    off = (m["local_bsz"] / int(local_bsz) - 1).abs()
    if m.empty or off.min() > tolerance:
        return pd.DataFrame(columns=cols)
    m = m[m["local_bsz"] == m.loc[off.idxmin(), "local_bsz"]]
    out = m.groupby(["num_nodes", "num_workers"], as_index=False).agg(
        measured_bsz=("local_bsz", "first"), measured_step_s=("step_time_s", "mean")
    )
    return out[cols]


def run_times(
    c: cand.Candidates, index: np.ndarray, runs: int, rng: np.random.Generator
) -> np.ndarray:
    """Hours to the target of ``runs`` runs of each candidate at ``index``, drawn jointly from
    the model's own belief (``Belief.draws``: the shared errors of a group, a network and a
    placement move the candidates together, as the search's probabilities assume): the one
    place the lessons turn a prediction into runs. A candidate's ``time_hi_h`` is then the
    ``level`` quantile of its runs, as the search promises, and ``time_h`` their median.

    Args:
        c: the evaluated candidates (``Evaluated.candidates``).
        index: positions of the candidates to run.
        runs: how many runs of each.
        rng: the random generator.

    Returns:
        (runs, len(index)) hours to the target.
    """
    index = np.atleast_1d(np.asarray(index, np.int64))
    belief = cand.belief_of({k: v[index] for k, v in c.cols.items()})
    return belief.draws(int(runs), rng)


# -- (a) workers x batch x statistical efficiency ---------------------------------------------


def worker_counts(gpus_per_node: int, max_nodes: int) -> np.ndarray:
    """1, 2, ... workers on one node, then whole nodes: gpus, 2 gpus, ... max_nodes gpus."""
    one = np.arange(1, gpus_per_node + 1)
    return np.concatenate([one, gpus_per_node * np.arange(2, max_nodes + 1)]).astype(np.int64)


@dataclass(frozen=True)
class Scaling:
    """Time to the target as workers grow on one instance type (one row per count)."""

    # evaluate_configs columns + speedup (point time of 1 worker / point time), band_lo_h and
    # band_hi_h (the central ``level`` interval of a run's time: its mean step's belief read
    # two-sided, where time_lo_h and time_hi_h are the search's one-sided ends), and
    # measured_step_s, measured_time_h, measured_bsz and own_run (the model returns that very
    # run there) where the measurements have that configuration
    table: pd.DataFrame
    instance_type: str
    local_bsz: int
    noise_scale: float | None
    level: float
    basis: Basis

    @property
    def fastest(self) -> pd.Series:
        """The worker count with the lowest point estimate of the time to the target."""
        return self.table.loc[self.table["time_h"].idxmin()]

    @property
    def fastest_upper(self) -> pd.Series:
        """The worker count with the lowest upper end: the fastest one can promise."""
        return self.table.loc[self.table["time_hi_h"].idxmin()]

    @property
    def measured(self) -> pd.DataFrame:
        """The rows with a measured step time."""
        return self.table[self.table["measured_step_s"].notna()]

    def _row(self, r: pd.Series, what: str) -> str:
        # the lesson compares batches with the small-batch limit (a sample's worth against one
        # at a tiny batch), not the table's ``efficiency``, which is against the job's
        # reference batch (Pollux's, the one its steps come from): labelled as such
        worth = efficiency(r["global_bsz"], self.noise_scale)
        return (
            f"{what}: {r['num_workers']} workers on {r['num_nodes']} node"
            + ("s" if r["num_nodes"] > 1 else "")
            + f" (global batch {r['global_bsz']:,}, statistical efficiency "
            f"{worth:.2f} against a small batch): {hours(r['time_h'])} ({self.level:.0%} "
            f"interval {hours(r['band_lo_h'])}-{hours(r['band_hi_h'])}; {self.level:.0%} of "
            f"runs within {hours(r['time_hi_h'])})"
            + (f", {money(r['cost_usd'])}" if np.isfinite(r["cost_usd"]) else "")
        )

    def text(self) -> str:
        """Where adding workers stops making the job faster, by the point estimate and by the
        upper end (each with its cost, or why there is none), and what each means."""
        f, u = self.fastest, self.fastest_upper
        t = self.table
        scale = (
            f"noise scale {self.noise_scale:,.0f}"
            if self.noise_scale is not None
            else "no noise scale (perfect scaling assumed)"
        )
        unpriced = (
            f"; the catalog has no on-demand price for {self.instance_type}, so no cost is shown"
            if not np.isfinite(t["cost_usd"].to_numpy(float)).any()
            else ""
        )  # a measured type of another cloud or on premises: say why no '$' follows
        lines = [f"{self.basis.phrase()}; local batch {self.local_bsz}, {scale}{unpriced}."]
        point = self._row(f, "Fastest by the point estimate")
        if f["num_workers"] == t["num_workers"].max():
            point += " - still getting faster at the most workers tried"
        lines.append(point + ".")
        lines.append(
            self._row(u, f"Fastest by the upper end (what one can promise at {self.level:.0%})")
            + "."
        )
        first = t.iloc[0]
        ratio_1 = first["time_hi_h"] / first["time_h"]
        ratio_f = f["time_hi_h"] / f["time_h"]
        eff = 1 / (1 + f["global_bsz"] / self.noise_scale) if self.noise_scale else 1.0
        lines.append(
            f"Each added worker grows the global batch, and the steps it saves shrink as "
            f"1/(1 + B/B_noise): at {f['num_workers']} workers a sample is worth {eff:.2f} of "
            "one at a small batch, while the network's share of each step grows; a larger "
            "noise scale keeps samples worth more to a larger batch, so the fastest count "
            "moves out."
        )
        if u["num_workers"] != f["num_workers"]:
            lines.append(
                f"The two marks differ because the interval widens (upper end / point "
                f"{ratio_1:.2f} at 1 worker, {ratio_f:.2f} at {f['num_workers']}): part of the "
                "upper end's knee is growing uncertainty, not statistical efficiency."
            )
        beyond = t.loc[[self.basis.beyond(n) for n in t["num_nodes"]], "num_workers"]
        if not self.basis.measured:
            lines.append("Every point is an extrapolation: " + self.basis.phrase() + ".")
        elif len(beyond):
            lines.append(
                f"From {beyond.iloc[0]} workers ({self.basis.nodes + 1}+ nodes) the model "
                f"extrapolates past the {self.basis.nodes} nodes measured."
            )
        m = self.measured
        if len(m):
            lines.append(self._beside(m))
        return "\n".join(lines)

    def _beside(self, m: pd.DataFrame) -> str:
        """How the measured runs drawn beside the model sit against its point and band, at
        which batch they were measured, and whether they are the runs the model returns."""
        err = (m["step_time_s"] / m["measured_step_s"] - 1).abs().mean()
        held = int(m["measured_time_h"].between(m["band_lo_h"], m["band_hi_h"]).sum())
        batches = sorted({int(b) for b in m["measured_bsz"]})
        at = ", ".join(str(b) for b in batches)
        where = "" if batches == [self.local_bsz] else f", measured at local batch {at}"
        text = (
            f"Measured beside the model at {len(m)} worker counts (1-{m['num_workers'].max()}"
            f"{where}): the point estimate is off by {err:.1%} on average; {held} of {len(m)} "
            f"measured runs ({held / len(m):.0%}) lie inside the {self.level:.0%} band."
        )
        if m["own_run"].any():  # in sample: agreement there shows the fit, not a prediction
            text += (
                f" The model was fitted on {'these runs' if m['own_run'].all() else 'some of them'}"
                " and returns them at their configuration: there they show the fit, not a "
                "prediction."
            )
        return text


def scaling(
    model: StepTimeModel,
    catalog: pd.DataFrame,
    job: Job,
    instance_type: str,
    local_bsz: int,
    max_nodes: int = 16,
    level: float = 0.9,
    measurements: pd.DataFrame | None = None,
) -> Scaling:
    """Predicted time (point and interval) and cost to ``job``'s target on 1 .. max_nodes
    nodes of one type at a fixed local batch: the global batch, and with it the steps to the
    target (statistical efficiency, from ``job.noise_scale``), grow with the workers.

    Args:
        model, catalog, job: the fitted model, the catalog (with the type's row), the job.
        instance_type: the node type.
        local_bsz: samples per worker per step.
        max_nodes: the most nodes.
        level: the interval's level.
        measurements: the measured step times, if any: where they hold this type at this
            local batch, ``measured_step_s`` and ``measured_time_h`` (the same steps to the
            target at the measured step time) sit beside the model's.

    Returns:
        A ``Scaling``: its table also has the band drawn beside the point (``band_lo_h``,
        ``band_hi_h``: the model's central ``level`` interval of a run's time), and which
        measured points are the runs the model returns at their configuration (``own_run``).

    Raises:
        InputError: a bad local batch, a type without GPUs or one the model cannot predict.
    """
    if not (isinstance(local_bsz, int | np.integer) and local_bsz >= 1):
        raise InputError(f"local batch must be a whole number >= 1, got {local_bsz!r}")
    types = _types(catalog, (instance_type,))
    gpus = int(types.gpus[0])
    workers = worker_counts(gpus, max_nodes)
    configs = pd.DataFrame(
        {
            "model": job.model,
            "instance_type": instance_type,
            "num_nodes": -(-workers // gpus),
            "num_workers": workers,
            "local_bsz": int(local_bsz),
        }
    )
    table = evaluate_configs(model, catalog, job, Constraints(confidence=level), configs)
    table["speedup"] = table["time_h"].iloc[0] / table["time_h"]
    # the band is the model's own central interval at ``level`` of a run's mean step (what
    # the measured points are): time_lo_h..time_hi_h, the search's one-sided ends, hold only
    # 2 * level - 1 of the runs (80% at 90%)
    belief = model.predict_belief(
        job.model, instance_type, table["num_nodes"].to_numpy(), table["num_workers"].to_numpy(),
        table["local_bsz"].to_numpy(), catalog=catalog,
    )  # fmt: skip
    lo, hi = belief.interval(level)
    # time is steps x step x (1 + writes): linear in the step, so a step's quantile scales it
    table["band_lo_h"] = table["time_h"] * lo / belief.median
    table["band_hi_h"] = table["time_h"] * hi / belief.median
    seen = measured_steps(measurements, job.model, instance_type, int(local_bsz), gpus)
    table = table.merge(seen, on=["num_nodes", "num_workers"], how="left")
    table["measured_step_s"] = table["measured_step_s"].astype(float)
    table["measured_time_h"] = table["time_h"] * table["measured_step_s"] / table["step_time_s"]
    table["own_run"] = False
    same = (table["measured_bsz"] == int(local_bsz)).to_numpy()
    if same.any():  # the points the model predicts by returning that very run (in sample)
        rows = table.loc[same, ["num_nodes", "num_workers", "local_bsz"]]
        route = model.explain(rows.assign(model=job.model, instance_type=instance_type))["route"]
        route = route.to_numpy()
        table.loc[same, "own_run"] = route == "measured: its own run"
    return Scaling(
        table, instance_type, int(local_bsz), job.noise_scale, level,
        basis(model, job.model, instance_type),
    )  # fmt: skip


# -- (b) spot against on-demand ----------------------------------------------------------------


@dataclass(frozen=True)
class SpotTradeoff:
    """One configuration on on-demand and on spot: expected and simulated outcomes, over
    checkpoint intervals too."""

    ondemand: pd.Series  # evaluate_configs row: time_h, cost_usd (work with checkpoint writes)
    expected: dict[str, float]  # spot.expected_run: time_h, cost_usd, reclaims, ondemand_h
    runs: pd.DataFrame  # spot.simulate: one row per simulated spot run
    # checkpoint interval -> spot's expected cost and time, its cost above the cheapest plan,
    # its miss share; on-demand's time and cost with the same checkpoints
    by_interval: pd.DataFrame
    bucket: str
    checkpoint_interval_h: float
    restart_h: float
    deadline_h: float
    cluster_hazard: float  # reclaims per hour of the whole cluster
    write_h: float  # c: hours to write one checkpoint
    best: dict[str, float]  # the cheapest interval (closed form, minimised): interval_h, cost_usd
    young_daly_h: float  # sqrt(2 c M)
    all_miss_below_h: float  # shorter intervals: the writes alone pass the deadline (0: none)

    @property
    def miss_share(self) -> float:
        """Share of simulated spot runs that end after the deadline."""
        return float((self.runs["time_h"] > self.deadline_h).mean())

    @property
    def at_edge(self) -> bool:
        """Whether the cheapest interval sits at the longest one tried (the grid's edge)."""
        return self.best["interval_h"] >= self.by_interval["checkpoint_interval_h"].max() * 0.99

    def text(self) -> str:
        """Expected cost against the cheapest plan, what the reclaims add to the run (the
        restart's share of it), Young/Daly's interval, the deadline risk."""
        od, e = self.ondemand, self.expected
        q = self.runs["cost_usd"].quantile([0.5, 0.9, 0.99])
        saving = 1 - e["cost_usd"] / od["cost_usd"]
        above = e["cost_usd"] / self.best["cost_usd"] - 1
        # '0.0% more' would read as the optimum itself, which the figure marks apart
        near = "within 0.1% of it" if above < 0.0005 else f"{above:.1%} more"
        mtbf = 1 / self.cluster_hazard
        half = (self.checkpoint_interval_h + self.write_h) / 2  # spot.expected_run's P/2
        where = config_phrase(od).removesuffix(", on-demand")
        lines = [
            f"{where}, checkpoint every {hours(self.checkpoint_interval_h)} (writing one "
            f"takes {hours(self.write_h)}), restart {hours(self.restart_h)}.",
            f"On-demand, with the same checkpoints: {hours(od['time_h'])} for "
            f"{money(od['cost_usd'])}.",
            f"Spot (Spot Advisor: {self.bucket} of capacity reclaimed a month; on "
            f"{int(od['num_nodes'])} nodes a reclaim every {hours(mtbf)} on average): expected "
            f"{hours(e['time_h'])} for {money(e['cost_usd'])} ({e['reclaims']:.3g} reclaims), "
            + (f"{saving:.0%} cheaper" if saving >= 0 else f"{-saving:.0%} dearer")
            + f" than on-demand; simulated cost median {money(q[0.5])}, p90 {money(q[0.9])}, "
            f"p99 {money(q[0.99])} over {len(self.runs):,} runs.",
            # said even where it rounds away in the hours and dollars above: the restart
            # control's only visible effect at a low reclaim rate, and the lesson's point
            f"Each reclaim re-does half a checkpoint period (the interval and its write) on "
            f"average and waits for the restart: {e['reclaims']:.3g} x ({hours(half)} + "
            f"{hours(self.restart_h)}) = {hours(e['time_h'] - od['time_h'])} more than "
            f"on-demand's {hours(od['time_h'])}.",
            f"Cheapest interval: {hours(self.best['interval_h'])} "
            f"(expected {money(self.best['cost_usd'])}"
            + (
                ", at the longest interval tried: the optimum may lie beyond it"
                if self.at_edge
                else ""
            )
            + f"); this one costs {near}. Young/Daly's sqrt(2 c M) = sqrt(2 x "
            f"{self.write_h:.3g} h x {_hours_number(mtbf)} h) = {hours(self.young_daly_h)}. "
            "Shorter intervals pay for writing checkpoints, longer ones for re-doing lost work.",
            f"Deadline {hours(self.deadline_h)}: {self.miss_share:.1%} of spot runs miss it; "
            "on-demand " + ("meets it." if od["time_h"] <= self.deadline_h else "misses it too."),
        ]
        if self.all_miss_below_h > 0:
            lines.append(
                f"Checkpointing more often than every {hours(self.all_miss_below_h)} misses "
                "it on every run: the writes alone pass the deadline."
            )
        return "\n".join(lines)


def _hours_number(h: float) -> str:
    """A number of hours inside a formula as ``hours`` says it beside it: '683', '3,604'
    (never '3.6e+03'), '47.4'."""
    return f"{h:,.0f}" if h >= 100 else f"{h:.3g}"


class _OnDemand:
    """Whole nodes of one type, on-demand, priced for any job that differs only in its
    checkpointing: the model predicts the step once (``predicted``), each job re-prices."""

    def __init__(
        self,
        model: StepTimeModel,
        catalog: pd.DataFrame,
        job: Job,
        instance_type: str,
        num_nodes: int,
        local_bsz: int,
        level: float,
        gpus: int | None = None,
    ) -> None:
        if gpus is None:
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
        self.constraints = Constraints(confidence=level)
        self.types, self.cfg = predicted(model, catalog, job, self.constraints, configs)

    def __call__(self, job: Job) -> pd.Series:
        """The evaluate_configs row of ``job`` (what the answer's text reads)."""
        return priced(job, self.constraints, self.types, self.cfg).iloc[0]

    def time_cost(self, job: Job) -> tuple[float, float, float]:
        """(time_h, cost_usd, usd_per_hr) of ``job``: the row's numbers without building a
        DataFrame (a few ms each), so that a grid of intervals costs microseconds."""
        p = cand.price(job, self.constraints, self.types, self.cfg)
        return float(p["time_h"][0]), float(p["cost_usd"][0]), float(p["usd_per_hr"][0])


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
    row = _OnDemand(model, catalog, job, instance_type, num_nodes, local_bsz, level)(job)
    return float(row["time_h"]) * (1 + slack)


def listed_bucket(catalog: pd.DataFrame, instance_type: str) -> str:
    """The catalog's Spot Advisor interruption bucket of a type; ``spot.UNKNOWN_BUCKET``
    (the worst) where it lists none."""
    listed = catalog.loc[catalog["instance_type"] == instance_type, "spot_interruption_bucket"]
    return str(listed.iloc[0]) if len(listed) and pd.notna(listed.iloc[0]) else spot.UNKNOWN_BUCKET


SHORTEST_INTERVAL_H = 1 / 60  # the grid of checkpoint intervals starts at one minute
LONGEST_INTERVAL_H = 8.0  # ... and ends here or past 3x Young/Daly, whichever is later
GRID_POINTS = 20  # each point simulates the runs: ~1 ms apiece at 2,000 runs


def checkpoint_grid(young_daly_h: float) -> np.ndarray:
    """Checkpoint intervals from a minute to past both 8 h and 3x Young/Daly's (log-spaced)."""
    top = max(LONGEST_INTERVAL_H, 3 * young_daly_h if np.isfinite(young_daly_h) else 0.0)
    return np.geomspace(SHORTEST_INTERVAL_H, top, GRID_POINTS)


@dataclass(frozen=True)
class SpotCurve:
    """Spot over checkpoint intervals for one configuration, job, reclaim rate, restart and
    deadline: what does not depend on the job's own checkpoint interval (so that a panel
    moving only that interval computes it once and passes it back to ``spot_tradeoff``)."""

    # checkpoint interval -> spot's expected cost and time, its cost above the cheapest plan,
    # its miss share; on-demand's time and cost with the same checkpoints
    by_interval: pd.DataFrame
    bucket: str
    cluster_hazard: float  # reclaims per hour of the whole cluster
    write_h: float  # c: hours to write one checkpoint
    best: dict[str, float]  # the cheapest interval (closed form, minimised): interval_h, cost_usd
    young_daly_h: float  # sqrt(2 c M)
    all_miss_below_h: float  # shorter intervals: the writes alone pass the deadline (0: none)
    # what it was computed for (spot_tradeoff refuses a curve of other arguments): the
    # configuration, the job without its interval, bucket, deadline, level, runs, seed
    key: tuple = ()
    # the configuration's spot $/h and on-demand pricing, kept for spot_tradeoff to reuse
    spot_usd: float = float("nan")
    ondemand: _OnDemand | None = field(default=None, repr=False, compare=False)


def _spot_prices(
    catalog: pd.DataFrame, instance_type: str, num_nodes: int, bucket: str | None
) -> tuple[str, float, float, int]:
    """(bucket, the cluster's reclaims per hour, its spot $/h, GPUs per node) of whole nodes
    of one type."""
    types = _types(catalog, (instance_type,))
    bucket = bucket or listed_bucket(catalog, instance_type)
    hazard = float(spot.hourly_hazard(bucket)[0]) * num_nodes
    spot_usd = float(types.spot[0]) * num_nodes
    if not np.isfinite(spot_usd):
        raise InputError(f"the catalog has no spot price for {instance_type!r}")
    return bucket, hazard, spot_usd, int(types.gpus[0])


def _curve_key(job, instance_type, num_nodes, local_bsz, bucket, deadline_h, level, runs, seed):
    """What a SpotCurve depends on: every argument but the job's checkpoint interval."""
    fields = replace(job, checkpoint_interval_h=1.0)
    return (fields, instance_type, int(num_nodes), int(local_bsz), bucket, float(deadline_h),
            float(level), int(runs), seed)  # fmt: skip


def spot_curve(
    model: StepTimeModel,
    catalog: pd.DataFrame,
    job: Job,
    instance_type: str,
    num_nodes: int,
    local_bsz: int,
    deadline_h: float,
    bucket: str | None = None,
    level: float = 0.9,
    runs: int = 2000,
    seed: int = 0,
) -> SpotCurve:
    """Spot's expected cost (spot.expected_run's closed form) and deadline risk (spot.simulate)
    at each interval of ``checkpoint_grid``, on-demand's with the same checkpoints, the
    cheapest interval (the closed form minimised between the grid's points), Young/Daly's and
    the interval below which the writes alone pass ``deadline_h``. ``job``'s own checkpoint
    interval is not used: the curve is the same for every one.

    Args:
        model, catalog, job: the fitted model, the catalog, the job (its restart and
            checkpoint size count, not its interval).
        instance_type, num_nodes, local_bsz: whole nodes of one type at one local batch.
        deadline_h: the deadline the miss shares count against.
        bucket: the Spot Advisor bucket; None: the catalog's.
        level: the model's interval level.
        runs, seed: the simulated runs per interval.

    Returns:
        A ``SpotCurve``.

    Raises:
        InputError: the type has no spot price or no GPU, or the model cannot predict it.
    """
    bucket, hazard, spot_usd, gpus = _spot_prices(catalog, instance_type, num_nodes, bucket)
    ondemand = _OnDemand(model, catalog, job, instance_type, num_nodes, local_bsz, level, gpus)
    key = _curve_key(job, instance_type, num_nodes, local_bsz, bucket, deadline_h, level, runs,
                     seed)  # fmt: skip
    return _curve(job, deadline_h, bucket, hazard, spot_usd, ondemand, runs, seed, key)


def _curve(
    job: Job,
    deadline_h: float,
    bucket: str,
    hazard: float,
    spot_usd: float,
    ondemand: _OnDemand,
    runs: int,
    seed: int,
    key: tuple,
) -> SpotCurve:
    """``spot_curve`` from the configuration's prices and on-demand pricing."""
    from scipy.optimize import minimize_scalar

    write = job.checkpoint_write_h
    young_daly = spot.young_daly_interval(write, hazard)
    grid_h = checkpoint_grid(young_daly)
    jobs = [replace(job, checkpoint_interval_h=float(tau)) for tau in grid_h]
    od = np.array([ondemand.time_cost(j) for j in jobs])  # time_h, cost_usd, $/h per interval
    od_usd = float(od[0, 2])
    # hours of training without writes: time_h = base x (1 + c / tau); from the grid's first
    # point, so that it is the same whatever the job's own interval
    base = float(od[0, 0]) / (1 + write / grid_h[0])

    def expected_cost(tau: float) -> float:
        j = replace(job, checkpoint_interval_h=float(tau))
        e = spot.expected_run(np.array([base * (1 + write / tau)]), hazard, j.spot_policy,
                              spot_usd, od_usd)  # fmt: skip
        return float(e["cost_usd"][0])

    grid = []
    for j, (work, od_cost, _) in zip(jobs, od, strict=True):
        e = spot.expected_run(np.array([work]), hazard, j.spot_policy, spot_usd, od_usd)
        s = spot.simulate(float(work), hazard, j.spot_policy, spot_usd, od_usd, runs, seed)
        grid.append(
            {
                "checkpoint_interval_h": j.checkpoint_interval_h,
                "time_h": float(e["time_h"][0]),
                "cost_usd": float(e["cost_usd"][0]),
                "miss_share": float((s["time_h"].to_numpy() > deadline_h).mean()),
                "ondemand_time_h": float(work),
                "ondemand_cost_usd": float(od_cost),
            }
        )
    table = pd.DataFrame(grid)
    # the optimum between the grid's points: minimise the closed form over log(interval)
    lo, hi = np.log(grid_h[0]), np.log(grid_h[-1])
    at = minimize_scalar(
        lambda x: expected_cost(np.exp(x)), bounds=(lo, hi), method="bounded",
        options={"xatol": 1e-4},
    )  # fmt: skip
    best_tau = float(np.exp(at.x))
    best = {"interval_h": best_tau, "cost_usd": expected_cost(best_tau)}
    edge = table.loc[table["cost_usd"].idxmin()]
    if edge["cost_usd"] < best["cost_usd"]:  # a second dip the bounded search missed
        best = {"interval_h": float(edge["checkpoint_interval_h"]), "cost_usd": edge["cost_usd"]}
    table["above_best"] = table["cost_usd"] / best["cost_usd"] - 1
    # tau with base (1 + c / tau) = deadline: shorter intervals cannot make it at all
    all_miss = write / (deadline_h / base - 1) if deadline_h > base and write > 0 else 0.0
    if deadline_h <= base:
        all_miss = float("inf")
    return SpotCurve(
        table, bucket, hazard, write, best, young_daly, float(all_miss), key, spot_usd, ondemand
    )


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
    curve: SpotCurve | None = None,
) -> SpotTradeoff:
    """Whole nodes of ``instance_type`` on on-demand and on spot with ``job``'s checkpoint
    interval, checkpoint size and restart; reclaims at the Spot Advisor ``bucket`` (default:
    the catalog's). The expected run is spot.expected_run's closed form, the spread and the
    deadline risk spot.simulate's runs, on the model's predicted (point) time; on-demand writes
    the same checkpoints. Over checkpoint intervals (``spot_curve``) the same, and the
    cheapest interval by minimising the closed form. Without a ``deadline_h`` the deadline is
    the on-demand time plus ``slack`` of it.

    Args:
        curve: the ``spot_curve`` of these arguments (any checkpoint interval), computed
            before: a panel that moves only the interval passes it back and the grid is not
            recomputed; None: computed here.

    Raises:
        InputError: the type has no spot price or no GPU, the model cannot predict it, or
            ``curve`` was computed for other arguments.
    """
    bucket = bucket or listed_bucket(catalog, instance_type)
    if curve is not None and curve.ondemand is not None and curve.bucket == bucket:
        # the curve's prices and prediction (the key check below says they are these)
        hazard, spot_usd, ondemand = curve.cluster_hazard, curve.spot_usd, curve.ondemand
    else:
        _, hazard, spot_usd, gpus = _spot_prices(catalog, instance_type, num_nodes, bucket)
        ondemand = _OnDemand(model, catalog, job, instance_type, num_nodes, local_bsz, level,
                             gpus)  # fmt: skip
    od = ondemand(job)
    od_usd = float(od["usd_per_hr"])
    if deadline_h is None:
        deadline_h = float(od["time_h"]) * (1 + slack)
    key = _curve_key(job, instance_type, num_nodes, local_bsz, bucket, deadline_h, level, runs,
                     seed)  # fmt: skip
    if curve is None:
        curve = _curve(job, deadline_h, bucket, hazard, spot_usd, ondemand, runs, seed, key)
    elif curve.key != key:
        raise InputError(
            "the spot curve was computed for other arguments",
            fix="compute it with spot_curve for this configuration, bucket and deadline",
        )
    expected = spot.expected_run(
        np.array([od["time_h"]]), hazard, job.spot_policy, spot_usd, od_usd
    )
    sim = spot.simulate(float(od["time_h"]), hazard, job.spot_policy, spot_usd, od_usd, runs, seed)
    return SpotTradeoff(
        od,
        {k: float(v[0]) for k, v in expected.items()},
        sim,
        curve.by_interval,
        bucket,
        job.checkpoint_interval_h,
        job.restart_h,
        deadline_h,
        hazard,
        curve.write_h,
        curve.best,
        curve.young_daly_h,
        curve.all_miss_below_h,
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
    # one row per type: alpha_s, beta_s of its compute line, its basis, the model's one-worker
    # step at the starting local batch and the measured one at the measured batch nearest it
    # (measured_s at measured_bsz; NaN where not measured)
    lines: pd.DataFrame = field(default_factory=pd.DataFrame)
    # the model's one-worker step over local batches, per type: instance_type, local_bsz,
    # step_s, step_lo_s, step_hi_s (its interval at ``level``)
    curves: pd.DataFrame = field(default_factory=pd.DataFrame)
    # the measured one-worker steps over the same batches: instance_type, local_bsz, measured_s
    measured: pd.DataFrame = field(default_factory=pd.DataFrame)
    level: float = 0.9

    @property
    def settled(self) -> pd.DataFrame:
        """The last step's rows: where the controller left each worker (batch, compute)."""
        return self.trace[self.trace["step"] == self.trace["step"].max()]

    def _beside(self, instance_type: str) -> str:
        """', and over the 11 batches measured (32-1024) it is off by 4.2% on average' (''
        where that type was never measured)."""
        if self.measured.empty or self.curves.empty:
            return ""
        seen = self.measured[self.measured["instance_type"] == instance_type]
        line = self.curves[self.curves["instance_type"] == instance_type]
        if seen.empty:
            return ""
        model = np.interp(
            np.log(seen["local_bsz"].to_numpy(float)),
            np.log(line["local_bsz"].to_numpy(float)),
            line["step_s"].to_numpy(float),
        )
        off = np.mean(np.abs(model / seen["measured_s"].to_numpy(float) - 1))
        low, high = int(seen["local_bsz"].min()), int(seen["local_bsz"].max())
        return (
            f", and over the {len(seen)} batches measured ({low}-{high}) it is off by "
            f"{off:.1%} on average"
        )

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
        """How the controller converges, and what it does when worker 0 slows down; each
        type's measured one-worker step beside the model's names the batch it was measured at
        where that is not the lesson's."""
        s = self.summary
        a, b = self.instance_types
        wa, wb = self.workers
        first = self.trace[self.trace["step"] == 0]
        start = int(first["local_bsz"].iloc[0])
        settled = self.trace[self.trace["step"] == self.slow_at - 1]
        by_type = settled.groupby("instance_type", sort=False)["local_bsz"].mean()
        lines = [f"{wa} workers on {a} + {wb} on {b}, global batch {self.global_bsz:,}."]
        if len(self.lines):
            seen = []
            for _, r in self.lines.iterrows():
                one = f"{r['basis']}: one worker at batch {start} takes {duration(r['model_s'])}"
                if np.isfinite(r["measured_s"]):
                    # campaigns measure 257 where the lesson asks 256: say which batch ran
                    bsz = int(r["measured_bsz"])
                    at = "" if bsz == start else f" at local batch {bsz}"
                    one += f" (measured {duration(r['measured_s'])}{at})"
                seen.append(one + self._beside(str(r["instance_type"])))
            t0, t1 = self.lines["model_s"].to_numpy(float)[:2]
            inside = abs(t0 / t1 - 1) <= self.deadband
            lines.append(
                ". ".join(seen)
                + f". {b} computes {t0 / t1:.2f}x as fast as {a}, "
                + ("inside" if inside else "outside")
                + f" the controller's +-{self.deadband:.0%} deadband"
                + (": it has nothing to balance." if inside else ".")
            )

        def step(seconds: float) -> str:  # four digits: settled and re-settled read apart
            return duration(seconds, 4)

        lines.append(
            f"Even split (local {start} each): {step(s['even_step_s'])} per step (the "
            "faster type waits). "
            + (
                f"The controller settles by step {s['settled_at']} at "
                f"{step(s['settled_step_s'])}, local batches "
                + ", ".join(f"{t} {v:.0f}" for t, v in by_type.items())
                + f" ({1 - s['settled_step_s'] / s['even_step_s']:.0%} faster per step)."
                if s["settled_at"] > 0
                else "Every worker is already inside the deadband: the controller changes nothing."
                if s["settled_at"] == 0
                else "It has not settled before the slowdown."
            )
        )
        if self.slow_factor != 1:
            lines.append(
                f"Worker 0 ({a}) turns {self.slow_factor:.3g}x slower at step {self.slow_at}: "
                f"the step jumps to {step(s['slowed_step_s'])}; "
                + (
                    f"the controller re-settles by step {s['resettled_at']} "
                    f"({counted(s['resettled_at'] - self.slow_at, 'step')} later) at "
                    f"{step(s['final_step_s'])}, where keeping the old split would "
                    f"stay at {step(s['slowed_step_s'])} per step."
                    if s["resettled_at"] >= 0
                    else f"by the last step it is at {step(s['final_step_s'])} (not yet settled)."
                )
            )
        return "\n".join(lines)


def measured_batches(
    measurements: pd.DataFrame | None,
    workload: str,
    instance_type: str,
    low: float = 0.0,
    high: float = np.inf,
) -> pd.DataFrame:
    """The measured mean step of one worker of ``workload`` on ``instance_type`` at each
    measured local batch in [low, high]: instance_type, local_bsz, measured_s (empty where
    nothing was measured)."""
    cols = ["instance_type", "local_bsz", "measured_s"]
    if measurements is None or measurements.empty:
        return pd.DataFrame(columns=cols)
    m = measurements
    m = m[
        (m["model"] == workload)
        & (m["instance_type"] == instance_type)
        & (m["num_workers"] == 1)
        & m["local_bsz"].between(low, high)
    ]
    out = m.groupby("local_bsz", as_index=False)["step_time_s"].mean()
    out.insert(0, "instance_type", instance_type)
    return out.rename(columns={"step_time_s": "measured_s"})[cols]


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
    measurements: pd.DataFrame | None = None,
    level: float = 0.9,
) -> ControllerLesson:
    """Each worker's compute line t = alpha + beta x b, the secant of the model's one-worker
    compute time at half and twice ``local_bsz`` (where the controller moves the batches), an
    even split of workers x ``local_bsz``, and the controller run with worker 0 slowed by
    ``slow_factor`` from step ``slow_at``. Beside them the model's one-worker step (and its
    interval at ``level``) over local batches from ``local_bsz`` / 8 to 4 x ``local_bsz``, and
    ``measurements``' one-worker steps there (optional).

    Raises:
        InputError: ``slow_at`` outside 1..steps-1, a ``slow_factor`` <= 0, a type without a
            GPU or one the model cannot predict.
    """
    if not 1 <= slow_at < steps:
        raise InputError(f"slow_at must be within 1..{steps - 1}, got {slow_at}")
    if not slow_factor > 0:
        raise InputError(f"slow_factor must be > 0, got {slow_factor}")
    types = _types(catalog, tuple(instance_types))
    # the planner's candidates.compute_lines linearise at batches 8 and 64; a lesson that
    # starts at 256 needs the line where its batches are, or a curved fit (the RTX 2080 Ti's)
    # puts the controller's times 15% off the model it says it uses
    grid = np.unique(np.geomspace(max(local_bsz / 8, 1), local_bsz * 4, 25).round())
    at = np.concatenate([[local_bsz / 2, local_bsz * 2], grid])
    alpha, beta, curves = np.zeros(2), np.zeros(2), []
    for i, name in enumerate(instance_types):
        p = _one_worker(model, catalog, job, name, int(types.gpus[i]), at, level)
        (c0, c1), b0, b1 = p["compute_s"][:2], at[0], at[1]
        beta[i] = max((c1 - c0) / (b1 - b0), 1e-12)
        alpha[i] = max(c0 - beta[i] * b0, 0.0)
        curves.append(
            pd.DataFrame(
                {
                    "instance_type": name,
                    "local_bsz": grid.astype(int),
                    "step_s": p["step_time_s"][2:],
                    "step_lo_s": p["step_time_lo"][2:],
                    "step_hi_s": p["step_time_hi"][2:],
                }
            )
        )
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
    lines, seen_all = [], []
    for i, name in enumerate(instance_types):
        seen = measured_steps(measurements, job.model, name, int(local_bsz), int(types.gpus[i]))
        one = seen[seen["num_workers"] == 1]
        point = _one_worker(model, catalog, job, name, int(types.gpus[i]), [local_bsz], level)
        lines.append(
            {
                "instance_type": name,
                "alpha_s": float(alpha[i]),
                "beta_s": float(beta[i]),
                "basis": basis(model, job.model, name).phrase(),
                "model_s": float(point["step_time_s"][0]),
                "measured_s": float(one["measured_step_s"].iloc[0]) if len(one) else np.nan,
                "measured_bsz": float(one["measured_bsz"].iloc[0]) if len(one) else np.nan,
            }
        )
        seen_all.append(measured_batches(measurements, job.model, name, grid[0], grid[-1]))
    return ControllerLesson(
        trace,
        (str(instance_types[0]), str(instance_types[1])),
        (counts[0], counts[1]),
        total,
        deadband,
        slow_at,
        float(slow_factor),
        pd.DataFrame(lines),
        pd.concat(curves, ignore_index=True),
        pd.concat(seen_all, ignore_index=True),
        float(level),
    )


def _one_worker(
    model: StepTimeModel,
    catalog: pd.DataFrame,
    job: Job,
    instance_type: str,
    gpus: int,
    local_bsz,
    level: float,
) -> dict[str, np.ndarray]:
    """The model's prediction of one worker on one node at each of ``local_bsz``."""
    b = np.asarray(local_bsz, float)
    ones = np.ones(b.size)
    return model.predict_arrays(
        job.model, instance_type, ones, ones, b, gpus_per_node=gpus, level=level, catalog=catalog
    )


# -- (d) point estimate against the upper end ------------------------------------------------


@dataclass(frozen=True)
class Judgement:
    """One deadline judged two ways: by the point estimate and by the upper end."""

    table: pd.DataFrame  # one row per rule: the pick, its times and costs, the miss share, why
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
        """How often each pick misses the deadline, what the safe one costs more, and what
        in each pick was never measured; each pick's prediction with the model's central
        interval at the level and the time that share of runs stays within (its upper end)."""
        pct = f"{self.level:.0%}"
        lines = [f"Deadline {hours(self.deadline_h)}, intervals at {pct}:"]
        rows = {r["rule"]: r for _, r in self.table.iterrows()}
        for rule, label in (("point", "point estimate"), ("upper", f"upper end at {pct}")):
            if rule not in rows:
                lines.append(f"Judged by the {label}: {self.extra.get(rule, 'no pick')}.")
                continue
            r = rows[rule]
            lines.append(
                f"Judged by the {label}: {config_phrase(r)}, predicted {hours(r['time_h'])} "
                f"({pct} interval {hours(r['band_lo_h'])}-{hours(r['band_hi_h'])}; {pct} of "
                f"runs within {hours(r['time_hi_h'])}), {money(r['cost_usd'])}; misses the "
                f"deadline in {r['miss_share']:.1%} of {len(self.runs[rule]):,} simulated runs. "
                + (
                    f"Never measured: {r['never_measured']}."
                    if r.get("never_measured")
                    else "Its type and node count were measured."
                )
            )
        if {"point", "upper"} <= rows.keys():
            if self.same_pick:
                lines.append(
                    "Both rules pick the same configuration: its upper end meets the deadline "
                    "too, so here the promise costs nothing more."
                )
            else:
                point, upper = rows["point"], rows["upper"]
                # the point estimate's pick is the cheapest of a superset: never dearer
                more = upper["cost_usd"] / point["cost_usd"] - 1
                lines.append(
                    f"The upper end's pick costs {more:.0%} more than the point estimate's "
                    f"({money(upper['cost_usd'])} against {money(point['cost_usd'])})"
                    + (
                        f", and both miss the deadline in {point['miss_share']:.1%} of "
                        "the runs: here the promise buys no fewer misses."
                        if self.same_misses
                        else f" and misses the deadline in {upper['miss_share']:.1%} of the "
                        f"runs against {point['miss_share']:.1%}."
                    )
                )
        return "\n".join(lines)

    @property
    def same_misses(self) -> bool:
        """Whether both rules' picks miss the deadline in the same share of runs, as the
        answer writes it (to 0.1%; False where either has no pick): two picks far inside a
        deadline both miss 0.0%."""
        if not {"point", "upper"} <= set(self.table.get("rule", ())):
            return False
        share = self.table.set_index("rule")["miss_share"]
        return f"{share['point']:.1%}" == f"{share['upper']:.1%}"

    @property
    def same_pick(self) -> bool:
        """Whether both rules picked one configuration (False where either has no pick)."""
        if not {"point", "upper"} <= set(self.table.get("rule", ())):
            return False
        table = self.table.set_index("rule")
        key = [c for c in PICK_KEY if c in table.columns]
        return table.loc["point", key].astype(str).equals(table.loc["upper", key].astype(str))


# the columns that name a configuration: two picks alike in them are the same pick
PICK_KEY = (
    "instance_type", "region", "num_nodes", "local_bsz", "pricing",
    "instance_type_2", "num_nodes_2", "local_bsz_2",
)  # fmt: skip


def _position(c: cand.Candidates, row: pd.Series) -> int:
    """Where in ``c`` the configuration of ``row`` (a row of its result table) sits: the
    search returns its pick as a table row, and the runs are drawn from the candidate's
    belief."""
    ty = c.types
    hit = (
        (ty.names[c["type"]] == row["instance_type"])
        & (ty.region[c["type"]] == row["region"])
        & (c["nodes"] == row["num_nodes"])
        & (c["workers"] == row["num_workers"])
        & (c["local_bsz"] == row["local_bsz"])
        & (c["spot"] == (row["pricing"] == "spot"))
    )
    if pd.isna(row["instance_type_2"]):
        hit &= c["type2"] < 0
    else:
        second = ty.names[np.maximum(c["type2"], 0)]
        hit &= (
            (c["type2"] >= 0)
            & (second == row["instance_type_2"])
            & (c["nodes2"] == row["num_nodes_2"])
            & (c["local_bsz2"] == row["local_bsz_2"])
        )
    return int(np.flatnonzero(hit)[0])


def deadline_judgement(
    evaluated: Evaluated, deadline_h: float, runs: int = 10_000, seed: int = 0
) -> Judgement:
    """The cheapest on-demand configuration meeting ``deadline_h`` by its point estimate and
    by its upper end (the search's own rule: ``select``), each run ``runs`` times from the
    model's belief (``run_times``, both picks in the same simulated worlds): how often each
    misses, and which of its parts were never measured (``basis``).

    Args:
        evaluated: on-demand candidates evaluated at the confidence the upper end is read at.
        deadline_h: the deadline, hours.
        runs: simulated runs of each pick.
        seed: the simulation's seed.

    Returns:
        A ``Judgement``: its table has one row per rule that found a pick, with the pick's
        result columns, ``band_lo_h`` and ``band_hi_h`` (the model's central interval at the
        confidence of its time), ``miss_share`` (its simulated runs past the deadline: the
        upper end's pick misses in up to 1 - confidence of them) and ``never_measured``.

    Raises:
        InputError: a deadline <= 0, or an evaluation of spot candidates.
    """
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
    picks, extra = {}, {}  # rule -> (position in c, its row of the result table)
    ok = np.flatnonzero(ondemand & (c["time_h"] <= deadline_h))
    if ok.size:
        best = int(ok[np.lexsort((c["time_h"][ok], c["cost_usd"][ok]))[0]])
        picks["point"] = (best, cand.to_frame(c, np.array([best])).iloc[0])
    else:
        extra["point"] = "no configuration's point estimate meets it"
    constraints = replace(evaluated.constraints, deadline_h=deadline_h, budget_usd=None)
    result = select(evaluated, constraints, objective="cost", top=1)
    if result.feasible:
        picks["upper"] = (_position(c, result.pick), result.pick)
    else:
        extra["upper"] = "no configuration's upper end meets it"
    at = np.array([i for i, _ in picks.values()], np.int64)
    # both picks run in the same simulated worlds: they share a type's errors, as in the search
    runs_h = run_times(c, at, runs, rng) if at.size else np.zeros((runs, 0))
    lo, hi = cand.belief_of({k: v[at] for k, v in c.cols.items()}).interval(level)
    sims, out = {}, []
    for j, (rule, (_, row)) in enumerate(picks.items()):
        sims[rule] = runs_h[:, j]
        known = basis(evaluated.model, evaluated.job.model, str(row["instance_type"]))
        out.append(
            {
                "rule": rule,
                **row.to_dict(),
                "band_lo_h": float(lo[j]),
                "band_hi_h": float(hi[j]),
                "miss_share": float((sims[rule] > deadline_h).mean()),
                "never_measured": known.why_wide(int(row["num_nodes"])),
            }
        )
    table = pd.DataFrame(out)
    return Judgement(table, sims, float(deadline_h), level, extra)


def disagreeing_deadline(
    evaluated: Evaluated, deadlines_h: tuple[float, ...], runs: int = 2000, seed: int = 0
) -> float | None:
    """Of ``deadlines_h``, the one where both rules find a pick, the two picks are different
    configurations, and the point estimate's pick misses most often beyond the upper end's
    (``deadline_judgement``): where the lesson's question has two answers to compare,
    whatever the model. None where no deadline has two different picks."""
    best, gap = None, -np.inf
    for d in deadlines_h:
        j = deadline_judgement(evaluated, float(d), runs=runs, seed=seed)
        if not {"point", "upper"} <= set(j.table.get("rule", ())) or j.same_pick:
            continue  # one rule has no pick, or both have one configuration: nothing to compare
        share = j.table.set_index("rule")["miss_share"]
        if share["point"] - share["upper"] > gap:
            best, gap = float(d), share["point"] - share["upper"]
    return best
