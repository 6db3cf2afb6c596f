"""Learned per-batch-size correction of compute time, kept only where held-out scales gain.

Compute time is not always linear in the local batch (cuDNN picks other kernels, padding to
tensor-core multiples, data-dependent work as in YOLOv3). Compute does not depend on the
cluster's size, so a correction learned from small clusters at a batch size carries to large
ones: the median of log(measured / linear compute) at each measured batch size, from the rows
where compute is measured (step - sync, or one-worker steps), interpolated linearly in
log(local_bsz) between them and held constant beyond. (np.interp rather than a scikit-learn
neighbours model: it is the same two-neighbour interpolation and a million candidates in the
search cost ~20 ms instead of a sort.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from srifty_kit.model.physics import StepParams, compute_time

MIN_BATCH_SIZES = 3  # fewer distinct batch sizes: the linear model is all there is to say


@dataclass
class BatchCorrection:
    """log compute factor at measured batch sizes, interpolated between them."""

    log_bsz: np.ndarray
    log_factor: np.ndarray

    def factor(self, local_bsz: np.ndarray) -> np.ndarray:
        """Multiplier of T_c at each batch size."""
        log_b = np.log(np.asarray(local_bsz, float))
        return np.exp(np.interp(log_b, self.log_bsz, self.log_factor))


def learn(params: StepParams, rows: pd.DataFrame) -> BatchCorrection | None:
    """The correction from ``rows`` (with per_node, sync_time_s), or None if not learnable."""
    step = rows["step_time_s"].to_numpy(float)
    sync = rows["sync_time_s"].to_numpy(float)
    single = rows["num_workers"].to_numpy() == 1
    measured = np.where(np.isnan(sync), np.where(single, step, np.nan), step - sync)
    b = rows["local_bsz"].to_numpy(float)
    ok = measured > 0
    if np.unique(b[ok]).size < MIN_BATCH_SIZES:
        return None
    ratio = pd.Series(np.log(measured[ok] / compute_time(params, b[ok])))
    mean = ratio.groupby(b[ok]).median()
    return BatchCorrection(np.log(mean.index.to_numpy(float)), mean.to_numpy())
