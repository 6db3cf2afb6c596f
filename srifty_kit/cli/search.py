"""``srifty search``: the EC2 configuration for a job under deadline and budget, at a confidence."""

from __future__ import annotations

import argparse
import json
import sys
import warnings

import pandas as pd

from srifty_kit.cli.flags import (
    comma_list,
    non_negative,
    number,
    output,
    positive,
    positive_int,
    probability,
    whole_list,
)
from srifty_kit.decide.planner import OBJECTIVES, Constraints, Job, search
from srifty_kit.errors import InputError
from srifty_kit.tables.files import write_json, write_table

# columns shown on the terminal (the files carry all of them)
_SHOWN = (
    "instance_type",
    "num_nodes",
    "num_workers",
    "local_bsz",
    "pricing",
    "instance_type_2",
    "num_nodes_2",
    "local_bsz_2",
    "usd_per_hr",
    "time_h",
    "time_hi_h",
    "cost_usd",
    "cost_hi_usd",
    "compute_s",
    "sync_s",
    "efficiency",
)


def _names(text: str | None) -> tuple[str, ...] | None:
    return comma_list(text) or None  # an empty list means no filter here


def _noise_scale(args: argparse.Namespace) -> float | None:
    if args.noise_scale is not None or not args.facts:
        return args.noise_scale
    try:
        with open(args.facts) as fh:
            facts = json.load(fh)
    except (OSError, ValueError) as err:
        raise InputError(
            f"cannot read the profile facts: {err}",
            source=args.facts,
            fix="give the .facts.json written beside a profile",
        ) from None
    value = facts.get("noise_scale")
    if value is None:
        raise InputError(
            "the profile has no noise scale",
            source=args.facts,
            fix="give --noise-scale, or profile again with the noise scale on",
        )
    return float(value)


def _job(args: argparse.Namespace) -> Job:
    return Job(
        model=args.workload,
        samples=args.samples,
        steps=args.steps,
        epochs=args.epochs,
        dataset_size=args.dataset_size,
        reference_bsz=args.reference_bsz,
        noise_scale=_noise_scale(args),
        global_bsz_max=args.global_bsz_max,
        local_bsz=None if args.local_bsz is None else tuple(args.local_bsz),
        checkpoint_gb=args.checkpoint_gb,
        memory_per_sample_gib=args.memory_per_sample_gib,
        model_memory_gib=args.model_memory_gib,
        checkpoint_interval_h=args.checkpoint_interval_h,
        spot_fallback_after=args.fallback_after,
    )


def _constraints(args: argparse.Namespace) -> Constraints:
    return Constraints(
        deadline_h=args.deadline_h,
        budget_usd=args.budget_usd,
        confidence=args.confidence,
        max_nodes=args.max_nodes,
        vcpu_quota=args.vcpu_quota,
        families=_names(args.families),
        instance_types=_names(args.instance_types),
        spot=args.spot,
        mixes=args.hetero,
        min_gpu_memory_gib=args.min_gpu_memory_gib,
    )


def _document(result) -> dict:
    def rows(frame: pd.DataFrame) -> list[dict]:
        return json.loads(frame.to_json(orient="records"))

    def row(series: pd.Series | None) -> dict | None:
        return None if series is None else rows(series.to_frame().T)[0]

    return {
        "feasible": result.feasible,
        "binding": result.why.binding,
        "cheapest_per_hour": row(result.why.cheapest_per_hour),
        "explanation": result.explanation,
        "infeasible_reason": result.infeasible_reason,
        "pick": row(result.pick),
        "knee": row(result.knee),
        "nearest": row(result.nearest),
        "ranked": rows(result.ranked),
        "pareto": rows(result.pareto),
        "n_candidates": result.n_candidates,
        "n_feasible": result.n_feasible,
        "skipped": result.skipped,
    }


