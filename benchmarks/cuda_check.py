"""One-off check of the profiler's CUDA paths on a GPU machine (about 2-3 minutes).

What it runs, with device="cuda":

1. ``profile_spec`` on each demo model at batch sizes 32, 128, 512: CUDA-synchronised step
   times, the allocator's peak memory per batch size, and the largest batch under a 2 GiB
   budget found by bisection on ``torch.OutOfMemoryError`` under a capped allocator, and the
   op trace (``measure.op_trace``: kernel time per operator class, host part, per batch size);
2. ``profile_distributed`` at world size 1 over NCCL: an all-reduce sweep from 1 KB to 64 MB
   and DDP steps of the MLP (one GPU is enough to run the NCCL code paths).

Writes under $OUT (default reports/cuda_check/): profile.csv (every step, three models),
dist.csv (DDP steps), allreduce.csv (every all-reduce sample) and summary.json (hardware
fingerprint, per-model facts and summaries, what failed). Exits 2 at once, saying so, when
CUDA is not available; exits 1 when any part failed (the summary says which).

    OUT=/tmp/cuda_check .venv/bin/python benchmarks/cuda_check.py
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BATCHES = [32, 128, 512]
BUDGET = 2 * 2**30  # small on purpose: the bisection must meet out-of-memory errors
SECONDS = 20


def _fail_without_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        print(
            f"cuda_check: CUDA is not available (torch {torch.__version__}, built for CUDA "
            f"{torch.version.cuda}): run this on a machine with an NVIDIA GPU and a CUDA "
            "build of torch",
            file=sys.stderr,
        )
        sys.exit(2)


def main() -> int:
    """Profile the demo models and an NCCL sweep on CUDA; write tables and a summary."""
    _fail_without_cuda()
    import pandas as pd

    from srifty_kit.measure import host
    from srifty_kit.measure.distributed.profile import DEFAULT_SIZES, profile_distributed
    from srifty_kit.measure.profile import profile_spec
    from srifty_kit.tables.files import write_json, write_table

    out = Path(os.environ.get("OUT") or REPO / "reports" / "cuda_check")
    out.mkdir(parents=True, exist_ok=True)
    summary: dict = {"fingerprint": host.fingerprint("cuda"), "models": {}, "failures": []}
    tables = []
    for name in ("mlp", "cnn", "transformer"):
        start = time.perf_counter()
        try:
            r = profile_spec(
                name,
                BATCHES,
                device="cuda",
                max_seconds=SECONDS,
                memory_budget_bytes=BUDGET,
                progress=False,
            )
        except Exception:  # keep going: the other models still tell something
            summary["failures"].append(f"profile {name}: {traceback.format_exc(limit=3)}")
            continue
        tables.append(r.measurements)
        summary["models"][name] = {
            **{k: v for k, v in r.facts.items() if not isinstance(v, dict)},
            "errors": {str(k): v for k, v in r.errors.items()},
            "summary": r.summary_records(),
            "check_wall_s": time.perf_counter() - start,
        }
        print(
            f"{name}: max batch {r.facts.get('max_batch_size')} "
            f"({r.facts.get('max_batch_method')}), {r.facts.get('max_batch_trials')} trials"
        )
        print(
            r.summary[
                ["local_bsz", "n", "mean", "precision", "peak_memory_bytes", "stop_reason"]
            ].to_string(index=False)
        )
        if r.facts.get("max_batch_method") != "bisection on CUDA out-of-memory":
            summary["failures"].append(f"profile {name}: no bisection ({r.facts})")
    if tables:
        write_table(pd.concat(tables, ignore_index=True), out / "profile.csv")
    try:
        dist = profile_distributed(
            "mlp",
            [1],
            [64],
            backend="nccl",
            device="cuda",
            max_seconds=SECONDS,
            sizes_bytes=DEFAULT_SIZES,
            timeout_s=120,
            progress=False,
            out=out / "dist.csv",
            collectives_out=out / "allreduce.csv",
        )
        coll = dist.collectives
        summary["nccl"] = {
            "ddp_steps": len(dist.measurements),
            "ddp_mean_step_s": float(dist.measurements["step_time_s"].mean()),
            "allreduce_samples": len(coll),
            "allreduce_median_s": coll.groupby("bytes")["seconds"]
            .median()
            .rename(index=str)
            .to_dict(),
        }
        print(f"nccl: {len(dist.measurements)} DDP steps, {len(coll)} all-reduce samples")
    except Exception:
        summary["failures"].append(f"nccl: {traceback.format_exc(limit=3)}")
    write_json(summary, out / "summary.json")
    for failure in summary["failures"]:
        print(f"FAILED {failure}", file=sys.stderr)
    print(f"cuda_check: wrote {out}; {len(summary['failures'])} failures")
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
