"""Next week's spend from daily spend: an exponential-smoothing state-space model (statsmodels
ETS: multiplicative error, damped additive trend, multiplicative weekly seasonality) and its
prediction intervals for the week's total and for each day, from simulated paths.

Spend is positive and its day-to-day errors scale with its level: a team spending $5,000 a
week moves by hundreds, one that stopped moves by nothing. A multiplicative error says so; an
additive one gives every level the same spread in dollars (a stopped team kept an interval
hundreds of dollars wide, reaching below zero). statsmodels' multiplicative ETS needs strictly
positive data, and a day without spend is zero: the model is fitted to spend plus a small
offset (``OFFSET`` of the mean daily spend), which is taken off the forecast again.

The interval of a sum of seven daily forecasts is not the sum of their intervals (the days'
errors are correlated through the level and trend); simulating whole weeks from the fitted
model and taking quantiles of their totals is how statsmodels' own ETS intervals are made.

Those simulated intervals assume the model is right, and spend is lumpier than it: on the
packaged sample CUR the model's 90% interval held 77% of the weeks that followed a rolling
origin (``benchmarks/forecast_coverage.py``). The interval shown is therefore calibrated on the
forecast's own past errors (rolling-origin split conformal prediction): the model forecasts the
7 days from each of the last ``CALIBRATION_DAYS`` days of the history with parameters fitted to
days before that day only; each realised total is scored by how many of that forecast's
half-widths it fell from the point (on its side), and the model's interval for next week is
scaled by the conformal quantile of those scores. Only weeks inside the history are scored,
never the week being forecast. Refitting (not reusing today's fit, whose parameters saw the
scored weeks) matters: reused parameters made the past errors look small and the calibrated
interval held no more weeks than the model's own. A refit every ``REFIT_DAYS`` days, its
parameters carried forward over the days after it (statsmodels' ``smooth``), keeps that
while costing a few fits. With too few past weeks to calibrate at the
level asked, the model's own interval is kept and ``note`` says it is unchecked.

Each day's band (``daily``, the report's figure) is calibrated the same way from the same past
forecasts: the ``h``-th day after every scored origin against that origin's band for its
``h``-th day, one scale per day ahead (a day's error grows with the horizon). Left as the
model's own, the band drawn around next week's days claimed a certainty the stated total did
not: on the held-out packaged samples it held 85% of the days at 90%. Scored on every past
forecast, as the total is, it held 99% there at three times the width: a forecast fitted to a
ledger's first two or three weeks misses its days by far more than a later one, and a few
such misses set the conformal quantile. The days are therefore scored only on past forecasts
made from ``DAILY_MIN_HISTORY`` days of history or more; held out, that band held 88% of the
days at 1.14 times the model's median width, but 96% (the model's own: 88%) from the origins
with a whole window of past weeks (``benchmarks/forecast_coverage.py`` has the figures).
With too few such past forecasts, or a past day outside a band of no width, the band is the
model's own and ``note`` says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

SEASON = 7  # days: training spend follows the working week
MIN_DAYS = 2 * SEASON  # a seasonal model needs two whole cycles to tell season from level
SIMULATIONS = 2000
OFFSET = 0.01  # of the mean daily spend: keeps a day of no spend positive for the model
# the last days of the history whose forecasts are scored to calibrate the interval: chosen on
# synthetic ledgers, the packaged samples held out (benchmarks/forecast_coverage.py)
CALIBRATION_DAYS = 42
# the past forecasts refit the model on every REFIT_DAYS-th day of the series and carry its
# parameters to the days after (smoothing only): no fit sees a day after its origin, and a
# report pays for about seven fits, not 42
REFIT_DAYS = 7
# the days of history a past forecast needs before its days calibrate the daily band: a fit to a
# ledger's first weeks misses its days by far more than later ones do. Chosen on the synthetic
# ledgers (the narrowest band holding 85-95% of their days), the packaged samples held out
DAILY_MIN_HISTORY = 42
_DAILY = ("mean", "lo", "hi", "model_lo", "model_hi")  # the columns of ``SpendForecast.daily``


@dataclass
class SpendForecast:
    """Next week's total spend with its prediction interval, and per-day forecasts."""

    level: float
    days_of_history: int
    total_usd: float | None = None  # point forecast of the week's total (None: no forecast)
    lo_usd: float | None = None  # the interval shown: calibrated when ``scale`` is set
    hi_usd: float | None = None
    model_lo_usd: float | None = None  # the model's own simulated interval, before calibration
    model_hi_usd: float | None = None
    scale: float | None = None  # shown half-widths / the model's (None: not calibrated)
    # the days' shown half-widths / the model's, one per day ahead (None: not calibrated)
    daily_scale: np.ndarray | None = field(default=None, repr=False)
    calibration_weeks: int = 0  # past 7-day stretches of the history forecast and scored
    calibration_needed: int = 0  # stretches needed to calibrate at ``level``
    # mean, lo, hi (shown: calibrated when ``daily_scale`` is set), model_lo, model_hi per day
    daily: pd.DataFrame = field(default_factory=pd.DataFrame)
    params: np.ndarray | None = field(default=None, repr=False)  # the ETS parameters used
    method: str = ""
    note: str = ""
    idle_days: int = 0  # the history's last days without spend (0: it spent on its last day)

    @property
    def available(self) -> bool:
        """Whether there was enough history for a forecast."""
        return self.total_usd is not None

    @property
    def calibrated(self) -> bool:
        """Whether the interval was calibrated on the forecast's past errors."""
        return self.scale is not None

    @property
    def daily_calibrated(self) -> bool:
        """Whether each day's band was calibrated on the forecast's past errors."""
        return self.daily_scale is not None


