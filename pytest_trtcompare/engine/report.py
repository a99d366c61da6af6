"""ComparisonResult -> text: failing outputs first, most telling lines first, 100 columns."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from .arrays import dtype_from_name
from .decades import CAP_DECADE as _CAP_DECADE
from .digits import against, exact, num, pair_dtype, shortest
from .outputs import ElementError, OutputComparison
from .statistic import STATISTICS

__all__ = ["format_failure", "format_pass", "format_result", "num", "num_up", "plural"]


class ResultView(Protocol):
    """What the report reads of a ComparisonResult (results.py imports this module)."""

    @property
    def outputs(self) -> Mapping[str, OutputComparison]: ...
    @property
    def missing_in_actual(self) -> tuple[str, ...]: ...
    @property
    def missing_in_expected(self) -> tuple[str, ...]: ...
    @property
    def actual_names(self) -> tuple[str, ...]: ...
    @property
    def expected_names(self) -> tuple[str, ...]: ...
    @property
    def per_layer(self) -> bool: ...
    @property
    def first_divergence(self) -> str | None: ...
    @property
    def failed_outputs(self) -> Sequence[OutputComparison]: ...


_BAR_WIDTH = 32


def num_up(value: float | None, digits: int = 4) -> str:
    """`num`, rounded up where rounding to `digits` would give less than the value: a
    tolerance printed as a bound ("would pass with atol ≥ ...") must pass as printed."""
    text = num(value, digits)
    if value is None or not math.isfinite(value) or value <= 0 or float(text) >= value:
        return text
    step = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    up = math.ceil(value / step) * step
    while float(num(up, digits)) < value:
        up += step
    return num(up, digits)


def ratio_text(ratio: float, digits: int = 3) -> str:
    """An error over the allowed error: one just above (or below) 1 keeps the digits that
    show which side of 1 it is on; a NaN error has no ratio."""
    if not math.isfinite(ratio):
        return num(ratio)
    return f"{against(ratio, 1.0, digits)}x"


def _dtypes(out: OutputComparison) -> str:
    note = f", {out.shape_note}" if out.shape_note else ""
    return f"{out.actual_dtype} vs {out.expected_dtype}, shape {out.shape}{note}"


def _summary_line(result: ResultView) -> str:
    failed = [out for out in result.failed_outputs if out.problem is None]
    unusable = [out for out in result.failed_outputs if out.problem is not None]
    invalid = [out for out in failed if out.values_passed]  # validate's NaN or Inf alone
    failed = [out for out in failed if not out.values_passed]
    parts = []
    if failed:
        names = ", ".join(out.name for out in failed[:6]) + (" ..." if len(failed) > 6 else "")
        parts.append(f"{len(failed)} of {len(result.outputs)} outputs out of tolerance: {names}")
    if invalid:
        names = ", ".join(out.name for out in invalid[:6]) + (" ..." if len(invalid) > 6 else "")
        parts.append(f"{len(invalid)} of {len(result.outputs)} outputs hold NaN or Inf: {names}")
    parts.extend(f"{out.name}: {out.problem}" for out in unusable)
    if result.missing_in_actual:
        parts.append(f"missing in actual: {', '.join(result.missing_in_actual)}")
    if result.missing_in_expected:
        parts.append(f"missing in expected: {', '.join(result.missing_in_expected)}")
    return "; ".join(parts) or all_within(len(result.outputs))


def all_within(count: int) -> str:
    """A passing comparison's line: 'all 3 outputs within tolerance', '1 output within ...'."""
    return f"all {count} outputs within tolerance" if count != 1 else "1 output within tolerance"


def format_result(result: ResultView, verbosity: int = 0) -> str:
    """The whole report: summary line, failing outputs in detail, passing ones in one line."""
    lines = [_summary_line(result)]
    if result.per_layer and result.first_divergence is not None:
        lines.append(
            f"first divergence (topological order): {result.first_divergence} "
            f"({len(result.outputs)} tensors compared)"
        )
    if result.missing_in_actual or result.missing_in_expected:
        lines.append(f"  actual outputs:   {list(result.actual_names)}")
        lines.append(f"  expected outputs: {list(result.expected_names)}")
    for out in result.failed_outputs:
        lines.append("")
        lines.extend(format_failure(out, verbosity))
    passed = [out for out in result.outputs.values() if out.passed]
    if passed:
        lines.append("")
        lines.extend(format_pass(out) for out in passed)
    return "\n".join(lines)


