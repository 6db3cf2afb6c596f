"""What a search panel can offer and what its settings mean: choices from the fitted model and
the catalog, and the ``Constraints`` of a panel's values (GPU models become instance types).

A GPU filter (the panel's GPU models, ``srifty search --gpu``) can land on instance types the
model cannot reach: never measured there, and the catalog holds no figures of their GPU to
carry a measured step time by (A10G: no vendor publishes them). ``check_gpu_figures`` says so
in one line, with the catalog's reason and what to do, instead of a search that finds nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from srifty_kit.catalog.query import instance_family
from srifty_kit.decide.job import Constraints
from srifty_kit.errors import InputError, counted, did_you_mean

if TYPE_CHECKING:  # pragma: no cover
    from srifty_kit.decide.planner import SearchResult
    from srifty_kit.model.estimator import StepTimeModel


def _gpu_rows(catalog: pd.DataFrame) -> pd.DataFrame:
    gpus = pd.to_numeric(catalog["gpu_count"], errors="coerce").fillna(0)
    rows = catalog[gpus > 0]
    if "accelerator_kind" in rows:
        rows = rows[rows["accelerator_kind"].fillna("GPU").astype(str) == "GPU"]
    return rows


# the figure a carry to a type never measured cannot do without (``model.transfer``), and
# where the catalog says why a GPU's figures are empty
_PEAK = "gpu_fp32_tflops"
_WHY = "gpu_figures_source"


def gpu_instance_types(
    catalog: pd.DataFrame, gpu_models: tuple[str, ...], families: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """The catalog's GPU instance types with any of ``gpu_models`` (case aside), in
    ``families`` when given.

    Raises:
        InputError: no instance type has those GPUs (an unknown name gets "did you mean").
    """
    rows = _gpu_rows(catalog)
    names = rows["gpu_model"].astype(str)
    keep = names.str.lower().isin([g.lower() for g in gpu_models]).to_numpy()
    if families:
        keep = keep & instance_family(rows["instance_type"]).isin(list(families)).to_numpy()
    types = tuple(sorted(set(rows.loc[keep, "instance_type"].astype(str))))
    if not types:
        known = sorted(set(names))
        unknown = [g for g in gpu_models if g.lower() not in {k.lower() for k in known}]
        hint = did_you_mean(unknown[0], known) if unknown else ""
        raise InputError(
            f"no instance type has {' or '.join(gpu_models)} GPUs"
            + (f" in the {', '.join(families)} families" if families else "")
            + hint,
            fix="widen the GPU models or the families (GPU models: " + ", ".join(known) + ")",
        )
    return types


def _reason(rows: pd.DataFrame) -> str:
    """The catalog's reason a GPU's figures are empty: its first clause (the rest cites)."""
    why = rows[_WHY].dropna().astype(str) if _WHY in rows else pd.Series([], dtype=str)
    why = why[why.str.strip() != ""]
    return why.iloc[0].split(";")[0].strip() if len(why) else "no source recorded"


def gpus_without_figures(
    catalog: pd.DataFrame,
    instance_types: tuple[str, ...] | list[str],
    model: StepTimeModel | None = None,
    workload: str | None = None,
) -> dict[str, tuple[tuple[str, ...], str]]:
    """Of ``instance_types``, the GPU types no prediction can reach, by GPU model.

    A type is unreachable when the catalog has no fp32 peak of its GPU (nothing to carry a
    measured step time by) and, where ``model`` and ``workload`` are given, ``workload`` was
    never measured on it (a measured type needs no figures).

    Returns:
        {gpu model: (its unreachable instance types, the catalog's reason its figures are
        empty)}; empty when every type can be predicted.
    """
    rows = _gpu_rows(catalog)
    rows = rows[rows["instance_type"].astype(str).isin(set(map(str, instance_types)))]
    peak = pd.to_numeric(rows[_PEAK], errors="coerce") if _PEAK in rows else None
    rows = rows if peak is None else rows[~(peak > 0)]
    if model is not None and workload is not None:
        measured = {t for m, t in getattr(model, "groups_", {}) if m == workload}
        rows = rows[~rows["instance_type"].astype(str).isin(measured)]
    return {
        # in the catalog's order (by size), not by name
        str(gpu): (tuple(dict.fromkeys(part["instance_type"].astype(str))), _reason(part))
        for gpu, part in rows.groupby(rows["gpu_model"].fillna("unknown GPU"), sort=True)
    }


def _types_words(types: tuple[str, ...]) -> str:
    return types[0] if len(types) == 1 else f"{len(types)} types ({types[0]} ... {types[-1]})"


def _fix(gpus: str, catalog: str = "`catalog`") -> str:
    return (
        f"measure one step on each {gpus} type to search (srifty profile there, then srifty "
        f"fit with it), or give {catalog} with the {gpus}'s figures ({_PEAK}, gpu_mem_bw_gbps)"
    )


def _why(missing: dict[str, tuple[tuple[str, ...], str]]) -> str:
    return "; ".join(
        f"the {gpu} ({reason}) on {_types_words(types)}" for gpu, (types, reason) in missing.items()
    )


def no_figures_note(
    missing: dict[str, tuple[tuple[str, ...], str]],
    workload: str | None = None,
    catalog: str = "a catalog",
) -> str | None:
    """One line for the GPUs a search left out for want of figures (``gpus_without_figures``):
    which GPU, the catalog's reason, the fix; None when there are none. ``catalog`` names
    how to give another catalog ("--catalog FILE" on the command line)."""
    if not missing:
        return None
    gpus = " and ".join(missing)
    who = f"{workload} was" if workload else "the model was"
    return (
        f"left out the {gpus}: the catalog has no GPU figures for {_why(missing)}, where {who} "
        f"never measured; to fix: {_fix(gpus, catalog)}"
    )


def check_gpu_figures(
    catalog: pd.DataFrame,
    instance_types: tuple[str, ...] | list[str],
    model: StepTimeModel | None = None,
    workload: str | None = None,
    asked: str = "the GPU filter",
) -> str | None:
    """Refuse a filter whose every GPU type lacks the figures to predict it; else a one-line
    note of the GPUs it leaves out for that reason (None when none).

    Args:
        catalog: the catalog searched.
        instance_types: the types the filter selects.
        model, workload: the fitted model and training model (a measured type needs no
            figures: ``gpus_without_figures``).
        asked: how the filter reads in the message ("--gpu A10G", "GPU models A10G").

    Raises:
        InputError: one line: which GPU, the catalog's reason, and the fix (measure one step
            on each of its types to search, or a catalog with its figures).
    """
    missing = gpus_without_figures(catalog, instance_types, model, workload)
    if not missing:
        return None
    reachable = set(map(str, _gpu_rows(catalog)["instance_type"])) & set(map(str, instance_types))
    reachable -= {t for types, _ in missing.values() for t in types}
    if reachable:
        return no_figures_note(missing, workload)
    gpus = " and ".join(missing)
    who = f"{workload} was" if workload else "the model was"
    raise InputError(
        f"{asked}: the catalog has no GPU figures for {_why(missing)}, where {who} never "
        "measured: no step time to carry there",
        fix=_fix(gpus) + ", or choose another GPU",
    )


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
    model: StepTimeModel | None = None,
    workload: str | None = None,
) -> Constraints:
    """The constraints a panel's settings mean. Empty ``families`` or ``gpu_models`` mean all;
    GPU models become the catalog's instance types with those GPUs (in those families).

    With ``model`` and ``workload``, GPU models none of whose types can be predicted (never
    measured, no figures in the catalog) are refused in one line (``check_gpu_figures``).

    Raises:
        InputError: no instance type has those GPUs, or none of them can be predicted.
    """
    types = None
    if gpu_models:
        types = gpu_instance_types(catalog, tuple(gpu_models), tuple(families))
        if model is not None and workload is not None:
            asked = f"GPU models {', '.join(gpu_models)}"
            check_gpu_figures(catalog, types, model, workload, asked)
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


def left_out_lines(
    result: SearchResult,
    catalog: pd.DataFrame,
    model: StepTimeModel | None,
    workload: str,
    how: str = "a catalog",
) -> list[str]:
    """What a search left out, in lines a reader acts on: the GPUs without figures, one
    line each (which GPU, the catalog's reason, the fix; ``how`` names how to give another
    catalog), then the other types left out and why, four at most.

    Args:
        result: a ``search`` result (its ``skipped`` types and their reasons).
        catalog: the catalog it searched.
        model: the fitted model (a measured type needs no figures), or None.
        workload: the training model searched for.
        how: how a user gives another catalog ("--catalog FILE" on the command line).

    Returns:
        The lines; empty when nothing was left out.
    """
    # only the types the filters let through were left out for want of figures: one a filter
    # dropped (over the vCPU quota, too little GPU memory) is not reached by measuring it
    passed = set() if result.candidates is None else set(map(str, result.candidates.types.names))
    tried = [t for t in result.skipped if t in passed]
    missing = gpus_without_figures(catalog, tried, model, workload)
    gone = {t for types, _ in missing.values() for t in types}
    others = [(t, why) for t, why in result.skipped.items() if t not in gone]
    lines = [no_figures_note(missing, workload, how)] if missing else []
    if others:
        lines.append(
            f"left out {counted(len(others), 'instance type')}: "
            + "; ".join(f"{t} ({why.split(';')[0]})" for t, why in others[:4])
            + (" ..." if len(others) > 4 else "")
        )
    return lines
