"""Inference times of the runners, as Polygraphy logs them per runner: each test's median
over its iterations rides on its records (`target_ms`, `reference_ms`); JUnit gets
trtcompare.<runner>.inference_ms per test, the accuracy summary and the JSON report the
median over the tests per runner."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Iterator
from typing import Any

from ..engine import num
from ..session.layout import wrap
from .properties import PROPERTY


def _runs(record: Any) -> Iterator[tuple[str, float]]:
    """(runner, ms) of the target and the reference of a record, where each ran."""
    pairs = ((record.target, record.target_ms), (record.reference, record.reference_ms))
    return ((runner, ms) for runner, ms in pairs if runner is not None and ms is not None)


def timing_properties(items: Iterable[Any]) -> list[tuple[str, Any]]:
    """trtcompare.<runner>.inference_ms of the target and the reference of a test's first
    record: the median of the runner's inference times in the test (ms)."""
    return [
        (f"{PROPERTY}.{runner}.inference_ms", value)
        for record in items
        for runner, value in _runs(record)
    ]


def inference_times(items: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """Per runner, the median over its tests of each test's median inference time (ms) and
    how many tests ran it: {"onnxrt-fp16": {"median_ms": 0.412, "tests": 12}}."""
    per_test: dict[str, dict[str, float]] = {}
    for r in items:
        for runner, value in _runs(r):
            per_test.setdefault(runner, {})[r.test] = value
    return {
        runner: {
            "median_ms": float(f"{statistics.median(tests.values()):.4g}"),
            "tests": len(tests),
        }
        for runner, tests in sorted(per_test.items())
    }


def inference_lines(items: Iterable[Any], width: int) -> list[str]:
    """'inference time, median per test: onnxrt-fp16 0.412 ms (12 tests), ...'."""
    times = inference_times(items)
    if not times:
        return []
    parts = [
        f"{runner} {num(t['median_ms'], 4)} ms ({t['tests']} test{'s' if t['tests'] > 1 else ''})"
        for runner, t in times.items()
    ]
    return wrap("inference time, median per test: " + ", ".join(parts), width)
