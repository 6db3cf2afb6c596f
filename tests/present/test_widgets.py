"""SearchPanel without a browser: its controls drive the decide layer, errors land in the panel."""

from __future__ import annotations

import asyncio
import html
import io
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from srifty_kit.catalog.query import load_catalog
from srifty_kit.decide.explanation import config_phrase
from srifty_kit.decide.planner import Constraints, Evaluated, Job, search
from srifty_kit.errors import InputError
from srifty_kit.present import widgets
from srifty_kit.present.plots import cost_time_axes
from srifty_kit.present.widgets import (
    CLASSES,
    CLOUD_COLORS,
    MARKS,
    PREFETCH_AFTER_S,
    SearchPanel,
    cloud_png,
    log_choices,
)

JOB = Job("resnet", samples=1.2e8, reference_bsz=256, noise_scale=4096, local_bsz=(16, 32, 64))
START = Constraints(deadline_h=20.0, max_nodes=8)


@pytest.fixture(scope="module")
def catalog() -> pd.DataFrame:
    return load_catalog()


@pytest.fixture
def panel(model, catalog) -> SearchPanel:
    return SearchPanel(model, catalog, JOB, START)


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(a.ranked, b.ranked)
    pd.testing.assert_frame_equal(a.pareto, b.pareto)
    assert a.explanation == b.explanation


def test_every_control_and_output_carries_its_css_class(panel):
    for name, control in panel.controls.items():
        assert CLASSES[name] in control._dom_classes
    for name in ("message", "table", "why"):
        assert CLASSES[name] in getattr(panel, name)._dom_classes
    assert CLASSES["figure"] in panel.figure._dom_classes
    assert CLASSES["panel"] in panel.widget._dom_classes


def test_moving_the_deadline_reranks_without_evaluating_again(panel, model, catalog):
    first = panel.evaluated
    options = [v for _, v in panel.controls["deadline"].options]
    tighter = options[options.index(20.0) - 10]
    panel.controls["deadline"].value = tighter
    assert panel.evaluated is first  # the same arrays, re-filtered
    _same(panel.result, search(model, catalog, JOB, replace(START, deadline_h=tighter)))
    assert f'data-deadline="{tighter!r}"' in panel.table.value
    assert config_phrase(panel.result.pick) in panel.table.value
    assert panel.marks["deadline"].x.tolist()[::3] == [tighter, tighter]  # the shade's edge
    assert panel.marks["pick"].x.tolist() == [panel.result.pick["time_hi_h"]]
    assert len(panel.marks["front_dots"].x) == len(panel.result.pareto)


def test_the_reason_shown_below_the_panel_follows_its_controls(panel):
    view = panel.reason_view()
    assert view is panel.reason_view() and CLASSES["reason"] in view._dom_classes
    first = panel.explanation
    assert html.escape(first) in view.value
    options = [v for _, v in panel.controls["deadline"].options]
    panel.controls["deadline"].value = options[options.index(20.0) - 10]
    assert panel.explanation != first  # another pick: the view says it, not the first one
    assert html.escape(panel.explanation) in view.value
    panel.controls["deadline"].value = options[0]  # nothing fits: why, in the view too
    assert "Infeasible" in panel.explanation
    assert html.escape(panel.explanation) in view.value
    # a saved notebook or its HTML export, without the widget, reads the sentences
    assert view._repr_mimebundle_()["text/plain"] == panel.explanation


def test_objective_and_budget_rerank_the_same_evaluation(panel, model, catalog):
    first = panel.evaluated
    panel.controls["objective"].value = "time"
    budget = min((v for _, v in panel.controls["budget"].options), key=lambda v: abs(v - 500))
    panel.controls["budget_on"].value = True
    panel.controls["budget"].value = budget
    assert panel.evaluated is first
    want = search(model, catalog, JOB, replace(START, budget_usd=budget), objective="time")
    _same(panel.result, want)
    assert panel.marks["budget"].y.tolist() == [budget, budget]