def format_pass(out: OutputComparison) -> str:
    figures = f"{out.count} rows in place" if out.indices is not None else maxima(out)
    for metric in out.metrics:
        figures += f", {metric.brief()}"
    for text in _registered(out):
        figures += f", {text}"
    return f"passed: {out.name} ({_dtypes(out)}): {figures}, margin {margin_text(out.margin)}"


def margin_text(margin: float) -> str:
    """The margin (error over allowed error), in digits enough to tell which side of 1."""
    return against(margin, 1.0, 3)


def maxima(out: OutputComparison) -> str:
    """'max abs 0.00012, max rel 0.003', each in digits enough to compare with its bound."""
    tol = out.tolerance
    return (
        f"max abs {against(out.max_abs_error, tol.atol)}, "
        f"max rel {against(out.max_rel_error, tol.rtol)}"
    )


def values(out: OutputComparison, element: ElementError) -> tuple[str, str]:
    """An element's actual and expected values, each in the fewest digits that read back to
    it in the pair's dtype: two different values never print the same."""
    dtype = pair_dtype(out.actual_dtype, out.expected_dtype)
    return shortest(element.actual, dtype), shortest(element.expected, dtype)


def _saturation(out: OutputComparison, expected: float) -> str:
    """A line when the worst expected value lies beyond the actual dtype's finite range (a
    float32 attention mask of -3.4e38 becomes -65504 or -inf in float16 / bfloat16)."""
    dtype_name = out.actual_dtype
    try:
        dtype = dtype_from_name(dtype_name)
    except ValueError:
        return ""
    if dtype.kind not in "fV" or dtype.itemsize > 2:
        return ""
    try:
        import ml_dtypes

        largest = float(ml_dtypes.finfo(dtype).max)  # type: ignore[no-untyped-call]
    except (ImportError, ValueError, TypeError):
        largest = float(np.finfo(dtype).max) if dtype.kind == "f" else math.inf
    if not math.isfinite(expected) or abs(expected) <= largest:
        return ""
    return (
        f"saturated: expected {shortest(expected, out.expected_dtype)} is beyond "
        f"{dtype_name}'s range (±{shortest(largest, dtype)}); a mask or bias constant "
        "(an attention mask's float32 minimum) saturates harmlessly before a softmax: let the "
        "model outputs decide (layers='report') or give this tensor its own tolerance"
    )


def format_failure(out: OutputComparison, verbosity: int) -> list[str]:
    if out.problem is not None:
        return [f"{out.name} ({out.actual_dtype} vs {out.expected_dtype}): {out.problem}"]
    if out.invalid is not None and out.values_passed:
        return _format_invalid(out)
    if out.indices is not None:
        return _format_indices(out, verbosity) + _validated(out)
    tol = out.tolerance
    share = f"{100 * out.mismatch_share:.3g}%"
    if out.base_passed and out.metrics:  # only metric checks failed
        failed = sum(not m.passed for m in out.metrics)
        lines = [f"{out.name} ({_dtypes(out)}): {failed} of {len(out.metrics)} metric checks fail"]
        if out.gated:
            lines.append(f"  within {tol.describe()}")
    else:
        lines = [
            f"{out.name} ({_dtypes(out)}): {out.mismatches} / "
            f"{plural(out.count, 'element', 'elements')} ({share}) "
            f"{'exceeds' if out.mismatches == 1 else 'exceed'}",
            f"  {tol.describe()}",
        ]
    if out.postprocessed:
        lines[-1] += f" after {out.postprocessed}"
    if tol.check != "elemwise" and not (out.base_passed and out.metrics):
        lines.insert(1, f"  {_statistic_verdict(out)}")
    lines.extend(f"  {'FAILED' if not m.passed else 'passed'} {m.describe()}" for m in out.metrics)
    if out.failure is not None:
        lines.append(f"  {out.failure}")
    lines.extend(_validated(out))
    lines.extend(_greatest(out))
    none_compared = out.count > 0 and out.nan_errors == out.count
    if none_compared:  # the statistics below would read 0
        lines.append("  no error statistics: every element is a NaN error")
    else:
        lines.append(f"  {_statistics(out, 'abs')}{_cosine(out)}")
    if not none_compared and (verbosity >= 1 or tol.check != "elemwise"):
        lines.append(f"  {_statistics(out, 'rel')}")
    lines.extend(f"  {text}" for text in _registered(out))
    lines.extend(_special_values(out))
    elementwise_failed = out.gated and not (out.base_passed and out.metrics)
    if elementwise_failed:  # not when it passed and only metric checks failed
        lines.extend(_would_pass(out))
    lines.extend(_worst_table(out, 10 if verbosity < 1 else 25, elementwise_failed))
    lines.extend(_histogram(out))
    return lines


