"""pytest-trtcompare: accuracy regression testing of deployed ML models inside pytest."""

from __future__ import annotations

from .engine.compare import (
    ComparisonResult,
    ElementError,
    OutputComparison,
    OutputMismatchError,
    assert_outputs_close,
    compare_outputs,
)
from .engine.tolerance import Tolerance
from .errors import InvalidOutputError, ToleranceError, ToleranceWarning, TrtCompareError

__version__ = "0.1.0"

__all__ = [
    "ComparisonResult",
    "ElementError",
    "InvalidOutputError",
    "OutputComparison",
    "OutputMismatchError",
    "Tolerance",
    "ToleranceError",
    "ToleranceWarning",
    "TrtCompareError",
    "__version__",
    "assert_outputs_close",
    "compare_outputs",
]
