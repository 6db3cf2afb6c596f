"""Carrying a profile taken here (CPU) to EC2 g4dn.12xlarge, checked against real runs.

``srifty_kit.model.transfer`` predicts an instance type nobody measured from a profile on another
machine plus catalog figures, with intervals that are meant to be wide and honest before the
type is measured and to narrow as its measurements arrive. This script checks both claims on
the reference traces (../shared/reference/measurements, real g4dn.12xlarge runs):

  1. profile four of the traced training models here, on this machine's CPU, with
     srifty_kit's profiler (the shapes rebuilt in ``trace_models``; random weights and data);
  2. fit a StepTimeModel on those CPU profiles only and predict every traced g4dn.12xlarge
     configuration of those models: 1 GPU, 2-4 GPUs on one node (PCIe), 2-4 nodes (network);
  3. add the measured 1-GPU steps at the two smallest batch sizes of each model (2 of its
     hundreds of configurations) and predict again: the carried belief is updated by them.

For each model and regime: MAPE of the step time, the share of measured steps inside the 90%
interval, and the interval's median width over the step. Baseline in the same run: the naive
carry, FLOPs per sample x batch / the T4's fp32 peak (what a FLOP count alone says). Writes
reports/benchmarks/transfer_accuracy.md. Takes a few minutes on 2 cores (BERT-base on a CPU).

Run it (from the repository root): .venv/bin/python benchmarks/transfer_accuracy.py
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pandas as pd
import torch
from common import markdown_table, one_worker_per_node, reference_measurements, write_report
from trace_models import TRACE_MODELS

from srifty_kit import StepTimeModel, load_catalog
from srifty_kit.measure.profile import profile_model
from srifty_kit.model.transfer import NETWORK_EFFICIENCY

TARGET = "g4dn.12xlarge"
LEVEL = 0.9
# batch sizes profiled here: two each, small enough for a CPU, far enough apart for a slope
PROFILE_BATCHES = {"cifar10": [8, 64], "imagenet": [2, 16], "bert": [1, 4], "ncf": [256, 4096]}
SECONDS = {"cifar10": 30, "imagenet": 60, "bert": 90, "ncf": 15}
REPEATS = 3  # the carried step rests on a CPU profile's intercept, which moves run to run


def profile_here() -> pd.DataFrame:
    """Every profiled step of the four models on this machine's CPU."""
    torch.set_num_threads(max(1, torch.get_num_threads()))
    tables = []
    for name, build in TRACE_MODELS.items():
        spec = build()
        result = profile_model(
            spec.model,
            spec.make_batch,
            spec.loss_fn,
            spec.optimizer_fn,
            PROFILE_BATCHES[name],
            device="cpu",
            target_precision=0.05,
            max_seconds=SECONDS[name],
            name=name,
            warmup=1,
            min_steps=3,
            progress=False,
        )
        print(
            f"profiled {name}: {len(result.measurements)} steps, "
            f"{result.flops_per_sample / 1e9:.3g} GFLOP per sample",
            file=sys.stderr,
        )
        tables.append(result.measurements)
    return pd.concat(tables, ignore_index=True)


def regime(rows: pd.DataFrame) -> pd.Series:
    """'1 GPU', '1 node, 2-4 GPUs' or '2-4 nodes' for each configuration."""
    one_node = np.where(rows["num_workers"] == 1, "1 GPU", "1 node, 2-4 GPUs")
    return pd.Series(np.where(rows["num_nodes"] > 1, "2-4 nodes", one_node), index=rows.index)


def seeds(traces: pd.DataFrame) -> pd.DataFrame:
    """The target-type rows the update gets: 1 GPU, each model's two smallest batch sizes."""
    one = traces[traces["num_workers"] == 1]
    smallest = one.groupby("model")["local_bsz"].transform(lambda b: b.isin(sorted(b)[:2]))
    return one[smallest]


def naive(traces: pd.DataFrame, profiles: pd.DataFrame, catalog: pd.DataFrame) -> np.ndarray:
    """FLOPs per sample x local batch / the target GPU's fp32 peak: the FLOP count alone."""
    flops = profiles.groupby("model")["flops_per_sample"].first()
    peak = float(catalog.set_index("instance_type").loc[TARGET, "gpu_fp32_tflops"]) * 1e12
    return (traces["model"].map(flops) * traces["local_bsz"] / peak).to_numpy()