def calibration_needed(level: float) -> int:
    """How many scored past weeks a conformal interval at ``level`` needs.

    With ``n`` scores the conformal quantile is the ``ceil((n + 1) * level)``-th smallest, which
    exists only once that rank is at most ``n``.

    Args:
        level: the interval's coverage, in (0, 1).

    Returns:
        The least ``n`` (9 at 0.9, 19 at 0.95).
    """
    n = 1
    while math.ceil((n + 1) * level - 1e-9) > n:
        n += 1
    return n


def conformal_scale(scores: np.ndarray, level: float) -> float | None:
    """The split-conformal quantile of past scores: the ``ceil((n + 1) * level)``-th smallest.

    Args:
        scores: one non-negative score per past week (NaN-free).
        level: the interval's coverage, in (0, 1).

    Returns:
        The factor to scale the model's half-widths by, or None when there are too few scores
        for ``level`` (fewer than ``calibration_needed(level)``) or the quantile is infinite.
    """
    n = len(scores)
    rank = math.ceil((n + 1) * level - 1e-9)
    if rank > n:
        return None
    q = float(np.sort(np.asarray(scores, dtype="float64"))[rank - 1])
    return q if math.isfinite(q) else None


def interval_scores(
    point: np.ndarray, lo: np.ndarray, hi: np.ndarray, actual: np.ndarray
) -> np.ndarray:
    """How many of its forecast's half-widths each realised total fell from the point, on its
    side: 0 at the point, 1 on the interval's end, above 1 outside it.

    Args:
        point, lo, hi: each past forecast's point and interval (arrays of the same length).
        actual: the realised totals.

    Returns:
        The scores; a realised total off the point on a side of zero width scores infinity.
    """
    point, lo, hi, actual = (np.asarray(a, dtype="float64") for a in (point, lo, hi, actual))
    below, above = point - actual, actual - point
    with np.errstate(divide="ignore", invalid="ignore"):
        down = np.where(below > 0, below / (point - lo), 0.0)
        up = np.where(above > 0, above / (hi - point), 0.0)
    return np.nan_to_num(np.maximum(down, up), nan=np.inf)


