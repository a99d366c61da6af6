"""Precision debugging, at its documented import path (`from pytest_trtcompare.debug import
find_fp32_nodes`): the search lives in session/precision_debug.py, beside the comparisons
that run it (`--trt-debug-precision`), the range scan it starts from in
session/range_scan.py, the smallest failing subgraph in session/reduce.py (`--trt-reduce`);
`trtcompare debug-precision` is cli/debug_precision.py, `trtcompare reduce`
cli/reduce_command.py.
"""

from __future__ import annotations

from .session.precision_debug import (
    PrecisionDebugResult,
    explain_failure,
    explain_range,
    find_fp32_nodes,
)
from .session.range_scan import RangeFinding, RangeScan, scan_ranges
from .session.reduce import ReduceResult, reduce_model

__all__ = [
    "PrecisionDebugResult",
    "RangeFinding",
    "RangeScan",
    "ReduceResult",
    "explain_failure",
    "explain_range",
    "find_fp32_nodes",
    "reduce_model",
    "scan_ranges",
]
