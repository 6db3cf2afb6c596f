"""What a search is asked: the training job (work to its target, checkpoints), its constraints."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from srifty_kit.decide.spot import SpotPolicy
from srifty_kit.errors import InputError
from srifty_kit.model.efficiency import Work

CHECKPOINT_WRITE_GBPS = 0.125  # EBS gp3 baseline throughput, 125 MiB/s (AWS EBS volume types)


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
    checkpoint_gb: float = 0.0  # size of one checkpoint
    checkpoint_interval_h: float = 1.0  # tau: work between checkpoints
    restart_h: float = 0.1  # R: replacing reclaimed spot nodes and reloading (6 min)
    spot_fallback_after: int | None = None  # k: go on-demand after k reclaims; None: never

    def __post_init__(self) -> None:
        given = [n for n in ("samples", "steps", "epochs") if getattr(self, n) is not None]
        if len(given) != 1:
            raise InputError(
                "give exactly one of samples, steps or epochs to the target"
                + (f" (got {', '.join(given)})" if given else ""),
                fix="e.g. Job('bert', samples=2e7, reference_bsz=96) or --samples N",
            )
        if self.steps is not None and self.reference_bsz is None:
            raise InputError("steps to target need the reference batch", fix="give reference_bsz")
        if self.epochs is not None and self.dataset_size is None:
            raise InputError("epochs need the dataset size", fix="give dataset_size")
        if not self.checkpoint_interval_h > 0:
            raise InputError("checkpoint_interval_h must be > 0", fix="e.g. 1.0 (hours)")
        if self.restart_h < 0 or self.checkpoint_gb < 0 or self.model_memory_gib < 0:
            raise InputError("restart_h, checkpoint_gb and model_memory_gib must be >= 0")
        if self.global_bsz_max is not None and self.global_bsz_max < self.global_bsz_min:
            raise InputError(
                f"global_bsz_max {self.global_bsz_max} is below global_bsz_min "
                f"{self.global_bsz_min}",
                fix="widen the global batch range",
            )
        if self.spot_fallback_after is not None and self.spot_fallback_after < 1:
            raise InputError("spot_fallback_after must be >= 1 or None", fix="e.g. 3")
        if self.local_bsz is not None and (not self.local_bsz or min(self.local_bsz) < 1):
            raise InputError("local_bsz must list whole batches >= 1", fix="e.g. (16, 32, 64)")
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
        """c: hours to write one checkpoint at the gp3 baseline throughput."""
        return self.checkpoint_gb / CHECKPOINT_WRITE_GBPS / 3600.0

    @property
    def spot_policy(self) -> SpotPolicy:
        """Checkpoint period tau + c, restart, fallback — what spot.py needs."""
        period = self.checkpoint_interval_h + self.checkpoint_write_h
        return SpotPolicy(period, self.restart_h, self.spot_fallback_after)

    def max_local_bsz(self, gpu_memory_gib: float) -> float:
        """Largest local batch that fits a GPU of that memory (inf when the job gives no sizes)."""
        if self.memory_per_sample_gib is None:
            return np.inf
        if not np.isfinite(gpu_memory_gib):
            return 0.0  # unknown memory and a job that needs some: not feasible, never guessed
        room = gpu_memory_gib - self.model_memory_gib
        return float(np.floor(room / self.memory_per_sample_gib))


@dataclass(frozen=True)
class Constraints:
    """What the run must satisfy, and at what confidence."""

    deadline_h: float | None = None  # the time upper end must be within this
    budget_usd: float | None = None  # the cost upper end must be within this
    confidence: float = 0.9  # level of the prediction intervals and the spot bound
    max_nodes: int = 16  # nodes in one cluster (both types together for a mix)
    vcpu_quota: int | None = None  # EC2 vCPU quota: nodes x vCPUs must fit
    families: tuple[str, ...] | None = None  # e.g. ("g5", "p4d")
    instance_types: tuple[str, ...] | None = None
    regions: tuple[str, ...] | None = None  # catalog rows of these regions only
    spot: bool = False  # spot pricing allowed
    mixes: bool = False  # two-type clusters allowed
    min_gpu_memory_gib: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.confidence < 1:
            raise InputError(f"confidence must be in (0, 1), got {self.confidence}", fix="0.9")
        if self.max_nodes < 1:
            raise InputError("max_nodes must be >= 1", fix="e.g. 16")
        for name in ("deadline_h", "budget_usd"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise InputError(f"{name} must be > 0, got {value}", fix="give a positive number")
