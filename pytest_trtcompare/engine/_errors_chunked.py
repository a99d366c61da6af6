"""Per-chunk error arithmetic: |actual - expected|, relative error and tolerance ratio in float64.

Everything here works on one chunk of the flattened outputs at a time, so a comparison of
any size needs only a few chunk-sized float64 buffers. Integers are differenced exactly (no
wrap-around: uint64 0 vs 1 is 1) before they become float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .arrays import Kind
from .tolerance import Tolerance

#: Polygraphy replaces expected == 0 by float64 eps in the relative error; so do we.
EPS = 2.220446049250313e-16
CHUNK_ELEMENTS = 1 << 17
#: OpenBLAS runs a dot product of more than 10,000 elements on all its threads; on a loaded
#: machine (xdist, other jobs) waking them made one float64 chunk's dot take milliseconds.
DOT_BLOCK = 8192
_UINT64_MAX = np.uint64(np.iinfo(np.uint64).max)


def pair_kind(actual: Kind, expected: Kind) -> str:
    """How a pair is differenced: 'bool' (xor), 'int' (exact) or 'float' (float64)."""
    if actual == expected == "bool":
        return "bool"
    if actual != "float" and expected != "float":
        return "int"
    return "float"


def dot(x: np.ndarray, y: np.ndarray) -> float:
    """x . y in blocks that OpenBLAS computes on the calling thread.

    One stacked product of (blocks, 1, DOT_BLOCK) by (blocks, DOT_BLOCK, 1) runs a BLAS dot
    per block with a single Python call (a loop of np.dot calls cost twice as much). The
    blocks' sums add in order, as `Float32Screen.float64_dots` adds them: the same bits.
    """
    n = x.shape[0]
    if n <= DOT_BLOCK:
        return float(np.dot(x, y))
    full = n - n % DOT_BLOCK
    rows, cols = x[:full].reshape(-1, 1, DOT_BLOCK), y[:full].reshape(-1, DOT_BLOCK, 1)
    total = 0.0
    for block in np.matmul(rows, cols).ravel().tolist():
        total += block
    return total + float(np.dot(x[full:], y[full:])) if full < n else total


def zero_unless(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Sets values[~keep] to +0.0 in place (a contiguous float array) and returns it.

    A bitwise and with 0 or all ones per element: no branch on the mask, where a masked
    copy (`np.copyto(where=)`) of a random mask ran 25 times slower.
    """
    bits = values.view(np.int64 if values.itemsize == 8 else np.int32)
    ones = keep.astype(bits.dtype)
    np.negative(ones, out=ones)  # 1 -> -1, all bits set
    np.bitwise_and(bits, ones, out=bits)
    return values


def _to_int64_or_uint64(values: np.ndarray, kind: Kind) -> np.ndarray:
    return np.asarray(values.astype(np.uint64 if kind == "uint" else np.int64))


def exact_int_absdiff(a: np.ndarray, e: np.ndarray, a_kind: Kind, e_kind: Kind) -> np.ndarray:
    """|a - e| of two integer arrays as float64, exact wherever the result is below 2**53."""
    if a.dtype.itemsize <= 4 and e.dtype.itemsize <= 4:
        return np.asarray(np.abs(a.astype(np.int64) - e.astype(np.int64)), dtype=np.float64)
    a64 = _to_int64_or_uint64(a, a_kind)
    e64 = _to_int64_or_uint64(e, e_kind)
    if a64.dtype == e64.dtype:
        hi = np.maximum(a64, e64).view(np.uint64)
        lo = np.minimum(a64, e64).view(np.uint64)
        return np.asarray(hi - lo, dtype=np.float64)  # modular uint64 difference: exact, hi >= lo
    unsigned, signed = (a64, e64) if a64.dtype == np.uint64 else (e64, a64)
    signed_bits = signed.view(np.uint64)
    negative = signed < 0
    magnitude = np.where(negative, np.uint64(0) - signed_bits, signed_bits)
    both_nonneg = np.where(unsigned >= magnitude, unsigned - magnitude, magnitude - unsigned)
    across_zero = unsigned + magnitude  # wraps when the true difference is >= 2**64
    result = np.where(negative, across_zero, both_nonneg).astype(np.float64)
    wrapped = negative & (unsigned > _UINT64_MAX - magnitude)
    if wrapped.any():  # differences of 2**64 and more: rare, so exact Python ints round them
        result[wrapped] = [
            float(int(u) + int(m))
            for u, m in zip(unsigned[wrapped].tolist(), magnitude[wrapped].tolist(), strict=True)
        ]
    return result