def _validated(out: OutputComparison) -> list[str]:
    return [] if out.invalid is None else [f"  validate: {out.invalid}"]


def _format_invalid(out: OutputComparison) -> list[str]:
    """An output within its tolerance that validate=True fails for its NaN or Inf."""
    lines = [f"{out.name} ({_dtypes(out)}): validate: {out.invalid}"]
    if out.indices is None:
        lines.append(f"  within {out.tolerance.describe()}: {maxima(out)}")
    lines.extend(f"  passed {m.describe()}" for m in out.metrics)
    lines.extend(_special_values(out))
    return lines


def _registered(out: OutputComparison) -> list[str]:
    """The texts of the statistics with a line (engine/statistic.py), each by its `describe`."""
    return [
        statistic.describe(out.figures)
        for statistic in STATISTICS
        if statistic.line and all(name in out.figures for name in statistic.figures)
    ]


def _greatest(out: OutputComparison) -> list[str]:
    """The greatest errors and where they are; beside NaN errors, only when some error is
    not 0 (an error of 0 at the first compared element is no news)."""
    tol, lines = out.tolerance, []
    other = " (NaN errors aside)" if out.nan_errors else ""
    if out.nan_errors and out.max_abs_error is None:
        return []  # no error statistics either: said below
    if out.nan_errors and not out.max_abs_error:
        compared = out.count - out.nan_errors
        return [f"  the other {plural(compared, 'element', 'elements')}: no error"]
    if out.greatest_abs is not None:
        ga = out.greatest_abs
        actual, expected = values(out, ga)
        lines += _wrapped(
            f"  greatest abs error{other} {against(ga.abs_error, tol.atol)} at {ga.index}",
            f"actual {actual} expected {expected}",
            f"(rel {against(ga.rel_error, tol.rtol)})",
        )
        saturated = _saturation(out, float(ga.expected))
        if saturated:
            lines.append(f"  {saturated}")
    if out.greatest_rel is not None:
        gr = out.greatest_rel
        actual, expected = values(out, gr)
        lines += _wrapped(
            f"  greatest rel error{other} {against(gr.rel_error, tol.rtol)} at {gr.index}",
            f"actual {actual} expected {expected}",
            f"(abs {against(gr.abs_error, tol.atol)})",
        )
    return lines


def _wrapped(head: str, values: str, other: str) -> list[str]:
    """'head: values other' on one line of at most 100 columns, else the values (float64's
    take 17 digits) on a line of their own."""
    line = f"{head}: {values} {other}"
    return [line] if len(line) <= 100 else [f"{head} {other}:", f"    {values}"]


def _statistics(out: OutputComparison, kind: str) -> str:
    """'abs error: mean 1.2e-05  median 0  p99 9.5e-05': compact, but the statistic a check
    compares with its bound in digits enough to compare with it as it does."""
    tol = out.tolerance
    q = f"p{100 * tol.quantile:g}"
    bound = tol.atol if kind == "abs" else tol.rtol
    figures = (
        ("mean", "mean", getattr(out, f"mean_{kind}_error")),
        ("median", "median", getattr(out, f"median_{kind}_error")),
        (q, "quantile", getattr(out, f"quantile_{kind}_error")),
    )
    shown = [
        f"{label} {against(value, bound, 2) if check == tol.check else num(value, 2)}"
        for label, check, value in figures
    ]
    head = f"{kind} error" + (f" ({out.count - out.nan_errors} non-NaN)" if out.nan_errors else "")
    return f"{head}: {'  '.join(shown)}"


def _statistic_verdict(out: OutputComparison) -> str:
    tol = out.tolerance
    stat = tol.check if tol.check != "quantile" else f"p{100 * tol.quantile:g}"
    if out.nan_errors:
        return (
            f"{plural(out.nan_errors, 'error is', 'errors are')} NaN, so the {stat} statistic fails"
        )
    return (
        f"{stat} abs error {against(out.required_atol, tol.atol)} > atol {exact(tol.atol)} and "
        f"{stat} rel error {against(out.required_rtol, tol.rtol)} > rtol {exact(tol.rtol)}"
    )