def achieved_network(traces: pd.DataFrame, profiles: pd.DataFrame, model: str) -> float:
    """Median rate, in Gbit/s, that ``model``'s traced all-reduce reached with one worker per
    node: ring traffic 2(n-1)/n x gradient bytes (profiled here) over the measured sync time.
    The traces time the sync left exposed after overlap, so this is a floor on the rate."""
    one, ring = one_worker_per_node(traces[traces["model"] == model])
    grad = float(profiles.loc[profiles["model"] == model, "grad_bytes"].iloc[0])
    return float((ring * grad / one["sync_time_s"] * 8 / 1e9).median())


def score(traces: pd.DataFrame, pred: pd.DataFrame, label: str) -> pd.DataFrame:
    """MAPE, coverage and median relative width per model and regime."""
    y = traces["step_time_s"].to_numpy()
    frame = pd.DataFrame(
        {
            "model": traces["model"].to_numpy(),
            "regime": regime(traces).to_numpy(),
            "ape": np.abs(pred["step_time_s"].to_numpy() / y - 1),
            "inside": (y >= pred["step_time_lo"].to_numpy())
            & (y <= pred["step_time_hi"].to_numpy()),
            "width": (
                (pred["step_time_hi"] - pred["step_time_lo"]) / pred["step_time_s"]
            ).to_numpy(),
        }
    )
    out = frame.groupby(["model", "regime"]).agg(
        mape=("ape", "mean"),
        cover=("inside", "mean"),
        width=("width", "median"),
        n=("ape", "size"),
    )
    return out.add_prefix(f"{label} ")


