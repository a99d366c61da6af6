"""The failure report's pass over narrow-float chunks, in float32 with exact refinement.

`Float32Screen` gives each chunk's |a - e|, relative error and error ratio in float32, a
few ulps from float64's. Every figure of the report is still float64's: float32 only
chooses candidates, with a margin of `SLACK` (relative) and `TINY` (absolute) that its
rounding cannot cross, and the candidates are recomputed in float64:
- worst elements: those whose float32 ratio reaches the heap's floor or the chunk's k-th
  largest ratio, less the margin;
- decades: |a - e| rounded to float32 is monotone, so only values whose rounding equals a
  decade boundary's are looked up exactly (`Decades.add_float32`);
- order statistics: the float32 values place elements below, inside or above each window
  (`_windows`), and the ones inside are kept in float64;
- "would pass with" tolerances (elementwise checks): maxima over elements, so the
  candidates are those near the float32 maximum, or near the mask's edge (d vs atol,
  r vs rtol), where float32 cannot tell which side they are on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ._decades import Decades
from ._errors_chunked import EPS, Chunk, ChunkComputer
from ._figures import Worst, required_tolerances
from ._screen32 import Float32Screen
from ._windows import SLACK, TINY, Window
from ._windows import float32_down as _down  # a threshold that never drops a candidate
from .tolerance import Tolerance

_DENSE = 8  # candidates in more than 1/_DENSE of a chunk: compute it all, contiguous
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_SURE_OVER = 1e-3  # d > atol * (1 + this): (d - atol) / |e| is within 1e-4 of exact


class Report32:
    """Adds narrow-float chunks to the report's accumulators; `add` returns None for a
    chunk that needs the float64 path (Inf, NaN errors, overflow)."""

    def __init__(self, tol: Tolerance, computer: ChunkComputer, chunk_elements: int) -> None:
        self.tol = tol
        self.computer = computer
        self.screen = Float32Screen(tol, computer, chunk_elements)
        self._eabs = np.empty(chunk_elements, dtype=np.float32)
        # Its own buffers: a dense chunk stays valid while `computer` serves candidates.
        self._whole = ChunkComputer(computer.a_kind, computer.e_kind, tol, chunk_elements)
        self._dense: Chunk | None = None  # of the chunk `add` is on, once computed
        #: chunk start -> exact (max abs, its index, max rel, its index), of whole chunks
        self.maxima: dict[int, tuple[float, int, float, int]] = {}
        #: Whether the last chunk needed computing whole: the next one likely does too
        #: (`whole_chunk`), and then its float32 screening is wasted work.
        self.expect_whole = False

    def _dense_chunk(self, a: np.ndarray, e: np.ndarray, count: int) -> Chunk | None:
        """The whole chunk in float64, when `count` candidates make a contiguous pass
        cheaper than gathering them (errors that tie in float32: nearly every element is a
        candidate) or another figure has computed it already; None when they are few or
        the chunk drops elements (NaN errors)."""
        if self._dense is not None:  # computed for another figure: serves any count
            return self.whole()
        if count * _DENSE < a.shape[0]:
            return None
        self._dense = self._whole.compute(a, e, 0)
        return self.whole()

    def whole(self) -> Chunk | None:
        """The chunk `add` is on in float64, with its cosine sums, once a figure has needed
        it whole (None otherwise, or when it drops elements)."""
        dense = self._dense
        return dense if dense is not None and dense.positions is None else None

    def _exact(self, a: np.ndarray, e: np.ndarray, positions: np.ndarray) -> Chunk:
        return self.computer.compute(a[positions], e[positions], 0, dots=False)

    @np.errstate(all="ignore")
    def add(
        self,
        a: np.ndarray,
        e: np.ndarray,
        start: int,
        worst: Worst,
        decades: Decades,
        windows: list[tuple[str, Window]],
        required: tuple[float, float] | None,
        screened: tuple[np.ndarray, ...] | None = None,
    ) -> tuple[float, float] | None:
        """`screened`: the chunk's float32 (e, |a - e|, relative error, ratio) when the
        scan has just computed them (`Float32Screen.last`)."""
        self._dense = None  # a new chunk
        got = screened if screened is not None else self.screen.ratios(a, e)
        if got is None:
            return None
        e32, d, r, ratio = got
        self._worst(a, e, start, d, ratio, worst)
        # Once one figure needed the whole chunk in float64 (tied errors), the others read
        # it too: exact at once, and cheaper than deciding which elements need it.
        whole = self.whole()
        decades.add_float32(
            d, lambda at: self._abs_errors(a, e, at), None if whole is None else whole.abs_err
        )
        self._windows(a, e, d, r, windows)
        whole = self.whole()
        self.expect_whole = whole is not None
        if whole is not None:
            self._keep_maxima(whole, start)
        if required is None:
            return 0.0, 0.0
        if whole is not None:
            return required_tolerances(whole, self.tol)
        return self._required(a, e, e32, d, r, required)

    @np.errstate(all="ignore")
    def whole_chunk(self, a: np.ndarray, e: np.ndarray, start: int) -> Chunk | None:
        """The chunk in float64 with its cosine sums, for `add_whole`; None when it holds
        NaN or Inf, or errors beyond float32's range (the scan's float32 path decides)."""
        chunk = self._whole.compute(a, e, start)
        plain = (
            chunk.positions is None
            and not (chunk.nan_actual or chunk.nan_expected or chunk.inf_actual)
            and not chunk.inf_expected
            and (not chunk.abs_err.shape[0] or chunk.abs_err[chunk.abs_argmax()] < _FLOAT32_MAX)
        )
        self._dense = chunk
        self.expect_whole = plain  # else the float32 path decides again
        return chunk if plain else None

    def add_whole(
        self,
        chunk: Chunk,
        worst: Worst,
        decades: Decades,
        windows: list[tuple[str, Window]],
        required: bool,
    ) -> tuple[float, float]:
        """Adds a chunk of `whole_chunk`: every figure from its float64 values."""
        worst.add(chunk)
        decades.add_float32(chunk.abs_err, lambda at: chunk.abs_err[at], chunk.abs_err)
        self.expect_whole = place_chunk(windows, chunk)
        return required_tolerances(chunk, self.tol) if required else (0.0, 0.0)

    def _keep_maxima(self, whole: Chunk, start: int) -> None:
        """The chunk's exact maxima, which the scan would otherwise look up again when its
        float32 maximum ties the output's (`Float32Screen.resolve_maxima`)."""
        i, j = whole.abs_argmax(), whole.rel_argmax()
        abs_top, rel_top = float(whole.abs_err[i]), float(whole.rel_err[j])
        self.maxima[start] = (abs_top, start + i, rel_top, start + j)

    def _worst(
        self,
        a: np.ndarray,
        e: np.ndarray,
        start: int,
        d: np.ndarray,
        ratio: np.ndarray,
        worst: Worst,
    ) -> None:
        floor = worst.floor()
        if floor > 0:
            candidates = np.flatnonzero(ratio >= _down(floor * (1 - 3 * SLACK) - TINY))
            dense = self._dense_chunk(a, e, candidates.shape[0])
            if dense is not None:  # tied ratios: no partition of nearly the whole chunk
                worst.add(replace(dense, start=start))
                return
        elif worst.full() and not worst.ties_may_enter(start):
            # The heap holds exact zeros (or NaN pairs): only errors above 0 can enter, and
            # a float32 error is 0 only for an exact 0 or a NaN pair the screen zeroed.
            candidates = np.flatnonzero(d)
        else:  # the first chunk: the partition below finds its top
            candidates = np.arange(ratio.shape[0])
        if candidates.shape[0] > worst.size:
            values = ratio[candidates]
            kth = float(np.partition(values, values.shape[0] - worst.size)[-worst.size])
            if kth == 0:  # errors of exactly 0 (or NaN pairs) tie: only the first few count
                candidates = _nonzero_and_first_zeros(
                    a, values, candidates, worst.size, self.tol.nan_equal
                )
            else:
                candidates = candidates[values >= _down(kth * (1 - 3 * SLACK) - TINY)]
        dense = self._dense_chunk(a, e, candidates.shape[0])
        if dense is not None:  # tied at the top
            worst.add(replace(dense, start=start))
            return
        if not candidates.shape[0]:
            return
        chunk = self._exact(a, e, candidates)
        worst.add(replace(chunk, positions=candidates + start))

    def _abs_errors(self, a: np.ndarray, e: np.ndarray, positions: np.ndarray) -> np.ndarray:
        dense = self._dense_chunk(a, e, positions.shape[0])
        return dense.abs_err[positions] if dense is not None else _exact_errors(a, e, positions)[0]

    def _windows(
        self,
        a: np.ndarray,
        e: np.ndarray,
        d: np.ndarray,
        r: np.ndarray,
        windows: list[tuple[str, Window]],
    ) -> None:
        whole = self.whole()
        if whole is not None:  # another figure computed the chunk: its values place all
            place_chunk(windows, whole)
            return
        masks = []
        for kind, window in windows:
            placed = window.estimate(d if kind == "abs" else r, d)
            if placed is not None:
                mask, below, at_lo = placed
                window.count(below, at_lo)
                masks.append((kind, window, mask))
        if not masks:
            return
        union = masks[0][2].copy()
        for _, _, mask in masks[1:]:
            union |= mask
        dense = self._dense_chunk(a, e, int(np.count_nonzero(union)))
        if dense is not None:  # tied errors: compress the float64 chunk, no gathering
            for kind, window, mask in masks:
                window.keep((dense.abs_err if kind == "abs" else dense.rel_err)[mask])
            return
        positions = np.flatnonzero(union)  # no NaN pair: their errors are 0, below windows
        exact_abs, exact_rel = _exact_errors(a, e, positions)
        for kind, window, mask in masks:
            inside = mask[positions]
            window.keep((exact_abs if kind == "abs" else exact_rel)[inside])

    def _required(
        self,
        a: np.ndarray,
        e: np.ndarray,
        e32: np.ndarray,
        d: np.ndarray,
        r: np.ndarray,
        best: tuple[float, float],
    ) -> tuple[float, float]:
        """Exact maxima over the elements whose values may exceed `best` (exact so far)."""
        tol = self.tol
        lo_atol = _down(tol.atol * (1 - SLACK) - TINY)
        if tol.rule == "polygraphy":
            lo_rtol = _down(tol.rtol * (1 - SLACK) - TINY)
            hi_rtol = np.float32(tol.rtol * (1 + SLACK) + TINY)
            hi_atol = np.float32(tol.atol * (1 + SLACK) + TINY)
            for_atol = _near_top(d, r >= lo_rtol, lambda: r > hi_rtol, best[0], 3 * SLACK)
            for_rtol = _near_top(r, d >= lo_atol, lambda: d > hi_atol, best[1], 3 * SLACK)
        else:
            eabs = np.abs(e32, out=self._eabs[: d.shape[0]])
            allowed_part = np.multiply(eabs, np.float32(tol.rtol))
            need = np.subtract(d, allowed_part)
            bound = 4 * SLACK * (float(d.max()) + float(allowed_part.max()))  # |need - exact|
            for_atol = need >= _down(max(best[0], float(need.max()) - bound) - bound - TINY)
            sure = d > np.float32(tol.atol * (1 + _SURE_OVER))
            over = np.divide(np.subtract(d, np.float32(tol.atol)), eabs)  # loose near atol
            for_rtol = _near_top(over, sure, lambda: sure, best[1], _SURE_OVER)
            for_rtol |= (d >= lo_atol) & ~sure
        candidates = np.flatnonzero(for_atol | for_rtol)
        if not candidates.shape[0]:
            return 0.0, 0.0
        dense = self._dense_chunk(a, e, candidates.shape[0])
        return required_tolerances(dense or self._exact(a, e, candidates), tol)


