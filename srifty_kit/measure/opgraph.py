"""The model's own graph without a GPU: FLOPs and bytes moved per operator class, per sample.

One training step (forward, backward, optimizer) is run on the meta device (shapes only, no
arithmetic, no memory: seconds even for BERT-base) under a ``TorchDispatchMode`` that sees
every aten operator; a call whose signature was seen before (a recurrent network's next time
step) replays the first one's counts instead of decomposing again. Per operator it records

- FLOPs, with ``torch.utils.flop_counter``'s own formulas (its ``flop_registry``, called the
  way ``FlopCounterMode`` calls them, decomposing unregistered operators the way it does, so
  the totals agree with it);
- bytes moved: the sizes of the operator's input and output tensors (a view moves nothing; an
  in-place operator's output is its input, counted once). This is the traffic of an unfused
  eager step, the same thing a roofline of eager PyTorch needs;
- its class: ``tensor`` (matmul, convolution, attention: tensor-core eligible by dtype),
  ``elementwise``, ``normalisation``, ``reduction`` (memory-bound), ``embedding`` (gathers and
  scatters), ``optimizer`` (everything inside ``optimizer.step()``) and ``host`` (the input
  batch itself, which a data loader makes and copies to the device).

The step is run at two batch sizes; the difference is the work per sample, what is left the
work per step (weights read once per step, the optimizer): ``x(b) = per_step + b * per_sample``.

It also counts the operators the step launches (``host.launches_per_step``): every aten call
the dispatcher makes at the top level of forward and backward, views left out (they move no
data and launch nothing). A step's fixed overhead on a GPU is host work per launch, so this
count, not a CPU's step time, is what carries that overhead to a GPU
(``model.roofline.graph_floor``). Two parts are not counted op by op, because a GPU does not
run them so: the optimizer's step (on CUDA, PyTorch runs it as a few foreach or fused kernels
whatever the parameter count, where the meta device runs its loop over parameters; counting
that loop made the floors of the reference models with many parameter tensors, BERT's AdamW
above all, a factor ~2 less alike), and a recurrent layer (``nn.RNNBase``), one launch forward
and one backward, since cuDNN runs its layers and time steps as one call where the meta
device runs the unrolled cell. Inside that call cuDNN still launches kernels per time step,
which no count here sees, so the facts also say how many recurrent layers the model has
(``host.recurrent_layers``): its floor is the less certain for them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten
from torch.utils.flop_counter import flop_registry

from srifty_kit.errors import InputError
from srifty_kit.measure.torch_step import forward_loss

OP_CLASSES = ("tensor", "elementwise", "normalisation", "reduction", "embedding", "optimizer")
HOST = "host"  # the input batch: made on the host, copied to the device
PHASES = ("forward", "backward", "optimizer")
BATCH_PAIR = (2, 4)  # the two batch sizes whose difference is the work per sample

# operator name (the overload packet's) -> class; anything not listed moves data elementwise
_TENSOR = (
    "mm",
    "addmm",
    "bmm",
    "baddbmm",
    "addbmm",
    "matmul",
    "dot",
    "vdot",
    "mv",
    "addmv",
    "convolution",
    "convolution_backward",
    "_convolution",
    "cudnn_convolution",
    "mkldnn_convolution",
    "conv_depthwise2d",
    "_scaled_dot_product",
    "_flash_attention",
    "_efficient_attention",
    "_cudnn_attention",
    "linear",
    "_fused_rms",
)
_NORM = ("batch_norm", "layer_norm", "group_norm", "rms_norm", "softmax", "instance_norm")
_REDUCTION = (
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "var",
    "std",
    "nll_loss",
    "norm",
    "prod",
    "cumsum",
    "argmax",
    "argmin",
    "logsumexp",
    "_ctc_loss",
    "binary_cross_entropy",
    "mse_loss",
)
_EMBEDDING = (
    "embedding",
    "index_select",
    "gather",
    "scatter",
    "index_add",
    "index_put",
    "_index_put",
    "take",
    "_embedding_bag",
    "index",
)


def op_class(name: str) -> str:
    """The class of an aten operator named ``name`` (e.g. ``addmm``, ``native_layer_norm``)."""
    base = name.lstrip("_")
    if any(name.startswith(p) or base.startswith(p.lstrip("_")) for p in _TENSOR):
        return "tensor"
    if any(p in name for p in _NORM):
        return "normalisation"
    if any(name.startswith(p) or base.startswith(p) for p in _EMBEDDING):
        return "embedding"
    if any(base.startswith(p) for p in _REDUCTION):
        return "reduction"
    return "elementwise"


def _nbytes(x: Any) -> int:
    return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0


def _is_view(func: Any) -> bool:
    """Whether an operator only returns views of its inputs (no kernel, no data moved)."""
    returns = func._schema.returns
    return bool(returns) and all(
        r.alias_info is not None and not r.alias_info.is_write for r in returns
    )


def _op_bytes(func: Any, args: Any, kwargs: Any, out: Any) -> int:
    """Bytes an eager operator reads and writes: its tensor inputs and outputs, a view none."""
    if _is_view(func):
        return 0  # same storage, nothing moved
    inputs, _ = tree_flatten((args, kwargs))
    outputs, _ = tree_flatten(out)
    seen = {id(t) for t in inputs if isinstance(t, torch.Tensor)}
    moved = sum(_nbytes(t) for t in inputs)
    return moved + sum(_nbytes(t) for t in outputs if id(t) not in seen)


# shape-only bookkeeping ops: FlopCounterMode lets them through uncounted, and so do we
_SKIP = {
    "is_contiguous",
    "sym_is_contiguous",
    "is_strides_like_format",
    "is_non_overlapping_and_dense",
    "size",
    "sym_size",
    "stride",
    "sym_stride",
    "storage_offset",
    "sym_storage_offset",
    "numel",
    "sym_numel",
    "dim",
    "layout",
}


class _Tally(TorchDispatchMode):
    """FLOPs and bytes per (phase, class, operator) of every aten call inside it.

    On the meta device an operator's counts depend only on its signature (the operator, the
    phase, its tensors' shapes, strides and dtypes and its other arguments), so the counts of
    one call, its decomposition included, are kept per signature and replayed for the next
    call with that signature: a recurrent network repeats the same cell calls at every time
    step, and decomposing each one again cost ~40 s of a DeepSpeech2 pass. ``memo=False``
    counts every call afresh (what the replay is checked against).
    """

    def __init__(self, memo: bool = True) -> None:
        super().__init__()
        self.phase = "forward"
        self.flops: dict[tuple[str, str, str], float] = defaultdict(float)
        self.bytes: dict[tuple[str, str, str], float] = defaultdict(float)
        self._memo: dict[tuple, tuple[list, tuple | None]] | None = {} if memo else None
        self._open: list[list[tuple[tuple[str, str, str], float, float]]] = []
        self.launches = 0  # top-level operators that are not views (see the module docstring)
        self.fused = 0  # > 0 inside a recurrent layer: its calls are one fused launch

    def enter_fused(self, *_: Any) -> None:
        """A module hook: a recurrent layer's forward or backward starts."""
        self.fused += 1

    def leave_fused(self, *_: Any) -> None:
        """A module hook: the recurrent layer is done, one launch on a GPU."""
        self.fused -= 1
        self.launches += 1

    def leave_fused_backward(self, _module: Any, grad_input: Any, _grad_output: Any) -> None:
        """The backward hook: where no input needs a gradient (the first layer) autograd calls
        it before the layer's own backward runs, so the layer stays fused until backward ends
        (``close_fused``)."""
        if any(g is not None for g in grad_input):
            self.leave_fused()

    def close_fused(self) -> None:
        """End of backward: every recurrent layer still open is done."""
        while self.fused > 0:
            self.leave_fused()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: D105
        kwargs = kwargs or {}
        packet = func._overloadpacket
        if packet.__name__ in _SKIP or isinstance(func, torch._ops.HigherOrderOperator):
            return func(*args, **kwargs)
        if not (self._open or self.fused or self.phase == "optimizer" or _is_view(func)):
            self.launches += 1
        sig = None if self._memo is None else _signature(func, self.phase, args, kwargs)
        if sig is not None and sig in self._memo:
            counted, template = self._memo[sig]
            for key, flops, nbytes in counted:
                self._add(key, flops, nbytes)
            # a fresh output is rebuilt from its shapes; one that aliases an input (a view,
            # an in-place or out= operator) comes from the operator itself
            return _rebuild(template) if template else func(*args, **kwargs)
        self._open.append([])
        try:
            out = self._count(func, packet, args, kwargs)
        finally:
            counted = self._open.pop()
        if sig is not None:
            self._memo[sig] = (counted, _template(func, out))
        return out

    def _count(self, func, packet, args, kwargs):
        if packet not in flop_registry and func is not torch.ops.prim.device.default:
            with self:  # as FlopCounterMode does: find the registered operators inside
                out = func.decompose(*args, **kwargs)
            if out is not NotImplemented:
                return out
        out = func(*args, **kwargs)
        name = packet.__name__
        cls = "optimizer" if self.phase == "optimizer" else op_class(name)
        flops = 0.0
        if packet in flop_registry:
            flops = float(flop_registry[packet](*args, **kwargs, out_val=out))
        self._add((self.phase, cls, name), flops, float(_op_bytes(func, args, kwargs, out)))
        return out

    def _add(self, key: tuple[str, str, str], flops: float, nbytes: float) -> None:
        """Count one operator's work, and in every signature being recorded around it."""
        if flops:
            self.flops[key] += flops
        self.bytes[key] += nbytes
        for counted in self._open:
            counted.append((key, flops, nbytes))


