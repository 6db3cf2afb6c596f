"""Demo models built in code (MLP, small CNN, small transformer) and the model-spec contract.

A *model spec* is what the profiler needs to run a training step:

- ``model``: a ``torch.nn.Module``;
- ``make_batch(batch_size) -> (inputs, targets)``: a fresh batch; ``inputs`` is a tensor, a
  tuple of tensors (passed as ``model(*inputs)``) or a dict (``model(**inputs)``);
- ``loss_fn(outputs, targets) -> scalar tensor``: mean over the batch;
- ``optimizer_fn(parameters) -> torch.optim.Optimizer``.

``MODULE:CALLABLE`` (for the CLI and for distributed workers, which import it by name) names a
function taking no arguments that returns a :class:`ModelSpec`, a 4-tuple
``(model, make_batch, loss_fn, optimizer_fn)`` or a dict with those keys.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch
from torch import nn

from srifty_kit.errors import InputError, did_you_mean, first_line


class ModelSpec(NamedTuple):
    """Everything a training step needs: model, batch maker, loss and optimizer factory."""

    model: nn.Module
    make_batch: Callable[[int], Any]
    loss_fn: Callable[[Any, Any], torch.Tensor]
    optimizer_fn: Callable[[Any], torch.optim.Optimizer]
    name: str = "model"


def _random_batch(shape: tuple[int, ...], classes: int, seed: int) -> Callable[[int], Any]:
    """A batch maker of standard-normal inputs and uniform class labels."""
    gen = torch.Generator().manual_seed(seed)

    def make_batch(batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.randn((batch_size, *shape), generator=gen)
        y = torch.randint(0, classes, (batch_size,), generator=gen)
        return x, y

    return make_batch


def mlp(seed: int = 0) -> ModelSpec:
    """A 3-layer perceptron on 256 features, 10 classes (~0.4M parameters)."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )
    return ModelSpec(
        model,
        _random_batch((256,), 10, seed),
        nn.CrossEntropyLoss(),
        lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9),
        "mlp",
    )


class _Residual(nn.Module):
    """conv-bn-relu-conv-bn plus a (strided 1x1) shortcut: the ResNet basic block."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False),
            nn.BatchNorm2d(c_out),
            nn.ReLU(),
            nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False),
            nn.BatchNorm2d(c_out),
        )
        self.skip = (
            nn.Identity()
            if stride == 1 and c_in == c_out
            else nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Residual block: relu(body(x) + skip(x))."""
        return torch.relu(self.body(x) + self.skip(x))


def cnn(seed: int = 0) -> ModelSpec:
    """A small ResNet-style CNN on 3x32x32 images (CIFAR-sized), 10 classes (~0.1M params)."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, 1, 1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        _Residual(16, 16, 1),
        _Residual(16, 32, 2),
        _Residual(32, 64, 2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    )
    return ModelSpec(
        model,
        _random_batch((3, 32, 32), 10, seed),
        nn.CrossEntropyLoss(),
        lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=5e-4),
        "cnn",
    )


class _TinyLM(nn.Module):
    """Token embedding, 2 pre-norm encoder layers with a causal mask, tied output head."""

    def __init__(self, vocab: int, d_model: int, seq_len: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(seq_len, d_model))
        layer = nn.TransformerEncoderLayer(
            d_model,
            nhead=4,
            dim_feedforward=4 * d_model,
            dropout=0.0,
            batch_first=True,
            norm_first=True,
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq_len))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Next-token logits of a (batch, seq) token tensor."""
        h = self.embed(tokens) + self.pos
        h = self.encoder(h, mask=self.mask, is_causal=True)
        return h @ self.embed.weight.T  # (batch, seq, vocab) logits


def transformer(seed: int = 0) -> ModelSpec:
    """A 2-layer causal transformer language model: vocab 1000, width 64, 32 tokens."""
    torch.manual_seed(seed)
    vocab, seq_len = 1000, 32
    gen = torch.Generator().manual_seed(seed)

    def make_batch(batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = torch.randint(0, vocab, (batch_size, seq_len + 1), generator=gen)
        return tokens[:, :-1], tokens[:, 1:]  # predict the next token

    def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

    return ModelSpec(
        _TinyLM(vocab, 64, seq_len),
        make_batch,
        loss_fn,
        lambda params: torch.optim.AdamW(params, lr=3e-4),
        "transformer",
    )


DEMO_MODELS: dict[str, Callable[[], ModelSpec]] = {
    "mlp": mlp,
    "cnn": cnn,
    "transformer": transformer,
}


def _as_spec(value: Any, name: str) -> ModelSpec:
    """Accept a ModelSpec, a 4-tuple or a mapping, and name it."""
    if isinstance(value, ModelSpec):
        return value._replace(name=value.name if value.name != "model" else name)
    if isinstance(value, Mapping):
        keys = ("model", "make_batch", "loss_fn", "optimizer_fn")
        if all(k in value for k in keys):
            return ModelSpec(*(value[k] for k in keys), name=str(value.get("name", name)))
    elif isinstance(value, tuple) and len(value) in (4, 5):
        return ModelSpec(*value[:4], name=str(value[4]) if len(value) == 5 else name)
    raise InputError(
        f"{name} returned {type(value).__name__}, not a model spec",
        fix="return ModelSpec(model, make_batch, loss_fn, optimizer_fn) or that 4-tuple",
    )


def load_spec(spec: str) -> ModelSpec:
    """A demo model by name (``mlp``, ``cnn``, ``transformer``), a reference training model
    (``measure.reference_models``: ``cifar10``, ``imagenet``, ``bert``, ``ncf``, ``yolov3``,
    ``deepspeech2``) or ``MODULE:CALLABLE``."""
    if spec in DEMO_MODELS:
        return DEMO_MODELS[spec]()
    from srifty_kit.measure.reference_models import REFERENCE_MODELS  # imports this module

    if spec in REFERENCE_MODELS:
        return REFERENCE_MODELS[spec]()
    if ":" not in spec:
        names = [*DEMO_MODELS, *REFERENCE_MODELS]
        raise InputError(
            f"unknown model {spec!r}{did_you_mean(spec, names)}",
            fix="give one of " + ", ".join(names) + " or MODULE:CALLABLE",
        )
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # ImportError, or whatever the module's own code raised
        raise InputError(
            f"cannot import module {module_name!r}: {err}",
            fix="check the module name and that its folder is on PYTHONPATH",
        ) from err
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise InputError(
            f"module {module_name!r} has no callable {attr!r}"
            + did_you_mean(attr, [n for n in dir(module) if not n.startswith("_")]),
        )
    try:  # the user's code: whatever it raises is theirs to fix, in one line
        made = factory()
    except Exception as err:
        raise InputError(
            f"{spec} raised {first_line(err)}",
            fix=f"call {attr}() by hand to see why; it must return a model spec",
        ) from err
    return _as_spec(made, attr)
