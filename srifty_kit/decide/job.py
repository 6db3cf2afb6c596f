"""What a search is asked: the training job (work to its target, checkpoints), its constraints."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from srifty_kit.decide.spot import SpotPolicy
from srifty_kit.errors import InputError, is_number, is_whole, plain
from srifty_kit.model.efficiency import Work

# how fast a checkpoint is written: EBS gp3's baseline throughput, 125 MiB/s ("Amazon EBS General
# Purpose SSD volumes": 3,000 IOPS and 125 MiB/s included), in GB/s of checkpoint_gb (10^9 bytes)
CHECKPOINT_WRITE_GBPS = 125 * 2**20 / 1e9  # 0.131 GB/s


@dataclass(frozen=True)
class Job:
    """A training job: which model, how much work to its target, and how it checkpoints."""

    model: str  # the training model's name in the fitted StepTimeModel
    samples: float | None = None  # samples to the target at reference_bsz ...
    steps: float | None = None  # ... or optimizer steps to it at reference_bsz ...
    epochs: float | None = None  # ... or epochs over dataset_size
    dataset_size: int | None = None
    reference_bsz: int | None = None  # global batch the work was observed at
    noise_scale: float | None = None  # B_noise (samples); None assumes perfect scaling
    global_bsz_min: int = 1  # allowed global batch range (e.g. where the recipe still converges)
    global_bsz_max: int | None = None
    local_bsz: tuple[int, ...] | None = None  # per-worker batches to consider (default 1..1024)
    memory_per_sample_gib: float | None = None  # GPU memory: model + b * per-sample <= GPU's
    model_memory_gib: float = 0.0
    checkpoint_gb: float = 0.0  # size of one checkpoint, GB (10^9 bytes)
    checkpoint_interval_h: float = 1.0  # tau: work between checkpoints
    restart_h: float = 0.1  # R: replacing reclaimed spot nodes and reloading (6 min)
    spot_fallback_after: int | None = None  # k: go on-demand after k reclaims; None: never

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise InputError(
                f"model must be the training model's name, got {self.model!r}",
                fix="give `model` as in the fitted StepTimeModel, e.g. Job('resnet', ...)",
            )
        for name in ("samples", "steps", "epochs", "noise_scale", "memory_per_sample_gib"):
            _positive(self, name)
        for name in ("model_memory_gib", "checkpoint_gb", "restart_h"):
            _positive(self, name, zero=True)
        _positive(self, "checkpoint_interval_h")
        for name in ("dataset_size", "reference_bsz", "global_bsz_max", "spot_fallback_after"):
            _whole(self, name)
        _whole(self, "global_bsz_min", required=True)
        given = [n for n in ("samples", "steps", "epochs") if getattr(self, n) is not None]
        if len(given) != 1:
            raise InputError(
                "give exactly one of samples, steps or epochs to the target"
                + (f" (got {', '.join(given)})" if given else ""),
                fix="give one of `samples`, `steps` or `epochs`",
            )
        if self.steps is not None and self.reference_bsz is None:
            raise InputError("steps to target need the reference batch", fix="give `reference_bsz`")
        if self.epochs is not None and self.dataset_size is None:
            raise InputError("epochs need the dataset size", fix="give `dataset_size`")
        if self.global_bsz_max is not None and self.global_bsz_max < self.global_bsz_min:
            raise InputError(
                f"global_bsz_max {self.global_bsz_max} is below global_bsz_min "
                f"{self.global_bsz_min}",
                fix="widen the global batch range (`global_bsz_max`)",
            )
        if self.local_bsz is not None:
            object.__setattr__(self, "local_bsz", whole_batches(self.local_bsz))
        self.work  # noqa: B018 - validates the work now, where the user gave it

    @property
    def work(self) -> Work:
        """The work to the target (efficiency.Work)."""
        if self.steps is not None:
            return Work.from_steps(self.steps, self.reference_bsz, self.noise_scale)
        if self.epochs is not None:
            return Work.from_epochs(
                self.epochs, self.dataset_size, self.reference_bsz, self.noise_scale
            )
        return Work(float(self.samples), self.reference_bsz, self.noise_scale)

    @property
    def checkpoint_write_h(self) -> float:
        """c: hours to write one checkpoint at the gp3 baseline throughput (125 MiB/s)."""
        return self.checkpoint_gb / CHECKPOINT_WRITE_GBPS / 3600.0

    @property
    def spot_policy(self) -> SpotPolicy:
        """Checkpoint period tau + c, restart, fallback — what spot.py needs."""
        period = self.checkpoint_interval_h + self.checkpoint_write_h
        return SpotPolicy(period, self.restart_h, self.spot_fallback_after)

    def max_local_bsz(self, gpu_memory_gib: float) -> float:
        """Largest local batch that fits a GPU of that memory: inf when the job gives no
        memory, 0 when the model's own memory (``model_memory_gib``) does not fit, and
        ``floor((gpu - model) / memory_per_sample_gib)`` when both are given."""
        if self.memory_per_sample_gib is None and not self.model_memory_gib:
            return np.inf
        if not np.isfinite(gpu_memory_gib):
            return 0.0  # unknown memory and a job that needs some: not feasible, never guessed
        room = gpu_memory_gib - self.model_memory_gib
        if self.memory_per_sample_gib is None:  # the model alone must fit; batches are free
            return np.inf if room >= 0 else 0.0
        return float(np.floor(room / self.memory_per_sample_gib))


@dataclass(frozen=True)
class Constraints:
    """What the run must satisfy, and at what confidence."""

    deadline_h: float | None = None  # the time upper end must be within this
    budget_usd: float | None = None  # the cost upper end must be within this
    confidence: float = 0.9  # level of the prediction intervals and the spot bound
    max_nodes: int = 16  # nodes in one cluster (both types together for a mix)
    # EC2 vCPU quota: nodes x vCPUs must fit (a type whose catalog row gives no vCPUs, one
    # off EC2, is not counted)
    vcpu_quota: int | None = None
    families: tuple[str, ...] | None = None  # e.g. ("g5", "p4d")
    instance_types: tuple[str, ...] | None = None
    regions: tuple[str, ...] | None = None  # catalog rows of these regions only
    spot: bool = False  # spot pricing allowed
    mixes: bool = False  # two-type clusters allowed
    min_gpu_memory_gib: float | None = None

    def __post_init__(self) -> None:
        for name in ("deadline_h", "budget_usd", "min_gpu_memory_gib"):
            _positive(self, name)
        _positive(self, "confidence", required=True)
        if not self.confidence < 1:
            raise InputError(
                f"confidence must be in (0, 1), got {plain(self.confidence)}",
                fix="give `confidence` such as 0.9",
            )
        _whole(self, "max_nodes", required=True)
        _whole(self, "vcpu_quota")
        for name in ("families", "instance_types", "regions"):
            object.__setattr__(self, name, _names(self, name))
        for name in ("spot", "mixes"):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise InputError(
                    f"{name} must be True or False, got {getattr(self, name)!r}",
                    fix=f"give `{name}`=True or False",
                )
            object.__setattr__(self, name, bool(getattr(self, name)))


# -- argument checks: each names the argument (in backticks, which the CLI turns into its
# flag) and what to give instead; they run in the constructors, where the values enter


def _positive(obj: object, name: str, *, zero: bool = False, required: bool = False) -> None:
    """``obj.name`` is None (unless required) or a finite number > 0 (>= 0 with ``zero``);
    stored as a plain float."""
    value = getattr(obj, name)
    if value is None and not required:
        return
    wanted = ">= 0" if zero else "> 0"
    if not is_number(value) or not math.isfinite(float(value)):
        raise InputError(
            f"{name} must be a finite number {wanted}, got {value!r} ({type(value).__name__})",
            fix=f"give `{name}` as a number (a float or an int, not text)",
        )
    if float(value) < 0 or (float(value) == 0 and not zero):
        raise InputError(
            f"{name} must be {wanted}, got {plain(value)}", fix=f"give `{name}` {wanted}"
        )
    object.__setattr__(obj, name, float(value))


def _whole(obj: object, name: str, *, required: bool = False) -> None:
    """``obj.name`` is None (unless required) or a whole number >= 1; stored as an int."""
    value = getattr(obj, name)
    if value is None and not required:
        return
    if not is_number(value) or not math.isfinite(float(value)) or float(value) != int(value):
        raise InputError(
            f"{name} must be a whole number >= 1, got {value!r}",
            fix=f"give `{name}` as a whole number",
        )
    if int(value) < 1:
        raise InputError(f"{name} must be >= 1, got {plain(value)}", fix=f"give `{name}` >= 1")
    object.__setattr__(obj, name, int(value))


def whole_batches(value: object) -> tuple[int, ...]:
    """Local batches as a sorted tuple of whole numbers >= 1 (one number is one batch): the
    check of ``Job.local_bsz``, and of any other way a user gives the batches to consider.

    Args:
        value: one number, or an iterable of numbers (not text: '16,32' is refused).

    Returns:
        The distinct batches, ascending.

    Raises:
        InputError: text, an empty list, or a value that is not a whole number >= 1.
    """
    items = [value] if is_number(value) else value
    if isinstance(items, str | bytes) or not isinstance(items, Iterable):
        raise InputError(
            f"local_bsz must list whole batches >= 1, got {value!r}",
            fix="give `local_bsz` such as (16, 32, 64)",
        )
    items = list(items)
    bad = [b for b in items if not is_whole(b)]
    if not items or bad:
        shown = plain(bad[0]) if bad else "nothing"
        raise InputError(
            f"local_bsz must list whole batches >= 1, found {shown}",
            fix="give `local_bsz` such as (16, 32, 64)",
        )
    return tuple(sorted({int(b) for b in items}))


def _names(obj: object, name: str) -> tuple[str, ...] | None:
    """None, or the names as a tuple: one string is one name, never its letters."""
    value = getattr(obj, name)
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Iterable):
        raise InputError(
            f"{name} must be a name or a list of names, got {value!r}",
            fix=f"give `{name}` such as ('g5', 'p4d')",
        )
    items = list(items)
    bad = [v for v in items if not isinstance(v, str) or not v.strip()]
    if not items or bad:
        raise InputError(
            f"{name} must list names, found {bad[0]!r}" if bad else f"{name} lists no name",
            fix=f"give `{name}` such as ('g5', 'p4d'), or None for all",
        )
    return tuple(v.strip() for v in items)
