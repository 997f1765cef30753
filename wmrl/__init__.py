"""wmrl: World Model RL, taught notebook by notebook. The correction step is at the package root
(`wmrl.CorrectionConfig`, `wmrl.WMRLCorrector`, `wmrl.CorrectionResult`, `wmrl.METHODS`); it is imported on first
use, so `import wmrl` stays free of numpy's and scipy's import time. Everything else lives in its subpackage."""
from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"
__all__ = ["CorrectionConfig", "CorrectionResult", "METHODS", "WMRLCorrector", "__version__"]
_ROOT = {"CorrectionConfig": "wmrl.core.correction", "CorrectionResult": "wmrl.core.correction",
         "WMRLCorrector": "wmrl.core.correction", "METHODS": "wmrl.core.methods"}

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on first use
    from wmrl.core.correction import CorrectionConfig, CorrectionResult, WMRLCorrector
    from wmrl.core.methods import METHODS


def __getattr__(name: str):
    if name in _ROOT:
        import importlib
        value = getattr(importlib.import_module(_ROOT[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'wmrl' has no attribute {name!r}")
