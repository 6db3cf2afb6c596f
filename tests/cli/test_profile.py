"""``srifty profile`` and ``srifty profile-dist`` through the real console script."""

from __future__ import annotations

import os
import re
import subprocess
import textwrap

import pytest

from srifty_kit.tables.contracts import MEASUREMENTS, validate_measurements
from srifty_kit.tables.files import read_table
from tests.builders import REPO, run_srifty

pytestmark = pytest.mark.slow


def _run(args, cwd, timeout=240):
    return run_srifty(*args, cwd=cwd, timeout=timeout)


def test_profile_writes_one_row_per_step_and_prints_the_precision(tmp_path):
    done = _run(
        [
            "profile",
            "--model",
            "mlp",
            "--batch-sizes",
            "4,8",
            "--max-seconds",
            "5",
            "--out",
            "p.csv",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    table = read_table(tmp_path / "p.csv")
    validate_measurements(table)
    assert {c.name for c in MEASUREMENTS if c.required} <= set(table.columns)
    assert table["local_bsz"].nunique() >= 2
    assert (table["step_time_s"] > 0).all()
    assert "precision" in done.stdout and "stop_reason" in done.stdout
    # the summary flags a level shift as drift (README), not only the shift's size
    header = next(line for line in done.stdout.splitlines() if "stop_reason" in line)
    assert "shift" in header.split() and "drift" in header.split()
    assert (tmp_path / "p.facts.json").is_file()


def test_profile_of_one_step_says_step_not_steps(tmp_path):
    done = _run(
        ["profile", "--model", "mlp", "--batch-sizes", "4", "--max-seconds", "0.001",
         "--out", "p.csv"],
        tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(read_table(tmp_path / "p.csv")) == 1
    assert "): 1 step written to p.csv" in done.stdout, done.stdout


def test_profile_of_a_batch_size_too_large_for_memory_says_to_give_smaller_ones(tmp_path):
    huge = str(2**40)  # 2**40 samples of the mlp's inputs: no machine allocates them
    done = _run(["profile", "--model", "mlp", "--batch-sizes", huge, "--out", "p.csv"], tmp_path)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"to fix: give smaller --batch-sizes ({huge} does not fit" in done.stderr
    assert not (tmp_path / "p.csv").exists()


BUDGET_TOO_SMALL = {
    "profile": (
        ["profile", "--model", "mlp", "--batch-sizes", "4,8", "--max-seconds", "0.001",
         "--quiet", "--out", "p.csv"],
        ("local_bsz", {4, 8}),
        ["at batch sizes 4 (1 step), 8 (1 step)"],
    ),
    # a DDP step whose mean the budget left far from the target is said as profile says it
    "profile-dist": (
        ["profile-dist", "--model", "mlp", "--world-sizes", "1,2", "--batch-sizes", "4",
         "--max-seconds", "1", "--target-precision", "0.0001", "--device", "cpu",
         "--quiet", "--out", "p.csv"],
        ("num_workers", {1, 2}),
        ["4 at world size 1", "4 at world size 2"],
    ),
}  # fmt: skip


@pytest.mark.parametrize("command", list(BUDGET_TOO_SMALL))
def test_a_budget_too_small_warns_once_in_the_flag_and_keeps_the_rows(tmp_path, command):
    args, (column, values), named = BUDGET_TOO_SMALL[command]
    done = _run(args, tmp_path)
    assert done.returncode == 0, done.stderr
    assert set(read_table(tmp_path / "p.csv")[column]) == values
    said = [line for line in done.stderr.splitlines() if "time budget ran out" in line]
    assert len(said) == 1, done.stderr  # once, in the command's flag (not max_seconds=)
    assert all(n in said[0] for n in named), said[0]
    assert re.search(r"give --max-seconds [0-9.]+ or more", said[0]), said[0]
    assert said[0].startswith("srifty: warning: ")


def test_profile_dist_writes_rows_with_two_workers(tmp_path):
    done = _run(
        [
            "profile-dist",
            "--model",
            "mlp",
            "--world-sizes",
            "2",
            "--batch-sizes",
            "8",
            "--max-seconds",
            "10",
            "--out",
            "d.csv",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    table = validate_measurements(read_table(tmp_path / "d.csv"))
    assert (table["num_workers"] == 2).all() and len(table) > 0
    assert "precision" in done.stdout
    # its progress names what it counts: no "samples=0" beside the steps of a run that
    # timed no all-reduce sweep (an ML reader takes samples for training examples)
    bar = [line for line in done.stderr.splitlines() if line.startswith("distributed")]
    assert bar and "world=2, steps=" in bar[-1] and "samples" not in done.stderr, bar


BREAKS_LATER = """
import torch
import torch.distributed as dist

from srifty_kit.measure.zoo import mlp


class BreaksLater(torch.nn.Module):  # rank 1's steps raise from its 20th forward pass on
    def __init__(self, inner):
        super().__init__()
        self.inner, self.calls = inner, 0

    def forward(self, x):
        self.calls += 1
        if dist.is_initialized() and dist.get_rank() == 1 and self.calls >= 20:
            raise ValueError("the model broke")
        return self.inner(x)


def build():
    spec = mlp()
    return spec._replace(model=BreaksLater(spec.model), name="breaks_later")
"""


def test_profile_dist_says_a_step_that_fails_while_timed_in_one_line(tmp_path):
    (tmp_path / "breaks_later.py").write_text(BREAKS_LATER)
    args = ["profile-dist", "--model", "breaks_later:build", "--world-sizes", "1,2"]
    args += ["--batch-sizes", "4", "--max-seconds", "4", "--target-precision", "0.000001"]
    done = _run([*args, "--quiet", "--out", "d.csv"], tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    said = done.stderr.strip().splitlines()
    assert len(said) == 1, done.stderr
    assert said[0].startswith(
        "srifty profile-dist: error: a training step at batch size 4 failed after "
    ), said[0]
    assert "ValueError: the model broke (worker rank 1 of 2, measuring DDP steps" in said[0]
    kept = validate_measurements(read_table(tmp_path / "d.csv"))
    assert set(kept["num_workers"]) == {1, 2}  # world size 1, and 2 before its failure
    assert (
        f"{len(kept):,} steps and 0 all-reduce samples measured before are kept in d.csv; "
        in (said[0])
    )
    assert said[0].endswith("runs these steps in one process)"), said[0]


def test_model_callable_from_the_current_directory(tmp_path):
    (tmp_path / "mine.py").write_text(
        textwrap.dedent("""
        import torch
        from srifty_kit.measure.zoo import ModelSpec

        def build():
            return ModelSpec(torch.nn.Linear(16, 3),
                             lambda b: (torch.randn(b, 16), torch.randint(0, 3, (b,))),
                             torch.nn.CrossEntropyLoss(),
                             lambda p: torch.optim.SGD(p, lr=0.1), name="tiny")
        """)
    )
    done = _run(
        [
            "profile",
            "--model",
            "mine:build",
            "--batch-sizes",
            "2,4",
            "--max-seconds",
            "2",
            "--out",
            "p.parquet",
            "--quiet",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert set(read_table(tmp_path / "p.parquet")["model"]) == {"tiny"}


@pytest.mark.parametrize(
    "args, said",
    [
        (["profile", "--model", "mlp", "--batch-sizes", "0,8"], "--batch-sizes"),
        (["profile", "--model", "mpl", "--batch-sizes", "8"], "did you mean 'mlp'"),
        (["profile-dist", "--world-sizes", "99", "--batch-sizes", "8"], "world size 99"),
        (["profile", "--facts-only", "--batch-sizes", "4,8"], "takes no --batch-sizes"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, said):
    done = _run([*args, "--out", "x.csv"], tmp_path)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0]
    assert not (tmp_path / "x.csv").exists()


def test_help_documents_the_model_contract_and_torchrun(tmp_path):
    profile = _run(["profile", "--help"], tmp_path).stdout
    assert "MODULE:CALLABLE" in profile and "make_batch" in profile
    dist = _run(["profile-dist", "--help"], tmp_path).stdout
    assert "torchrun --nnodes" in dist and "--master-addr" in dist


def test_cuda_check_fails_loudly_without_cuda(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the check would run for real")
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), str(REPO / "benchmarks" / "cuda_check.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OUT": str(tmp_path)},
    )
    assert done.returncode == 2
    assert "CUDA is not available" in done.stderr
    assert not list(tmp_path.iterdir())  # nothing half-written


@pytest.mark.slow
def test_facts_only_never_replaces_the_facts_a_timed_profile_measured(tmp_path):
    timed = run_srifty(
        "profile", "--model", "mlp", "--batch-sizes", "4,8", "--max-seconds", "2",
        "--out", "p.csv", "--quiet", "--no-op-trace", cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert timed.returncode == 0, timed.stderr
    facts = tmp_path / "p.facts.json"
    measured = facts.read_bytes()
    assert b'"noise_scale"' in measured
    for out in ("p.csv", "p.facts.json"):  # the table's name, or the facts file's own
        done = run_srifty("profile", "--facts-only", "--model", "mlp", "--out", out, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "would replace" in done.stderr and len(done.stderr.strip().splitlines()) == 1
        assert facts.read_bytes() == measured
    # an earlier facts-only file is this run's to replace
    for _ in range(2):
        only = ["profile", "--facts-only", "--model", "mlp", "--out", "m.json"]
        done = run_srifty(*only, cwd=tmp_path)
        assert done.returncode == 0, done.stderr


def test_the_summary_prints_bytes_whole_and_a_dash_where_nothing_was_measured():
    # a batch size that measured no step leaves peak memory empty, which makes the column
    # float: it printed 4.496e+08 for the others
    import numpy as np
    import pandas as pd

    from srifty_kit.cli.profile import _fmt

    table = pd.DataFrame(
        {
            "local_bsz": [4, 8],
            "mean": [0.00064, np.nan],
            "peak_memory_bytes": [449_600_000.0, np.nan],
        }
    )
    lines = _fmt(table, ["local_bsz", "mean", "peak_memory_bytes"]).splitlines()
    assert lines[1].split() == ["4", "0.00064", "449600000"]
    assert lines[2].split() == ["8", "-", "-"]
