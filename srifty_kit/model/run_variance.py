"""Run-to-run variance: how far a configuration's mean moves between runs, VMs or hosts.

The step-time model's interval describes another step measured the way the fitted steps were.
A new run on a new VM can differ by more: its mean step time moves by a between-run factor
(placement, neighbours, clocks) that steps within one run never show. Where the same
configuration was measured in more than one run, that factor's spread is estimated here and
``widen`` carries it into the prediction interval of ``interval_kind="new_run"``.

**Runs** are told apart, per configuration, by the first of
  - ``run``: one id per profiling call (the kit's profiler writes it);
  - ``repeat``, when it labels groups of several steps (several rows per configuration, host
    and repeat; with hosts, a run is a host and a repeat); where every row has its own
    ``repeat``, rows are steps (the profiler numbers its steps so) or run means, and no
    within-run spread can be told from the between-run one;
  - ``host``, when one configuration was measured on several hosts of its instance type.

**Estimator** (one-way random effects on the log of each run's mean, method of moments):
each run i of configuration c gives y_ci = log(mean of its kept steps) and v_ci, the variance
of that log mean from the autocorrelation-robust interval (``measure.variance.summarise``:
warm-up cut, batch means; 0 for a run that is one row). With k_c runs of configuration c,

    tau**2 = sum_c [ sum_i (y_ci - mean_i y_ci)**2 - (1 - 1/k_c) * sum_i v_ci ]
             / sum_c (k_c - 1),        floored at 0,

the unweighted (Hedges) estimator with configurations as fixed effects, pooled over the
configurations of one instance type (the VM is what varies). statsmodels' ``MixedLM`` would
fit the same variance components, but takes the steps within a run as independent: their
autocorrelation then reads as between-run variance (tests/model/test_run_variance.py shows
it); subtracting the robust within-run variance of each mean does not.

``widen``: half-width in log space ``sqrt(h**2 + (z * tau)**2)``, z the normal quantile of
the level. The step interval is calibrated on the fitted rows; where those already pool
several runs of every configuration it holds part of tau, and the new-run interval is then
on the wide side. On simulated ring all-reduce steps (24 configurations, runs 6% apart, steps
2% and lag-1 0.5 within; tests/model/test_run_variance.py), a new run's steps fell inside the
90% intervals: fitted on one run with six configurations repeated in two more, 62% (step) and
87% (new run); fitted on three runs of every configuration, 88% and 98%.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from srifty_kit.errors import InputError
from srifty_kit.measure.variance import steady, summarise, warmup_mask
from srifty_kit.model.intervals import two_sided_z

INTERVAL_KINDS = ("step", "new_run")
CONFIG = ("model", "num_nodes", "num_workers", "local_bsz", "placement")
COLUMNS = (
    "instance_type",
    "between_sd",
    "within_sd",
    "configs",
    "runs",
    "runs_by",
    "note",
)


def run_labels(table: pd.DataFrame) -> tuple[pd.Series | None, str]:
    """The run of each row and the column that told it (None, "" when no runs are told)."""
    keys = _keys(table)
    if "run" in table and table["run"].notna().any():
        return table["run"].astype(str), "run"
    hosts = ["host"] if "host" in table else []
    if (
        "repeat" in table
        and table.groupby([*keys, *hosts, "repeat"], dropna=False).size().max() > 1
    ):
        label = table["repeat"].astype(str)
        if hosts:
            return table["host"].astype(str) + "/" + label, "host and repeat"
        return label, "repeat"
    if hosts and table.groupby(keys, dropna=False)["host"].nunique().max() > 1:
        return table["host"].astype(str), "host"
    return None, ""


def _keys(table: pd.DataFrame) -> list[str]:
    return ["instance_type", *(k for k in CONFIG if k in table.columns)]


def _order(rows: pd.DataFrame) -> pd.DataFrame:
    for column in ("repeat", "timestamp"):
        if column in rows:
            return rows.sort_values(column, kind="stable")
    return rows


def run_means(table: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration and run: log of the run's mean step and its variance.

    Columns: the configuration keys, ``run``, ``steps`` (rows of the run), ``log_mean``,
    ``log_var`` (variance of ``log_mean`` from the run's own steps; 0 for a one-row run) and
    ``log_sd_step`` (the spread of one step around the run's mean, log scale; NaN for one row).
    """
    labels, _ = run_labels(table)
    keys = _keys(table)
    columns = [*keys, "run", "steps", "log_mean", "log_var", "log_sd_step"]
    if labels is None:
        return pd.DataFrame(columns=columns)
    marked = "warmup" in table
    rows = []
    for key, group in table.assign(_run=labels).groupby([*keys, "_run"], dropna=False, sort=True):
        group = _order(group)
        x = group["step_time_s"].to_numpy(float)
        warm = warmup_mask(group["warmup"]) if marked else None
        if x.size == 1:
            mean, var, sd = float(x[0]), 0.0, math.nan
        else:
            est = summarise(x, warmup=warm)
            mean = est.mean
            var = (est.std**2 / est.n_eff) / mean**2 if est.n_eff > 0 and mean > 0 else math.nan
            sd = est.std / mean if mean > 0 else math.nan
        if not mean > 0:
            continue
        rows.append(
            {
                **dict(zip([*keys, "run"], key, strict=True)),
                "steps": x.size,
                "log_mean": math.log(mean),
                "log_var": var,
                "log_sd_step": sd,
            }
        )
    return pd.DataFrame(rows, columns=columns)


