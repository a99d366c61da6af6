"""Comparison of named outputs under explicit tolerances: verdicts and statistics.

numpy arrays by numpy, torch tensors on a device by torch where they are (`tensors`).
`compare_outputs` never raises for a numeric mismatch (it returns a result that
says so); `assert_outputs_close` raises `OutputMismatchError` with the full report.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..errors import InvalidOutputError, StatisticError, ToleranceError
from ..vocabulary import FP64, SHAPE_CHECKS
from .anchored import Anchor, anchored
from .arrays import (
    Kind,
    NamedArray,
    Structure,
    as_output_mapping,
    flatten_structured,
    host_array,
    on_host,
)
from .indices import compare_indices, top_k_indices
from .metrics import compute_metrics, require_rows
from .outputs import ElementError, OutputComparison
from .quantiles import Quantiles
from .report import plural
from .results import ComparisonResult, OutputMismatchError
from .scan import Pair, Report, scan
from .statistic import DEFAULTS
from .tensors import non_finite, placed_together
from .tolerance import (
    Entry,
    Tolerance,
    ToleranceSpec,
    members,
    parse_top_k,
    split_entry,
)
from .tolerance_table import ToleranceTable

__all__ = [
    "SHAPE_CHECKS",
    "ComparisonResult",
    "ElementError",
    "OutputComparison",
    "OutputMismatchError",
    "Tolerance",
    "assert_outputs_close",
    "compare_outputs",
]


def compare_outputs(
    actual: Any,
    expected: Any,
    tolerance: ToleranceSpec = None,
    *,
    names: Iterable[str] | None = None,
    shape_check: str = "strict",
    validate: bool = False,
    **tolerance_fields: Any,
) -> ComparisonResult:
    """Compare outputs name by name; `expected` is the reference (denominator of rel error).

    `names` restricts the comparison to a subset (missing names outside it are not failures).
    `shape_check="relaxed"` compares shapes that differ only by dimensions of size 1.
    `validate=True` fails an output that holds NaN or Inf on either side, whatever the
    tolerance (Polygraphy's --validate).
    Keyword tolerance fields (atol=..., check=...) override every entry of `tolerance`.
    """
    check_shape_check(shape_check)
    check_validate(validate)
    table = ToleranceTable(tolerance, **tolerance_fields)
    return compare_with_table(
        actual, expected, table, names=names, shape_check=shape_check, validate=validate
    )


def compare_with_table(
    actual: Any,
    expected: Any,
    table: ToleranceTable,
    *,
    names: Iterable[str] | None = None,
    shape_check: str = "strict",
    anchor: Anchor | None = None,
    validate: bool = False,
) -> ComparisonResult:
    """compare_outputs with a table already made (the compare fixture's, resolved once per
    precision and fields); `shape_check` and `validate` checked by the caller. The table is
    only read.
    `anchor`: the float64 and reduced-precision runs of the reference (the fp64 check)."""
    order = _names(actual) + _names(expected)
    actual, expected, structures, expanded = flatten_structured(actual, expected)
    actual_map = as_output_mapping(actual, "actual", keep_device=True)
    expected_map = as_output_mapping(expected, "expected", keep_device=True)
    _nothing_compared(actual_map, expected_map, structures)
    restricted = _restricted_names(names)
    selected = [*order, *actual_map, *expected_map] if restricted is None else list(restricted)
    # a sequence `seq` is compared as itself (its length) and seq[0], seq[1] ...
    selected = list(dict.fromkeys(e for n in selected for e in expanded.get(n, [n])))
    table.warn_unknown([n for n in selected if n not in structures or n in order])
    missing_actual = tuple(n for n in selected if n not in actual_map and n not in structures)
    missing_expected = tuple(n for n in selected if n not in expected_map and n not in structures)
    outputs = {
        name: _structure_result(name, structures[name], table[name])
        if name in structures
        else compare_one(
            name, actual_map[name], expected_map[name], table[name], shape_check, anchor, validate
        )
        for name in selected
        if name in structures or (name in actual_map and name in expected_map)
    }
    return ComparisonResult(
        outputs=outputs,
        missing_in_actual=missing_actual,
        missing_in_expected=missing_expected,
        actual_names=tuple(actual_map),
        expected_names=tuple(expected_map),
        restricted_to=restricted,
    )


def _restricted_names(names: Any) -> tuple[str, ...] | None:
    """`names=` as a tuple of output names: one name (a str, not its characters) or an
    iterable of them; anything else is an error naming what it got."""
    if names is None:
        return None
    if isinstance(names, str):
        return (names,)
    if isinstance(names, (Mapping, bytes)) or not isinstance(names, Iterable):
        raise InvalidOutputError(
            f"names={names!r} ({type(names).__name__}): takes an output name or a list of "
            "output names, e.g. names=['logits']"
        )
    listed = list(names)
    if not all(isinstance(name, (str, int)) and not isinstance(name, bool) for name in listed):
        raise InvalidOutputError(
            f"names={listed!r}: takes output names (str), e.g. names=['logits']"
        )
    return tuple(dict.fromkeys(str(name) for name in listed))


def _nothing_compared(
    actual_map: Mapping[str, Any],
    expected_map: Mapping[str, Any],
    structures: Mapping[str, Structure],
) -> None:
    """An error when neither side holds one array: `{}` against `{}`, or only empty optionals
    (None) on both sides. Such a comparison compares no value, and passing it would
    hide the mistake that emptied both sides (a function that returns None)."""
    if actual_map or expected_map or any(s.problem for s in structures.values()):
        return  # values to compare, or a structure that differs (a failure that says so)
    if not structures:
        raise InvalidOutputError("actual and expected have no outputs: nothing to compare")
    empty = ", ".join(map(repr, structures))
    raise InvalidOutputError(
        f"no array to compare: {empty} {'is' if len(structures) == 1 else 'are'} empty "
        "(None: an empty optional) on both sides; compare them with "
        "at least one array output"
    )


def check_shape_check(value: Any) -> None:
    """ToleranceError unless `value` is one of SHAPE_CHECKS."""
    if not (isinstance(value, str) and value in SHAPE_CHECKS):
        takes = " or ".join(map(repr, SHAPE_CHECKS))
        raise ToleranceError(f"shape_check={value!r}: takes {takes}")


def check_validate(value: Any) -> None:
    """ToleranceError unless `value` is True or False."""
    if not isinstance(value, (bool, np.bool_)):
        raise ToleranceError(f"validate={value!r}: takes True or False")


def _names(outputs: Any) -> list[str]:
    return [str(name) for name in outputs] if isinstance(outputs, Mapping) else []


def _structure_result(name: str, structure: Structure, tol: Entry) -> OutputComparison:
    """A sequence's length or an optional's emptiness: passes when both sides agree."""
    return OutputComparison(
        name=name,
        passed=structure.problem is None,
        tolerance=members(tol)[0],
        actual_dtype=structure.actual,
        expected_dtype=structure.expected,
        shape=(),
        expected_shape=(),
        problem=structure.problem,
        failure=structure.problem,
        margin=0.0 if structure.problem is None else math.inf,
        figures=dict(DEFAULTS),
    )


def assert_outputs_close(
    actual: Any,
    expected: Any,
    tolerance: ToleranceSpec = None,
    *,
    names: Iterable[str] | None = None,
    shape_check: str = "strict",
    validate: bool = False,
    **tolerance_fields: Any,
) -> ComparisonResult:
    """Compare and raise OutputMismatchError (an AssertionError) with the report on failure."""
    __tracebackhide__ = True
    result = compare_outputs(
        actual,
        expected,
        tolerance,
        names=names,
        shape_check=shape_check,
        validate=validate,
        **tolerance_fields,
    )
    if not result.passed:
        raise OutputMismatchError(result.report(), result, (actual, expected))
    return result


def compare_one(
    name: str,
    actual: NamedArray,
    expected: NamedArray,
    entry: Entry,
    shape_check: str = "strict",
    anchor: Anchor | None = None,
    validate: bool = False,
) -> OutputComparison:
    """Compare one pair of arrays under one tolerance, or several that must all pass;
    `validate`: NaN or Inf on either side fails it too."""
    result = _compare_one(name, actual, expected, entry, shape_check, anchor)
    invalid = _non_finite(actual, expected) if validate else None
    if invalid is None:
        return result
    return dataclasses.replace(
        result,
        passed=False,
        margin=math.inf,
        invalid=invalid,
        base_passed=result.base_passed if result.metrics else result.passed,
    )


def _non_finite(actual: NamedArray, expected: NamedArray) -> str | None:
    """'actual holds 2 NaN and 1 Inf, first at (0, 3)', per side ('actual and expected
    hold ... each' when alike); None when both are finite."""
    found = {
        side: non_finite(named) for side, named in (("actual", actual), ("expected", expected))
    }
    texts = {}
    for side, (nan, inf, first) in found.items():
        if nan or inf:
            counts = [f"{count} {what}" for count, what in ((nan, "NaN"), (inf, "Inf")) if count]
            texts[side] = f"{' and '.join(counts)}{{each}}, first at {first}"
    if len(texts) == 2 and found["actual"] == found["expected"]:
        return "actual and expected hold " + texts["actual"].format(each=" each")
    return "; ".join(f"{side} holds {text.format(each='')}" for side, text in texts.items()) or None


def _compare_one(
    name: str,
    actual: NamedArray,
    expected: NamedArray,
    entry: Entry,
    shape_check: str,
    anchor: Anchor | None,
) -> OutputComparison:
    base, metric_checks = split_entry(entry)
    tol = base if base is not None else metric_checks[0]
    actual, expected = placed_together(actual, expected)
    header: dict[str, Any] = dict(
        name=name,
        tolerance=tol,
        actual_dtype=actual.dtype_name,
        expected_dtype=expected.dtype_name,
        shape=tuple(actual.array.shape),
        expected_shape=tuple(expected.array.shape),
    )
    a, e = actual.array, expected.array
    a_shape, e_shape = header["shape"], header["expected_shape"]
    if a_shape != e_shape:
        squeezed = _squeezed(a_shape)
        if shape_check == "strict" or squeezed != _squeezed(e_shape):
            header.update(problem=f"shape {a_shape} differs from expected shape {e_shape}")
            header.update(failure=f"shape {a_shape} vs {e_shape}", figures=dict(DEFAULTS))
            return OutputComparison(passed=False, margin=math.inf, **header)
        header["shape_note"] = _squeeze_note(a_shape, e_shape, squeezed)
        a, e = a.reshape(squeezed), e.reshape(squeezed)
    a_kind, e_kind = actual.kind, expected.kind
    if tol.postprocess is not None:
        k, axis = parse_top_k(tol.postprocess)
        if not -max(1, a.ndim) <= axis < max(1, a.ndim):
            raise InvalidOutputError(
                f"output {name!r}: postprocess={tol.postprocess!r} needs axis {axis}, "
                f"but the output has shape {a_shape}"
            )
        a, e = top_k_indices(a, k, axis), top_k_indices(e, k, axis)
        a_kind = e_kind = "int"
        header["postprocessed"] = tol.postprocess
    require_rows(name, a, metric_checks, tol.postprocess)
    metrics = compute_metrics(a, e, metric_checks) + tuple(
        anchored(name, on_host(actual).array, t, anchor) for t in metric_checks if t.check == FP64
    )
    metrics_pass = all(m.passed for m in metrics)
    try:
        if tol.check == "indices":
            result = _indices_result(a, e, tol, header)
        elif base is None:  # metric checks alone: the scan gives the report's figures
            scan_tol = tol.replace(check="elemwise")
            result = _values_result(
                a, e, a_kind, e_kind, scan_tol, header, not metrics_pass, gated=False
            )
        else:
            result = _values_result(a, e, a_kind, e_kind, tol, header, not metrics_pass)
    except StatisticError as exc:  # a registered statistic's: which output it was fed
        raise StatisticError(f"output {name!r}: {exc}") from exc.__cause__
    if not metrics:
        return result
    return dataclasses.replace(
        result,
        passed=result.passed and metrics_pass,
        base_passed=result.passed,
        margin=max(result.margin, *(m.margin for m in metrics)),
        metrics=metrics,
    )


def _squeeze_note(actual: tuple[int, ...], expected: tuple[int, ...], to: tuple[int, ...]) -> str:
    """'compared after squeezing actual (1, 3, 4) to (3, 4)'."""
    sides = [f"{side} {shape}" for side, shape in (("actual", actual), ("expected", expected))]
    squeezed = [text for text, shape in zip(sides, (actual, expected), strict=True) if shape != to]
    return f"compared after squeezing {' and '.join(squeezed)} to {to}"


def _squeezed(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(size for size in shape if size != 1)


def _unravel(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """np.unravel_index(flat, shape) as ints (C order), without its call's cost."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        index.append(i)
    return tuple(reversed(index))


def _elements(pair: Pair, shape: tuple[int, ...], flats: list[int]) -> dict[int, ElementError]:
    """Elements' values and errors, by the arithmetic of every chunk."""
    return {
        flat: ElementError(_unravel(flat, shape), a, e, abs_error, rel_error, ratio)
        for flat, (a, e, abs_error, rel_error, ratio) in pair.elements(flats).items()
    }


#: The statistic each check compares with (atol, rtol): the result's f"{it}_abs_error" ...
_CHECKED = {"elemwise": "max", "max": "max", "mean": "mean", "median": "median"}


def _values_result(
    a: Any,
    e: Any,
    a_kind: Kind,
    e_kind: Kind,
    tol: Tolerance,
    header: dict[str, Any],
    details_wanted: bool = False,
    gated: bool = True,
) -> OutputComparison:
    """`details_wanted`: the failure report's figures even when `tol` passes (a metric check
    failed); `gated=False`: `tol`'s verdict decides nothing (metric checks alone), so its
    mismatches call for no report."""
    pair = Pair(a, e, (a_kind, e_kind), tol)
    report = Report(pair)
    # The report is built in the scan's pass: from the first mismatch on (an elementwise
    # check fails exactly when there is one), or from the start for an order statistic or
    # when it is wanted anyway.
    order_check = tol.check in ("median", "quantile")
    if order_check or details_wanted:
        report.begin(0)
    fused = report.active or (gated and tol.check == "elemwise")
    figures = scan(pair, report if fused else None)
    if order_check:
        reported = report.finish()
        figures.update((name, reported[name]) for name in Quantiles.figures)
    checked = _CHECKED.get(tol.check, "quantile")
    # (no maxima where every error is NaN: those fail)
    stat_abs = figures[f"{checked}_abs_error"] or 0.0
    stat_rel = figures[f"{checked}_rel_error"] or 0.0
    nan_errors = figures["nan_errors"]
    if tol.check == "elemwise":
        passed = figures["mismatches"] == 0
    else:
        passed = nan_errors == 0 and not (stat_abs > tol.atol and stat_rel > tol.rtol)
        figures["margin"] = (
            math.inf if nan_errors else min(_ratio(stat_abs, tol.atol), _ratio(stat_rel, tol.rtol))
        )
    worst: list[int] = []
    if (gated and not passed) or details_wanted:
        figures.update(report.finish())
        worst = [flat for flat, _ in figures["worst"]]
        if tol.check == "elemwise" and not nan_errors and worst:
            figures["margin"] = figures["worst"][0][1]  # float64's, where the scan had float32's
    greatest = [figures["greatest_abs"], figures["greatest_rel"]]
    elements = _elements(pair, tuple(a.shape), [*worst, *(flat for flat in greatest if flat >= 0)])
    figures.update(
        worst=tuple(elements[flat] for flat in worst),
        greatest_abs=elements.get(greatest[0]),
        greatest_rel=elements.get(greatest[1]),
    )
    if not gated:  # `tol` decides nothing
        passed, figures["mismatches"], figures["margin"] = True, 0, 0.0
    return OutputComparison(
        passed=passed,
        failure=special_failure(figures) if not passed else None,
        margin=figures.pop("margin"),
        required_atol=stat_abs,
        required_rtol=stat_rel,
        gated=gated,
        figures=DEFAULTS | figures,
        **header,
    )


def special_failure(figures: Mapping[str, Any]) -> str | None:
    """A failure by NaN errors or Inf against a finite value, as what it is: 'NaN in actual
    at 3 positions, first (0, 0)'; None when the errors are numbers. `figures`: the result's."""
    nan_errors = figures["nan_errors"]
    if nan_errors:
        with_nan_errors = [el for el in figures["worst"] if math.isnan(el.abs_error)]
        with_nan = [
            el for el in with_nan_errors if math.isnan(el.actual) or math.isnan(el.expected)
        ]
        first = next((el.index for el in with_nan or with_nan_errors), None)
        sides = _sides("NaN", figures["nan_actual"], figures["nan_expected"])
        text = sides or plural(nan_errors, "NaN error", "NaN errors") + " (Inf - Inf)"
        return text + (f", first {first}" if first is not None else "")
    greatest = figures["greatest_abs"]
    if greatest is None or not math.isinf(greatest.abs_error):
        return None
    values = (float(greatest.actual), float(greatest.expected))
    if not any(math.isinf(value) for value in values):
        return None  # finite values too far apart for float64
    where = _sides("Inf", figures["inf_actual"], figures["inf_expected"])
    return f"{where}, first mismatch {greatest.index}"


def _sides(what: str, actual: int, expected: int) -> str:
    """'NaN in actual at 3 positions and in expected at 1 position'."""
    parts = [
        f"in {side} at {plural(count, 'position', 'positions')}"
        for side, count in (("actual", actual), ("expected", expected))
        if count
    ]
    return f"{what} {' and '.join(parts)}" if parts else ""


def _ratio(value: float, allowed: float) -> float:
    if allowed > 0:
        return value / allowed
    return 0.0 if value == 0 else math.inf


def _indices_result(a: Any, e: Any, tol: Tolerance, header: dict[str, Any]) -> OutputComparison:
    """Indices (integers, often the top-K of each row): compared on the host."""
    stats = compare_indices(host_array(a), host_array(e), tol.index_tolerance)
    return OutputComparison(
        passed=stats.failing_rows == 0,
        margin=_ratio(stats.required_index_tolerance, tol.index_tolerance),
        indices=stats,
        figures=DEFAULTS | {"count": stats.rows, "mismatches": stats.failing_rows},
        **header,
    )
