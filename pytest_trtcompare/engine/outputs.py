"""Per-output results: one element's errors and one output's verdict and figures."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .indices import IndexStats
from .metrics import MetricResult
from .tolerance import Tolerance


@dataclass(frozen=True)
class ElementError:
    """One element of an output: where it is, both values and its errors."""

    index: tuple[int, ...]
    actual: float | int | bool
    expected: float | int | bool
    abs_error: float
    rel_error: float
    ratio: float = math.nan  # abs error / allowed error (> 1: out of tolerance)


@dataclass(frozen=True)
class OutputComparison:
    """Verdict and figures of one output. Error statistics are over non-NaN errors."""

    name: str
    passed: bool
    tolerance: Tolerance
    actual_dtype: str
    expected_dtype: str
    shape: tuple[int, ...]
    expected_shape: tuple[int, ...]
    problem: str | None = None  # set when the values could not be compared (shape mismatch)
    shape_note: str | None = None  # a relaxed shape check: how the shapes were squeezed
    #: what failed when no error size says it: 'shape (2, 3) vs (2, 4)', 'NaN in actual at 3
    #: positions, first (0, 0)', 'Inf in actual at 1 position, first mismatch (0, 1)'
    failure: str | None = None
    margin: float = 0.0  # worst error / allowed error: > 1 fails
    required_atol: float = 0.0  # "would pass with atol >= X" (the checked statistic)
    required_rtol: float = 0.0
    indices: IndexStats | None = None
    postprocessed: str | None = None
    metrics: tuple[MetricResult, ...] = ()  # metric checks (cosine, l2, ...), all must pass
    gated: bool = True  # False: only metric checks decide (no elementwise/statistic tolerance)
    base_passed: bool = True  # the elementwise/statistic/indices tolerance passed (or none)
    #: validate=True: the NaN and Inf values it found, 'actual holds 2 NaN, first at (0, 3)'
    invalid: str | None = None
    #: every statistic's figures (engine/statistic.py; its default where not computed), by
    #: name: `count`, `max_abs_error`, `worst` (ElementErrors) ..., a registered one's too
    figures: Mapping[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        """A figure, as an attribute (`out.max_abs_error`, `out.rms_error`)."""
        figures = self.__dict__.get("figures", {})
        if name in figures:
            return figures[name]
        known = [*self.__dict__, *figures] if not name.startswith("__") else []
        close = difflib.get_close_matches(name, known, n=2)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}{hint}")

    def metric(self, check: str) -> MetricResult | None:
        """The result of metric check `check` ('cosine', 'l2', ...), None when not checked."""
        return next((m for m in self.metrics if m.check == check), None)

    @property
    def values_passed(self) -> bool:
        """Its tolerance and metric checks passed, whatever validate found."""
        return self.passed or (
            self.invalid is not None and self.base_passed and all(m.passed for m in self.metrics)
        )

    @property
    def mismatch_share(self) -> float:
        return self.mismatches / self.count if self.count else 0.0
