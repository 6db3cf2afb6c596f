"""Saving and loading a fitted StepTimeModel as versioned JSON with a checksum; no pickle."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import InputError
from .tables import write_json

if TYPE_CHECKING:  # pragma: no cover
    from .model import StepTimeModel

FORMAT = "srifty_kit.StepTimeModel"
# 2: carried groups split host and device compute (joint beliefs); every group records the
# local batch range it was fitted on
# 3: lat_inter is paid on the 2(k-1) ring steps that cross nodes (was 2(n-1)), so a version-2
# file's constants would predict other times
VERSION = 3
_FIX = "refit it with `srifty fit --measurements CSV --out MODEL.json`"


def _checksum(body: dict) -> str:
    """sha256 of the canonical JSON of everything but the checksum itself."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def model_document(model: StepTimeModel) -> dict:
    """The JSON document of a fitted model."""
    model._check_fitted()
    body = {
        "format": FORMAT,
        "version": VERSION,
        "init": model.get_params(),
        "gpus_per_node": dict(model.gpus_per_node_),
        "profile_facts": model.profile_facts_,
        "groups": [
            {
                "model": m,
                "instance_type": t,
                "local_bsz_range": list(model.local_bsz_range_[(m, t)]),
                **fit.to_json(),
            }
            for (m, t), fit in sorted(model.groups_.items())
        ],
    }
    return {**body, "sha256": _checksum(body)}


def save_model(model: StepTimeModel, path: str | os.PathLike) -> Path:
    """Write ``model`` to ``path`` atomically."""
    return write_json(model_document(model), path)


def load_model(cls: type[StepTimeModel], path: str | os.PathLike) -> StepTimeModel:
    """Read and check a model file; every problem is one InputError naming the file."""
    path = Path(path)
    src = str(path)
    if not path.is_file():
        raise InputError("model file not found", source=src, fix="check the path")
    try:
        doc = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise InputError(f"not a JSON model file ({err})", source=src, fix=_FIX) from err
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise InputError("not a srifty_kit StepTimeModel file", source=src, fix=_FIX)
    if doc.get("version") != VERSION:
        older = isinstance(doc.get("version"), int) and doc["version"] < VERSION
        raise InputError(
            f"model file version {doc.get('version')!r}"
            + (" was written by an older srifty_kit" if older else "")
            + f"; this srifty_kit reads version {VERSION}",
            source=src,
            fix=_FIX,
        )
    body = {k: v for k, v in doc.items() if k != "sha256"}
    try:
        ok = doc.get("sha256") == _checksum(body)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise InputError(
            "checksum does not match: the file was edited or damaged", source=src, fix=_FIX
        )
    return _rebuild(cls, doc, src)


def _rebuild(cls: type[StepTimeModel], doc: dict, src: str) -> StepTimeModel:
    from .group_fit import GroupFit, fixed_terms

    try:
        model = cls(**doc["init"])
        groups = {
            (str(g["model"]), str(g["instance_type"])): GroupFit.from_json(g) for g in doc["groups"]
        }
        gpus = {str(k): int(v) for k, v in doc["gpus_per_node"].items()}
        ranges = {
            (str(g["model"]), str(g["instance_type"])): tuple(map(int, g["local_bsz_range"]))
            for g in doc["groups"]
        }
        if any(len(r) != 2 or not 1 <= r[0] <= r[1] for r in ranges.values()):
            raise ValueError("local_bsz_range must be [smallest, largest] local batch")
        facts = {
            str(m): {str(k): float(v) for k, v in f.items()}
            for m, f in doc["profile_facts"].items()
        }
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"malformed model file ({err!r})", source=src, fix=_FIX) from err
    if not groups:
        raise InputError("the model file holds no fitted groups", source=src, fix=_FIX)
    model.groups_ = groups
    model.gpus_per_node_ = gpus
    model.local_bsz_range_ = ranges
    model.profile_facts_ = facts
    model.models_ = sorted({k[0] for k in groups})
    model.instance_types_ = sorted({k[1] for k in groups})
    model.fixed_terms_ = fixed_terms(groups)
    return model
