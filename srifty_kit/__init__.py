"""srifty_kit: which EC2 configuration should this training job run on, and how sure are we.

The stable API is importable from here; submodules load on first use so that
``import srifty_kit`` stays light (torch is only imported by the profiler). ``InputError``
too: the ``srifty`` command imports this package first, and sets its signal handling only
once this file has run (``srifty_kit.cli``), so nothing here may take time.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> submodule that defines it
_LAZY = {
    "InputError": "errors",
    "load_catalog": "catalog.query",
    "StepTimeModel": "model.estimator",
    "Job": "decide.job",
    "Constraints": "decide.job",
    "search": "decide.planner",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        module = importlib.import_module(f".{_LAZY[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module 'srifty_kit' has no attribute {name!r}")