@dataclass
class Chunk:
    """Errors of one chunk, restricted to comparable elements (error not NaN).

    The arrays are views into the computer's buffers: valid until its next `compute` call.
    """

    abs_err: np.ndarray  # |a - e|, float64, no NaN
    rel_err: np.ndarray  # abs_err / |e| (e == 0 -> EPS); NaN (Inf/Inf) mapped to +Inf
    ratio: np.ndarray  # abs_err / allowed error: > 1 means out of tolerance; NaN = 0/0
    expected_abs: np.ndarray  # |e| as given (no epsilon)
    positions: np.ndarray | None  # flat indices of the kept elements; None = start + arange
    start: int
    dot_aa: float  # sums over pairs where both values are finite, for the cosine similarity
    dot_ee: float
    dot_dd: float
    nan_errors: int = 0
    nan_actual: int = 0
    nan_expected: int = 0
    inf_actual: int = 0
    inf_expected: int = 0
    nan_positions_differ: bool = False
    nan_error_positions: np.ndarray | None = None  # flat indices whose error is NaN
    #: index of the first largest abs_err / rel_err, once known (-1: not yet)
    abs_top: int = -1
    rel_top: int = -1

    def flat_index(self, i: int) -> int:
        return int(self.positions[i]) if self.positions is not None else self.start + i

    def abs_argmax(self) -> int:
        """Index of the first largest |a - e| (the chunk is not empty)."""
        if self.abs_top < 0:
            self.abs_top = int(self.abs_err.argmax())
        return self.abs_top

    def rel_argmax(self) -> int:
        """Index of the first largest relative error (the chunk is not empty)."""
        if self.rel_top < 0:
            self.rel_top = int(self.rel_err.argmax())
        return self.rel_top


