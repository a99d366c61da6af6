"""Chunked error statistics of one output pair, in one pass and bounded memory.

`scan` gives everything a passing comparison needs (counts, max/mean errors with their
positions, NaN/Inf counts, cosine similarity, margin to tolerance). Chunks whose sides are
bit-for-bit equal cost one comparison of their bits; narrow floats are screened in float32;
the rest is computed exactly in float64. `_report_pass` does the costlier work (median,
quantile, worst elements, histogram) only when a check statistic or a failure needs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._equal import EqualChunks
from ._errors_chunked import CHUNK_ELEMENTS, Chunk, ChunkComputer, dot, zero_unless
from ._report_pass import ReportBuilder
from ._screen32 import ChunkSummary, Float32Screen
from ._screen32 import applies as screen_applies
from .arrays import Kind
from .tolerance import Tolerance

__all__ = ["CHUNK_ELEMENTS", "ErrorStats", "scan", "screen_applies"]

#: A chunk whose largest error ratio stays below this cannot hold a mismatch, so its exact
#: per-element verdict is skipped. The ratio is a few ulps from exact; 1e-12 is far wider.
_SURELY_WITHIN = 1.0 - 1e-12
#: Below the smallest normal float64, allowed errors lose precision (subnormals): no skipping.
_TINY = float(np.finfo(np.float64).tiny)


@dataclass(frozen=True)
class ErrorStats:
    """What one chunked pass learns about an output pair."""

    count: int
    compared: int  # elements whose error is a number (not NaN)
    mismatches: int  # elements out of tolerance by the elementwise rule, NaN errors included
    nan_errors: int
    max_abs: float
    max_abs_at: int  # flat index, -1 when nothing was compared
    max_rel: float
    max_rel_at: int
    mean_abs: float
    mean_rel: float
    margin: float  # largest |a-e| / allowed over the elements
    nan_actual: int
    nan_expected: int
    inf_actual: int
    inf_expected: int
    nan_positions_differ: bool
    cosine_similarity: float


def _max_ignoring_nan(values: np.ndarray) -> float:
    top = float(values.max())
    if math.isnan(top):  # 0/0 ratios (zero allowed error, zero error) count as 0
        finite = values[~np.isnan(values)]
        top = float(finite.max()) if finite.size else 0.0
    return top


def _cosine(dot_aa: float, dot_ee: float, dot_dd: float) -> float:
    """Cosine similarity from |a|^2, |e|^2 and |a-e|^2, without cancellation near 1.

    cos = 1 - (|a-e|^2 - (|a| - |e|)^2) / (2 |a| |e|), so float32-accumulated sums still
    resolve 1 - cos of 1e-10.
    """
    if dot_aa == 0.0 and dot_ee == 0.0:
        return 1.0
    if dot_aa == 0.0 or dot_ee == 0.0:
        return 0.0
    norm_a, norm_e = math.sqrt(dot_aa), math.sqrt(dot_ee)
    value = 1.0 - (dot_dd - (norm_a - norm_e) ** 2) / (2.0 * norm_a * norm_e)
    return float(min(1.0, max(-1.0, value))) if math.isfinite(value) else math.nan


def _summarize_exact(chunk: Chunk, computer: ChunkComputer, always_exact: bool) -> ChunkSummary:
    """The summary of a chunk computed in float64."""
    n = chunk.abs_err.shape[0]
    summary = ChunkSummary(
        compared=n,
        max_abs=0.0,
        max_abs_at=-1,
        max_rel=0.0,
        max_rel_at=-1,
        sum_abs=float(chunk.abs_err.sum()),
        sum_rel=float(chunk.rel_err.sum()),
        margin=0.0,
        dot_aa=chunk.dot_aa,
        dot_ee=chunk.dot_ee,
        dot_dd=chunk.dot_dd,
        nan_errors=chunk.nan_errors,
        nan_actual=chunk.nan_actual,
        nan_expected=chunk.nan_expected,
        inf_actual=chunk.inf_actual,
        inf_expected=chunk.inf_expected,
        nan_positions_differ=chunk.nan_positions_differ,
    )
    if not n:
        return summary
    i, j = chunk.abs_argmax(), chunk.rel_argmax()
    summary.max_abs, summary.max_abs_at = float(chunk.abs_err[i]), chunk.flat_index(i)
    summary.max_rel, summary.max_rel_at = float(chunk.rel_err[j]), chunk.flat_index(j)
    summary.margin = _max_ignoring_nan(chunk.ratio)
    if always_exact or summary.margin > _SURELY_WITHIN:
        summary.mismatches = int(np.count_nonzero(computer.mismatch_mask(chunk)))
    return summary


def scan(
    actual: np.ndarray,
    expected: np.ndarray,
    a_kind: Kind,
    e_kind: Kind,
    tol: Tolerance,
    report: ReportBuilder | None = None,
) -> ErrorStats:
    """One chunked pass over a pair of equal-shape arrays.

    `report`: a failure report to build in the same pass, from the first chunk with a
    mismatch on (or from the start, when the caller has begun it already).
    """
    a, e = actual.reshape(-1), expected.reshape(-1)
    computer = ChunkComputer(a_kind, e_kind, tol, capacity=a.shape[0])
    chunk_elements = max(1, min(a.shape[0], CHUNK_ELEMENTS))
    screen = (
        Float32Screen(tol, computer, chunk_elements)
        if screen_applies(a.dtype, e.dtype, tol)
        else None
    )
    equality = EqualChunks(a.dtype, e.dtype, chunk_elements, tol.nan_equal, tol.inf_equal)
    always_exact = tol.atol < _TINY
    total = ChunkSummary(0, 0.0, -1, 0.0, -1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    screened: list[tuple[int, int, float, float]] = []
    equal: list[tuple[int, int, bool]] = []  # (start, stop, whether NaN or Inf pairs)
    all_equal = True
    for start in range(0, a.shape[0], CHUNK_ELEMENTS):
        stop = start + CHUNK_ELEMENTS
        a_chunk, e_chunk = a[start:stop], e[start:stop]
        summary: ChunkSummary | None = None
        computed: tuple[np.ndarray, ...] | None = None
        whole: Chunk | None = None
        exact: Chunk | None = None
        is_equal = equality.enabled and equality.equal(a_chunk, e_chunk)
        if is_equal:
            nan, inf = equality.nan_pairs, equality.inf_pairs
            equal.append((start, start + a_chunk.shape[0], bool(nan or inf)))
            summary = _equal_summary(start, a_chunk, nan, inf, equality.nan_errors)
            if report is not None:
                report.known_equal(start, start + a_chunk.shape[0], equality.nan_errors)
        elif report is not None and (whole := report.whole_chunk(start, a_chunk, e_chunk)):
            # tied errors go on: one exact float64 pass serves the scan and the report
            summary = _summarize_exact(whole, computer, always_exact)
        elif (
            screen is not None
            and (summary := screen.summarize(a_chunk, e_chunk, report is not None)) is not None
        ):
            screened.append((start, stop, summary.max_abs, summary.max_rel))
            computed = screen.last
        else:
            exact = computer.compute(a_chunk, e_chunk, start)
            summary = _summarize_exact(exact, computer, always_exact)
        all_equal &= bool(is_equal)
        if report is not None:
            if not report.active and (summary.mismatches or summary.nan_errors):
                report.begin(start)
            if report.active:
                nan_errors = equality.nan_errors if is_equal else 0
                report.add(start, a_chunk, e_chunk, is_equal, computed, whole, exact, nan_errors)
        if screen is not None and screen.dots_pending:
            summary.dot_aa, summary.dot_ee, summary.dot_dd = _float64_dots(screen, report, summary)
            screen.dots_pending = False
        _accumulate(total, summary)
    if screened and screen is not None:
        known = report.exact_maxima() if report is not None else None
        exact_maxima = screen.resolve_maxima(a, e, screened, known)
        _accumulate(total, ChunkSummary(0, *exact_maxima[:2], *exact_maxima[2:], 0, 0, 0, 0, 0, 0))
    if equal and not all_equal:
        # Not all equal: the equal chunks' squares count in the cosine similarity too.
        squares = sum(_squares(a[start:stop], special) for start, stop, special in equal)
        total.dot_aa += squares
        total.dot_ee += squares
    compared = total.compared
    return ErrorStats(
        count=int(actual.size),
        compared=compared,
        mismatches=total.mismatches + total.nan_errors,
        nan_errors=total.nan_errors,
        max_abs=total.max_abs,
        max_abs_at=total.max_abs_at,
        max_rel=total.max_rel,
        max_rel_at=total.max_rel_at,
        mean_abs=total.sum_abs / compared if compared else 0.0,
        mean_rel=total.sum_rel / compared if compared else 0.0,
        margin=math.inf if total.nan_errors else total.margin,
        nan_actual=total.nan_actual,
        nan_expected=total.nan_expected,
        inf_actual=total.inf_actual,
        inf_expected=total.inf_expected,
        nan_positions_differ=total.nan_positions_differ,
        cosine_similarity=_cosine(total.dot_aa, total.dot_ee, total.dot_dd),
    )


def _float64_dots(
    screen: Float32Screen, report: ReportBuilder | None, summary: ChunkSummary
) -> tuple[float, float, float]:
    """A failing chunk's float64 cosine sums: the report's, when it computed the chunk whole
    (the same sums, bit for bit, unless NaN pairs were left out), or the screen's."""
    whole = report.whole if report is not None else None
    if whole is not None and not summary.nan_actual:
        return whole.dot_aa, whole.dot_ee, whole.dot_dd
    return screen.float64_dots()


