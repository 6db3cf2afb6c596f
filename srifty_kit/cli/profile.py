"""``srifty profile`` and ``srifty profile-dist``: measure step times here, write the table."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from srifty_kit.cli.flags import output, positive, probability, whole_list
from srifty_kit.errors import InputError, check_interrupt, counted, duration, interrupted_by
from srifty_kit.tables.files import staged_outputs

_MODEL_HELP = (
    "mlp, cnn, transformer (demo models built in), or MODULE:CALLABLE: a function taking no "
    "arguments that returns srifty_kit.measure.zoo.ModelSpec(model, make_batch, loss_fn, "
    "optimizer_fn) or that 4-tuple, where make_batch(batch_size) returns (inputs, targets), "
    "loss_fn(outputs, targets) returns a scalar tensor (mean over the batch) and "
    "optimizer_fn(parameters) returns a torch optimizer; MODULE is imported from the "
    "current directory or PYTHONPATH"
)
_TORCHRUN_EPILOG = """\
across EC2 nodes, run the same command under torchrun on every node, e.g. two nodes with
4 GPUs each (NODE_RANK 0 on the node at --master-addr, 1 on the other):

  torchrun --nnodes 2 --nproc-per-node 4 --node-rank $NODE_RANK \\
      --master-addr 10.0.1.23 --master-port 29500 \\
      --no-python srifty profile-dist --model mlp --batch-sizes 8,16 --out dist.csv

