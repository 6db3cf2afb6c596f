"""What each job of a usage week would have cost on the configuration the search recommends,
and the saving with its interval.

For a job whose training model has a fitted ``StepTimeModel`` (or a profile to fit one) and
whose per-worker batch is recorded, the work it did is read from the run itself: the hours it
ran on its configuration divided by the predicted step time, times its global batch. The search
then looks for the cheapest configuration that finishes that work within the time the job took
plus ``slack`` (25% by default), checked as every search checks a deadline: against the upper
end of the predicted time at the level. The global batch may not grow (the samples to the
target stay what they were) and the per-worker batch stays the job's. Where the model is too
unsure of every configuration (a type it only knows by transfer, say), there is no
recommendation and the note says why.

The saving is what the job paid minus the recommended configuration's cost; its interval comes
from the recommendation's cost interval at the level (the work is the model's point reading of
the run).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from srifty_kit.decide.job import Constraints, Job
from srifty_kit.decide.planner import search
from srifty_kit.errors import InputError
from srifty_kit.model.estimator import StepTimeModel
from srifty_kit.tables.files import read_table

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
        note=note,
    )
    for key in ("rec_instance_type", "rec_pricing"):
        row[key] = None
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
    saving with its interval at ``level``, or a ``note`` saying why there is none.

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
    if found.pick is None:
        row["note"] = (
            f"nothing is sure at {level:.0%} to finish within {deadline:.1f} h "
            f"({1 + slack:.3g}x the {hours:.1f} h it took)"
        )
        return row
    pick = found.pick
    paid = float(job["cost_usd"])
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
