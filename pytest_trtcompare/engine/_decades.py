"""The report's histogram of floor(log10 |error|), without a logarithm per element.

A binade [2**k, 2**(k+1)) spans less than a factor 10, so it holds at most one decade
boundary. A table gives, per float64 exponent, the decade of the binade's start and the
smallest value of the binade in the next decade; an element's decade is then one lookup and
one comparison. The table is built with np.log10 itself (bisection over bit patterns), so
the counts are those of floor(np.log10(x)) exactly.
"""

from __future__ import annotations

import functools

import numpy as np

_CAP = 1e300  # larger errors (and Inf) count in the decade of 1e300, as before


def _decade(values: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        decades: np.ndarray = np.floor(np.log10(np.minimum(values, _CAP))).astype(np.int64)
    return decades


@functools.cache
def _table() -> tuple[np.ndarray, np.ndarray]:
    """(decade of each binade's start, first bit pattern in the next decade or int64 max)."""
    exponents = np.arange(1, 2047, dtype=np.int64)
    low = exponents << 52  # first value of each binade (normal numbers)
    high = low + (1 << 52) - 1  # last value
    start = _decade(low.view(np.float64))
    end = _decade(high.view(np.float64))
    # bisection for the first bit pattern whose decade exceeds the binade's first one
    lo, hi = low.copy(), high.copy()
    for _ in range(53):
        mid = lo + (hi - lo) // 2
        above = _decade(mid.view(np.float64)) > start
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid + 1)
    threshold = np.where(end > start, hi, np.iinfo(np.int64).max)
    base = np.zeros(2048, dtype=np.int64)
    first = np.full(2048, np.iinfo(np.int64).max, dtype=np.int64)
    base[1:2047], first[1:2047] = start, threshold
    base[2047], first[2047] = _decade(np.array([_CAP]))[0], np.iinfo(np.int64).max
    return base, first


class Decades:
    """Counts of floor(log10 x) for streamed non-negative float64 values, 0 counted apart."""

    def __init__(self) -> None:
        self._binades = np.zeros(2 * 2048, dtype=np.int64)
        self._subnormal: dict[int, int] = {}
        self.zeros = 0

    def add(self, values: np.ndarray) -> None:
        bits = np.minimum(values, _CAP).view(np.int64)
        exponent = bits >> 52
        key = exponent * 2 + (bits >= _table()[1][exponent])
        counts = np.bincount(key)
        self._binades[: counts.shape[0]] += counts
        if counts.shape[0] and counts[0]:  # zeros and subnormals
            tiny = values[exponent == 0]
            zero = int(np.count_nonzero(tiny == 0))
            self.zeros += zero
            if zero < tiny.shape[0]:
                found, counts = np.unique(_decade(tiny[tiny > 0]), return_counts=True)
                for decade, count in zip(found.tolist(), counts.tolist(), strict=True):
                    self._subnormal[decade] = self._subnormal.get(decade, 0) + count

    def histogram(self) -> tuple[tuple[int | None, int], ...]:
        counts = dict(self._subnormal)
        nonzero = np.flatnonzero(self._binades[2:]) + 2
        for key in nonzero.tolist():
            decade = int(_table()[0][key // 2]) + key % 2
            counts[decade] = counts.get(decade, 0) + int(self._binades[key])
        ordered: list[tuple[int | None, int]] = [(None, self.zeros)] if self.zeros else []
        return tuple(ordered + sorted(counts.items()))
