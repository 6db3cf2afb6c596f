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
NOISE_FLOOR = 0.03  # reference README: two campaigns of the same configurations differ ~3%
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


def _nodes_sorted(placement) -> tuple[int, ...]:
    """GPUs used on each node, largest first: '132' -> (3, 2, 1)."""
    return tuple(sorted((int(c) for c in str(placement)), reverse=True))


def _contains(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
    """Whether placement ``big`` holds ``small``: as many nodes or more, each as full."""
    return len(small) <= len(big) and all(s <= b for s, b in zip(small, big, strict=False))


def monotone_bound(train, test, tolerance: float = 0.0):
    """Per training model, the lowest MAPE on ``test`` of any predictor that (i) never says a
    cluster is faster than a measured cluster of the largest fitted node count that it
    contains, at the same local batch (every ring all-reduce model, ours, Pollux's and
    Ernest's included: more GPUs, more bytes), and (ii) stays within ``tolerance`` of those
    measured steps (a fit that reproduces the clusters nearest to the ones it predicts).

    Predicting a held-out step y is then constrained to p >= (1 - tolerance) * L with L the
    slowest contained training step, so its error is at least max(0, (1 - tolerance) L - y) / y.
    """
    import numpy as np
    import pandas as pd

    out = {}
    top = train["num_nodes"].max()
    for model, te in test.groupby("model"):
        tr = train[(train["model"] == model) & (train["num_nodes"] == top)]
        known = [
            (_nodes_sorted(p), b, t)
            for p, b, t in tr[["placement", "local_bsz", "step_time_s"]].itertuples(index=False)
        ]
        errors = []
        for p, b, y in te[["placement", "local_bsz", "step_time_s"]].itertuples(index=False):
            big = _nodes_sorted(p)
            floor = max((t for q, c, t in known if c == b and _contains(q, big)), default=0.0)
            errors.append(max(0.0, (1 - tolerance) * floor - y) / y)
        out[model] = float(np.mean(errors))
    return pd.Series(out)


def evaluate(table, network, prior):
    """Rows of (split, model, contender, MAPE, coverage) and, for ours, interval widths;
    ``network`` is ``network_by_node_count(table)``, ``prior`` the node-move prior learned
    on the other clusters (``node_move_priors``)."""
    import numpy as np
    import pandas as pd

    from srifty_kit import StepTimeModel

    results, limits = [], []
    for split, (fit_nodes, test_nodes) in SPLITS.items():
        train = table[table["num_nodes"] <= fit_nodes].reset_index(drop=True)
        test = table[table["num_nodes"].isin(test_nodes)].reset_index(drop=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = StepTimeModel(level=LEVEL, node_move_prior=as_prior(prior)).fit(train)
        pred = ours.predict(test.drop(columns=["step_time_s", "sync_time_s"]))
        pollux = run_pollux(train, test)
        bounds = {tol: monotone_bound(train, test, tol) for tol in (0.0, NOISE_FLOOR)}
        for model, te in test.groupby("model"):
            tr = train[train["model"] == model]
            y = te["step_time_s"].to_numpy()
            p = pred.loc[te.index]
            lin, lin_lo, lin_hi = fit_linear(tr, te)
            shifted = _shifted_coverage(p, te, network.loc[model], fit_nodes)
            limits.append(
                (split, model, *(bounds[t][model] for t in bounds), *_widths(p, y), *shifted)
            )
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
    columns = ["split", "model", "contender", "mape", "coverage"]
    limit_columns = ["split", "model", "bound", "bound_noise", "width", "needed", "above", "below"]
    limit_columns += ["cover_faster", "cover_slower"]
    return pd.DataFrame(results, columns=columns), pd.DataFrame(limits, columns=limit_columns)


def _widths(pred, y) -> tuple[float, float, float, float]:
    """Median (hi - lo) / point of our 90% intervals, the factor on every half-width (in
    log space, each side its own) that would have covered 90% of the held-out steps (read off
    the held-out rows, so a diagnosis of the intervals, never fed back into them), and the
    shares of steps above and below the interval."""
    import numpy as np

    point = pred["step_time_s"].to_numpy()
    up = np.log(pred["step_time_hi"].to_numpy() / point)
    down = np.log(point / pred["step_time_lo"].to_numpy())
    r = np.log(y / point)
    reach = np.where(r > 0, r / up, -r / down)
    width = (pred["step_time_hi"] - pred["step_time_lo"]).to_numpy() / point
    above = float(np.mean(y > pred["step_time_hi"].to_numpy()))
    below = float(np.mean(y < pred["step_time_lo"].to_numpy()))
    return float(np.median(width)), float(np.quantile(reach, LEVEL)), above, below


def _shifted_coverage(pred, held, network, fit_nodes: int) -> tuple[float, float]:
    """Coverage had the held-out network moved by the last node-count move the fit saw.

    The move is the factor f on sync time per byte from fit_nodes - 1 to fit_nodes nodes
    (``network_by_node_count``); each held-out step becomes step + sync * (f - 1), then
    step + sync * (1/f - 1): the same shift, faster and slower. A stress test of the widths,
    not a measurement: NaN when the fit saw no move between two multi-node counts.
    """
    import numpy as np

    if fit_nodes - 1 < 2:
        return float("nan"), float("nan")
    f = network[fit_nodes] / network[fit_nodes - 1]
    lo, hi = pred["step_time_lo"].to_numpy(), pred["step_time_hi"].to_numpy()
    step, sync = held["step_time_s"].to_numpy(), held["sync_time_s"].to_numpy()
    cover = [np.mean((y >= lo) & (y <= hi)) for y in (step + sync * (g - 1) for g in (f, 1 / f))]
    return float(cover[0]), float(cover[1])


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


def network_by_node_count(table):
    """Median exposed sync per unit of ring traffic 2(n-1)/n, one worker per node, relative
    to 2 nodes: a row per training model, a column per node count.

    Read from the data, not assumed: it shows why fitting on 1-2 nodes mispredicts 3-4.
    """
    from common import one_worker_per_node

    one_per_node, ring = one_worker_per_node(table)
    per_unit = one_per_node["sync_time_s"] / ring
    ratio = per_unit.groupby([one_per_node["model"], one_per_node["num_nodes"]]).median()
    ratio = ratio.unstack("num_nodes")
    return ratio.div(ratio[2], axis=0)


def _per_model(values) -> str:
    return ", ".join(f"{m} {v}" for m, v in values.items())


def with_ours(results, limits):
    """``limits`` with our MAPE and coverage beside, and a mean row after each split."""
    import pandas as pd

    ours = results[results["contender"] == "ours"][["split", "model", "mape", "coverage"]]
    both = limits.merge(ours, on=["split", "model"])
    parts = []
    for split in SPLITS:
        part = both[both["split"] == split].sort_values("model")
        mean = part.mean(numeric_only=True).to_frame().T.assign(split=split, model="mean")
        parts += [part, mean]
    return pd.concat(parts, ignore_index=True)


def limits_table(both):
    """Ours beside the floor any monotone model has on each split, and our interval widths."""
    import pandas as pd

    def pct(column: str, digits: int = 1) -> list[str]:
        return [f"{100 * v:.{digits}f}%" for v in both[column]]

    return pd.DataFrame(
        {
            "split": both["split"],
            "model": both["model"],
            "ours MAPE": pct("mape"),
            "monotone floor": pct("bound"),
            "floor, 3% slack": pct("bound_noise"),
            "ours cov90": pct("coverage", 0),
            "above / below it": [
                f"{100 * a:.0f}% / {100 * b:.0f}%"
                for a, b in zip(both["above"], both["below"], strict=True)
            ],
            "90% width / step": pct("width", 0),
            "width factor for 90%": [f"{v:.2f}" for v in both["needed"]],
            "cov90, last move again (faster / slower)": [
                "n/a" if a != a else f"{100 * a:.0f}% / {100 * b:.0f}%"
                for a, b in zip(both["cover_faster"], both["cover_slower"], strict=True)
            ],
        }
    )


# Scale-out splits (issue 13): fit on the smaller clusters of each reference cluster, predict
# its larger scale-out runs. (file, rows fitted, rows held out): campaign "scalability" rows
# exist for Azure and RTX; on AWS the largest node count is held out.
SCALE_OUT = {
    "AWS g4dn.12xlarge 1-3 -> 4": (
        "aws_g4dn12xlarge_placements.csv",
        lambda t: t["num_nodes"] <= 3,
        lambda t: t["num_nodes"] == 4,
    ),
    "Azure ND40rs_v2 <=2 -> 3-5": (
        "sia_azure_nd40rsv2.csv",
        lambda t: (t["campaign"] == "placements") & (t["num_nodes"] <= 2),
        lambda t: t["campaign"] == "scalability",
    ),
    "RTX 2080 Ti <=2 -> 3": (
        "sia_rtx2080ti.csv",
        lambda t: (t["campaign"] == "placements") & (t["num_nodes"] <= 2),
        lambda t: (t["campaign"] == "scalability") & (t["num_nodes"] == 3),
    ),
}


# The clusters whose node-count moves teach intervals.NODE_MOVE_PRIOR, with their files.
CLUSTERS = {
    "AWS g4dn.12xlarge": "aws_g4dn12xlarge_placements.csv",
    "Azure ND40rs_v2": "sia_azure_nd40rsv2.csv",
    "RTX 2080 Ti": "sia_rtx2080ti.csv",
}


def node_move_rows(folder):
    """Every node-count move of every cluster, as the prior on node moves learns from it:
    for each node count k >= 2 below the cluster's largest, StepTimeModel fitted on the rows
    of at most k nodes predicts the rows of every larger node count (so a move that spans
    several tells how the error grows with the distance, intervals.learn_prior). Rows of
    (cluster, move, model, log_ratio = log(measured / predicted), share, doublings)."""
    import numpy as np
    import pandas as pd

    from srifty_kit import StepTimeModel
    from srifty_kit.model.physics import sync_share

    out = []
    for cluster, name in CLUSTERS.items():
        path = folder / name
        if not path.is_file():
            continue
        table = pd.read_csv(path).drop(columns="campaign", errors="ignore")
        counts = sorted(table["num_nodes"].unique())
        for k in (n for n in counts if 2 <= n < counts[-1]):
            fit, held = table[table["num_nodes"] <= k], table[table["num_nodes"] > k]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = StepTimeModel(level=LEVEL).fit(fit)
            configs = held.drop(columns=["step_time_s", "sync_time_s"])
            parts = model.explain(configs)
            # the share the estimator learns and applies the move with (physics.sync_share:
            # d log T / d log T_s), each group at its own overlap exponent gamma
            compute, sync = parts["compute_s"].to_numpy(), parts["sync_s"].to_numpy()
            share = np.empty(len(held))
            for key, idx in held.groupby(["model", "instance_type"]).indices.items():
                gamma = model.groups_[key].params.gamma
                share[idx] = sync_share(compute[idx], sync[idx], gamma)
            out.append(
                pd.DataFrame(
                    {
                        "cluster": cluster,
                        "model": held["model"].to_numpy(),
                        "move": f"1-{k} -> {k + 1}"
                        + (f"-{counts[-1]}" if counts[-1] > k + 1 else ""),
                        "log_ratio": np.log(held["step_time_s"].to_numpy() / parts["step_time_s"]),
                        "share": share,
                        "doublings": np.log2(held["num_nodes"].to_numpy() / k),
                    }
                )
            )
    return pd.concat(out, ignore_index=True)


def node_move_priors(moves):
    """The hyperprior on node moves learned from every cluster ("all": what
    intervals.NODE_MOVE_PRIOR holds) and, per cluster, from the OTHER clusters only (what
    its held-out figures use): ``intervals.learn_prior``."""
    from srifty_kit.model.intervals import learn_prior

    out = {"all": learn_prior(moves, "all")}
    for cluster in moves["cluster"].unique():
        others = moves[moves["cluster"] != cluster]
        out[cluster] = learn_prior(others, " and ".join(others["cluster"].unique()))
    return out


def as_prior(move) -> tuple[float, ...]:
    """StepTimeModel's node_move_prior argument for a learned NetworkPrior."""
    return tuple(
        round(float(v), 3)
        for v in (
            move.centre,
            move.between_types,
            move.between_moves,
            move.scatter,
            move.growth,
            move.seen,
        )
    )


def _scale_out_tables(folder, splits=None):
    """Every cluster's (train, test) of ``splits`` (file, fit rows, test rows; default
    ``SCALE_OUT``), with ``per_node``; None for a missing file."""
    import pandas as pd

    from srifty_kit.model.fit import with_per_node

    out = {}
    for split, (name, fit_rows, test_rows) in (splits or SCALE_OUT).items():
        path = folder / name
        if not path.is_file():
            out[split] = None
            continue
        table = pd.read_csv(path)
        if "campaign" not in table:
            table["campaign"] = "placements"
        table = with_per_node(table)
        out[split] = (
            table[fit_rows(table)].reset_index(drop=True),
            table[test_rows(table)].reset_index(drop=True),
        )
    return out


def loco_decay(tables):
    """Per split, the network decay estimated on every OTHER cluster's rows (all of them):
    the prior that split would get had its own cluster never been seen."""
    import pandas as pd

    from srifty_kit.model.fit import estimate_decay

    whole = {s: pd.concat(v) for s, v in tables.items() if v is not None}
    return {
        s: estimate_decay(pd.concat([t for o, t in whole.items() if o != s])) or 0.0 for s in whole
    }


def _score(y, point, lo=None, hi=None) -> dict:
    import numpy as np

    out = {"mape": float(np.mean(np.abs(point / y - 1)))}
    if lo is not None:
        out["above"] = float(np.mean(y > hi))
        out["below"] = float(np.mean(y < lo))
        out["coverage"] = 1.0 - out["above"] - out["below"]
        # how wide against how wrong: the interval's half-width and the error it has to span
        out["half_width"] = float(np.median((hi - lo) / (2 * point)))
        out["error90"] = float(np.quantile(np.abs(y / point - 1), LEVEL))
    return out


def cluster_of(split: str) -> str:
    """The cluster (``CLUSTERS`` key) a scale-out split belongs to."""
    return next(c for c in CLUSTERS if split.startswith(c))


def scale_out(tables, priors, node_priors):
    """Rows of (split, model, nodes, contender, mape, coverage, above, below): every contender
    fitted on a cluster's smaller runs and scored on its larger ones, per held-out node count
    (nodes "all": every held-out row). Ours uses the node-move prior learned on the other
    clusters (``node_priors``)."""
    import pandas as pd

    from srifty_kit import StepTimeModel

    rows = []
    for split, pair in tables.items():
        if pair is None:
            continue
        train, test = pair
        configs = test.drop(columns=["step_time_s", "sync_time_s", "per_node", "campaign"])
        preds = {}
        for name, prior in (
            ("ours", None),
            ("ours, decay prior from other clusters", priors[split]),
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = StepTimeModel(
                    level=LEVEL,
                    decay_prior=prior,
                    node_move_prior=as_prior(node_priors[cluster_of(split)]),
                ).fit(train.drop(columns=["per_node", "campaign"]))
                preds[name] = model.predict(configs)
        pollux = run_pollux(train, test)
        for model_name, te in test.groupby("model"):
            tr = train[train["model"] == model_name]
            lin, lin_lo, lin_hi = fit_linear(tr, te)
            points = {
                name: (
                    p.loc[te.index, "step_time_s"],
                    p.loc[te.index, "step_time_lo"],
                    p.loc[te.index, "step_time_hi"],
                )
                for name, p in preds.items()
            }
            points["pollux"] = (
                (pd.Series(pollux[model_name], te.index), None, None) if pollux else None
            )
            points["ernest"] = (pd.Series(fit_ernest(tr, te), te.index), None, None)
            points["linear"] = (
                pd.Series(lin, te.index),
                pd.Series(lin_lo, te.index),
                pd.Series(lin_hi, te.index),
            )
            nodes = [("all", te.index)] + [
                (str(k), part.index) for k, part in te.groupby("num_nodes")
            ]
            for name, value in points.items():
                if value is None:
                    continue
                for label, idx in nodes:
                    y = te.loc[idx, "step_time_s"].to_numpy()
                    parts = [None if v is None else v.loc[idx].to_numpy() for v in value]
                    rows.append(
                        {
                            "split": split,
                            "model": model_name,
                            "nodes": label,
                            "contender": name,
                            **_score(y, *parts),
                        }
                    )
    return pd.DataFrame(rows)


# A scale-out sweep appended to a split's fitted rows: the node counts swept, one full-node
# placement each (its largest worker count), every batch size; scored on the split's other rows
SWEEPS = {
    "AWS g4dn.12xlarge <=2 -> 3-4": (
        "aws_g4dn12xlarge_placements.csv",
        lambda t: t["num_nodes"] <= 2,
        lambda t: t["num_nodes"] >= 3,
        ((3,), (3, 4)),
    ),
    "Azure ND40rs_v2 <=2 -> 3-5": (*SCALE_OUT["Azure ND40rs_v2 <=2 -> 3-5"], ((3,), (3, 4))),
    "RTX 2080 Ti <=2 -> 3": (*SCALE_OUT["RTX 2080 Ti <=2 -> 3"], ((3,),)),
}


def sweep_appended(folder, node_priors):
    """A scale-out sweep appended to the table: the split's fitted rows plus, at each swept
    node count, every batch size of its full-node placement (the largest worker count there),
    which ``holdout.probe_rows`` sets aside and the belief conditions on. Scored on every other
    held-out row, beside the same fit without the sweep. Rows of (split, sweep, arm, mape,
    coverage, above, below, half_width, error90)."""
    import pandas as pd

    from srifty_kit import StepTimeModel

    rows = []
    splits = {split: spec[:3] for split, spec in SWEEPS.items()}
    tables = _scale_out_tables(folder, splits)
    for split, spec in SWEEPS.items():
        if tables.get(split) is None:
            continue
        sweeps = spec[3]
        train, test = (t.drop(columns=["per_node", "campaign"]) for t in tables[split])
        prior = as_prior(node_priors[cluster_of(split)])
        for nodes in sweeps:
            full = test["num_workers"] == test.groupby("num_nodes")["num_workers"].transform("max")
            swept = test["num_nodes"].isin(nodes) & full
            scored = test[~swept]
            configs = scored.drop(columns=["step_time_s", "sync_time_s"])
            label = " + ".join(
                f"{k} x {int(test.loc[swept & (test['num_nodes'] == k), 'num_workers'].iloc[0])}"
                for k in nodes
            )
            for arm, fit_rows in (("without it", train), ("sweep appended", None)):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    rows_ = pd.concat([train, test[swept]]) if fit_rows is None else fit_rows
                    model = StepTimeModel(level=LEVEL, node_move_prior=prior).fit(rows_)
                pred = model.predict(configs)
                rows.append(
                    {
                        "split": split,
                        "sweep": f"{label} ({int(swept.sum())} rows)",
                        "arm": arm,
                        **_score(
                            scored["step_time_s"].to_numpy(),
                            *(
                                pred[c].to_numpy()
                                for c in ("step_time_s", "step_time_lo", "step_time_hi")
                            ),
                        ),  # fmt: skip
                    }
                )
    return pd.DataFrame(rows)


# batch_held_out's arms: (name, the model-file version whose reading of the runs it keeps
# (GroupFit.predicts_as; None: this release's), the batch folds' widening)
ARMS = (
    ("the placement's runs", None, True),
    ("the same, moved linearly in the share (version 12)", 12, True),
    ("the same, band before version 11", 10, False),
    ("the fit alone", 9, False),
)


def batch_held_out(folder, node_priors):
    """Another batch size of a placement measured within the fit: on each split's fitted
    rows, the largest (or the smallest) batch of every multi-node placement measured at three
    or more batch sizes (or the second smallest, of those at four or more) is held out, the
    rest fitted, and the held-out rows predicted from their placement's runs at the other
    batches (``posterior.on_places``) with the band the fit's batch folds learned
    (``GroupFit.batch_sd``, beyond the batches run there only), beside the same moved
    linearly in the sync share (model files of version 12), without the widening (version
    10) and the fit alone (version 9: ``GroupFit.from_places`` false).
    Rows of (split, held out, arm, rows, mape, coverage, above, below, half_width, error90)."""
    import pandas as pd

    from srifty_kit import StepTimeModel
    from srifty_kit.model.groups import PREDICTS

    rows = []
    for split, pair in _scale_out_tables(folder).items():
        if pair is None:
            continue
        table = pair[0].drop(columns=["per_node", "campaign"])
        place = table.groupby(["model", "num_nodes", "num_workers"])["local_bsz"]
        many = place.transform("nunique")
        rank = place.rank(method="dense")
        for which in ("largest", "smallest", "second smallest"):
            if which == "second smallest":  # between two batches run there
                held = (rank == 2) & (many >= 4)
            else:
                end = place.transform("max" if which == "largest" else "min")
                held = (table["local_bsz"] == end) & (many >= 3)
            held &= table["num_nodes"] > 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prior = as_prior(node_priors[cluster_of(split)])
                model = StepTimeModel(level=LEVEL, node_move_prior=prior).fit(table[~held])
            configs = table[held].drop(columns=["step_time_s", "sync_time_s"])
            learned = {key: fit.batch_sd for key, fit in model.groups_.items()}
            for arm, reads_as, widens in ARMS:
                for key, fit in model.groups_.items():
                    fit.predicts_as = reads_as or PREDICTS
                    fit.batch_sd = learned[key] if widens else 0.0
                pred = model.predict(configs)
                rows.append(
                    {
                        "split": split,
                        "held out": f"{which} batch",
                        "arm": arm,
                        "rows": int(held.sum()),
                        **_score(
                            table.loc[held, "step_time_s"].to_numpy(),
                            *(
                                pred[c].to_numpy()
                                for c in ("step_time_s", "step_time_lo", "step_time_hi")
                            ),
                        ),  # fmt: skip
                    }
                )
    return pd.DataFrame(rows)


def _section(title: str, text: str, table) -> str:
    """Print ``table`` and return it as a report section under ``title`` after ``text``."""
    import pandas as pd
    from common import markdown_table

    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table.to_string(index=False))
    return f"\n## {title}\n\n{text}\n\n" + markdown_table(table) + "\n"


def scores_table(scores):
    """Scored arms as printed (the sweep's, the held-out batch's): MAPE, coverage, the
    one-sided misses, widths."""
    out = scores[[c for c in scores if c in ("split", "sweep", "held out", "arm", "rows")]].copy()
    for column, name in (
        ("mape", "MAPE"),
        ("coverage", "cov90"),
        ("above", "above the upper end"),
        ("below", "below the lower end"),
        ("half_width", "90% half-width / step"),
        ("error90", "90th pct |error|"),
    ):
        out[name] = scores[column].map(lambda v: f"{100 * v:.1f}%")
    return out


def _ours_first(column):
    """Sort key: 'ours' before the other contenders, other columns as they are."""
    return column.map(lambda v: "" if v == "ours" else v) if column.name == "contender" else column


def scale_out_tables(scores):
    """(MAPE by node count per contender, the intervals of ours and linear, MAPE per model)
    as printed tables."""

    mean = scores.groupby(["split", "nodes", "contender"], as_index=False).mean(numeric_only=True)
    mape = mean.pivot_table(index=["split", "nodes"], columns="contender", values="mape")
    order = [
        c
        for c in ("ours", "ours, decay prior from other clusters", "pollux", "ernest", "linear")
        if c in mape.columns
    ]
    mape = mape[order]
    table = mape.map(lambda v: f"{100 * v:.1f}%").reset_index()
    worse = mape.drop(columns=[c for c in order if c.startswith("ours")]).min(axis=1)
    table["best other / ours"] = (worse / mape["ours"]).map(lambda v: f"{v:.2f}x").to_numpy()
    shown = ["coverage", "above", "below", "half_width", "error90"]
    # every contender that gives an interval: ours, and linear's statsmodels interval
    given = mean[mean["contender"].isin(["ours", "linear"])][["split", "nodes", "contender"]]
    given = given.join(mean[shown].map(lambda v: f"{100 * v:.1f}%"))
    intervals = given.sort_values(["split", "nodes", "contender"], key=_ours_first).rename(
        columns={
            "coverage": "cov90",
            "above": "above the interval",
            "below": "below the interval",
            "half_width": "half-width / step (median)",
            "error90": "90th pct of |error|",
        }
    )
    per_model = scores[(scores["nodes"] == "all") & scores["contender"].isin(["ours", "pollux"])]
    per_model = per_model.pivot_table(
        index=["split", "model"], columns="contender", values="mape"
    ).map(lambda v: f"{100 * v:.1f}%")
    return table, intervals.reset_index(drop=True), per_model.reset_index()


def main() -> int:
    """Run every contender on both splits; print and write the side-by-side table."""
    import pandas as pd
    from common import markdown_table, reference_measurements, write_report

    from srifty_kit.model.intervals import NODE_MOVE_PRIOR

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
    moves = node_move_rows(data.parent)
    node_priors = node_move_priors(moves)
    print(
        "node-move prior (centre, between types, between moves, scatter, growth, seen) learned on:"
    )
    for key, move in node_priors.items():
        print(f"  {key if key == 'all' else 'other clusters than ' + key}: {as_prior(move)}")
    shipped = NODE_MOVE_PRIOR
    if as_prior(node_priors["all"]) != as_prior(shipped):
        print(
            f"model_accuracy: intervals.NODE_MOVE_PRIOR {as_prior(shipped)} differs from what "
            f"these clusters teach {as_prior(node_priors['all'])}: update it",
            file=sys.stderr,
        )
    rel = network_by_node_count(table)
    aws_prior = node_priors["AWS g4dn.12xlarge"]
    results, limits = evaluate(table, rel, aws_prior)
    both = with_ours(results, limits)
    frame, floors = side_by_side(results), limits_table(both)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(frame.to_string(index=False))
        print(floors.to_string(index=False))
    network = (
        f"sync per unit of ring traffic at {', '.join(map(str, rel.columns))} nodes "
        "(relative to 2 nodes, one worker per node): "
        + _per_model(rel.apply(lambda row: " / ".join(f"{v:.2f}" for v in row), axis=1))
    )
    three_to_four = _per_model((rel[4] / rel[3]).map(lambda v: f"{v:.2f}x"))
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
    first, second = (both[(both["split"] == k) & (both["model"] == "mean")].iloc[0] for k in SPLITS)
    why = (
        "\n\n## Why the first split cannot reach 8%\n\n"
        "In these traces the 2-node runs spent more time per byte of all-reduce than the 3- "
        "and 4-node runs (" + network + "). The data's README says so too: larger clusters "
        "are not monotone in step time. A model fitted on 1-2 nodes sees none of that.\n\n"
        "The table below makes it exact. *Monotone floor*: the lowest MAPE any predictor can "
        "reach on the held-out rows if it (i) never predicts a cluster faster than a measured "
        "cluster of the largest fitted node count that it contains (placement node by node, "
        "same local batch) and (ii) reproduces those measured steps; *3% slack* lets it sit "
        "up to the noise floor below them. Every ring all-reduce model satisfies (i): ours, "
        "Pollux's and Ernest's. On the first split the floor averages "
        f"{100 * first['bound']:.1f}% ({100 * first['bound_noise']:.1f}% with slack), so 8% "
        "would need a model that predicts more nodes faster than fewer, which nothing in 1-2 "
        "node measurements supports; ours is at "
        f"{100 * first['mape']:.1f}%, at that floor (it does not reproduce every 2-node step "
        "exactly, so it can sit a little under it). On the second split the floor is "
        f"{100 * second['bound']:.1f}%.\n\n"
        "## How wide the intervals are, and why\n\n"
        "An interval has two parts. Within the node counts a fit measured, its ends are the "
        "lower and upper conformal quantiles of signed scores from folds that add workers "
        "(one tail each: a model that runs slow there gets an interval shifted up). At a "
        "node count beyond them, the network's time per byte moves by a rate times the "
        "distance raised to a growth (intervals.NodeMove): learned from the type's own "
        "held-out moves that start at 2 or more nodes (the AWS 1-2 -> 3 fold, pooled over its "
        "six models; none for a fit on 1-2 nodes), under a hyperprior learned on the other "
        "clusters' moves, for these AWS rows the Azure and RTX ones: (centre, between types, "
        f"between moves, scatter, growth, seen) = {as_prior(aws_prior)}, in log network time "
        "per unit of reach (sync share x d**growth, d the doublings of the node count beyond "
        "the fitted, 2 -> 4 nodes is one doubling; past `seen` doublings, the farthest the "
        "prior's moves reached, it grows in proportion to d again). A configuration's own "
        "part there is the larger of the group's half-width and the move's scatter, the "
        "rate's uncertainty added in quadrature.\n\n"
        "*Width factor for 90%*: the factor on our half-widths (each side its own) that would "
        "have covered exactly 90% of the held-out steps, read off those held-out rows: a "
        "diagnosis, never fed back. Below 1 the intervals were wider than these rows needed. "
        "On the second split they are: the prior carries the other clusters' moves, Azure's "
        "long slow tail included, while here the network's time per byte moved from 3 to 4 "
        f"nodes by {three_to_four}, the large moves on models whose steps are mostly "
        "compute; it is the width a user who never measured this network would get. "
        "Last column: had the 4-node "
        "network moved by the 2 -> 3 factor again (each held-out step's sync time scaled by "
        "it, or by its inverse), they would have covered "
        f"{100 * second['cover_faster']:.0f}% / {100 * second['cover_slower']:.0f}% on "
        "average. On the first split the intervals are too narrow the other way: "
        f"{100 * first['coverage']:.0f}% covered, {100 * first['below']:.0f}% of the steps "
        "below the lower end and "
        f"{100 * first['above']:.0f}% above the upper one. The 3- and 4-node runs moved "
        "each byte faster than the 2-node runs did, by more than any node-count move of the "
        "other clusters; a step below the interval is a cluster faster than promised, so a "
        "deadline chosen on the upper end is still met. (The symmetric prior of model "
        "files before version 5 covered these rows, but its size had been read off this "
        "very gap.)\n\n"
        + markdown_table(floors)
        + "\n\nWhat our structure assumes (`srifty_kit/model/physics.py`): across nodes the "
        "gradients go round one ring over all n workers, so the bandwidth term grows as "
        "2(n-1)/n and the network latency is paid on the 2(k-1) ring steps that cross a node "
        "boundary (NCCL's ring cost model, `src/graph/tuning.cc`); with a single multi-node "
        "count measured that latency is not separable from bandwidth and is held at 0. The "
        "measurement noise floor is about 3% (reference README). These are accuracy figures, "
        "not timings.\n"
    )
    tables = _scale_out_tables(data.parent)
    priors = loco_decay(tables)
    scores = scale_out(tables, priors, node_priors)
    by_nodes, intervals, per_model = scale_out_tables(scores)
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(by_nodes.to_string(index=False))
        print(intervals.to_string(index=False))
        print(per_model.to_string(index=False))
    print("network decay prior per split, from the other clusters:", priors)
    scale = (
        "\n\n## Scale-out: three clusters, fitted small, predicting larger\n\n"
        "Each cluster's smaller runs fit every contender; its larger scale-out runs are "
        "scored (`nodes` all = every held-out row). Azure ND40rs_v2 and RTX 2080 Ti: the Sia "
        "artifact's `placements` rows on at most 2 nodes against its `scalability` rows; AWS "
        "g4dn.12xlarge: 1-3 nodes against 4. `ours, decay prior from other clusters` uses a "
        "network decay estimated (`fit.estimate_decay`) on the other two clusters' rows "
        "only: "
        + ", ".join(f"{s}: {v:g}" for s, v in priors.items())
        + ". It is the validation that chose the default prior `fit.DECAY_PRIOR` "
        "(no growth unless a type's own runs show it): the column shows what a growth "
        "carried from other clusters does to the held-out error. `best other / ours`: the "
        "lowest MAPE of Pollux, Ernest and linear over ours (above 1: ours is more accurate)."
        "\n\n"
        + markdown_table(by_nodes)
        + "\n\nOur 90% intervals on the same held-out rows, beside linear's (the only other "
        "contender that gives one): two-sided coverage and the "
        "one-sided miss rates (a step above the upper end is one a deadline would miss), and "
        "how wide they are beside how wrong the point was (half-width and the 90th "
        "percentile of |error|, both relative to the step). Beyond the fitted node counts "
        "every held-out row's interval rests on the network's move, pooled under the prior "
        "learned on the OTHER clusters' moves (each move fitted on the smaller node counts "
        "and predicting every larger one; clusters weigh the same; the growth is the one "
        "under which each move's errors at its several distances fit one rate best), as "
        "(centre, between types, between moves, scatter, growth, seen): "
        + "; ".join(f"{c}: {as_prior(m)}" for c, m in node_priors.items() if c != "all")
        + ". `intervals.NODE_MOVE_PRIOR`, what a user gets, is learned on all three: "
        + f"{as_prior(node_priors['all'])}.\n\n"
        + markdown_table(intervals)
        + "\n\nPer training model, every held-out row:\n\n"
        + markdown_table(per_model)
        + "\n"
    )
    sweep = _section(
        "A scale-out sweep appended to the table",
        "A user who swept the node counts beyond the dense part appends those runs: here, at "
        "each swept node count, every batch size of the full-node placement (its largest "
        "worker count) of the scale-out rows above. The fit sets them aside "
        "(`holdout.probe_rows`) and the belief conditions on them (`posterior.observe`): "
        "through the group's and the network's shared errors, through the placement's own "
        "error where a configuration shares the placement (its share of the stray learned "
        "from the dense part: `GroupFit.placement_share`), with the size of the shared "
        "errors and of the strays learned from the sweep itself (maximum marginal "
        "likelihood, neither below the fit's). Scored on every other held-out row of the "
        "split (AWS: fitted on 1-2 nodes, the sweep at 3 or 3 and 4), beside the same fit "
        "without the sweep; the node-move prior is the one learned on the other clusters.",
        scores_table(sweep_appended(data.parent, node_priors)),
    )
    batch = _section(
        "Another batch size of a placement measured within the fit",
        "A search free to change the batch asks about batch sizes nobody ran on nodes and "
        "workers somebody did. On each split's fitted rows, the largest (or the smallest) "
        "batch of every multi-node placement measured at three or more batch sizes is held "
        "out and the rest fitted (or its second smallest, of those measured at four or more: "
        "a batch between two run there, where the band is not widened); the held-out rows "
        "are predicted from their placement's runs "
        "at the other batches (`posterior.on_places`: the placement's shared error, a factor "
        "on its sync time read from the runs through the overlap and carried to the asked "
        "batch the same way; its point the conditioned median), its band widened by how far "
        "such a batch landed in the fit's own batch folds (`GroupFit.batch_sd`: each "
        "placement's largest and smallest remaining batch held out within the fitted rows, "
        "pooled over the type's models); beside the same moved linearly, by the asked batch's "
        "sync share at the physics' split times the runs' shift (model files of version 12), "
        "without the widening (version 10) and the fit alone (versions before 10). The "
        "node-move prior is the one learned on the other clusters; "
        "no constant was chosen on these rows: the widening is learned inside each fit, on "
        "its fitted rows only.",
        scores_table(batch_held_out(data.parent, node_priors)),
    )
    fits = whole_table_fits(data.parent)
    print(fits)
    write_report(
        "model_accuracy", note + markdown_table(frame) + why + scale + sweep + batch + fits
    )
    return 0


def whole_table_fits(folder) -> str:
    """How long ``StepTimeModel.fit`` takes on each whole reference table (every row, every
    training model; the target is at most 30 s for the largest on 2 cores), as a paragraph."""
    import time

    import pandas as pd

    from srifty_kit import StepTimeModel

    said = []
    for path in sorted(folder.glob("*.csv"), key=lambda p: -p.stat().st_size):
        table = pd.read_csv(path)
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            StepTimeModel(level=LEVEL).fit(table)
        said.append(f"{path.name} ({len(table):,} rows): {time.perf_counter() - started:.1f} s")
    return "\nFit time on each whole reference table (2 cores): " + "; ".join(said) + ".\n"


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--pollux-worker":
        _pollux_worker(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