def test_a_budget_below_every_cost_is_drawn_on_the_figure(panel):
    """The dotted budget line stays on the chart when nothing is that cheap, so the reader sees
    why nothing fits; moved back up, the axis is the cloud's again."""
    cloud = (panel.scales["y"].min, panel.scales["y"].max)
    panel.controls["budget"].value = panel.controls["budget"].options[0][1]  # $1
    assert panel.controls["budget_on"].value and not panel.result.feasible
    assert "budget binds" in panel.message.value
    low, high = panel.scales["y"].min, panel.scales["y"].max
    assert low < 1.0 < high and high == cloud[1]  # the line within the axis, the top kept
    assert panel.marks["budget"].y.tolist() == [1.0, 1.0]
    ticks = panel.figure.axes[1].tick_values
    assert ticks is None or min(ticks) <= 1.0  # a tick at or below it says its value
    shade = panel.marks["deadline"].y.tolist()
    assert min(shade) == low and max(shade) == high  # the deadline's shade still spans it
    panel.controls["budget_on"].value = False
    assert (panel.scales["y"].min, panel.scales["y"].max) == cloud


def test_spot_evaluates_once_and_toggling_back_reuses_it(panel, model, catalog):
    on_demand = panel.evaluated
    panel.controls["spot"].value = True
    with_spot = panel.evaluated
    limit = START.max_nodes
    assert with_spot is not on_demand
    assert len(with_spot.within(limit)) > len(on_demand.within(limit))  # its spot rows
    _same(panel.result, search(model, catalog, JOB, replace(START, spot=True)))
    panel.controls["spot"].value = False
    assert panel.evaluated is on_demand
    panel.controls["spot"].value = True
    assert panel.evaluated is with_spot


def _inside_the_axes(panel) -> None:
    """Every point the figure draws lies inside its axes' ends (none cut off by the frame)."""
    for name in ("cloud", "front_dots", "pick", "knee"):  # the cloud: its image's corners
        mark = panel.marks[name]
        for axis, values in (("x", mark.x), ("y", mark.y)):
            scale = panel.scales[axis]
            v = np.asarray(values, float)
            assert ((v >= scale.min) & (v <= scale.max)).all(), (name, axis)


def test_confidence_moves_answer_as_search_does_on_axes_that_stay_while_they_fit(model, catalog):
    # a confidence move prices only the rows within the node limit; the axes drawn stay
    # while the new prices fit them, and a later node limit above it prices the rest
    panel = SearchPanel(model, catalog, JOB, START)
    x = (panel.scales["x"].min, panel.scales["x"].max)
    panel.controls["confidence"].value = 0.89
    assert (panel.scales["x"].min, panel.scales["x"].max) == x  # one stop: the same frame
    moves = ((0.8, 8), (0.8, 24), (0.99, 24), (0.6, 4), (0.6, 40), (0.6, 4))
    for confidence, nodes in moves:
        panel.controls["confidence"].value = confidence
        panel.controls["max_nodes"].value = nodes
        asked = replace(START, confidence=confidence, max_nodes=nodes)
        _same(panel.result, search(model, catalog, JOB, asked))
        assert f'data-confidence="{confidence!r}"' in panel.table.value
        _inside_the_axes(panel)
        _assert_the_cloud_holds_every_candidate(panel)
    # spot allowed at a low limit prices its rows within it, on cost axes widened down to
    # them; rising past the limit prices the rest, and each limit's cloud lies where its image
    # was binned
    y = (panel.scales["y"].min, panel.scales["y"].max)
    for nodes in (4, 64, 4):
        panel.controls["spot"].value = True
        panel.controls["max_nodes"].value = nodes
        _same(
            panel.result,
            search(model, catalog, JOB, replace(START, confidence=0.6, max_nodes=nodes, spot=True)),
        )
        _inside_the_axes(panel)
        _assert_the_cloud_holds_every_candidate(panel)
    assert panel.scales["y"].min < y[0]  # the spot rows' lower costs widened the axis


