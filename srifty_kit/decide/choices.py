"""What a search panel can offer and what its settings mean: choices from the fitted model and
the catalog, and the ``Constraints`` of a panel's values (GPU models become instance types).

A GPU filter (the panel's GPU models, ``srifty search --gpu``) can land on instance types the
model cannot reach: never measured there, and the catalog holds no figures of their GPU to
carry a measured step time by (A10G: no vendor publishes them). ``check_gpu_figures`` says so
in one line, with the catalog's reason and what to do, instead of a search that finds nothing.
A family whose every type is retired in the catalog's region (p3 in us-east-1) is said the same
way, naming families on offer there (``offered_types``); a panel marks it in its family control
(``families_not_offered``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from srifty_kit.catalog.query import instance_family, offered
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


def families_not_offered(catalog: pd.DataFrame) -> dict[str, tuple[str, ...]]:
    """The GPU families none of whose types is offered any more where the catalog lists them
    (p3 in us-east-1): {family: the regions it is listed in}. A search that enumerates the
    catalog leaves their types out, so a panel marks them."""
    rows = _gpu_rows(catalog)
    family = instance_family(rows["instance_type"]).to_numpy()
    on_offer = offered(rows).to_numpy()
    regions = rows["region"].astype(str).to_numpy()
    return {
        str(f): tuple(sorted(set(regions[family == f])))
        for f in sorted(set(family))
        if not on_offer[family == f].any()
    }


def _suggested_families(
    catalog: pd.DataFrame,
    like: pd.DataFrame,
    model: StepTimeModel | None,
    workload: str | None,
    n: int = 2,
) -> list[str]:
    """Up to ``n`` GPU families with a type on offer that a prediction reaches, as a phrase each:
    first those with the GPUs of ``like`` (the rows asked for), then those ``workload`` was
    measured on, then by name."""
    rows = _gpu_rows(catalog)
    rows = rows[offered(rows).to_numpy()]
    if "accelerator_kind" in rows:
        rows = rows[rows["accelerator_kind"].fillna("GPU").astype(str) == "GPU"]
    asked = set(instance_family(like["instance_type"]))
    gpus = set(like["gpu_model"].dropna().astype(str))
    measured = {t for m, t in getattr(model, "groups_", {}) if m == workload}
    ranked = []
    for family, part in rows.groupby(instance_family(rows["instance_type"]), sort=True):
        types = tuple(part["instance_type"].astype(str))
        missing = gpus_without_figures(catalog, types, model, workload)
        if family in asked or len({t for ts, _ in missing.values() for t in ts}) == len(types):
            continue  # asked for already, or nothing in it can be predicted
        same = sorted(gpus & set(part["gpu_model"].dropna().astype(str)))
        if same:
            phrase = f"{family} (the same {' and '.join(same)} GPUs)"
        elif measured & set(types):
            phrase = f"{family} ({workload} was measured there)"
        else:
            phrase = family
        ranked.append(((not same, not measured & set(types), family), phrase))
    return [phrase for _, phrase in sorted(ranked)[:n]]


def offered_types(
    catalog: pd.DataFrame,
    instance_types: tuple[str, ...] | list[str],
    asked: str,
    model: StepTimeModel | None = None,
    workload: str | None = None,
) -> tuple[str, ...]:
    """Of the types a panel's filter selects, those still offered in their region (the ones a
    search of the catalog enumerates).

    Args:
        catalog: the catalog searched.
        instance_types: the types the filter selects (its families' or GPU models' types).
        asked: how the filter reads in the message ("families p3").
        model, workload: the fitted model and training model, to suggest families a
            prediction reaches (one ``workload`` was measured on before others).

    Raises:
        InputError: none of them is offered: one sentence naming the families, the region and
            one or two families on offer there to choose instead.
    """
    rows = catalog[catalog["instance_type"].astype(str).isin(set(map(str, instance_types)))]
    kept = tuple(dict.fromkeys(rows.loc[offered(rows).to_numpy(), "instance_type"].astype(str)))
    if kept or rows.empty:
        return kept
    families = " and ".join(dict.fromkeys(instance_family(rows["instance_type"])))
    regions = " and ".join(sorted(set(rows["region"].astype(str))))
    names = tuple(dict.fromkeys(rows["instance_type"].astype(str)))
    listed = ", ".join(names) if len(names) <= 4 else f"{names[0]} ... {names[-1]}"
    others = _suggested_families(catalog, rows, model, workload)
    raise InputError(
        f"{asked}: every {families} type ({listed}) is retired in {regions}, no longer "
        "offered there, so there is nothing to search",
        fix=(
            f"choose a family on offer there, e.g. {' or '.join(others)}"
            if others
            else "choose a family on offer there"
        ),
    )


def profiled_batches(model: StepTimeModel, workload: str) -> tuple[int, ...]:
    """The local batches ``workload`` was measured at, on any type, smallest first: the
    batches a panel searches when the workload is chosen (empty when the fit keeps none)."""
    found: set[int] = set()
    for (name, _), fit in getattr(model, "groups_", {}).items():
        runs = getattr(fit, "measured", None)  # rows of (nodes, workers, local_bsz, log step)
        if name == workload and runs is not None and len(runs):
            found |= {int(b) for b in np.asarray(runs)[:, 2]}
    return tuple(sorted(found))


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
    GPU models become the catalog's instance types with those GPUs (in those families) that
    are still offered in their region (``offered_types``: the V100 is the p3dn's, not the
    retired p3's).

    With ``model`` and ``workload``, GPU models none of whose types can be predicted (never
    measured, no figures in the catalog) are refused in one line (``check_gpu_figures``).

    Raises:
        InputError: no instance type has those GPUs, none of them is offered, or none of them
            can be predicted.
    """
    types = None
    if gpu_models:
        types = gpu_instance_types(catalog, tuple(gpu_models), tuple(families))
        asked = f"GPU models {', '.join(gpu_models)}"
        if families:
            asked += f" in families {', '.join(families)}"
        # a retired type is searched only when named: the GPU models name none of them
        types = offered_types(catalog, types, asked, model, workload)
        if model is not None and workload is not None:
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
    catalog), then the other types left out, each reason once with the types it holds
    (``_by_reason``).

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
        # a listed candidate is left out by its cluster ("16 x g4dn.12xlarge") or its type
        noun = "candidate" if any(" x " in t for t, _ in others) else "instance type"
        lines.append(f"left out {counted(len(others), noun)}: " + _by_reason(others))
    return lines


def _by_reason(left: list[tuple[str, str]], names: int = 4, reasons: int = 3) -> str:
    """``left`` (name, why) said once per reason (the part of ``why`` before any ';'), in
    the order the reasons first appear: "REASON: a, b, c, d and 6 more; REASON2: e". A reason
    shared by ten types is said once, not ten times; at most ``names`` names per reason and
    ``reasons`` reasons, the rest counted."""
    groups: dict[str, list[str]] = {}
    for name, why in left:
        groups.setdefault(why.split(";")[0], []).append(name)
    said = []
    for why, group in list(groups.items())[:reasons]:
        more = f" and {len(group) - names} more" if len(group) > names else ""
        said.append(f"{why}: {', '.join(group[:names])}{more}")
    rest = sum(len(g) for g in list(groups.values())[reasons:])
    return "; ".join(said) + (f"; {rest} for other reasons" if rest else "")
