"""``srifty demo``: the whole pipeline on a demo model, ending in an HTML report."""

from __future__ import annotations

import argparse

from srifty_kit.cli.flags import output_folder, positive
from srifty_kit.present.demo import DEADLINE_H


def _demo(args: argparse.Namespace) -> int:
    from srifty_kit.present.demo import run_demo

    demo = run_demo(
        args.out,
        model=args.model,
        seconds=args.seconds,
        samples=args.samples,
        deadline_h=args.deadline_h,
    )
    print(demo.pick)
    if demo.probe:
        print(demo.probe)
    print(f"measurements: {demo.measurements}\nmodel: {demo.model}\nreport: {demo.report.html}")
    if demo.weekly is not None:
        print(f"weekly cost report: {demo.weekly.html}")
    if demo.index is not None:
        print(f"open: {demo.index}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``demo``."""
    p = subparsers.add_parser(
        "demo",
        help="profile a demo model here, fit, search EC2, write an HTML report",
        description="Profile a demo model on this machine (one process, then a 2-process DDP "
        "run over gloo on 127.0.0.1), fit a step-time model, search EC2 configurations for a "
        "job, and write the search report as HTML. Everything lands in --out; a folder holding "
        "files of yours the demo would replace (measurements.csv, model.json, index.html, ...) "
        "is refused before any work.",
    )
    p.add_argument(
        "--out",
        default="reports/demo",
        type=output_folder,
        help="output folder (default reports/demo)",
    )
    p.add_argument(
        "--model",
        default="mlp",
        choices=("mlp", "cnn", "transformer"),
        help="demo model to profile (default mlp)",
    )
    p.add_argument(
        "--seconds",
        type=positive,
        default=20.0,
        help="measuring budget in seconds, split between the two profiles",
    )
    p.add_argument(
        "--samples",
        type=positive,
        default=1e9,
        help="training samples to the target accuracy (default 1e9)",
    )
    p.add_argument(
        "--deadline-h",
        type=positive,
        default=DEADLINE_H,
        help=f"deadline in hours (default {DEADLINE_H:g}: a CPU profile reaches GPUs through "
        "its op mix alone, and a small model gains little from more GPUs)",
    )
    p.set_defaults(func=_demo, prog=p.prog)
