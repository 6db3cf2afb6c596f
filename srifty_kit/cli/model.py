"""``srifty fit`` and ``srifty predict``: fit a step-time model to measurements, predict configs."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from srifty_kit.cli.flags import input_file, output, probability
from srifty_kit.errors import InputError, counted
from srifty_kit.tables.files import read_table, same_file, write_table

# what makes a facts file: said in every "to fix" about one
_FACTS_FIX = (
    "give the NAME.facts.json that srifty profile writes beside its table (srifty profile "
    "--facts-only --model M --out M.facts.json makes one in seconds, no GPU needed)"
)
# what --measurements should be: said when the file is there but is no table
MEASUREMENTS_FIX = (
    "give the measurement table srifty profile writes (.csv or .parquet, one row per step or "
    "per configuration)"
)


def _catalog(args: argparse.Namespace):
    """The --catalog file as a catalog (any region), or None for the embedded one."""
    if not args.catalog:
        return None
    from srifty_kit.catalog.query import load_catalog

    return load_catalog(region=None, path=args.catalog)


def facts_beside(measurements: str) -> Path:
    """Where ``srifty profile`` put the facts of a measurement table: ``p.csv`` ->
    ``p.facts.json`` (``measure.profile.facts_path``, which needs torch to import)."""
    path = Path(measurements)
    return path.with_name(f"{path.stem}.facts.json")


def read_facts(path: str | Path) -> dict[str, dict[str, Any]]:
    """One profile facts file as {training model: facts}, its op mixes checked.

    Accepts what ``srifty profile`` (or ``--facts-only``) writes beside a table, one model's
    facts with ``model`` and ``op_mix`` at the top, and a JSON object keyed by training model
    (``{"mlp": {...}, ...}``, as ``data/sample_profile_facts.json``).

    Raises:
        InputError: naming the file: it cannot be read, is not a JSON object, names no model,
            holds an entry that is not an object, or an op mix or op trace that is malformed.
    """
    from srifty_kit.model.roofline import op_mixes_of, op_traces_of

    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err).splitlines()[0]
        raise InputError(
            f"cannot read the profile facts: {reason}", source=str(path), fix=_FACTS_FIX
        ) from None
    if not isinstance(doc, dict):
        raise InputError(
            f"expected a JSON object of profile facts, found a {type(doc).__name__}",
            source=str(path),
            fix=_FACTS_FIX,
        )
    if "op_mix" in doc or "model" in doc:  # one profile's facts (op_mixes_of reads it so too)
        name = doc.get("model")
        if not isinstance(name, str) or not name.strip():
            raise InputError(
                "the profile facts name no training model (a 'model' string)",
                source=str(path),
                fix=_FACTS_FIX,
            )
        doc = {name: doc}
    for name, one in doc.items():
        if not isinstance(one, Mapping):
            raise InputError(
                f"the facts of {name!r} are a {type(one).__name__}, not a JSON object",
                source=str(path),
                fix=_FACTS_FIX,
            )
    try:
        op_mixes_of(doc)  # a malformed op mix or trace is refused here, with the file named
        op_traces_of(doc)
    except InputError as err:
        raise InputError(err.problem, source=str(path), fix=err.fix or _FACTS_FIX) from None
    return doc


def _facts(args: argparse.Namespace) -> dict[str, tuple[dict[str, Any], str]]:
    """{model: (facts, the file they came from)}: --facts in order and, unless --no-facts,
    the facts file beside --measurements for the models no --facts names.

    A model's facts with an op mix win over its facts without one (a file kept for its noise
    scale, such as data/sample_profile_facts.json, may sit beside one with the op mix); two
    different op mixes of one model are refused, as the fit could only guess between them.
    """
    given: dict[str, tuple[dict[str, Any], str]] = {}
    for path in args.facts or ():
        for name, one in read_facts(path).items():
            held, where = given.get(name, (None, ""))
            if held is None or (held.get("op_mix") is None and one.get("op_mix") is not None):
                given[name] = (one, str(path))
            elif one.get("op_mix") not in (None, held.get("op_mix")):
                raise InputError(
                    f"two op mixes of {name!r}, in {where} and {path}",
                    source=str(path),
                    fix="give one --facts file with the op mix per training model",
                )
    beside = facts_beside(args.measurements)
    if not args.no_facts and beside.is_file():
        if same_file(args.out, beside):  # check_paths knows only the flags' own paths
            raise InputError(
                f"--out {args.out} is the facts file beside --measurements: writing it would "
                "destroy what the command reads",
                fix="give --out another path, or --no-facts",
            )
        for name, one in read_facts(beside).items():
            given.setdefault(name, (one, str(beside)))
    return given


def _facts_lines(given: dict[str, tuple[dict[str, Any], str]], measured: set[str]) -> list[str]:
    """What the fit made of each model's facts, one line each (a model the table never
    measured is said too: its facts would otherwise be dropped without a word)."""
    lines = []
    for name, (one, path) in given.items():
        if name not in measured:
            lines.append(f"facts of {name} from {path} left unused: no steps of {name} measured")
        elif one.get("op_mix") is not None:
            lines.append(
                f"op mix of {name} from {path}: types never measured are carried by its roofline"
            )
        else:
            lines.append(
                f"no op mix for {name} in {path}: types never measured are carried without one "
                "(srifty profile --facts-only records it)"
            )
    return lines


def _fit(args: argparse.Namespace) -> int:
    from srifty_kit.model.estimator import (
        StepTimeModel,  # scikit-learn loads only when a model is fitted
    )

    catalog = _catalog(args)
    given = _facts(args)  # before the table: a bad facts file is refused before any work
    table = read_table(args.measurements, fix=MEASUREMENTS_FIX)
    measured = set(table["model"].astype(str)) if "model" in table else set()
    facts = {name: one for name, (one, _) in given.items() if name in measured} or None
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always")
        model = StepTimeModel(level=args.level).fit(table, catalog, facts=facts)
    model.save(args.out)
    for note in notes:
        print(f"srifty fit: note: {note.message}", file=sys.stderr)
    summary = model.summary()
    table = summary.drop(columns="interval_from")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}", na_rep="—"))
    for row in summary.itertuples():
        print(f"intervals of {row.model} on {row.instance_type}: {row.interval_from}")
    for line in _facts_lines(given, measured):
        print(line)
    print(f"wrote {args.out}")
    return 0


def _predict(args: argparse.Namespace) -> int:
    from srifty_kit.model.estimator import StepTimeModel

    catalog = _catalog(args)
    model = StepTimeModel.load(args.model)
    out = model.predict(read_table(args.configs), level=args.level, catalog=catalog)
    write_table(out, args.out)
    print(f"wrote {counted(len(out), 'prediction')} at level {args.level:g} to {args.out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fit`` and ``predict``."""
    fit = subparsers.add_parser(
        "fit",
        help="fit a step-time model (with intervals) to a measurements table",
        description="Fit a StepTimeModel to measurements (per-step samples or configuration "
        "means; columns model, instance_type, num_nodes, num_workers, local_bsz, step_time_s, "
        "optional gpus_per_node, sync_time_s, placement) and save it as JSON. The profile "
        "facts srifty profile writes beside its table (NAME.facts.json) are read too, unless "
        "--no-facts: their op mix carries the model to GPUs it was never measured on.",
    )
    fit.add_argument(
        "--measurements", required=True, type=input_file, help="CSV/Parquet/JSON measurements"
    )
    fit.add_argument(
        "--out", required=True, type=output(".json"), help="model file to write (.json)"
    )
    fit.add_argument(
        "--catalog",
        type=input_file,
        help="catalog file with the measured types' figures (default: the embedded EC2 one); "
        "their rows are kept in the model file",
    )
    fit.add_argument(
        "--facts",
        type=input_file,
        action="append",
        metavar="FILE",
        help="profile facts JSON with the op mix: the NAME.facts.json srifty profile writes "
        "beside its table (or --facts-only makes), or one keyed by training model; repeat it "
        "for several models. Types never measured are carried by the op mix's roofline "
        "(explain's route column says so). Default: the NAME.facts.json beside "
        "--measurements when there is one",
    )
    fit.add_argument(
        "--no-facts",
        action="store_true",
        help="do not read the NAME.facts.json beside --measurements (only --facts files)",
    )
    fit.add_argument("--level", type=probability, default=0.9, help="default interval level (0.9)")
    fit.set_defaults(func=_fit, prog=fit.prog)
    predict = subparsers.add_parser(
        "predict",
        help="predict step times with intervals for configurations",
        description="Predict step_time_s with a prediction interval step_time_lo..step_time_hi "
        "for each configuration (model, instance_type, num_nodes, num_workers, local_bsz, "
        "optional gpus_per_node, placement); the output keeps the input columns.",
    )
    predict.add_argument(
        "--model", required=True, type=input_file, help="model file written by srifty fit"
    )
    predict.add_argument(
        "--configs", required=True, type=input_file, help="CSV/Parquet/JSON configurations"
    )
    predict.add_argument("--level", type=probability, default=0.9, help="interval level (0.9)")
    predict.add_argument(
        "--catalog",
        type=input_file,
        help="catalog file with the figures of types never measured (default: the embedded "
        "EC2 one); it must agree with the rows kept in the model file",
    )
    predict.add_argument(
        "--out",
        required=True,
        type=output(),
        help="predictions file to write (.csv/.parquet/.json)",
    )
    predict.set_defaults(func=_predict, prog=predict.prog)