def _pixels(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


def test_the_cloud_colours_each_bin_by_its_share_on_spot_and_its_count():
    # 30 on-demand configurations in one bin, 3 on spot in another, one of each in a third
    x = np.array([1.0] * 30 + [100.0] * 3 + [10.0, 10.0])
    spot = np.array([False] * 30 + [True] * 3 + [False, True])
    rgba = _pixels(cloud_png(x, x, spot, (0.1, 1000.0), (0.1, 1000.0), bins=(4, 4)))
    # each bin a decade: x = 1 in the second column, the second row from the bottom
    lone, few, mixed = rgba[2, 1], rgba[0, 3], rgba[1, 2]
    assert tuple(lone[:3]) == CLOUD_COLORS["on-demand"] and tuple(few[:3]) == CLOUD_COLORS["spot"]
    assert mixed[3] < few[3] < lone[3] and lone[3] > 200  # darker where more lie
    between = np.mean([CLOUD_COLORS["on-demand"], CLOUD_COLORS["spot"]], axis=0)
    assert np.abs(mixed[:3] - between).max() <= 1
    assert (rgba[..., 3] > 0).sum() == 3  # nothing drawn where nothing lies


def _assert_the_cloud_holds_every_candidate(panel) -> None:
    """Every candidate the search weighed lies in a bin the cloud's image draws, placed where
    the image lies on the axes, and no other bin is drawn."""
    cloud, c = panel.marks["cloud"], panel.result.candidates
    (x, _), (y, _) = cost_time_axes(panel.result.constraints.confidence).values()
    rgba = _pixels(cloud.image.value)
    ny, nx = rgba.shape[:2]
    at = [
        np.floor(np.log(c[k] / lo) / np.log(hi / lo) * n).astype(int)
        for k, (lo, hi), n in ((x, cloud.x, nx), (y, cloud.y, ny))
    ]
    want = np.zeros((ny, nx), bool)
    want[ny - 1 - at[1], at[0]] = True
    assert ((rgba[..., 3] > 0) == want).all() and want.sum() > 10


def test_the_cloud_draws_every_configuration_within_the_node_limit(panel):
    panel.controls["max_nodes"].value = 6
    _assert_the_cloud_holds_every_candidate(panel)
    panel.controls["max_nodes"].value = START.max_nodes


def test_a_deadline_nothing_meets_says_what_binds_in_the_panel(panel):
    panel.controls["deadline"].value = panel.controls["deadline"].options[0][1]
    assert panel.error is None and not panel.result.feasible
    assert "deadline binds" in panel.message.value and "Nearest" in panel.message.value
    assert "<tbody></tbody>" in panel.table.value
    assert len(panel.marks["pick"].x) == 0 and len(panel.marks["nearest"].x) == 1


def test_a_filter_nothing_passes_is_a_message_not_a_traceback(panel):
    panel.controls["families"].value = ("p4d",)
    panel.controls["gpus"].value = ("T4",)
    assert isinstance(panel.error, InputError) and panel.result is None
    assert "srifty-error" in panel.message.value and "T4" in panel.message.value
    assert "no instance type has T4" in panel.explanation
    panel.controls["gpus"].value = ()  # back to a search that works
    assert panel.error is None and panel.result is not None


def test_a_gpu_without_figures_is_refused_in_one_line_in_the_panel(panel):
    # the A10G has no vendor figures and the panel's workload was never measured on it: no
    # step time can be carried there, and the panel says so instead of "nothing passes"
    panel.controls["gpus"].value = ("A10G",)
    assert isinstance(panel.error, InputError) and panel.result is None
    text = panel.message.value
    assert "A10G" in text and "no GPU figures" in text and "measure one step" in text
    panel.controls["gpus"].value = ()
    assert panel.error is None and panel.result is not None


def test_gpu_models_narrow_the_search_to_their_instance_types(panel, catalog):
    panel.controls["gpus"].value = ("L4",)
    types = set(panel.result.ranked["instance_type"])
    l4 = set(catalog.loc[catalog["gpu_model"] == "L4", "instance_type"])
    assert types and types <= l4


def test_slider_stops_hold_the_starting_value_exactly():
    stops = [v for _, v in log_choices(7.25, 0.01, 1000.0)]
    assert 7.25 in stops and stops == sorted(stops)
    assert stops[0] == 0.01 and stops[-1] == 1000.0


# -- notebook 05's lesson panels ---------------------------------------------------------------

LESSON_JOB = replace(JOB, local_bsz=None, checkpoint_gb=10.0)


def test_lesson_panels_answer_what_the_decide_layer_answers(model, catalog):
    from srifty_kit.decide import tradeoffs
    from srifty_kit.decide.planner import evaluate
    from srifty_kit.present.lessons import ControllerLesson, VarianceLesson

    lesson = VarianceLesson(model, catalog, LESSON_JOB, deadline_h=5.0, max_nodes=8, runs=300)
    first = lesson.evaluated
    answer = lesson.ask(12.0)  # one of the slider's round stops
    moved = lesson.controls["deadline"].value
    assert moved == 12.0 and lesson.evaluated is first
    ev = evaluate(model, catalog, LESSON_JOB, Constraints(confidence=0.9, max_nodes=8))
    assert answer == tradeoffs.deadline_judgement(ev, moved, runs=300).text()
    assert 'data-inputs="' in lesson.answer_box.value and "deadline_h" in lesson.answer_box.value

    controller = ControllerLesson(model, catalog, LESSON_JOB, local_bsz=32)
    want = tradeoffs.controller_lesson(model, catalog, LESSON_JOB, local_bsz=32, slow_factor=2.0)
    assert controller.ask(2.0) == want.text()
    assert controller.marks["batches"].y.shape == (8, 40)  # one line per worker, 40 steps


def test_a_lesson_shows_what_is_wrong_in_its_panel(model, catalog):
    from srifty_kit.present.lessons import ScalingLesson

    lesson = ScalingLesson(
        model, catalog, LESSON_JOB, instance_types=("g4dn.12xlarge", "c7i.large"), local_bsz=32
    )
    good = lesson.answer
    lesson.controls["instance_type"].value = "c7i.large"
    assert isinstance(lesson.error, InputError)
    assert "no GPU" in lesson.message.value and "srifty-error" in lesson.message.value
    assert lesson.answer == good  # the last good answer stays, the message says why not
    lesson.controls["instance_type"].value = "g4dn.12xlarge"
    assert lesson.error is None and lesson.message.value == ""


def test_the_panel_says_what_to_measure_next_on_demand_and_forgets_it_on_a_change(model):
    from srifty_kit import Constraints, Job, load_catalog
    from srifty_kit.present.widgets import SearchPanel

    catalog = load_catalog()
    catalog = catalog[catalog["instance_type"].isin(["g4dn.12xlarge", "g6.12xlarge"])]
    job = Job("resnet", samples=2e8, local_bsz=(32,))
    panel = SearchPanel(model, catalog, job, Constraints(deadline_h=14, max_nodes=16))
    assert panel.probe.value == ""
    panel.probe_button.click()
    said = panel.probe.value
    assert said.startswith("Measure ") or said.startswith("No short measurement")
    panel.controls["max_nodes"].value = 8
    assert panel.probe.value == ""


def test_the_table_shows_the_expected_cost_it_is_ranked_by(model, catalog):
    import re

    from srifty_kit.present.widgets import ranked_html

    result = search(model, catalog, JOB, replace(START, spot=True))
    table = ranked_html(result, {})
    heads = re.findall(r"<th>(.*?)</th>", table)
    column = heads.index("expected cost $")
    assert "cost $" not in heads  # no unlabelled cost beside it
    shown = [
        float(re.findall(r"<td>(.*?)</td>", row)[column])
        for row in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])
    ]
    assert shown == sorted(shown) and len(shown) == len(result.ranked)
    assert shown == [float(f"{c:.4g}") for c in result.ranked["cost_mean_usd"]]


