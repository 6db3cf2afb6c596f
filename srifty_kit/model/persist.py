"""A fitted StepTimeModel as versioned, checksummed JSON, and back; no pickle.

All serialisation of the model layer lives here: the fitted objects (``GroupFit``,
``TransferFit`` and their parts) are plain dataclasses that know nothing of files. The
estimator hands this module its parameters and learned state; nothing here imports the
estimator. A file is

    file = {"format": FORMAT, "version": VERSION, ...body..., "sha256": sha256(JSON of body)}

read only when its version is in ``READS`` and the checksum matches; any other is refused with
the command that refits it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from srifty_kit.catalog.kept import KEPT_COLUMNS
from srifty_kit.errors import InputError
from srifty_kit.model import roofline
from srifty_kit.model.device_curve import DeviceCurve, DeviceShape
from srifty_kit.model.fit import BatchCorrection
from srifty_kit.model.groups import PREDICTS, GroupFit
from srifty_kit.model.intervals import NodeMove, Spread
from srifty_kit.model.physics import StepParams
from srifty_kit.model.posterior import LogBeliefs
from srifty_kit.model.transfer import FACTORS, HOST_GAMMA, STEP_NOISE, TransferFit
from srifty_kit.tables.files import as_path, not_a_directory, write_json

FORMAT = "srifty_kit.StepTimeModel"
# 2: carried groups split host and device compute (joint beliefs); every group records the
# local batch range it was fitted on
# 3: lat_inter is paid on the 2(k-1) ring steps that cross nodes (was 2(n-1)), so a version-2
# file's constants would predict other times
# 4: groups keep their device curve, the model its curve shape and the catalog rows it was
# fitted with; types never measured are carried along the curves, so an older release reading
# such a file would predict them differently. Version 3 files still load (``READS``): without
# curves they carry as they did, and predict what they did
# 5: interval scores keep their sign and a group keeps how its network moves to node counts
# never measured (intervals.NodeMove); an older release would read the signed scores as
# magnitudes
# 6: a group's move to node counts never measured is one Gaussian rate per doubling of the
# ring, pooled across the models of its network (intervals.network_moves), which the search's
# joint belief reads (model.posterior). Earlier files are refused with the fix (refit): their
# split-normal moves grew with a different reach, and keeping both would keep two interval
# mechanisms for one question
# 7: a group's move carries its growth with distance (intervals.NodeMove.growth); an older
# release would grow it in proportion to the distance. Version 6 files still load and predict
# what they did at 90% (growth 1); at other levels their bands beyond the measured node counts
# now nest as the level rises (intervals.Spread.offsets), which they did not always before
# 8: a group's move carries the farthest distance its growth was learned on
# (intervals.NodeMove.seen), past which it grows in proportion to the distance; an older
# release would keep it flat however far. Version 7 files still load and predict what they
# did (seen infinite)
# 9: a group predicts a configuration it was fitted on from that configuration's own run
# (groups.GroupFit.from_runs), as the search already believed it; an older release would
# predict the fitted physics there. Versions 6-8 still load and predict what they did
# 10: a group predicts another batch size of a placement it was fitted on from that
# placement's runs (groups.GroupFit.from_places: a campaign's placement effect); an older
# release would predict the fitted physics there. Versions 6-9 still load and predict what
# they did
# 11: a group widens the belief about a batch size not run on a measured placement by how far
# it lies from the batches run there (groups.GroupFit.batch_sd, learned from batch folds); an
# older release would keep the narrower band. Versions 6-10 still load and predict what they
# did (batch_sd 0)
# 12: a measured configuration whose run lies further off the fit than its spread says is
# believed where its run lies, the spread sized to it (groups.GroupFit.sizes_runs); an older
# release would believe it halfway between the run and the fit. A group records the version whose
# reading of the runs it keeps (predicts_as, which replaces from_runs and from_places);
# versions 6-11 still load and predict what they did
# 13: another batch size of a measured placement moves with its placement's runs through the
# overlap, their sync scaled by one factor (groups.GroupFit.moves_places, posterior.on_places),
# its point the conditioned median; an older release would move it by its physics' sync share
# of the runs' shift, linearly. Versions 6-12 still load and predict what they did
VERSION = PREDICTS  # one number: a new fit writes the version whose reading of the runs it keeps
READS = tuple(range(6, VERSION + 1))
FIX = "refit it with `srifty fit --measurements CSV --out MODEL.json`"

Key = tuple[str, str]  # (training model, instance type)


@dataclass
class Learned:
    """What ``StepTimeModel.fit`` learns: the attributes ending in ``_`` that a file keeps."""

    groups: dict[Key, GroupFit | TransferFit]
    gpus_per_node: dict[str, int]
    local_bsz_range: dict[Key, tuple[int, int]]
    profile_facts: dict[str, dict[str, float]]
    # per group, its device curve where it measured enough batch sizes (device_curve)
    curves: dict[Key, DeviceCurve] = field(default_factory=dict)
    shape: DeviceShape | None = None  # how curves move between accelerators
    catalog: pd.DataFrame | None = None  # the catalog rows it was fitted with (figures)
    # between-run spread per instance type (intervals.run_variance); None in older files
    run_variance: pd.DataFrame | None = None
    # per training model, the profile facts' op mix (roofline route); absent in older files
    op_mix: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    # per training model, the profile facts' op trace (the trace route); absent in older files
    op_trace: dict[str, dict[str, Any]] = field(default_factory=dict)


def save(path: str | os.PathLike, init: dict, learned: Learned) -> Path:
    """Write a fitted model atomically.

    Args:
        path: the file to write (its folder must exist).
        init: the estimator's ``get_params()``.
        learned: its fitted state.

    Returns:
        The path written.

    Raises:
        OSError: when the file cannot be written (the old file, if any, is untouched).
    """
    return write_json(document(init, learned), path)


def document(init: dict, learned: Learned) -> dict:
    """The JSON document of a fitted model, with its checksum."""
    body = {
        "format": FORMAT,
        "version": VERSION,
        "init": {name: _native(value) for name, value in init.items()},
        "gpus_per_node": dict(learned.gpus_per_node),
        "profile_facts": learned.profile_facts,
        "groups": [
            {
                "model": m,
                "instance_type": t,
                "local_bsz_range": list(learned.local_bsz_range[(m, t)]),
                **_group_doc(fit),
                "device_curve": _curve_doc(learned.curves.get((m, t))),
            }
            for (m, t), fit in sorted(learned.groups.items())
        ],
        "device_shape": None if learned.shape is None else vars(learned.shape),
        "catalog_rows": _rows_doc(learned.catalog),
        "run_variance": _variance_doc(learned.run_variance),
    }
    if learned.op_mix:  # only then: a file without facts reads as it did
        body["op_mix"] = learned.op_mix
    if learned.op_trace:
        body["op_trace"] = learned.op_trace
    return {**body, "sha256": _checksum(body)}


def load(path: str | os.PathLike) -> tuple[dict, Learned]:
    """Read and check a model file.

    Args:
        path: a file written by ``save``.

    Returns:
        ``(init, learned)``: the estimator's parameters and its fitted state.

    Raises:
        InputError: the path is not one or names a folder; the file is missing, not JSON,
            of another format or version, edited by hand (checksum) or malformed; the
            message names the file and how to fix it.
    """
    path = not_a_directory(as_path(path, "the model file"), (".json",))
    src = str(path)
    if not path.is_file():
        raise InputError("model file not found", source=src, fix="check the path")
    try:
        doc = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise InputError(f"not a JSON model file ({err})", source=src, fix=FIX) from err
    except RecursionError as err:  # nested deeper than Python's parser goes: no model file
        raise InputError(
            "not a model file: JSON nested too deep to read", source=src, fix=FIX
        ) from err
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError("not a srifty_kit StepTimeModel file", source=src, fix=FIX)
    if doc.get("version") not in READS:
        version = doc.get("version")
        known = isinstance(version, int) and not isinstance(version, bool)
        older, newer = known and version < min(READS), known and version > VERSION
        # a newer file is fine where it was written: refitting is not the only way
        raise InputError(
            f"model file version {version!r}"
            + (" was written by an older srifty_kit" if older else "")
            + (" was written by a newer srifty_kit" if newer else "")
            + f"; this srifty_kit reads versions {', '.join(map(str, READS))}",
            source=src,
            fix="upgrade srifty_kit to the release that wrote it, or " + FIX if newer else FIX,
        )
    body = {k: v for k, v in doc.items() if k != "sha256"}
    try:
        ok = doc.get("sha256") == _checksum(body)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InputError(
            "checksum does not match: the file was edited or damaged", source=src, fix=FIX
        )
    problem = check_document(doc)  # a checksum can be recomputed: the values are checked too
    if problem:
        raise InputError(f"malformed model file: {problem}", source=src, fix=FIX)
    try:
        return dict(doc["init"]), _learned(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise InputError(f"malformed model file ({err!r})", source=src, fix=FIX) from err


def _bad_params(params: object) -> str | None:
    """What is wrong with a StepParams document (None when nothing): every constant a finite
    number within the physics' lower bounds (``share`` also at most 1), and a step that
    takes time (``alpha_c + beta_c > 0``); such a file would predict NaN or negative times."""
    from srifty_kit.model.physics import BOUNDS

    if not isinstance(params, dict):
        return f"params is {type(params).__name__}, not an object"
    for name, value in params.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"parameter {name} is {value!r}, not a number"
        low, high = BOUNDS.get(name, (-np.inf, np.inf))
        high = high if name == "share" else np.inf  # upper bounds moved between releases
        try:  # numpy's isfinite raises on an integer past int64 (10**30), math's past float64
            finite = math.isfinite(value)
        except OverflowError:
            finite = False
        if not finite or not low <= value <= high:
            return f"parameter {name} is {value!r}, outside [{low:g}, {high:g}]"
    if not params.get("alpha_c", 0) + params.get("beta_c", 0) > 0:
        return "alpha_c + beta_c is not > 0 (a step that takes no time)"
    return None


def check_document(doc: dict) -> str | None:
    """The first problem of a model document's values, or None: ``gpus_per_node`` maps each
    type to a whole number >= 1, ``groups`` is a non-empty list and each group's constants
    (``params``, a carried fit's ``base``) are physical (``_bad_params``)."""
    gpus = doc.get("gpus_per_node")
    if not isinstance(gpus, dict):
        return f"gpus_per_node is {json.dumps(gpus)[:40]}, not an object of instance types"
    for itype, count in gpus.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            return f"gpus_per_node of {itype} is {count!r}, not a whole number >= 1"
    groups = doc.get("groups")
    if not isinstance(groups, list) or not groups:
        return "groups is not a non-empty list of fitted groups"
    for group in groups:
        if not isinstance(group, dict):
            return "a group is not an object"
        name = f"{group.get('model')}/{group.get('instance_type')}"
        for key in ("params", "base"):
            if key in group:
                bad = _bad_params(group[key])
                if bad:
                    return f"group {name}: {bad}"
        for key in ("max_nodes", "max_workers", "n_configs"):
            value = group.get(key)
            if key in group and (isinstance(value, bool) or not isinstance(value, int)):
                return f"group {name}: {key} is {value!r}, not a whole number"
    return None


def _checksum(body: dict) -> str:
    """sha256 of the canonical JSON of everything but the checksum itself."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _learned(doc: dict) -> Learned:
    """The fitted state of a checked document; KeyError/TypeError/ValueError if malformed."""
    keys = [(str(g["model"]), str(g["instance_type"])) for g in doc["groups"]]
    groups = {key: _group_of(g) for key, g in zip(keys, doc["groups"], strict=True)}
    ranges = {
        key: tuple(map(int, g["local_bsz_range"]))
        for key, g in zip(keys, doc["groups"], strict=True)
    }
    if any(len(r) != 2 or not 1 <= r[0] <= r[1] for r in ranges.values()):
        raise ValueError("local_bsz_range must be [smallest, largest] local batch")
    if not groups:
        raise ValueError("the model file holds no fitted groups")
    curves = {
        key: _curve_of(g.get("device_curve")) for key, g in zip(keys, doc["groups"], strict=True)
    }
    shape = doc.get("device_shape")
    return Learned(
        curves={k: c for k, c in curves.items() if c is not None},
        shape=None if shape is None else _shape_of(shape),
        catalog=_rows_of(doc.get("catalog_rows")),
        run_variance=_variance_of(doc.get("run_variance")),
        op_mix=_checked_per_model(doc.get("op_mix", {}), roofline.check_op_mix),
        op_trace=_checked_per_model(doc.get("op_trace", {}), roofline.check_trace),
        groups=groups,
        gpus_per_node={str(k): int(v) for k, v in doc["gpus_per_node"].items()},
        local_bsz_range=ranges,
        profile_facts={
            str(m): {str(k): float(v) for k, v in f.items()}
            for m, f in doc["profile_facts"].items()
        },
    )


def _checked_per_model(data: dict, check) -> dict[str, dict]:
    """``check`` (``roofline.check_op_mix`` or ``check_trace``) on each model's entry;
    ValueError (a malformed file) when one fails."""
    try:
        return {str(m): check(x, str(m)) for m, x in data.items()}
    except InputError as err:
        raise ValueError(err.problem) from err


# -- one group ------------------------------------------------------------------------------
def _group_doc(fit: GroupFit | TransferFit) -> dict:
    if isinstance(fit, TransferFit):
        return {
            "kind": "transfer",
            "base": fit.base._asdict(),
            "device_intercept": fit.device_intercept,
            "device_hidden": fit.device_hidden,
            "beliefs": {
                "names": list(fit.beliefs.names),
                "mean": fit.beliefs.mean.tolist(),
                "cov": fit.beliefs.cov.tolist(),
            },
            "source": fit.source,
            "n_observed": fit.n_observed,
            "notes": list(fit.notes),
            "max_nodes": fit.max_nodes,
            "max_workers": fit.max_workers,
            "correction": _correction_doc(fit.correction),
            "host_gamma": fit.host_gamma,
            "noise": fit.noise,
            "sync_missing": list(fit.sync_missing),
            "route": fit.route,
            "source_curve": None if fit.source_curve is None else list(fit.source_curve),
        }
    spread = fit.spread
    return {
        "kind": "fit",
        "params": fit.params._asdict(),
        "spread": {
            "sigma0": spread.sigma0,
            "sigma1": spread.sigma1,
            "scores": [float(s) for s in spread.scores],
            "node_prior": False,  # kept for readers of version 6 files, which require it
            "moves": list(spread.moves),
            "signed": True,
            "node_move": None if spread.node is None else _node_move_doc(spread.node),
        },
        "max_nodes": int(fit.max_nodes),
        "max_workers": int(fit.max_workers),
        "structure": fit.structure,
        "loss": fit.loss,
        "cv_error": None if not np.isfinite(fit.cv_error) else float(fit.cv_error),
        "n_configs": int(fit.n_configs),
        "fixed": dict(fit.fixed),
        "widen": {k: float(v) for k, v in fit.widen.items()},
        "correction": _correction_doc(fit.correction),
        "measured": None if fit.measured is None else fit.measured.tolist(),
        "predicts_as": int(fit.predicts_as),
        "batch_sd": float(fit.batch_sd),
    }


def _node_move_doc(node: NodeMove) -> dict:
    doc = dict(vars(node))
    doc["seen"] = None if math.isinf(node.seen) else float(node.seen)  # JSON has no inf
    return doc


def _node_move_of(data: dict | None) -> NodeMove | None:
    if data is None:
        return None
    centre, sd, scatter = (float(data[k]) for k in ("centre", "sd", "scatter"))
    if not (np.isfinite(centre) and np.isfinite(sd) and np.isfinite(scatter)):
        raise ValueError("node_move must have a finite centre, sd and scatter")
    if sd < 0 or scatter < 0:
        raise ValueError("node_move's sd and scatter must be >= 0")
    # files of version 6 were written before the move's growth: in proportion to distance
    growth = float(data.get("growth", 1.0))
    if not 0.0 <= growth <= 1.0:
        raise ValueError("node_move's growth must lie in [0, 1]")
    # ... and of version 7 before its reach: that growth however far (null: the same)
    seen = math.inf if data.get("seen") is None else float(data["seen"])
    if not seen > 0:
        raise ValueError("node_move's seen must be above 0 (or null: no limit)")
    return NodeMove(centre, sd, scatter, str(data["source"]), growth, seen)


def _signed_scores(spread: dict) -> np.ndarray:
    # every version READS wrote signed scores and no unsigned prior; a file that says
    # otherwise was edited or written by another program
    if spread.get("signed") is not True or spread.get("node_prior"):
        raise ValueError("spread must hold signed scores (signed: true, node_prior: false)")
    return np.asarray(spread["scores"], float)


def _group_of(data: dict) -> GroupFit | TransferFit:
    if data.get("kind") == "transfer":
        return _transfer_of(data)
    spread = data["spread"]
    cv = data.get("cv_error")
    return GroupFit(
        params=_params_of(data["params"]),
        spread=Spread(
            float(spread["sigma0"]),
            float(spread["sigma1"]),
            _signed_scores(spread),
            tuple(str(m) for m in spread.get("moves", ())),
            node=_node_move_of(spread.get("node_move")),
        ),
        max_nodes=int(data["max_nodes"]),
        max_workers=int(data["max_workers"]),
        structure=str(data["structure"]),
        loss=str(data.get("loss", "relative")),  # files before it were fitted on relative
        cv_error=float("nan") if cv is None else float(cv),
        n_configs=int(data["n_configs"]),
        fixed={str(k): str(v) for k, v in data["fixed"].items()},
        widen={str(k): float(v) for k, v in data["widen"].items()},
        correction=_correction_of(data["correction"]),
        measured=_measured_of(data.get("measured")),
        predicts_as=_predicts_as_of(data),
        batch_sd=_batch_sd_of(data.get("batch_sd", 0.0)),  # ... before version 11: no widening
    )


def _predicts_as_of(data: dict) -> int:
    """The version whose reading of the runs a group keeps: written since version 12; before,
    told by the flags it wrote (from_runs since version 9, from_places since 10; version 10
    and 11 files read the runs alike, the widening being batch_sd's, 0 in version 10)."""
    if "predicts_as" in data:
        version = data["predicts_as"]
        if (
            isinstance(version, bool)
            or not isinstance(version, int)
            or not (min(READS) <= version <= VERSION)
        ):
            raise ValueError(f"predicts_as must be a version from {min(READS)} to {VERSION}")
        return version
    if not data.get("from_runs", False):
        return 8
    return 11 if data.get("from_places", False) else 9


def _batch_sd_of(value) -> float:
    sd = float(value)
    if not (np.isfinite(sd) and sd >= 0):
        raise ValueError("batch_sd must be a finite number >= 0")
    return sd


def _measured_of(data) -> np.ndarray | None:
    """The measured configuration means: rows of (nodes, workers, local batch, log step)."""
    if data is None:
        return None
    table = np.asarray(data, float)
    if table.ndim != 2 or table.shape[1] != 4 or not np.isfinite(table).all():
        raise ValueError("measured must be rows of nodes, workers, local_bsz, log step time")
    return table


def _transfer_of(data: dict) -> TransferFit:
    raw = data["beliefs"]
    names = tuple(str(n) for n in raw["names"])
    mean = np.asarray(raw["mean"], float)
    cov = np.asarray(raw["cov"], float)
    if mean.shape != (len(names),) or cov.shape != (len(names), len(names)):
        raise ValueError("beliefs: mean/cov shapes do not match the names")
    if names != FACTORS:
        raise ValueError(f"transfer beliefs must be {FACTORS}, not {names}")
    return TransferFit(
        base=_params_of(data["base"]),
        device_intercept=float(data["device_intercept"]),
        device_hidden=float(data["device_hidden"]),
        beliefs=LogBeliefs(names, mean, cov),
        source=str(data["source"]),
        n_observed=int(data["n_observed"]),
        notes=[str(x) for x in data["notes"]],
        max_nodes=int(data["max_nodes"]),
        max_workers=int(data["max_workers"]),
        correction=_correction_of(data.get("correction")),
        # version 3 files: the ratio and flops routes' constants, as they were
        host_gamma=float(data.get("host_gamma", HOST_GAMMA)),
        noise=float(data.get("noise", STEP_NOISE)),
        sync_missing=tuple(str(x) for x in data.get("sync_missing", ("", ""))),
        route=str(data.get("route", "")),
        source_curve=_source_curve_of(data.get("source_curve")),
    )


def _source_curve_of(data) -> tuple[float, float, float, float] | None:
    """A roofline route's (alpha_c, beta_c, floor, slope) of the source; None before it."""
    if data is None:
        return None
    values = tuple(float(v) for v in data)
    if len(values) != 4 or not all(np.isfinite(v) and v >= 0 for v in values):
        raise ValueError("source_curve must be four numbers >= 0: alpha_c, beta_c, O, s")
    return values


def _params_of(data: dict) -> StepParams:
    return StepParams(**{k: float(v) for k, v in data.items()})


def _correction_doc(correction: BatchCorrection | None) -> dict | None:
    if correction is None:
        return None
    return {"log_bsz": correction.log_bsz.tolist(), "log_factor": correction.log_factor.tolist()}


def _correction_of(data: dict | None) -> BatchCorrection | None:
    if data is None:
        return None
    return BatchCorrection(
        np.asarray(data["log_bsz"], float), np.asarray(data["log_factor"], float)
    )


def _curve_doc(curve: DeviceCurve | None) -> dict | None:
    if curve is None:
        return None
    return {**vars(curve), "log_cov": list(curve.log_cov)}


def _curve_of(data: dict | None) -> DeviceCurve | None:
    if data is None:
        return None
    cov = tuple(float(x) for x in data["log_cov"])
    if len(cov) != 3:
        raise ValueError("device_curve.log_cov must be [var log F, cov, var log c]")
    return DeviceCurve(
        floor_s=float(data["floor_s"]),
        per_sample_s=float(data["per_sample_s"]),
        sharpness=float(data["sharpness"]),
        log_cov=cov,
        misfit=float(data["misfit"]),
        batch_sizes=int(data["batch_sizes"]),
    )


def _shape_of(data: dict) -> DeviceShape:
    return DeviceShape(
        **{k: float(data[k]) for k in DeviceShape.__dataclass_fields__ if k != "basis"},
        basis=str(data["basis"]),
    )


def _rows_doc(rows: pd.DataFrame | None) -> list[dict]:
    """Catalog rows as JSON records: unknown figures as null (the checksum refuses NaN)."""
    if rows is None or rows.empty:
        return []
    records = []
    for row in rows.to_dict(orient="records"):
        records.append({k: _plain(row.get(k)) for k in KEPT_COLUMNS})
    return records


def _native(value: object) -> object:
    """An estimator parameter as JSON holds it: a numpy scalar (``np.float32(0.9)`` read
    from a table's cell, which the estimator accepts) as Python's number, in lists too."""
    if isinstance(value, tuple | list):
        return [_native(v) for v in value]
    item = getattr(value, "item", None)
    return item() if callable(item) and not isinstance(value, str) else value


def _plain(value: object) -> object:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    if isinstance(value, str):
        return value
    item = getattr(value, "item", None)
    value = item() if callable(item) else value
    return value if isinstance(value, bool | int | float | str) else str(value)


def _variance_doc(table: pd.DataFrame | None) -> list[dict] | None:
    """The between-run table as JSON records (NaN as null), or None when there is none."""
    if table is None:
        return None
    return [{k: _plain(v) for k, v in row.items()} for row in table.to_dict(orient="records")]


def _variance_of(records: list | None) -> pd.DataFrame | None:
    if records is None:
        return None  # written before the between-run spread was kept: refit to get it
    from srifty_kit.model.intervals import RUN_COLUMNS as COLUMNS

    table = pd.DataFrame.from_records(records, columns=list(COLUMNS))
    return table.astype({c: float for c in ("between_sd", "within_sd")})


def _rows_of(records: list | None) -> pd.DataFrame | None:
    if not records:
        return None
    rows = pd.DataFrame.from_records(records)
    missing = [c for c in KEPT_COLUMNS if c not in rows]
    if missing:
        raise ValueError(f"catalog_rows lack {missing}")
    return rows[list(KEPT_COLUMNS)]
