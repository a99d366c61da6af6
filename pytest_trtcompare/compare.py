"""Public comparison API (the documented import path); the engine lives in `engine/`."""

from __future__ import annotations

from .engine import (
    ComparisonResult,
    ElementError,
    OutputComparison,
    OutputMismatchError,
    Tolerance,
    ToleranceSpec,
    assert_outputs_close,
    compare_one,
    compare_outputs,
)

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