class ChunkComputer:
    """Computes Chunk records for consecutive slices, reusing its float64 buffers."""

    def __init__(
        self, a_kind: Kind, e_kind: Kind, tolerance: Tolerance, capacity: int | None = None
    ) -> None:
        self.a_kind = a_kind
        self.e_kind = e_kind
        self.pair = pair_kind(a_kind, e_kind)
        self.tol = tolerance
        size = CHUNK_ELEMENTS if capacity is None else max(1, min(capacity, CHUNK_ELEMENTS))
        self._buffers = np.empty((6, size))
        self._atol: np.ndarray | None = None  # atol repeated, made on first use

    @np.errstate(all="ignore")
    def compute(
        self, a: np.ndarray, e: np.ndarray, start: int, dots: bool = True, ratio: bool = True
    ) -> Chunk:
        """The chunk's errors; without `dots` its cosine sums are 0, without `ratio` its
        ratios are left empty (the report's later passes need neither)."""
        n = a.shape[0]
        av, ev, d, eabs, r, ratios = (buf[:n] for buf in self._buffers)
        np.copyto(av, a, casting="unsafe")
        np.copyto(ev, e, casting="unsafe")
        if self.pair == "float":
            np.subtract(av, ev, out=d)
            np.abs(d, out=d)
        elif self.pair == "bool":
            np.not_equal(av, ev, out=d)
        else:
            d[:] = exact_int_absdiff(a, e, self.a_kind, self.e_kind)

        counts: dict[str, Any] = {}
        positions = None
        cos_a, cos_e, cos_d = av, ev, d
        abs_top = rel_top = -1
        if self.pair == "float" and n:
            abs_top = int(d.argmax())
            if not np.isfinite(d[abs_top]):
                av, ev, d, positions, cos_a, cos_e = self._special_values(
                    av, ev, d, start, counts, dots
                )
                cos_d = cos_a - cos_e
                eabs, r, ratios = eabs[: d.shape[0]], r[: d.shape[0]], ratios[: d.shape[0]]
                abs_top = -1

        np.abs(ev, out=eabs)
        np.divide(d, eabs, out=r)
        eabs_eps = eabs
        if r.shape[0]:
            rel_top = int(r.argmax())
        if r.shape[0] and not np.isfinite(r[rel_top]):
            rel_top = -1
            # expected == 0 (or Inf, NaN) somewhere: Polygraphy's epsilon; Inf/Inf is Inf and
            # 0/NaN (NaN pairs excused by nan_equal) is 0.
            eabs_eps = np.where(eabs == 0, EPS, eabs)
            np.divide(d, eabs_eps, out=r)
            undefined = np.isnan(r)
            r[undefined] = np.where(d[undefined] == 0, 0.0, np.inf)
        if ratio:
            special = positions is not None or bool(counts)
            self._fill_ratio(d, eabs, eabs_eps, ratios, special=special)
        return Chunk(
            abs_err=d,
            rel_err=r,
            ratio=ratios if ratio else ratios[:0],
            expected_abs=eabs,
            positions=positions,
            start=start,
            dot_aa=dot(cos_a, cos_a) if dots else 0.0,
            dot_ee=dot(cos_e, cos_e) if dots else 0.0,
            dot_dd=dot(cos_d, cos_d) if dots else 0.0,
            abs_top=abs_top,
            rel_top=rel_top,
            **counts,
        )

    def float64_dots(self, a: np.ndarray, e: np.ndarray) -> tuple[float, float, float]:
        """The float64 sums of a^2, e^2 and (a - e)^2 of finite values, what `compute`
        gives as a chunk's cosine sums (overwrites the buffers of the last chunk)."""
        n = a.shape[0]
        av, ev, d = self._buffers[0, :n], self._buffers[1, :n], self._buffers[2, :n]
        np.copyto(av, a, casting="unsafe")
        np.copyto(ev, e, casting="unsafe")
        np.subtract(av, ev, out=d)
        return dot(av, av), dot(ev, ev), dot(d, d)

    def _special_values(
        self,
        av: np.ndarray,
        ev: np.ndarray,
        d: np.ndarray,
        start: int,
        counts: dict[str, Any],
        dots: bool,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
        """Slow path for a chunk holding NaN or Inf: counts them and applies the options."""
        nan_a, nan_e = np.isnan(av), np.isnan(ev)
        inf_a, inf_e = np.isinf(av), np.isinf(ev)
        any_inf = bool(inf_a.any() or inf_e.any())
        if self.tol.inf_equal and any_inf:
            zero_unless(d, ~(inf_a & (av == ev)))
        nan_pairs = self.tol.nan_equal and bool((nan_a & nan_e).any())
        if nan_pairs:
            zero_unless(d, ~(nan_a & nan_e))
        nan_err = np.isnan(d)
        counts.update(
            nan_errors=int(np.count_nonzero(nan_err)),
            nan_actual=int(np.count_nonzero(nan_a)),
            nan_expected=int(np.count_nonzero(nan_e)),
            inf_actual=int(np.count_nonzero(inf_a)),
            inf_expected=int(np.count_nonzero(inf_e)),
            nan_positions_differ=not np.array_equal(nan_a, nan_e),
            nan_error_positions=np.flatnonzero(nan_err) + start,
        )
        keep = np.flatnonzero(~nan_err) if counts["nan_errors"] else None
        kept = (av, ev, d) if keep is None else (av[keep], ev[keep], d[keep])
        if not dots:
            cos_a = cos_e = av[:0]
        elif keep is not None and not (any_inf or nan_pairs):  # kept pairs are the finite
            cos_a, cos_e = kept[0], kept[1]
        else:  # the cosine similarity sums pairs where both values are finite
            finite = ~(nan_a | nan_e | inf_a | inf_e)  # the others zeroed: no compressing
            cos_a, cos_e = zero_unless(av.copy(), finite), zero_unless(ev.copy(), finite)
        return *kept, None if keep is None else keep + start, cos_a, cos_e

    def _fill_ratio(
        self,
        d: np.ndarray,
        eabs: np.ndarray,
        eabs_eps: np.ndarray,
        ratio: np.ndarray,
        special: bool,
    ) -> None:
        tol = self.tol
        if tol.rule == "polygraphy":
            if self._atol is None:  # np.maximum runs 2.5x faster against an array
                self._atol = np.full(self._buffers.shape[1], tol.atol)
            np.multiply(eabs_eps, tol.rtol, out=ratio)
            np.maximum(ratio, self._atol[: ratio.shape[0]], out=ratio)
        else:
            np.multiply(eabs, tol.rtol, out=ratio)
            np.add(ratio, tol.atol, out=ratio)
        np.divide(d, ratio, out=ratio)  # 0/0 -> NaN (within tolerance), x/0 -> Inf
        if special:
            ratio[np.isinf(d)] = np.inf  # Inf against a finite value always fails

    def mismatch_mask(self, chunk: Chunk) -> np.ndarray:
        """Exact per-element verdict (the ratio only lets callers skip this when far below 1)."""
        tol = self.tol
        if tol.rule == "polygraphy":
            return np.asarray((chunk.abs_err > tol.atol) & (chunk.rel_err > tol.rtol))
        with np.errstate(invalid="ignore"):  # 0 * Inf: allowed is NaN only for equal pairs
            allowed = tol.atol + tol.rtol * chunk.expected_abs
            return np.asarray((chunk.abs_err > allowed) | np.isinf(chunk.abs_err))