def _template(func: Any, out: Any) -> tuple | None:
    """The shapes of a fresh output (new meta tensors and plain values), or None where the
    output may alias an input or is something else."""
    if any(r.alias_info is not None for r in func._schema.returns):
        return None
    leaves, spec = tree_flatten(out)
    shapes = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            if leaf.device.type != "meta" or leaf.requires_grad:
                return None
            shapes.append((tuple(leaf.shape), leaf.stride(), leaf.dtype))
        elif leaf is None or isinstance(leaf, bool | int | float):
            shapes.append(leaf)
        else:
            return None
    return spec, shapes


def _rebuild(template: tuple) -> Any:
    """New meta tensors (and the plain values) shaped as ``template``."""
    spec, shapes = template
    leaves = [
        torch.empty_strided(x[0], x[1], dtype=x[2], device="meta") if isinstance(x, tuple) else x
        for x in shapes
    ]
    return tree_unflatten(leaves, spec)


def _signature(func: Any, phase: str, args: Any, kwargs: Any) -> tuple | None:
    """What an operator's counts on the meta device depend on, hashable; None when an
    argument cannot be told apart by value (then the call is counted afresh)."""
    try:
        return func, phase, _key(args), _key(kwargs)
    except _NoKey:
        return None


class _NoKey(Exception):
    """An argument whose value does not say what the operator does (see ``_key``)."""