def _equal_summary(
    start: int, values: np.ndarray, nan_pairs: int, inf_pairs: int, nan_errors: int
) -> ChunkSummary:
    """A bit-for-bit equal chunk: every error 0 (excused NaN and Inf pairs too) but for
    `nan_errors`, which are not compared; maxima at the first compared element."""
    n = values.shape[0]
    at = start
    if nan_errors:  # the first element that is not NaN, or none
        at = start + int(np.argmin(np.isnan(values))) if nan_errors < n else -1
    summary = ChunkSummary(n - nan_errors, 0.0, at, 0.0, at, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    summary.nan_actual = summary.nan_expected = nan_pairs
    summary.inf_actual = summary.inf_expected = inf_pairs
    summary.nan_errors = nan_errors
    return summary


def _squares(values: np.ndarray, special: bool = False) -> float:
    """The float64 sum of squares; `special`: of the finite values (NaN or Inf among them)."""
    if special and values.dtype == np.float32:  # zeroed before widening: half the bytes
        values = zero_unless(values.copy(), np.isfinite(values))
        special = False
    as_float = values.astype(np.float64)
    if special:  # zeroed, not compressed: a random mask compresses slowly
        zero_unless(as_float, np.isfinite(as_float))
    return dot(as_float, as_float)


def _accumulate(total: ChunkSummary, chunk: ChunkSummary) -> None:
    """Add a chunk's sums; take its maxima when they are exact (have a position)."""
    if chunk.max_abs_at >= 0 and (
        total.max_abs_at < 0
        or chunk.max_abs > total.max_abs
        or (chunk.max_abs == total.max_abs and chunk.max_abs_at < total.max_abs_at)
    ):
        total.max_abs, total.max_abs_at = chunk.max_abs, chunk.max_abs_at
    if chunk.max_rel_at >= 0 and (
        total.max_rel_at < 0
        or chunk.max_rel > total.max_rel
        or (chunk.max_rel == total.max_rel and chunk.max_rel_at < total.max_rel_at)
    ):
        total.max_rel, total.max_rel_at = chunk.max_rel, chunk.max_rel_at
    total.margin = max(total.margin, chunk.margin)
    total.compared += chunk.compared
    total.sum_abs += chunk.sum_abs
    total.sum_rel += chunk.sum_rel
    total.dot_aa += chunk.dot_aa
    total.dot_ee += chunk.dot_ee
    total.dot_dd += chunk.dot_dd
    total.mismatches += chunk.mismatches
    total.nan_errors += chunk.nan_errors
    total.nan_actual += chunk.nan_actual
    total.nan_expected += chunk.nan_expected
    total.inf_actual += chunk.inf_actual
    total.inf_expected += chunk.inf_expected
    total.nan_positions_differ |= chunk.nan_positions_differ