def test_the_table_says_each_configurations_chance_to_meet_in_percent(panel):
    import re

    # the search keeps a configuration when its chance to meet the deadline and budget is at
    # least the confidence; the panel's table did not say it, and wrote the efficiency as
    # 0.9562 where notebook 03's static table writes 96%
    table = panel.table.value
    heads = re.findall(r"<th>(.*?)</th>", table)
    rows = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", table)[1:]]
    ranked = panel.result.ranked
    meets = [row[heads.index("P(meet)")] for row in rows]
    assert meets == [f"{p:.0%}" for p in ranked["p_meet"]]
    assert all(int(m.rstrip("%")) >= 90 for m in meets)  # the confidence the panel holds to
    efficiency = [row[heads.index("efficiency")] for row in rows]
    assert efficiency == [f"{e:.0%}" for e in ranked["efficiency"]]


def test_the_sliders_read_their_stops_as_people_write_numbers(panel):
    # the noise scale read '2e+03' and '2.24e+03', the samples '1.2e+08', the budget '1e+06'
    for name in ("samples", "noise", "budget"):
        labels = [label for label, _ in panel.controls[name].options]
        assert not [t for t in labels if "e" in t], (name, labels)
    noise = dict(panel.controls["noise"].options)
    assert noise["4,096"] == 4096.0 and noise["11.2"] == 11.2
    assert dict(panel.controls["samples"].options)["120M"] == 1.2e8
    # and short enough for the readout: '20,900,000' lost its last digit there
    assert max(len(label) for label, _ in panel.controls["samples"].options) <= 7


