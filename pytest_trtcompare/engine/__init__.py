"""The pure comparison engine: tolerances, chunked statistics, verdicts and report text.

numpy, and torch for tensors compared on their device (engine/tensors.py); no pytest. These
names are its surface: every module outside engine/ imports them from here (`from ..engine
import compare_outputs`), never from a submodule (ARCHITECTURE.md, enforced by
tests/test_layout.py). Users import the documented
ones from `pytest_trtcompare` or `pytest_trtcompare.compare`.
"""

from __future__ import annotations

from ..vocabulary import LAYER_MODES, METRICS, PRECISIONS, SHAPE_CHECKS, STAT_CHECKS
from .anchored import Anchor
from .arrays import as_named_array, as_output_mapping, dtype_from_name
from .compare import (
    assert_outputs_close,
    compare_one,
    compare_outputs,
    compare_with_table,
)
from .digits import against, exact, num, shortest
from .layer_report import unmatched_line
from .layers import LAYER_DTYPES, LayerView, listed
from .metrics import format_pair
from .outputs import ElementError, OutputComparison
from .report import all_within
from .results import ComparisonResult, OutputMismatchError
from .staging import STAGING
from .statistic import RECORD_KEYS, Statistic, recorded, register_statistic
from .tolerance import (
    FIELD_NAMES,
    MINIMUM_METRICS,
    RULES,
    THRESHOLD_CHECKS,
    Entry,
    Tolerance,
    ToleranceSpec,
    entry_record,
    entry_sources,
    members,
    metric_bound,
    outputs_checked_by,
    split_entry,
    with_metrics,
)
from .tolerance_table import ToleranceTable, fields_key, first_line_with, is_field_mapping
from .tuning import TUNING

__all__ = [
    "FIELD_NAMES",
    "LAYER_DTYPES",
    "LAYER_MODES",
    "METRICS",
    "MINIMUM_METRICS",
    "PRECISIONS",
    "RECORD_KEYS",
    "RULES",
    "SHAPE_CHECKS",
    "STAGING",
    "STAT_CHECKS",
    "THRESHOLD_CHECKS",
    "TUNING",
    "Anchor",
    "ComparisonResult",
    "ElementError",
    "Entry",
    "LayerView",
    "OutputComparison",
    "OutputMismatchError",
    "Statistic",
    "Tolerance",
    "ToleranceSpec",
    "ToleranceTable",
    "against",
    "all_within",
    "as_named_array",
    "as_output_mapping",
    "assert_outputs_close",
    "compare_one",
    "compare_outputs",
    "compare_with_table",
    "dtype_from_name",
    "entry_record",
    "entry_sources",
    "exact",
    "fields_key",
    "first_line_with",
    "format_pair",
    "is_field_mapping",
    "listed",
    "members",
    "metric_bound",
    "num",
    "outputs_checked_by",
    "recorded",
    "register_statistic",
    "shortest",
    "split_entry",
    "unmatched_line",
    "with_metrics",
]
