"""Two-type clusters: batches split by speed, and OmniLearn's controller reaching that split."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from srifty_kit.decide.hetero import (
    controller_summary,
    integer_split,
    proportional_split,
    simulate_controller,
)

coef = st.tuples(st.floats(0.0, 0.2), st.floats(1e-4, 1e-1))


@given(a=coef, b=coef, wa=st.integers(1, 32), wb=st.integers(1, 32), per=st.integers(8, 512))
def test_split_holds_the_global_batch_and_equalises_compute(a, b, wa, wb, per):
    big = per * (wa + wb)
    b_a, b_b = proportional_split(big, wa, wb, a[0], a[1], b[0], b[1])
    assert wa * b_a + wb * b_b == pytest.approx(big)
    assert b_a >= 1 - 1e-9 and b_b >= 1 - 1e-9
    t_a, t_b = a[0] + a[1] * b_a, b[0] + b[1] * b_b
    if b_a > 1 + 1e-9 and b_b > 1 + 1e-9:  # not clamped at the minimum batch
        assert t_a == pytest.approx(t_b, rel=1e-6)
    # never slower than the even split
    even = max(a[0] + a[1] * per, b[0] + b[1] * per)
    assert max(t_a, t_b) <= even * (1 + 1e-9)


def test_faster_worker_gets_the_larger_batch():
    b_a, b_b = proportional_split(256, 4, 4, 0.01, 0.001, 0.01, 0.003)
    assert b_a == pytest.approx(48) and b_b == pytest.approx(16)


def test_integer_split_stays_near_the_global_batch():
    ia, ib, total = integer_split(np.array([250]), np.array([3]), np.array([5]), np.array([41.6]))
    assert ia[0] == 42 and ib[0] == 25 and abs(total[0] - 250) <= 5


def test_controller_converges_from_an_even_split_and_saves_step_time():
    alpha = np.array([0.01] * 4 + [0.012] * 4)
    beta = np.array([0.001] * 4 + [0.0035] * 4)  # the second type is 3.5x slower per sample
    trace = simulate_controller(alpha, beta, global_bsz=256, steps=30, deadband=0.05)
    assert trace.groupby("step")["local_bsz"].sum().eq(256).all()  # global batch held fixed
    summary = controller_summary(trace, deadband=0.05)
    assert 0 <= summary["steps_to_settle"] <= 10
    assert summary["step_time_saved"] > 0.3
    # the steady state the planner assumes is where the controller ends up
    b_fast, b_slow = proportional_split(256, 4, 4, 0.01, 0.001, 0.012, 0.0035)
    last = trace[trace["step"] == trace["step"].max()]
    assert last["local_bsz"].iloc[0] == pytest.approx(b_fast, abs=2)
    assert last["local_bsz"].iloc[-1] == pytest.approx(b_slow, abs=2)


def test_controller_leaves_identical_workers_alone_and_respects_clamps():
    same = simulate_controller(np.full(4, 0.01), np.full(4, 0.002), 64, steps=5)
    assert same["local_bsz"].eq(16).all()
    capped = simulate_controller(
        np.array([0.0, 0.0]), np.array([1e-4, 1e-2]), 100, steps=20, max_bsz=70
    )
    assert capped["local_bsz"].max() <= 70 and capped["local_bsz"].min() >= 1


def test_controller_settles_despite_timing_noise_inside_its_deadband():
    trace = simulate_controller(
        np.full(6, 0.02), np.array([0.001] * 3 + [0.002] * 3), 192, steps=40, noise=0.01
    )
    tail = trace[trace["step"] >= 30].groupby("step")["step_time_s"].first()
    head = trace[trace["step"] == 0]["step_time_s"].iloc[0]
    assert tail.max() < head


def test_convergence_figure_draws_every_worker_and_the_falling_step_time():
    import matplotlib

    matplotlib.use("Agg")
    from srifty_kit.present.plots import controller_convergence

    alpha = np.array([0.01] * 2 + [0.012] * 2)
    beta = np.array([0.001] * 2 + [0.0035] * 2)
    trace = simulate_controller(alpha, beta, global_bsz=128, steps=20)
    ax = controller_convergence(trace)
    assert len(ax.lines) == 4  # one local-batch line per worker
    step_line = ax.figure.axes[1].lines[0]  # the step time, on the twin axis
    times = step_line.get_ydata()
    assert times[-1] < times[0]  # the split the controller reaches is faster than the even one