def _cosine(out: OutputComparison) -> str:
    """The statistics' cosine similarity, over the pairs where both values are finite: left
    out when a cosine metric check (over every element, as Polygraphy's) is listed above."""
    if out.metric("cosine") is not None:
        return ""
    value = out.cosine_similarity
    special = out.nan_actual or out.nan_expected or out.inf_actual or out.inf_expected
    label = "cosine of finite pairs" if special else "cosine"
    if math.isnan(value):
        return f"   {label} nan"
    return f"   {label} {value:.6f}" if value < 0.999999 else f"   {label} {value:.9f}"


def plural(count: int, singular: str, plural_form: str) -> str:
    """'1 element compares', '2 elements compare'."""
    return f"{count} {singular if count == 1 else plural_form}"


def _special_values(out: OutputComparison) -> list[str]:
    """The NaN and Inf counts, on lines of at most 100 columns."""
    parts = []
    if out.nan_actual or out.nan_expected:
        where = "same positions" if out.nan_positions_match else "positions differ"
        excused = " (nan_equal)" if out.tolerance.nan_equal else ""
        parts.append(
            f"NaN: actual {out.nan_actual}, expected {out.nan_expected} ({where}){excused}"
        )
    if out.inf_actual or out.inf_expected:
        parts.append(f"Inf: actual {out.inf_actual}, expected {out.inf_expected}")
    if out.nan_errors:
        parts.append(
            plural(out.nan_errors, "element compares", "elements compare")
            + f" as NaN and {'fails' if out.nan_errors == 1 else 'fail'}"
        )
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 2 + len(part) <= 100:
            lines[-1] += f"; {part}"
        else:
            lines.append(f"  {part}")
    return lines


def _would_pass(out: OutputComparison) -> list[str]:
    tol = out.tolerance
    if out.nan_errors:
        hint = f"({_nan_hint(out)})"
        line = f"  no tolerance passes: NaN errors fail at any atol/rtol {hint}"
        return [line] if len(line) <= 100 else [line[: line.index(" (")], f"    {hint}"]
    if math.isinf(out.required_atol) and math.isinf(out.required_rtol):
        return [
            "  no tolerance passes: Inf against a finite value (or the other Inf) fails at "
            "any atol/rtol"
        ]
    need_atol, need_rtol = num_up(out.required_atol), num_up(out.required_rtol)
    zero = _zero_expected(out)
    if zero is not None:  # a rel error over expected 0 is abs / eps: no rtol means anything
        line = f"  would pass with atol ≥ {need_atol} (no rtol: expected is 0 at {zero})"
        at_rtol = out.required_atol_at_rtol
        if at_rtol is not None and tol.rtol > 0 and num_up(at_rtol) != need_atol:
            return [line, f"    or atol ≥ {num_up(at_rtol)} at rtol {exact(tol.rtol)}"]
        return [line]
    line = f"  would pass with atol ≥ {need_atol} or rtol ≥ {need_rtol}"
    sharper = []
    at_rtol, at_atol = out.required_atol_at_rtol, out.required_rtol_at_atol
    if at_rtol is not None and tol.rtol > 0 and num_up(at_rtol) != need_atol:
        sharper.append(f"atol ≥ {num_up(at_rtol)} at rtol {exact(tol.rtol)}")
    if at_atol is not None and tol.atol > 0 and num_up(at_atol) != need_rtol:
        sharper.append(f"rtol ≥ {num_up(at_atol)} at atol {exact(tol.atol)}")
    if sharper and len(line) + 4 + len(", ".join(sharper)) <= 100:
        return [f"{line} ({', '.join(sharper)})"]
    return [line] + ([f"    or {' or '.join(sharper)}"] if sharper else [])


def _zero_expected(out: OutputComparison) -> tuple[int, ...] | None:
    """Where a failing element's expected value is 0, when one drives the rtol needed (its
    rel error is abs / eps): that rtol would pass anything."""
    gr: ElementError | None = out.greatest_rel
    if gr is None or gr.expected != 0 or not gr.abs_error or gr.rel_error <= out.tolerance.rtol:
        return None
    return gr.index