def forecast_next_week(
    daily_cost: pd.Series, level: float = 0.9, simulations: int = SIMULATIONS, seed: int = 0
) -> SpendForecast:
    """Forecast the 7 days after ``daily_cost`` (a daily series, oldest first, no gaps), its
    interval calibrated on the model's own past errors.

    ``model_forecast`` is made at the last ``CALIBRATION_DAYS`` days of the history that have
    ``MIN_DAYS`` before them and 7 after them (refitted every ``REFIT_DAYS`` days, to the days
    before the refit's day only), the weeks that followed are scored, and ``calibrate``
    scales next week's interval and each day's band by them.

    Args:
        daily_cost: daily spend, a DatetimeIndex without gaps, oldest first.
        level: the interval's coverage.
        simulations: simulated weeks per interval.
        seed: the simulations' random seed.

    Returns:
        A ``SpendForecast`` (``model_forecast`` says what it holds); with too few past weeks
        to calibrate at ``level``, the interval and the days' band are the model's own
        (``calibrated`` and ``daily_calibrated`` are False) and ``note`` says they are
        unchecked.
    """
    out = model_forecast(daily_cost, level, simulations, seed)
    if not out.available or out.method == "constant daily spend":
        return out
    y = pd.Series(daily_cost, dtype="float64").asfreq("D")
    last = len(y) - SEASON  # the last origin whose week lies inside the history
    origins = range(max(MIN_DAYS, last + 1 - CALIBRATION_DAYS), last + 1)
    past = past_forecasts(y, origins, level, simulations, seed)
    return calibrate(out, past, realised_days(y, origins))


def realised_days(daily_cost: pd.Series, origins: range) -> np.ndarray:
    """The 7 days' spend after each of ``origins``, clipped at zero as the forecasts are.

    Args:
        daily_cost: daily spend, a DatetimeIndex without gaps, oldest first.
        origins: days of ``daily_cost``, each with 7 days of it from there.

    Returns:
        An array of shape ``(len(origins), 7)``.

    Raises:
        ValueError: an origin has fewer than 7 days after it.
    """
    y = pd.Series(daily_cost, dtype="float64").clip(lower=0.0).to_numpy()
    days = [y[s : s + SEASON] for s in origins]
    if any(len(d) != SEASON for d in days):
        raise ValueError("every origin needs 7 days of spend after it")
    return np.asarray(days, dtype="float64").reshape(len(days), SEASON)


def past_forecasts(
    daily_cost: pd.Series,
    origins: range,
    level: float = 0.9,
    simulations: int = SIMULATIONS,
    seed: int = 0,
) -> list[SpendForecast]:
    """``model_forecast`` from each of ``origins`` (days of ``daily_cost``), each with the
    parameters fitted at the latest multiple of ``REFIT_DAYS`` (``MIN_DAYS`` at least) not after
    it, to the days before that day only, and smoothed over the days up to the origin.

    The refit days are fixed days of the series, so an origin's forecast is the same whichever
    later day calibrates with it (the benchmark scores every origin of a ledger from one call).

    Args:
        daily_cost: daily spend, a DatetimeIndex without gaps, oldest first.
        origins: increasing days, each at least ``MIN_DAYS`` and at most ``len(daily_cost)``.
        level, simulations, seed: as ``model_forecast``'s.

    Returns:
        One ``SpendForecast`` per origin.
    """
    y = pd.Series(daily_cost, dtype="float64").asfreq("D")
    fits: dict[int, SpendForecast] = {}
    out = []
    for s in origins:
        s0 = max(MIN_DAYS, s - s % REFIT_DAYS)
        if s0 not in fits:
            fits[s0] = model_forecast(y.iloc[:s0], level, simulations, seed)
        fit = fits[s0]
        if s == s0:
            out.append(fit)
        else:  # a constant history before the refit day gave no parameters: fit here
            out.append(model_forecast(y.iloc[:s], level, simulations, seed, params=fit.params))
    return out


