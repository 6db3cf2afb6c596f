"""The op mix from a meta-device pass: FLOPs as flop_counter counts them, bytes, classes."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from srifty_kit import InputError
from srifty_kit.measure import opgraph
from srifty_kit.measure.opgraph import HOST, OP_CLASSES, op_class, op_graph_facts_of
from srifty_kit.measure.profile import facts_only
from srifty_kit.measure.reference_models import REFERENCE_MODELS
from srifty_kit.measure.torch_step import forward_loss
from srifty_kit.measure.zoo import ModelSpec, load_spec
from tests.builders import run_srifty


def tiny() -> ModelSpec:
    """Embedding, a linear layer, layer norm and a head: every class but convolution."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Embedding(50, 16), nn.Linear(16, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 5)
    )

    def make_batch(b: int):
        return torch.randint(0, 50, (b, 7)), torch.randint(0, 5, (b, 7))

    def loss_fn(out, y):
        return nn.functional.cross_entropy(out.reshape(-1, 5), y.reshape(-1))

    return ModelSpec(model, make_batch, loss_fn, lambda p: torch.optim.Adam(p), "tiny")


def counted_flops(spec: ModelSpec, b: int) -> float:
    """FlopCounterMode's total of a forward+backward at batch b, on the meta device too."""
    model = copy.deepcopy(spec.model).to("meta")
    x, y = spec.make_batch(b)
    counter = FlopCounterMode(display=False)
    with counter:
        forward_loss(model, (x.to("meta"), y.to("meta")), spec.loss_fn).backward()
    return float(counter.get_total_flops())


@pytest.mark.parametrize("name", ["tiny", "cnn", "transformer"])
def test_flops_match_flop_counter_at_both_batches(name):
    spec = tiny() if name == "tiny" else load_spec(name)
    facts = op_graph_facts_of(spec, batch_sizes=(2, 4))
    per_sample = facts["op_flops_per_sample"]
    per_step = facts["op_flops_per_step"]
    for b in (2, 4):
        assert per_step + b * per_sample == pytest.approx(counted_flops(spec, b), rel=1e-9)


def test_classes_sum_to_the_totals_and_bytes_are_positive():
    facts = op_graph_facts_of(tiny())
    mix = facts["op_mix"]
    assert list(mix) == [*OP_CLASSES, HOST]
    for what in ("flops", "bytes"):
        for per in ("per_sample", "per_step"):
            total = sum(mix[c][f"{what}_{per}"] for c in OP_CLASSES)
            assert total == pytest.approx(facts[f"op_{what}_{per}"])
            phases = sum(p[f"{what}_{per}"] for p in facts["phases"].values())
            assert phases == pytest.approx(total)
    assert facts["op_bytes_per_sample"] > 0
    for cls in ("tensor", "elementwise", "normalisation", "embedding", HOST):
        assert mix[cls]["bytes_per_sample"] > 0, cls
    # Adam touches every parameter once per step, whatever the batch
    assert mix["optimizer"]["bytes_per_sample"] == 0
    params = sum(p.numel() * 4 for p in tiny().model.parameters())
    assert mix["optimizer"]["bytes_per_step"] > 3 * params
    # the input batch: 7 int64 tokens per sample
    assert mix[HOST]["bytes_per_sample"] == pytest.approx(2 * 7 * 8)
    json.dumps(facts)  # JSON-ready


def recurrent() -> ModelSpec:
    """A two-layer bidirectional LSTM over 12 steps: the same cell calls at every step."""
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = nn.LSTM(8, 16, num_layers=2, bidirectional=True, batch_first=True)
            self.head = nn.Linear(32, 3)

        def forward(self, x):
            return self.head(self.rnn(x)[0])

    def make_batch(b: int):
        return torch.randn(b, 12, 8), torch.randint(0, 3, (b, 12))

    def loss_fn(out, y):
        return nn.functional.cross_entropy(out.reshape(-1, 3), y.reshape(-1))

    return ModelSpec(Net(), make_batch, loss_fn, lambda p: torch.optim.SGD(p, lr=0.1), "rnn")


@pytest.mark.parametrize("make", [tiny, recurrent], ids=["tiny", "lstm"])
def test_replayed_operator_counts_equal_counting_every_call(make):
    # a repeated call's counts come from the first call with its signature: every operator's
    # FLOPs and bytes must be exactly what counting each call afresh gives
    spec = make()
    batch = spec.make_batch(3)
    fresh, memo = (
        opgraph._tally_step(spec.model, batch, spec.loss_fn, spec.optimizer_fn, memo=m)
        for m in (False, True)
    )
    assert dict(memo.bytes) == dict(fresh.bytes) and memo.bytes
    assert dict(memo.flops) == dict(fresh.flops) and sum(memo.flops.values()) > 0