def test_the_tables_caption_says_its_order_not_the_count_said_above_it(panel):
    import re

    # the message right above the table says "N of M configurations meet the constraints."
    # and the caption said it again, word for word
    caption = re.search(r"<caption>(.*?)</caption>", panel.table.value).group(1)
    result = panel.result
    assert caption == (
        f"the first {len(result.ranked)} of {result.n_feasible:,} that meet the constraints, "
        "by expected cost"
    )
    panel.controls["objective"].value = "time"
    assert re.search(r"<caption>.*by time at 90%</caption>", panel.table.value)
    panel.controls["deadline"].value = panel.controls["deadline"].options[0][1]
    assert "<caption>none to rank</caption>" in panel.table.value


def test_the_tables_ends_are_titled_by_their_confidence_not_as_upper(panel):
    import re

    # at 50% the end of a wide belief lies below the expected cost: a column titled "cost $
    # (upper)" beside a larger "expected cost $" read as a bug
    panel.controls["confidence"].value = 0.5
    result, table = panel.result, panel.table.value
    heads = re.findall(r"<th>(.*?)</th>", table)
    assert "time h at 50%" in heads and "cost $ at 50%" in heads
    assert not any("upper" in h for h in heads)
    assert (result.ranked["cost_hi_usd"] < result.ranked["cost_mean_usd"]).any()  # the case
    column = heads.index("cost $ at 50%")
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1])
    shown = [float(re.findall(r"<td>(.*?)</td>", row)[column]) for row in rows]
    assert shown == [float(f"{c:.4g}") for c in result.ranked["cost_hi_usd"]]


def test_an_error_leaves_nothing_of_the_last_search_in_the_figure(panel):
    cloud = panel.marks["cloud"]
    drawn = cloud.image.value
    assert cloud.visible and len(panel.marks["deadline"].x) > 0
    panel.controls["gpus"].value = ("A10G",)  # refused: no figures to predict it by
    assert panel.error is not None and not cloud.visible
    for name in MARKS:
        assert name == "cloud" or len(panel.marks[name].x) == 0, name
    panel.controls["gpus"].value = ()  # the same evaluation as before, drawn again
    assert panel.error is None and cloud.visible and cloud.image.value == drawn
    assert len(panel.marks["deadline"].x) > 0


def test_a_family_whose_gpus_cannot_be_predicted_is_refused_in_one_line(panel):
    # the g5 holds only A10Gs (no figures, never measured for resnet): the panel says so once,
    # as `srifty search --families g5` does, not once per type under "widen instance types"
    panel.controls["families"].value = ("g5",)
    assert isinstance(panel.error, InputError) and panel.result is None
    text = panel.message.value
    assert "families g5" in text and "A10G" in text and "no GPU figures" in text
    assert text.count("gpu_fp32_tflops") == 1 and "vCPU quota" not in text
    panel.controls["families"].value = ("g5", "g6")  # the g6 can be predicted: a search
    assert panel.error is None and set(panel.result.ranked["instance_type"].str[:3]) == {"g6."}


def test_moving_an_unticked_deadline_or_budget_turns_it_on(panel, model, catalog):
    panel.controls["deadline_on"].value = False
    assert panel.result.why.deadline_h is None
    options = [v for _, v in panel.controls["deadline"].options]
    tighter = options[options.index(20.0) - 10]
    panel.controls["deadline"].value = tighter
    assert panel.controls["deadline_on"].value is True
    assert f'data-deadline="{tighter!r}"' in panel.table.value
    budget = min((v for _, v in panel.controls["budget"].options), key=lambda v: abs(v - 500))
    panel.controls["budget"].value = budget
    assert panel.controls["budget_on"].value is True
    want = search(model, catalog, JOB, replace(START, deadline_h=tighter, budget_usd=budget))
    _same(panel.result, want)