def _run(args: argparse.Namespace) -> int:
    from srifty_kit.catalog.query import load_catalog
    from srifty_kit.model.estimator import StepTimeModel

    if args.out and args.format == "json" and not args.out.lower().endswith(".json"):
        raise InputError(
            "--format json writes the whole result as JSON",
            source=args.out,
            fix="name the output .json, or use --format csv for the ranked table",
        )
    # the embedded catalog holds one region: another one without --catalog is refused here,
    # never answered with us-east-1 prices
    catalog = load_catalog(region=args.region, path=args.catalog)
    model = StepTimeModel.load(args.model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fit's notes were shown by srifty fit
        result = search(
            model, catalog, _job(args), _constraints(args), objective=args.objective, top=args.top
        )
    if args.format == "json":
        doc = _document(result)
        if args.out:
            write_json(doc, args.out)
        else:
            print(json.dumps(doc, indent=1))
    elif args.format == "csv":
        if args.out:
            write_table(result.ranked, args.out)
        else:
            result.ranked.to_csv(sys.stdout, index=False)
    else:
        if result.feasible:
            shown = result.ranked[list(_SHOWN)].dropna(axis=1, how="all")
            print(shown.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
            print()
            front = result.pareto[
                [
                    "instance_type",
                    "num_nodes",
                    "num_workers",
                    "local_bsz",
                    "pricing",
                    "time_hi_h",
                    "cost_hi_usd",
                ]
            ]
            print(
                f"Pareto front ({len(front)} of {result.n_feasible:,} feasible, "
                f"{result.n_candidates:,} evaluated):"
            )
            print(front.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
            print()
        if args.out:
            write_table(result.ranked, args.out)
    if args.format == "table" or args.out:
        print(result.explanation)
        if result.skipped:
            print(
                f"left out {len(result.skipped)} instance type(s): "
                + "; ".join(
                    f"{t} ({why.split(';')[0]})" for t, why in list(result.skipped.items())[:4]
                )
                + (" ..." if len(result.skipped) > 4 else "")
            )
        if args.out:
            print(f"wrote {args.out}")
    return 0 if result.feasible else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``search``."""
    p = subparsers.add_parser(
        "search",
        help="the EC2 configuration for a training job under a deadline and budget",
        description="Search instance type x nodes x workers x batch x pricing (and two-type "
        "mixes) for a job, with the deadline and budget checked against the upper ends of "
        "predicted time and cost at the confidence level. Prints the ranked table, the Pareto "
        "front and why the pick beats the cheapest instance per hour.",
        epilog="Exit status: 0 with a pick, 1 when no configuration meets the constraints "
        "(the reason and the nearest configuration are printed), 2 on bad input.",
    )
    p.add_argument("--model", required=True, help="model file written by srifty fit")
    p.add_argument("--workload", required=True, help="training model's name in the model file")
    work = p.add_mutually_exclusive_group(required=True)
    work.add_argument("--samples", type=positive, help="samples to the target accuracy")
    work.add_argument(
        "--steps", type=positive, help="optimizer steps to the target (--reference-bsz)"
    )
    work.add_argument("--epochs", type=positive, help="epochs to the target (--dataset-size)")
    p.add_argument("--dataset-size", type=positive_int, help="training samples per epoch")
    p.add_argument(
        "--reference-bsz", type=positive_int, help="global batch the work was observed at"
    )
    p.add_argument("--noise-scale", type=positive, help="gradient noise scale B_noise (samples)")
    p.add_argument("--facts", help="profile facts JSON to read the noise scale from")
    p.add_argument("--deadline-h", type=positive, help="finish within this many hours")
    p.add_argument("--budget-usd", type=positive, help="spend at most this many dollars")
    p.add_argument("--confidence", type=probability, default=0.9, help="confidence level (0.9)")
    p.add_argument("--objective", choices=OBJECTIVES, default="cost", help="what to optimise")
    p.add_argument("--spot", action="store_true", help="allow spot pricing")
    p.add_argument(
        "--fallback-after", type=number(0, whole=True), help="spot: go on-demand after K reclaims"
    )
    p.add_argument("--hetero", action="store_true", help="allow mixes of two instance types")
    p.add_argument("--max-nodes", type=positive_int, default=16, help="nodes per cluster (16)")
    p.add_argument("--vcpu-quota", type=positive_int, help="EC2 vCPU quota the cluster must fit")
    p.add_argument("--instance-types", help="only these, comma-separated")
    p.add_argument("--families", help="only these families, comma-separated (g5,p4d)")
    p.add_argument("--min-gpu-memory-gib", type=positive, help="GPU memory per worker at least")
    p.add_argument(
        "--local-bsz", type=whole_list, help="per-worker batches to try, comma-separated"
    )
    p.add_argument("--global-bsz-max", type=positive_int, help="largest global batch allowed")
    p.add_argument(
        "--memory-per-sample-gib",
        type=positive,
        help="GPU memory per sample of local batch: keeps batches that fit",
    )
    p.add_argument(
        "--model-memory-gib",
        type=non_negative,
        default=0.0,
        help="GPU memory of weights, gradients and optimizer state (0)",
    )
    p.add_argument("--checkpoint-gb", type=non_negative, default=0.0, help="checkpoint size (GB)")
    p.add_argument(
        "--checkpoint-interval-h", type=positive, default=1.0, help="hours between checkpoints (1)"
    )
    p.add_argument(
        "--catalog",
        help="catalog file (default: the embedded EC2 one); the model carries to the types it "
        "lists, whose figures must agree with the rows kept in the model file",
    )
    p.add_argument("--region", default="us-east-1", help="catalog region (us-east-1)")
    p.add_argument("--top", type=positive_int, default=10, help="rows in the ranked table (10)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument(
        "--out",
        type=output(),
        help="write the ranked table (.csv/.parquet) or the whole result (--format json: .json)",
    )
    p.set_defaults(func=_run, prog=p.prog)
