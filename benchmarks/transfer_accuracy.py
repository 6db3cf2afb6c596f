"""Carrying a model to hardware never measured, checked against real runs.

``srifty_kit.model.transfer`` predicts an instance type nobody measured from measurements on
another machine plus catalog figures, with intervals that are meant to be wide and honest
before the type is measured and to narrow as its measurements arrive. Two checks on the
reference traces (../shared/reference/measurements):

Across GPUs (``cross_gpu``): the one-GPU steps of six models on five accelerators (T4
g4dn.12xlarge, V100 Azure ND40rs_v2, A100 DGX, Quadro RTX 6000, RTX 2080 Ti; non-EC2 figures
from the vendors' datasheets in benchmarks/gpu_catalog.csv). Every source -> target pair:
fit on the source's steps, predict the target's cold, then after one measured step (each
model's smallest batch) and two (smallest and largest), beside the fp32-peak and
memory-bandwidth ratio rules; MAPE and 90% coverage per pair. The device-curve shape is
learned for each target from the other four accelerators only (leave-one-GPU-out).

From a CPU profile taken here to g4dn.12xlarge:

  1. profile four of the traced training models here, on this machine's CPU, with
     srifty_kit's profiler (the shapes rebuilt in ``trace_models``; random weights and data);
  2. fit a StepTimeModel on those CPU profiles only and predict every traced g4dn.12xlarge
     configuration of those models: 1 GPU, 2-4 GPUs on one node (PCIe), 2-4 nodes (network);
  3. add the measured 1-GPU steps at the two smallest batch sizes of each model (2 of its
     hundreds of configurations) and predict again: the carried belief is updated by them.

For each model and regime: MAPE of the step time, the share of measured steps inside the 90%
interval, and the interval's median width over the step. Baseline in the same run: the naive
carry, FLOPs per sample x batch / the T4's fp32 peak (what a FLOP count alone says). Writes
reports/benchmarks/transfer_accuracy.md. Takes a few minutes on 2 cores (BERT-base on a CPU);
``--cross-gpu-only`` refreshes the cross-GPU section alone, in under a minute, and keeps the
CPU section of the existing report (CPU profiles measure this machine's load as much as the
model: on a busy shared machine a full run says more about its neighbours).

Run it (from the repository root): .venv/bin/python benchmarks/transfer_accuracy.py
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from common import (
    REPORTS,
    markdown_table,
    one_worker_per_node,
    reference_measurements,
    write_report,
)
from trace_models import TRACE_MODELS

from srifty_kit import StepTimeModel, load_catalog
from srifty_kit.measure.profile import profile_model
from srifty_kit.model.device_curve import DEFAULT_SHAPE, DeviceShape, learn_shape, measured_compute
from srifty_kit.model.figures import kept_rows, speeds
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


# -- cross-GPU: one accelerator's single-GPU steps carried to another, against real runs -------
GPU_FILES = (  # the reference files whose one-GPU rows are carried between accelerators
    "aws_g4dn12xlarge_placements.csv",
    "sia_azure_nd40rsv2.csv",
    "sia_dgxa100_placements.csv",
    "sia_quadrtx6000_placements.csv",
    "sia_rtx2080ti.csv",
)
GPU_NAMES = {
    "g4dn.12xlarge": "T4",
    "azure-ND40rs_v2": "V100",
    "onprem-dgx-a100": "A100",
    "onprem-4xrtx6000": "RTX 6000",
    "onprem-8xrtx2080ti": "RTX 2080 Ti",
}
GPU_CATALOG = Path(__file__).with_name("gpu_catalog.csv")
_STEP_COLUMNS = ("model", "instance_type", "gpus_per_node", "num_nodes", "num_workers")
# the targets, as fractions
TARGETS = {"cold": 0.15, "1 step": 0.10, "cover": (0.85, 0.95)}
RULES = {"fp32 peak": "gpu_fp32_tflops", "memory bw": "gpu_mem_bw_gbps"}
DS2_BATCH = 40  # a batch every accelerator measured deepspeech2 at
TITLE = "# Carrying a model to hardware never measured, against real runs\n\n"
CPU_HEADING = "\n## Carrying a CPU profile taken here to EC2 g4dn.12xlarge\n\n"
_CPU_START = "Profiled here:"  # where the CPU section's text begins, in every report so far


def kept_cpu_section(path: Path) -> str | None:
    """The CPU section of an existing report (this layout or the one before the cross-GPU
    section), headed as this script heads it and marked as kept, or None."""
    if not path.is_file() or _CPU_START not in path.read_text():
        return None
    text = path.read_text()
    body = text[text.index(_CPU_START) :].replace("\n## What this shows", "\n### What this shows")
    body = body.replace("`hardware.", "`transfer.")  # the module's name since the layout change
    if "kept from the last full run" not in body:
        body = (
            "*(kept from the last full run: `--cross-gpu-only` refreshed the section above "
            "only; the paths this section exercises, the FLOP route and its update, are the "
            "same code as then.)*\n\n" + body
        )
    return CPU_HEADING + body


def one_gpu_rows(folder: Path) -> pd.DataFrame:
    """The one-worker steps of the five accelerators (measurement columns only)."""
    tables = [pd.read_csv(folder / name) for name in GPU_FILES]
    rows = pd.concat(tables, ignore_index=True)
    rows = rows[rows["num_workers"] == 1]
    return rows[[*_STEP_COLUMNS, "local_bsz", "step_time_s"]].reset_index(drop=True)


def gpu_catalog() -> pd.DataFrame:
    """benchmarks/gpu_catalog.csv (vendors' datasheets) plus the embedded g4dn.12xlarge row.

    Read as a plain table: the contract wants vcpus and memory for every row, and the Sia
    artifact does not say them for its two on-premises nodes; the transfer reads only the
    GPU figures, which the file has for every row.
    """
    embedded = load_catalog()
    t4 = embedded[embedded["instance_type"] == "g4dn.12xlarge"]
    return pd.concat([pd.read_csv(GPU_CATALOG), t4], ignore_index=True)


def held_out_shape(rows: pd.DataFrame, catalog: pd.DataFrame, target: str) -> DeviceShape:
    """The device-curve shape learned from every accelerator but ``target``."""
    others = rows[rows["instance_type"] != target]
    compute = measured_compute(others).assign(
        model=others["model"].to_numpy(), instance_type=others["instance_type"].to_numpy()
    )
    return learn_shape(compute, speeds(kept_rows(catalog, others["instance_type"].unique())))


def _ends(rows: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Per row: is it its model's smallest batch, its largest."""
    by = rows.groupby("model")["local_bsz"]
    return rows["local_bsz"] == by.transform("min"), rows["local_bsz"] == by.transform("max")


def carry_pair(
    rows: pd.DataFrame, catalog: pd.DataFrame, shape: DeviceShape, source: str, target: str
) -> pd.DataFrame:
    """One source -> target pair: cold, after one and two measured steps, and the ratio rules.

    The measured steps are each model's smallest batch on the target (one step), and its
    smallest and largest (two); every column is scored on the target's other batches.
    """
    src = rows[rows["instance_type"] == source]
    dst = rows[rows["instance_type"] == target].reset_index(drop=True)
    smallest, largest = _ends(dst)
    scored = dst[~smallest & ~largest].reset_index(drop=True)
    configs = scored.drop(columns="step_time_s")
    out = scored[["model", "local_bsz", "step_time_s"]].assign(source=source, target=target)
    seen = {"cold": dst.iloc[:0], "1 step": dst[smallest], "2 steps": dst[smallest | largest]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # one-worker rows fix every sync term: expected
        for label, steps in seen.items():
            model = StepTimeModel().fit(
                pd.concat([src, steps], ignore_index=True), catalog, device_shape=shape
            )
            pred = model.predict(configs, catalog=catalog)
            for column in ("step_time_s", "step_time_lo", "step_time_hi"):
                out[f"{label} {column}"] = pred[column].to_numpy()
            if label == "cold":  # the source's own fitted step, for the rules of thumb
                own = model.predict(configs.assign(instance_type=source))["step_time_s"]
    figures = catalog.drop_duplicates("instance_type").set_index("instance_type")
    for rule, column in RULES.items():
        ratio = figures.at[source, column] / figures.at[target, column]
        out[f"{rule} step_time_s"] = own.to_numpy() * ratio
    return out


def _score(frame: pd.DataFrame, label: str) -> dict[str, float]:
    y = frame["step_time_s"].to_numpy()
    pred = frame[f"{label} step_time_s"].to_numpy()
    out = {"mape": float(np.mean(np.abs(pred / y - 1)))}
    if f"{label} step_time_lo" in frame:
        lo, hi = frame[f"{label} step_time_lo"], frame[f"{label} step_time_hi"]
        out["cover"] = float(np.mean((lo.to_numpy() <= y) & (y <= hi.to_numpy())))
        out["width"] = float(np.median(np.log(hi / lo)))
    return out


LABELS = ("cold", "1 step", "2 steps", *RULES)


def scores(results: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """MAPE of every column, coverage of ours, per group of ``by``."""
    rows = []
    for key, frame in results.groupby(by, sort=False):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        for label in LABELS:
            for name, value in _score(frame, label).items():
                row[f"{label} {name}"] = value
        row["steps"] = len(frame)
        rows.append(row)
    return pd.DataFrame(rows)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def pair_misses(row: pd.Series) -> list[str]:
    """Which of the issue's targets one pair misses, in words."""
    lo, hi = TARGETS["cover"]
    missed = []
    if row["cold mape"] > TARGETS["cold"]:
        missed.append(f"cold {_pct(row['cold mape'])} > 15%")
    if row["1 step mape"] > TARGETS["1 step"]:
        missed.append(f"1 step {_pct(row['1 step mape'])} > 10%")
    if not lo <= row["cold cover"] <= hi:
        missed.append(f"cold cov90 {_pct(row['cold cover'])}")
    if not lo <= row["1 step cover"] <= hi:
        missed.append(f"1-step cov90 {_pct(row['1 step cover'])}")
    for rule in RULES:
        if row["cold mape"] >= row[f"{rule} mape"]:
            missed.append(f"cold not better than the {rule} rule ({_pct(row[f'{rule} mape'])})")
    return missed


def worst_models(results: pd.DataFrame, source: str, target: str, label: str) -> str:
    """The two models with the largest error on a pair, with their MAPE."""
    pair = results[(results["source"] == source) & (results["target"] == target)]
    per = pair.groupby("model").apply(
        lambda f: float(np.mean(np.abs(f[f"{label} step_time_s"] / f["step_time_s"] - 1))),
        include_groups=False,
    )
    top = per.sort_values(ascending=False).head(2)
    return ", ".join(f"{m} {_pct(v)}" for m, v in top.items())


def cross_gpu(folder: Path) -> tuple[str, pd.DataFrame]:
    """Every source -> target pair of the five accelerators; (markdown, per-pair table)."""
    rows = one_gpu_rows(folder)
    catalog = gpu_catalog()
    types = list(GPU_NAMES)
    shapes = {t: held_out_shape(rows, catalog, t) for t in types}
    results = pd.concat(
        [
            carry_pair(rows, catalog, shapes[target], source, target)
            for target in types
            for source in types
            if source != target
        ],
        ignore_index=True,
    )
    results["pair"] = results["source"].map(GPU_NAMES) + " -> " + results["target"].map(GPU_NAMES)
    pairs = scores(results, ["source", "target", "pair"])
    models = scores(results, ["model"])
    return render_cross_gpu(rows, catalog, shapes, results, pairs, models), pairs


def _shape_row(target: str, shape: DeviceShape) -> dict[str, str]:
    return {
        "held out": GPU_NAMES.get(target, target),
        "p": f"{shape.sharpness:g}",
        "w": f"{shape.bandwidth_weight:g}",
        "phi": f"{shape.floor_exponent:g}",
        "floor sd": f"{shape.host_sd:.2f}",
        "per-sample sd": f"{shape.compute_sd:.2f}",
        "step sd": f"{shape.noise_sd:.3f}",
    }


def _mean_row(pairs: pd.DataFrame, label: str) -> dict[str, str]:
    """A bold table row of the means of ``pairs``."""
    row = {"pair": f"**{label}**", "steps": str(int(pairs["steps"].sum()))}
    row.update({f"{lb} MAPE": _pct(pairs[f"{lb} mape"].mean()) for lb in LABELS})
    row.update({f"{lb} cov90": _pct(pairs[f"{lb} cover"].mean()) for lb in LABELS[:3]})
    return row


def _table(frame: pd.DataFrame, key: str) -> pd.DataFrame:
    """MAPE of every column and coverage of ours, as printed percentages."""
    shown = pd.DataFrame({key: frame[key], "steps": frame["steps"].astype(str)})
    for label in LABELS:
        shown[f"{label} MAPE"] = frame[f"{label} mape"].map(_pct)
    for label in LABELS[:3]:
        shown[f"{label} cov90"] = frame[f"{label} cover"].map(_pct)
    return shown


def _span_pct(results: pd.DataFrame, model: str, source=None, target=None) -> str:
    """'a%-b%': the range of one model's cold MAPE over the pairs from ``source`` or to
    ``target``."""
    pick = results["model"] == model
    pick &= (results["source"] == source) if source else (results["target"] == target)
    ape = (results["cold step_time_s"] / results["step_time_s"] - 1).abs()
    per = ape[pick].groupby([results["source"], results["target"]]).mean()
    return f"{_pct(per.min())}-{_pct(per.max())}"


def _drops(curve: pd.DataFrame) -> int:
    """How often a larger batch of one curve ran more than 10% faster than the next smaller."""
    t = curve.sort_values("local_bsz")["step_time_s"].to_numpy()
    return int((t[1:] < t[:-1] / 1.1).sum())


def curve_facts(rows: pd.DataFrame) -> pd.DataFrame:
    """Per accelerator, what its own steps say: ncf's median step (its host floor), how many
    of its six curves stay within 1.5x of their smallest step over the batches measured, and
    how often a larger batch ran more than 10% faster than the next smaller one."""
    facts = {}
    for itype, own in rows.groupby("instance_type"):
        flat, drops, neighbours = 0, 0, 0
        for _, curve in own.groupby("model"):
            t = curve.sort_values("local_bsz")["step_time_s"].to_numpy()
            flat += int(t.max() < 1.5 * t[0])
            drops += _drops(curve)
            neighbours += t.size - 1
        ncf = own.loc[own["model"] == "ncf", "step_time_s"].median()
        facts[GPU_NAMES[itype]] = {
            "ncf median step": f"{1e3 * ncf:.0f} ms",
            "curves within 1.5x of their smallest step": f"{flat} of {own['model'].nunique()}",
            "larger batch >10% faster": f"{drops} of {neighbours}",
        }
    return pd.DataFrame(facts).T.rename_axis("accelerator").reset_index()


def render_cross_gpu(rows, catalog, shapes, results, pairs, models) -> str:
    """The cross-GPU section of the report, every figure in it computed here."""
    means = {c: pairs[c].mean() for c in pairs.columns if c.endswith(("mape", "cover"))}
    v100 = (pairs["source"] == "azure-ND40rs_v2") | (pairs["target"] == "azure-ND40rs_v2")
    shown = pd.concat(
        [
            _table(pairs, "pair"),
            pd.DataFrame([_mean_row(pairs, "mean over pairs")]),
            pd.DataFrame([_mean_row(pairs[~v100], "mean without the V100's 8 pairs")]),
        ],
        ignore_index=True,
    )
    shape_table = pd.DataFrame(
        [_shape_row(t, shapes[t]) for t in GPU_NAMES]
        + [_shape_row("none (default)", DEFAULT_SHAPE)]
    )
    misses = []
    for _, row in pairs.iterrows():
        missed = pair_misses(row)
        if missed:
            worst = worst_models(results, row["source"], row["target"], "cold")
            after = worst_models(results, row["source"], row["target"], "1 step")
            misses.append(
                f"- {row['pair']}: {'; '.join(missed)}. Largest cold errors: {worst}; "
                f"after one step: {after}."
            )
    both = int(
        (
            (pairs["cold mape"] < pairs["fp32 peak mape"])
            & (pairs["cold mape"] < pairs["memory bw mape"])
        ).sum()
    )
    worse = int((pairs["1 step mape"] > pairs["cold mape"]).sum())
    rest = pairs[~v100]
    ds2 = (
        rows[(rows["model"] == "deepspeech2") & (rows["local_bsz"] == DS2_BATCH)]
        .set_index("instance_type")["step_time_s"]
        .mul(1e3)
    )
    bw = catalog.drop_duplicates("instance_type").set_index("instance_type")["gpu_mem_bw_gbps"]
    t4 = rows[(rows["instance_type"] == "g4dn.12xlarge") & (rows["model"] == "bert")]
    t4_bert = (int(t4["local_bsz"].min()), int(t4["local_bsz"].max()))
    bert = results[
        (results["source"] == "g4dn.12xlarge")
        & (results["target"] == "onprem-dgx-a100")
        & (results["model"] == "bert")
    ]
    bert_pred, bert_meas = bert["cold step_time_s"].median(), bert["step_time_s"].median()
    drops_by_model = {
        m: sum(_drops(c) for _, c in own.groupby("instance_type"))
        for m, own in rows.groupby("model")
    }
    ncf = rows[rows["model"] == "ncf"].sort_values("local_bsz").groupby("instance_type")
    growth = 1e3 * (ncf["step_time_s"].last() - ncf["step_time_s"].first())
    v100_growth = growth["azure-ND40rs_v2"]
    others = growth.drop("azure-ND40rs_v2")
    other_growth = (others.min(), others.max())
    ds2_from = _span_pct(results, "deepspeech2", source="onprem-dgx-a100")
    ds2_to = _span_pct(results, "deepspeech2", target="onprem-dgx-a100")
    into = pairs[pairs["target"] == "onprem-8xrtx2080ti"]["2 steps mape"]
    rtx_lo, rtx_hi = _pct(into.min()), _pct(into.max())
    return (
        "## Carrying one GPU's measured steps to another GPU\n\n"
        "The one-worker steps of six training models measured on five accelerators "
        "(`../shared/reference/measurements/`: T4 in g4dn.12xlarge, V100 in Azure ND40rs_v2, "
        "A100 in a DGX, Quadro RTX 6000, RTX 2080 Ti; figures of the non-EC2 GPUs from the "
        "vendors' datasheets in `benchmarks/gpu_catalog.csv`, cited there). For every "
        "source -> target pair a StepTimeModel is fitted on the source's steps alone and "
        "predicts the target's (*cold*); then fitted again with each model's smallest batch on "
        "the target (*1 step*), and its smallest and largest (*2 steps*), which update the "
        "carried belief. Every column is scored on the same steps: the target's batches other "
        "than each model's smallest and largest. Rules of thumb in the same run: the source's "
        "fitted step at that batch times the fp32-peak ratio, or the memory-bandwidth ratio. "
        "MAPE pools the pair's steps; cov90 is the share inside the 90% interval.\n\n"
        "**Held out means held out.** The device-curve shape and its spreads "
        "(`device_curve.learn_shape`: p, w and the floor, per-sample and step spreads) are "
        "learned for each target from the other four accelerators' steps only "
        "(leave-one-GPU-out: the source's steps are among them, the target's never); the "
        "table below says which. The packaged default, `device_curve.DEFAULT_SHAPE`, was "
        "learned from all five and is not used here. One choice was made after looking: "
        "phi, the exponent with which the floor would move with speed, was first learned too "
        "and picked phi = 1 when the T4 was held out (doubling its carried floors); it is now "
        "held at 0 for every target on the physical argument in `device_curve.FLOOR_GRID`, "
        "so the T4 column is not a clean hold-out for that one decision.\n\n"
        + markdown_table(shown)
        + "\n\nTargets (issue 14): mean cold MAPE <= 15%, after one step <= 10%, cov90 85-95%, "
        f"better than both rules on every pair. Means over the {len(pairs)} pairs: cold "
        f"{_pct(means['cold mape'])}, one step {_pct(means['1 step mape'])}, two steps "
        f"{_pct(means['2 steps mape'])}; cov90 {_pct(means['cold cover'])} / "
        f"{_pct(means['1 step cover'])} / {_pct(means['2 steps cover'])}; fp32-peak rule "
        f"{_pct(means['fp32 peak mape'])}, bandwidth rule {_pct(means['memory bw mape'])}. "
        f"Without the pairs that involve the V100: cold {_pct(rest['cold mape'].mean())}, one "
        f"step {_pct(rest['1 step mape'].mean())}, two steps "
        f"{_pct(rest['2 steps mape'].mean())}. Cold beats both rules on {both} of {len(pairs)} "
        f"pairs; one measured step made a pair's MAPE worse than cold on {worse}.\n\n"
        "### By training model, over all pairs\n\n"
        + markdown_table(_table(models, "model"))
        + "\n\n### The shape each target was scored with (learned without it)\n\n"
        "p: the knee's sharpness; w: speed = fp32 peak^(1-w) x bandwidth^w; phi: the floor "
        "moves as speed^phi (held at 0); floor / per-sample sd: log-sd of the carried factors, "
        "scaled to cover 90% of the held-in accelerators' carried steps cold; step sd: one "
        "step's misfit, widened until one measured step leaves 90% of their other batches "
        "covered.\n\n"
        + markdown_table(shape_table)
        + f"\n\n### Pairs that miss a target ({len(misses)} of {len(pairs)})\n\n"
        + ("\n".join(misses) if misses else "None.")
        + "\n\n### Why\n\n"
        "What each accelerator's own steps say (no model involved):\n\n"
        + markdown_table(curve_facts(rows))
        + "\n\n- *A machine's host floor is not in its catalog figures.* ncf (NeuMF) is "
        "host-bound on every GPU, and the Azure ND40rs_v2 pays about ten times what the other "
        "machines pay per step (table above); no GPU figure says so. Every pair into or out "
        "of the V100 misses cold by a wide margin, and the floor spread learned with the V100 "
        "among the held-in accelerators is wide because of it, which keeps those cold "
        "intervals honest and makes them too wide elsewhere (cov90 of 100%). One measured "
        "step on the floor fixes the floor, not the slope: on the V100 ncf's step grows "
        f"by {v100_growth:.0f} ms from its smallest batch to its largest, on the others by "
        f"{other_growth[0]:.0f}-{other_growth[1]:.0f} ms: work no figure of the V100 accounts "
        "for; two steps fix it.\n"
        f"- *An accelerator's efficiency on one model is not in its figures either.* "
        f"deepspeech2's one-GPU step at batch {DS2_BATCH}: "
        + ", ".join(f"{GPU_NAMES[t]} {v:.0f} ms" for t, v in ds2.items())
        + " (memory bandwidth "
        + ", ".join(f"{GPU_NAMES[t]} {bw[t]:.0f}" for t in ds2.index)
        + " GB/s): the A100 runs it slower than the V100 and both Turing cards. Cold, "
        f"deepspeech2 is {ds2_from} off in the carries from the A100 and {ds2_to} in those "
        "to it; one step on the floor cannot see a per-sample factor.\n"
        "- *Curves that hardly leave their floor* (3 of the A100's 6 stay within 1.5x over "
        "the batches measured, table above) leave a slope carried from them resting on "
        "little; the source fit's own uncertainty is added to the belief.\n"
        f"- *A source measured only past its knee leaves the floor to extrapolation.* bert "
        f"on the T4 was measured at batches {t4_bert[0]}-{t4_bert[1]}, where its step is "
        f"nearly proportional to the batch; carried to the A100 it predicts a median "
        f"{1e3 * bert_pred:.0f} ms where the A100 measured {1e3 * bert_meas:.0f} ms.\n"
        "- *Noisy, non-monotone traces* (a larger batch more than 10% faster than the next "
        "smaller one: counted per accelerator above; by model "
        + ", ".join(f"{m} {c}" for m, c in drops_by_model.items())
        + ") bound what a smooth curve can do after an update: the pairs into the RTX 2080 Ti "
        f"stay at {rtx_lo}-{rtx_hi} after two steps.\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Carry between the five reference GPUs; profile here (REPEATS times), carry to
    g4dn.12xlarge; compare both with the real runs and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--cross-gpu-only",
        action="store_true",
        help="refresh the cross-GPU section only (no CPU profiling): the report keeps the "
        "CPU section of its last full run",
    )
    args = parser.parse_args(argv)
    data = reference_measurements()
    if not data.is_file():
        print(
            f"transfer_accuracy: reference measurements not found at {data}; set SRIFTY_SHARED",
            file=sys.stderr,
        )
        return 2
    cross_text, pairs = cross_gpu(data.parent)
    print(cross_text)
    if args.cross_gpu_only:
        kept = kept_cpu_section(REPORTS / "transfer_accuracy.md")
        write_report("transfer_accuracy", TITLE + cross_text + (kept or ""))
        return 0
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
        "\n\n### What this shows\n\n"
        "- *Before the type is measured*, the carried steps of the three compute-heavy models "
        "land nearer than the FLOP count alone, inside intervals a few times the step wide; "
        "that is the honest-but-wide state the transfer is meant to be in.\n"
        "- *ncf is host-bound on the GPU*: its measured 1-GPU step stays within "
        f"{1e3 * flat['step_time_s'].min():.1f}-{1e3 * flat['step_time_s'].max():.1f} ms at "
        f"every batch from {flat['local_bsz'].min()} to {flat['local_bsz'].max()}. The "
        "carried host floor comes from the CPU profile's "
        "intercept (`transfer.HOST_FLOPS`: median 1, a factor 2.5 at one sd), which is far "
        "below the GPU's per-step cost of launching NeuMF's many small kernels, so the carried "
        "interval misses it. One measured step fixes most of that (the updated column).\n"
        "- *After two measured steps the intervals are too sure where the structure is "
        "wrong*: imagenet's time per sample on the T4 falls from "
        f"{m0:.1f} ms at batch {b0} to {m1:.1f} ms at batch {b1} (the GPU fills up), while the "
        "carried device line is linear in the batch. Two steps at the smallest batches pin "
        "that line, and the update's only allowance for misfit is `transfer.STEP_NOISE`, so "
        "the larger batches fall outside.\n"
    )
    text = (
        TITLE
        + cross_text
        + CPU_HEADING
        + f"Profiled here: {', '.join(f'{m} ({v:.3g} GFLOP/sample)' for m, v in flops.items())} "
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
        "at one sd (`transfer.NETWORK_EFFICIENCY`), so where the update has narrowed compute "
        "and host the 2-4-node intervals rest on that belief, and these traces lie in its "
        "tail. It is left as stated rather than re-set from the rows that score it.\n" + findings
    )
    write_report("transfer_accuracy", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