def _key(x: Any) -> Any:
    """A hashable stand-in for an argument: a meta tensor's shape, strides, dtype and grad
    flag; containers element by element; plain values as they are. Raises ``_NoKey`` for
    anything else (a real tensor, an object), so that call is never replayed."""
    if isinstance(x, torch.Tensor):
        if x.device.type != "meta":
            raise _NoKey
        return (x.shape, x.stride(), x.dtype, x.requires_grad)
    if isinstance(x, tuple | list):
        return type(x), tuple(_key(v) for v in x)
    if isinstance(x, dict):
        return dict, tuple((k, _key(v)) for k, v in x.items())
    if x is None or isinstance(x, bool | int | float | str | torch.dtype):
        return type(x), x
    if isinstance(x, torch.device | torch.layout | torch.memory_format):
        return type(x), str(x)
    raise _NoKey


def _to_meta(x: Any) -> Any:
    return tree_map(lambda t: t.to("meta") if isinstance(t, torch.Tensor) else t, x)


def _meta_state(model: torch.nn.Module) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
    """Meta copies of the model's parameters (leaves, requires_grad kept) and buffers."""
    params = {
        n: torch.empty_like(p, device="meta").requires_grad_(p.requires_grad)
        for n, p in model.named_parameters()
    }
    buffers = {n: torch.empty_like(b, device="meta") for n, b in model.named_buffers()}
    return {**params, **buffers}, [p for p in params.values() if p.requires_grad]