(leave --world-sizes out: torchrun sets the world; rank 0 writes the files)
"""


def _common(
    p: argparse.ArgumentParser, batches_required: bool = True, sets_aside: bool = False
) -> None:
    """The flags of both commands; ``sets_aside``: the command keeps an unfinished run's rows
    that are in --out itself when a finished run replaces it (its facts say unfinished)."""
    p.add_argument("--model", default="mlp", help=_MODEL_HELP)
    p.add_argument(
        "--batch-sizes",
        type=whole_list,
        required=batches_required,
        help="local batch sizes, comma-separated, e.g. 4,8,16"
        + ("" if batches_required else " (not with --facts-only)"),
    )
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda[:N]")
    p.add_argument(
        "--target-precision",
        type=probability,
        default=0.02,
        help="stop a batch size once the 95%% CI of its mean is within this "
        "fraction of the mean (default 0.02)",
    )
    p.add_argument(
        "--max-seconds",
        type=positive,
        default=60.0,
        help="measuring budget for the whole run (default %(default)s); a batch size it "
        "cuts short of the target precision keeps its steps, and a warning says about what "
        "budget would reach it",
    )
    p.add_argument(
        "--out",
        required=True,
        type=output(),
        help="measurement table to write, .csv, .parquet or .json records (one row per step); "
        "where an older file is there it is replaced only when the run finishes, and an "
        "interrupted or failed "
        "run keeps its rows beside it in NAME.partial.csv, or NAME.partial.2.csv, .3, ... "
        "where an earlier unfinished run's partial file is there (never written over)"
        + (
            "; an unfinished run's rows in the file itself (none was there before it) are "
            "moved to such a partial file by the run that finishes and replaces it"
            if sets_aside
            else ""
        ),
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def register(subparsers: Any) -> None:
    """Add ``profile`` and ``profile-dist``."""
    p = subparsers.add_parser(
        "profile",
        help="time training steps of a model at several batch sizes, here",
        description="Time whole training steps (forward, backward, optimizer) per batch size "
        "until the mean is precise enough; also FLOPs, parameters, peak memory, the largest "
        "batch under a memory budget and the gradient noise scale (written beside --out as "
        "NAME.facts.json). Every step is one row of the measurement table.",
    )
    _common(p, batches_required=False, sets_aside=True)
    p.add_argument(
        "--facts-only",
        action="store_true",
        help="time nothing: write only the facts a meta-device pass gives (parameters, "
        "FLOPs and bytes moved per sample per operator class), in seconds, on any machine; "
        "--out names the .json (a table name gets NAME.facts.json beside it)",
    )
    p.add_argument(
        "--memory-budget-gib",
        type=positive,
        default=None,
        help="memory budget for the largest batch (default: all of the device's)",
    )
    p.add_argument(
        "--noise-batch-sizes",
        type=whole_list,
        default=None,
        help="small,large batch sizes for the gradient noise scale (default: the smallest and "
        "largest profiled; a large one is accumulated from micro-batches and is best near the "
        "noise scale itself, e.g. 8,1024)",
    )
    p.add_argument(
        "--op-trace",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also profile a few steps per batch size under torch.profiler and record where "
        "their device time goes per operator class (facts op_trace; default: on CUDA only): "
        "a CUDA trace carries the model to other GPUs class by class",
    )
    p.set_defaults(
        func=_profile,
        prog=p.prog,
        derived_outputs={"--out": _profile_files},
        at_start=_at_start,  # an interrupt before _profile ran: main says this line
    )

    d = subparsers.add_parser(
        "profile-dist",
        help="time DDP training steps (and all-reduce) at several world sizes",
        description="Time DistributedDataParallel training steps at each world size and local "
        "batch size (gloo on CPU, NCCL on CUDA), with the all-reduce part of each step "
        "(sync_time_s, from a paired no_sync step). On one machine the workers are started "
        "here (rendezvous on 127.0.0.1).",
        epilog=_TORCHRUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(d, sets_aside=True)
    d.add_argument(
        "--world-sizes",
        type=whole_list,
        default=None,
        help="numbers of workers, e.g. 1,2,4 (default 1,2; not under torchrun)",
    )
    d.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto")
    d.add_argument(
        "--collectives-out",
        default=None,
        type=output(),
        help="also time all-reduce from 1 KB to 64 MB and write every sample here",
    )
    d.add_argument(
        "--timeout",
        type=positive,
        default=120.0,
        help="seconds without word from the workers before the run is ended",
    )
    d.set_defaults(
        func=_profile_dist,
        prog=d.prog,
        at_start=_at_start,
        derived_outputs={"--out": _profile_files, "--collectives-out": _profile_files},
    )


def _profile_files(path: str) -> list[Path]:
    """What ``srifty profile`` (and ``profile-dist``) ``--out PATH`` writes besides PATH: its
    facts, and while an older file is there, the partial table and facts (``files.Staging``)."""
    from srifty_kit.measure.profile import facts_path

    return staged_outputs(path, lambda p: [facts_path(p)])


def _with_cwd_on_path() -> None:
    # a console script does not put the current directory on sys.path; MODULE:CALLABLE needs it
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def _so_far(n: int) -> str:
    """'the 3 steps measured so far are', 'the 1 step measured so far is'."""
    return f"the {counted(n, 'step')} measured so far {'is' if n == 1 else 'are'}"


def _nothing_written(out: str, doing: str = "") -> str:
    """The last line of a run interrupted before its first step; ``doing``: what it stopped
    ('moving the model to cuda:0'), where the run said."""
    kept = f"; {out} is as it was" if os.path.exists(out) else ""
    stopped = f" while {doing}," if doing else ""
    return f"interrupted{stopped} before any step was measured: nothing written{kept}"


def _fmt(table: Any, columns: list[str]) -> str:
    """``columns`` of ``table`` as text: four significant digits, whole numbers whole (a
    column of bytes with an empty cell is float, and would print as 4.496e+08), and "-"
    where a batch size measured nothing."""
    import pandas as pd

    shown = table[[c for c in columns if c in table.columns]].copy()
    for c in shown.columns:
        values = shown[c]
        if pd.api.types.is_float_dtype(values) and (values.dropna() % 1 == 0).all():
            shown[c] = values.map(lambda v: "-" if pd.isna(v) else str(int(v)))
    return shown.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-")


def _largest_batch(facts: dict[str, Any]) -> str:
    """The largest batch in words: its size and how it was found, or why there is none."""
    size = facts.get("max_batch_size")
    if size is not None:
        return f"largest batch {size} ({facts.get('max_batch_method')})"
    if "max_batch_method" not in facts:  # the search runs after the timing and noise scale
        return "largest batch not searched (interrupted before the search)"
    note = facts.get("max_batch_note") or facts.get("max_batch_method")
    return f"largest batch not found ({note})"


def _at_start(args: argparse.Namespace) -> str | None:
    """The last line of a timing run interrupted while it was still starting (the command
    line parsed, torch imported, the model built): nothing measured, as a later interrupt
    before the first step says it (None for --facts-only: main says 'interrupted')."""
    return None if getattr(args, "facts_only", False) else _nothing_written(args.out)


def _while_starting(args: argparse.Namespace, start: Callable[[], Any]) -> Any:
    """``start()`` (importing torch, building the model: seconds), or None when an interrupt
    came meanwhile, after printing the line that says nothing was written (``_at_start``)."""
    try:
        started = start()
        check_interrupt()  # one that a library swallowed while importing
        return started
    except BaseException:
        if not interrupted_by:
            raise
        print(_at_start(args), file=sys.stderr)
        return None


def _load_spec(model: str) -> Any:
    from srifty_kit.measure import profile  # noqa: F401  (torch, imported while starting)
    from srifty_kit.measure.zoo import load_spec

    return load_spec(model)


def _import_distributed() -> bool:
    from srifty_kit.measure import variance  # noqa: F401
    from srifty_kit.measure.distributed import profile  # noqa: F401

    return True


def _profile(args: argparse.Namespace) -> int:
    _with_cwd_on_path()
    if args.facts_only:
        if args.batch_sizes:  # nothing is timed: the sizes would be ignored without a word
            raise InputError(
                "--facts-only times nothing, so it takes no --batch-sizes",
                fix="drop --batch-sizes, or drop --facts-only to time those sizes",
            )
        return _facts_only(args)
    if not args.batch_sizes:
        raise InputError(
            "srifty profile needs --batch-sizes", fix="e.g. --batch-sizes 4,8,16, or --facts-only"
        )
    spec = _while_starting(args, lambda: _load_spec(args.model))
    if spec is None:
        return 130
    from srifty_kit.measure.profile import BudgetWarning, budget_note, profile_spec

    budget = None if args.memory_budget_gib is None else int(args.memory_budget_gib * 2**30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)  # said below, in the command's flag
        result = profile_spec(
            spec,
            args.batch_sizes,
            device=args.device,
            target_precision=args.target_precision,
            max_seconds=args.max_seconds,
            memory_budget_bytes=budget,
            out=args.out,
            progress=not args.quiet,
            noise_batch_sizes=tuple(args.noise_batch_sizes) if args.noise_batch_sizes else None,
            op_trace=args.op_trace,
        )
    if result.measurements.empty:
        print(_nothing_written(args.out, result.stopped_while), file=sys.stderr)
        return 130
    f = result.facts
    print(
        f"{f['model']} on {f['instance_type']} ({f['device']}): "
        f"{counted(len(result.measurements), 'step')} written to {result.written}"
    )
    print(
        _fmt(
            result.summary,
            [
                "local_bsz",
                "n",
                "n_eff",  # steps' worth of independent information (autocorrelation)
                "warmup_steps",
                "mean",
                "mean_lo",
                "mean_hi",
                "precision",
                "target_precision",
                "shift",  # the largest change of level during the run (CUSUM): samples kept
                "drift",  # whether that shift is significant (variance.level_shift)
                "peak_memory_bytes",
                "stop_reason",
            ],
        )
    )
    for b, cause in result.errors.items():
        print(f"batch size {b}: not measured: {cause}")
    if f.get("budget_short"):
        note = budget_note(f["budget_short"], "--max-seconds {}")
        warnings.warn(note, BudgetWarning, stacklevel=2)
    trace = f.get("op_trace")
    if trace and trace["batches"]:
        b, rec = max(trace["batches"].items(), key=lambda kv: int(kv[0]))
        shares = ", ".join(
            f"{c} {t / rec['step_s']:.0%}" for c, t in rec["classes"].items() if t > 0
        )
        print(
            f"op trace on {trace['device_name']} at batch {b}: of a {duration(rec['step_s'])} "
            f"step, device busy {rec['busy_s'] / rec['step_s']:.0%} ({shares})"
        )
    ns = f.get("noise_scale")
    spread = f" +- {f['noise_scale_std']:.3g}" if f.get("noise_scale_std") else ""
    print(
        f"FLOPs/sample {f.get('flops_per_sample') or float('nan'):.4g}, "
        f"parameters {f['param_count']}, gradient bytes {f['grad_bytes']}, "
        f"noise scale {'n/a' if ns is None else f'{ns:.3g}'}{spread}, {_largest_batch(f)}"
    )
    if result.interrupted:
        print(
            f"interrupted: {_so_far(len(result.measurements))} {result.kept}",
            file=sys.stderr,
        )
        return 130
    if result.earlier:
        print(result.earlier, file=sys.stderr)
    return 0


def _facts_only(args: argparse.Namespace) -> int:
    """``srifty profile --facts-only``: the op mix from a meta-device pass, no timing."""
    from pathlib import Path

    from srifty_kit.measure.profile import facts_only, facts_path

    out = Path(args.out)
    out = out if out.suffix == ".json" else facts_path(out)
    f = facts_only(args.model, out=out)
    print(f"{f['model']}: facts written to {out} (no step timed)")
    for name, row in f["op_mix"].items():
        print(
            f"  {name:13s} {row['flops_per_sample']:10.4g} FLOP/sample "
            f"{row['bytes_per_sample']:10.4g} B/sample {row['bytes_per_step']:10.4g} B/step"
        )
    return 0


def _profile_dist(args: argparse.Namespace) -> int:
    if _while_starting(args, _import_distributed) is None:
        return 130
    from srifty_kit.measure.distributed.profile import DEFAULT_SIZES, profile_distributed
    from srifty_kit.measure.profile import BudgetWarning, budget_note
    from srifty_kit.measure.variance import describe

    _with_cwd_on_path()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BudgetWarning)  # said below, in the command's flag
        result = profile_distributed(
            args.model,
            args.world_sizes,
            args.batch_sizes,
            args.backend,
            args.device,
            args.target_precision,
            args.max_seconds,
            sizes_bytes=DEFAULT_SIZES if args.collectives_out else (),
            timeout_s=args.timeout,
            out=args.out,
            collectives_out=args.collectives_out,
            progress=not args.quiet,
        )
    steps = result.measurements
    if steps.empty:  # under torchrun only rank 0 keeps rows; an interrupt may leave none
        if result.interrupted:
            print(_nothing_written(args.out, result.stopped_while), file=sys.stderr)
            return 130
        return 0
    summary = describe(steps, by=["num_workers", "local_bsz"], n_resamples=0)
    sync = steps.groupby(["num_workers", "local_bsz"])["sync_time_s"].mean().to_numpy()
    summary["sync_mean"] = sync
    print(f"{counted(len(steps), 'step')} written to {result.written}")
    print(
        _fmt(
            summary,
            [
                "num_workers",
                "local_bsz",
                "n",
                "mean",
                "mean_lo",
                "mean_hi",
                "precision",
                "sync_mean",
            ],
        )
    )
    for (world, b), cause in result.errors.items():
        print(f"world size {world}, batch size {b}: not measured: {cause}")
    if result.facts.get("budget_short"):
        note = budget_note(result.facts["budget_short"], "--max-seconds {}")
        warnings.warn(note, BudgetWarning, stacklevel=2)
    if args.collectives_out:
        print(
            f"{counted(len(result.collectives), 'all-reduce sample')} written to "
            f"{result.written_collectives or args.collectives_out}"
        )
    if result.interrupted:
        print(
            f"interrupted: {_so_far(len(steps))} {result.kept}",
            file=sys.stderr,
        )
        return 130
    if result.earlier:
        print(result.earlier, file=sys.stderr)
    return 0
