"""Next week's spend interval, calibrated on the forecast's own past errors: it widens when
the history shows the model's intervals missing, and says so when there is too little
history to check it."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pandas as pd
import pytest

from srifty_kit.present.spend import (
    CALIBRATION_DAYS,
    DAILY_MIN_HISTORY,
    MIN_DAYS,
    SEASON,
    calibrate,
    calibration_needed,
    conformal_scale,
    forecast_next_week,
    model_forecast,
    past_forecasts,
    realised_days,
)
from tests.builders import REPO

SAMPLE = REPO / "data" / "sample_cur_usage.parquet"


def working_weeks(weeks: int, week_shock: float, seed: int = 0) -> pd.Series:
    """Daily spend with a working week and day-to-day noise; each whole week's spend scaled
    by one lognormal factor of spread ``week_shock`` (a week with more or fewer jobs), which a
    daily model with independent errors does not expect."""
    rng = np.random.default_rng(seed)
    days = weeks * SEASON
    index = pd.date_range("2026-06-01", periods=days, freq="D")  # a Monday
    weekday = np.where(index.day_of_week < 5, 1000.0, 250.0)
    week = np.repeat(rng.lognormal(0.0, week_shock, weeks), SEASON) if week_shock else 1.0
    return pd.Series(weekday * week * rng.lognormal(0.0, 0.05, days), index=index)


def test_the_interval_widens_when_past_weeks_missed_the_models_interval():
    steady = forecast_next_week(working_weeks(12, 0.0, seed=1))
    lumpy = forecast_next_week(working_weeks(12, 0.5, seed=1))
    assert steady.calibrated and lumpy.calibrated
    # the history's last 7-day stretches were forecast and scored, the latest ending on its
    # last day: none of the week being forecast
    assert lumpy.calibration_weeks == CALIBRATION_DAYS < 12 * SEASON - SEASON - MIN_DAYS + 1
    # whole weeks up or down by ~50% fell outside the model's interval: the shown one is
    # wider (the steady history's past weeks fell well inside theirs: its interval narrows)
    assert lumpy.scale > 1.5 and steady.scale < 1.0
    assert lumpy.hi_usd - lumpy.lo_usd > lumpy.model_hi_usd - lumpy.model_lo_usd
    assert lumpy.lo_usd < lumpy.model_lo_usd <= lumpy.total_usd <= lumpy.model_hi_usd < lumpy.hi_usd
    # the model's half-widths are scaled on each side, around the same point
    assert lumpy.hi_usd - lumpy.total_usd == pytest.approx(
        lumpy.scale * (lumpy.model_hi_usd - lumpy.total_usd)
    )


def test_too_short_a_history_to_calibrate_gives_the_models_interval_and_says_so():
    needed = calibration_needed(0.9)
    assert needed == 9 and calibration_needed(0.95) == 19
    days = MIN_DAYS + SEASON + needed - 2  # one past week short
    f = forecast_next_week(working_weeks(6, 0.1).iloc[:days])
    assert f.available and not f.calibrated and f.calibration_weeks == needed - 1
    assert (f.lo_usd, f.hi_usd) == (f.model_lo_usd, f.model_hi_usd)
    assert "unchecked" in f.note and f"needs {needed} past weeks" in f.note
    assert f"{days + 1} days of history" in f.note
    # the days' band is the model's own too, and the note says so
    assert not f.daily_calibrated and "each day's band are the model's own" in f.note
    assert f.daily["lo"].equals(f.daily["model_lo"]) and f.daily["hi"].equals(f.daily["model_hi"])
    assert forecast_next_week(working_weeks(6, 0.1).iloc[: days + 1]).calibrated


def quiet_then_lumpy(quiet_days: int, lumpy_days: int, seed: int = 0) -> pd.Series:
    """A working week whose day-to-day noise jumps from 3% to 30%: a model fitted to the whole
    history averages the two and simulates days too narrow for the lumpy ones."""
    rng = np.random.default_rng(seed)
    index = pd.date_range("2026-06-01", periods=quiet_days + lumpy_days, freq="D")  # a Monday
    weekday = np.where(index.day_of_week < 5, 1000.0, 250.0)
    sigma = np.where(np.arange(len(index)) < quiet_days, 0.03, 0.3)
    return pd.Series(weekday * rng.lognormal(0.0, sigma), index=index)


def test_the_days_band_is_calibrated_to_hold_the_days_that_follow():
    # what forecast_next_week does at each origin t, from the same pieces: the forecast made at
    # t calibrated on the CALIBRATION_DAYS past forecasts whose weeks ended before t
    y = quiet_then_lumpy(20 * SEASON, 70)
    origins = range(20 * SEASON, len(y) - SEASON + 1)  # past forecasts of the lumpy days only
    past = past_forecasts(y, origins, simulations=300)
    days = realised_days(y, origins)
    held = {"lo": 0, "model_lo": 0}
    first = CALIBRATION_DAYS + SEASON - 1  # the first with a whole window of lumpy weeks
    for i in range(first, len(origins)):
        window = slice(i - SEASON - CALIBRATION_DAYS + 1, i - SEASON + 1)
        f = calibrate(copy.deepcopy(past[i]), past[window], days[window])
        assert f.daily_calibrated and (f.daily_scale > 1.0).all()  # the model's days: too narrow
        d = f.daily
        for lo in held:
            hi = lo.replace("lo", "hi")
            held[lo] += int(((d[lo] <= days[i]) & (days[i] <= d[hi])).sum())
    checked = SEASON * (len(origins) - first)
    # the model's own 90% band held about half of the days; the calibrated one its level
    assert held["model_lo"] / checked < 0.75 and held["lo"] / checked >= 0.85, (held, checked)


def test_forecasts_from_a_ledgers_first_weeks_do_not_widen_the_days_band():
    # nine weeks: the scored origins start on day 15, and those before DAILY_MIN_HISTORY were
    # fitted to a few weeks; say their days came in three times what they forecast
    y = working_weeks(9, 0.1, seed=2)
    origins = range(len(y) - SEASON + 1 - CALIBRATION_DAYS, len(y) - SEASON + 1)
    past = past_forecasts(y, origins, simulations=300)
    days = realised_days(y, origins)
    young = np.array([s < DAILY_MIN_HISTORY for s in origins])
    assert 0 < young.sum() < len(origins) - calibration_needed(0.9)
    days[young] *= 3.0
    now = model_forecast(y, simulations=300)
    f = calibrate(copy.deepcopy(now), past, days)
    grown = [p for p, old in zip(past, young, strict=True) if not old]
    g = calibrate(copy.deepcopy(now), grown, days[~young])
    # the days' band is the one the grown forecasts alone give; the week's total, which the
    # young forecasts missed too, still widens for them
    assert f.daily_calibrated and np.array_equal(f.daily_scale, g.daily_scale)
    assert f.daily["hi"].equals(g.daily["hi"]) and f.scale > 1.5 * g.scale


def test_a_history_too_short_to_check_its_days_keeps_the_models_band_and_says_so():
    # 40 days: 20 past weeks to score the total, none forecast from DAILY_MIN_HISTORY days
    f = forecast_next_week(working_weeks(6, 0.1).iloc[:40])
    assert f.calibrated and not f.daily_calibrated
    assert f.daily["lo"].equals(f.daily["model_lo"]) and f.daily["hi"].equals(f.daily["model_hi"])
    assert "each day's 90% band is the model's own, unchecked" in f.note
    assert f"from {DAILY_MIN_HISTORY} days of history or more" in f.note
    assert f"({DAILY_MIN_HISTORY + SEASON + 8} days in all), this history has 0" in f.note


def test_the_days_band_and_the_weeks_interval_are_scaled_from_one_calibration():
    f = forecast_next_week(working_weeks(12, 0.5, seed=1))
    assert f.calibrated and f.daily_calibrated and len(f.daily_scale) == SEASON
    d = f.daily
    # each day's half-widths scaled on each side around the same point, never below zero
    assert np.allclose(d["hi"] - d["mean"], f.daily_scale * (d["model_hi"] - d["mean"]))
    assert np.allclose(
        d["lo"], np.maximum(d["mean"] - f.daily_scale * (d["mean"] - d["model_lo"]), 0.0)
    )
    assert (d["lo"] <= d["mean"]).all() and (d["mean"] <= d["hi"]).all()


def test_the_conformal_scale_is_the_rank_a_level_needs():
    scores = np.arange(1.0, 10.0)  # nine past weeks
    assert conformal_scale(scores, 0.9) == 9.0  # the largest: rank ceil(10 * 0.9) = 9
    assert conformal_scale(scores[:8], 0.9) is None
    assert conformal_scale(np.arange(1.0, 21.0), 0.9) == 19.0  # rank ceil(21 * 0.9) = 19
    assert conformal_scale(np.r_[scores, np.inf], 0.9) is None  # an unbounded interval


def band_label(report) -> str:
    """The legend entry of the report figure's band around next week's days."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from srifty_kit.present.weekly import spend_figure

    ax = spend_figure(report)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(ax.figure)
    return next(label for label in labels if "interval of a day" in label)