def _recurrent_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's recurrent layers: those cuDNN runs as one call (see the module docstring)."""
    return [m for m in model.modules() if isinstance(m, torch.nn.RNNBase)]


def _tally_step(
    model: torch.nn.Module,
    batch: tuple[Any, Any],
    loss_fn: Callable[[Any, Any], Any],
    optimizer_fn: Callable[[Any], torch.optim.Optimizer],
    memo: bool = True,
) -> _Tally:
    """One meta-device training step of ``model`` on ``batch`` under a fresh tally."""
    from torch.func import functional_call

    state, leaves = _meta_state(model)
    optimizer = optimizer_fn(leaves)
    inputs, targets = _to_meta(batch)

    class _Bound(torch.nn.Module):
        def forward(self, *a: Any, **k: Any) -> Any:
            return functional_call(model, state, a, k, tie_weights=True, strict=False)

    tally = _Tally(memo)
    hooks = []
    for module in _recurrent_layers(model):  # one cuDNN call each way on a GPU
        hooks += [
            module.register_forward_pre_hook(tally.enter_fused),
            module.register_forward_hook(tally.leave_fused),
            module.register_full_backward_pre_hook(tally.enter_fused),
            module.register_full_backward_hook(tally.leave_fused_backward),
        ]
    try:
        with tally:
            loss = forward_loss(_Bound(), (inputs, targets), loss_fn)
            tally.phase = "backward"
            loss.backward()
            tally.close_fused()
            tally.phase = "optimizer"
            optimizer.step()
    finally:
        for hook in hooks:
            hook.remove()
    return tally


def _sums(tally: _Tally) -> dict[str, dict[str, float]]:
    """{class: {"flops": ..., "bytes": ...}} and {phase: ...} totals of one tally."""
    out: dict[str, dict[str, float]] = {}
    for what, table in (("flops", tally.flops), ("bytes", tally.bytes)):
        for (phase, cls, _), v in table.items():
            for key in (cls, f"phase:{phase}"):
                out.setdefault(key, {"flops": 0.0, "bytes": 0.0})[what] += v
    return out


def _host_bytes(batch: tuple[Any, Any]) -> int:
    leaves, _ = tree_flatten(batch)
    return sum(_nbytes(t) for t in leaves)


def _split(x1: float, x2: float, b1: int, b2: int) -> tuple[float, float]:
    """(per sample, per step) of a line through (b1, x1), (b2, x2); both clipped at zero."""
    per_sample = max(0.0, (x2 - x1) / (b2 - b1))
    return per_sample, max(0.0, x1 - b1 * per_sample)