def place_chunk(windows: list[tuple[str, Window]], chunk: Chunk) -> bool:
    """Places every float64 error of `chunk` in the windows of its kind; returns whether
    a window holds more than 1/_DENSE of the chunk (tied errors)."""
    dense = False
    for kind, window in windows:
        placed = window.place(chunk.abs_err if kind == "abs" else chunk.rel_err)
        dense |= placed * _DENSE >= chunk.abs_err.shape[0]
    return dense


def _nonzero_and_first_zeros(
    a: np.ndarray, values: np.ndarray, candidates: np.ndarray, k: int, nan_pairs: bool
) -> np.ndarray:
    """The candidates whose float32 ratio (`values`, one per candidate) is above 0, and the
    first `k` zero errors.

    A float32 ratio of 0 is an error of exactly 0, whose float64 ratio is 0 too, or a NaN
    pair (`nan_pairs`: zeroed by the screen), whose float64 ratio is NaN and never a worst
    element; ties keep the lower index, so no later zero can enter.
    """
    zero = candidates[values == 0]
    if nan_pairs:
        zero = zero[~np.isnan(a[zero])]
    return np.union1d(candidates[values > 0], zero[:k])


def _near_top(
    estimate: np.ndarray,
    maybe: np.ndarray,
    surely: Callable[[], np.ndarray],
    best: float,
    slack: float,
) -> np.ndarray:
    """Elements whose exact value may exceed `best` and be the largest over a mask.

    `maybe` holds every element of the mask, `surely()` only elements of it; `estimate` is
    within a relative `slack` / 3 of the exact value on `maybe`.
    """
    keep = maybe & (estimate >= _down(best * (1 - slack) - TINY))
    if np.count_nonzero(keep) > 64:  # the first chunk, or rising data: the chunk's top
        sure = surely()
        top = float(np.where(keep & sure, estimate, np.float32(0)).max())
        keep &= (estimate >= _down(top * (1 - slack) - TINY)) | ~sure
    return keep


def _exact_errors(
    a: np.ndarray, e: np.ndarray, positions: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """float64 |a - e| and relative error at positions holding finite, non-NaN pairs: the
    arithmetic of `ChunkComputer.compute`, without its general cases."""
    actual, expected = a[positions].astype(np.float64), e[positions].astype(np.float64)
    d = np.abs(actual - expected)
    eabs = np.abs(expected)
    eabs[eabs == 0] = EPS
    return d, d / eabs
