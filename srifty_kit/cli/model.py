"""``srifty fit`` and ``srifty predict``: fit a step-time model to measurements, predict configs."""

from __future__ import annotations

import argparse
import sys
import warnings

from srifty_kit.cli.flags import input_file, output, probability
from srifty_kit.tables.files import read_table, write_table


def _catalog(args: argparse.Namespace):
    """The --catalog file as a catalog (any region), or None for the embedded one."""
    if not args.catalog:
        return None
    from srifty_kit.catalog.query import load_catalog

    return load_catalog(region=None, path=args.catalog)


def _fit(args: argparse.Namespace) -> int:
    from srifty_kit.model.estimator import (
        StepTimeModel,  # scikit-learn loads only when a model is fitted
    )

    catalog = _catalog(args)
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always")
        model = StepTimeModel(level=args.level).fit(read_table(args.measurements), catalog)
    model.save(args.out)
    for note in notes:
        print(f"srifty fit: note: {note.message}", file=sys.stderr)
    summary = model.summary()
    table = summary.drop(columns="interval_from")
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    for row in summary.itertuples():
        print(f"intervals of {row.model} on {row.instance_type}: {row.interval_from}")
    print(f"wrote {args.out}")
    return 0


def _predict(args: argparse.Namespace) -> int:
    from srifty_kit.model.estimator import StepTimeModel

    catalog = _catalog(args)
    model = StepTimeModel.load(args.model)
    out = model.predict(read_table(args.configs), level=args.level, catalog=catalog)
    write_table(out, args.out)
    print(f"wrote {len(out)} predictions at level {args.level:g} to {args.out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``fit`` and ``predict``."""
    fit = subparsers.add_parser(
        "fit",
        help="fit a step-time model (with intervals) to a measurements table",
        description="Fit a StepTimeModel to measurements (per-step samples or configuration "
        "means; columns model, instance_type, num_nodes, num_workers, local_bsz, step_time_s, "
        "optional gpus_per_node, sync_time_s, placement) and save it as JSON.",
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
