"""Hold-out accuracy of StepTimeModel against Pollux's, an Ernest-style and a linear model.

Fits each contender on the smaller clusters of the real EC2 g4dn.12xlarge measurements
(../shared/reference/measurements) and predicts the larger ones, per training model:

    split "1-2 -> 3-4": fitted on 1-2 nodes, predicting every 3- and 4-node configuration
    split "1-3 -> 4":   fitted on 1-3 nodes, predicting every 4-node configuration

and reports the mean absolute percentage error (MAPE) and the share of held-out step times
inside each model's 90% prediction interval, with each contender's ratio to ours.

Contenders
  ours      srifty_kit.StepTimeModel (ring all-reduce physics, scale-held-out CV, conformal)
  pollux    adaptdl.goodput.fit_perf_params from PyPI adaptdl 0.2.11 (Pollux, OSDI'21), fed
            compute time = step - sync and step time, as its trainer does; no intervals
  ernest    Ernest (Venkataraman et al., NSDI'16) features, fitted by non-negative least
            squares: 1, local_bsz (Ernest's data/machines: the samples one worker handles per
            step), log(num_workers), num_workers; no intervals
  linear    ordinary least squares on 1, local_bsz, num_workers, num_nodes with statsmodels'
            90% prediction interval for a new observation

Run it (from the repository root):
    python3 -m venv .bench-env
    .bench-env/bin/pip install torch==2.13.0 && .bench-env/bin/pip install adaptdl==0.2.11
    .venv/bin/python benchmarks/model_accuracy.py
The adaptdl part runs in .bench-env (adaptdl pins an old stack; the project's venv stays
clean) through a subprocess of this same file (``--pollux-worker``). Without .bench-env the
Pollux column says "not run". Writes reports/benchmarks/model_accuracy.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH_PYTHON = REPO / ".bench-env" / "bin" / "python"
SPLITS = {"1-2 -> 3-4": (2, (3, 4)), "1-3 -> 4": (3, (4,))}
LEVEL = 0.9
CONTENDERS = ("ours", "pollux", "ernest", "linear")


def _pollux_worker(job_path: str, out_path: str) -> None:
    """Runs inside .bench-env: fit adaptdl's performance model per training model, predict."""
    import numpy as np
    from adaptdl.goodput import (
        _predict_accum_time,
        _predict_log_optim_time,
        _predict_network_time,
        fit_perf_params,
    )

    job = json.loads(Path(job_path).read_text())
    out = {}
    for model, data in job.items():
        tr, te = data["train"], data["test"]
        params = fit_perf_params(
            np.array(tr["num_nodes"]),
            np.array(tr["num_workers"]),
            np.array(tr["local_bsz"]),
            np.array(tr["compute"]),
            np.array(tr["step"]),
        )
        accum = _predict_accum_time(params, np.array(te["local_bsz"], float))
        network = _predict_network_time(
            params, np.array(te["num_nodes"]), np.array(te["num_workers"])
        )
        out[model] = np.exp(_predict_log_optim_time(params, accum, network)).tolist()
    Path(out_path).write_text(json.dumps(out))


def run_pollux(train, test) -> dict | None:
    """Pollux predictions per training model, or None when .bench-env is missing."""
    import tempfile

    if not BENCH_PYTHON.is_file():
        return None
    job = {}
    for model, tr in train.groupby("model"):
        te = test[test["model"] == model]
        job[model] = {
            "train": {
                "num_nodes": tr["num_nodes"].tolist(),
                "num_workers": tr["num_workers"].tolist(),
                "local_bsz": tr["local_bsz"].tolist(),
                "compute": (tr["step_time_s"] - tr["sync_time_s"]).tolist(),
                "step": tr["step_time_s"].tolist(),
            },
            "test": {c: te[c].tolist() for c in ("num_nodes", "num_workers", "local_bsz")},
        }
    with tempfile.TemporaryDirectory() as tmp:
        job_path, out_path = Path(tmp) / "job.json", Path(tmp) / "out.json"
        job_path.write_text(json.dumps(job))
        subprocess.run(
            [str(BENCH_PYTHON), __file__, "--pollux-worker", str(job_path), str(out_path)],
            check=True,
        )
        return json.loads(out_path.read_text())


