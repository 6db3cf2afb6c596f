"""Distributed runs that go wrong end with a clear error in time and keep what was measured."""

from __future__ import annotations

import textwrap

import pytest

from srifty_kit import InputError
from srifty_kit.measure.distributed.profile import (
    WorkerFailed,
    WorkerInputError,
    profile_distributed,
)
from srifty_kit.measure.profile import ProfileWarning
from srifty_kit.tables.files import read_table

pytestmark = pytest.mark.slow
QUIET = {"progress": False, "warmup": 1, "min_steps": 3, "device": "cpu"}


@pytest.fixture
def model_module(tmp_path, monkeypatch):
    """A MODULE:CALLABLE whose rank-1 worker misbehaves at its 12th forward pass: dies, hangs
    or raises (a training step that fails after the first ones trained)."""

    def write(behaviour: str) -> str:
        name = f"flaky_{behaviour}"
        (tmp_path / f"{name}.py").write_text(
            textwrap.dedent(f"""
            import os, time
            import torch
            import torch.distributed as dist
            from srifty_kit.measure.zoo import mlp

            class Flaky(torch.nn.Module):
                def __init__(self, inner):
                    super().__init__()
                    self.inner, self.calls = inner, 0

                def forward(self, x):
                    self.calls += 1
                    if dist.is_initialized() and dist.get_rank() == 1 and self.calls == 12:
                        if "{behaviour}" == "dies":
                            os._exit(3)
                        if "{behaviour}" == "raises":
                            raise ValueError("the model broke at its 12th call")
                        time.sleep(3600)
                    return self.inner(x)

            def build():
                spec = mlp()
                return spec._replace(model=Flaky(spec.model), name="flaky")
            """)
        )
        monkeypatch.syspath_prepend(str(tmp_path))
        return f"{name}:build"

    return write


def test_a_worker_that_dies_ends_the_run_with_a_clear_error_and_keeps_what_was_measured(
    tmp_path, model_module
):
    out = tmp_path / "d.csv"
    with pytest.raises(WorkerFailed, match=r"rank 1 of 2 exited with code 3 .*batch size 4") as e:
        profile_distributed(
            model_module("dies"),
            [1, 2],
            [4],
            max_seconds=4,
            measure_sync=False,
            timeout_s=60,
            out=out,
            **QUIET,
        )
    kept = read_table(out)
    assert (kept["num_workers"] == 1).sum() > 0  # world size 1 finished before
    assert len(e.value.result.measurements) == len(kept)  # and all of it reached the file
    assert "kept" in str(e.value)


def test_a_step_that_fails_while_timed_names_its_batch_size_and_keeps_the_rows(
    tmp_path, model_module
):
    out = tmp_path / "d.csv"
    said = r"training step at batch size 4 failed after \d+ steps: ValueError: the model broke"
    with pytest.raises(WorkerInputError, match=said) as e:
        profile_distributed(
            model_module("raises"),
            [1, 2],
            [4],
            max_seconds=4,
            target_precision=1e-6,  # both world sizes run their time: rank 1 reaches call 12
            measure_sync=False,
            timeout_s=60,
            out=out,
            **QUIET,
        )
    line = str(e.value)
    assert isinstance(e.value, InputError) and "\n" not in line
    assert "(worker rank 1 of 2, measuring DDP steps at batch size 4)" in line, line
    kept = read_table(out)
    assert set(kept["num_workers"]) == {1, 2}  # world size 2's steps before the failure too
    assert len(e.value.result.measurements) == len(kept)  # every row reached the file
    assert f"{len(kept):,} steps and 0 all-reduce samples measured before are kept in" in line
    assert line.index("kept in") < line.index("; to fix:"), line  # the fix comes last


def test_a_worker_that_hangs_ends_the_run_after_the_timeout(model_module):
    with pytest.raises(WorkerFailed, match=r"answered for 5 s .*hung") as e:
        profile_distributed(
            model_module("hangs"),
            [2],
            [4],
            max_seconds=30,
            target_precision=1e-6,
            measure_sync=False,
            timeout_s=5,
            **QUIET,
        )
    assert len(e.value.result.measurements) > 0  # the steps before the hang


def test_bad_input_inside_a_worker_is_an_input_error(tmp_path, monkeypatch):
    (tmp_path / "per_sample_loss.py").write_text(
        textwrap.dedent("""
        import torch
        from srifty_kit.measure.zoo import mlp

        def build():
            return mlp()._replace(loss_fn=torch.nn.CrossEntropyLoss(reduction="none"))
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(InputError, match=r"not a scalar tensor.*worker rank 0 of 1"):
        profile_distributed("per_sample_loss:build", [1], [4], max_seconds=2, **QUIET)


def test_a_batch_the_model_cannot_take_is_an_input_error(tmp_path, monkeypatch):
    (tmp_path / "wrong_width.py").write_text(
        textwrap.dedent("""
        import torch
        from srifty_kit.measure.zoo import mlp

        def build():
            def make_batch(b):  # 255 features for a model that takes 256
                return torch.randn(b, 255), torch.randint(0, 10, (b,))

            return mlp()._replace(make_batch=make_batch)
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "d.csv"
    with pytest.raises(InputError, match=r"training step at batch size 4 failed: Runtime") as e:
        profile_distributed("wrong_width:build", [1], [4], max_seconds=2, out=out, **QUIET)
    assert not out.exists() and not (tmp_path / "d.partial.csv").exists()
    assert "kept in" not in str(e.value)  # no file holds the rows: there are none
    assert "nothing was measured before it, so nothing was written" in str(e.value)


def test_a_batch_size_whose_step_fails_is_reported_and_the_others_measured(tmp_path, monkeypatch):
    (tmp_path / "batch_norm.py").write_text(
        textwrap.dedent("""
        import torch
        from srifty_kit.measure.zoo import ModelSpec

        def build():  # a BatchNorm cannot train on a batch of one sample
            model = torch.nn.Sequential(
                torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 2)
            )

            def make_batch(b):
                return torch.randn(b, 8), torch.randint(0, 2, (b,))

            return ModelSpec(
                model, make_batch, torch.nn.CrossEntropyLoss(),
                lambda p: torch.optim.SGD(p, lr=0.01), "batch_norm",
            )
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "d.csv"
    with pytest.warns(ProfileWarning, match="world size 2, batch size 1 not measured.*1 value"):
        result = profile_distributed(
            "batch_norm:build", [2], [1, 4], max_seconds=2, out=out, **QUIET
        )
    assert set(read_table(out)["local_bsz"]) == {4}
    assert list(result.errors) == [(2, 1)]
    assert "more than 1 value per channel" in result.errors[(2, 1)]
    with pytest.raises(InputError, match=r"training step at batch size 1 failed: ValueError"):
        profile_distributed("batch_norm:build", [1], [1], max_seconds=1, **QUIET)
