"""Next week's spend from daily spend: an exponential-smoothing state-space model (statsmodels
ETS: additive error, damped additive trend, additive weekly seasonality) and its prediction
interval for the week's total, from simulated paths.

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
    the bounds of the week's total (of the simulated weeks, not of their clipped days).
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
    if float(np.ptp(y.to_numpy())) == 0.0:
        # a constant series has nothing to estimate: the forecast is that constant, exactly
        value = float(y.iloc[-1])
        index = pd.date_range(y.index[-1] + pd.Timedelta(days=1), periods=SEASON, freq="D")
        out.daily = pd.DataFrame({"mean": value, "lo": value, "hi": value}, index=index)
        out.total_usd = out.lo_usd = out.hi_usd = value * SEASON
        out.method = "constant daily spend"
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter; the fit is judged by its interval
        fitted = ETSModel(
            y,
            error="add",
            trend="add",
            damped_trend=True,
            seasonal="add",
            seasonal_periods=SEASON,
        ).fit(disp=False)
        paths = fitted.simulate(
            nsimulations=SEASON,
            repetitions=simulations,
            anchor="end",
            rng=np.random.default_rng(seed),
        )
    raw = np.asarray(paths, dtype="float64").reshape(SEASON, -1)
    paths = np.clip(raw, 0.0, None)
    alpha = (1.0 - level) / 2.0
    index = pd.date_range(y.index[-1] + pd.Timedelta(days=1), periods=SEASON, freq="D")
    mean = np.clip(np.asarray(fitted.forecast(SEASON), dtype="float64"), 0.0, None)
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
        f"ETS(A, Ad, A) with weekly seasonality on {days} days of spend; "
        f"{level:.0%} interval from {simulations} simulated weeks"
    )
    return out
