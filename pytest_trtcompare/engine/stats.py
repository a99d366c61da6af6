"""Chunked error statistics of one output pair, in one pass and bounded memory.

`scan` gives everything a passing comparison needs (counts, max/mean errors with their
positions, NaN/Inf counts, cosine similarity, margin to tolerance). `order_statistics` and
`failure_details` do the costlier work (median, quantile, worst elements, histogram) only
when a check statistic or a failure report needs it.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ._errors_chunked import CHUNK_ELEMENTS, Chunk, ChunkComputer
from ._screen32 import ChunkSummary, Float32Screen
from ._screen32 import applies as screen_applies
from .arrays import Kind
from .tolerance import Tolerance

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


@dataclass(frozen=True)
class FailureDetails:
    """The report's extra figures: where the worst elements are and how errors spread."""

    worst: tuple[tuple[int, float], ...]  # (flat index, ratio), worst first
    histogram: tuple[tuple[int | None, int], ...]  # (floor(log10 |err|) or None for 0, count)
    required_atol: float  # smallest atol that passes with rtol unchanged
    required_rtol: float  # smallest rtol that passes with atol unchanged


def _chunks(
    actual: np.ndarray, expected: np.ndarray, a_kind: Kind, e_kind: Kind, tol: Tolerance
) -> Iterator[tuple[ChunkComputer, Chunk]]:
    a, e = actual.reshape(-1), expected.reshape(-1)
    computer = ChunkComputer(a_kind, e_kind, tol, capacity=a.shape[0])
    for start in range(0, a.shape[0], CHUNK_ELEMENTS):
        stop = start + CHUNK_ELEMENTS
        yield computer, computer.compute(a[start:stop], e[start:stop], start)


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


def _summarize_exact(
    computer: ChunkComputer, chunk: Chunk, always_exact: bool
) -> tuple[ChunkSummary, int]:
    """(summary, mismatches) of a chunk computed in float64."""
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
    )
    if not n:
        return summary, 0
    i, j = int(chunk.abs_err.argmax()), int(chunk.rel_err.argmax())
    summary.max_abs, summary.max_abs_at = float(chunk.abs_err[i]), chunk.flat_index(i)
    summary.max_rel, summary.max_rel_at = float(chunk.rel_err[j]), chunk.flat_index(j)
    summary.margin = _max_ignoring_nan(chunk.ratio)
    mismatches = 0
    if always_exact or summary.margin > _SURELY_WITHIN:
        mismatches = int(np.count_nonzero(computer.mismatch_mask(chunk)))
    return summary, mismatches


