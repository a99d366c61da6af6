"""The failure report's statistics: worst elements and "would pass with" tolerances (the
histogram is `decades.Decades`, median and quantile `quantiles.Quantiles`).

Each is fed ErrorChunks like the verdict's statistics; for a float32 chunk it picks the
candidates that float32 cannot rule out (a relative margin `SLACK` its rounding cannot
cross) and refines them in float64.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import numpy as np

from .chunks import SLACK, TINY, ErrorChunk, float32_down
from .statistic import Statistic
from .tolerance import Tolerance

#: NaN errors listed among the worst elements, at most: NaN pairs without nan_equal must
#: not fill the table and hide the finite errors (their count is on a line of its own).
NAN_SHOWN = 5
#: Worst elements kept for the report (the report shows 10, or more with -v).
WORST_ELEMENTS = 25
_SURE_OVER = 1e-3  # d > atol * (1 + this): (d - atol) / |e| is within 1e-4 of exact


class Worst(Statistic):
    """The lowest-index NaN errors (at most NAN_SHOWN) and then the other elements of the
    largest ratio, `size` in all; a tie in ratio goes to the larger absolute error (with
    atol = rtol = 0 every ratio is inf), then to the lower index. `worst`: (flat index,
    ratio) of each, worst first, which the comparison reads as elements."""

    figures = ("worst",)
    when = "reported"
    defaults: ClassVar = {"worst": ()}
    line = False

    def __init__(self, size: int) -> None:
        self.size = size
        self.heap: list[tuple[float, float, int]] = []  # min-heap: (ratio, abs, -flat index)
        self.nan: list[int] = []  # flat indices of NaN errors, the lowest, ascending

    @classmethod
    def for_pair(cls, pair: Any) -> Worst:
        return cls(WORST_ELEMENTS)

    def update(self, chunk: ErrorChunk) -> None:
        if chunk.nan_errors and self.nan_may_enter(chunk.start):
            self.add_nan_errors(chunk.nan_positions())
        if chunk.equal or not chunk.ratio.shape[0]:
            return
        if chunk.exact:
            self._add_exact(chunk)
            return
        ratio, floor = chunk.ratio, self.floor()
        if floor > 0:
            candidates = np.flatnonzero(ratio >= chunk.band(floor))
        else:  # errors of 0 never enter (nor NaN pairs, made 0 by the screen)
            candidates = np.flatnonzero(chunk.abs_err)
        if candidates.shape[0] > self.size:
            values = ratio[candidates]
            kth = float(np.partition(values, values.shape[0] - self.size)[-self.size])
            candidates = candidates[values >= chunk.band(kth)]
        if candidates.shape[0]:
            self._add_exact(chunk.refine(candidates))

    @np.errstate(invalid="ignore")
    def _add_exact(self, chunk: ErrorChunk) -> None:
        # Only elements above the current k-th worst can enter (exact matches never do):
        # a partition degrades badly on the many tied zeros of a mostly exact output.
        xp, ratio, floor = chunk.xp, chunk.ratio, self.floor()
        entering = ratio > floor  # NaN ratios (0/0) never enter
        if self.full():  # a tie with the k-th worst enters by a larger error, or then index
            least, errors = self.heap[0][1], chunk.abs_err
            ties = self.ties_may_enter(chunk.flat_index(0))
            entering |= (ratio == floor) & (errors >= least if ties else errors > least)
        candidates = xp.nonzero(entering)[0]
        if candidates.shape[0] > self.size:
            values = xp.take(ratio, candidates)
            kth = _kth_largest(values, self.size, xp)
            above, tied = candidates[values > kth], candidates[values == kth]
            errors = xp.take(chunk.abs_err, tied)  # the larger first, then the lower index
            tied = xp.take(tied, xp.argsort(-errors, stable=True))
            candidates = xp.concat([above, tied[: self.size - above.shape[0]]])
        positions = chunk.positions
        flats = candidates + chunk.start if positions is None else xp.take(positions, candidates)
        self._offer(
            zip(  # one transfer each (from a device: not one per element)
                xp.take(ratio, candidates).tolist(),
                xp.take(chunk.abs_err, candidates).tolist(),
                (-flat for flat in flats.tolist()),
                strict=True,
            )
        )

    def _offer(self, ranked: Iterable[tuple[float, float, int]]) -> None:
        for item in ranked:
            if len(self.heap) < self.size:
                heapq.heappush(self.heap, item)
            elif item > self.heap[0]:
                heapq.heapreplace(self.heap, item)

    def merge(self, other: Worst) -> None:
        self._offer(other.heap)
        self.nan = sorted(set(self.nan + other.nan))[:NAN_SHOWN]

    def add_nan_errors(self, positions: np.ndarray) -> None:
        """Flat indices of NaN errors, ascending: listed before any other error."""
        if positions.shape[0]:
            self.nan = sorted(set(self.nan + positions[:NAN_SHOWN].tolist()))[:NAN_SHOWN]

    def ties_may_enter(self, first: int) -> bool:
        """Whether elements from flat index `first` on, tied with the k-th worst, may
        displace it (a lower index): the chunks before the first mismatch come last."""
        return self.full() and first < -self.heap[0][2]

    def nan_may_enter(self, first: int) -> bool:
        return len(self.nan) < NAN_SHOWN or first < self.nan[-1]

    def full(self) -> bool:
        return len(self.heap) >= self.size

    def floor(self) -> float:
        """The ratio an element must exceed to enter (0 while there is room)."""
        return self.heap[0][0] if self.full() else 0.0

    def compute(self) -> dict[str, tuple[tuple[int, float], ...]]:
        nan = [(flat, math.inf) for flat in self.nan]
        finite = [(-negative, ratio) for ratio, _, negative in sorted(self.heap, reverse=True)]
        return dict(worst=tuple(nan + finite)[: self.size])


class Required(Statistic):
    """The sharper tolerances: the atol that passes at the given rtol, the rtol that passes
    at the given atol (maxima over elements; float32 candidates are those near the chunk's
    top, or near the mask's edge where float32 cannot tell the side)."""

    figures = ("required_atol_at_rtol", "required_rtol_at_atol")
    when = "reported"  # (an elementwise check's only)
    defaults: ClassVar = dict.fromkeys(figures)
    line = False

    def __init__(self, tolerance: Tolerance) -> None:
        super().__init__(tolerance)
        self.atol = self.rtol = 0.0

    def update(self, chunk: ErrorChunk) -> None:
        if chunk.equal or not chunk.abs_err.shape[0]:
            return
        if not chunk.exact and chunk.whole is None:
            candidates = self._candidates(chunk)
            if not candidates.shape[0]:
                return
            chunk = chunk.refine(candidates)
        atol, rtol = required_tolerances(chunk.whole_chunk(), self.tolerance)
        self.atol, self.rtol = max(self.atol, atol), max(self.rtol, rtol)

    def _candidates(self, chunk: ErrorChunk) -> np.ndarray:
        tol, d, r = self.tolerance, chunk.abs_err, chunk.rel_err
        lo_atol = float32_down(tol.atol * (1 - SLACK) - TINY)
        if tol.rule == "polygraphy":
            lo_rtol = float32_down(tol.rtol * (1 - SLACK) - TINY)
            hi_rtol = np.float32(tol.rtol * (1 + SLACK) + TINY)
            hi_atol = np.float32(tol.atol * (1 + SLACK) + TINY)
            for_atol = _near_top(d, r >= lo_rtol, lambda: r > hi_rtol, self.atol, 3 * SLACK)
            for_rtol = _near_top(r, d >= lo_atol, lambda: d > hi_atol, self.rtol, 3 * SLACK)
        else:
            eabs = np.abs(chunk.cosine[1])
            allowed_part = np.multiply(eabs, np.float32(tol.rtol))
            need = np.subtract(d, allowed_part)
            bound = 4 * SLACK * (float(d.max()) + float(allowed_part.max()))  # |need - exact|
            floor = max(self.atol, float(need.max()) - bound) - bound - TINY
            for_atol = need >= float32_down(floor)
            sure = d > np.float32(tol.atol * (1 + _SURE_OVER))
            with np.errstate(all="ignore"):
                over = np.divide(np.subtract(d, np.float32(tol.atol)), eabs)  # loose near atol
            for_rtol = _near_top(over, sure, lambda: sure, self.rtol, _SURE_OVER)
            for_rtol |= (d >= lo_atol) & ~sure
        return np.flatnonzero(for_atol | for_rtol)

    def merge(self, other: Required) -> None:
        self.atol, self.rtol = max(self.atol, other.atol), max(self.rtol, other.rtol)

    def compute(self) -> dict[str, float]:
        return dict(required_atol_at_rtol=self.atol, required_rtol_at_atol=self.rtol)


def _kth_largest(values: Any, k: int, xp: Any) -> float:
    """The k-th largest of `values` (numpy: a partition, not a sort)."""
    if isinstance(values, np.ndarray):
        return float(np.partition(values, values.shape[0] - k)[values.shape[0] - k])
    return float(xp.sort(values)[values.shape[0] - k])


def required_tolerances(chunk: ErrorChunk, tol: Tolerance) -> tuple[float, float]:
    """Of a float64 chunk: the atol that passes at the given rtol, and the rtol that passes
    at the atol (maxima of where(mask, x, 0), not a gather or a masked reduction)."""
    xp, d, r = chunk.xp, chunk.abs_err, chunk.rel_err
    if not d.shape[0]:
        return 0.0, 0.0
    if tol.rule == "polygraphy":
        atol_need = _masked_max(d, lambda at: r[at] > tol.rtol, xp, chunk.argmax(0))
        rtol_need = _masked_max(r, lambda at: d[at] > tol.atol, xp, chunk.argmax(1))
        return atol_need, rtol_need
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # NaN: a NaN pair excused by nan_equal (needs nothing), or Inf - Inf (below)
        over = d - tol.rtol * chunk.expected_abs
        atol_need = float(xp.max(xp.where(xp.isnan(over), -math.inf, over)))
        need = (d - tol.atol) / chunk.expected_abs
    if math.isinf(float(d[chunk.argmax(0)])):  # an infinite error fails whatever the atol
        atol_need = math.inf
    # over atol, (d - atol) / |e| is NaN only for Inf / Inf: an rtol cannot cover it
    rtol_need = _masked_max(need, lambda at: d[at] > tol.atol, xp)
    return max(atol_need, 0.0), math.inf if math.isnan(rtol_need) else rtol_need


def _masked_max(
    values: Any, inside: Callable[[Any], Any], xp: Any, top: int | None = None
) -> float:
    """max(where(inside(...), values, 0)): the largest value itself when it is positive
    and its element is inside (in a failing chunk, nearly always), without the mask; a NaN
    among the values (argmax finds the first) takes the full look, which propagates it;
    `top`: the index of the largest value, when known."""
    top = int(xp.argmax(values)) if top is None else top
    top_value = float(values[top])
    if top_value > 0 and bool(inside(top)):
        return top_value
    return float(xp.max(xp.where(inside(slice(None)), values, 0.0)))


def _near_top(
    estimate: np.ndarray,
    maybe: np.ndarray,
    surely: Callable[[], np.ndarray],
    best: float,
    slack: float,
) -> np.ndarray:
    """Elements whose exact value may exceed `best` and be the largest over a mask: `maybe`
    holds every element of the mask, `surely()` only elements of it; `estimate` is within
    a relative `slack` / 3 of the exact value on `maybe`."""
    keep = maybe & (estimate >= float32_down(best * (1 - slack) - TINY))
    if np.count_nonzero(keep) > 64:  # the first chunk, or rising data: the chunk's top
        sure = surely()
        top = float(np.where(keep & sure, estimate, np.float32(0)).max())
        keep &= (estimate >= float32_down(top * (1 - slack) - TINY)) | ~sure
    return keep
