"""Next week's spend from daily spend: an exponential-smoothing state-space model (statsmodels
ETS: multiplicative error, damped additive trend, multiplicative weekly seasonality) and its
prediction interval for the week's total, from simulated paths.

Spend is positive and its day-to-day errors scale with its level: a team spending $5,000 a
week moves by hundreds, one that stopped moves by nothing. A multiplicative error says so; an
additive one gives every level the same spread in dollars (a stopped team kept an interval
hundreds of dollars wide, reaching below zero). statsmodels' multiplicative ETS needs strictly
positive data, and a day without spend is zero: the model is fitted to spend plus a small
offset (``OFFSET`` of the mean daily spend), which is taken off the forecast again.

The interval of a sum of seven daily forecasts is not the sum of their intervals (the days'
errors are correlated through the level and trend); simulating whole weeks from the fitted
model and taking quantiles of their totals is how statsmodels' own ETS intervals are made.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

SEASON = 7  # days: training spend follows the working week
MIN_DAYS = 2 * SEASON  # a seasonal model needs two whole cycles to tell season from level
SIMULATIONS = 2000
OFFSET = 0.01  # of the mean daily spend: keeps a day of no spend positive for the model


@dataclass
class SpendForecast:
    """Next week's total spend with its prediction interval, and per-day forecasts."""

    level: float
    days_of_history: int
    total_usd: float | None = None  # point forecast of the week's total (None: no forecast)
    lo_usd: float | None = None
    hi_usd: float | None = None
    daily: pd.DataFrame = field(default_factory=pd.DataFrame)  # mean, lo, hi per day
    method: str = ""
    note: str = ""
    idle_days: int = 0  # the history's last days without spend (0: it spent on its last day)

    @property
    def available(self) -> bool:
        """Whether there was enough history for a forecast."""
        return self.total_usd is not None


def forecast_next_week(
    daily_cost: pd.Series, level: float = 0.9, simulations: int = SIMULATIONS, seed: int = 0
) -> SpendForecast:
    """Forecast the 7 days after ``daily_cost`` (a daily series, oldest first, no gaps).

    With fewer than two weeks of history there is no forecast, and ``note`` says so.
    Spend cannot be negative: the point and the days' bounds are clipped at zero, and so are
    the bounds of the week's total (of the simulated weeks, not of their clipped days). The
    errors scale with the spend, so a series whose last weeks spent nothing gets a forecast
    and an interval near zero; ``idle_days`` counts those days.
    """
    import warnings

    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    y = pd.Series(daily_cost, dtype="float64").asfreq("D")
    days = int(len(y))
    out = SpendForecast(level=level, days_of_history=days)
    if days < MIN_DAYS:
        out.note = (
            f"history too short for a forecast: {days} day(s) of spend; the weekly model "
            f"needs at least {MIN_DAYS} (two weekly cycles)"
        )
        return out
    spent = np.flatnonzero(y.to_numpy() > 0)
    out.idle_days = days - 1 - int(spent[-1]) if len(spent) else days
    index = pd.date_range(y.index[-1] + pd.Timedelta(days=1), periods=SEASON, freq="D")
    if float(np.ptp(y.to_numpy())) == 0.0:
        # a constant series has nothing to estimate: the forecast is that constant, exactly
        value = float(y.iloc[-1])
        out.daily = pd.DataFrame({"mean": value, "lo": value, "hi": value}, index=index)
        out.total_usd = out.lo_usd = out.hi_usd = value * SEASON
        out.method = "constant daily spend"
        return out
    offset = OFFSET * float(y.clip(lower=0.0).mean())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter; the fit is judged by its interval
        fitted = ETSModel(
            y.clip(lower=0.0) + offset,
            error="mul",
            trend="add",
            damped_trend=True,
            seasonal="mul",
            seasonal_periods=SEASON,
        ).fit(disp=False)
        paths = fitted.simulate(
            nsimulations=SEASON,
            repetitions=simulations,
            anchor="end",
            rng=np.random.default_rng(seed),
        )
        mean = np.asarray(fitted.forecast(SEASON), dtype="float64") - offset
    raw = np.asarray(paths, dtype="float64").reshape(SEASON, -1) - offset
    raw = raw[:, np.isfinite(raw).all(axis=0)]  # a path whose damped level ran away
    mean = np.clip(mean, 0.0, None)
    paths = np.clip(raw, 0.0, None)
    alpha = (1.0 - level) / 2.0
    out.daily = pd.DataFrame(
        {
            "mean": mean,
            "lo": np.quantile(paths, alpha, axis=1),
            "hi": np.quantile(paths, 1.0 - alpha, axis=1),
        },
        index=index,
    )
    # the week's total as the model simulates it, then clipped: clipping each day before the
    # sum would turn the model's negative noise into spend, and a week of spend near zero
    # would get a lower end above its own point (clipping commutes with a quantile)
    totals = raw.sum(axis=0)
    out.total_usd = float(mean.sum())
    out.lo_usd = max(float(np.quantile(totals, alpha)), 0.0)
    out.hi_usd = max(float(np.quantile(totals, 1.0 - alpha)), 0.0)
    out.method = (
        f"ETS(M, Ad, M) with weekly seasonality on {days} days of spend, its errors in "
        f"proportion to the spend; {level:.0%} interval from {simulations} simulated weeks"
    )
    return out
