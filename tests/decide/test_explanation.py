"""The words that say why a pick beats the cheapest cluster per hour."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from srifty_kit.decide.explanation import Explanation, money
from srifty_kit.decide.job import Job


def _row(nodes: int, usd_per_hr: float, time_hi_h: float, cost_hi_usd: float) -> pd.Series:
    return pd.Series(
        {
            "num_nodes": nodes,
            "instance_type": "g4dn.12xlarge",
            "num_workers": 4 * nodes,
            "local_bsz": 32,
            "pricing": "on-demand",
            "usd_per_hr": usd_per_hr,
            "time_h": time_hi_h * 0.8,
            "time_hi_h": time_hi_h,
            "cost_usd": cost_hi_usd * 0.8,
            "cost_mean_usd": cost_hi_usd * 0.85,
            "cost_hi_usd": cost_hi_usd,
            "step_time_s": 0.5,
            "compute_s": 0.4,
            "sync_s": 0.1,
            "global_bsz": 128 * nodes,
            "steps": 1000,
        }
    )


def _text(pick: pd.Series, alt: pd.Series) -> str:
    """The explanation of ``pick`` against ``alt`` as the cheapest per hour."""
    return Explanation(
        objective="cost",
        level=0.9,
        job=Job("resnet", steps=1000, reference_bsz=256),
        deadline_h=10.0,
        pick=pick,
        cheapest_per_hour=alt,
        hourly_ratio=pick["usd_per_hr"] / alt["usd_per_hr"],
        speedup=alt["time_hi_h"] / pick["time_hi_h"],
        cost_hi_ratio=alt["cost_hi_usd"] / pick["cost_hi_usd"],
        cost_ratio=alt["cost_mean_usd"] / pick["cost_mean_usd"],
    ).text()


def _why_not(pick: pd.Series, alt: pd.Series) -> str:
    return _text(pick, alt).splitlines()[-1]


def test_a_pick_as_fast_as_the_cheapest_per_hour_is_said_to_be_so():
    # within 1%: "1x faster" says nothing, and a second digit more than the model knows
    line = _why_not(_row(2, 7.9, 2.00, 16.0), _row(2, 7.8, 2.01, 16.1))
    assert "the pick is about as fast at 90%" in line
    assert "the pick costs about as much per hour" in line
    assert "1x" not in line


@pytest.mark.parametrize(
    ("alt_time", "alt_cost", "said"),
    [
        (3.0, 24.0, ["the pick is 1.5x faster", "it costs 1.5x as much as the pick to finish"]),
        (1.6, 12.8, ["the pick is 1.2x slower", "though it costs 0.8x as much as the pick"]),
    ],
)
def test_ratios_say_which_way_and_how_far(alt_time, alt_cost, said):
    line = _why_not(_row(2, 8.0, 2.0, 16.0), _row(2, 8.0, alt_time, alt_cost))
    for words in said:
        assert words in line


def test_a_ratio_a_few_percent_off_one_is_never_said_as_1x():
    # 4% apart is not "about as fast", and "1x slower" would say nothing: three digits
    line = _why_not(_row(2, 8.0, 2.0, 16.0), _row(2, 8.0, 1.92, 16.6))
    assert "the pick is 1.04x slower at 90%" in line
    assert "1.04x as much as the pick" in line
    assert " 1x " not in line


def test_an_alternative_cheaper_at_the_bound_but_dearer_expected_is_said_so():
    # the pick is ranked by the expected cost: "though it costs 0.9x as much ... even at 90%;
    # the pick wins on the objective 'cost'" read as a contradiction without the expected one
    alt = _row(2, 8.0, 1.8, 14.4)
    alt["cost_mean_usd"] = 40.0  # a long upper tail: its mean far above its bound
    line = _why_not(_row(2, 8.0, 2.0, 16.0), alt)
    assert "so it costs more on average (2.9x as much as the pick expected)" in line
    assert "though 0.9x as much at 90%: its prediction is less certain" in line
    assert "even at" not in line


def test_the_pick_sentence_quotes_the_expected_cost_it_was_ranked_by(model):
    from srifty_kit.catalog.query import load_catalog
    from srifty_kit.decide.planner import Constraints, search

    job = Job("resnet", samples=1.2e8, reference_bsz=256, noise_scale=4096.0)
    result = search(model, load_catalog(), job, Constraints(deadline_h=20.0, spot=True))
    pick = result.pick
    # the belief's spread makes the mean cost differ from the central one: the test can tell
    assert money(pick["cost_mean_usd"]) != money(pick["cost_usd"])
    first = result.explanation.splitlines()[0]
    assert f"expected {money(pick['cost_mean_usd'])}" in first
    assert f"central estimate {money(pick['cost_usd'])}" in first
    assert result.ranked["cost_mean_usd"].is_monotonic_increasing


def test_an_expected_cost_above_the_median_is_not_said_to_exceed_its_upper_end(model):
    from srifty_kit.catalog.query import load_catalog
    from srifty_kit.decide.planner import Constraints, search

    # p4d.24xlarge is never measured: its belief is wide, so its mean cost is 2.4x its median,
    # and at 50% the sentence read "expected $1,036 (up to $435 at 50%; ...)"
    full = load_catalog()
    never = full[full["instance_type"] == "p4d.24xlarge"].reset_index(drop=True)
    job = Job("resnet", epochs=90, dataset_size=1_281_167, reference_bsz=256, noise_scale=4096)
    for level in (0.5, 0.9):
        result = search(model, never, job, Constraints(confidence=level, max_nodes=4))
        pick, first = result.pick, result.explanation.splitlines()[0]
        assert f"expected {money(pick['cost_mean_usd'])}" in first
        if level == 0.5:
            assert pick["cost_hi_usd"] < pick["cost_mean_usd"] / 2  # the case at hand
            assert "up to $" not in first and "wide belief" in first
            assert f"half of runs cost under {money(pick['cost_hi_usd'])}" in first
        else:  # above the expectation: still its upper end
            assert pick["cost_hi_usd"] > pick["cost_mean_usd"]
            assert f"(up to {money(pick['cost_hi_usd'])} at 90%" in first


def test_the_printed_efficiency_steps_goodput_and_time_agree(model):
    import re

    from srifty_kit.catalog.query import load_catalog
    from srifty_kit.decide.planner import Constraints, search

    # the work counted at a small reference batch, so that the two normalisations of the
    # efficiency (against it, against the small-batch limit) differ by more than rounding
    samples = 1.2e8
    job = Job("resnet", samples=samples, reference_bsz=64, noise_scale=1000.0)
    result = search(model, load_catalog(), job, Constraints(deadline_h=20.0, spot=True))
    said = re.search(
        r"statistical efficiency ([\d.]+) at global batch (\d+) .*?([\d,]+) steps to the target",
        result.explanation,
    )
    eff, batch, steps = float(said[1]), int(said[2]), float(said[3].replace(",", ""))
    assert steps * batch * eff == pytest.approx(samples, rel=2e-3)
    rows = result.ranked
    assert np.allclose(rows["steps"] * rows["global_bsz"] * rows["efficiency"], samples)
    # no checkpoint writes: the training time is the samples over the goodput; spot rows add
    # the reclaims' expected overhead on top
    training_h = samples / rows["goodput"] / 3600
    assert np.allclose(training_h, rows["time_h"] - rows["spot_overhead_h"], rtol=1e-6)


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0.0123, "12.3 ms"),
        (0.9996, "1 s"),
        (1.01e3 / 1e3, "1.01 s"),
        (45, "45 s"),
        (12 * 60, "12 min"),
        (2.5 * 3600, "2.5 h"),
        (1234 * 3600, "1,234 h"),
    ],
)
def test_a_duration_is_said_in_the_unit_that_fits_it(seconds, said):
    from srifty_kit.errors import duration

    assert duration(seconds) == said


def test_a_duration_keeps_the_digits_asked_for_without_exponents():
    from srifty_kit.errors import duration

    assert duration(0.2026, 4) == "202.6 ms"
    assert duration(14.76, 4) == "14.76 s"
    assert duration(1189e-3, 4) == "1.189 s"
    assert duration(0.99996, 4) == "1 s"


@pytest.mark.parametrize(
    "ratio, said",
    [(1.3, "1.3"), (0.77, "0.77"), (2.0, "2"), (1.04, "1.04"), (0.996, "0.996"), (1.0, "1")],
)
def test_a_ratio_is_said_in_two_digits_three_where_two_would_say_1(ratio, said):
    from srifty_kit.errors import ratio_said

    assert ratio_said(ratio) == said


def test_a_step_of_a_second_is_said_in_seconds():
    slow = _row(1, 3.9, 5.0, 20.0)
    slow[["step_time_s", "compute_s", "sync_s"]] = [1.01e3 / 1e3, 0.8, 0.21]
    text = _text(slow, slow)
    assert "step takes 1.01 s: compute 800 ms, gradient all-reduce 210 ms" in text


@pytest.mark.parametrize(
    ("usd", "said"),
    [(0.0001, "$0.0001"), (0.0042, "$0.0042"), (0.0123, "$0.01"), (0.0, "$0.00"), (57.5, "$57.50")],
)
def test_an_amount_below_a_cent_is_never_said_as_zero(usd, said):
    # `srifty search --budget-usd 0.0001` said "no configuration finishes under $0.00"
    assert money(usd) == said


@pytest.mark.parametrize(
    ("deadline_h", "said"),
    [
        # the cheapest finishes in time: only the budget fails, and the deadline is met
        (100.0, "At 90% it breaks the $50.00 budget by $30.00 but meets the 100 h deadline."),
        # it said only "the budget binds", though the cheapest also misses the deadline
        (
            10.0,
            "At 90% it misses the 10 h deadline by 30 h and breaks the $50.00 budget by $30.00.",
        ),
    ],
)
def test_a_binding_budget_says_whether_the_nearest_also_misses_the_deadline(deadline_h, said):
    nearest = _row(nodes=1, usd_per_hr=2.0, time_hi_h=40.0, cost_hi_usd=80.0)
    text = Explanation(
        objective="cost",
        level=0.9,
        job=Job("resnet", steps=1000, reference_bsz=256),
        deadline_h=deadline_h,
        budget_usd=50.0,
        binding="budget",
        nearest=nearest,
    ).text()
    assert text.startswith("Infeasible: the budget binds") and text.endswith(said)