def fit_ernest(tr, te):
    """Ernest's NNLS over [1, local_bsz, log n, n] (n = workers), per training model."""
    import numpy as np
    from scipy.optimize import nnls

    def features(t):
        n = t["num_workers"].to_numpy(float)
        return np.column_stack([np.ones_like(n), t["local_bsz"], np.log(n), n])

    theta, _ = nnls(features(tr), tr["step_time_s"].to_numpy())
    return features(te) @ theta


def fit_linear(tr, te):
    """OLS on [1, local_bsz, workers, nodes]; statsmodels' prediction interval at LEVEL."""
    import statsmodels.api as sm

    cols = ["local_bsz", "num_workers", "num_nodes"]
    fit = sm.OLS(tr["step_time_s"].to_numpy(), sm.add_constant(tr[cols].to_numpy(float))).fit()
    frame = fit.get_prediction(sm.add_constant(te[cols].to_numpy(float), has_constant="add"))
    ci = frame.summary_frame(alpha=1 - LEVEL)
    return ci["mean"].to_numpy(), ci["obs_ci_lower"].to_numpy(), ci["obs_ci_upper"].to_numpy()


def evaluate(table):
    """Rows of (split, model, contender, MAPE, coverage)."""
    import numpy as np
    import pandas as pd

    from srifty_kit import StepTimeModel

    results = []
    for split, (fit_nodes, test_nodes) in SPLITS.items():
        train = table[table["num_nodes"] <= fit_nodes].reset_index(drop=True)
        test = table[table["num_nodes"].isin(test_nodes)].reset_index(drop=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = StepTimeModel(level=LEVEL).fit(train)
        pred = ours.predict(test.drop(columns=["step_time_s", "sync_time_s"]))
        pollux = run_pollux(train, test)
        for model, te in test.groupby("model"):
            tr = train[train["model"] == model]
            y = te["step_time_s"].to_numpy()
            p = pred.loc[te.index]
            lin, lin_lo, lin_hi = fit_linear(tr, te)
            points = {
                "ours": (
                    p["step_time_s"].to_numpy(),
                    p["step_time_lo"].to_numpy(),
                    p["step_time_hi"].to_numpy(),
                ),
                "pollux": (np.array(pollux[model]), None, None) if pollux else None,
                "ernest": (fit_ernest(tr, te), None, None),
                "linear": (lin, lin_lo, lin_hi),
            }
            for name, value in points.items():
                if value is None:
                    results.append((split, model, name, np.nan, np.nan))
                    continue
                point, lo, hi = value
                mape = float(np.mean(np.abs(point / y - 1)))
                cover = float(np.mean((y >= lo) & (y <= hi))) if lo is not None else np.nan
                results.append((split, model, name, mape, cover))
    return pd.DataFrame(results, columns=["split", "model", "contender", "mape", "coverage"])


def side_by_side(results):
    """One row per split and training model (plus a mean row per split), contenders across."""
    import pandas as pd

    mean = results.groupby(["split", "contender"], as_index=False)[["mape", "coverage"]].mean()
    mean["model"] = "mean"
    both = pd.concat([results, mean])
    wide = both.pivot_table(
        index=["split", "model"], columns="contender", values=["mape", "coverage"], dropna=False
    )
    rows = []
    for (split, model), row in wide.iterrows():
        out = {"split": split, "model": model}
        for c in CONTENDERS:
            m, cov = row.get(("mape", c)), row.get(("coverage", c))
            ratio = m / row[("mape", "ours")] if m == m else float("nan")
            out[f"{c} MAPE"] = "not run" if m != m else f"{100 * m:.1f}%"
            if c != "ours":
                out[f"{c} / ours"] = "" if ratio != ratio else f"{ratio:.2f}x"
            out[f"{c} cov90"] = "n/a" if cov != cov else f"{100 * cov:.0f}%"
        rows.append(out)
    order = {m: i for i, m in enumerate([*sorted(set(results["model"])), "mean"])}
    frame = pd.DataFrame(rows)
    frame["_o"] = frame["model"].map(order)
    split_order = {s: i for i, s in enumerate(SPLITS)}
    frame["_s"] = frame["split"].map(split_order)
    return frame.sort_values(["_s", "_o"]).drop(columns=["_o", "_s"]).reset_index(drop=True)


def network_by_node_count(table) -> str:
    """Median exposed sync per unit of ring traffic 2(n-1)/n, one worker per node, by nodes.

    Read from the data, not assumed: it shows why fitting on 1-2 nodes mispredicts 3-4.
    """
    one_per_node = table[(table["num_workers"] == table["num_nodes"]) & (table["num_nodes"] > 1)]
    n = one_per_node["num_workers"]
    per_unit = one_per_node["sync_time_s"] / (2 * (n - 1) / n)
    ratio = per_unit.groupby([one_per_node["model"], one_per_node["num_nodes"]]).median()
    ratio = ratio.unstack("num_nodes")
    rel = ratio.div(ratio[2], axis=0)
    cells = ", ".join(
        f"{m} {' / '.join(f'{v:.2f}' for v in row.to_numpy())}" for m, row in rel.iterrows()
    )
    return (
        f"sync per unit of ring traffic at {', '.join(map(str, rel.columns))} nodes "
        f"(relative to 2 nodes, one worker per node): {cells}"
    )


def main() -> int:
    """Run every contender on both splits; print and write the side-by-side table."""
    import pandas as pd
    from common import markdown_table, reference_measurements, write_report

    data = reference_measurements()
    if not data.is_file():
        print(
            f"model_accuracy: reference measurements not found at {data}; set "
            "SRIFTY_SHARED to the folder holding reference/measurements",
            file=sys.stderr,
        )
        return 2
    if not BENCH_PYTHON.is_file():
        print(
            f"model_accuracy: {BENCH_PYTHON} missing: Pollux is not run (see this file's "
            "docstring to create .bench-env)",
            file=sys.stderr,
        )
    table = pd.read_csv(data)
    frame = side_by_side(evaluate(table))
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(frame.to_string(index=False))
    network = network_by_node_count(table)
    print(network)
    note = (
        "# Step-time model accuracy on held-out larger clusters\n\n"
        f"Data: `{data.name}` (real EC2 g4dn.12xlarge, Pollux artifact; 5,542 configurations, "
        "one mean each). Each contender is fitted on the smaller clusters and predicts the "
        "larger ones; MAPE = mean absolute percentage error of step time, cov90 = share of "
        "held-out step times inside the model's 90% prediction interval (n/a: the model "
        "gives none). `x / ours` is the contender's MAPE over ours (above 1: ours is more "
        "accurate). Generated by `benchmarks/model_accuracy.py`.\n\n"
    )
    why = (
        "\n\nWhy the first split is hard: in these traces the 2-node runs spent more time per "
        "byte of all-reduce than the 3- and 4-node runs for most models (" + network + "), "
        "so every model fitted on 1-2 nodes over-predicts 3-4 nodes; ours widens its intervals "
        "for node counts it never measured (a stated prior, `intervals.NODE_COUNT_SD`). "
        "The measurement noise floor is about 3% (reference README). These are accuracy "
        "figures, not timings."
        "\n\nWhat our structure assumes (`srifty_kit/step_physics.py`): across nodes the "
        "gradients go round one ring over all n workers, so the bandwidth term grows as "
        "2(n-1)/n (1 at two workers, under 2 at any n: it saturates) and the network latency "
        "is paid on the 2(k-1) ring steps that cross a node boundary (NCCL's ring cost model, "
        "`src/graph/tuning.cc`), not on all 2(n-1) steps; with a single multi-node count "
        "measured that latency is not separable from bandwidth and is held at 0. Nothing in "
        "it lets 3-4 nodes be faster per byte than 2, so on the first split it still "
        "over-predicts: its predictions lie a median 2-14% (by training model) above the "
        "median measured 2-node step of the same local batch and most/fewest GPUs per node, "
        "and that 2-node step itself misses the 3-4 node steps by 10-37% MAPE. On the second "
        "split the node-count move the intervals are calibrated "
        "on is 2 -> 3 nodes, the anomalous one, so they are wider than the 3 -> 4 move "
        "needed (coverage above the 85-95% band); we keep that rather than calibrate on "
        "folds that never moved to a new node count."
        "\n"
    )
    write_report("model_accuracy", note + markdown_table(frame) + why)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--pollux-worker":
        _pollux_worker(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
