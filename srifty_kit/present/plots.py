"""Seaborn figures of the kit's tables; each function draws on an Axes and returns it.

Measurement figures: step-time distribution per configuration, intervals of the mean and
p95, step times in measurement order (drift, outliers), the autocorrelation of the steps,
steps against effective samples, the warm-up cut and level shift, all-reduce time against size.
(matplotlib and seaborn are imported inside the functions: importing this module is cheap.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from srifty_kit.catalog.query import instance_family
from srifty_kit.decide.pareto import FRONT_COST, FRONT_TIME
from srifty_kit.errors import plain


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(7, 4))[1]


def step_time_distributions(
    measurements: pd.DataFrame,
    x: str = "local_bsz",
    hue: str | None = None,
    value: str = "step_time_s",
    ax: Any = None,
) -> Any:
    """Every step's time per configuration: violins (the shape) with the samples on top."""
    import seaborn as sns

    ax = _axes(ax)
    data = measurements.assign(**{x: measurements[x].astype(str)})
    sns.violinplot(
        data=data,
        x=x,
        y=value,
        hue=hue,
        cut=0,
        inner=None,
        density_norm="width",
        color="0.9" if hue is None else None,
        linewidth=0.8,
        ax=ax,
    )
    sns.stripplot(
        data=data,
        x=x,
        y=value,
        hue=hue,
        dodge=hue is not None,
        size=2.5,
        alpha=0.5,
        jitter=0.25,
        legend=False,
        ax=ax,
    )
    ax.set_xlabel(x)
    ax.set_ylabel("step time (s)" if value == "step_time_s" else value)
    ax.set_title("Step time per configuration (every measured step)")
    return ax


def step_time_intervals(
    summary: pd.DataFrame,
    x: str = "local_bsz",
    hue: str | None = None,
    ax: Any = None,
) -> Any:
    """Mean and p95 with their confidence intervals (a table from ``variance.describe``)."""
    ax = _axes(ax)
    level = summary.attrs.get("level")
    groups = [(None, summary)] if hue is None else list(summary.groupby(hue, sort=True))
    for i, (key, part) in enumerate(groups):
        part = part.sort_values(x)
        xs = part[x].to_numpy(float)
        label = "" if key is None else f"{hue}={key}, "
        for stat, marker, shift in (("mean", "o", -0.02), ("p95", "^", 0.02)):
            lo, hi = part[f"{stat}_lo"].to_numpy(float), part[f"{stat}_hi"].to_numpy(float)
            mid = part[stat].to_numpy(float)
            err = np.vstack([mid - lo, hi - mid])
            ax.errorbar(
                xs * (1 + shift + 0.01 * i),
                mid,
                yerr=np.where(np.isfinite(err), err, 0),
                fmt=marker + ("-" if stat == "mean" else ":"),
                capsize=3,
                label=f"{label}{stat}",
            )
    ax.set_xscale("log", base=2)
    ticks = np.unique(summary[x].to_numpy(float))
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel(x)
    ax.set_ylabel("step time (s)")
    pct = f"{level:.0%} " if level else ""
    ax.set_title(f"Mean (batch means) and p95 (block bootstrap) step time, {pct}intervals")
    ax.legend(fontsize="small")
    return ax


def step_time_trace(
    measurements: pd.DataFrame,
    hue: str = "local_bsz",
    value: str = "step_time_s",
    ax: Any = None,
) -> Any:
    """Step times in the order measured, outliers circled: warm-up and throttling show here."""
    import seaborn as sns

    from srifty_kit.measure.variance import outliers

    ax = _axes(ax)
    order = "repeat" if "repeat" in measurements else None
    data = measurements.assign(step=measurements[order] if order else np.arange(len(measurements)))
    sns.lineplot(
        data=data,
        x="step",
        y=value,
        hue=hue,
        linewidth=0.8,
        ax=ax,
        palette="viridis" if pd.api.types.is_numeric_dtype(data[hue]) else None,
    )
    flagged = pd.concat([g[outliers(g[value].to_numpy())] for _, g in data.groupby(hue)])
    ax.scatter(
        flagged["step"],
        flagged[value],
        s=40,
        facecolors="none",
        edgecolors="red",
        label="outlier (modified z > 3.5)",
    )
    ax.set_xlabel("step (in measurement order)")
    ax.set_ylabel("step time (s)" if value == "step_time_s" else value)
    ax.set_title("Step time over the run")
    ax.legend(fontsize="small")
    return ax