def between_run_variance(means: pd.DataFrame) -> tuple[float, int, int]:
    """(tau**2, configurations with >= 2 runs, their runs) from ``run_means`` rows of one
    instance type: the pooled method-of-moments estimator of the module docstring."""
    keys = [k for k in ("model", *CONFIG[1:]) if k in means.columns]
    num, den, configs, runs = 0.0, 0, 0, 0
    for _, group in means.dropna(subset=["log_var"]).groupby(keys, dropna=False):
        k = len(group)
        if k < 2:
            continue
        y = group["log_mean"].to_numpy()
        v = group["log_var"].to_numpy()
        num += float(np.sum((y - y.mean()) ** 2) - (1 - 1 / k) * np.sum(v))
        den += k - 1
        configs += 1
        runs += k
    if den == 0:
        return math.nan, 0, 0
    return max(num / den, 0.0), configs, runs


def estimate(table: pd.DataFrame) -> pd.DataFrame:
    """Per instance type: the between-run sd of log mean step time and what it rests on.

    ``between_sd`` is 0 where runs were told apart but differ no more than their own steps
    explain, NaN where no configuration was measured in two runs with steps to tell within
    from between (``note`` says which).
    """
    labels, by = run_labels(table)
    means = run_means(table)
    rows = []
    for itype in sorted(table["instance_type"].astype(str).unique()):
        mine = means[means["instance_type"].astype(str) == itype]
        tau2, configs, runs = between_run_variance(mine) if len(mine) else (math.nan, 0, 0)
        within = (
            float(np.nanmedian(mine["log_sd_step"]))
            if mine["log_sd_step"].notna().any()
            else math.nan
        )
        if labels is None:
            note = (
                "no runs told apart: no run column, no repeat labelling several steps, "
                "one host per configuration"
            )
        elif configs == 0:
            note = f"runs told apart by {by!r}, but no configuration has two of them"
        elif (mine["steps"] <= 1).all():
            tau2, note = math.nan, "every run is one row: within and between cannot be told apart"
        else:
            note = f"{configs} configuration(s) measured in {runs} runs (by {by!r})"
        rows.append(
            {
                "instance_type": itype,
                "between_sd": math.sqrt(tau2) if np.isfinite(tau2) else math.nan,
                "within_sd": within,
                "configs": configs,
                "runs": runs,
                "runs_by": by,
                "note": note,
            }
        )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def check_kind(kind: str) -> str:
    """``kind`` if it is an interval kind, else an InputError naming them."""
    if kind not in INTERVAL_KINDS:
        raise InputError(
            f"unknown interval kind {kind!r}",
            fix='use "step" (another step of a run like the measured ones) or "new_run" '
            "(a step of a new run on a new VM)",
        )
    return kind


def widen(
    point: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    level: float,
    between_sd: float | np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The new-run interval: the step interval's log half-width and the between-run sd at
    ``level`` added in quadrature (NaN sd: nothing to add)."""
    sd = np.nan_to_num(np.asarray(between_sd, float), nan=0.0)
    point = np.asarray(point, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.maximum(np.log(np.asarray(hi, float) / point), np.log(point / np.asarray(lo, float)))
    h = np.sqrt(h**2 + (two_sided_z(level) * sd) ** 2)
    return point * np.exp(-h), point * np.exp(h)


def _between_sd(between: pd.DataFrame | None, kind: str) -> pd.Series:
    """Between-run sd per instance type for ``kind`` (an InputError when it is unknown)."""
    if between is None:
        raise InputError(
            f'this model holds no between-run estimate for interval kind "{kind}" '
            "(a model file does not keep it)",
            fix="fit the model on the measurements to predict new-run intervals",
        )
    return between.set_index("instance_type")["between_sd"]


def apply_kind(
    pred: pd.DataFrame, kind: str, level: float, between: pd.DataFrame | None
) -> pd.DataFrame:
    """``pred`` with its interval for ``kind``, an ``interval_kind`` column saying which and,
    for new runs, the ``between_run_sd`` added (NaN: none measured for that type, none added).
    """
    check_kind(kind)
    out = pred
    if kind == "new_run":
        sd = out["instance_type"].astype(str).map(_between_sd(between, kind)).to_numpy(float)
        out["step_time_lo"], out["step_time_hi"] = widen(
            out["step_time_s"].to_numpy(),
            out["step_time_lo"].to_numpy(),
            out["step_time_hi"].to_numpy(),
            level,
            sd,
        )
        out["between_run_sd"] = sd
    out["interval_kind"] = kind
    out.attrs["interval_kind"] = kind
    return out


def apply_kind_arrays(
    pred: dict[str, np.ndarray],
    kind: str,
    level: float,
    instance_type: str,
    between: pd.DataFrame | None,
) -> dict[str, np.ndarray]:
    """``apply_kind`` for the estimator's array predictions of one instance type."""
    if kind == "step":
        return pred
    check_kind(kind)
    sd = _between_sd(between, kind).get(str(instance_type), math.nan)
    lo, hi = widen(pred["step_time_s"], pred["step_time_lo"], pred["step_time_hi"], level, sd)
    return {**pred, "step_time_lo": lo, "step_time_hi": hi}


def without_warmup(table: pd.DataFrame) -> pd.DataFrame:
    """The rows a fit uses: all but the steps the profiler marked as warm-up."""
    return steady(table)