def scan(
    actual: np.ndarray, expected: np.ndarray, a_kind: Kind, e_kind: Kind, tol: Tolerance
) -> ErrorStats:
    """One chunked pass over a pair of equal-shape arrays."""
    a, e = actual.reshape(-1), expected.reshape(-1)
    computer = ChunkComputer(a_kind, e_kind, tol, capacity=a.shape[0])
    screen = (
        Float32Screen(tol, computer, min(a.shape[0], CHUNK_ELEMENTS))
        if screen_applies(a.dtype, e.dtype, tol)
        else None
    )
    always_exact = tol.atol < _TINY
    total = ChunkSummary(0, 0.0, -1, 0.0, -1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    mismatches = nan_errors = nan_actual = nan_expected = inf_actual = inf_expected = 0
    nan_positions_differ = False
    screened: list[tuple[int, int, float, float]] = []
    for start in range(0, a.shape[0], CHUNK_ELEMENTS):
        stop = start + CHUNK_ELEMENTS
        a_chunk, e_chunk = a[start:stop], e[start:stop]
        summary = screen.summarize(a_chunk, e_chunk) if screen is not None else None
        if summary is not None:
            screened.append((start, stop, summary.max_abs, summary.max_rel))
        else:
            chunk = computer.compute(a_chunk, e_chunk, start)
            summary, chunk_mismatches = _summarize_exact(computer, chunk, always_exact)
            mismatches += chunk_mismatches
            nan_errors += chunk.nan_errors
            nan_actual += chunk.nan_actual
            nan_expected += chunk.nan_expected
            inf_actual += chunk.inf_actual
            inf_expected += chunk.inf_expected
            nan_positions_differ |= chunk.nan_positions_differ
        _accumulate(total, summary)
    if screened and screen is not None:
        exact_maxima = screen.resolve_maxima(a, e, screened)
        _accumulate(total, ChunkSummary(0, *exact_maxima[:2], *exact_maxima[2:], 0, 0, 0, 0, 0, 0))
    compared = total.compared
    return ErrorStats(
        count=int(actual.size),
        compared=compared,
        mismatches=mismatches + nan_errors,
        nan_errors=nan_errors,
        max_abs=total.max_abs,
        max_abs_at=total.max_abs_at,
        max_rel=total.max_rel,
        max_rel_at=total.max_rel_at,
        mean_abs=total.sum_abs / compared if compared else 0.0,
        mean_rel=total.sum_rel / compared if compared else 0.0,
        margin=math.inf if nan_errors else total.margin,
        nan_actual=nan_actual,
        nan_expected=nan_expected,
        inf_actual=inf_actual,
        inf_expected=inf_expected,
        nan_positions_differ=nan_positions_differ,
        cosine_similarity=_cosine(total.dot_aa, total.dot_ee, total.dot_dd),
    )


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


def order_statistics(
    actual: np.ndarray,
    expected: np.ndarray,
    a_kind: Kind,
    e_kind: Kind,
    tol: Tolerance,
    compared: int,
) -> tuple[float, float, float, float]:
    """(median abs, median rel, quantile abs, quantile rel) over the compared elements.

    Needs one float64 array of the compared elements at a time (abs errors, then relative).
    """
    if not compared:
        return 0.0, 0.0, 0.0, 0.0
    results: list[float] = []
    for field in ("abs_err", "rel_err"):
        values = np.empty(compared)
        filled = 0
        for _, chunk in _chunks(actual, expected, a_kind, e_kind, tol):
            part = getattr(chunk, field)
            values[filled : filled + part.shape[0]] = part
            filled += part.shape[0]
        results += [quantile_in_place(values, 0.5), quantile_in_place(values, tol.quantile)]
        del values
    return results[0], results[2], results[1], results[3]


def quantile_in_place(values: np.ndarray, q: float) -> float:
    """Linear-interpolation quantile (numpy's default) that partitions `values` in place.

    Unlike np.quantile it gives Inf, not NaN, when an infinite error is interpolated.
    """
    position = (values.shape[0] - 1) * q
    low = math.floor(position)
    high = min(low + 1, values.shape[0] - 1)
    values.partition([low, high] if high != low else low)
    below, above, t = float(values[low]), float(values[high]), position - low
    if t == 0 or below == above:
        return below
    if math.isinf(above):
        return math.inf
    return float(below + t * (above - below))


@np.errstate(all="ignore")
def failure_details(
    actual: np.ndarray,
    expected: np.ndarray,
    a_kind: Kind,
    e_kind: Kind,
    tol: Tolerance,
    worst_count: int,
) -> FailureDetails:
    """Worst elements by error ratio, a log10 histogram of |error|, and sharper tolerances."""
    worst: list[tuple[float, int]] = []  # min-heap of (ratio, flat index)
    decades: dict[int | None, int] = {}
    required_atol = required_rtol = 0.0
    for _, chunk in _chunks(actual, expected, a_kind, e_kind, tol):
        if chunk.nan_error_positions is not None:  # NaN errors rank first, as infinitely wrong
            for flat in chunk.nan_error_positions[:worst_count].tolist():
                _keep_worst(worst, (math.inf, int(flat)), worst_count)
        n = chunk.abs_err.shape[0]
        if not n:
            continue
        ratio = np.nan_to_num(chunk.ratio, nan=0.0, posinf=np.inf)
        # Only elements above the current k-th worst can enter (exact matches never do):
        # argpartition degrades badly on the many tied zeros of a mostly exact output.
        floor = worst[0][0] if len(worst) >= worst_count else 0.0
        candidates = np.flatnonzero(ratio > floor)
        if candidates.size > worst_count:
            keep = np.argpartition(ratio[candidates], candidates.size - worst_count)
            candidates = candidates[keep[candidates.size - worst_count :]]
        for i in candidates.tolist():
            _keep_worst(worst, (float(ratio[i]), chunk.flat_index(i)), worst_count)
        _add_decades(decades, chunk.abs_err)
        atol_need, rtol_need = _required_tolerances(chunk, tol)
        required_atol = max(required_atol, atol_need)
        required_rtol = max(required_rtol, rtol_need)
    ordered = sorted(worst, reverse=True)
    return FailureDetails(
        worst=tuple((-negative_index, ratio) for ratio, negative_index in ordered),
        histogram=tuple(
            sorted(decades.items(), key=lambda kv: -math.inf if kv[0] is None else kv[0])
        ),
        required_atol=required_atol,
        required_rtol=required_rtol,
    )


def _keep_worst(heap: list[tuple[float, int]], item: tuple[float, int], size: int) -> None:
    """Min-heap of the `size` largest (ratio, -index) items; ties keep the lower index."""
    ranked = (item[0], -item[1])
    if len(heap) < size:
        heapq.heappush(heap, ranked)
    elif ranked > heap[0]:
        heapq.heapreplace(heap, ranked)


def _add_decades(decades: dict[int | None, int], abs_err: np.ndarray) -> None:
    zero = abs_err == 0
    n_zero = int(zero.sum())
    if n_zero:
        decades[None] = decades.get(None, 0) + n_zero
    nonzero = abs_err[~zero]
    if nonzero.size:
        exponents = np.floor(np.log10(np.minimum(nonzero, 1e300))).astype(np.int64)
        values, counts = np.unique(exponents, return_counts=True)
        for value, count in zip(values.tolist(), counts.tolist(), strict=True):
            decades[value] = decades.get(value, 0) + count


def _required_tolerances(chunk: Chunk, tol: Tolerance) -> tuple[float, float]:
    """Per chunk: the atol that passes at the given rtol, and the rtol that passes at the atol."""
    d, r = chunk.abs_err, chunk.rel_err
    if tol.rule == "polygraphy":
        over_rtol = d[r > tol.rtol]
        over_atol = r[d > tol.atol]
    else:
        over_rtol = d - tol.rtol * chunk.expected_abs
        with np.errstate(divide="ignore", invalid="ignore"):
            over_atol = (d - tol.atol) / chunk.expected_abs
        over_atol = np.where(d > tol.atol, over_atol, 0.0)
        over_atol[np.isnan(over_atol)] = np.inf
    atol_need = float(over_rtol.max()) if over_rtol.size else 0.0
    rtol_need = float(over_atol.max()) if over_atol.size else 0.0
    return max(atol_need, 0.0), max(rtol_need, 0.0)
