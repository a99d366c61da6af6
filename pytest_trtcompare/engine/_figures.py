"""Exact per-chunk figures of the failure report: the worst elements and the sharper
tolerances ("would pass with"), from float64 chunks (`_report32` feeds them candidates)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ._errors_chunked import Chunk
from .tolerance import Tolerance

#: NaN errors listed among the worst elements, at most: NaN pairs without nan_equal must
#: not fill the table and hide the finite errors (their count is on a line of its own).
NAN_SHOWN = 5


class Worst:
    """The lowest-index NaN errors (at most NAN_SHOWN) and then the largest (ratio, index)
    pairs of the other elements, `size` in all; ties keep the lower index."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.heap: list[tuple[float, int]] = []  # min-heap of (ratio, -flat index)
        self.nan: list[int] = []  # flat indices of NaN errors, the lowest, ascending

    def _keep(self, ratio: float, flat: int) -> None:
        ranked = (ratio, -flat)
        if len(self.heap) < self.size:
            heapq.heappush(self.heap, ranked)
        elif ranked > self.heap[0]:
            heapq.heapreplace(self.heap, ranked)

    @np.errstate(invalid="ignore")
    def add(self, chunk: Chunk) -> None:
        if chunk.nan_error_positions is not None:
            self.add_nan_errors(chunk.nan_error_positions)
        if not chunk.ratio.shape[0]:
            return
        # Only elements above the current k-th worst can enter (exact matches never do):
        # argpartition degrades badly on the many tied zeros of a mostly exact output.
        floor = self.floor()
        if self.ties_may_enter(chunk.flat_index(0)):
            candidates = np.flatnonzero(chunk.ratio >= floor)  # NaN ratios (0/0) never enter
        else:
            candidates = np.flatnonzero(chunk.ratio > floor)
        if candidates.size > self.size:
            values = chunk.ratio[candidates]
            kth = np.partition(values, candidates.size - self.size)[candidates.size - self.size]
            above, tied = candidates[values > kth], candidates[values == kth]
            candidates = np.concatenate([above, tied[: self.size - above.size]])  # lower first
        for i in candidates.tolist():
            self._keep(float(chunk.ratio[i]), chunk.flat_index(i))

    def add_nan_errors(self, positions: np.ndarray) -> None:
        """Flat indices of NaN errors, ascending: listed before any other error."""
        if positions.shape[0]:
            lowest = self.nan + positions[:NAN_SHOWN].tolist()
            self.nan = sorted(set(lowest))[:NAN_SHOWN]

    def ties_may_enter(self, first: int) -> bool:
        """Whether elements from flat index `first` on, tied with the k-th worst, may
        displace it (a lower index).

        Chunks mostly arrive in order, where ties never enter; the failure report built in
        the scan's pass adds the chunks before its first mismatch last.
        """
        return self.full() and first < -self.heap[0][1]

    def nan_may_enter(self, first: int) -> bool:
        """Whether NaN errors from flat index `first` on may be listed."""
        return len(self.nan) < NAN_SHOWN or first < self.nan[-1]

    def full(self) -> bool:
        return len(self.heap) >= self.size

    def floor(self) -> float:
        """The ratio an element must exceed to enter (0 while there is room)."""
        return self.heap[0][0] if self.full() else 0.0

    def ranked(self) -> tuple[tuple[int, float], ...]:
        nan = [(flat, math.inf) for flat in self.nan]
        finite = [(-negative, ratio) for ratio, negative in sorted(self.heap, reverse=True)]
        return tuple(nan + finite)[: self.size]


def required_tolerances(chunk: Chunk, tol: Tolerance) -> tuple[float, float]:
    """Per chunk: the atol that passes at the given rtol, and the rtol that passes at the atol.

    Maxima of np.where(mask, x, 0) instead of gathering the elements over a tolerance (in
    a failing output, maybe every element) or a masked reduction (`where=`, far slower).
    """
    d, r = chunk.abs_err, chunk.rel_err
    if not d.shape[0]:
        return 0.0, 0.0
    if tol.rule == "polygraphy":
        atol_need = _masked_max(d, lambda at: r[at] > tol.rtol, chunk.abs_argmax())
        rtol_need = _masked_max(r, lambda at: d[at] > tol.atol, chunk.rel_argmax())
        return atol_need, rtol_need
    with np.errstate(invalid="ignore"):
        # NaN: a NaN pair excused by nan_equal (needs nothing), or Inf - Inf (below)
        atol_need = float(np.fmax.reduce(d - tol.rtol * chunk.expected_abs))
    if math.isnan(atol_need):
        atol_need = 0.0
    if math.isinf(float(d.max())):  # an infinite error fails whatever the atol
        atol_need = math.inf
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        need = np.divide(np.subtract(d, tol.atol), chunk.expected_abs)
    # over atol, (d - atol) / |e| is NaN only for Inf / Inf: an rtol cannot cover it
    rtol_need = _masked_max(need, lambda at: d[at] > tol.atol)
    return max(atol_need, 0.0), math.inf if math.isnan(rtol_need) else rtol_need


def _masked_max(values: np.ndarray, inside: Callable[[Any], Any], top: int | None = None) -> float:
    """max(np.where(inside(...), values, 0)): the largest value itself when it is positive
    and its element is inside (in a failing chunk, nearly always), without the mask.

    `inside(at)` tells for an index or a slice whether the elements count; `top`: the
    index of the largest value, when known; a NaN among the values (argmax finds the
    first) takes the full look, which propagates it.
    """
    top = int(values.argmax()) if top is None else top
    top_value = float(values[top])
    if top_value > 0 and bool(inside(top)):
        return top_value
    return float(np.where(inside(slice(None)), values, 0.0).max())
