"""Profiler overhead, and steps needed for a precision, against torch.utils.benchmark.

Ours: ``srifty_kit.measure.profile.profile_model`` on each demo model at one batch size, at targets
2% and 0.5% (95% confidence interval of the mean within that fraction): the fixed costs of a
call weigh on a run of a fraction of a second and are amortised by a longer one. Reported:
its whole wall time against the time spent inside the measured steps (goal: overhead at most
10%), the same for the timing loop alone (warm-up, FLOP count, noise scale and memory probe
left out), and the steps it took.

Contender: ``torch.utils.benchmark.Timer(...).blocked_autorange`` timing the same training
step of the same model in the same process (same thread count). It has no precision target,
so it is shown with min_run_time 0.2 s (its default) and with the shortest min_run_time
(0.2 s doubled, up to 25.6 s) whose block means give a t interval within the same +-2%; its
steps are blocks x steps per block, its warm-up and block-size probe are in its wall time.
Both tools get at most 25.6 s of measuring per model.

Run from the repository root:  .venv/bin/python benchmarks/profile_overhead.py
Writes reports/benchmarks/profile_overhead.md. On a machine shared with other jobs the step
times are noisy (the load average is printed): the numbers are for comparison within a run.
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pandas as pd
import torch
import torch.utils.benchmark as tb
from common import markdown_table, write_report

from srifty_kit.measure.profile import profile_spec
from srifty_kit.measure.variance import precision
from srifty_kit.measure.zoo import load_spec

TARGETS = (0.02, 0.005)
REPEATS = 3
MAX_SECONDS = 25.6  # budget of either tool per model (blocked_autorange: 0.2 s doubled 7 times)
BATCH = 16
MODELS = ("mlp", "cnn", "transformer")


def _ours(name: str, target: float) -> dict:
    start = time.perf_counter()
    r = profile_spec(
        name, [BATCH], target_precision=target, max_seconds=MAX_SECONDS, progress=False
    )
    wall = time.perf_counter() - start
    s = r.summary.iloc[0]
    inside = float(r.measurements["step_time_s"].sum())
    noise = r.facts["phase_seconds"]["noise_scale"]  # a measurement of its own, not overhead
    return {
        "target": target,
        "model": name,
        "tool": "srifty profile_model",
        "steps": int(s["n"]),
        "wall_s": wall,
        "in_steps_s": inside,
        "overhead": 1 - inside / wall,
        "overhead_wo_noise": 1 - inside / (wall - noise),
        "noise_scale_s": noise,
        "loop_overhead": 1 - inside / float(s["wall_s"]),
        "precision": float(s["precision"]),
        "mean_step_ms": 1e3 * float(s["mean"]),
    }


def _timer(name: str, target: float) -> list[dict]:
    """Its default run, and the shortest doubling of min_run_time that reaches the target."""
    spec = load_spec(name)
    model, opt = spec.model, spec.optimizer_fn(spec.model.parameters())
    x, y = spec.make_batch(BATCH)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        spec.loss_fn(model(x), y).backward()
        opt.step()

    timer = tb.Timer("step()", globals={"step": step}, num_threads=torch.get_num_threads())
    rows, run_time = [], 0.2
    while True:
        start = time.perf_counter()
        m = timer.blocked_autorange(min_run_time=run_time)
        wall = time.perf_counter() - start
        steps = m.number_per_run * len(m.times)
        inside = steps * m.mean
        row = {
            "target": target,
            "model": name,
            "steps": steps,
            "wall_s": wall,
            "in_steps_s": inside,
            "overhead": 1 - inside / wall,
            "overhead_wo_noise": 1 - inside / wall,
            "noise_scale_s": float("nan"),
            "loop_overhead": float("nan"),
            "precision": precision(m.times),
            "mean_step_ms": 1e3 * m.mean,
            "min_run_time": run_time,
        }
        if run_time == 0.2:
            rows.append({**row, "tool": "blocked_autorange, default 0.2 s"})
        if row["precision"] <= target or run_time >= MAX_SECONDS:
            return [*rows, {**row, "tool": "blocked_autorange, shortest run to target"}]
        run_time *= 2


def _fmt(values: pd.Series, spec: str) -> pd.Series:
    return values.map(lambda v: "-" if pd.isna(v) else spec.format(v))


def main() -> int:
    """Run both tools on every demo model; print and write the side-by-side table."""
    # first-call costs (torch.optim's and flop_counter's imports) are paid before either runs
    profile_spec("mlp", [2], max_seconds=1, progress=False)
    rows = []
    for rep in range(REPEATS):
        for target in TARGETS:
            for name in MODELS:
                rows += [{**r, "rep": rep} for r in (_ours(name, target), *_timer(name, target))]
    runs = pd.DataFrame(rows)
    # per model and tool, the round with the median wall time (its numbers belong together)
    pick = runs.groupby(["target", "model", "tool"], sort=False)["wall_s"].transform(
        lambda w: w.index == (w - w.median()).abs().idxmin()
    )
    table = runs[pick.astype(bool)].copy()
    order = {t: i for i, t in enumerate(runs["tool"].unique())}
    ranks = {
        "tool": order,
        "model": {m: i for i, m in enumerate(MODELS)},
        "target": {t: i for i, t in enumerate(TARGETS)},
    }
    table = table.sort_values(["target", "model", "tool"], key=lambda c: c.map(ranks[c.name]))
    table = table.reset_index(drop=True)
    ours = table[table["tool"] == "srifty profile_model"].set_index(["target", "model"])
    key = pd.MultiIndex.from_frame(table[["target", "model"]])
    table["steps_vs_ours"] = table["steps"].to_numpy() / ours["steps"].reindex(key).to_numpy()
    table["wall_vs_ours"] = table["wall_s"].to_numpy() / ours["wall_s"].reindex(key).to_numpy()
    shown = table.drop(columns="rep").copy()
    for col in ("target", "overhead", "overhead_wo_noise", "loop_overhead", "precision"):
        shown[col] = _fmt(table[col], "{:.1%}")
    for col, spec in (
        ("wall_s", "{:.2f}"),
        ("in_steps_s", "{:.2f}"),
        ("noise_scale_s", "{:.2f}"),
        ("mean_step_ms", "{:.3f}"),
        ("min_run_time", "{:g}"),
        ("steps", "{:.0f}"),
        ("steps_vs_ours", "{:.2f}"),
        ("wall_vs_ours", "{:.2f}"),
    ):
        shown[col] = _fmt(table[col], spec)
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    text = (
        "# Profiler overhead and steps to a precision\n\n"
        f"Batch size {BATCH}, targets: 95% CI of the mean within "
        + " and ".join(f"+-{t:.1%}" for t in TARGETS)
        + "; of "
        f"{REPEATS} rounds, the one with the median wall time per model and tool. "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"load average {load} (a machine shared with other jobs: step times are noisy).\n\n"
        "`overhead` = 1 - time inside measured steps / wall time of the whole call (ours: "
        "warm-up, FLOP count, gradient noise scale and memory probe included); "
        "`overhead_wo_noise`: the same without the noise-scale measurement (`noise_scale_s`, "
        "a measurement of its own); `loop_overhead`: the timing loop alone. "
        "blocked_autorange's precision is the t interval over its block means.\n\n"
        + markdown_table(shown)
        + "\n"
    )
    print(text)
    write_report("profile_overhead", text)
    print(f"median_loop_overhead: {np.median(ours['loop_overhead']):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
