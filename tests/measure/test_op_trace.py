"""Where a step's time goes, per operator class, from torch.profiler (here on the CPU: the
same code reads a GPU's kernels, which no machine of this project's CI has)."""

import json

import pytest
import torch

from srifty_kit import StepTimeModel
from srifty_kit.measure import zoo
from srifty_kit.measure.op_trace import trace_batch
from srifty_kit.measure.opgraph import OP_CLASSES
from srifty_kit.measure.torch_step import device_batch, train_step
from srifty_kit.model import roofline
from tests.builders import run_srifty


def test_a_traced_step_splits_its_time_by_operator_class():
    spec = zoo.load_spec("cnn")
    optimizer = spec.optimizer_fn(spec.model.parameters())
    cpu = torch.device("cpu")
    batch = device_batch(spec.make_batch, 16, cpu)
    rec = trace_batch(lambda: train_step(spec.model, batch, spec.loss_fn, optimizer), cpu)
    assert set(rec["classes"]) == set(OP_CLASSES)
    # a conv net's step is mostly its convolutions and matmuls; its optimizer step is seen
    # inside its own range; the parts add up to no more than the device's busy time, and
    # that to no more than the step
    assert rec["classes"]["tensor"] == max(rec["classes"].values())
    assert rec["classes"]["optimizer"] > 0
    assert sum(rec["classes"].values()) <= rec["busy_s"] * (1 + 1e-9)
    assert 0 < rec["busy_s"] <= rec["step_s"] and 0 < rec["launch_s"] <= rec["step_s"]
    # what the profile writes is what a fit reads
    trace = {"device": "cpu", "device_name": "here", "batches": {"16": rec}}
    assert roofline.check_trace(trace)["batches"]["16"]["busy_s"] == rec["busy_s"]
    with pytest.raises(ValueError, match="whole number"):
        trace_batch(lambda: None, cpu, steps=0)


def test_profile_records_the_op_trace_when_asked_and_fit_keeps_it(tmp_path):
    out = tmp_path / "p.csv"
    done = run_srifty(
        "profile", "--model", "cnn", "--batch-sizes", "4,8", "--max-seconds", "6",
        "--op-trace", "--quiet", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "op trace on" in done.stdout and "device busy" in done.stdout
    assert "profiler_start" not in done.stderr  # the profiler's C++ log is kept off the terminal
    facts = json.loads(out.with_name("p.facts.json").read_text())
    trace = facts["op_trace"]
    assert trace["device"] == "cpu" and sorted(trace["batches"], key=int) == ["4", "8"]
    assert trace["batches"]["8"]["classes"]["tensor"] > 0
    model_path = tmp_path / "m.json"
    fitted = run_srifty("fit", "--measurements", str(out), "--out", str(model_path))
    assert fitted.returncode == 0, fitted.stderr
    # a CPU's operator times say nothing of a GPU's: kept, but no route reads them
    loaded = StepTimeModel.load(model_path)
    assert loaded.op_trace_["cnn"]["device"] == "cpu"
    assert not roofline.trace_matches(loaded.op_trace_["cnn"], "T4")
    # and by default a CPU profile spends no time on it
    plain = tmp_path / "q.csv"
    again = run_srifty(
        "profile", "--model", "cnn", "--batch-sizes", "4", "--max-seconds", "3", "--quiet",
        "--out", str(plain),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "op_trace" not in json.loads(plain.with_name("q.facts.json").read_text())