def step_time_acf(acf: pd.DataFrame, hue: str = "local_bsz", ax: Any = None) -> Any:
    """Autocorrelation of the kept steps per configuration (a table from
    ``variance.autocorrelation``), with the band an independent series would stay in."""
    ax = _axes(ax)
    groups = [(None, acf)] if hue not in acf else list(acf.groupby(hue, sort=True))
    for key, part in groups:
        ax.plot(part["lag"], part["acf"], marker="o", markersize=3, label=f"{hue}={key}")
    if not acf.empty:  # the widest band: the configuration with the fewest steps
        band = acf.groupby("lag")["band"].max()
        ax.fill_between(band.index, -band, band, color="0.85", label="independent steps")
    ax.axhline(0, color="0.4", linewidth=0.8)
    ax.set_xlabel("lag (steps)")
    ax.set_ylabel("autocorrelation")
    ax.set_title("Are successive steps independent? (outside the band: no)")
    ax.legend(fontsize="small")
    return ax


def effective_samples(summary: pd.DataFrame, x: str = "local_bsz", ax: Any = None) -> Any:
    """Steps measured, kept after the warm-up cut, and what they are worth as independent
    steps (``n``, ``warmup_steps``, ``n_eff`` from ``variance.describe`` or a profile
    summary), per configuration."""
    ax = _axes(ax)
    part = summary.sort_values(x)
    pos = np.arange(len(part))
    kept = part["n"].to_numpy(float) - part["warmup_steps"].to_numpy(float)
    for shift, values, label in (
        (-0.27, part["n"].to_numpy(float), "steps measured"),
        (0.0, kept, "kept (after warm-up)"),
        (0.27, part["n_eff"].to_numpy(float), "effective (independent-equivalent)"),
    ):
        ax.bar(pos + shift, values, width=0.27, label=label)
    ax.set_xticks(pos, [f"{v:g}" if isinstance(v, float) else str(v) for v in part[x]])
    ax.set_xlabel(x)
    ax.set_ylabel("steps")
    ax.set_title("Steps measured and what they are worth")
    ax.legend(fontsize="small")
    return ax


def warmup_and_shift(
    measurements: pd.DataFrame,
    drift: pd.DataFrame,
    hue: str = "local_bsz",
    value: str = "step_time_s",
    ax: Any = None,
) -> Any:
    """Each configuration's steps in order, relative to its kept mean: the warm-up cut
    shaded, a flagged level shift as a dashed line at its step (``drift`` from
    ``variance.detect_drift``)."""
    ax = _axes(ax)
    flags = drift.set_index(hue) if hue in drift else pd.DataFrame()
    for key, g in measurements.groupby(hue, sort=True):
        g = g.sort_values("repeat") if "repeat" in g else g
        y = g[value].to_numpy(float)
        cut = int(flags.loc[key, "warmup_steps"]) if key in flags.index else 0
        rel = y / np.mean(y[cut:]) if y[cut:].size else y
        (line,) = ax.plot(np.arange(y.size), rel, linewidth=0.8, label=f"{hue}={key}")
        if cut:
            ax.axvspan(-0.5, cut - 0.5, color=line.get_color(), alpha=0.15)
        if key in flags.index and bool(flags.loc[key, "drift"]):
            at = flags.loc[key, "shift_at"]
            ax.axvline(at, color=line.get_color(), linestyle="--", linewidth=1.2)
            ax.annotate(
                f"shift {flags.loc[key, 'shift']:+.1%}",
                (at, np.nanmax(rel)),
                color=line.get_color(),
                fontsize="small",
            )
    ax.axhline(1.0, color="0.4", linewidth=0.8)
    ax.set_yscale("log")  # stalls of many times the mean and a few-% shift on one axis
    ax.set_xlabel("step (in measurement order; shaded: warm-up cut)")
    ax.set_ylabel("step time / kept mean")
    ax.set_title("Warm-up cut and level shifts")
    ax.legend(fontsize="small")
    return ax


def allreduce_times(collectives: pd.DataFrame, ax: Any = None) -> Any:
    """All-reduce seconds against message bytes per world size (log-log, every sample)."""
    import seaborn as sns

    ax = _axes(ax)
    sns.scatterplot(
        data=collectives,
        x="bytes",
        y="seconds",
        hue="world_size",
        alpha=0.3,
        s=10,
        palette="viridis",
        legend=False,
        ax=ax,
    )
    med = collectives.groupby(["world_size", "bytes"], as_index=False)["seconds"].median()
    sns.lineplot(
        data=med, x="bytes", y="seconds", hue="world_size", marker="o", palette="viridis", ax=ax
    )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("all-reduce time (s)")
    ax.set_title("All-reduce time (median line, every sample dotted)")
    return ax


