"""An outcome in one line, for `--tb=line`, `--tb=no` and the short test summary: which
output, its verdict, its worst error against the allowed one; for a golden problem the
message with the command that fixes it, its lines joined."""

from __future__ import annotations

import math

from ..engine import ComparisonResult, OutputComparison, all_within, num
from .outcome import Kind, Outcome, runner_name


def outcome_line(outcome: Outcome) -> str:
    """The outcome of a comparison, a golden check or a runner in one line."""
    worst = outcome.worst
    if outcome.kind is not Kind.MISMATCH or worst is None:
        return joined(outcome.message)
    head = joined(outcome.message)
    if outcome.source == "compare_frameworks" and not head:
        head = f"{runner_name(outcome.target)} vs {runner_name(outcome.reference)}:"
    iteration = outcome.failing_iteration
    return " ".join(part for part in (head, iteration.strip(), result_line(worst)) if part)


def result_line(result: ComparisonResult) -> str:
    """'logits: 6 / 8000 elements exceed elemwise tolerance atol=0.001 rtol=0.001, worst
    2x the allowed error (abs 0.002)'; with several failing outputs the worst one
    (per-layer: the first divergence) after their count."""
    failed = result.failed_outputs
    parts = []
    if failed:
        if result.layers is not None:  # the first divergence, by its node
            chosen, what = failed[0], "layers"
            label = result.layers.label(chosen.name)
        else:
            chosen, what = max(failed, key=_severity), "outputs"
            label = chosen.name
        text = output_line(chosen, label)
        if len(failed) > 1:
            worst = "first" if result.layers is not None else "worst"
            text = f"{len(failed)} of {len(result.outputs)} {what} fail, {worst} {text}"
        parts.append(text)
    if result.missing_in_actual:
        parts.append(f"missing in actual: {', '.join(result.missing_in_actual)}")
    if result.missing_in_expected:
        parts.append(f"missing in expected: {', '.join(result.missing_in_expected)}")
    return "; ".join(parts) or all_within(len(result.outputs))


def output_line(out: OutputComparison, label: str | None = None) -> str:
    """One failing output: its name, what failed, and by how much (and what validate found)."""
    name = label or out.name
    if out.invalid is None:
        return _values_line(out, name)
    if out.values_passed:
        return f"{name}: validate: {out.invalid}"
    return f"{_values_line(out, name)}; validate: {out.invalid}"


def _values_line(out: OutputComparison, name: str) -> str:
    tolerance = out.tolerance.describe()
    if out.problem is not None:
        return f"{name}: {out.problem}"
    if out.indices is not None:
        stats = out.indices
        return f"{name}: {stats.failing_rows} / {stats.rows} rows out of place ({tolerance})"
    if out.base_passed and out.metrics:  # only metric checks failed
        return f"{name}: " + "; ".join(m.describe() for m in out.metrics if not m.passed)
    verb = "exceeds" if out.mismatches == 1 else "exceed"
    text = f"{name}: {out.mismatches} / {out.count} elements {verb} {tolerance}"
    if out.nan_errors:
        return f"{text}, {out.nan_errors} of them NaN errors (no tolerance passes)"
    return f"{text}, worst {_times(out.margin)} the allowed error (abs {num(out.max_abs_error)})"


def joined(message: str) -> str:
    """A message's lines joined with one space ('... create it with: pytest ...')."""
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


def _severity(out: OutputComparison) -> tuple[bool, float]:
    """Problems (shape, name) first, then the largest margin."""
    margin = out.margin if not math.isnan(out.margin) else math.inf
    return out.problem is not None, margin


def _times(margin: float) -> str:
    """'2.68x'; a margin just above 1 never prints as 1; an infinite one 'inf times'."""
    if math.isinf(margin):
        return "inf times"
    text = num(margin, 3)
    if math.isfinite(margin) and margin > 1 and float(text) <= 1:
        text = ">1"
    return f"{text}x"
