"""Decide layer: from a fitted model and the catalog to a recommended configuration.

``job`` (Job, Constraints), ``candidates`` (enumeration and vectorised pricing), ``planner``
(search), ``pareto``, ``spot`` (interruption risk), ``hetero`` (two-type mixes and the batch
controller), ``online`` (search while measuring), ``explanation`` (why the pick, as data).
Imports the data, measure and model layers, never ``present``.
"""
