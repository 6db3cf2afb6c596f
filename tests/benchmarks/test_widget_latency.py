"""The widget latency benchmark's own bookkeeping: it times the moves it says it times, and its
goal line names the control that misses."""

from __future__ import annotations

import pytest

from tests.builders import benchmark


@pytest.fixture(scope="module")
def bench():
    return benchmark("widget_latency")


@pytest.fixture(scope="module")
def panel(bench):
    from srifty_kit.catalog.query import load_catalog
    from srifty_kit.present.widgets import SearchPanel

    model, job, constraints = bench.demo_model()
    return SearchPanel(model, load_catalog(), job, constraints)


def test_every_timed_max_nodes_move_selects_within_one_evaluation(bench, panel):
    from srifty_kit.decide.planner import evaluate

    slider = panel.controls["max_nodes"]
    moves = bench.moves("max_nodes", panel)
    assert len(moves) == bench.WARMUP + bench.REEVALUATE
    assert moves[-1] <= slider.max  # the slider reaches every move
    first, counts = panel.evaluated, []
    for value in moves:
        slider.value = value
        assert panel.evaluated is first  # nothing predicted or priced again: it narrows
        assert panel.result.constraints.max_nodes == value
        counts.append(panel.result.n_candidates)
    assert counts == sorted(counts) and counts[0] < counts[-1]
    wide = panel.result.constraints
    assert counts[-1] == len(evaluate(panel.model, panel.catalog, panel.job, wide))


def test_every_timed_confidence_move_prices_the_kept_predictions_again(bench, panel):
    slider = panel.controls["confidence"]
    moves = bench.moves("confidence", panel)
    assert len(moves) == bench.WARMUP + bench.REEVALUATE
    assert moves == sorted(moves, reverse=True) and moves[0] < slider.value
    seen, kept = [panel.evaluated], panel.evaluated.kept
    for value in moves:
        slider.value = value
        # a new evaluation at each confidence, never one the panel kept, from the same
        # predictions: the move prices them again
        assert all(panel.evaluated is not ev for ev in seen)
        assert panel.evaluated.kept is kept
        assert panel.result.constraints.confidence == value
        seen.append(panel.evaluated)


def test_every_timed_batch_choice_predicts_every_candidate_again(bench, monkeypatch):
    from srifty_kit.present import widgets

    calls = []
    real = widgets.evaluate
    monkeypatch.setattr(widgets, "evaluate", lambda *a, **k: calls.append(a) or real(*a, **k))
    times = bench.batch_latencies()
    assert len(times) == bench.REEVALUATE
    # the panel's first search and then one full evaluation per choice, none reused
    assert len(calls) == 1 + bench.WARMUP + bench.REEVALUATE


def test_the_goal_names_the_control_that_misses_it(bench):
    verdict = bench.goal_verdict({"the deadline slider": 84.7, "the max-nodes slider": 123.4})
    assert verdict.startswith("missed by the max-nodes slider (")
    assert "missed by the deadline slider" not in verdict
    assert "the deadline slider 84.7 ms" in verdict and "the max-nodes slider 123.4 ms" in verdict


def test_the_goal_is_met_only_when_every_control_is_within_it(bench):
    both = bench.goal_verdict({"the deadline slider": 84.7, "the max-nodes slider": 100.0})
    assert both.startswith("met by every control timed (")
    one = bench.goal_verdict({"the deadline slider": 100.1, "the max-nodes slider": 20.0})
    assert one.startswith("missed by the deadline slider (")