def one_run(traces: pd.DataFrame, catalog: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Profile here once, carry, update; (scores per model and regime, the profiles)."""
    configs = traces.drop(columns=["step_time_s", "sync_time_s"])
    profiles = profile_here()
    seeded = seeds(traces)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a CPU profile fixes every network term: expected
        carried = StepTimeModel(level=LEVEL).fit(profiles)
        updated = StepTimeModel(level=LEVEL).fit(pd.concat([profiles, seeded], ignore_index=True))
    before, after = carried.predict(configs), updated.predict(configs)
    rest = ~traces.index.isin(seeded.index)
    flat = naive(traces, profiles, catalog)
    flat = pd.DataFrame({"step_time_s": flat, "step_time_lo": flat, "step_time_hi": flat})
    table = pd.concat(
        [
            score(traces, before, "carried"),
            score(traces[rest], after[rest], "updated"),
            score(traces, flat, "naive")[["naive mape"]],
        ],
        axis=1,
    )
    return table, profiles


def per_sample_ms(traces: pd.DataFrame, model: str) -> tuple[int, float, int, float]:
    """(smallest batch, ms per sample there, largest batch, ms per sample there) on 1 GPU."""
    one = traces[(traces["model"] == model) & (traces["num_workers"] == 1)]
    one = one.sort_values("local_bsz")
    ms = 1e3 * one["step_time_s"] / one["local_bsz"]
    return (
        int(one["local_bsz"].iloc[0]),
        float(ms.iloc[0]),
        int(one["local_bsz"].iloc[-1]),
        float(ms.iloc[-1]),
    )


def _cell(values: pd.Series) -> str:
    """'34%' for one run; 'median (min-max)' over several."""
    v = 100 * values.to_numpy()
    if v.size == 1 or np.ptp(v) < 0.5:
        return f"{np.median(v):.0f}%"
    return f"{np.median(v):.0f}% ({v.min():.0f}-{v.max():.0f})"


def main() -> int:
    """Profile here (REPEATS times), carry to g4dn.12xlarge, compare with the traces."""
    data = reference_measurements()
    if not data.is_file():
        print(
            f"transfer_accuracy: reference measurements not found at {data}; set SRIFTY_SHARED",
            file=sys.stderr,
        )
        return 2
    traces = pd.read_csv(data)
    traces = traces[traces["model"].isin(list(TRACE_MODELS))].reset_index(drop=True)
    catalog = load_catalog()
    runs = [one_run(traces, catalog) for _ in range(REPEATS)]
    profiles = runs[-1][1]
    both = pd.concat([t for t, _ in runs], keys=range(REPEATS), names=["run"])
    by = both.groupby(level=["model", "regime"])
    shown = by["carried n"].first().rename("configs").reset_index()
    for label in ("carried", "updated"):
        for col, name in (("mape", "MAPE"), ("cover", "cov90"), ("width", "90% width")):
            shown[f"{label} {name}"] = by[f"{label} {col}"].apply(_cell).to_numpy()
    shown["naive FLOPs/peak MAPE"] = by["naive mape"].apply(_cell).to_numpy()
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(shown.to_string(index=False))
    flops = profiles.groupby("model")["flops_per_sample"].first() / 1e9
    nic = float(catalog.set_index("instance_type").loc[TARGET, "network_gbps"])
    reached = achieved_network(traces, profiles, "bert")
    print(f"bert's traced all-reduce reached {reached:.2g} Gbit/s of the NIC's {nic:g}")
    b0, m0, b1, m1 = per_sample_ms(traces, "imagenet")
    ncf = traces[(traces["model"] == "ncf") & (traces["num_workers"] == 1)]
    flat = ncf[ncf["local_bsz"] <= 1024]  # the batches where its step does not move
    findings = (
        "\n\n## What this shows\n\n"
        "- *Before the type is measured*, the carried steps of the three compute-heavy models "
        "land nearer than the FLOP count alone, inside intervals a few times the step wide; "
        "that is the honest-but-wide state the transfer is meant to be in.\n"
        "- *ncf is host-bound on the GPU*: its measured 1-GPU step stays within "
        f"{1e3 * flat['step_time_s'].min():.1f}-{1e3 * flat['step_time_s'].max():.1f} ms at "
        f"every batch from {flat['local_bsz'].min()} to {flat['local_bsz'].max()}. The "
        "carried host floor comes from the CPU profile's "
        "intercept (`hardware.HOST_FLOPS`: median 1, a factor 2.5 at one sd), which is far "
        "below the GPU's per-step cost of launching NeuMF's many small kernels, so the carried "
        "interval misses it. One measured step fixes most of that (the updated column).\n"
        "- *After two measured steps the intervals are too sure where the structure is "
        "wrong*: imagenet's time per sample on the T4 falls from "
        f"{m0:.1f} ms at batch {b0} to {m1:.1f} ms at batch {b1} (the GPU fills up), while the "
        "carried device line is linear in the batch. Two steps at the smallest batches pin "
        "that line, and the update's only allowance for misfit is `hardware.STEP_NOISE`, so "
        "the larger batches fall outside.\n"
    )
    text = (
        "# Carrying a CPU profile to EC2 g4dn.12xlarge, against real runs\n\n"
        f"Profiled here: {', '.join(f'{m} ({v:.3g} GFLOP/sample)' for m, v in flops.items())} "
        "on this machine's CPU with srifty_kit's profiler (shapes from "
        "`benchmarks/trace_models.py`, random weights). *carried*: a StepTimeModel fitted on "
        "those CPU profiles alone, predicting every traced g4dn.12xlarge configuration of "
        "these models (`transfer.py`'s FLOP route, catalog figures, its stated beliefs). "
        "*updated*: the same plus the measured 1-GPU steps at each model's two smallest "
        "batch sizes, scored on the other configurations. *naive*: FLOPs x batch / the T4's "
        "fp32 peak. MAPE of the step time, cov90 the share of measured steps inside the 90% "
        f"interval, width its median (hi - lo) / step. The whole run was repeated {REPEATS} "
        "times (a fresh CPU profile each): median (min-max) where the runs differ. "
        "Generated by `benchmarks/transfer_accuracy.py`; accuracy figures, not timings.\n\n"
        + markdown_table(shown)
        + "\n\nThe network in the traces: bert's all-reduce (its gradients, as profiled here, "
        f"are {profiles.loc[profiles['model'] == 'bert', 'grad_bytes'].iloc[0] / 1e6:.0f} MB, "
        "so its sync is mostly exposed) reached a median "
        f"{reached:.2g} Gbit/s with one worker per node, {100 * reached / nic:.0f}% of the "
        f"NIC's {nic:g} Gbps. The carried belief's median is "
        f"{100 * NETWORK_EFFICIENCY[0]:.0f}% with a factor {np.exp(NETWORK_EFFICIENCY[1]):.0f} "
        "at one sd (`hardware.NETWORK_EFFICIENCY`), so where the update has narrowed compute "
        "and host the 2-4-node intervals rest on that belief, and these traces lie in its "
        "tail. It is left as stated rather than re-set from the rows that score it.\n" + findings
    )
    write_report("transfer_accuracy", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
