"""The comparison API at its documented import path (`from pytest_trtcompare.compare import
Tolerance`): names of `engine/__init__.py`; nothing in the package imports this module."""

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