def cost_time_axes(level: float) -> dict[str, tuple[str, str]]:
    """The cost-time figure's coordinates, the search's front's own (``pareto.FRONT_TIME``,
    ``FRONT_COST``): {"x": (column, axis label), "y": (column, axis label)}. Every drawing
    of a search (``cost_time_front``, the panel's figure) places its cloud, front, knee, pick
    and nearest point by these columns and says them in these words."""
    return {
        "x": (FRONT_TIME, f"time to finish at {level:.0%} (h)"),
        "y": (FRONT_COST, "expected cost to finish (USD)"),
    }


def budget_label(level: float) -> str:
    """The budget line's legend: the budget is held to the cost at the confidence, which the
    expected-cost axis does not draw (a configuration under the line can still break it)."""
    return f"budget (on the cost at {level:.0%})"


def cost_time_front(
    candidates: pd.DataFrame,
    pareto: pd.DataFrame,
    knee: pd.Series | None = None,
    pick: pd.Series | None = None,
    deadline_h: float | None = None,
    budget_usd: float | None = None,
    ax: Any = None,
    level: float = 0.9,
) -> Any:
    """Searched configurations' time to finish at the confidence ``level`` against their
    expected cost (``cost_time_axes``: the front's coordinates, in which the cost objective's
    pick lies on the front), with the Pareto front, its knee, the pick, and the deadline and
    budget lines (log-log); the legend beside the plot, clear of the configurations."""
    import seaborn as sns

    ax = _axes(ax)
    (x, x_label), (y, y_label) = cost_time_axes(level).values()
    data = candidates.assign(
        status=np.where(candidates.get("feasible", True), "meets constraints", "fails"),
        family=instance_family(candidates["instance_type"]),
    )
    sns.scatterplot(
        data=data,
        x=x,
        y=y,
        hue="family",
        style="status",
        style_order=["meets constraints", "fails"],
        s=10,
        alpha=0.35,
        linewidth=0,
        ax=ax,
    )
    front = pareto.sort_values(x)
    ax.step(front[x], front[y], where="post", color="black", lw=1.2, label="Pareto front")
    for row, marker, label in ((knee, "D", "knee"), (pick, "*", "pick")):
        if row is not None:
            ax.scatter(
                [row[x]],
                [row[y]],
                marker=marker,
                s=140,
                color="crimson" if label == "pick" else "gold",
                edgecolor="black",
                zorder=5,
                label=label,
            )
    if deadline_h is not None:
        ax.axvline(deadline_h, color="0.4", ls="--", lw=1, label="deadline")
    if budget_usd is not None:
        ax.axhline(budget_usd, color="0.4", ls=":", lw=1, label=budget_label(level))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(x_label)
    ax.set_ylabel(y_label)
    ax.set_title("Cost-time tradeoff of the searched configurations")
    # beside the plot, not in it: with thousands of dots in every corner, "best" still covered
    # one corner's configurations
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return ax


def controller_convergence(trace: pd.DataFrame, ax: Any = None) -> Any:
    """OmniLearn's controller: each worker's local batch and the step time, step by step."""
    import seaborn as sns

    ax = _axes(ax)
    sns.lineplot(
        data=trace, x="step", y="local_bsz", hue="worker", palette="tab10", legend=False, ax=ax
    )
    ax.set_ylabel("local batch")
    twin = ax.twinx()
    steps = trace.groupby("step", as_index=False)["step_time_s"].first()
    twin.plot(steps["step"], steps["step_time_s"], color="black", lw=2, label="step time")
    twin.set_ylabel("step time (s)")
    twin.legend(loc="upper right", fontsize=8)
    ax.set_title("Batch split converging from an even start (global batch fixed)")
    return ax


# -- step-time model figures: StepTimeModel.predict / explain outputs ------------------------


