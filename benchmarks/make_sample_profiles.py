"""Make the sample profiles in data/ with the kit's own profiler, on this machine.

Writes (small enough to ship, under 1 MB together):

- data/sample_profile_single.csv: every step of the three demo models, single process, at a
  few batch sizes each (profile_model, target 2%, at most 150 steps per batch size);
- data/sample_profile_dist.csv: DDP steps of the three demo models at world sizes 1, 2, 4
  (gloo on 127.0.0.1, sync time from paired no_sync steps; at most 60 steps per configuration);
  both step tables carry ``run``, one id per profiling call, so a fit tells one step's spread
  about its run's mean from the spread between runs (``model.intervals.run_variance``);
- data/sample_profile_allreduce.csv: gloo all-reduce from 1 KB to 64 MB at world sizes 2, 4;
- data/sample_profile_facts.json: per model FLOPs/sample, parameters, gradient bytes,
  gradient noise scale with its interval, peak memory and largest batch;
- data/sample_profile_fingerprint.json: the machine (CPU, cores, memory, torch), the date and
  the load average before and after (other jobs on the machine make step times noisier).

    .venv/bin/python benchmarks/make_sample_profiles.py [--out FOLDER]

The files are written together once every profile finished; an interrupt (Ctrl-C) writes
nothing, so the samples already there stay as they were.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from srifty_kit import errors  # noqa: E402
from srifty_kit.measure import host  # noqa: E402
from srifty_kit.measure.distributed.profile import DEFAULT_SIZES, profile_distributed  # noqa: E402
from srifty_kit.measure.profile import profile_spec  # noqa: E402
from srifty_kit.tables.files import write_json, write_table  # noqa: E402

DATA = REPO / "data"
SINGLE = {"mlp": [8, 32, 128], "cnn": [4, 8, 16, 32], "transformer": [4, 8, 16, 32]}
# B_big near each model's noise scale at initialisation, where the estimate is best conditioned
NOISE_PAIRS = {"mlp": (32, 8192), "cnn": (8, 256), "transformer": (4, 64)}
DIST = {"mlp": [8, 32], "cnn": [8, 16], "transformer": [8, 16]}
KEEP_FACTS = (
    "flops_per_sample",
    "param_count",
    "grad_bytes",
    "noise_scale",
    "noise_scale_std",
    "noise_scale_lo",
    "noise_scale_hi",
    "noise_scale_level",
    "noise_scale_batch_sizes",
    "noise_scale_repeats",
    "noise_scale_note",
    "max_batch_size",
    "max_batch_method",
    "memory_budget_bytes",
    "memory_bytes_per_sample",
    "memory_base_bytes",
    "memory_method",
    "torch_threads",
)


def main(argv: list[str] | None = None) -> int:
    """Profile the demo models single-process and distributed; write the samples.

    Args:
        argv: the command line (``--out FOLDER``, default data/).

    Returns:
        0 when every sample was written; 130 (SIGINT) or 143 (SIGTERM) when an interrupt
        stopped it: then nothing is written, and the samples in the folder stay as they were.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DATA, help="folder of the samples (data/)")
    out = parser.parse_args(argv).out
    # as the srifty command does: the interrupt stays raised through the profilers' loops and
    # the DDP launcher (errors.check_interrupt), and SIGTERM stops the workers the same way
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, errors.on_interrupt)
    try:
        return _make(out)
    except KeyboardInterrupt:  # between two profiles: nothing written either
        return _stopped(out)


def _make(out: Path) -> int:
    """Profile every sample, then write all five files in ``out`` (0), or nothing (130/143)."""
    import pandas as pd

    fingerprint = host.fingerprint("cpu")
    fingerprint["loadavg_before"] = fingerprint.pop("loadavg_1_5_15")
    fingerprint.pop("host", None)  # the sample says what machine, not which one
    single, facts = [], {}
    for name, sizes in SINGLE.items():
        r = profile_spec(
            name,
            sizes,
            device="cpu",
            max_seconds=20,
            max_steps=150,
            noise_batch_sizes=NOISE_PAIRS[name],
            noise_seconds=10,
        )
        if r.interrupted:
            return _stopped(out)
        single.append(r.measurements)
        summary = r.summary[
            ["local_bsz", "n", "mean", "precision", "peak_memory_bytes", "stop_reason"]
        ]
        facts[name] = {
            **{k: r.facts.get(k) for k in KEEP_FACTS},
            "summary": summary.astype(object).to_dict(orient="records"),
        }
        print(summary.to_string(index=False))

    dist = []
    for name, sizes in DIST.items():
        r = profile_distributed(name, [1, 2, 4], sizes, device="cpu", max_seconds=30, max_steps=60)
        if r.interrupted:
            return _stopped(out)
        dist.append(r.measurements)
    coll = profile_distributed(
        None,
        [2, 4],
        (),
        device="cpu",
        max_seconds=40,
        max_steps=30,
        sizes_bytes=DEFAULT_SIZES,
        target_precision=0.05,
    )
    if coll.interrupted:
        return _stopped(out)

    fingerprint["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    fingerprint["made_by"] = "benchmarks/make_sample_profiles.py"
    # written together once every profile finished: a set from one run, never half of one
    out.mkdir(parents=True, exist_ok=True)
    write_table(pd.concat(single, ignore_index=True), out / "sample_profile_single.csv")
    write_json(facts, out / "sample_profile_facts.json")
    write_table(pd.concat(dist, ignore_index=True), out / "sample_profile_dist.csv")
    write_table(coll.collectives, out / "sample_profile_allreduce.csv")
    write_json(fingerprint, out / "sample_profile_fingerprint.json")
    sizes = {p.name: p.stat().st_size for p in out.glob("sample_profile_*")}
    print(sizes, f"total {sum(sizes.values()) / 1e6:.2f} MB")
    return 0


def _stopped(out: Path) -> int:
    """An interrupt ended a profile: say so in one line and write nothing (128 + signal)."""
    print(f"interrupted: nothing written, the samples in {out} are as they were", file=sys.stderr)
    return 128 + (errors.interrupted_by or [signal.SIGINT])[-1]


if __name__ == "__main__":
    sys.exit(main())
