"""The report's histogram of floor(log10 |error|), without a logarithm per element.

Non-negative float64 values order as their bit patterns do. The histogram is read from the
counts of the top 16 bits (exponent and 4 mantissa bits) of a chunk's errors (a chunk under
`_BY_DEFINITION` elements takes floor(log10 x) itself): a bucket of 1/16 binade lies within
one decade, or holds one decade boundary (10 ** k, or the 1e300 cap). Only such straddling
buckets cost a comparison of the chunk with the boundary's bit pattern. A table gives, per
bucket, the decade of its first and last value and the first bit pattern of the upper
decade; it is built with np.log10 itself (bisection over bit patterns), so the counts are
those of floor(np.log10(x)) exactly.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from .chunks import NUMPY, ErrorChunk
from .statistic import Statistic

_CAP = 1e300  # larger errors (and Inf) count in the decade of 1e300, as before
CAP_DECADE = 300  # that decade: the report labels it [1e300, inf]
TOP_SHIFT = 48  # a bucket: the top 16 bits of the bit pattern
_KEYS = 1 << 15  # the sign bit is 0
_NORMAL = 16  # keys below hold zeros and subnormals (exponent 0)
_INT64_MAX = np.iinfo(np.int64).max
_FLOAT32_MAX = float(np.finfo(np.float32).max)
#: float64 chunks shorter than this take floor(log10 x) itself: there it costs less than
#: the bucket counts, whose two arrays of 32,768 counts are made at the first longer one
_BY_DEFINITION = 1 << 12
_NO_KEYS = np.zeros(0, dtype=np.int64)


def _decade(values: Any, xp: Any = NUMPY) -> Any:
    """floor(log10 x), larger values (and Inf) in the decade of the cap: the definition the
    bit tables reproduce for numpy, and what other namespaces compute directly."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.astype(xp.floor(xp.log10(xp.clip(values, max=_CAP))), xp.int64)


@functools.cache
def _table() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per key: (decade of its first value, of its last, first bit pattern of the last
    decade or int64 max), and the keys that straddle a boundary."""
    keys = np.arange(_KEYS, dtype=np.int64)
    low = keys << TOP_SHIFT
    high = low + (1 << TOP_SHIFT) - 1
    start = _decade(low.view(np.float64))
    end = _decade(high.view(np.float64))
    infinite = keys >= 0x7FF0  # exponent all ones: Inf (NaN never reaches here)
    start[infinite] = end[infinite] = _decade(np.array([_CAP]))[0]
    start[:_NORMAL] = end[:_NORMAL] = 0  # counted apart, element by element
    straddle = np.flatnonzero(end > start)
    lo, hi = low[straddle], high[straddle]
    for _ in range(TOP_SHIFT + 1):  # first bit pattern whose decade exceeds the first one
        mid = lo + (hi - lo) // 2
        above = _decade(mid.view(np.float64)) > start[straddle]
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid + 1)
    threshold = np.full(_KEYS, _INT64_MAX, dtype=np.int64)
    threshold[straddle] = hi
    return start, end, threshold, straddle


@functools.cache
def _starts32() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first float64 value of each decade float32 reaches: rounded to float32, as it
    is, and its decade; ascending."""
    start, end, threshold, straddle = _table()
    keys = np.arange(_NORMAL + 1, _KEYS, dtype=np.int64)
    at_key_start = keys[start[keys] != end[keys - 1]] << TOP_SHIFT  # a bucket begins a decade
    first = np.unique(np.concatenate([threshold[straddle], at_key_start])).view(np.float64)
    with np.errstate(over="ignore"):
        rounded = first.astype(np.float32)
    keep = np.isfinite(rounded) & (rounded > 0)
    return rounded[keep], first[keep], _decade(first[keep])


def top_counts(values: np.ndarray) -> np.ndarray:
    """Counts of the top 16 bits of non-negative float64 values."""
    return np.bincount(values.view(np.int64) >> TOP_SHIFT)


