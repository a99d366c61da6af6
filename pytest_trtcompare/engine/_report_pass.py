"""The failure report's figures in one chunked float64 pass, plus a short selection pass.

One pass gives the worst elements (a bounded heap fed by a per-chunk partial sort), the
log10 histogram of |error|, the "would pass with" tolerances and the first histogram of the
order statistics; the median and quantile are then finished by `RankSelect` (usually one
more pass). Memory stays bounded: chunk buffers, histograms, the heap, and at most the
values of the buckets that hold the wanted ranks. Bit-for-bit equal chunks are zeros here,
as in the scan, without computing them.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import _errors_chunked as _chunked
from ._decades import Decades, top_counts
from ._equal import EqualChunks
from ._errors_chunked import Chunk, ChunkComputer
from ._select import RankSelect, quantile_from, quantile_ranks
from .arrays import Kind
from .tolerance import Tolerance


@dataclass(frozen=True)
class FailureDetails:
    """The report's extra figures: where the worst elements are and how errors spread."""

    worst: tuple[tuple[int, float], ...]  # (flat index, ratio), worst first
    histogram: tuple[tuple[int | None, int], ...]  # (floor(log10 |err|) or None for 0, count)
    required_atol: float  # smallest atol that passes with rtol unchanged
    required_rtol: float  # smallest rtol that passes with atol unchanged


@dataclass(frozen=True)
class OrderStatistics:
    median_abs: float
    median_rel: float
    quantile_abs: float
    quantile_rel: float


class _Worst:
    """The `size` largest (ratio, index) pairs; ties keep the lower index; NaN errors first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.heap: list[tuple[float, int]] = []  # min-heap of (ratio, -flat index)

    def _keep(self, ratio: float, flat: int) -> None:
        ranked = (ratio, -flat)
        if len(self.heap) < self.size:
            heapq.heappush(self.heap, ranked)
        elif ranked > self.heap[0]:
            heapq.heapreplace(self.heap, ranked)

    @np.errstate(invalid="ignore")
    def add(self, chunk: Chunk) -> None:
        if chunk.nan_error_positions is not None:
            for flat in chunk.nan_error_positions[: self.size].tolist():
                self._keep(math.inf, int(flat))
        if not chunk.ratio.shape[0]:
            return
        # Only elements above the current k-th worst can enter (exact matches never do):
        # argpartition degrades badly on the many tied zeros of a mostly exact output.
        floor = self.heap[0][0] if len(self.heap) >= self.size else 0.0
        candidates = np.flatnonzero(chunk.ratio > floor)  # NaN ratios (0/0) never enter
        if candidates.size > self.size:
            values = chunk.ratio[candidates]
            kth = np.partition(values, candidates.size - self.size)[candidates.size - self.size]
            above, tied = candidates[values > kth], candidates[values == kth]
            candidates = np.concatenate([above, tied[: self.size - above.size]])  # lower first
        for i in candidates.tolist():
            self._keep(float(chunk.ratio[i]), chunk.flat_index(i))

    def ranked(self) -> tuple[tuple[int, float], ...]:
        return tuple((-negative, ratio) for ratio, negative in sorted(self.heap, reverse=True))


def _required_tolerances(chunk: Chunk, tol: Tolerance) -> tuple[float, float]:
    """Per chunk: the atol that passes at the given rtol, and the rtol that passes at the atol.

    Masked maxima (initial 0) instead of gathering the elements over a tolerance: in a
    failing output that may be every element.
    """
    d, r = chunk.abs_err, chunk.rel_err
    if not d.shape[0]:
        return 0.0, 0.0
    if tol.rule == "polygraphy":
        atol_need = float(np.maximum.reduce(d, where=r > tol.rtol, initial=0.0))
        rtol_need = float(np.maximum.reduce(r, where=d > tol.atol, initial=0.0))
        return atol_need, rtol_need
    with np.errstate(invalid="ignore"):
        atol_need = float((d - tol.rtol * chunk.expected_abs).max())
    with np.errstate(divide="ignore", invalid="ignore"):
        need = np.divide(np.subtract(d, tol.atol), chunk.expected_abs)
    # over atol, (d - atol) / |e| is NaN only for Inf / Inf: an rtol cannot cover it
    rtol_need = float(np.maximum.reduce(need, where=d > tol.atol, initial=0.0))
    return max(atol_need, 0.0), math.inf if math.isnan(rtol_need) else rtol_need


@np.errstate(all="ignore")
def report_pass(
    actual: np.ndarray,
    expected: np.ndarray,
    a_kind: Kind,
    e_kind: Kind,
    tol: Tolerance,
    compared: int,
    worst_count: int,
) -> tuple[FailureDetails, OrderStatistics]:
    """Worst elements, histogram, sharper tolerances and order statistics of one pair."""
    a, e = actual.reshape(-1), expected.reshape(-1)
    chunk_elements = max(1, min(a.shape[0], _chunked.CHUNK_ELEMENTS))
    computer = ChunkComputer(a_kind, e_kind, tol, capacity=chunk_elements)
    equality = EqualChunks(a.dtype, e.dtype, chunk_elements)
    worst, decades = _Worst(worst_count), Decades()
    need_atol = need_rtol = 0.0
    ranks = (
        {*quantile_ranks(compared, 0.5)[:2], *quantile_ranks(compared, tol.quantile)[:2]}
        if compared
        else set()
    )
    limit = a.shape[0] // 32
    selects = (RankSelect(ranks, compared, limit), RankSelect(ranks, compared, limit))

    def first(chunk: Chunk | None, n: int) -> None:
        nonlocal need_atol, need_rtol
        if chunk is None:
            decades.zeros += n
            return
        worst.add(chunk)
        atol_need, rtol_need = _required_tolerances(chunk, tol)
        need_atol, need_rtol = max(need_atol, atol_need), max(need_rtol, rtol_need)

    visit: Callable[[Chunk | None, int], None] | None = first
    while (ranks and not all(s.done for s in selects)) or visit is not None:
        for start in range(0, a.shape[0], _chunked.CHUNK_ELEMENTS):
            a_chunk, e_chunk = a[start : start + chunk_elements], e[start : start + chunk_elements]
            if equality.enabled and equality.equal(a_chunk, e_chunk):
                chunk, n = None, a_chunk.shape[0]
                for select in selects:
                    select.add_zeros(n)
            else:
                first_round = visit is not None
                chunk = computer.compute(a_chunk, e_chunk, start, dots=False, ratio=first_round)
                n = a_chunk.shape[0]
                counts = top_counts(chunk.abs_err) if first_round else None
                if counts is not None:
                    decades.add(chunk.abs_err, counts)
                selects[0].add(chunk.abs_err, counts)
                selects[1].add(chunk.rel_err)
            if visit is not None:
                visit(chunk, n)
        visit = None
        for select in selects:
            if not select.done:
                select.finish_round()
    details = FailureDetails(worst.ranked(), decades.histogram(), need_atol, need_rtol)
    if not compared:
        return details, OrderStatistics(0.0, 0.0, 0.0, 0.0)
    return details, OrderStatistics(
        median_abs=quantile_from(selects[0], compared, 0.5),
        median_rel=quantile_from(selects[1], compared, 0.5),
        quantile_abs=quantile_from(selects[0], compared, tol.quantile),
        quantile_rel=quantile_from(selects[1], compared, tol.quantile),
    )
