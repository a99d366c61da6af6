"""The float32 screen: narrow-float chunks (fp32, fp16, bf16, fp8) computed in float32.

A passing comparison of fp16/fp32 outputs is the common, large case; float32 halves its
memory traffic. The screen makes an approximate ErrorChunk (`exact` False) whose errors and
ratios are a few ulps from float64's, and hands back (None) what float32 cannot hold: Inf,
NaN other than pairs excused by `nan_equal` (made 0 against 0, as float64 makes them), and
errors beyond float32's range. Every statistic refines what float32 cannot decide
(`ErrorChunk.refine`), so verdicts, counts, maxima and the report's figures are float64's;
means and the cosine similarity of passing chunks are float32 values summed in float64
(display only: a `mean` check takes the float64 path).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .chunks import EPS, Arithmetic, ErrorChunk
from .tolerance import Tolerance
from .tuning import TUNING

_NARROW = {"float16", "float32", "bfloat16"}
_SAFE_TOLERANCE = (1e-30, 1e30)  # far from float32 subnormals and overflow


def applies(a_dtype: np.dtype, e_dtype: np.dtype, tol: Tolerance) -> bool:
    """Whether the float32 screen may compute this pair under this tolerance."""

    def narrow(dtype: np.dtype) -> bool:
        return dtype.name in _NARROW or dtype.name.startswith("float8")

    low, high = _SAFE_TOLERANCE
    return (
        TUNING.screen
        and narrow(a_dtype)
        and narrow(e_dtype)
        and tol.check != "mean"
        and low <= tol.atol <= high
        and (tol.rtol == 0 or low <= tol.rtol <= high)
    )


class Screen:
    """Makes float32 ErrorChunks; `chunk` returns None when float64 must compute it."""

    def __init__(self, tol: Tolerance, gather: Arithmetic, size: int) -> None:
        self.tol = tol
        self._buffers = np.empty((6, size), dtype=np.float32)
        self._inv_atol = np.float32(1.0 / tol.atol)
        self._inv_rtol = np.float32(1.0 / tol.rtol) if tol.rtol else None
        self._flags = np.empty(size, dtype=np.bool_)
        self._keep = np.empty(size, dtype=np.uint32)
        # float64 refinements: a few positions, gathered in `gather` (whose own chunks are
        # not in use while a float32 chunk is), or the whole chunk, in buffers of its own
        # (made on first use) that stay valid while positions are gathered
        self._gather = gather
        self._whole: Arithmetic | None = None

    @np.errstate(all="ignore")
    def chunk(self, a: np.ndarray, e: np.ndarray, start: int) -> ErrorChunk | None:
        n = a.shape[0]
        a32_buf, e32_buf, d, eabs, r, ratio = (buf[:n] for buf in self._buffers)
        a32, e32 = self._as_float32(a, a32_buf), self._as_float32(e, e32_buf)
        np.subtract(a32, e32, out=d)
        np.abs(d, out=d)
        counts: dict[str, Any] = {}
        positions = None
        if not np.isfinite(d[d.argmax()]):
            if np.isinf(d).any() or np.isinf(a32).any() or np.isinf(e32).any():
                return None  # Inf, or a difference beyond float32: float64 decides
            nan_a, nan_e = np.isnan(a32), np.isnan(e32)
            if self.tol.nan_equal and (pairs := nan_a & nan_e).any():
                # x & 0 zeroes a NaN pair, x & ~0 keeps the rest: no branch on a random mask
                keep = np.subtract(pairs, 1, dtype=np.uint32, out=self._keep[:n])
                for source, target in ((a32, a32_buf), (e32, e32_buf), (d, d)):
                    np.bitwise_and(source.view(np.uint32), keep, out=target.view(np.uint32))
                a32, e32 = a32_buf, e32_buf  # never the caller's arrays
            errors = np.isnan(d)
            counts = dict(
                nan_errors=int(np.count_nonzero(errors)),
                nan_actual=int(np.count_nonzero(nan_a)),
                nan_expected=int(np.count_nonzero(nan_e)),
                nan_positions_differ=not np.array_equal(nan_a, nan_e),
            )
            if counts["nan_errors"]:  # left out of the errors, as float64 leaves them
                counts["nan_error_positions"] = np.flatnonzero(errors) + start
                kept = np.flatnonzero(~errors)
                a32, e32, d = a32[kept], e32[kept], d[kept]
                eabs, r, ratio = eabs[: d.shape[0]], r[: d.shape[0]], ratio[: d.shape[0]]
                positions = kept + start
        np.abs(e32, out=eabs)
        np.divide(d, eabs, out=r)
        eps_used = False
        if r.shape[0] and not np.isfinite(r[r.argmax()]):
            eps_used = True  # expected == 0: Polygraphy's eps (exact in float32)
            np.copyto(eabs, np.float32(EPS), where=eabs == 0)
            np.divide(d, eabs, out=r)
            if not np.isfinite(r[r.argmax()]):
                return None
        self._ratio(d, e32, eabs, r, ratio, eps_used)
        gather, size = self._gather, self._buffers.shape[1]

        def exact_at(at: np.ndarray | None) -> ErrorChunk:
            if at is None:
                if self._whole is None:
                    self._whole = Arithmetic(gather.a_kind, gather.e_kind, self.tol, size)
                return self._whole.compute(a, e, start)
            return gather.compute(a[at], e[at], 0)

        return ErrorChunk(
            start,
            n,
            d,
            r,
            ratio,
            eabs[:0],
            (a32, e32, d),
            positions=positions,
            margin=float(ratio.max()) if ratio.shape[0] else 0.0,
            exact=False,
            narrow=True,
            values=a,
            exact_at=exact_at,
            **counts,
        )

    def _as_float32(self, values: np.ndarray, buffer: np.ndarray) -> np.ndarray:
        if values.dtype == np.float32:
            return values
        np.copyto(buffer, values, casting="unsafe")
        return buffer

    def _ratio(
        self,
        d: np.ndarray,
        e32: np.ndarray,
        eabs: np.ndarray,
        r: np.ndarray,
        ratio: np.ndarray,
        eps_used: bool,
    ) -> None:
        """d / allowed, in float32 (overwrites `eabs`, which is no longer needed)."""
        tol = self.tol
        if tol.rule == "allclose" and self._inv_rtol is not None:
            if eps_used:  # allclose's allowed error takes |e| as it is, 0 included
                np.abs(e32, out=eabs)
            np.multiply(eabs, np.float32(tol.rtol), out=ratio)
            np.add(ratio, np.float32(tol.atol), out=ratio)
            np.divide(d, ratio, out=ratio)
            return
        np.multiply(d, self._inv_atol, out=ratio)
        if self._inv_rtol is not None:  # polygraphy: min(d / atol, r / rtol) = d / max(...)
            np.minimum(ratio, np.multiply(r, self._inv_rtol, out=eabs), out=ratio)
