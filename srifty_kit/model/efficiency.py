"""Statistical efficiency of a global batch from its gradient noise scale; time, cost to accuracy.

Which model, and why. McCandlish, Kaplan, Amodei et al., "An Empirical Model of Large-Batch
Training" (arXiv:1812.06162, 2018) find that the steps S and samples E to a given loss trade off
as (S / S_min - 1)(E / E_min - 1) = 1 (their eq. 2.11), with B_crit = E_min / S_min close to the
gradient noise scale (§2.3). With E = B * S that gives, at global batch B,

    S(B) = S_min * (1 + B_noise / B)        optimizer steps
    E(B) = E_min * (1 + B / B_noise)        training samples, E_min = S_min * B_noise

taking B_crit = B_noise, the noise scale the profiler measures (their "simple" estimate
B_simple = tr(Sigma) / |G|^2). We use this form because a job is
stated the way people know it — samples, steps or epochs to the target at the batch they
trained with — and these two lines turn that into steps at any other batch. Pollux (Qiao et
al., OSDI'21, §3.1) defines the statistical efficiency of batch M against the initial batch M0
as EFFICIENCY(M) = (phi + M0) / (phi + M) with phi the same noise scale; that is exactly
E(M0) / E(M) of McCandlish's model, so both papers agree here and ``efficiency`` gives either
normalisation. Pollux's goodput is throughput x efficiency; time to the target is then
E_min / goodput when efficiency is measured against the small-batch limit (1 / (1 + B/B_noise)).

Without a noise scale the job is assumed to scale perfectly (E(B) = the samples given): the
search says so, because larger batches then look better than they are.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from srifty_kit.errors import InputError

SECONDS_PER_HOUR = 3600.0


def _positive(value: float | None, name: str, fix: str) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise InputError(f"{name} must be a positive number, got {value!r}", fix=fix)


@dataclass(frozen=True)
class Work:
    """How much training a job needs: samples to its target at a reference global batch."""

    samples: float  # E(B_ref): samples seen until the target accuracy, training at reference_bsz
    reference_bsz: float | None = None  # B_ref, the global batch ``samples`` was observed at
    noise_scale: float | None = None  # B_noise in E(B) = E_min (1 + B / B_noise); None: no loss

    def __post_init__(self) -> None:
        _positive(self.samples, "samples to target", "give the samples (or steps, epochs) > 0")
        _positive(self.reference_bsz, "reference batch", "give the global batch trained at")
        _positive(self.noise_scale, "noise scale", "give the gradient noise scale in samples")
        if self.noise_scale is not None and self.reference_bsz is None:
            raise InputError(
                "a noise scale needs the reference batch the work was measured at",
                fix="give reference_bsz (the global batch of the run that reached the target)",
            )

    @classmethod
    def from_steps(
        cls, steps: float, reference_bsz: float, noise_scale: float | None = None
    ) -> Work:
        """Work given as optimizer steps to the target at ``reference_bsz``."""
        _positive(steps, "steps to target", "give the steps > 0")
        _positive(reference_bsz, "reference batch", "give the global batch trained at")
        return cls(float(steps) * float(reference_bsz), reference_bsz, noise_scale)

    @classmethod
    def from_epochs(
        cls,
        epochs: float,
        dataset_size: int,
        reference_bsz: float | None = None,
        noise_scale: float | None = None,
    ) -> Work:
        """Work given as epochs over a dataset of ``dataset_size`` samples."""
        _positive(epochs, "epochs to target", "give the epochs > 0")
        _positive(dataset_size, "dataset size", "give the number of training samples")
        return cls(float(epochs) * float(dataset_size), reference_bsz, noise_scale)

    @property
    def min_samples(self) -> float:
        """E_min = E(B_ref) / (1 + B_ref / B_noise): samples needed in the small-batch limit."""
        if self.noise_scale is None:
            return self.samples
        return self.samples / (1.0 + self.reference_bsz / self.noise_scale)

    def samples_at(self, global_bsz: np.ndarray) -> np.ndarray:
        """E(B): samples to the target when training at global batch B."""
        b = np.asarray(global_bsz, dtype=float)
        if self.noise_scale is None:
            return np.full_like(b, self.samples)
        return self.min_samples * (1.0 + b / self.noise_scale)

    def steps_at(self, global_bsz: np.ndarray) -> np.ndarray:
        """S(B) = E(B) / B: optimizer steps to the target at global batch B."""
        b = np.asarray(global_bsz, dtype=float)
        return self.samples_at(b) / b


def efficiency(
    global_bsz: np.ndarray, noise_scale: float | None, reference_bsz: float | None = None
) -> np.ndarray:
    """Statistical efficiency of batch B: E_min / E(B), or Pollux's E(B_ref) / E(B) given B_ref.

    In (0, 1] against the small-batch limit; Pollux's normalisation exceeds 1 below B_ref.
    """
    b = np.asarray(global_bsz, dtype=float)
    if noise_scale is None:
        return np.ones_like(b)
    ref = 0.0 if reference_bsz is None else float(reference_bsz)
    return (noise_scale + ref) / (noise_scale + b)


def goodput(throughput: np.ndarray, efficiency_: np.ndarray) -> np.ndarray:
    """Pollux's goodput: samples per second x statistical efficiency (useful samples per second)."""
    return np.asarray(throughput, dtype=float) * np.asarray(efficiency_, dtype=float)


def time_to_accuracy(step_time_s: np.ndarray, global_bsz: np.ndarray, work: Work) -> np.ndarray:
    """Hours of training to the target: S(B) x step time."""
    return work.steps_at(global_bsz) * np.asarray(step_time_s, dtype=float) / SECONDS_PER_HOUR


def cost_to_accuracy(
    step_time_s: np.ndarray, global_bsz: np.ndarray, work: Work, usd_per_hr: np.ndarray
) -> np.ndarray:
    """Dollars to the target on a cluster billed ``usd_per_hr``: hours x price."""
    return time_to_accuracy(step_time_s, global_bsz, work) * np.asarray(usd_per_hr, dtype=float)
