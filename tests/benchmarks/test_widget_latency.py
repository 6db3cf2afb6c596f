"""The widget latency benchmark's own bookkeeping: it times the moves it says it times, and its
goal line names the control that misses."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.builders import REPO


@pytest.fixture(scope="module")
def bench():
    folder = str(REPO / "benchmarks")
    sys.path.insert(0, folder)  # the script imports its neighbours (common)
    try:
        spec = importlib.util.spec_from_file_location(
            "widget_latency", f"{folder}/widget_latency.py"
        )
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    return module


def test_every_timed_max_nodes_move_evaluates_every_candidate_again(bench):
    from srifty_kit.catalog.query import load_catalog
    from srifty_kit.present.widgets import SearchPanel

    model, job, constraints = bench.demo_model()
    panel = SearchPanel(model, load_catalog(), job, constraints)
    slider = panel.controls["max_nodes"]
    moves = bench.max_nodes_moves(slider.value)
    assert len(moves) == bench.WARMUP + bench.REEVALUATE
    assert moves[-1] <= slider.max  # the slider reaches every move
    seen = [panel.evaluated]
    for value in moves:
        slider.value = value
        # a new evaluation, never one the panel kept: the move re-evaluates every candidate
        assert all(panel.evaluated is not ev for ev in seen)
        assert panel.result.constraints.max_nodes == value
        assert len(panel.evaluated.candidates) > len(seen[-1].candidates)
        seen.append(panel.evaluated)


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