def calibrate(
    forecast: SpendForecast,
    past: list[SpendForecast],
    actual: np.ndarray,
    daily_history: int = DAILY_MIN_HISTORY,
) -> SpendForecast:
    """Scale ``forecast``'s interval, and each day's band, by the conformal quantiles of past
    forecasts' scores: the weeks' totals for the interval, the ``h``-th days for day ``h``.

    Args:
        forecast: a ``model_forecast`` (changed in place).
        past: ``model_forecast``s made at earlier origins, each from the days before it only.
        actual: the realised spend of the 7 days after each of ``past``'s origins, shape
            ``(len(past), 7)`` (``realised_days``); every one of those weeks must have ended
            before ``forecast``'s origin.
        daily_history: the days of history a past forecast needs for its days to be scored
            (the week's total scores every past forecast).

    Returns:
        ``forecast``, with ``scale``, ``lo_usd``, ``hi_usd``, ``daily_scale``, the ``daily``
        band's ``lo``/``hi`` and ``calibration_weeks`` set; where there are too few past weeks
        for its level (or a score is unbounded), the model's interval or band is kept and
        ``note`` says it is unchecked.
    """
    f = forecast
    f.calibration_weeks = len(past)
    days = np.asarray(actual, dtype="float64").reshape(len(past), SEASON)
    grown = np.array([p.days_of_history >= daily_history for p in past], dtype=bool)
    if past:
        # column 0 the week's total (every past forecast), columns 1..7 its days (grown ones)
        point, lo, hi = (
            np.array([[getattr(p, k), *p.daily[c]] for p in past], dtype="float64")
            for k, c in (
                ("total_usd", "mean"),
                ("model_lo_usd", "model_lo"),
                ("model_hi_usd", "model_hi"),
            )
        )
        total = _conformal_scales(
            point[:, :1], lo[:, :1], hi[:, :1], days.sum(axis=1, keepdims=True), f.level
        )
        f.scale = None if np.isnan(total[0]) else float(total[0])
        if grown.any():
            scales = _conformal_scales(
                point[grown, 1:], lo[grown, 1:], hi[grown, 1:], days[grown], f.level
            )
            f.daily_scale = None if np.isnan(scales).any() else scales
    needs = (
        f"calibrating on the forecast's past errors needs {f.calibration_needed} past weeks "
        f"forecast ({MIN_DAYS + SEASON + f.calibration_needed - 1} days of history), this "
        f"history has {len(past)}"
    )
    if f.scale is None:
        both = " and each day's band are" if f.daily_scale is None else " is"
        f.note = f"the {f.level:.0%} interval{both} the model's own, unchecked: {needs}"
    else:
        f.lo_usd, f.hi_usd = (
            float(v) for v in _widen(f.total_usd, f.model_lo_usd, f.model_hi_usd, f.scale)
        )
        if f.daily_scale is None:
            why = (
                "a past day fell outside a band of no width on its side"
                if grown.sum() >= f.calibration_needed
                else f"calibrating it needs {f.calibration_needed} past weeks forecast from "
                f"{daily_history} days of history or more "
                f"({daily_history + SEASON + f.calibration_needed - 1} days in all), "
                f"this history has {int(grown.sum())}"
            )
            f.note = f"each day's {f.level:.0%} band is the model's own, unchecked: {why}"
    if f.daily_scale is not None:
        d = f.daily
        d["lo"], d["hi"] = _widen(
            d["mean"].to_numpy(), d["model_lo"].to_numpy(), d["model_hi"].to_numpy(), f.daily_scale
        )
    return f


def _conformal_scales(
    point: np.ndarray, lo: np.ndarray, hi: np.ndarray, actual: np.ndarray, level: float
) -> np.ndarray:
    """``conformal_scale`` of each column's ``interval_scores`` (rows: past forecasts), NaN
    where a column cannot be calibrated."""
    scores = interval_scores(point, lo, hi, actual)
    return np.array(
        [np.nan if (q := conformal_scale(col, level)) is None else q for col in scores.T],
        dtype="float64",
    )


def _widen(point: Any, lo: Any, hi: Any, scale: Any) -> tuple[np.ndarray, np.ndarray]:
    """The interval ``lo``..``hi`` around ``point`` with its half-widths scaled by ``scale``."""
    # clipping at zero again: a wider interval of a spend near zero must not reach below it
    return np.maximum(point - scale * (point - lo), 0.0), point + scale * (hi - point)


