"""Notebook 02's figures: what a bar or a band stands for is one configuration's, not a blend."""

from __future__ import annotations

import pandas as pd
import pytest

from srifty_kit.present.plots import (
    cost_time_front,
    predicted_vs_measured,
    residuals_by_scale,
    step_breakdown,
)


@pytest.fixture
def ax():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    yield ax
    plt.close(fig)


def _explained(rows) -> pd.DataFrame:
    return pd.DataFrame(
        rows, columns=["num_nodes", "num_workers", "compute_s", "sync_s", "overlap_s"]
    ).assign(local_bsz=8)


def _stack_tops(ax) -> list[float]:
    """Each bar's parts' heights summed (compute + exposed + hidden sync), left to right."""
    bars = [c for c in ax.containers if hasattr(c, "patches")]
    return [sum(c.patches[i].get_height() for c in bars) for i in range(len(bars[0].patches))]


def test_breakdown_draws_each_node_count_apart_not_their_average(ax):
    # 8 workers on 2 nodes sync over a slower network than 8 on 1: two bars, each its own
    explained = _explained([(1, 8, 0.5, 0.2, 0.1), (2, 8, 0.5, 0.6, 0.1), (2, 16, 0.5, 0.8, 0.1)])
    step_breakdown(explained, ax)
    assert _stack_tops(ax) == pytest.approx([0.5 + 0.2, 0.5 + 0.6, 0.5 + 0.8])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "8", "16"]
    assert {t.get_text() for t in ax.texts} == {"1 nodes", "2 nodes"}
    assert "grouped by node count" in ax.get_xlabel() and "local batch 8" in ax.get_xlabel()


def test_breakdown_at_one_node_count_names_it_on_the_axis(ax):
    explained = _explained([(4, w, 0.6, 0.1 * w, 0.05) for w in (4, 8, 12)] * 2)  # rows repeat
    step_breakdown(explained, ax)
    assert _stack_tops(ax) == pytest.approx([0.6 + 0.1 * w for w in (4, 8, 12)])
    assert ax.get_xlabel() == "workers on 4 nodes, local batch 8"
    assert not ax.texts


def _bar_tops(ax) -> list[float]:
    """Where each bar ends on the axis, left to right: its highest patch's top."""
    bars = [c for c in ax.containers if hasattr(c, "patches")]
    return [
        max(c.patches[i].get_y() + c.patches[i].get_height() for c in bars)
        for i in range(len(bars[0].patches))
    ]


def test_a_bar_ends_at_the_step_time_under_seconds_per_step(ax):
    # the sync hidden by overlap ran during the compute: a step is compute + exposed sync
    # (0.6 + 0.4 - 0.3 = 0.7 s), and the bar stood 0.3 s taller, at 1.0 s, beside predicted
    # step times of 0.7 s in the figure above it
    explained = _explained([(1, 4, 0.6, 0.4, 0.3), (2, 8, 0.6, 0.9, 0.2)])
    step_breakdown(explained, ax)
    assert _bar_tops(ax) == pytest.approx([0.7, 1.3])
    hidden = next(c for c in ax.containers if c.get_label() == "sync hidden by overlap")
    # drawn over the top of the compute it hid under
    assert [p.get_y() for p in hidden.patches] == pytest.approx([0.6 - 0.3, 0.6 - 0.2])


def test_breakdown_spans_the_placements_of_one_worker_count_with_a_whisker(ax):
    # 6 workers on 2 nodes placed 3+3 and 4+2: one bar at their mean, a whisker over both
    explained = _explained([(2, 6, 0.5, 0.3, 0.1), (2, 6, 0.5, 0.5, 0.1)]).assign(
        placement=["33", "42"]
    )
    step_breakdown(explained, ax)
    assert _stack_tops(ax) == pytest.approx([0.9])
    (whisker,) = [c for c in ax.containers if hasattr(c, "has_yerr") and c.has_yerr]
    segment = whisker.lines[2][0].get_segments()[0]
    # their step times, compute + sync - hidden: 0.7 and 0.9 s
    assert [y for _, y in segment] == pytest.approx([0.7, 0.9])
    assert "whiskers: the range over placements" in ax.get_xlabel()