def predicted_vs_measured(pred: pd.DataFrame, measured: str = "measured_s", ax: Any = None) -> Any:
    """Predicted step time (with its interval) against the measured one, by node count; the
    legend names the node counts, the intervals' whiskers and the diagonal.

    Args:
        pred: ``StepTimeModel.predict`` rows (``num_nodes``, ``step_time_s``,
            ``step_time_lo``, ``step_time_hi``) with the measured step times.
        measured: the column of ``pred`` holding the measured step times, in seconds.
        ax: the axes to draw on (None: a new figure).

    Returns:
        The axes.
    """
    import seaborn as sns

    ax = _axes(ax)
    below = pred["step_time_s"] - pred["step_time_lo"]
    above = pred["step_time_hi"] - pred["step_time_s"]
    ax.errorbar(
        pred[measured],
        pred["step_time_s"],
        yerr=[below, above],
        fmt="none",
        ecolor="0.8",
        zorder=1,
        label="prediction interval",
    )
    sns.scatterplot(
        data=pred,
        x=measured,
        y="step_time_s",
        hue="num_nodes",
        palette="viridis",
        s=18,
        zorder=2,
        ax=ax,
    )
    top = float(np.nanmax(pred[[measured, "step_time_hi"]].to_numpy()))
    ax.plot([0, top], [0, top], color="0.3", lw=1, ls="--", label="measured = predicted")
    ax.set(xlabel="measured step time (s)", ylabel="predicted step time (s)")
    # seaborn's legend holds the node counts only: drawn again, with the whiskers and diagonal
    ax.legend(*ax.get_legend_handles_labels(), title="num_nodes", fontsize=8)
    return ax


def residuals_by_scale(pred: pd.DataFrame, measured: str = "measured_s", ax: Any = None) -> Any:
    """Each measured step against its prediction (measured / predicted - 1) by the number of
    workers, over the interval's mean band in the same terms: the band reaches as far below
    and above 0 as ``holdout.interval_line`` says the interval reaches below and above the
    point, and a dot above 0 is a step slower than predicted.

    Args:
        pred: ``StepTimeModel.predict`` rows (``num_nodes``, ``num_workers``,
            ``step_time_s``, ``step_time_lo``, ``step_time_hi``) with the measured step times.
        measured: the column of ``pred`` holding the measured step times, in seconds.
        ax: the axes to draw on (None: a new figure).

    Returns:
        The axes.
    """
    import seaborn as sns
    from matplotlib.ticker import PercentFormatter

    ax = _axes(ax)
    # measured inside [lo, hi]  <=>  measured/predicted - 1 inside [lo/pred - 1, hi/pred - 1];
    # drawn the other way up (predicted / measured), the band ran -11%..+67% beside a line
    # saying the interval reaches 40% below the point and 13% above it
    frame = pred.assign(
        error=pred[measured] / pred["step_time_s"] - 1,
        low=pred["step_time_lo"] / pred["step_time_s"] - 1,
        high=pred["step_time_hi"] / pred["step_time_s"] - 1,
    )
    sns.stripplot(
        data=frame, x="num_workers", y="error", hue="num_nodes", palette="viridis", size=3, ax=ax
    )
    band = frame.groupby("num_workers")[["low", "high"]].mean()
    ax.fill_between(np.arange(len(band)), band["low"], band["high"], color="0.88", zorder=0)
    ax.axhline(0, color="0.3", lw=1)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set(xlabel="workers", ylabel="measured / predicted - 1 (band: interval)")
    return ax