def model_forecast(
    daily_cost: pd.Series,
    level: float = 0.9,
    simulations: int = SIMULATIONS,
    seed: int = 0,
    params: np.ndarray | None = None,
) -> SpendForecast:
    """The model's own forecast of the 7 days after ``daily_cost``, its interval uncalibrated.

    Args:
        daily_cost: daily spend, a DatetimeIndex without gaps, oldest first.
        level: the interval's coverage.
        simulations: simulated weeks per interval.
        seed: the simulations' random seed.
        params: ETS parameters to smooth with instead of fitting (from a fit to an earlier
            part of the same series: the same start, so the same initial states).

    Returns:
        A ``SpendForecast`` whose ``lo_usd``/``hi_usd`` equal ``model_lo_usd``/``model_hi_usd``
        and whose ``daily`` band's ``lo``/``hi`` equal its ``model_lo``/``model_hi``.
        With fewer than two weeks of history there is no forecast, and ``note`` says so. Spend
        cannot be negative: the point and the days' bounds are clipped at zero, and so are the
        bounds of the week's total (of the simulated weeks, not of their clipped days). The
        errors scale with the spend, so a series whose last weeks spent nothing gets a forecast
        and an interval near zero; ``idle_days`` counts those days.
    """
    import warnings

    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    y = pd.Series(daily_cost, dtype="float64").asfreq("D")
    days = int(len(y))
    out = SpendForecast(level=level, days_of_history=days)
    out.calibration_needed = calibration_needed(level)
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
        out.daily = pd.DataFrame(dict.fromkeys(_DAILY, value), index=index)
        out.total_usd = out.lo_usd = out.hi_usd = value * SEASON
        out.model_lo_usd = out.model_hi_usd = out.total_usd
        out.method = "constant daily spend"
        return out
    spend = y.clip(lower=0.0)
    offset = OFFSET * float(spend.mean())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter; the fit is judged by its interval
        model = ETSModel(
            spend + offset,
            error="mul",
            trend="add",
            damped_trend=True,
            seasonal="mul",
            seasonal_periods=SEASON,
        )
        fitted = model.fit(disp=False) if params is None else model.smooth(params)
        mean, raw = _simulated_week(fitted, offset, simulations, np.random.default_rng(seed))
    alpha = (1.0 - level) / 2.0
    bounds = np.quantile(np.clip(raw, 0.0, None), [alpha, 1.0 - alpha], axis=1)
    out.daily = pd.DataFrame(
        dict(zip(_DAILY, (np.clip(mean, 0.0, None), *bounds, *bounds), strict=True)), index=index
    )
    out.total_usd, out.model_lo_usd, out.model_hi_usd = _week_interval(mean, raw, level)
    out.lo_usd, out.hi_usd = out.model_lo_usd, out.model_hi_usd
    out.params = np.asarray(fitted.params, dtype="float64")
    out.method = (
        f"ETS(M, Ad, M) with weekly seasonality on {days} days of spend, its errors in "
        f"proportion to the spend; {level:.0%} interval from {simulations} simulated weeks"
    )
    return out


def _simulated_week(
    fitted: Any, offset: float, simulations: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The fitted model's next 7 days: the point forecast and the simulated paths, offset
    removed and not clipped."""
    point = fitted.forecast(SEASON)
    paths = fitted.simulate(SEASON, anchor="end", repetitions=simulations, rng=rng)
    raw = np.asarray(paths, dtype="float64").reshape(SEASON, -1) - offset
    raw = raw[:, np.isfinite(raw).all(axis=0)]  # a path whose damped level ran away
    return np.asarray(point, dtype="float64").reshape(SEASON) - offset, raw


def _week_interval(mean: np.ndarray, raw: np.ndarray, level: float) -> tuple[float, float, float]:
    """A week's total: the clipped days' point summed, and the ``level`` interval of the
    simulated totals, clipped at zero."""
    # the week's total as the model simulates it, then clipped: clipping each day before the
    # sum would turn the model's negative noise into spend, and a week of spend near zero
    # would get a lower end above its own point (clipping commutes with a quantile)
    alpha = (1.0 - level) / 2.0
    totals = raw.sum(axis=0)
    return (
        float(np.clip(mean, 0.0, None).sum()),
        max(float(np.quantile(totals, alpha)), 0.0),
        max(float(np.quantile(totals, 1.0 - alpha)), 0.0),
    )
