"""Measure layer: timing a torch model here or on a cluster.

The profiler (``profile``), one training step (``torch_step``), the stopping rule, memory,
gradient noise scale, variance of the samples, the host fingerprint, demo models, and
``distributed/`` for torch.distributed runs. Imports the data layer (``tables``, ``catalog``),
never ``model``, ``decide`` or ``present``.
"""
