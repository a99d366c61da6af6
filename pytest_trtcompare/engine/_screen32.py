"""A float32 pass for narrow-float pairs (fp32, fp16, bf16, fp8) that stays exact where it counts.

A passing comparison of fp16/fp32 outputs is the common, large case; doing it in float32
halves memory traffic. Exactness is kept by construction:
- a chunk that holds NaN/Inf or overflows is handed back to the exact float64 path (`None`);
- an element whose float32 ratio (error / allowed error) is within 1e-5 of 1 is decided
  again in float64; beyond that band the float32 ratio cannot be on the other side of 1
  (it is a few ulps from exact), so mismatch counts and verdicts are float64's;
- |a - e| rounded to float32 is monotone in the exact difference, so the exact maximum is
  among the float32 maxima. `resolve_maxima` re-evaluates those few candidates in float64
  once, after the pass, in the chunks whose float32 maximum ties the overall one (the same
  for the relative error, with a small slack for its second rounding).
Means and the cosine similarity come from float32 chunks accumulated in float64: means
within ~1e-6 relative, 1 - cosine within ~1e-9 absolute. Display only: a `mean` check
takes the exact path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._errors_chunked import EPS, ChunkComputer, dot
from .tolerance import Tolerance

_NARROW = {"float16", "float32", "bfloat16"}
_SCREEN_LIMIT = 1.0 - 1e-5  # float32 ratios are within ~1e-7 of exact; keep a wide berth
_SURE_FAIL = 1.0 + 1e-5
_REL_SLACK = np.float32(1 - 1e-6)  # float32 rel error: two roundings, ~1.2e-7 from exact
_SAFE_TOLERANCE = (1e-30, 1e30)  # far from float32 subnormals and overflow


def applies(a_dtype: np.dtype, e_dtype: np.dtype, tol: Tolerance) -> bool:
    """Whether the float32 pass may screen this pair under this tolerance."""

    def narrow(dtype: np.dtype) -> bool:
        return dtype.name in _NARROW or dtype.name.startswith("float8")

    low, high = _SAFE_TOLERANCE
    return (
        narrow(a_dtype)
        and narrow(e_dtype)
        and tol.check != "mean"
        and low <= tol.atol <= high
        and (tol.rtol == 0 or low <= tol.rtol <= high)
    )


@dataclass
class ChunkSummary:
    """What the scan accumulates from one chunk, whichever path computed it.

    From the float32 pass, max_abs / max_rel are float32 values and their positions are -1
    until `Float32Screen.resolve_maxima` replaces them with exact ones.
    """

    compared: int
    max_abs: float
    max_abs_at: int
    max_rel: float
    max_rel_at: int
    sum_abs: float
    sum_rel: float
    margin: float
    dot_aa: float
    dot_ee: float
    dot_dd: float
    mismatches: int = 0
    nan_errors: int = 0
    nan_actual: int = 0
    nan_expected: int = 0
    inf_actual: int = 0
    inf_expected: int = 0
    nan_positions_differ: bool = False


class Float32Screen:
    """Screens chunks in float32; `summarize` returns None when the exact path must decide."""

    def __init__(self, tol: Tolerance, exact: ChunkComputer, chunk_elements: int) -> None:
        self.tol = tol
        self.eps_used = False  # whether the last `_errors` put eps for |e| == 0
        self.exact = exact
        self._buffers = np.empty((6, chunk_elements), dtype=np.float32)
        self._inv_atol = np.float32(1.0 / tol.atol)
        self._inv_rtol = np.float32(1.0 / tol.rtol) if tol.rtol else None
        self._ones = np.ones(chunk_elements, dtype=np.float32)
        self._flags = np.empty(chunk_elements, dtype=np.bool_)
        self._keep = np.empty(chunk_elements, dtype=np.uint32)
        self.dots_pending = False
        self._pair: tuple[np.ndarray, np.ndarray] = (self._ones[:0], self._ones[:0])
        #: After a successful `summarize`: that chunk's float32 (e, |a - e|, relative
        #: error, error ratio), what `ratios` gives, valid until the next call.
        self.last: tuple[np.ndarray, ...] = ()

    def _as_float32(self, values: np.ndarray, buffer: np.ndarray) -> np.ndarray:
        if values.dtype == np.float32:
            return values
        np.copyto(buffer, values, casting="unsafe")
        return buffer

    @np.errstate(all="ignore")
    def summarize(
        self, a: np.ndarray, e: np.ndarray, defer_dots: bool = False
    ) -> ChunkSummary | None:
        """The chunk's summary, or None when the exact float64 path must decide it.

        `defer_dots`: a failing chunk's float64 cosine sums are left to the caller, who may
        have them from a float64 pass of its own, or calls `float64_dots` (`dots_pending`).
        """
        errors = self._errors(a, e)
        if errors is None:
            return None
        a32, e32, d, eabs, r, scratch, nan_pairs = errors
        ones = self._ones[: d.shape[0]]
        margin = self._margin(d, e32, eabs, r, scratch)
        failing = margin > _SCREEN_LIMIT
        # Errors past the tolerance make 1 - cosine hang on |a| - |e|, which float32 sums
        # of squares lose (1e-7 of |a|^2 shows at 1e-8): float64 sums there, as exact chunks.
        self.dots_pending = failing and defer_dots
        self._pair = (a32, e32)
        if self.dots_pending:
            dots = (0.0, 0.0, 0.0)
        elif failing:
            dots = self.float64_dots()
        else:
            dots = (dot(a32, a32), dot(e32, e32), dot(d, d))
        summary = ChunkSummary(
            compared=d.shape[0],
            max_abs=float(d.max()),
            max_abs_at=-1,
            max_rel=float(r.max()),
            max_rel_at=-1,
            sum_abs=dot(d, ones),
            sum_rel=dot(r, ones),
            margin=margin,
            dot_aa=dots[0],
            dot_ee=dots[1],
            dot_dd=dots[2],
            nan_actual=nan_pairs,
            nan_expected=nan_pairs,
        )
        sums = (summary.sum_abs, summary.sum_rel, *dots)
        if not all(math.isfinite(x) for x in sums):  # float32 overflow (values near 1e38)
            return None
        if failing:
            summary.mismatches = self._mismatches(a, e, scratch)
        self.last = (e32, d, r, scratch)
        return summary

    def float64_dots(self) -> tuple[float, float, float]:
        """The float64 sums of a^2, e^2 and (a - e)^2 of the last summarized chunk (NaN
        pairs left out), in the exact computer's buffers (its chunks are stale after)."""
        return self.exact.float64_dots(*self._pair)

    @np.errstate(all="ignore")
    def ratios(self, a: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, ...] | None:
        """float32 (e, |a - e|, relative error, error / allowed error) of a chunk, or None
        where it needs float64 (the arrays live in the screen's buffers, or are `e`)."""
        errors = self._errors(a, e)
        if errors is None:
            return None
        _, e32, d, eabs, r, scratch, _ = errors
        self._margin(d, e32, eabs, r, scratch)
        return e32, d, r, scratch

    def _mismatches(self, a: np.ndarray, e: np.ndarray, ratio: np.ndarray) -> int:
        """Exact mismatch count from float32 ratios: the band around 1 is decided in float64."""
        flags = self._flags[: ratio.shape[0]]
        sure = int(np.count_nonzero(np.greater(ratio, np.float32(_SURE_FAIL), out=flags)))
        np.greater_equal(ratio, np.float32(_SCREEN_LIMIT), out=flags)
        flags &= ratio <= np.float32(_SURE_FAIL)
        band = np.flatnonzero(flags)
        if not band.shape[0]:
            return sure
        chunk = self.exact.compute(a[band], e[band], 0, dots=False)
        return sure + int(np.count_nonzero(self.exact.mismatch_mask(chunk)))

    def _errors(self, a: np.ndarray, e: np.ndarray) -> tuple[Any, ...] | None:
        """float32 (a, e, |a-e|, |e| with eps, rel error, scratch, NaN pairs), or None.

        None on Inf, or on NaN other than pairs at the same positions excused by nan_equal;
        such pairs become 0 against 0 here (error 0, relative error 0, out of the dots),
        exactly what the float64 path makes of them.
        """
        n = a.shape[0]
        a32_buf, e32_buf, d, eabs, r, scratch = (buf[:n] for buf in self._buffers)
        a32, e32 = self._as_float32(a, a32_buf), self._as_float32(e, e32_buf)
        np.subtract(a32, e32, out=d)
        np.abs(d, out=d)
        nan_pairs = 0
        if not np.isfinite(d[d.argmax()]):
            if not self.tol.nan_equal or np.isinf(d).any():
                return None
            nan_a = np.isnan(a32, out=self._flags[:n])
            if np.isinf(a32).any() or not np.array_equal(nan_a, np.isnan(e32)):
                return None
            nan_pairs = int(np.count_nonzero(nan_a))
            # x & 0 zeroes a NaN pair, x & ~0 keeps the rest: no branch on a random mask
            keep = np.subtract(nan_a, 1, dtype=np.uint32, out=self._keep[:n])
            for source, target in ((a32, a32_buf), (e32, e32_buf), (d, d)):
                np.bitwise_and(source.view(np.uint32), keep, out=target.view(np.uint32))
            a32, e32 = a32_buf, e32_buf  # never the caller's arrays
        np.abs(e32, out=eabs)
        np.divide(d, eabs, out=r)
        self.eps_used = False
        if not np.isfinite(r[r.argmax()]):  # expected == 0: Polygraphy's eps (exact in float32)
            self.eps_used = True
            np.copyto(eabs, np.float32(EPS), where=eabs == 0)
            np.divide(d, eabs, out=r)
            if not np.isfinite(r[r.argmax()]):
                return None
        return a32, e32, d, eabs, r, scratch, nan_pairs

    @np.errstate(all="ignore")
    def resolve_maxima(
        self,
        a: np.ndarray,
        e: np.ndarray,
        screened: list[tuple[int, int, float, float]],
        known: dict[int, tuple[float, int, float, int]] | None = None,
    ) -> tuple[float, int, float, int]:
        """Exact (max abs, its index, max rel, its index) over the screened chunks.

        `screened` holds (start, stop, float32 max abs, float32 max rel) per chunk; `known`
        the exact maxima of some chunks by their start (computed whole for the report).
        """
        known = known or {}
        best_abs = max(item[2] for item in screened)
        best_rel = max(item[3] for item in screened)
        if best_abs == 0:  # float32 |a - e| is 0 only for a == e: every error is exactly 0
            return 0.0, screened[0][0], 0.0, screened[0][0]
        rel_floor = float(np.float32(best_rel) * _REL_SLACK)
        found_abs: tuple[float, int] = (-1.0, -1)
        found_rel: tuple[float, int] = (-1.0, -1)
        for start, stop, top_abs, top_rel in screened:
            if top_abs < best_abs and top_rel < rel_floor:
                continue
            if start in known:  # the chunk's exact maxima, with the lowest index on ties
                exact = known[start]
                if top_abs == best_abs:
                    found_abs = max(found_abs, exact[:2], key=lambda item: (item[0], -item[1]))
                if top_rel >= rel_floor:
                    found_rel = max(found_rel, exact[2:], key=lambda item: (item[0], -item[1]))
                continue
            errors = self._errors(a[start:stop], e[start:stop])
            assert errors is not None  # the same chunk passed the screen before
            _, _, d, _, r, _, _ = errors
            if top_abs == best_abs:
                found_abs = max(
                    found_abs,
                    self._exact_max(a, e, start, np.flatnonzero(d == np.float32(best_abs)), "abs"),
                    key=lambda item: (item[0], -item[1]),
                )
            if top_rel >= rel_floor:
                found_rel = max(
                    found_rel,
                    self._exact_max(a, e, start, np.flatnonzero(r >= np.float32(rel_floor)), "rel"),
                    key=lambda item: (item[0], -item[1]),
                )
        return found_abs[0], found_abs[1], found_rel[0], found_rel[1]

    def _margin(
        self, d: np.ndarray, e32: np.ndarray, eabs: np.ndarray, r: np.ndarray, ratio: np.ndarray
    ) -> float:
        """Largest d / allowed, in float32 (overwrites `eabs`, which is no longer needed)."""
        tol = self.tol
        if tol.rule == "allclose" and self._inv_rtol is not None:
            if self.eps_used:  # allclose's allowed error takes |e| as it is, 0 included
                np.abs(e32, out=eabs)
            np.multiply(eabs, np.float32(tol.rtol), out=ratio)
            np.add(ratio, np.float32(tol.atol), out=ratio)
            np.divide(d, ratio, out=ratio)
            return float(ratio.max())
        np.multiply(d, self._inv_atol, out=ratio)
        if self._inv_rtol is not None:  # polygraphy: min(d / atol, r / rtol) = d / max(...)
            np.minimum(ratio, np.multiply(r, self._inv_rtol, out=eabs), out=ratio)
        return float(ratio.max())

    def _exact_max(
        self, a: np.ndarray, e: np.ndarray, start: int, candidates: np.ndarray, which: str
    ) -> tuple[float, int]:
        """Exact maximum among candidate positions (relative to `start`) and its flat index."""
        candidates = candidates[: self._buffers.shape[1]] + start
        chunk = self.exact.compute(a[candidates], e[candidates], 0)
        values = chunk.abs_err if which == "abs" else chunk.rel_err
        best = int(values.argmax())
        return float(values[best]), int(candidates[best])