def step_breakdown(explained: pd.DataFrame, ax: Any = None) -> Any:
    """Compute and exposed sync per configuration, stacked: a bar ends at the step time;
    hatched over the top of the compute, the sync it hid (it ran during the backward pass).

    One bar per node count and worker count: the same workers spread over more nodes sync
    over a slower network, so averaging across node counts would draw a split no
    configuration has. Bars are grouped by node count, each group named under the axis (or
    the one node count named on it). Where one pair was placed several ways (GPUs per node),
    the bar is their mean and a whisker spans their step times, lowest to highest.

    Args:
        explained: ``StepTimeModel.explain`` rows (``num_nodes``, ``num_workers``,
            ``compute_s``, ``sync_s``, ``overlap_s``; ``placement``, ``local_bsz`` optional).
        ax: the axes to draw on (None: a new figure).

    Returns:
        The axes.
    """
    import seaborn as sns
    from matplotlib.transforms import blended_transform_factory

    ax = _axes(ax)
    keys = ["num_nodes", "num_workers"]
    per = explained.groupby([*keys, "placement"] if "placement" in explained else keys)
    per = per[["compute_s", "sync_s", "overlap_s"]].mean().reset_index()
    pairs = per.groupby(keys, sort=True)
    parts = pairs[["compute_s", "sync_s", "overlap_s"]].mean()
    exposed = parts["sync_s"] - parts["overlap_s"]
    x = np.arange(len(parts))
    blue, orange = sns.color_palette()[:2]
    ax.bar(x, parts["compute_s"], label="compute", color=blue)
    ax.bar(x, exposed, bottom=parts["compute_s"], label="sync (exposed)", color=orange)
    # inside the compute bar, not stacked on it: stacked, a bar stood the hidden sync taller
    # than the step, beside the step times predicted in the figure above it
    ax.bar(
        x,
        parts["overlap_s"],
        bottom=parts["compute_s"] - parts["overlap_s"],
        color="none",
        edgecolor=orange,
        hatch="//",
        label="sync hidden by overlap",
    )
    step = per["compute_s"] + per["sync_s"] - per["overlap_s"]
    total = step.groupby([per[k] for k in keys]).agg(["min", "max"])
    placed = (pairs.size() > 1).to_numpy()
    if placed.any():
        top = (parts["compute_s"] + exposed).to_numpy()
        ax.errorbar(
            x[placed],
            top[placed],
            # a mean of sums against the sums' ends: clipped at 0 where rounding crossed them
            yerr=np.maximum(
                [(top - total["min"].to_numpy())[placed], (total["max"].to_numpy() - top)[placed]],
                0.0,
            ),
            fmt="none",
            ecolor="0.2",
            elinewidth=0.8,
            capsize=2,
        )
    index = parts.index.to_frame(index=False)
    ax.set_xticks(x, [plain(w) for w in index["num_workers"]])
    nodes = index["num_nodes"].unique()
    xlabel = "workers"
    if len(nodes) == 1:  # the node count the parts are drawn at, said on the axis
        xlabel += f" on {plain(nodes[0])} node{'' if nodes[0] == 1 else 's'}"
    else:  # each node count's bars, named under them and set apart
        under = blended_transform_factory(ax.transData, ax.transAxes)
        for k in nodes:
            at = x[(index["num_nodes"] == k).to_numpy()]
            ax.text(at.mean(), -0.09, f"{plain(k)} nodes", transform=under, ha="center", va="top")
            if at[0] > 0:
                ax.axvline(at[0] - 0.5, color="0.6", linewidth=0.8)
        xlabel += " (grouped by node count)"
    batches = explained["local_bsz"].unique() if "local_bsz" in explained else ()
    if len(batches) == 1:  # the batch the parts are drawn at
        xlabel += f", local batch {plain(batches[0])}"
    if placed.any():
        xlabel += "; whiskers: the range over placements"
    ax.set(xlabel=xlabel, ylabel="seconds per step")
    if len(nodes) > 1:
        ax.xaxis.labelpad = 16  # below the node counts' names
    ax.legend(frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3)
    return ax


def log_ticks(
    low: float, high: float, extra: tuple = (), steps: tuple = (1, 2, 5), near: float = 0.2
) -> list[float]:
    """Readable ticks for a log axis from ``low`` to ``high``: 1-2-5 (``steps``) times powers of
    ten inside the range, plus ``extra`` (a deadline, a marked value), sorted, each once; a
    regular tick within ``near`` (in log units; 0.2: 20%) of an extra one gives way to it, and
    so does an extra one as near an earlier extra one (their labels would print into one
    another: '5.5' and '6' read '5.56').

    Args:
        low, high: the axis' ends (> 0).
        extra: values that must carry a tick, the first first where two are close.
        steps: the mantissas to tick in each decade.
        near: how close (|log(a / b)|) two ticks may not be; an axis of several decades
            needs more than 20% (12.7 is 27% past 10, yet on a 3-decade axis 400 pixels
            wide their labels print into one another: '1012.7').

    Returns:
        The tick values (floats, three significant digits).
    """
    if not (low > 0 and high > low):
        return sorted({float(f"{v:.3g}") for v in extra})
    decades = range(int(np.floor(np.log10(low))), int(np.ceil(np.log10(high))) + 1)
    ticks = {float(f"{m * 10.0**d:.3g}") for d in decades for m in steps}
    marked: set[float] = set()
    for v in (float(f"{v:.3g}") for v in extra if low <= v <= high):
        if all(v == m or abs(np.log(v / m)) > near for m in marked):
            marked.add(v)
    # a regular tick this close to a marked one would print over its label
    ticks = {
        t for t in ticks if low <= t <= high and all(abs(np.log(t / v)) > near for v in marked)
    }
    return sorted(ticks | marked)
