"""Every subcommand, given a mistake, answers with one line and exit code 2 and touches nothing.

Each case runs the real console script in a folder that already holds files (an older output
among them) and checks: the exit code, exactly one line on stderr, no traceback, and every
file that was there before byte-identical afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import REPO, run_srifty

pytestmark = pytest.mark.slow

DATA = REPO / "tests" / "data"
MODEL = DATA / "model_v3_before_layout.json"
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
    CONFIGS.assign(instance_type="local-cpu-amd-epyc-2c").to_csv(tmp_path / "c.csv", index=False)
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
    cfg = CONFIGS.assign(instance_type="local-cpu-amd-epyc-2c")
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


def test_a_write_that_fails_at_the_end_keeps_the_result_and_says_where(tmp_path):
    # /proc accepts no new file, even from root: the check passes, the write itself fails
    GOOD.to_csv(tmp_path / "m.csv", index=False)
    done = run_srifty(
        "fit", "--measurements", "m.csv", "--out", "/proc/srifty-m.json", cwd=tmp_path
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    kept = Path(line.split("kept in ")[1].split(";")[0])
    assert kept.is_file()
    from srifty_kit import StepTimeModel

    assert StepTimeModel.load(kept).models_ == ["m"]
    kept.unlink()


def test_predictions_far_beyond_the_measurements_are_warned_about(tmp_path):
    before = _folder(tmp_path)
    far = CONFIGS.assign(instance_type="local-cpu-amd-epyc-2c", num_nodes=1000, num_workers=4000)
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
