"""Public comparison API (the documented import path); the engine lives in `engine/`."""

from __future__ import annotations

from .engine.compare import assert_outputs_close, compare_one, compare_outputs
from .engine.outputs import ElementError, OutputComparison
from .engine.results import ComparisonResult, OutputMismatchError
from .engine.tolerance import Tolerance, ToleranceSpec

__all__ = [
    "ComparisonResult",
    "ElementError",
    "OutputComparison",
    "OutputMismatchError",
    "Tolerance",
    "ToleranceSpec",
    "assert_outputs_close",
    "compare_one",
    "compare_outputs",
]
