"""One training step of a model spec on a device: batch placement, loss check, timed step."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import torch

from srifty_kit.errors import InputError, counted, first_line
from srifty_kit.tables.redact import redact

# the profiler range around optimizer.step(): what an op trace counts as the optimizer class
OPTIMIZER_RANGE = "srifty.optimizer"


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` is CUDA when present, else CPU; asking for CUDA without it is an InputError."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except RuntimeError as err:
        raise InputError(f"unknown device {device!r}", fix="use auto, cpu or cuda[:N]") from err
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError(
            f"device {device!r} asked for, but this torch sees no CUDA GPU",
            fix="use --device cpu (or auto), or install a CUDA build of torch",
        )
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        raise InputError(
            f"device {device!r} asked for, but this machine has {count} CUDA GPU"
            + ("" if count == 1 else "s"),
            fix=f"use cuda:0 to cuda:{count - 1}, or cuda (the first)",
        )
    if dev.type not in ("cpu", "cuda"):
        raise InputError(f"device type {dev.type!r} is not supported", fix="use cpu or cuda")
    return dev


# how an allocation that failed for want of memory reads where torch gives no OutOfMemoryError:
# the CPU allocator ("DefaultCPUAllocator: can't allocate memory"), MPS, and CUDA paths that
# raise a plain RuntimeError
_OUT_OF_MEMORY_WORDS = ("out of memory", "can't allocate memory", "cannot allocate memory")


def out_of_memory(err: BaseException) -> bool:
    """Whether ``err`` is a failed allocation: a batch too large for the device's memory
    (CUDA's OutOfMemoryError, Python's MemoryError, or the allocator's RuntimeError)."""
    if isinstance(err, torch.OutOfMemoryError | MemoryError):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and any(w in text for w in _OUT_OF_MEMORY_WORDS)


def step_failed(b: int, err: BaseException, hint: str = "", after: int = 0) -> InputError:
    """The one-line error for a training step at batch size ``b`` that raised ``err``: the
    first one (the model, batch or loss the user gave do not fit together), or one ``after``
    steps at that size had trained (something in them changes from step to step); ``hint``
    is added to its fix."""
    if after:
        return InputError(
            f"a training step at batch size {b} failed after {counted(after, 'step')}: "
            f"{first_line(err)}",
            fix="the first steps trained, so look for what changes from step to step in the "
            "model, make_batch or loss_fn" + hint,
        )
    return InputError(
        f"a training step at batch size {b} failed: {first_line(err)}",
        fix="make make_batch(batch_size) return (inputs, targets) that the model and "
        "loss_fn take; try one step by hand" + hint,
    )


def step_cause(b: int, err: BaseException) -> str:
    """Why batch size ``b`` could not be measured when its step raised ``err``, as the
    table, the facts and the warning say it (redacted: a model's error may quote a
    credential)."""
    if out_of_memory(err):
        return f"out of memory at batch size {b}"
    return redact(f"{type(err).__name__}: {err}".strip())


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so that a wall-clock reading covers the step."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def to_device(obj: Any, device: torch.device) -> Any:
    """Move tensors (also inside tuples, lists and dicts) to ``device``."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=True)
    if isinstance(obj, Mapping):
        return {k: to_device(v, device) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(to_device(v, device) for v in obj)
    return obj


def split_batch(batch: Any, batch_size: int) -> tuple[Any, Any]:
    """A batch maker's result as ``(inputs, targets)``; anything else is an InputError."""
    if not (isinstance(batch, tuple | list) and len(batch) == 2):
        raise InputError(
            f"make_batch({batch_size}) returned {type(batch).__name__}, not (inputs, targets)",
            fix="return a 2-tuple (inputs, targets)",
        )
    return batch[0], batch[1]


def device_batch(
    make_batch: Callable[[int], Any], batch_size: int, device: torch.device
) -> tuple[Any, Any]:
    """``make_batch(batch_size)`` checked to be ``(inputs, targets)`` and moved to ``device``."""
    return to_device(split_batch(make_batch(batch_size), batch_size), device)


def forward_loss(
    model: torch.nn.Module, batch: tuple[Any, Any], loss_fn: Callable[[Any, Any], Any]
) -> torch.Tensor:
    """Run the model on the batch's inputs and return the (checked scalar) loss."""
    inputs, targets = batch
    if isinstance(inputs, Mapping):
        outputs = model(**inputs)
    elif isinstance(inputs, tuple | list):
        outputs = model(*inputs)
    else:
        outputs = model(inputs)
    loss = loss_fn(outputs, targets)
    if not isinstance(loss, torch.Tensor) or loss.ndim != 0:
        shape = tuple(loss.shape) if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise InputError(
            f"loss_fn returned {shape}, not a scalar tensor",
            fix="reduce the loss over the batch, e.g. loss.mean()",
        )
    if not loss.requires_grad:
        raise InputError(
            "the loss does not depend on any parameter that requires grad",
            fix="check that the model's parameters have requires_grad=True",
        )
    return loss


def train_step(
    model: torch.nn.Module,
    batch: tuple[Any, Any],
    loss_fn: Callable[[Any, Any], Any],
    optimizer: torch.optim.Optimizer,
) -> None:
    """Forward, backward, optimizer step: what one step of training costs."""
    optimizer.zero_grad(set_to_none=True)
    forward_loss(model, batch, loss_fn).backward()
    with torch.profiler.record_function(OPTIMIZER_RANGE):  # a trace's optimizer class
        optimizer.step()


def timed_step(step: Callable[[], None], device: torch.device) -> float:
    """Seconds of one call of ``step``, GPU work included (synchronised before and after)."""
    synchronize(device)
    start = time.perf_counter()
    step()
    synchronize(device)
    return time.perf_counter() - start


def grad_sq_norm(model: torch.nn.Module) -> float:
    """|g|^2 over all parameters' ``.grad`` (one device round-trip)."""
    grads = [p.grad.detach() for p in model.parameters() if p.grad is not None]
    if not grads:
        return 0.0
    return float(torch.stack([g.float().pow(2).sum() for g in grads]).sum())


def count_flops(
    model: torch.nn.Module,
    batch: tuple[Any, Any],
    loss_fn: Callable[[Any, Any], Any],
    batch_size: int,
) -> tuple[float | None, float]:
    """Forward+backward FLOPs per sample as torch.utils.flop_counter counts them (matmuls,
    convolutions, attention; element-wise work is not counted; None where it counted none),
    and the loss of that step (a NaN loss trains nothing: the profile says so)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        loss = forward_loss(model, batch, loss_fn)
        loss.backward()
    model.zero_grad(set_to_none=True)
    total = counter.get_total_flops()
    return (total / batch_size if total else None), float(loss.detach())


def parameter_facts(model: torch.nn.Module) -> dict[str, int]:
    """Parameter count and the bytes of gradient an all-reduce moves each step."""
    params = list(model.parameters())
    return {
        "param_count": int(sum(p.numel() for p in params)),
        # DDP all-reduces the gradient of every parameter that requires one, in its own dtype
        "grad_bytes": int(sum(p.numel() * p.element_size() for p in params if p.requires_grad)),
    }
