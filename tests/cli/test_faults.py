"""Every subcommand, given a mistake, answers with one line and exit code 2 and touches nothing.

Each case runs the real console script in a folder that already holds files (an older output
among them) and checks: the exit code, exactly one line on stderr, no traceback, and every
file that was there before byte-identical afterwards.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import REPO, run_srifty

pytestmark = pytest.mark.slow

DATA = REPO / "tests" / "data"
MODEL = DATA / "model_v3_before_layout.json"  # replaced by a fresh fit, below
# the machine the packaged sample profiles were made on: the type the fitted model measured
SAMPLE_TYPE = json.loads((REPO / "data" / "sample_profile_fingerprint.json").read_text())[
    "instance_type"
]


@pytest.fixture(scope="module", autouse=True)
def _sample_model(tmp_path_factory):
    """The model these cases read: fitted here on the packaged sample profiles (cnn, mlp and
    transformer on this machine's CPU), so it is of the file version this release writes."""
    import warnings

    from srifty_kit import StepTimeModel
    from srifty_kit.tables.files import read_table

    global MODEL
    steps = pd.concat(
        [read_table(REPO / "data" / f"sample_profile_{k}.csv") for k in ("single", "dist")]
    )
    path = tmp_path_factory.mktemp("faults") / "model.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        StepTimeModel().fit(steps).save(path)
    MODEL = path


GOOD = pd.DataFrame(
    {
        "model": ["m"] * 4,
        "instance_type": ["local"] * 4,
        "gpus_per_node": [4] * 4,
        "num_nodes": [1, 1, 1, 1],
        "num_workers": [1, 1, 2, 4],
        "local_bsz": [8, 16, 8, 8],
        "step_time_s": [0.1, 0.18, 0.12, 0.13],
        "sync_time_s": [0.0, 0.0, 0.02, 0.03],
    }
)
CONFIGS = GOOD.drop(columns=["step_time_s", "sync_time_s"]).assign(model="cnn")


def _folder(tmp_path: Path) -> dict[str, bytes]:
    """Files a user already has there; returns their bytes."""
    GOOD.to_csv(tmp_path / "m.csv", index=False)
    CONFIGS.assign(instance_type=SAMPLE_TYPE).to_csv(tmp_path / "c.csv", index=False)
    (tmp_path / "model.json").write_bytes(MODEL.read_bytes())
    (tmp_path / "out.csv").write_text("older,results\n1,2\n")
    (tmp_path / "out.json").write_text('{"older": true}\n')
    (tmp_path / "afile").write_text("not a folder\n")
    (tmp_path / "dir.csv").mkdir(exist_ok=True)
    return {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}


def _new_entries(folder: Path, before: dict[str, bytes]) -> set[str]:
    return {p.name for p in folder.iterdir()} - set(before) - {"dir.csv"}


def _check(done, before: dict[str, bytes], folder: Path, code: int = 2) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, done.stderr
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for name, data in before.items():
        assert (folder / name).read_bytes() == data, f"{name} changed"


def _table(tmp_path: Path, name: str, frame: pd.DataFrame) -> str:
    frame.to_csv(tmp_path / name, index=False)
    return name


SEARCH = ["search", "--model", "model.json", "--workload", "cnn", "--samples", "1e6"]

# (case, arguments, exit code): each from the reliability issue, named as it was found
CASES = [
    ("fit inf step", ["fit", "--measurements", "inf_step.csv", "--out", "out.json"], 2),
    ("fit inf sync", ["fit", "--measurements", "inf_sync.csv", "--out", "out.json"], 2),
    ("fit inf bsz", ["fit", "--measurements", "inf_bsz.csv", "--out", "out.json"], 2),
    ("fit duplicate column", ["fit", "--measurements", "dup.csv", "--out", "out.json"], 2),
    ("fit out is folder", ["fit", "--measurements", "m.csv", "--out", "."], 2),
    ("fit parent is a file", ["fit", "--measurements", "m.csv", "--out", "afile/m.json"], 2),
    (
        "predict inf bsz",
        ["predict", "--model", "model.json", "--configs", "inf_cfg.csv", "--out", "out.csv"],
        2,
    ),
    (
        "predict inf nodes",
        ["predict", "--model", "model.json", "--configs", "inf_nodes.csv", "--out", "out.csv"],
        2,
    ),
    (
        "predict out is folder",
        ["predict", "--model", "model.json", "--configs", "c.csv", "--out", "."],
        2,
    ),
    (
        "predict out is a folder",
        ["predict", "--model", "model.json", "--configs", "c.csv", "--out", "dir.csv"],
        2,
    ),
    ("search inf price", [*SEARCH, "--catalog", "inf_catalog.csv"], 2),
    ("search other region", [*SEARCH, "--region", "eu-west-1"], 2),
    ("search out suffix", [*SEARCH, "--out", "r.txt"], 2),
    ("search json out suffix", [*SEARCH, "--format", "json", "--out", "out.csv"], 2),
    (
        "search nan samples",
        ["search", "--model", "model.json", "--workload", "cnn", "--samples", "nan"],
        2,
    ),
    ("search zero confidence", [*SEARCH, "--confidence", "0"], 2),
    (
        "refresh zero attempts",
        ["catalog", "refresh", "--region", "us-east-1", "--out", "cat.csv", "--max-attempts", "0"],
        2,
    ),
    (
        "refresh negative attempts",
        ["catalog", "refresh", "--region", "us-east-1", "--out", "cat.csv", "--max-attempts", "-1"],
        2,
    ),
    (
        "refresh bad url",
        [
            "catalog",
            "refresh",
            "--region",
            "us-east-1",
            "--out",
            "cat.csv",
            "--endpoint-url",
            "not a url",
        ],
        2,
    ),
    (
        "profile negative memory",
        ["profile", "--batch-sizes", "4", "--out", "p.csv", "--memory-budget-gib", "-1"],
        2,
    ),
    (
        "profile zero memory",
        ["profile", "--batch-sizes", "4", "--out", "p.csv", "--memory-budget-gib", "0"],
        2,
    ),
    ("profile out parent is a file", ["profile", "--batch-sizes", "4", "--out", "afile/p.csv"], 2),
    ("profile batch 0", ["profile", "--batch-sizes", "0", "--out", "p.csv"], 2),
    (
        "profile-dist zero timeout",
        ["profile-dist", "--batch-sizes", "4", "--out", "d.csv", "--timeout", "0"],
        2,
    ),
    (
        "profile-dist negative timeout",
        ["profile-dist", "--batch-sizes", "4", "--out", "d.csv", "--timeout", "-1"],
        2,
    ),
    ("profile-dist out is folder", ["profile-dist", "--batch-sizes", "4", "--out", "."], 2),
    ("demo zero samples", ["demo", "--out", "demo", "--samples", "0"], 2),
    ("demo negative deadline", ["demo", "--out", "demo", "--deadline-h", "-1"], 2),
    ("demo out is a file", ["demo", "--out", "afile"], 2),
]


def _bad_tables(tmp_path: Path) -> None:
    inf = float("inf")
    _table(tmp_path, "inf_step.csv", GOOD.assign(step_time_s=[0.1, inf, 0.12, 0.13]))
    _table(tmp_path, "inf_sync.csv", GOOD.assign(sync_time_s=[0.0, 0.0, inf, 0.03]))
    _table(tmp_path, "inf_bsz.csv", GOOD.assign(local_bsz=[8, 16, inf, 8]))
    dup = GOOD.copy()
    (tmp_path / "dup.csv").write_text(dup.to_csv(index=False).replace("sync_time_s", "local_bsz"))
    cfg = CONFIGS.assign(instance_type=SAMPLE_TYPE)
    _table(tmp_path, "inf_cfg.csv", cfg.assign(local_bsz=[8, inf, 8, 8]))
    _table(tmp_path, "inf_nodes.csv", cfg.assign(num_nodes=[1, inf, 1, 1]))
    catalog = pd.read_csv(REPO / "data" / "ec2_catalog_us-east-1.csv")
    one = catalog[catalog["instance_type"] == "g4dn.xlarge"].assign(ondemand_usd_per_hr=inf)
    _table(tmp_path, "inf_catalog.csv", one)


@pytest.mark.parametrize(("case", "args", "code"), CASES, ids=[c[0] for c in CASES])
def test_mistakes_exit_with_one_line_and_touch_nothing(tmp_path, case, args, code):
    _bad_tables(tmp_path)
    before = _folder(tmp_path)
    done = run_srifty(*args, cwd=tmp_path, timeout=120)
    _check(done, before, tmp_path, code)
    new = _new_entries(tmp_path, before)
    assert not new, f"{case} left {sorted(new)}"
    if case.startswith("search"):
        assert done.stdout == ""  # refused before answering, not after printing the result


def test_a_vcpu_quota_no_type_fits_is_named_as_the_reason(tmp_path):
    before = _folder(tmp_path)
    done = run_srifty(*SEARCH, "--vcpu-quota", "1", "--format", "json", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    doc = json.loads(done.stdout)
    assert doc["binding"] == "filters" and doc["skipped"]
    over = [t for t, why in doc["skipped"].items() if why.startswith("over the vCPU quota of 1")]
    assert "g4dn.xlarge" in over and "p4d.24xlarge" in over
    assert "over the vCPU quota of 1" in doc["infeasible_reason"]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_types_a_filter_dropped_are_not_said_to_lack_gpu_figures(tmp_path):
    # the g5 types (A10G, no catalog figures) are over a vCPU quota of 1 like every other: to
    # "measure one step on each A10G type to search" would not bring them back
    _folder(tmp_path)
    free = run_srifty(*SEARCH, cwd=tmp_path)
    assert free.returncode == 0 and "left out the A10G" in free.stdout
    for limit in (["--vcpu-quota", "1"], ["--min-gpu-memory-gib", "1000"]):
        done = run_srifty(*SEARCH, *limit, cwd=tmp_path)
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert "left out the A10G" not in done.stdout, limit


def test_a_write_that_fails_at_the_end_keeps_the_result_and_says_where(tmp_path):
    # /proc takes no new file, so the command refuses it before the work (see the issue-19
    # cases); a write that still fails at the end (the disk filled, permissions changed in
    # between) is atomic_write's to keep: here it is asked to write there directly
    from srifty_kit.errors import InputError
    from srifty_kit.tables.files import write_json

    doc = json.loads(MODEL.read_text())
    with pytest.raises(InputError) as err:
        write_json(doc, "/proc/srifty-m.json")
    kept = Path(str(err.value).split("kept in ")[1].split(";")[0])
    assert kept.is_file() and json.loads(kept.read_text()) == doc
    kept.unlink()


def test_predictions_far_beyond_the_measurements_are_warned_about(tmp_path):
    before = _folder(tmp_path)
    far = CONFIGS.assign(instance_type=SAMPLE_TYPE, num_nodes=1000, num_workers=4000)
    _table(tmp_path, "far.csv", far)
    done = run_srifty(
        "predict",
        "--model",
        "model.json",
        "--configs",
        "far.csv",
        "--out",
        "far_pred.csv",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "warning" in line]
    assert warned and "1000 nodes" in warned[0] and "Traceback" not in done.stderr
    assert all(line.startswith("srifty: warning:") for line in done.stderr.splitlines())
    assert (tmp_path / "far_pred.csv").is_file()
    assert all((tmp_path / n).read_bytes() == b for n, b in before.items())


SUBCOMMANDS = st.sampled_from(["fit", "predict", "search", "profile", "catalog refresh", "demo"])
# none of these is a valid value of any of the flags below
TEXT = st.sampled_from(["-1", "0", "nan", "inf", "-inf", "1e999", "", "x", "4,,x", "--"])


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(command=SUBCOMMANDS, value=TEXT)
def test_any_malformed_number_is_refused_before_work_starts(tmp_path, command, value):
    flag = {
        "fit": ["fit", "--measurements", "m.csv", "--out", "new.json", "--level", value],
        "predict": [
            "predict",
            "--model",
            "model.json",
            "--configs",
            "c.csv",
            "--out",
            "n.csv",
            "--level",
            value,
        ],
        "search": [*SEARCH[:-2], "--samples", "1e6", "--deadline-h", value],
        "profile": ["profile", "--batch-sizes", value or ",", "--out", "p.csv"],
        "catalog refresh": [
            "catalog",
            "refresh",
            "--region",
            "r",
            "--out",
            "c2.csv",
            "--max-attempts",
            value,
        ],
        "demo": ["demo", "--out", "d", "--seconds", value],
    }[command]
    for stale in ("new.json", "n.csv", "p.csv", "c2.csv"):
        (tmp_path / stale).unlink(missing_ok=True)
    before = _folder(tmp_path)
    done = run_srifty(*flag, cwd=tmp_path, timeout=120)
    _check(done, before, tmp_path, 2)
    assert not _new_entries(tmp_path, before)


# -- issue 19: nothing lost, every check before the work, one line for every mistake ---------

P4D = "p4d.24xlarge"  # 8 GPUs per node in the embedded catalog


def _model_file(path: Path, edit) -> str:
    """The test model with ``edit(doc)`` applied and its checksum recomputed: a file that
    passes the checksum but holds values no fit writes."""
    from srifty_kit.model import persist

    doc = json.loads(MODEL.read_text())
    edit(doc)
    body = {k: v for k, v in doc.items() if k != "sha256"}
    path.write_text(json.dumps({**body, "sha256": persist._checksum(body)}))
    return path.name


def _params(doc: dict) -> dict:
    return next(g["params"] for g in doc["groups"] if "params" in g)


def _negative_beta(doc: dict) -> None:
    _params(doc)["beta_c"] = -0.5


def _zero_compute(doc: dict) -> None:
    _params(doc).update(alpha_c=0.0, beta_c=0.0)


BAD_MODULE = """
import torch
from srifty_kit.measure.zoo import mlp

def boom():
    raise RuntimeError("no weights here")

def wrong_shape():
    return mlp()._replace(make_batch=lambda b: (torch.randn(b, 7), torch.randint(0, 10, (b,))))

def fixed_rows():
    return mlp()._replace(make_batch=lambda b: (torch.randn(32, 256), torch.randint(0, 10, (32,))))
"""


def _issue_19_files(tmp_path: Path) -> None:
    """The inputs the issue-19 cases read (made before the folder's bytes are taken)."""
    GOOD.to_json(tmp_path / "meas.json", orient="records")
    (tmp_path / "array.json").write_text("[1, 2, 3]\n")
    (tmp_path / "text_ns.json").write_text('{"noise_scale": "big"}\n')
    (tmp_path / "badmod.py").write_text(BAD_MODULE)
    _model_file(tmp_path / "m_gpus.json", lambda d: d.update(gpus_per_node=[]))
    _model_file(tmp_path / "m_neg.json", _negative_beta)
    _model_file(tmp_path / "m_zero.json", _zero_compute)
    _table(tmp_path, "huge_step.csv", GOOD.assign(step_time_s=[0.1, 1e308, 0.12, 0.13]))
    _table(tmp_path, "sync_over.csv", GOOD.assign(sync_time_s=[0.0, 0.0, 0.5, 0.03]))
    _table(tmp_path, "placed.csv", GOOD.assign(placement=["1", "1", "11", "4"]))
    p4d = GOOD.assign(instance_type=P4D, gpus_per_node=4)
    _table(tmp_path, "p4d.csv", p4d)
    _table(tmp_path, "nodes_1e20.csv", GOOD.assign(num_nodes=[1, 1e20, 1, 1]))
    catalog = pd.read_csv(REPO / "data" / "ec2_catalog_us-east-1.csv")
    _table(tmp_path, "cat.csv", catalog)
    (tmp_path / "model.json").write_bytes(MODEL.read_bytes())
    os.symlink("model.json", tmp_path / "model_link.json")
    os.link(tmp_path / "model.json", tmp_path / "model_hard.json")


PREDICT = ["predict", "--model", "model.json", "--configs", "c.csv"]
PROFILE = ["profile", "--batch-sizes", "4", "--max-seconds", "5", "--quiet"]

# (case, arguments, exit code, words the one line must hold)
ISSUE_19 = [
    # 1. an output that is an input (or another output) is refused, naming both flags
    ("predict out is the model", [*PREDICT, "--out", "model.json"], 2, "--out model.json is"),
    ("predict out is the configs", [*PREDICT, "--out", "c.csv"], 2, "--configs c.csv"),
    (
        "search json out is the model",
        [*SEARCH, "--format", "json", "--out", "model.json"],
        2,
        "--model model.json",
    ),
    (
        "search out is a symlink to the model",
        [*SEARCH, "--format", "json", "--out", "model_link.json"],
        2,
        "--model model.json",
    ),
    (
        "search out is a hard link of the model",
        [*SEARCH, "--format", "json", "--out", "model_hard.json"],
        2,
        "--model model.json",
    ),
    (
        "search out is the catalog",
        [*SEARCH, "--catalog", "cat.csv", "--out", "./sub/../cat.csv"],
        2,
        "--catalog cat.csv",
    ),
    (
        "fit out is the measurements",
        ["fit", "--measurements", "meas.json", "--out", "meas.json"],
        2,
        "--measurements meas.json",
    ),
    (
        "profile-dist collectives out is out",
        ["profile-dist", "--batch-sizes", "4", "--collectives-out", "a.csv", "--out", "a.csv"],
        2,
        "--collectives-out a.csv and --out a.csv",
    ),
    (
        "profile out is its own partial file",
        [
            "profile-dist",
            "--batch-sizes",
            "4",
            "--collectives-out",
            "a.partial.csv",
            "--out",
            "a.csv",
        ],
        2,
        "a.partial.csv",
    ),
    # 4. and 6. a folder that takes no file is refused at once, before any work
    ("fit out under /sys", ["fit", "--measurements", "m.csv", "--out", "/sys/m.json"], 2, "/sys"),
    ("profile out under /sys", [*PROFILE, "--out", "/sys/p.csv"], 2, "/sys"),
    ("profile out under /proc", [*PROFILE, "--out", "/proc/p.csv"], 2, "/proc"),
    (
        "profile-dist out under /sys",
        ["profile-dist", "--batch-sizes", "4", "--out", "/sys/d.csv"],
        2,
        "/sys",
    ),
    ("demo out under /sys", ["demo", "--out", "/sys/srifty-demo"], 2, "/sys"),
    ("search out under /sys", [*SEARCH, "--out", "/sys/r.csv"], 2, "/sys"),
    # 6. tracebacks for user mistakes
    ("search facts is an array", [*SEARCH, "--facts", "array.json"], 2, "a list"),
    ("search facts noise scale text", [*SEARCH, "--facts", "text_ns.json"], 2, "'big'"),
    (
        "profile callable raises",
        [*PROFILE, "--model", "badmod:boom", "--out", "q.csv"],
        2,
        "no weights here",
    ),
    (
        "profile batch of the wrong shape",
        [*PROFILE, "--model", "badmod:wrong_shape", "--out", "q.csv"],
        2,
        "mat1 and mat2",
    ),
    (
        "profile batch ignores its size",
        [*PROFILE, "--model", "badmod:fixed_rows", "--out", "q.csv"],
        2,
        "not 4 samples",
    ),
    (
        "model gpus_per_node empty",
        [*PREDICT[:2], "m_gpus.json", *PREDICT[3:], "--out", "n.csv"],
        2,
        "gpus_per_node",
    ),
    (
        "model negative parameter",
        [*PREDICT[:2], "m_neg.json", *PREDICT[3:], "--out", "n.csv"],
        2,
        "beta_c",
    ),
    (
        "model zero compute",
        [*PREDICT[:2], "m_zero.json", *PREDICT[3:], "--out", "n.csv"],
        2,
        "takes no time",
    ),
    (
        "search model negative parameter",
        ["search", "--model", "m_neg.json", *SEARCH[3:]],
        2,
        "beta_c",
    ),
    # 8. an enumeration that would not fit is refused with its estimate
    ("search max nodes 100000", [*SEARCH, "--max-nodes", "100000"], 2, "GiB of memory"),
    # 12. measurements that cannot be
    ("fit step 1e308", ["fit", "--measurements", "huge_step.csv", "--out", "n.json"], 2, "one day"),
    (
        "fit sync over step",
        ["fit", "--measurements", "sync_over.csv", "--out", "n.json"],
        2,
        "longer than the whole step",
    ),
    (
        "fit placement contradicts workers",
        ["fit", "--measurements", "placed.csv", "--out", "n.json"],
        2,
        "placement '11' does not describe 2 workers",
    ),
    (
        "fit gpus per node of p4d",
        ["fit", "--measurements", "p4d.csv", "--out", "n.json"],
        2,
        "8 GPUs per node",
    ),
    (
        "fit nodes 1e20",
        ["fit", "--measurements", "nodes_1e20.csv", "--out", "n.json"],
        2,
        "found 1e+20",
    ),
    # 13. small ones
    ("search local bsz with a blank", [*SEARCH, "--local-bsz", "8,,16"], 2, "'8,,16'"),
    ("search instance types with a blank", [*SEARCH, "--instance-types", "a,,b"], 2, "'a,,b'"),
    ("search fallback without spot", [*SEARCH, "--fallback-after", "2"], 2, "--spot"),
    (
        "search hint names the flag",
        ["search", "--model", "model.json", "--workload", "cnn", "--epochs", "3"],
        2,
        "give --dataset-size",
    ),
    (
        "search noise scale hint names the flag",
        [*SEARCH, "--noise-scale", "100"],
        2,
        "give --reference-bsz",
    ),
    (
        "search steps hint names the flag",
        ["search", "--model", "model.json", "--workload", "cnn", "--steps", "300"],
        2,
        "give --reference-bsz",
    ),
]


@pytest.mark.parametrize(("case", "args", "code", "words"), ISSUE_19, ids=[c[0] for c in ISSUE_19])
def test_issue_19_mistakes_are_one_line_before_any_work_and_touch_nothing(
    tmp_path, case, args, code, words
):
    _issue_19_files(tmp_path)
    before = _folder(tmp_path)
    recovered = set(Path(tempfile.gettempdir()).glob("srifty-recovered-*"))
    done = run_srifty(*args, cwd=tmp_path, timeout=120)
    _check(done, before, tmp_path, code)
    assert words in done.stderr, done.stderr
    # refused before the work: never the end-of-work failure that keeps a recovery file
    assert "could not write" not in done.stderr and "kept in" not in done.stderr
    assert set(Path(tempfile.gettempdir()).glob("srifty-recovered-*")) == recovered
    assert "-9.22" not in done.stderr and "TraitError" not in done.stderr
    new = _new_entries(tmp_path, before) - {"__pycache__"}
    assert not new, f"{case} left {sorted(new)}"
    assert done.stdout == ""  # refused before answering, not after the work


def test_an_infeasible_search_leaves_an_older_out_as_it_was(tmp_path):
    before = _folder(tmp_path)
    for fmt, out in (("csv", "out.csv"), ("json", "out.json"), ("table", "out.csv")):
        done = run_srifty(
            *SEARCH, "--deadline-h", "1e-9", "--format", fmt, "--out", out, cwd=tmp_path
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        # the sentences are stdout's with the table, stderr's beside a JSON or CSV document
        said = done.stdout if fmt == "table" else done.stderr
        assert f"nothing written to {out}" in said and "as it was" in said
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_the_shipped_sample_facts_give_the_search_its_noise_scale(tmp_path):
    _folder(tmp_path)
    facts = REPO / "data" / "sample_profile_facts.json"
    scale = json.loads(facts.read_text())["cnn"]["noise_scale"]
    asked = [*SEARCH, "--format", "json", "--families", "g4dn", "--reference-bsz", "64"]
    done = run_srifty(*asked, "--facts", str(facts), cwd=tmp_path)
    assert done.returncode in (0, 1) and done.stderr == "", done.stderr
    given = run_srifty(*asked, "--noise-scale", repr(scale), cwd=tmp_path)
    assert json.loads(done.stdout)["ranked"] == json.loads(given.stdout)["ranked"]
    other = run_srifty(*SEARCH[:4], "nope", *SEARCH[5:], "--facts", str(facts), cwd=tmp_path)
    assert other.returncode == 2 and len(other.stderr.strip().splitlines()) == 1
    assert "no facts for the training model 'nope'" in other.stderr


def test_model_memory_alone_filters_the_gpus_it_does_not_fit(tmp_path):
    _folder(tmp_path)
    base = [*SEARCH, "--format", "json", "--families", "g4dn,p4d"]
    free = json.loads(run_srifty(*base, cwd=tmp_path).stdout)
    assert free["n_candidates"] > 0
    big = run_srifty(*base, "--model-memory-gib", "1e6", cwd=tmp_path)
    assert big.returncode == 1, big.stderr  # nothing holds a million GiB: nothing fits
    assert json.loads(big.stdout)["n_candidates"] == 0
    # 20 GiB fits a p4d's 40 GiB A100s, not a g4dn's 16 GiB T4s
    mid = json.loads(run_srifty(*base, "--model-memory-gib", "20", cwd=tmp_path).stdout)
    kinds = {r["instance_type"].split(".")[0] for r in mid["ranked"]}
    assert mid["n_candidates"] > 0 and kinds == {"p4d"}


def test_a_catalog_price_of_zero_is_no_price_never_a_free_pick(tmp_path):
    _folder(tmp_path)
    catalog = pd.read_csv(REPO / "data" / "ec2_catalog_us-east-1.csv")
    free = catalog["instance_type"] == "g4dn.xlarge"
    catalog.loc[free, ["ondemand_usd_per_hr", "spot_usd_per_hr"]] = 0.0
    catalog.to_csv(tmp_path / "zero.csv", index=False)
    done = run_srifty(
        *SEARCH,
        "--catalog",
        "zero.csv",
        "--families",
        "g4dn",
        "--spot",
        "--format",
        "json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["pick"]["instance_type"] != "g4dn.xlarge" and doc["pick"]["cost_usd"] > 0
    assert all(r["usd_per_hr"] > 0 for r in doc["ranked"])
    assert "price of 0" in doc["skipped"]["g4dn.xlarge"]


def test_predictions_at_batches_far_outside_the_fitted_range_are_warned_about(tmp_path):
    before = _folder(tmp_path)
    far = CONFIGS.assign(instance_type=SAMPLE_TYPE, local_bsz=10**15)
    _table(tmp_path, "far_b.csv", far)
    done = run_srifty(*PREDICT[:3], "--configs", "far_b.csv", "--out", "p.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("srifty: warning:") and "1e+15" in line and "extrapolated" in line
    assert all((tmp_path / n).read_bytes() == b for n, b in before.items())
