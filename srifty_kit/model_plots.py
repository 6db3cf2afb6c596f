"""Figures of the step-time model: predicted against measured, residuals by scale, breakdown.

(Kept apart from ``plots`` until that module lands; each function takes the DataFrames that
``StepTimeModel.predict``/``explain`` return and draws on a new or given matplotlib Axes.)
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns


def _axes(ax: plt.Axes | None, size: tuple[float, float] = (5.5, 4.5)) -> plt.Axes:
    return ax if ax is not None else plt.subplots(figsize=size)[1]


def predicted_vs_measured(
    pred: pd.DataFrame, measured: str = "measured_s", ax: plt.Axes | None = None
) -> plt.Axes:
    """Predicted step time (with its interval) against the measured one, by node count."""
    ax = _axes(ax)
    ax.errorbar(
        pred[measured],
        pred["step_time_s"],
        yerr=[
            pred["step_time_s"] - pred["step_time_lo"],
            pred["step_time_hi"] - pred["step_time_s"],
        ],
        fmt="none",
        ecolor="0.8",
        zorder=1,
    )
    sns.scatterplot(
        data=pred,
        x=measured,
        y="step_time_s",
        hue="num_nodes",
        palette="viridis",
        ax=ax,
        zorder=2,
        s=18,
    )
    top = float(np.nanmax(pred[[measured, "step_time_hi"]].to_numpy()))
    ax.plot([0, top], [0, top], color="0.3", lw=1, ls="--")
    ax.set(xlabel="measured step time (s)", ylabel="predicted step time (s)")
    return ax


def residuals_by_scale(
    pred: pd.DataFrame, measured: str = "measured_s", ax: plt.Axes | None = None
) -> plt.Axes:
    """Relative error (and the interval's half-widths) against the number of workers."""
    ax = _axes(ax, (6.5, 4))
    # measured inside [lo, hi]  <=>  predicted/measured - 1 inside [pred/hi - 1, pred/lo - 1]
    frame = pred.assign(
        error=pred["step_time_s"] / pred[measured] - 1,
        low=pred["step_time_s"] / pred["step_time_hi"] - 1,
        high=pred["step_time_s"] / pred["step_time_lo"] - 1,
    )
    sns.stripplot(
        data=frame, x="num_workers", y="error", hue="num_nodes", palette="viridis", size=3, ax=ax
    )
    band = frame.groupby("num_workers")[["low", "high"]].mean()
    ax.fill_between(
        np.arange(len(band)),
        band["low"],
        band["high"],
        color="0.88",
        zorder=0,
        label="interval (mean)",
    )
    ax.axhline(0, color="0.3", lw=1)
    ax.yaxis.set_major_formatter(plt.matplotlib.ticker.PercentFormatter(1.0))
    ax.set(xlabel="workers", ylabel="predicted / measured - 1")
    return ax


def breakdown(explained: pd.DataFrame, ax: plt.Axes | None = None) -> plt.Axes:
    """Stacked compute and exposed sync per worker count; hatched: sync hidden by overlap."""
    ax = _axes(ax, (6.5, 4))
    mean = explained.groupby("num_workers")[["compute_s", "sync_s", "overlap_s"]].mean()
    exposed = mean["sync_s"] - mean["overlap_s"]
    x = np.arange(len(mean))
    ax.bar(x, mean["compute_s"], label="compute", color=sns.color_palette()[0])
    ax.bar(
        x, exposed, bottom=mean["compute_s"], label="sync (exposed)", color=sns.color_palette()[1]
    )
    ax.bar(
        x,
        mean["overlap_s"],
        bottom=mean["compute_s"] + exposed,
        label="sync hidden by overlap",
        color="none",
        edgecolor=sns.color_palette()[1],
        hatch="//",
    )
    ax.set_xticks(x, mean.index)
    ax.set(xlabel="workers", ylabel="seconds per step")
    ax.legend(frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3)
    return ax