def test_the_panel_says_what_it_left_out_as_the_cli_does(panel, model, catalog):
    # families g5 and g6: the A10G (g5) has no figures and the workload was never measured on
    # it, so only g6 is searched; the CLI says so, the panel said nothing
    from srifty_kit.decide.choices import left_out_lines

    panel.controls["families"].value = ("g5", "g6")
    assert panel.error is None and panel.result is not None
    said = left_out_lines(panel.result, catalog, model, JOB.model, "a catalog")
    assert any("A10G" in line for line in said)
    assert all(html.escape(line) in panel.message.value for line in said)


def test_the_reason_nothing_fits_is_said_once(panel):
    panel.controls["deadline"].value = panel.controls["deadline"].options[0][1]
    assert not panel.result.feasible and "deadline binds" in panel.message.value
    assert "deadline binds" not in panel.why.value


def test_a_family_retired_in_the_region_is_marked_and_said_in_one_sentence(panel, catalog):
    # every p3 type is retired in us-east-1: the family control says so before any search, and
    # choosing it says why nothing is searched with the panel's own controls, not "widen
    # instance types, memory or the vCPU quota" (the panel has none of those)
    labels = dict((v, label) for label, v in panel.controls["families"].options)
    assert labels["p3"] == "p3 (retired in us-east-1)" and labels["p3dn"] == "p3dn"
    panel.controls["families"].value = ("p3",)
    assert isinstance(panel.error, InputError) and panel.result is None
    text = str(panel.error)
    assert "every p3 type" in text and "retired in us-east-1" in text
    assert "nothing to search" in text and "p3dn (the same V100 GPUs)" in text
    for absent in ("instance types", "memory", "vCPU"):
        assert absent not in text
    assert html.escape(text) in panel.message.value and not panel.marks["cloud"].visible
    # the V100 is the p3dn's and the p3's: the GPU filter searches only the one on offer
    panel.controls["families"].value = ()
    panel.controls["gpus"].value = ("V100",)
    assert panel.error is None
    assert set(panel.result.sample(n=100_000)["instance_type"]) == {"p3dn.24xlarge"}
    panel.controls["families"].value = ("p3",)
    assert "GPU models V100 in families p3: every p3 type" in str(panel.error)


def test_the_figures_draw_the_pick_on_the_front_in_the_words_of_their_axes(model, catalog):
    # one batch of 8: the pick by expected cost is less sure than a dearer point; drawn at its
    # 90% ends it sat above the front, which was over the 90% ends too. The panel and notebook
    # 03's figure (srifty demo's report) now draw in the front's coordinates and say which
    import matplotlib.pyplot as plt

    from srifty_kit.decide.pareto import FRONT_COST, FRONT_TIME
    from srifty_kit.present.plots import cost_time_front

    panel = SearchPanel(model, catalog, replace(JOB, local_bsz=(8,)), Constraints(max_nodes=8))
    result, marks = panel.result, panel.marks
    pick = (result.pick[FRONT_TIME], result.pick[FRONT_COST])
    assert (marks["pick"].x.tolist(), marks["pick"].y.tolist()) == ([pick[0]], [pick[1]])
    assert (marks["front_dots"].x[-1], marks["front_dots"].y[-1]) == pick  # its cheapest point
    words = ["time to finish at 90% (h)", "expected cost to finish (USD)"]
    assert [axis.label for axis in panel.figure.axes] == words
    panel.controls["confidence"].value = 0.8
    assert panel.figure.axes[0].label == "time to finish at 80% (h)"
    result = panel.result
    fig, ax = plt.subplots()
    try:
        cost_time_front(
            result.sample(200), result.pareto, result.knee, result.pick, ax=ax, level=0.8
        )
        assert [ax.get_xlabel(), ax.get_ylabel()] == [a.label for a in panel.figure.axes]
        drawn = {c.get_label(): c.get_offsets().tolist() for c in ax.collections}
        assert drawn["pick"] == [[marks["pick"].x[0], marks["pick"].y[0]]]
        front = next(line for line in ax.lines if line.get_label() == "Pareto front")
        assert front.get_xdata().tolist() == marks["front"].x.tolist()
        assert front.get_ydata().tolist() == marks["front"].y.tolist()
    finally:
        plt.close(fig)