class Decades(Statistic):
    """The histogram of the absolute errors: counts of floor(log10 x) for streamed
    non-negative float64 values, 0 counted apart."""

    figures = ("histogram",)
    when = "reported"
    defaults: ClassVar = {"histogram": ()}
    line = False

    def __init__(self, tolerance: Any = None) -> None:
        #: counts by key; per straddling key, those in its last decade
        self._keys: np.ndarray | None = None  # (made at the first long float64 chunk)
        self._subnormal: dict[int, int] = {}
        self._direct: dict[int, int] = {}  # counts by decade, from `add_float32`
        self.zeros = 0

    def update(self, chunk: ErrorChunk) -> None:
        """Adds a chunk's |a - e| (a float32 chunk's by `add_float32`)."""
        d = chunk.abs_err
        if chunk.equal:
            self.zeros += chunk.compared
        elif not isinstance(d, np.ndarray) or (chunk.exact and d.shape[0] < _BY_DEFINITION):
            self._add_by_definition(d, chunk.xp)
        elif chunk.exact and chunk.narrow and d.shape[0] and d[chunk.argmax(0)] < _FLOAT32_MAX:
            self.add_float32(d, lambda at: d[at], d)  # a few decades: a comparison each
        elif chunk.exact:
            self.add_values(d)
        elif chunk.abs_err.shape[0]:
            whole = None if chunk.whole is None else chunk.whole.abs_err
            self.add_float32(chunk.abs_err, lambda at: chunk.refine(at).abs_err, whole)

    def merge(self, other: Decades) -> None:
        if other._keys is not None:
            self._counts()[:] += other._keys
        for mine, theirs in ((self._subnormal, other._subnormal), (self._direct, other._direct)):
            for decade, count in theirs.items():
                mine[decade] = mine.get(decade, 0) + count
        self.zeros += other.zeros

    def compute(self) -> dict[str, tuple[tuple[int | None, int], ...]]:
        return dict(histogram=self.histogram())

    def _counts(self) -> np.ndarray:
        if self._keys is None:
            self._keys = np.zeros((2, _KEYS), dtype=np.int64)
        return self._keys

    def _add_by_definition(self, values: Any, xp: Any) -> None:
        """floor(log10 x) itself, in any array namespace (what the bit tables give numpy)."""
        zero = values == 0
        self.zeros += int(xp.count_nonzero(zero))
        nonzero = values[~zero]
        if nonzero.shape[0]:
            found, counts = xp.unique_counts(_decade(nonzero, xp))
            for decade, count in zip(found, counts, strict=True):
                key = int(decade)
                self._direct[key] = self._direct.get(key, 0) + int(count)

    def add_values(self, values: np.ndarray) -> None:
        """Adds float64 values."""
        counts = top_counts(values)
        top, upper = self._counts()
        top[: counts.shape[0]] += counts
        bits = values.view(np.int64)
        _, _, threshold, straddle = _table()
        inside = straddle[straddle < counts.shape[0]]
        hit = inside[counts[inside] > 0]
        if hit.shape[0]:
            at_or_above = values.shape[0] - np.cumsum(counts)  # values above each key
            for key in hit.tolist():
                upper[key] += int(np.count_nonzero(bits >= threshold[key])) - int(at_or_above[key])
        if counts[:_NORMAL].any():  # zeros and subnormals
            tiny = values[bits < (1 << 52)]
            zero = int(np.count_nonzero(tiny == 0))
            self.zeros += zero
            if zero < tiny.shape[0]:
                found, found_counts = np.unique(_decade(tiny[tiny > 0]), return_counts=True)
                for decade, count in zip(found.tolist(), found_counts.tolist(), strict=True):
                    self._subnormal[decade] = self._subnormal.get(decade, 0) + count

    def add_float32(
        self,
        d32: np.ndarray,
        exact: Callable[[np.ndarray], np.ndarray],
        whole: np.ndarray | None = None,
    ) -> None:
        """Adds float64 values known by their float32 roundings `d32`; `exact(positions)`
        gives the float64 values at some positions, `whole` all of them when the caller has
        them already (then each decade present costs one float64 comparison).

        Rounding is monotone, so x < B implies fl32(x) <= fl32(B) and x >= B implies
        fl32(x) >= fl32(B): counting d32 > fl32(B) counts the values of B's decade and above,
        but for those whose rounding equals fl32(B), which are looked up exactly. One
        comparison per decade present, from the top down, and no histogram.
        """
        zeros = int(np.count_nonzero(d32 == 0))
        self.zeros += zeros
        nonzero = d32.shape[0] - zeros
        if not nonzero:
            return
        rounded, first, decade = _starts32()
        above = 0
        top = np.float32(d32.max())  # float64 values (`whole` alone) rounded: monotone
        for i in range(int(np.searchsorted(rounded, top, side="right")) - 1, -1, -1):
            if whole is not None:
                at_or_above = int(np.count_nonzero(whole >= first[i]))
            else:
                at_or_above = int(np.count_nonzero(d32 > rounded[i]))
                tied = d32 == rounded[i]
                if tied.any():
                    at_or_above += int(np.count_nonzero(exact(np.flatnonzero(tied)) >= first[i]))
            key = int(decade[i])
            self._direct[key] = self._direct.get(key, 0) + at_or_above - above
            above = at_or_above
            if above == nonzero:
                return
        self._direct[-46] = self._direct.get(-46, 0) + nonzero - above  # not for float32 data

    def histogram(self) -> tuple[tuple[int | None, int], ...]:
        start, end, _, _ = _table()
        counts = dict(self._subnormal)
        for decade, count in self._direct.items():
            if count:
                counts[decade] = counts.get(decade, 0) + count
        top, uppers = self._keys if self._keys is not None else (_NO_KEYS, _NO_KEYS)
        for key in (np.flatnonzero(top[_NORMAL:]) + _NORMAL).tolist():
            upper = int(uppers[key])
            lower = int(top[key]) - upper
            for decade, count in ((int(start[key]), lower), (int(end[key]), upper)):
                if count:
                    counts[decade] = counts.get(decade, 0) + count
        ordered: list[tuple[int | None, int]] = [(None, self.zeros)] if self.zeros else []
        return tuple(ordered + sorted(counts.items()))