def sample_report(week: str):
    from srifty_kit.present.weekly import weekly_report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return weekly_report(week, SAMPLE, models=[])


def test_the_report_says_how_its_interval_was_calibrated():
    from srifty_kit.present.weekly import forecast_text

    report = sample_report("2026-11-23")
    f = report.forecast
    text = forecast_text(report)
    assert f.calibrated and "90% prediction interval" in text
    assert "calibrated on the model's own past errors" in text
    assert f"each of the last {f.calibration_weeks} seven-day stretches" in text
    assert f"{f.scale:.2f} times as wide to hold 90%" in text
    # which interval is which: the one promised first, then the model's own it was made from
    promised, own = text.index("90% prediction interval"), text.index("the model's own (")
    assert promised < own and text.endswith(f"made {f.scale:.2f} times as wide.")
    summary = report.summary()["forecast"]
    assert summary["calibrated"] and summary["scale"] == pytest.approx(f.scale)
    # the figure's band around next week's days is calibrated too, and its legend says so
    assert f.daily_calibrated and band_label(report) == "calibrated 90% interval of a day"


def test_the_report_of_a_short_history_promises_no_level():
    from srifty_kit.present.weekly import forecast_text

    # the sample starts on 2026-09-07: the week of 2026-09-28 ends its fourth week
    report = sample_report("2026-09-28")
    text = forecast_text(report)
    assert report.forecast.available and not report.forecast.calibrated
    assert "90% prediction interval" not in text
    assert "not a promise of 90%" in text and "too little history to check it" in text
    assert "(8 past weeks to forecast, 9 needed)" in text
    assert report.summary()["forecast"]["calibrated"] is False
    assert band_label(report) == "the model's 90% interval of a day"


def test_the_spend_figures_legend_hides_no_day_of_spend():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from srifty_kit.present.weekly import spend_figure

    # the sample's week: spend peaks near $900 early in the history, where the legend stood
    report = sample_report("2026-11-23")
    ax = spend_figure(report)
    ax.figure.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    points = np.concatenate([line.get_xydata() for line in ax.get_lines()])
    shown = ax.transData.transform(points)
    hidden = [p for p, (x, y) in zip(points, shown, strict=True) if legend.contains(x, y)]
    plt.close(ax.figure)
    assert hidden == []
