"""What a search panel can offer and what its settings mean: choices from the fitted model and
the catalog, and the ``Constraints`` of a panel's values (GPU models become instance types)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from srifty_kit.catalog.query import instance_family
from srifty_kit.decide.job import Constraints
from srifty_kit.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from srifty_kit.model.estimator import StepTimeModel


def _gpu_rows(catalog: pd.DataFrame) -> pd.DataFrame:
    gpus = pd.to_numeric(catalog["gpu_count"], errors="coerce").fillna(0)
    rows = catalog[gpus > 0]
    if "accelerator_kind" in rows:
        rows = rows[rows["accelerator_kind"].fillna("GPU").astype(str) == "GPU"]
    return rows


def search_choices(model: StepTimeModel, catalog: pd.DataFrame) -> dict[str, list[str]]:
    """The training models the fitted model knows, and the instance families and GPU models
    of the catalog's GPU types (what the search considers without naming types)."""
    rows = _gpu_rows(catalog)
    return {
        "workloads": [str(m) for m in model.models_],
        "families": sorted(set(instance_family(rows["instance_type"]))),
        "gpu_models": sorted({str(g) for g in rows["gpu_model"].dropna()}),
    }


def panel_constraints(
    catalog: pd.DataFrame,
    *,
    deadline_h: float | None,
    budget_usd: float | None,
    confidence: float,
    max_nodes: int,
    spot: bool,
    mixes: bool,
    families: tuple[str, ...] = (),
    gpu_models: tuple[str, ...] = (),
) -> Constraints:
    """The constraints a panel's settings mean. Empty ``families`` or ``gpu_models`` mean all;
    GPU models become the catalog's instance types with those GPUs (in those families)."""
    types = None
    if gpu_models:
        rows = _gpu_rows(catalog)
        keep = rows["gpu_model"].isin(list(gpu_models)).to_numpy()
        if families:
            keep = keep & instance_family(rows["instance_type"]).isin(list(families)).to_numpy()
        types = tuple(sorted(set(rows.loc[keep, "instance_type"].astype(str))))
        if not types:
            raise InputError(
                f"no instance type has {' or '.join(gpu_models)} GPUs"
                + (f" in the {', '.join(families)} families" if families else ""),
                fix="widen the GPU models or the families",
            )
    return Constraints(
        deadline_h=deadline_h,
        budget_usd=budget_usd,
        confidence=float(confidence),
        max_nodes=int(max_nodes),
        spot=bool(spot),
        mixes=bool(mixes),
        families=tuple(families) or None,
        instance_types=types,
    )
