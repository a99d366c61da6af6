"""Precision debugging, at its documented import path (`from pytest_trtcompare.debug import
find_fp32_nodes`): the search lives in session/precision_debug.py, beside the comparisons
that run it (`--trt-debug-precision`); `trtcompare debug-precision` is cli/debug_precision.py.
"""

from __future__ import annotations

from .session.precision_debug import PrecisionDebugResult, explain_failure, find_fp32_nodes

__all__ = ["PrecisionDebugResult", "explain_failure", "find_fp32_nodes"]