def test_launches_count_operators_not_views_and_a_recurrent_layer_once_each_way():
    # what carries a step's fixed overhead to a GPU: the operators one step launches
    def launches(spec: ModelSpec) -> float:
        return op_graph_facts_of(spec)["op_mix"][HOST]["launches_per_step"]

    shallow = tiny()
    deeper = shallow._replace(
        model=nn.Sequential(*shallow.model, nn.ReLU(), nn.Linear(5, 5), nn.ReLU(), nn.Linear(5, 5))
    )
    # two more layers launch more (forward and backward), and the count does not
    # depend on the batch
    assert launches(deeper) > launches(shallow) + 8
    assert op_graph_facts_of(shallow, batch_sizes=(3, 9))["op_mix"][HOST][
        "launches_per_step"
    ] == launches(shallow)
    # the optimizer's step runs as a few foreach kernels on a GPU, not one per parameter:
    # Adam (several operators per parameter on the meta device) and plain SGD launch the same
    sgd = shallow._replace(optimizer_fn=lambda p: torch.optim.SGD(p, lr=0.1))
    assert launches(sgd) == launches(shallow)
    # a view launches nothing: the step with a reshape around its head launches the same
    spec = tiny()
    viewed = spec._replace(loss_fn=lambda out, y: spec.loss_fn(out.reshape(-1, 7, 5), y))
    assert launches(viewed) == launches(spec)
    # the LSTM runs 12 time steps on the meta device, op by op, but is one cuDNN call each
    # way on a GPU: the same net over 3x the time steps launches exactly as many
    rnn = recurrent()
    longer = rnn._replace(make_batch=lambda b: tuple(_longer(x) for x in rnn.make_batch(b)))
    assert launches(longer) == launches(rnn) < 100


def _longer(x: torch.Tensor) -> torch.Tensor:
    """The same batch over three times the sequence (dimension 1)."""
    return torch.cat([x, x, x], dim=1)


def test_only_matmul_like_operators_carry_flops():
    facts = op_graph_facts_of(load_spec("cnn"))
    flops = {c: v["flops_per_sample"] for c, v in facts["op_mix"].items()}
    assert flops["tensor"] > 0
    assert all(v == 0 for c, v in flops.items() if c != "tensor")
    assert op_class("convolution_backward") == "tensor"
    assert op_class("native_batch_norm_backward") == "normalisation"
    assert op_class("embedding_dense_backward") == "embedding"
    assert op_class("sum") == "reduction" and op_class("add") == "elementwise"


def test_the_model_is_not_run_or_changed():
    spec = tiny()
    before = {k: v.clone() for k, v in spec.model.state_dict().items()}
    op_graph_facts_of(spec)
    after = spec.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None for p in spec.model.parameters())


def test_a_step_the_meta_device_cannot_run_is_an_input_error():
    spec = tiny()

    def loss_fn(out, y):
        return out.sum() * float(out.sum().item())  # data-dependent: no values on meta

    with pytest.raises(InputError, match="meta device"):
        op_graph_facts_of(spec._replace(loss_fn=loss_fn))


def test_a_batch_the_model_cannot_take_is_not_blamed_on_item():
    spec = tiny()
    wrong = ModelSpec(
        nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 3)),
        lambda b: (torch.randn(b, 17), torch.randint(0, 3, (b,))),  # 17 features, not 16
        nn.CrossEntropyLoss(),
        spec.optimizer_fn,
    )
    with pytest.raises(InputError, match="meta device") as refused:
        op_graph_facts_of(wrong)
    assert "shape mismatch" in refused.value.fix and "by hand" in refused.value.fix


def test_reference_models_have_their_published_sizes():
    # parameters of the standard architectures (millions): ResNet-18 (CIFAR) 11.2,
    # ResNet-50 25.6, BERT-base with a span head ~109, YOLOv3 (20 classes) ~61.6
    expected = {"cifar10": 11.2, "imagenet": 25.6, "bert": 109.0, "yolov3": 61.6}
    for name, millions in expected.items():
        model = REFERENCE_MODELS[name]().model
        count = sum(p.numel() for p in model.parameters()) / 1e6
        assert count == pytest.approx(millions, rel=0.03), name


def test_facts_only_writes_json_and_keeps_the_profile_keys(tmp_path):
    out = tmp_path / "cnn.facts.json"
    facts = facts_only("cnn", out=out)
    saved = json.loads(out.read_text())
    assert saved["op_mix"] == facts["op_mix"]
    for key in ("model", "param_count", "grad_bytes", "flops_per_sample"):
        assert key in saved
    # the old key: forward+backward FLOPs, which FlopCounterMode counts at any batch
    assert saved["flops_per_sample"] == pytest.approx(counted_flops(load_spec("cnn"), 3) / 3)


def test_cli_facts_only_runs_in_seconds_without_timing(tmp_path):
    out = tmp_path / "profile.csv"
    done = run_srifty("profile", "--facts-only", "--model", "cnn", "--out", str(out), timeout=60)
    assert done.returncode == 0, done.stderr
    written = tmp_path / "profile.facts.json"
    facts = json.loads(written.read_text())
    assert facts["facts_only"] is True and facts["op_mix"]["tensor"]["flops_per_sample"] > 0
    assert not out.exists()  # no step was timed, so no table
    assert "no step timed" in done.stdout


def test_cli_profile_without_batch_sizes_says_what_to_give(tmp_path):
    done = run_srifty("profile", "--model", "cnn", "--out", str(tmp_path / "p.csv"), timeout=60)
    assert done.returncode == 2
    assert "--batch-sizes" in done.stderr and len(done.stderr.strip().splitlines()) == 1
