"""Model layer: the step-time estimator and statistical efficiency.

``estimator`` (StepTimeModel) composes the rest in one pass: ``physics`` (the equations),
``fit`` (what the measurements estimate: least squares per group, the per-batch compute
correction, the network decay), ``holdout`` (validation on held-out larger scales),
``intervals`` (calibrated spreads, the network's move, run-to-run variance), ``posterior``
(the joint belief and its draws), ``groups`` (one fitted group and borrowing between groups),
``transfer``, ``device_curve`` and ``roofline`` (carrying a fit to unmeasured hardware),
``persist`` (JSON files), ``efficiency`` (statistical efficiency). Imports the data and
measure layers, never ``decide`` or ``present``.
"""
