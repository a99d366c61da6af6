"""One chunk of an output pair as every statistic sees it: its errors, exact or screened.

A comparison reads the flattened pair in chunks (`TUNING.chunk_elements`). Each chunk becomes an
`ErrorChunk` in one of three ways, and every statistic (`statistic.Statistic`) takes all three:
- bit-for-bit equal sides (`equal`): every error is 0 and nothing is computed;
- float64 (`Arithmetic.compute`): |a - e|, relative error and error / allowed error, the
  one arithmetic definition of every figure; integers are differenced exactly;
- float32, for narrow floats (`screen.Screen`): the same arithmetic a few ulps from float64
  (`exact` False). A statistic decides what float32 cannot by `refine`, which gives float64
  errors at the positions it names (the whole chunk once many are named, kept for the
  others), so every figure is float64's; `band` gives the float32 threshold below which no
  exact value can reach a given one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .arrays import Kind
from .tolerance import Tolerance
from .tuning import TUNING

#: Polygraphy replaces expected == 0 by float64 eps in the relative error; so do we.
EPS = 2.220446049250313e-16
#: OpenBLAS runs a dot product of more than 10,000 elements on all its threads; on a loaded
#: machine (xdist, other jobs) waking them made one float64 chunk's dot take milliseconds.
DOT_BLOCK = 8192
#: float32 errors and ratios are within ~2.4e-7 (relative) of float64's; TINY where they are
#: subnormal. `band` keeps three times that berth.
SLACK = 1e-6
TINY = 2.0**-140
#: Candidates in more than 1/DENSE of a chunk: its float64 errors computed whole, contiguous.
DENSE = 8
_UINT64_MAX = np.uint64(np.iinfo(np.uint64).max)
_NONE = np.zeros(0, dtype=np.int64)
#: Chunks this long take atol as an array in np.maximum; shorter ones as the scalar, where
#: making the array costs more than it saves.
_ATOL_ARRAY_MIN = 1 << 10
_EMPTY = np.zeros(0)


def _numpy_namespace() -> Any:
    """numpy's array namespace: numpy itself from 2.1 on, whose main namespace is the array
    API's (concat, astype, unique_counts ...); array-api-compat's wrapper before. Importing
    the wrapper costs about 0.3 s (it touches numpy.testing and numpy.f2py): every pytest
    process with the plugin would pay it."""
    if np.lib.NumpyVersion(np.__version__) >= "2.1.0":
        return np
    import array_api_compat

    return array_api_compat.array_namespace(_NONE)


def namespace_of(array: Any) -> Any:
    """The array namespace of any array (a torch tensor's through array-api-compat)."""
    if isinstance(array, np.ndarray):
        return NUMPY
    import array_api_compat

    return array_api_compat.array_namespace(array)


#: The array namespace of numpy arrays: the statistics are written against a chunk's `xp`
#: (numpy's, or another library's), with numpy fast paths where it pays.
NUMPY: Any = _numpy_namespace()


def pair_kind(actual: Kind, expected: Kind) -> str:
    """How a pair is differenced: 'bool' (xor), 'int' (exact) or 'float' (float64)."""
    if actual == expected == "bool":
        return "bool"
    if actual != "float" and expected != "float":
        return "int"
    return "float"


def dot(x: Any, y: Any) -> float:
    """x . y as a float; numpy's in blocks that OpenBLAS computes on the calling thread.

    One stacked product of (blocks, 1, DOT_BLOCK) by (blocks, DOT_BLOCK, 1) runs a BLAS dot
    per block with a single Python call; the blocks' sums add in order.
    """
    if not isinstance(x, np.ndarray):
        return float(namespace_of(x).vecdot(x, y))
    n = x.shape[0]
    if n <= DOT_BLOCK:
        return float(np.dot(x, y))
    full = n - n % DOT_BLOCK
    rows, cols = x[:full].reshape(-1, 1, DOT_BLOCK), y[:full].reshape(-1, DOT_BLOCK, 1)
    total = 0.0
    for block in np.matmul(rows, cols).ravel().tolist():
        total += block
    return total + float(np.dot(x[full:], y[full:])) if full < n else total


_ONES = np.ones(0, dtype=np.float32)


def total(values: Any) -> float:
    """The sum of a chunk's values as a float (numpy float32: a BLAS dot with ones)."""
    global _ONES
    if not isinstance(values, np.ndarray):
        return float(namespace_of(values).sum(values))
    if values.dtype != np.float32:
        return float(values.sum())  # np.sum's reduction, without its dispatch
    if _ONES.shape[0] < values.shape[0]:
        _ONES = np.ones(values.shape[0], dtype=np.float32)
    return dot(values, _ONES[: values.shape[0]])


@np.errstate(over="ignore")  # beyond float32's range: -inf / inf, bounds that still hold
def float32_down(value: float) -> np.float32:
    """The largest float32 at most `value`."""
    low = np.float32(value)
    down: np.float32 = np.nextafter(low, np.float32(-np.inf)) if float(low) > value else low
    return down


@np.errstate(over="ignore")
def float32_up(value: float) -> np.float32:
    """The smallest float32 at least `value`."""
    high = np.float32(value)
    up: np.float32 = np.nextafter(high, np.float32(np.inf)) if float(high) < value else high
    return up


def max_ignoring_nan(values: Any) -> float:
    """The largest value of a non-empty array (numpy's or a tensor), NaN left out."""
    top = float(values.max())
    if math.isnan(top):  # 0/0 ratios (zero allowed error, zero error) count as 0
        finite = values[values == values]  # (NaN is not equal to itself)
        top = float(finite.max()) if finite.shape[0] else 0.0
    return top


def mismatch_mask(chunk: ErrorChunk, tol: Tolerance) -> Any:
    """The exact per-element verdict of a float64 chunk: out of tolerance."""
    if tol.rule == "polygraphy":
        return (chunk.abs_err > tol.atol) & (chunk.rel_err > tol.rtol)
    with np.errstate(invalid="ignore"):  # 0 * Inf: allowed is NaN only for equal pairs
        allowed = tol.atol + tol.rtol * chunk.expected_abs
        return (chunk.abs_err > allowed) | chunk.xp.isinf(chunk.abs_err)


def zero_unless(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Sets values[~keep] to +0.0 in place (a contiguous float array) and returns it: a
    bitwise and with 0 or all ones, where a masked copy of a random mask ran 25x slower."""
    bits = values.view(np.int64 if values.itemsize == 8 else np.int32)
    ones = keep.astype(bits.dtype)
    np.negative(ones, out=ones)  # 1 -> -1, all bits set
    np.bitwise_and(bits, ones, out=bits)
    return values


def exact_int_absdiff(a: np.ndarray, e: np.ndarray, a_kind: Kind, e_kind: Kind) -> np.ndarray:
    """|a - e| of two integer arrays as float64, exact wherever the result is below 2**53."""
    if a.dtype.itemsize <= 4 and e.dtype.itemsize <= 4:
        return np.asarray(np.abs(a.astype(np.int64) - e.astype(np.int64)), dtype=np.float64)
    a64 = np.asarray(a.astype(np.uint64 if a_kind == "uint" else np.int64))
    e64 = np.asarray(e.astype(np.uint64 if e_kind == "uint" else np.int64))
    if a64.dtype == e64.dtype:
        hi = np.maximum(a64, e64).view(np.uint64)
        lo = np.minimum(a64, e64).view(np.uint64)
        return np.asarray(hi - lo, dtype=np.float64)  # modular uint64 difference: exact
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
class ErrorChunk:
    """The errors of one chunk, restricted to comparable elements (error not NaN).

    The arrays are views into their producer's buffers, valid until it makes the next
    chunk. `exact` False: float32 values (`screen`), refined through `refine`.
    """

    start: int
    size: int  # elements of the chunk, NaN errors included
    abs_err: np.ndarray  # |a - e|, no NaN
    rel_err: np.ndarray  # abs_err / |e| (e == 0 -> EPS); NaN (Inf/Inf) mapped to +Inf
    ratio: np.ndarray  # abs_err / allowed error: > 1 is out of tolerance; NaN = 0/0
    expected_abs: np.ndarray  # |e| (float64 chunks: as given; float32 ones: eps for 0)
    cosine: tuple[np.ndarray, np.ndarray, np.ndarray]  # a, e, a - e over finite pairs
    positions: np.ndarray | None = None  # flat indices of the kept elements; None: in order
    margin: float = 0.0  # the largest ratio (NaN ratios, 0/0, count as 0)
    exact: bool = True
    equal: bool = False  # bit-for-bit equal sides: errors all 0, no arrays
    narrow: bool = False  # of a pair the screen takes: float32 holds its errors
    nan_errors: int = 0
    nan_actual: int = 0
    nan_expected: int = 0
    inf_actual: int = 0
    inf_expected: int = 0
    nan_positions_differ: bool = False
    nan_error_positions: np.ndarray | None = None  # flat indices whose error is NaN
    values: np.ndarray | None = None  # equal and float32 chunks: the actual side as given
    #: float32 chunks: float64 errors at local positions (`refine` uses it)
    exact_at: Callable[[np.ndarray | None], ErrorChunk] | None = None
    whole: ErrorChunk | None = field(default=None, repr=False)  # float64, once computed
    xp: Any = field(default=NUMPY, repr=False)  # the arrays' namespace
    #: index of the first largest abs_err and rel_err, once known (-1: not yet)
    tops: list[int] | None = field(default=None, repr=False)

    def argmax(self, which: int) -> int:
        """Index of the first largest abs_err (0) or rel_err (1); the chunk is not empty."""
        if self.tops is None:
            self.tops = [-1, -1]
        if self.tops[which] < 0:
            self.tops[which] = int(self.xp.argmax(self.rel_err if which else self.abs_err))
        return self.tops[which]

    @property
    def compared(self) -> int:
        return self.size - self.nan_errors

    def side(self) -> np.ndarray:
        """The actual side's values, as given (equal and float32 chunks)."""
        assert self.values is not None
        return self.values

    def nan_positions(self) -> np.ndarray:
        """Flat indices of the NaN errors (of an equal chunk: found on demand)."""
        if self.nan_error_positions is None and self.nan_errors and self.values is not None:
            xp = self.xp
            self.nan_error_positions = xp.nonzero(xp.isnan(self.values))[0] + self.start
        return self.nan_error_positions if self.nan_error_positions is not None else _NONE

    def flat_index(self, i: int) -> int:
        return int(self.positions[i]) if self.positions is not None else self.start + i

    def refine(self, at: np.ndarray, dense: bool = True) -> ErrorChunk:
        """float64 errors of the elements at positions `at` of the arrays (their flat
        `positions` set): the whole chunk when they are many (and `dense`) or it was
        computed whole already."""
        if self.exact:
            return self.take(at)
        if dense and self.whole is None and at.shape[0] * DENSE >= self.abs_err.shape[0]:
            self.whole_chunk()
        if self.whole is not None:
            return self.whole.take(at)
        assert self.exact_at is not None
        local = self.local(at)
        chunk = self.exact_at(local)
        chunk.positions = local + self.start
        return chunk

    def local(self, at: np.ndarray) -> np.ndarray:
        """Positions in the arrays -> positions in the chunk (NaN errors are left out)."""
        return at if self.positions is None else self.positions[at] - self.start

    def whole_chunk(self) -> ErrorChunk:
        """The chunk in float64 (itself when exact), computed once."""
        if self.exact:
            return self
        if self.whole is None:
            assert self.exact_at is not None
            self.whole = self.exact_at(None)
        return self.whole

    def take(self, at: np.ndarray) -> ErrorChunk:
        """The elements at positions `at` of an exact chunk's arrays (its cosine sums are
        the whole chunk's business: none)."""
        flat = at + self.start if self.positions is None else self.positions[at]
        none = self.abs_err[:0]
        return ErrorChunk(
            self.start,
            at.shape[0],
            self.abs_err[at],
            self.rel_err[at],
            self.ratio[at] if self.ratio.shape[0] else self.ratio,
            self.expected_abs[at],
            (none, none, none),
            positions=flat,
            xp=self.xp,
        )

    def band(self, value: float) -> Any:
        """The threshold t such that every element whose exact value may be >= `value` has
        its (float32) value >= t: `value` itself for float64 chunks."""
        return value if self.exact else float32_down(value * (1 - 3 * SLACK) - TINY)


class Arithmetic:
    """Makes float64 ErrorChunks of consecutive slices, reusing its buffers."""

    def __init__(self, a_kind: Kind, e_kind: Kind, tolerance: Tolerance, capacity: int) -> None:
        self.a_kind, self.e_kind = a_kind, e_kind
        self.pair = pair_kind(a_kind, e_kind)
        self.tol = tolerance
        self._buffers = np.empty((6, max(1, capacity)))
        self._atol: np.ndarray | None = None  # atol repeated, made on first use

    @np.errstate(all="ignore")
    def compute(self, a: np.ndarray, e: np.ndarray, start: int, ratio: bool = True) -> ErrorChunk:
        """The chunk's errors; without `ratio` its ratios are left empty (order statistics
        need none)."""
        n = a.shape[0]
        av, ev, d, eabs, r, ratios = self._buffers[:, :n]  # rows: contiguous views
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
        tops = [-1, -1]  # the first largest abs and rel error, once known
        if self.pair == "float" and n:
            tops[0] = int(d.argmax())
            if not math.isfinite(d[tops[0]]):
                av, ev, d, positions, cos_a, cos_e = self._special_values(av, ev, d, start, counts)
                cos_d = cos_a - cos_e
                eabs, r, ratios = eabs[: d.shape[0]], r[: d.shape[0]], ratios[: d.shape[0]]
                tops[0] = -1
        np.abs(ev, out=eabs)
        np.divide(d, eabs, out=r)
        eabs_eps = eabs
        if r.shape[0]:
            tops[1] = int(r.argmax())
        if r.shape[0] and not math.isfinite(r[tops[1]]):
            tops[1] = -1
            # expected == 0 (or Inf, NaN) somewhere: Polygraphy's epsilon; Inf/Inf is Inf and
            # 0/NaN (NaN pairs excused by nan_equal) is 0.
            eabs_eps = np.where(eabs == 0, EPS, eabs)
            np.divide(d, eabs_eps, out=r)
            undefined = np.isnan(r)
            r[undefined] = np.where(d[undefined] == 0, 0.0, np.inf)
        margin = 0.0
        if ratio:
            special = positions is not None or bool(counts)
            self._fill_ratio(d, eabs, eabs_eps, ratios, special)
            margin = max_ignoring_nan(ratios) if ratios.shape[0] else 0.0
        else:
            ratios = ratios[:0]
        cosine = (cos_a, cos_e, cos_d)
        return ErrorChunk(
            start,
            n,
            d,
            r,
            ratios,
            eabs,
            cosine,
            positions=positions,
            margin=margin,
            tops=tops,
            **counts,
        )

    def _special_values(
        self, av: np.ndarray, ev: np.ndarray, d: np.ndarray, start: int, counts: dict[str, Any]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, np.ndarray]:
        """A chunk holding NaN or Inf: counts them and applies the options."""
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
        if keep is not None and not (any_inf or nan_pairs):  # kept pairs are the finite
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
            np.multiply(eabs_eps, tol.rtol, out=ratio)
            if ratio.shape[0] < _ATOL_ARRAY_MIN:
                np.maximum(ratio, tol.atol, out=ratio)
            else:  # np.maximum runs 2.5x faster against an array (the same values)
                if self._atol is None:
                    self._atol = np.full(self._buffers.shape[1], tol.atol)
                np.maximum(ratio, self._atol[: ratio.shape[0]], out=ratio)
        else:
            np.multiply(eabs, tol.rtol, out=ratio)
            np.add(ratio, tol.atol, out=ratio)
        np.divide(d, ratio, out=ratio)  # 0/0 -> NaN (within tolerance), x/0 -> Inf
        if special:
            ratio[np.isinf(d)] = np.inf  # Inf against a finite value always fails


#: (unsigned view, exponent bits): all exponent bits set means NaN or Inf.
_FLOAT_BITS: dict[str, tuple[type[np.unsignedinteger[Any]], int]] = {
    "float16": (np.uint16, 0x7C00),
    "bfloat16": (np.uint16, 0x7F80),
    "float32": (np.uint32, 0x7F800000),
    "float64": (np.uint64, 0x7FF0000000000000),
}
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_PREFIX = 16  # a differing chunk usually differs at once: look there first


_BITS_OF: dict[np.dtype, tuple[type[np.unsignedinteger[Any]], int] | None] = {}


def _float_bits(dtype: np.dtype) -> tuple[type[np.unsignedinteger[Any]], int] | None:
    """`_FLOAT_BITS` of a dtype, by its name (numpy builds `dtype.name` anew each time: kept
    per dtype)."""
    if dtype not in _BITS_OF:
        _BITS_OF[dtype] = _FLOAT_BITS.get(dtype.name)
    return _BITS_OF[dtype]


class Equality:
    """`equal(a, e, start)`: an ErrorChunk of zeros when two chunks hold the same values bit
    for bit (Inf pairs excused by `inf_equal`; NaN pairs are errors of NaN unless
    `nan_equal`, as float64 makes them), else None."""

    def __init__(self, a_dtype: np.dtype, e_dtype: np.dtype, tol: Tolerance, size: int) -> None:
        self.enabled = False
        self._nan_equal, self._inf_equal = tol.nan_equal, tol.inf_equal
        self._mask: Any = None
        if a_dtype != e_dtype or not TUNING.equality:
            return
        if a_dtype.kind in "biu" and a_dtype.itemsize in _UNSIGNED:
            self._view: Any = _UNSIGNED[a_dtype.itemsize]
        elif (bits := _float_bits(a_dtype)) is not None:
            self._view, mask = bits
            self._mask = self._view(mask)
            # the sign bit cleared: a magnitude above the exponent bits is NaN, equal Inf
            self._magnitude = self._view((1 << (8 * a_dtype.itemsize - 1)) - 1)
        else:
            return
        self.enabled = True
        self._flags = np.empty(size, dtype=np.bool_)
        self._bits = np.empty(size, dtype=self._view)

    def equal(self, a: np.ndarray, e: np.ndarray, start: int) -> ErrorChunk | None:
        if not self.enabled:
            return None
        n = a.shape[0]
        av, ev = a.view(self._view), e.view(self._view)
        if np.not_equal(av[:_PREFIX], ev[:_PREFIX]).any():
            return None
        flags = self._flags[:n]
        if np.not_equal(av, ev, out=flags).any():
            return None
        nan = inf = 0
        if self._mask is not None:
            bits = np.bitwise_and(av, self._mask, out=self._bits[:n])
            if np.equal(bits, self._mask, out=flags).any():
                special = int(np.count_nonzero(flags))
                magnitude = np.bitwise_and(av, self._magnitude, out=self._bits[:n])
                nan = int(np.count_nonzero(magnitude > self._mask))
                inf = special - nan
                if inf and not self._inf_equal:
                    return None
        return zeros(start, n, a, nan, inf, 0 if self._nan_equal else nan)


def zeros(
    start: int,
    n: int,
    values: Any,
    nan: int,
    inf: int,
    nan_errors: int,
    empty: Any = _EMPTY,
    xp: Any = NUMPY,
) -> ErrorChunk:
    """A bit-for-bit equal chunk of `n` elements (`values`, one side), with `nan` NaN and
    `inf` Inf pairs of which `nan_errors` NaN pairs are errors; its arrays are `empty`, of
    the namespace `xp`."""
    return ErrorChunk(
        start,
        n,
        empty,
        empty,
        empty,
        empty,
        (empty, empty, empty),
        xp=xp,
        equal=True,
        nan_errors=nan_errors,
        nan_actual=nan,
        nan_expected=nan,
        inf_actual=inf,
        inf_expected=inf,
        values=values,
    )
