"""Exact order statistics of a stream of non-negative float64 values, in bounded memory.

Non-negative float64 values order as their bit patterns do (as int64). Round 0 histograms
the top 16 bits; each later round looks only at the bucket holding a wanted rank: it
collects the bucket's values when they are few (then partitions them), or histograms the
next 16 bits. A bucket whose values are all equal (ties) is resolved at once. Every round
sees the whole stream again, in the same order; in practice there are two rounds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

_DIGIT = 16
_TOP = 64 - _DIGIT  # round 0: the top 16 bits (the sign bit is always 0)
_BINS = 1 << _DIGIT
_MIN_COLLECT = 1 << 20


@dataclass
class _Bucket:
    """Values whose bits >> shift == prefix; `ranks` maps a wanted rank to its rank inside."""

    prefix: int
    shift: int
    count: int
    ranks: dict[int, int]
    collect: bool
    parts: list[np.ndarray] = field(default_factory=list)
    histogram: np.ndarray = field(default_factory=lambda: np.zeros(_BINS, dtype=np.int64))
    low: int = np.iinfo(np.int64).max
    high: int = -1


class RankSelect:
    """The values at given ranks (0-based, ascending) of `total` streamed values."""

    def __init__(self, ranks: Iterable[int], total: int, collect_limit: int) -> None:
        self.total = total
        self.limit = max(_MIN_COLLECT, collect_limit)
        self.values: dict[int, float] = {}
        self._wanted = sorted(set(ranks))
        self._top = np.zeros(_BINS, dtype=np.int64)
        self._buckets: list[_Bucket] = []
        self._round = 0

    @property
    def done(self) -> bool:
        return self._round > 0 and not self._buckets

    def add_zeros(self, n: int) -> None:
        """n values equal to +0.0, without an array of them."""
        if self._round == 0:
            self._top[0] += n
            return
        for bucket in self._buckets:
            if bucket.prefix == 0:
                if bucket.collect:
                    bucket.parts.append(np.zeros(n, dtype=np.int64))
                else:
                    bucket.histogram[0] += n
                    bucket.low, bucket.high = min(bucket.low, 0), max(bucket.high, 0)

    def add(self, values: np.ndarray, counts: np.ndarray | None = None) -> None:
        """Adds values; in round 0, `counts` may give their top-16-bit counts already."""
        if self._round > 0 and not self._buckets:
            return
        bits = values.view(np.int64)
        if self._round == 0:
            if counts is None:
                counts = np.bincount(bits >> _TOP)
            self._top[: counts.shape[0]] += counts
            return
        keys = bits >> self._buckets[0].shift if self._same_shift else None
        for bucket in self._buckets:
            key = keys if keys is not None else bits >> bucket.shift
            inside = bits[key == bucket.prefix]
            if not inside.shape[0]:
                continue
            if bucket.collect:
                bucket.parts.append(inside)
                continue
            digits = (inside >> (bucket.shift - _DIGIT)) & (_BINS - 1)
            counts = np.bincount(digits)
            bucket.histogram[: counts.shape[0]] += counts
            bucket.low = min(bucket.low, int(inside.min()))
            bucket.high = max(bucket.high, int(inside.max()))

    def finish_round(self) -> None:
        """Settle what this round decided; `done` tells whether another round is needed."""
        if self._round == 0:
            self._buckets = self._split(self._top, 0, 64, dict((r, r) for r in self._wanted))
        else:
            following: list[_Bucket] = []
            for bucket in self._buckets:
                following.extend(self._settle(bucket))
            self._buckets = following
        self._same_shift = len({b.shift for b in self._buckets}) == 1
        self._round += 1

    def _settle(self, bucket: _Bucket) -> list[_Bucket]:
        if bucket.collect:
            values = np.concatenate(bucket.parts) if bucket.parts else np.zeros(0, np.int64)
            inner = sorted(set(bucket.ranks.values()))
            values.partition(inner)
            for rank, inside in bucket.ranks.items():
                self.values[rank] = float(values[inside : inside + 1].view(np.float64)[0])
            return []
        if bucket.low == bucket.high:  # all tied
            for rank in bucket.ranks:
                self.values[rank] = _as_float(bucket.low)
            return []
        return self._split(bucket.histogram, bucket.prefix, bucket.shift, bucket.ranks)

    def _split(
        self, histogram: np.ndarray, prefix: int, shift: int, ranks: dict[int, int]
    ) -> list[_Bucket]:
        ends = np.cumsum(histogram)
        next_shift = shift - _DIGIT
        grouped: dict[int, dict[int, int]] = {}
        for rank, inside in ranks.items():
            digit = int(np.searchsorted(ends, inside, side="right"))
            below = int(ends[digit - 1]) if digit else 0
            grouped.setdefault(digit, {})[rank] = inside - below
        buckets = []
        for digit, inner in grouped.items():
            new_prefix = (prefix << _DIGIT) | digit if shift < 64 else digit
            if next_shift == 0:
                for rank in inner:
                    self.values[rank] = _as_float(new_prefix)
                continue
            count = int(histogram[digit])
            buckets.append(_Bucket(new_prefix, next_shift, count, inner, count <= self.limit))
        return buckets

    _same_shift = True


def _as_float(bits: int) -> float:
    return float(np.array([bits], dtype=np.int64).view(np.float64)[0])


def quantile_from(select: RankSelect, count: int, q: float) -> float:
    """Linear-interpolation quantile (numpy's default) from the selected ranks.

    Unlike np.quantile it gives Inf, not NaN, when an infinite value is interpolated.
    """
    low, high, t = quantile_ranks(count, q)
    below, above = select.values[low], select.values[high]
    if t == 0 or below == above:
        return below
    if math.isinf(above):
        return math.inf
    return float(below + t * (above - below))


def quantile_ranks(count: int, q: float) -> tuple[int, int, float]:
    """(low rank, high rank, weight of the high one) of quantile q among `count` values."""
    position = (count - 1) * q
    low = math.floor(position)
    return low, min(low + 1, count - 1), position - low