def test_placements_of_one_step_time_draw_their_bar_without_a_rounding_error(ax):
    # two placements of 0.1 + 0.7 - 0.3: the bar's top, 0.1 + (0.7 - 0.3), rounds above the
    # placements' step time, (0.1 + 0.7) - 0.3, and a negative whisker stopped the figure
    explained = _explained([(2, 6, 0.1, 0.7, 0.3), (2, 6, 0.1, 0.7, 0.3)]).assign(
        placement=["33", "42"]
    )
    step_breakdown(explained, ax)
    assert _bar_tops(ax) == pytest.approx([0.5])
    assert ax.get_ylabel() == "seconds per step"


def _predicted(**columns) -> pd.DataFrame:
    """Two predictions with their intervals (40% below the point, 13% above) and measured
    steps 10% over and under them, plus ``columns``."""
    return pd.DataFrame(
        {
            **columns,
            "step_time_s": [1.0, 2.0],
            "step_time_lo": [0.6, 1.2],
            "step_time_hi": [1.13, 2.26],
            "measured_s": [1.1, 1.8],
        }
    )


def test_the_residual_band_reads_as_the_interval_line_says_it(ax):
    # notebook 02's line: "the 90% interval reaches 40% below the point and 13% above it";
    # the band drawn as predicted / measured - 1 ran from -11% to +67%, the other way round
    pred = _predicted(num_nodes=[2, 2], num_workers=[8, 8])
    residuals_by_scale(pred, "measured_s", ax)
    from matplotlib.collections import PathCollection, PolyCollection

    (band,) = [c for c in ax.collections if isinstance(c, PolyCollection)]
    ys = band.get_paths()[0].vertices[:, 1]
    assert (ys.min(), ys.max()) == pytest.approx((-0.40, 0.13))
    dots = [c for c in ax.collections if isinstance(c, PathCollection)]
    points = sorted(y for c in dots for _, y in c.get_offsets())
    assert points == pytest.approx([-0.1, 0.1])  # measured 10% under and over the point
    assert ax.get_ylabel().startswith("measured / predicted - 1")


def test_the_cost_time_legend_covers_no_configuration(ax):
    # notebook 03's static figure: with 4,000 dots in every corner, loc="best" still laid the
    # legend (ten families, status, front, knee, pick, deadline) over the dots of one corner
    import numpy as np

    rng = np.random.default_rng(0)
    n = 4000
    families = ["g4dn", "g5", "g6", "g6e", "p3dn", "p4d", "p4de", "p5", "p5en"]
    candidates = pd.DataFrame(
        {
            "instance_type": [f"{families[i % len(families)]}.xlarge" for i in range(n)],
            "time_hi_h": np.exp(rng.uniform(0, 8, n)),
            "cost_mean_usd": np.exp(rng.uniform(4, 10, n)),
            "feasible": rng.random(n) < 0.3,
        }
    )
    front = candidates.nsmallest(5, "cost_mean_usd")
    cost_time_front(candidates, front, front.iloc[2], front.iloc[0], deadline_h=24.0, ax=ax)
    ax.figure.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    plot = ax.get_window_extent()
    assert legend.x0 >= plot.x1 or legend.y0 >= plot.y1, (legend, plot)  # beside the plot


def test_predicted_against_measured_names_its_whiskers_and_its_diagonal(ax):
    # the grey whiskers (each prediction's interval) and the dashed diagonal were named only
    # in the notebook's prose; the legend named the node counts alone
    pred = _predicted(num_nodes=[2, 4])
    predicted_vs_measured(pred, "measured_s", ax)
    said = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"2", "4", "prediction interval", "measured = predicted"} <= set(said), said
