"""``srifty search``: the EC2 configuration for a job under deadline and budget, at a confidence."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from dataclasses import replace

import pandas as pd

from srifty_kit.cli.flags import (
    input_file,
    name_list,
    non_negative,
    number,
    output,
    positive,
    positive_int,
    probability,
    region,
    whole_list,
)
from srifty_kit.decide.choices import left_out_lines
from srifty_kit.decide.planner import OBJECTIVES, Constraints, Job, search
from srifty_kit.decide.probes import MAX_PROBES
from srifty_kit.errors import InputError, did_you_mean
from srifty_kit.tables.files import (
    json_records,
    json_safe,
    read_table,
    write_json,
    write_table,
)

# columns shown on the terminal (the files carry all of them); the cost shown is the expected
# one, what the ranking minimises, under a header that says so
_HEADERS = {"cost_mean_usd": "expected_cost_usd"}
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
    "cost_mean_usd",
    "cost_hi_usd",
    "compute_s",
    "sync_s",
    "efficiency",
    "p_meet",
)


def _noise_scale(args: argparse.Namespace) -> float | None:
    if args.noise_scale is not None or not args.facts:
        return args.noise_scale
    return noise_scale_of_facts(args.facts, args.workload)


def noise_scale_of_facts(path: str, workload: str) -> float:
    """The gradient noise scale in a profile's facts JSON.

    Accepts what ``srifty profile`` writes beside a table (``NAME.facts.json``, the noise
    scale at the top) and a document keyed by training model (``{"mlp": {...}, ...}``, as
    ``data/sample_profile_facts.json``), where ``workload``'s entry is read.

    Raises:
        InputError: the file is not a JSON object, has no entry for ``workload``, or its
            noise scale is missing, not a number, not finite or not positive.
    """
    fix = "give the .facts.json written beside a profile, or --noise-scale"
    try:
        with open(path) as fh:
            facts = json.load(fh)
    except (OSError, ValueError) as err:
        reason = getattr(err, "strerror", None) or str(err).splitlines()[0]
        raise InputError(f"cannot read the profile facts: {reason}", source=path, fix=fix) from None
    if not isinstance(facts, dict):
        raise InputError(
            f"expected a JSON object of profile facts, found a {type(facts).__name__}",
            source=path,
            fix=fix,
        )
    if "noise_scale" not in facts:
        keyed = {k: v for k, v in facts.items() if isinstance(v, dict)}
        if workload in keyed:
            facts = keyed[workload]
        elif keyed:
            raise InputError(
                f"no facts for the training model {workload!r}"
                + did_you_mean(workload, keyed)
                + f"; the file holds {', '.join(sorted(keyed))}",
                source=path,
                fix="give --workload one of them, or --noise-scale",
            )
    value = facts.get("noise_scale")
    if value is None:
        raise InputError(
            "the profile has no noise scale",
            source=path,
            fix="give --noise-scale, or profile again with the noise scale on",
        )
    scale = value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if scale is None or not math.isfinite(scale) or scale <= 0:
        raise InputError(
            f"the noise scale {value!r} is not a positive finite number",
            source=path,
            column="noise_scale",
            fix="profile again, or give --noise-scale",
        )
    return float(scale)


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
        families=args.families,
        instance_types=args.instance_types,
        spot=args.spot,
        mixes=args.hetero,
        min_gpu_memory_gib=args.min_gpu_memory_gib,
    )


def _filtered(args: argparse.Namespace, catalog: pd.DataFrame, listed) -> tuple:
    """(the instance types the filters name, how they read in a message), or (None, "") for
    a search over the whole catalog. --gpu becomes its GPUs' instance types (in --families,
    among --instance-types)."""
    from srifty_kit.catalog.query import instance_family
    from srifty_kit.decide.choices import gpu_instance_types

    if args.gpu:
        types = gpu_instance_types(catalog, args.gpu, args.families or ())
        if args.instance_types:
            types = tuple(t for t in types if t in set(args.instance_types))
            if not types:
                raise InputError(
                    f"none of --instance-types {','.join(args.instance_types)} has "
                    f"{' or '.join(args.gpu)} GPUs",
                    fix="drop --instance-types or --gpu, or name types with those GPUs",
                )
        return types, f"--gpu {','.join(args.gpu)}"
    names = catalog["instance_type"].astype(str)
    if args.instance_types:
        if not set(args.instance_types) <= set(names):
            return None, ""  # the search names the unknown one, with "did you mean"
        return args.instance_types, f"--instance-types {','.join(args.instance_types)}"
    if args.families:
        types = tuple(names[instance_family(names).isin(list(args.families)).to_numpy()])
        return types, f"--families {','.join(args.families)}"
    if listed is not None and "instance_type" in listed:  # else the search names the column
        return tuple(listed["instance_type"].astype(str)), f"--candidates {args.candidates}"
    return None, ""


def _candidates(path: str, job: Job, catalog: pd.DataFrame) -> pd.DataFrame:
    """The --candidates file checked against the candidates contract, each configuration
    once: a repeated one is dropped with a note on stderr saying which lines
    (``planner.unique_candidates``), said only of a table that passed, after its checks."""
    from srifty_kit.decide.planner import validate_candidates

    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always")
        table = validate_candidates(read_table(path), job, catalog)
    for note in notes:
        print(f"srifty search: note: {note.message}", file=sys.stderr)
    return table


def _batch_beyond(result, model, workload: str, catalog: pd.DataFrame) -> list[str]:
    """A line when the pick (or, with none, the nearest) runs a local batch more than
    ``FAR_BEYOND`` x outside the batches its step time rests on: the default batches reach
    1024 whatever was measured, and such a step is extrapolated (predict warns the same)."""
    from srifty_kit.model.estimator import FAR_BEYOND

    row = result.pick if result.pick is not None else result.nearest
    if row is None:
        return []
    lo, hi = model.batch_range(workload, str(row["instance_type"]), catalog)
    b = int(row["local_bsz"])
    if lo / FAR_BEYOND <= b <= hi * FAR_BEYOND:
        return []
    which = "pick" if result.pick is not None else "nearest configuration"
    return [
        f"note: the {which}'s local batch {b} lies more than {FAR_BEYOND}x outside the "
        f"batches its step time rests on ({lo}-{hi}, measured for {workload}): it is "
        "extrapolated, and nothing measured says it fits in GPU memory; to stay near your "
        "runs give --local-bsz, or --memory-per-sample-gib to keep batches that fit"
    ]


def _document(result) -> dict:
    def rows(frame: pd.DataFrame) -> list[dict]:
        return json_records(frame)  # the numbers of the CSV and the API, not rounded

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
        "confidence": None if result.constraints is None else result.constraints.confidence,
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
    if args.out and args.format != "json" and args.out.lower().endswith(".json"):
        # one suffix, one document: a script reading r.json gets the same keys however it
        # was asked for
        raise InputError(
            "a .json output holds the whole result (pick, front, probes), written with "
            "--format json",
            source=args.out,
            fix="add --format json, or name the output .csv or .parquet for the ranked table",
        )
    if args.fallback_after is not None and not args.spot:
        raise InputError(
            "--fallback-after is a spot policy, and spot is not allowed",
            fix="add --spot, or drop --fallback-after",
        )
    # the embedded catalog holds one region: another one without --catalog is refused here,
    # never answered with us-east-1 prices
    catalog = load_catalog(region=args.region, path=args.catalog)
    model = StepTimeModel.load(args.model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fit's notes were shown by srifty fit
        listed = (
            None if args.candidates is None else _candidates(args.candidates, _job(args), catalog)
        )
        constraints = _constraints(args)
        types, asked = _filtered(args, catalog, listed)
        if types is not None:
            from srifty_kit.decide.choices import check_gpu_figures

            # a filter that reaches only GPUs without figures would find nothing: say why
            check_gpu_figures(catalog, types, model, args.workload, asked)
        if args.gpu:
            constraints = replace(constraints, instance_types=types)
        result = search(
            model,
            catalog,
            _job(args),
            constraints,
            objective=args.objective,
            top=args.top,
            candidates=listed,
        )
    probes = None
    if args.suggest_probes:
        from srifty_kit.decide.probes import probe_sentence, suggest_probes

        probes = suggest_probes(result, k=args.suggest_probes)
    # a negative answer (exit 1) writes no file: an older --out stays as it was
    out = args.out if result.feasible else None
    if args.format == "json":
        doc = _document(result)
        if probes is not None:
            doc["probes"] = json_records(probes)
            doc["probe_sentence"] = probe_sentence(probes)
        if out:
            write_json(doc, out)
        else:  # also when a negative answer leaves --out alone: the answer reaches the user
            print(json.dumps(json_safe(doc), indent=1, allow_nan=False))
    elif args.format == "csv":
        if out:
            write_table(result.ranked, out)
        else:
            result.ranked.to_csv(sys.stdout, index=False)
    else:
        if out:  # before the table: a reader that stops early (`| head`) leaves the file whole
            write_table(result.ranked, out)
        if result.feasible:
            shown = result.ranked[list(_SHOWN)].dropna(axis=1, how="all").rename(columns=_HEADERS)
            print(shown.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
            print(
                "expected_cost_usd: the mean cost over the model's belief (cost_mean_usd in "
                "JSON/CSV); cost_hi_usd: the cost at the confidence"
            )
            print()
            from srifty_kit.decide.pareto import FRONT_COST, FRONT_TIME

            # in the front's own coordinates (the panel's and notebook 03's figure draw it so)
            front = result.pareto[
                ["instance_type", "num_nodes", "num_workers", "local_bsz", "pricing"]
                + [FRONT_TIME, FRONT_COST]
            ].rename(columns=_HEADERS)
            print(
                f"Pareto front of the time at the confidence and the expected cost "
                f"({len(front)} of {result.n_feasible:,} feasible, "
                f"{result.n_candidates:,} evaluated):"
            )
            print(front.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
            print()
    # where the JSON or CSV went to stdout, stdout is that document alone (a script reads it
    # whole) and the words go to stderr; a negative answer always says why (exit 1), and so
    # do probes asked for where the document (a CSV of the ranked table) has no place for them
    words = sys.stdout if args.format == "table" or out else sys.stderr
    unsaid = probes is not None and args.format == "csv"
    if args.format == "table" or args.out or not result.feasible or unsaid:
        lines = [result.explanation]
        if probes is not None:
            lines.append(probe_sentence(probes))
        lines += _batch_beyond(result, model, args.workload, catalog)
        lines += left_out_lines(result, catalog, model, args.workload, "--catalog FILE")
        if out:
            lines.append(f"wrote {out}")
        elif args.out:
            kept = " (the file there is as it was)" if os.path.lexists(args.out) else ""
            lines.append(
                f"nothing written to {args.out}: no configuration meets the constraints{kept}"
            )
        print("\n".join(lines), file=words)
    return 0 if result.feasible else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``search``."""
    p = subparsers.add_parser(
        "search",
        help="the EC2 configuration for a training job under a deadline and budget",
        description="Search instance type x nodes x workers x batch x pricing (and two-type "
        "mixes), or the --candidates you list, for a job: a configuration is feasible when the "
        "probability that it meets the deadline and budget is at least the confidence, under "
        "the model's joint belief; the pick has the least expected cost among those. Prints "
        "the ranked table, the Pareto front and why the pick beats the cheapest instance per "
        "hour; --suggest-probes K adds the short runs worth measuring to decide.",
        epilog="Exit status: 0 with a pick, 1 when no configuration meets the constraints "
        "(the reason and the nearest configuration are printed; with --format json or csv "
        "and no file written, stdout holds the document alone and these lines go to "
        "stderr), 2 on bad input.",
    )
    p.add_argument(
        "--model", required=True, type=input_file, help="model file written by srifty fit"
    )
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
    p.add_argument(
        "--facts",
        type=input_file,
        help="profile facts JSON to read the noise scale from (a profile's NAME.facts.json, or "
        "one keyed by training model such as data/sample_profile_facts.json)",
    )
    p.add_argument("--deadline-h", type=positive, help="finish within this many hours")
    p.add_argument("--budget-usd", type=positive, help="spend at most this many dollars")
    p.add_argument("--confidence", type=probability, default=0.9, help="confidence level (0.9)")
    p.add_argument("--objective", choices=OBJECTIVES, default="cost", help="what to optimise")
    p.add_argument("--spot", action="store_true", help="allow spot pricing")
    p.add_argument(
        "--fallback-after",
        type=positive_int,
        help="spot: go on-demand after K reclaims (needs --spot)",
    )
    p.add_argument("--hetero", action="store_true", help="allow mixes of two instance types")
    p.add_argument("--max-nodes", type=positive_int, default=16, help="nodes per cluster (16)")
    p.add_argument("--vcpu-quota", type=positive_int, help="EC2 vCPU quota the cluster must fit")
    p.add_argument("--instance-types", type=name_list, help="only these, comma-separated")
    p.add_argument(
        "--families", type=name_list, help="only these families, comma-separated (g5,p4d)"
    )
    p.add_argument(
        "--gpu",
        type=name_list,
        metavar="MODELS",
        help="only instance types with these GPU models, comma-separated (A100,L4; see srifty "
        "catalog show); a GPU whose figures the catalog lacks (A10G) can be searched only "
        "where the model was measured on it",
    )
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
        type=input_file,
        help="catalog file (default: the embedded EC2 one); the model carries to the types it "
        "lists, whose figures must agree with the rows kept in the model file",
    )
    p.add_argument("--region", default="us-east-1", type=region, help="catalog region (us-east-1)")
    p.add_argument(
        "--candidates",
        type=input_file,
        help="decide among exactly these configurations: a CSV/Parquet with instance_type, "
        "num_nodes, num_workers, local_bsz (optional pricing, gpus_per_node)",
    )
    p.add_argument(
        "--suggest-probes",
        # bounded while parsing: a K the library refuses is said with this flag, before the
        # search runs
        type=number(1, MAX_PROBES, whole=True),
        metavar="K",
        help="also propose up to K short runs worth measuring to decide (value of information; "
        f"K at most {MAX_PROBES})",
    )
    p.add_argument("--top", type=positive_int, default=10, help="rows in the ranked table (10)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument(
        "--out",
        type=output(),
        help="write the ranked table (.csv/.parquet) or, with --format json only, the whole "
        "result (.json)",
    )
    # the Job and Constraints arguments whose flags have other names: "to fix" hints name flags
    p.set_defaults(
        func=_run,
        prog=p.prog,
        api_flags={
            "model": "workload",
            "spot_fallback_after": "fallback_after",
            "mixes": "hetero",
            "path": "catalog",  # load_catalog's
        },
    )
