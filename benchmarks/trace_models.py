"""The training models of the reference traces: kept here for the benchmarks' imports.

The models live in ``srifty_kit.measure.reference_models`` (so ``srifty profile --model
bert`` and the op-graph facts reach them); this module names the four profiled on a CPU.
"""

from __future__ import annotations

from srifty_kit.measure.reference_models import REFERENCE_MODELS, bert, cifar10, imagenet, ncf

TRACE_MODELS = {"cifar10": cifar10, "imagenet": imagenet, "bert": bert, "ncf": ncf}
__all__ = ["REFERENCE_MODELS", "TRACE_MODELS"]