def _nan_hint(out: OutputComparison) -> str:
    """Which option could excuse the NaN errors, if any: nan_equal only NaN on both sides at
    the same positions, inf_equal only Inf - Inf."""
    tol = out.tolerance
    hints = []
    if out.nan_actual or out.nan_expected:
        if out.nan_actual and out.nan_expected and not out.nan_positions_match:
            hints.append("nan_equal cannot help where NaN positions differ")
        elif not (out.nan_actual and out.nan_expected):
            side = "actual" if out.nan_actual else "expected"
            hints.append(f"nan_equal cannot help: NaN in {side} only")
        elif not tol.nan_equal:
            hints.append("nan_equal=True excuses NaN on both sides")
    if (out.inf_actual or out.inf_expected) and not tol.inf_equal:
        hints.append("Inf - Inf is NaN unless inf_equal")
    return "; ".join(hints) or "NaN errors"


def _worst_table(out: OutputComparison, rows: int, ratio: bool = True) -> list[str]:
    worst = out.worst
    if not worst:
        return []
    shown = worst[:rows]
    tol = out.tolerance
    cells: list[tuple[str, ...]] = [
        (
            str(el.index),
            *values(out, el),
            against(el.abs_error, tol.atol),
            against(el.rel_error, tol.rtol),
            ratio_text(el.ratio),
        )
        for el in shown
    ]
    heads: tuple[str, ...] = ("index", "actual", "expected", "abs err", "rel err", "÷ allowed")
    if not ratio:  # metric checks alone: no allowed error per element
        heads, cells = heads[:-1], [c[:-1] for c in cells]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    fmt = "  ".join(f"{{:>{w}}}" if i else f"{{:<{w}}}" for i, w in enumerate(widths))
    lines = [f"  worst elements:  {fmt.format(*heads)}"]
    lines += [f"                   {fmt.format(*c)}" for c in cells]
    if len(worst) > rows:
        lines.append("                   (more with -v)")
    return lines


def _histogram(out: OutputComparison) -> list[str]:
    """Errors by decade, NaN errors on a row of their own (they have no decade)."""
    if not out.histogram and not out.nan_errors:
        return []
    total = sum(count for _, count in out.histogram) + out.nan_errors
    peak = max([count for _, count in out.histogram] + [out.nan_errors])
    atol = out.tolerance.atol if out.gated else 0.0  # metric checks alone: no atol applies
    atol_decade = math.floor(math.log10(atol)) if atol > 0 else None
    lines = ["  error histogram (log10 |abs err|):"]
    for decade, count in out.histogram:
        label = "0" if decade is None else f"[1e{decade}, 1e{decade + 1})"
        if decade is not None and decade >= _CAP_DECADE:  # larger errors and Inf count here
            label = f"[1e{decade}, inf]"
        bar = "█" * max(1, round(_BAR_WIDTH * count / peak))
        mark = "  ← atol" if decade is not None and decade == atol_decade else ""
        lines.append(f"    {label:>16} {count:>10} {_share(count, total)} {bar}{mark}")
    if out.nan_errors:
        bar = "█" * max(1, round(_BAR_WIDTH * out.nan_errors / peak))
        lines.append(f"    {'NaN':>16} {out.nan_errors:>10} {_share(out.nan_errors, total)} {bar}")
    return lines


def _share(count: int, total: int) -> str:
    """' 12.5%'; a row with elements never reads 0.0% (' <0.1%')."""
    share = 100 * count / total
    return " <0.1%" if 0 < share < 0.05 else f"{share:5.1f}%"


def _format_indices(out: OutputComparison, verbosity: int) -> list[str]:
    assert out.indices is not None
    stats = out.indices
    tol = out.tolerance
    lines = [
        f"{out.name} ({_dtypes(out)}): {stats.failing_rows} / {stats.rows} rows have indices "
        f"out of place",
        f"  {tol.describe()}" + (f" after {out.postprocessed}" if out.postprocessed else ""),
    ]
    for example in stats.examples[: 5 if verbosity < 1 else len(stats.examples)]:
        lines.append(
            f"  row {example.row}: actual {_short(example.actual)} expected "
            f"{_short(example.expected)} (needs index tolerance {example.needed})"
        )
    lines.append(f"  would pass with index_tolerance ≥ {stats.required_index_tolerance}")
    return lines


def _short(values: tuple[object, ...], limit: int = 10) -> str:
    text = ", ".join(str(v) for v in values[:limit])
    return f"[{text}{', ...' if len(values) > limit else ''}]"
