"""What each job of a usage week would have cost on the configuration the search recommends,
and the saving with its interval.

For a job whose training model has a fitted ``StepTimeModel`` (or a profile to fit one) and
whose per-worker batch is recorded, the work it did is read from the run itself: the hours it
ran on its configuration divided by the predicted step time, times its global batch. The search
then looks for the cheapest configuration that finishes that work within the time the job took
plus ``slack`` (25% by default), checked as every search checks a deadline: against the upper
end of the predicted time at the level. The global batch may not grow (the samples to the
target stay what they were) and the per-worker batch stays the job's. Where the model is too
unsure of every configuration (a type it only knows by transfer, say), the job is kept as it
ran: its own run is the one configuration known to finish in its time (it did), so the
recommendation is "keep as is", a saving of exactly 0, and the note says why and which short
measurement would decide it (``decide.probes``). So is a job whose cheapest configuration sure
to finish in time would cost no less than it paid (a savings-plan rate, say). A job that lacks
what a recommendation needs (a model, a batch, a GPU type) gets none, and the note says what.

The saving is what the job paid minus the recommended configuration's cost; its interval comes
from the recommendation's cost interval at the level (the work is the model's point reading of
the run): ``saving_lo_usd`` is the saving the job reaches with probability ``level``,
``saving_hi_usd`` the one it stays under with that probability (the search's one-sided ends).
The week's total has its own ends at the same level (``total_interval``), from joint draws of
the model's belief (``saving_draws``): recommendations of one training model on one instance
type share that group's error, and every type its network's, so their savings move together,
and adding each job's ends would claim more than the total can miss by.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd
from scipy.special import ndtri

from srifty_kit.decide.explanation import config_phrase, money
from srifty_kit.decide.job import Constraints, Job
from srifty_kit.decide.planner import search
from srifty_kit.decide.probes import probe_sentence, suggest_probes
from srifty_kit.errors import InputError, check_level
from srifty_kit.model import posterior
from srifty_kit.model.estimator import StepTimeModel
from srifty_kit.tables.files import read_table

DRAWS = 4000  # joint draws of the week's savings: the total's ends to about 1% of its spread
SLACK = 0.25  # a recommendation may take up to 25% longer than the job did (at the upper end)
SAVINGS_COLUMNS = (
    "job",
    "model",
    "instance_type",
    "num_nodes",
    "pricing",
    "hours",
    "cost_usd",
    "samples",
    "rec_instance_type",
    "rec_num_nodes",
    "rec_num_workers",
    "rec_local_bsz",
    "rec_pricing",
    "rec_hours",
    "rec_cost_usd",
    "rec_cost_lo_usd",
    "rec_cost_hi_usd",
    "saving_usd",
    "saving_lo_usd",
    "saving_hi_usd",
    "keep",
    "note",
)


def fitted_models(paths: Iterable[str | os.PathLike]) -> dict[str, StepTimeModel]:
    """Training-model name -> StepTimeModel, from model files (``srifty fit``'s JSON) and
    measurement tables (profiles, fitted here). The first file naming a model wins."""
    out: dict[str, StepTimeModel] = {}
    for path in paths:
        if str(path).lower().endswith(".json"):
            model = StepTimeModel.load(path)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # terms a profile cannot identify are fixed
                model = StepTimeModel().fit(read_table(path))
        for name in model.models_:
            out.setdefault(str(name), model)
    return out


def _gpus(catalog: pd.DataFrame, instance_type: str) -> float:
    rows = catalog.loc[catalog["instance_type"] == instance_type, "gpu_count"]
    return float(pd.to_numeric(rows, errors="coerce").iloc[0]) if len(rows) else np.nan


def _blank(job: pd.Series, note: str) -> dict:
    row = {c: np.nan for c in SAVINGS_COLUMNS}
    row.update(
        job=job["job"],
        model=job.get("model"),
        instance_type=job["instance_type"],
        num_nodes=job["num_nodes"],
        pricing=job["pricing"],
        hours=job["wall_hours"],
        cost_usd=job["cost_usd"],
        keep=False,
        note=note,
    )
    for key in ("rec_instance_type", "rec_pricing"):
        row[key] = None
    return row


def _keep(row: dict, job: pd.Series, workers: int, why: str) -> dict:
    """``row`` recommending the configuration the job ran on (``workers`` in all), at what it
    paid: a saving of exactly 0, and ``why`` nothing else is recommended."""
    row.update(
        keep=True,
        rec_instance_type=job["instance_type"],
        rec_num_nodes=int(job["num_nodes"]),
        rec_num_workers=int(workers),
        rec_local_bsz=int(job["local_bsz"]),
        rec_pricing=job["pricing"],
        rec_hours=float(job["wall_hours"]),
        rec_cost_usd=float(job["cost_usd"]),
        rec_cost_lo_usd=float(job["cost_usd"]),
        rec_cost_hi_usd=float(job["cost_usd"]),
        saving_usd=0.0,
        saving_lo_usd=0.0,
        saving_hi_usd=0.0,
        note=why,
    )
    return row


def _why_not(job: pd.Series, models: Mapping[str, StepTimeModel], catalog: pd.DataFrame) -> str:
    """Why a job gets no recommendation ('' when it can)."""
    name = job.get("model")
    if not isinstance(name, str) or not name:
        return "no model tag: the job's training model is not recorded"
    if name not in models:
        return f"no fitted model or profile for {name!r}"
    if not (np.isfinite(job.get("local_bsz", np.nan)) and job["local_bsz"] >= 1):
        return "no per-worker batch recorded (local_bsz)"
    if not (np.isfinite(job["num_nodes"]) and job["num_nodes"] >= 1):
        return "node count unknown"
    if not job["wall_hours"] > 0:
        return "no hours recorded"
    gpus = _gpus(catalog, job["instance_type"])
    if np.isnan(gpus):
        return f"{job['instance_type']} is not in the catalog"
    if gpus < 1:
        return f"{job['instance_type']} has no GPU: the step-time model covers GPU jobs"
    return ""


def recommend(
    jobs: pd.DataFrame,
    models: Mapping[str, StepTimeModel],
    catalog: pd.DataFrame,
    level: float = 0.9,
    spot: bool = True,
    max_nodes: int = 16,
    slack: float = SLACK,
) -> pd.DataFrame:
    """One row per job (``SAVINGS_COLUMNS``): the recommended configuration, its cost and the
    saving with its interval at ``level``; or, with ``keep`` True, the job's own configuration
    at what it paid (saving 0) and a ``note`` saying why nothing else is recommended and what
    measurement would decide it; or no recommendation (NaN) and a ``note`` saying what is
    missing.

    ``jobs`` has a row per job with job, model, instance_type, num_nodes, pricing,
    wall_hours, cost_usd and local_bsz (``tables.ledger.jobs_of_week``).
    """
    rows = []
    for _, job in jobs.iterrows():
        note = _why_not(job, models, catalog)
        if note:
            rows.append(_blank(job, note))
            continue
        try:
            model = models[job["model"]]
            rows.append(_recommend_one(job, model, catalog, level, spot, max_nodes, slack))
        except InputError as err:  # e.g. the catalog lacks the figures to carry the model
            rows.append(_blank(job, err.problem))
    return pd.DataFrame(rows, columns=list(SAVINGS_COLUMNS))


def _recommend_one(
    job: pd.Series,
    model: StepTimeModel,
    catalog: pd.DataFrame,
    level: float,
    spot: bool,
    max_nodes: int,
    slack: float,
) -> dict:
    nodes = int(job["num_nodes"])
    gpus = int(_gpus(catalog, job["instance_type"]))
    bsz = int(job["local_bsz"])
    workers, hours = nodes * gpus, float(job["wall_hours"])
    ran = pd.DataFrame(
        {
            "model": [job["model"]],
            "instance_type": [job["instance_type"]],
            "num_nodes": [nodes],
            "num_workers": [workers],
            "gpus_per_node": [gpus],
            "local_bsz": [bsz],
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        step = float(model.predict(ran, level=level)["step_time_s"].iloc[0])
        samples = hours * 3600.0 / step * workers * bsz
        work = Job(
            job["model"],
            samples=samples,
            reference_bsz=workers * bsz,
            local_bsz=(bsz,),
            global_bsz_max=workers * bsz,
        )
        deadline = hours * (1.0 + slack)
        found = search(
            model,
            catalog,
            work,
            Constraints(
                deadline_h=deadline, confidence=level, spot=spot, max_nodes=max(max_nodes, nodes)
            ),
            objective="cost",
            top=1,
        )
    row = _blank(job, "")
    row["samples"] = samples
    paid = float(job["cost_usd"])
    if found.pick is None:
        # the job's own run is the one configuration known to finish in time: it did
        # valued against running it as it ran, at what it paid: no probe saves more than that
        probe = probe_sentence(suggest_probes(found, k=1, fallback_usd=paid))
        return _keep(
            row,
            job,
            workers,
            f"nothing else is sure at {level:.0%} to finish within {deadline:.1f} h "
            f"({1 + slack:.3g}x the {hours:.1f} h it took). {probe}",
        )
    pick = found.pick
    if float(pick["cost_usd"]) >= paid:
        return _keep(
            row,
            job,
            workers,
            f"the cheapest configuration sure at {level:.0%} to finish in time, "
            f"{config_phrase(pick)}, would cost {money(float(pick['cost_usd']))}, "
            f"not less than the {money(paid)} it paid",
        )
    row.update(
        rec_instance_type=pick["instance_type"],
        rec_num_nodes=int(pick["num_nodes"]),
        rec_num_workers=int(pick["num_workers"]),
        rec_local_bsz=int(pick["local_bsz"]),
        rec_pricing=pick["pricing"],
        rec_hours=float(pick["time_h"]),
        rec_cost_usd=float(pick["cost_usd"]),
        rec_cost_lo_usd=float(pick["cost_lo_usd"]),
        rec_cost_hi_usd=float(pick["cost_hi_usd"]),
        saving_usd=paid - float(pick["cost_usd"]),
        saving_lo_usd=paid - float(pick["cost_hi_usd"]),
        saving_hi_usd=paid - float(pick["cost_lo_usd"]),
    )
    return row


def saving_draws(
    savings: pd.DataFrame,
    models: Mapping[str, StepTimeModel],
    catalog: pd.DataFrame,
    level: float = 0.9,
    draws: int = DRAWS,
    seed: int = 0,
) -> np.ndarray:
    """Joint draws of each job's saving: what it paid less what its recommendation costs
    under one draw of the model's belief about the recommended configurations' step times.

    The recommendations are drawn together (``posterior.Belief.levels``): those of one
    training model on one instance type share the group's error, those on one type its
    network's, jobs recommended the same configuration also its own persistent stray; each
    job is a run of its own and adds a run's noise. A spot pick's reclaims add the spread
    between its expected cost and its upper end that the step's belief does not explain
    (independent per job). A recommendation whose cost interval has no width (the job kept
    as it ran) is a known cost: its saving is the same in every draw.

    Args:
        savings: ``recommend``'s table.
        models, catalog: what ``recommend`` was given.
        level: the level its ends were read at (to size a spot pick's reclaim spread).
        draws, seed: how many joint draws; the same seed gives the same draws.

    Returns:
        (draws, len(savings)) dollars; NaN in the columns of jobs without a saving.

    Raises:
        InputError: a recommended configuration the model can no longer predict.
    """
    out = np.full((draws, len(savings)), np.nan)
    beliefs: list[posterior.Belief] = []  # one per configuration recommended
    where: dict[tuple, int] = {}  # a configuration's position in beliefs
    jobs = []  # (column, its configuration's position, its run's own log sd, $ per step-second)
    q = float(ndtri(level))
    for i, row in enumerate(savings.itertuples(index=False)):
        if pd.isna(row.saving_usd):
            continue
        if row.rec_cost_lo_usd == row.rec_cost_hi_usd:  # known: nothing to draw
            out[:, i] = row.saving_usd
            continue
        key = (
            row.model,
            row.rec_instance_type,
            int(row.rec_num_nodes),
            int(row.rec_num_workers),
            int(row.rec_local_bsz),
        )
        if key not in where:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                beliefs.append(
                    models[row.model].predict_belief(
                        *key[:2], *(np.array([v]) for v in key[2:]), catalog
                    )
                )
            where[key] = len(beliefs) - 1
        b = beliefs[where[key]]
        reach = np.log(row.rec_cost_hi_usd / row.rec_cost_usd) / q
        reclaims = np.sqrt(np.maximum(reach**2 - b.sd**2, 0.0))
        jobs.append((i, where[key], float(reclaims[0]), row.rec_cost_usd / float(b.median[0])))
    if jobs:
        # a configuration's level (its shared errors and its own persistent stray) is drawn
        # once, whichever jobs ran on it; each job is its own run: a run's noise and, on spot,
        # its reclaims, independent per job
        columns, at, reclaims, per_second = (np.array(v) for v in zip(*jobs, strict=True))
        together = posterior.concat(beliefs)
        rng = np.random.default_rng(seed)
        level, run = together.levels(draws, rng)
        own = np.hypot(run[at], reclaims)
        noise = own * rng.standard_normal((draws, at.size))
        steps = together.point[at] * np.exp(level[:, at] + noise)
        paid = savings["cost_usd"].to_numpy(float)[columns]
        out[:, columns] = paid - steps * per_second
    return out


def total_interval(draws: np.ndarray, level: float = 0.9) -> tuple[float, float]:
    """The ends of the total saving at ``level``, read as each job's are: the total reached
    with probability ``level`` and the one it stays under with that probability.

    Args:
        draws: ``saving_draws``' (draws, jobs) array; NaN columns (no saving) are left out.
        level: in (0, 1).

    Returns:
        (lower, upper) dollars: quantiles (1 - level) and ``level`` of the per-draw sum;
        for one job, that job's own ends from the same draws; NaN when no job has a saving.

    Raises:
        InputError: ``level`` is not in (0, 1).
    """
    check_level(level)
    known = ~np.isnan(draws).all(axis=0)
    if not known.any():
        return np.nan, np.nan
    total = draws[:, known].sum(axis=1)
    lo, hi = np.quantile(total, [1.0 - level, level])
    return float(min(lo, hi)), float(max(lo, hi))