@pytest.fixture(scope="module")
def profiled():
    """The packaged profiles (mlp, cnn, transformer on this project's own runs), fitted, and
    their facts' noise scales: a model with several workloads, as notebook 03 gets one."""
    import json
    import warnings

    from srifty_kit import StepTimeModel
    from tests.builders import REPO

    parts = [pd.read_csv(REPO / "data" / f"sample_profile_{k}.csv") for k in ("single", "dist")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = StepTimeModel().fit(pd.concat(parts, ignore_index=True))
    facts = json.loads((REPO / "data" / "sample_profile_facts.json").read_text())
    return model, {name: f["noise_scale"] for name, f in facts.items()}


def test_switching_the_workload_takes_its_own_batches_and_noise_scale(profiled, catalog):
    model, noise = profiled
    job = Job("mlp", samples=1e9, reference_bsz=64, noise_scale=noise["mlp"], local_bsz=(8, 32))
    start = Constraints(deadline_h=2.0, budget_usd=50.0, confidence=0.8, spot=True)
    panel = SearchPanel(model, catalog, job, start, noise_scales={"cnn": noise["cnn"]})
    ctl = panel.controls
    assert ctl["batches"].value == (8, 32) and ctl["noise"].value == noise["mlp"]
    ctl["max_nodes"].value = 4  # a setting of the user's, kept across the switch
    evaluations = len(panel._cache)
    ctl["workload"].value = "cnn"  # profiled at 4-32, its own noise scale
    assert ctl["batches"].value == (4, 8, 16, 32) and ctl["noise"].value == noise["cnn"]
    assert ctl["noise_on"].value is True
    searched = panel.result.job
    assert (searched.model, searched.local_bsz, searched.noise_scale) == (
        "cnn",
        (4, 8, 16, 32),
        noise["cnn"],
    )
    assert len(panel._cache) == evaluations + 1  # one search, with every control switched
    kept = panel.result.constraints
    assert (kept.deadline_h, kept.budget_usd, kept.confidence, kept.spot) == (2.0, 50.0, 0.8, True)
    assert kept.max_nodes == 4
    assert 'data-budget="50.0"' in panel.table.value
    ctl["workload"].value = "transformer"  # no noise scale given: none, not cnn's
    assert ctl["noise_on"].value is False and panel.result.job.noise_scale is None
    assert panel.result.job.local_bsz == (4, 8, 16, 32)
    ctl["workload"].value = "mlp"  # back: the job's own values
    assert panel.result.job == replace(job)


def test_every_objective_the_panel_offers_draws_its_pick_on_the_front(profiled, catalog):
    # on the sample profile's cnn on-demand, the pick by throughput per dollar (ranked by the
    # hourly rate) was 1 x g6.xlarge, slower and dearer than 1 x g6e.xlarge on the front: the
    # red square sat off the black steps
    model, _ = profiled
    job = Job("cnn", samples=5e7, reference_bsz=64)
    panel = SearchPanel(model, catalog, job, Constraints(deadline_h=10.0))
    for objective in panel.controls["objective"].options:
        panel.controls["objective"].value = objective
        marks = panel.marks
        front = marks["front_dots"]
        drawn = set(zip(front.x.tolist(), front.y.tolist(), strict=True))
        pick = (marks["pick"].x.tolist()[0], marks["pick"].y.tolist()[0])
        assert pick in drawn, objective
        assert config_phrase(panel.result.pick) in panel.table.value


def test_the_spot_lessons_marked_intervals_never_print_over_each_other(model, catalog):
    """At the question's stop, 6 h, the cheapest interval (Young/Daly's, 5.51 h) and the chosen
    one each asked for an x tick: '5.5' and '6' printed into one another ('5.56'). Of marked
    values closer than 20% only the first keeps its tick."""
    import numpy as np

    from srifty_kit.present.lessons import SpotLesson

    lesson = SpotLesson(model, catalog, replace(LESSON_JOB, samples=2e9), runs=50)
    for stop in [v for _, v in lesson.controls["checkpoint_interval"].options]:
        lesson.controls["checkpoint_interval"].value = stop
        ticks = np.log(np.asarray(lesson.axes["x"].tick_values, float))
        assert np.diff(ticks).min() > 0.2, (stop, lesson.axes["x"].tick_values)
    best = float(f"{lesson.refresh().best['interval_h']:.3g}")
    assert best in lesson.axes["x"].tick_values  # the cheapest interval keeps its tick


def test_an_idle_kernel_prices_the_confidence_neighbours_so_a_move_only_selects(
    model, catalog, monkeypatch
):
    # in a kernel (a running event loop), once idle the panel prices the confidence slider's
    # two neighbouring stops; a move to either is then a selection, and the same answer
    async def settle(panel, confidence):
        panel.controls["confidence"].value = confidence
        await asyncio.sleep(4 * PREFETCH_AFTER_S + 1.0)  # two idle turns, one stop each

    panel = SearchPanel(model, catalog, JOB, START)
    asyncio.run(settle(panel, 0.85))
    priced = {key[1].confidence for key in panel._cache}
    assert {0.84, 0.85, 0.86} <= priced
    calls = []
    monkeypatch.setattr(Evaluated, "at", lambda *a, **k: calls.append(a) or None)
    monkeypatch.setattr(widgets, "evaluate", lambda *a, **k: calls.append(a) or None)
    panel.controls["confidence"].value = 0.84  # no loop now: nothing prepared after it
    assert calls == []
    _same(panel.result, search(model, catalog, JOB, replace(START, confidence=0.84)))
    assert panel.evaluated.constraints.confidence == 0.84


LISTED = pd.DataFrame(  # "I can get 2, 4 or 8 nodes of g4dn.12xlarge, or 2 of g6.12xlarge"
    {
        "instance_type": ["g4dn.12xlarge"] * 3 + ["g6.12xlarge"],
        "num_nodes": [2, 4, 8, 2],
        "num_workers": [8, 16, 32, 8],
        "local_bsz": [32, 32, 32, 64],
    }
)


def test_a_candidates_list_is_decided_among_as_search_decides_it(model, catalog):
    panel = SearchPanel(model, catalog, JOB, START, candidates=LISTED)
    assert panel.error is None
    _same(panel.result, search(model, catalog, JOB, START, candidates=LISTED))
    shown = panel.result.ranked[["instance_type", "num_nodes", "num_workers", "local_bsz"]]
    assert len(shown) and all(
        tuple(row) in set(LISTED.itertuples(index=False, name=None))
        for row in shown.itertuples(index=False, name=None)
    )
    assert "listed configurations meet the constraints" in panel.message.value
    # the list fixes each configuration's batch and names no mixes: those controls are off
    assert panel.controls["batches"].disabled and panel.controls["mixes"].disabled
    assert not SearchPanel(model, catalog, JOB, START).controls["batches"].disabled
    # a node limit leaves listed rows out and says which, as `srifty search --candidates` does
    panel.controls["max_nodes"].value = 4
    limited = replace(START, max_nodes=4)
    _same(panel.result, search(model, catalog, JOB, limited, candidates=LISTED))
    assert "over the node limit of 4: 8 x g4dn.12xlarge" in html.unescape(panel.message.value)
    assert set(panel.result.ranked["num_nodes"]) <= {2, 4}
    # the deadline and confidence still choose among the list
    panel.controls["confidence"].value = 0.8
    at = replace(limited, confidence=0.8)
    _same(panel.result, search(model, catalog, JOB, at, candidates=LISTED))
    assert panel.probes() is not None


def test_a_candidates_list_that_breaks_its_contract_is_one_line_before_the_panel(model, catalog):
    wrong = LISTED.assign(instance_type=["g4dn.12xlarg"] + ["g4dn.12xlarge"] * 3)
    with pytest.raises(InputError) as refused:
        SearchPanel(model, catalog, JOB, START, candidates=wrong)
    line = str(refused.value)
    assert "'g4dn.12xlarg' is not in the catalog" in line and "g4dn.12xlarge" in line
    assert "\n" not in line
    with pytest.raises(InputError, match="missing required column .local_bsz."):
        SearchPanel(model, catalog, JOB, START, candidates=LISTED.drop(columns="local_bsz"))