def op_graph_facts(
    model: torch.nn.Module,
    make_batch: Callable[[int], Any],
    loss_fn: Callable[[Any, Any], Any],
    optimizer_fn: Callable[[Any], torch.optim.Optimizer],
    batch_sizes: tuple[int, int] = BATCH_PAIR,
) -> dict[str, Any]:
    """FLOPs and bytes per sample and per step of one training step, by operator class.

    Args:
        model, make_batch, loss_fn, optimizer_fn: the model spec (``measure.zoo``); the model
            is not run and not changed (its shapes are copied to the meta device).
        batch_sizes: the two batch sizes whose difference gives the per-sample work.

    Returns:
        A JSON-ready dict: ``op_mix`` ({class: {flops_per_sample, bytes_per_sample,
        flops_per_step, bytes_per_step}} for every class in ``OP_CLASSES`` and ``host``),
        ``phases`` (the same per forward/backward/optimizer; the ``host`` class also holds
        ``launches_per_step``, the operators one step launches, and ``recurrent_layers``),
        the totals
        ``op_flops_per_sample``, ``op_bytes_per_sample``, ``op_flops_per_step``,
        ``op_bytes_per_step``, ``param_dtype`` and ``op_mix_method``.

    Raises:
        InputError: make_batch or the step fails on the meta device (the message names the
            operator PyTorch refused).
    """
    b1, b2 = sorted(int(b) for b in batch_sizes)
    if b1 < 1 or b1 == b2:
        raise InputError(f"batch sizes {batch_sizes} are not two different positive sizes")
    sums, host, launches = [], [], 0
    recurrent = len(_recurrent_layers(model))
    for b in (b1, b2):
        try:
            batch = make_batch(b)
        except Exception as err:
            raise InputError(
                f"make_batch({b}) raised {type(err).__name__}: {err}",
                fix="make make_batch(batch_size) return (inputs, targets)",
            ) from err
        try:
            tally = _tally_step(model, batch, loss_fn, optimizer_fn)
        except InputError:
            raise
        except Exception as err:  # an operator without a meta kernel, data-dependent shapes
            raise InputError(
                f"the training step does not run on the meta device: {type(err).__name__}: "
                f"{str(err).splitlines()[0] if str(err) else ''}",
                fix="check that one training step runs on the CPU by hand (a shape mismatch "
                "fails there too); one that does must avoid .item() and data-dependent shapes "
                "in forward and loss",
            ) from err
        sums.append(_sums(tally))
        host.append(_host_bytes(batch))
        launches = max(launches, tally.launches)
    mix: dict[str, dict[str, float]] = {}
    phases: dict[str, dict[str, float]] = {}
    for key in {*OP_CLASSES, *(f"phase:{p}" for p in PHASES)}:
        row = {}
        for what in ("flops", "bytes"):
            x1, x2 = (s.get(key, {}).get(what, 0.0) for s in sums)
            row[f"{what}_per_sample"], row[f"{what}_per_step"] = _split(x1, x2, b1, b2)
        (phases if key.startswith("phase:") else mix)[key.removeprefix("phase:")] = row
    hs, hp = _split(float(host[0]), float(host[1]), b1, b2)
    mix[HOST] = {
        "flops_per_sample": 0.0,
        "bytes_per_sample": hs,
        "flops_per_step": 0.0,
        "bytes_per_step": hp,
        "launches_per_step": float(launches),
        "recurrent_layers": float(recurrent),
    }
    mix = {k: mix[k] for k in (*OP_CLASSES, HOST)}
    dtypes = {str(p.dtype).removeprefix("torch.") for p in model.parameters()}
    return {
        "op_mix": mix,
        "phases": {p: phases[p] for p in PHASES},
        **{
            f"op_{what}_{per}": sum(mix[c][f"{what}_{per}"] for c in OP_CLASSES)
            for what in ("flops", "bytes")
            for per in ("per_sample", "per_step")
        },
        "param_dtype": ",".join(sorted(dtypes)) or "none",
        "op_mix_method": (
            f"meta-device training step at batch {b1} and {b2}: FLOPs from "
            "torch.utils.flop_counter's formulas, bytes from operator input/output sizes "
            "(unfused eager step); host = the input batch and the operators launched"
        ),
    }


def op_graph_facts_of(spec: Any, batch_sizes: tuple[int, int] = BATCH_PAIR) -> dict[str, Any]:
    """:func:`op_graph_facts` of a model spec (``measure.zoo.ModelSpec``) or a mapping."""
    if isinstance(spec, Mapping):
        spec = tuple(spec[k] for k in ("model", "make_batch", "loss_fn", "optimizer_fn"))
    model, make_batch, loss_fn, optimizer_fn = tuple(spec)[:4]
    return op_graph_facts(model, make_batch, loss_fn, optimizer_fn, batch_sizes)
