"""Model layer: the step-time estimator and statistical efficiency.

``estimator`` (StepTimeModel) composes the rest in one pass: ``physics`` (the equations),
``fit`` (least squares per group), ``holdout`` (validation on held-out larger scales),
``batch_correction``, ``intervals``, ``groups`` (one fitted group and borrowing between
groups), ``transfer`` with ``beliefs`` (carrying a fit to unmeasured hardware), ``persist``
(JSON files), ``efficiency`` (statistical efficiency). Imports the data and measure layers,
never ``decide`` or ``present``.
"""
