"""Median and quantile of the errors, exact, in bounded memory: the `Quantiles` statistic.

Usually in one pass, from windows guessed on a sample:

A sample of the errors (a few tens of thousands, stratified over the output) brackets each
wanted quantile by a window [lo, hi] of exact float64 values, several standard errors wide.
The pass over the data places every element exactly: below the window, at its edges,
inside or above it. A float32 estimate within a relative `SLACK` of the float64 value
places an element when it is clear of the edges by that much; the others (the caller
computes them) are placed by their float64 values. The window counts the elements below
it and those equal to lo or to hi, and keeps the float64 values strictly inside: so a
quantile that falls on many tied errors costs counting, not keeping. A wanted rank that
falls inside the window is then exact. Otherwise (a sample that misled, a window that grew
past its cap) `RankSelect`, an exact selection, reads the errors again (one pass for at
most 65,536 errors, else two or three).

A tensor's errors (the torch path) have no windows: its nonzero errors are kept on its
device, up to `TUNING.torch_kept` of them, and each wanted rank selected there; past that
(dense errors of a large failing output), `RankSelect` reads them again, on the device too,
so that the memory stays bounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .arrays import host_array
from .chunks import DENSE, SLACK, TINY, ErrorChunk, float32_down, float32_up, namespace_of
from .statistic import Statistic
from .tuning import TUNING

_SIGMAS = 5.0


class Window:
    """Counts values below [lo, hi] and at its edges; keeps the float64 values inside."""

    def __init__(self, q: float, lo: float, hi: float, cap: int) -> None:
        self.q = q  # the quantile it brackets
        self.lo, self.hi = lo, hi
        # A float32 estimate below lo32 (above hi32) is surely below lo (above hi).
        self.lo32 = float32_down(lo * (1 - SLACK) - TINY) if lo > 0 else np.float32(0)
        self.hi32 = float32_up(hi * (1 + SLACK) + TINY)
        self.cap = cap
        self.below = 0
        self.at_lo = 0
        self.at_hi = 0
        self.kept = 0
        self.parts: list[np.ndarray] = []
        self.failed = False

    def count(self, below: int, at_lo: int) -> None:
        """Counts what `estimate` placed without a float64 look."""
        self.below += below
        self.at_lo += at_lo

    def estimate(
        self, values: np.ndarray, errors: np.ndarray
    ) -> tuple[np.ndarray, int, int] | None:
        """Where float32 estimates (or float64 values) place a chunk's elements, without
        counting them: (mask of those `keep` must see in float64, count surely below,
        count at lo).

        `errors` are the chunk's absolute errors in the same precision: an error of 0 is
        exact in float32 too, so where the window starts at 0 the zeros are counted at its
        edge without a float64 look.
        """
        if self.failed:
            return None
        f32 = values.dtype == np.float32
        if self.lo == 0:
            zero = errors == 0
            inside = values <= (self.hi32 if f32 else self.hi)
            inside &= ~zero
            return inside, 0, int(np.count_nonzero(zero))
        inside = values >= (self.lo32 if f32 else self.lo)
        below = values.shape[0] - int(np.count_nonzero(inside))
        inside &= values <= (self.hi32 if f32 else self.hi)
        return inside, below, 0

    def keep(self, exact: np.ndarray) -> None:
        """Place float64 values that `estimate` could not place by their float32 estimates."""
        if self.failed or not exact.shape[0]:
            return
        self.below += int(np.count_nonzero(exact < self.lo))
        self._keep_closed(exact)

    def place(self, exact: np.ndarray) -> int:
        """Place every float64 value of a chunk (no NaN): returns how many lie in [lo, hi].

        A window whose lo is its hi (tied errors) only counts; otherwise the values in
        [lo, hi] are compressed once, so a sparse window looks at few values twice.
        """
        if self.failed or not exact.shape[0]:
            return 0
        lo, hi = self.lo, self.hi
        if lo == hi:
            at = int(np.count_nonzero(exact == lo))
            self.below += int(np.count_nonzero(exact < lo))
            self.at_lo += at
            return at
        closed = exact >= lo
        self.below += exact.shape[0] - int(np.count_nonzero(closed))
        closed &= exact <= hi
        inside = exact[closed]
        self._keep_closed(inside)
        return int(inside.shape[0])

    def _keep_closed(self, exact: np.ndarray) -> None:
        """Place float64 values none of which is below lo."""
        lo, hi = self.lo, self.hi
        self.at_lo += int(np.count_nonzero(exact == lo))
        if hi != lo:
            self.at_hi += int(np.count_nonzero(exact == hi))
            inner = exact[(exact > lo) & (exact < hi)]
            self.kept += inner.shape[0]
            if self.kept > self.cap:
                self.failed, self.parts = True, []
            elif inner.shape[0]:
                self.parts.append(inner)

    def merge(self, other: Window) -> None:
        """The other window's counts and values (a window of other bounds: failed)."""
        if (other.lo, other.hi) != (self.lo, self.hi) or other.failed:
            self.failed, self.parts = True, []
            return
        self.below += other.below
        self.at_lo += other.at_lo
        self.at_hi += other.at_hi
        self.kept += other.kept
        self.parts += other.parts
        if self.kept > self.cap:
            self.failed, self.parts = True, []

    def add_zeros(self, n: int) -> None:
        """n exact zeros (bit-for-bit equal chunks)."""
        if self.lo == 0:
            self.at_lo += n
        else:
            self.below += n

    def values(self, ranks: tuple[int, ...]) -> dict[int, float] | None:
        """The float64 values at `ranks`, or None when the window missed them."""
        if self.failed:
            return None
        kept = np.concatenate(self.parts) if self.parts else np.zeros(0)
        offset = self.below + self.at_lo
        inner = sorted({r - offset for r in ranks if 0 <= r - offset < kept.shape[0]})
        if inner:
            kept.partition(inner)
        found: dict[int, float] = {}
        for rank in ranks:
            i = rank - self.below
            if i < 0:
                return None
            if i < self.at_lo:
                found[rank] = self.lo
                continue
            i -= self.at_lo
            if i < kept.shape[0]:
                found[rank] = float(kept[i])
                continue
            i -= kept.shape[0]
            if i < self.at_hi:
                found[rank] = self.hi
                continue
            return None
        return found


def windows_for(sample: np.ndarray, qs: tuple[float, ...], cap: int) -> list[Window]:
    """A window per quantile in `qs`, from a sample of the float64 values (reordered by
    one partition at every window's edges)."""
    size = sample.shape[0]
    if not size:
        return [Window(q, 0.0, math.inf, cap) for q in qs]
    edges = []
    for q in qs:
        spread = _SIGMAS * math.sqrt(q * (1 - q) * size) + 2
        edges.append((math.floor(q * (size - 1) - spread), math.ceil(q * (size - 1) + spread)))
    inner = sorted({i for pair in edges for i in pair if 0 < i < size - 1})
    if inner:
        sample.partition(inner)
    return [
        Window(
            q,
            0.0 if first <= 0 else float(sample[first]),
            math.inf if last >= size - 1 else float(sample[last]),
            cap,
        )
        for q, (first, last) in zip(qs, edges, strict=True)
    ]


def sample_positions(n: int, size: int) -> np.ndarray:
    """`size` positions spread over range(n): one at random in each of `size` strata."""
    if size >= n:
        return np.arange(n)
    rng = np.random.default_rng(0)
    if n % size == 0:  # strata of one width (sizes that are powers of 2): fewer passes
        width = n // size
        return np.arange(0, n, width, dtype=np.int64) + rng.integers(0, width, size)
    starts = np.arange(size, dtype=np.int64) * n // size
    widths = np.diff(np.append(starts, n))
    return starts + (rng.random(size) * widths).astype(np.int64)


# Exact order statistics of a stream of non-negative float64 values (the windows' fallback).
# At most as many values as a histogram has bins are kept in one pass, then partitioned.
# More: non-negative float64 values order as their bit patterns do (as int64). Round 0
# histograms the top 16 bits; each later round looks only at the bucket holding a wanted
# rank: it collects the bucket's values when they are few (then partitions them), or
# histograms the next 16 bits. A bucket whose values are all equal (ties) is resolved at once.

_DIGIT = 16
_TOP = 64 - _DIGIT  # round 0: the top 16 bits (the sign bit is always 0)
_BINS = 1 << _DIGIT


@dataclass
class _Bucket:
    """Values whose bits >> shift == prefix; `ranks` maps a wanted rank to its rank inside."""

    prefix: int
    shift: int
    count: int
    ranks: dict[int, int]
    collect: bool
    parts: list[np.ndarray] = field(default_factory=list)
    histogram: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    low: int = np.iinfo(np.int64).max
    high: int = -1

    def __post_init__(self) -> None:
        if not self.collect:  # (a collecting bucket keeps its values instead)
            self.histogram = np.zeros(_BINS, dtype=np.int64)


class RankSelect:
    """The values at given ranks (0-based, ascending) of `total` streamed values."""

    def __init__(self, ranks: Iterable[int], total: int, collect_limit: int) -> None:
        self.total = total
        self.limit = max(TUNING.min_collect, collect_limit)
        self.values: dict[int, float] = {}
        self._wanted = sorted(set(ranks))
        self._buckets: list[_Bucket] = []
        self._round = 0
        if total > min(_BINS, self.limit):
            self._top = np.zeros(_BINS, dtype=np.int64)
        else:  # no more values than a histogram's bins: kept in one pass, then partitioned
            self._buckets = [_Bucket(0, 64, total, {r: r for r in self._wanted}, True)]
            self._round, self._same_shift = 1, False

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

    def add(self, values: Any) -> None:
        """Adds values (a tensor's on its device: only the counts come to the host)."""
        if self._round > 0 and not self._buckets:
            return
        xp = namespace_of(values)
        bits = values.view(xp.int64)
        if self._round == 0:
            counts = host_array(xp.bincount(bits >> _TOP))
            self._top[: counts.shape[0]] += counts
            return
        keys = bits >> self._buckets[0].shift if self._same_shift else None
        for bucket in self._buckets:
            if bucket.shift == 64:  # every value: a copy (a chunk's buffers are reused)
                bucket.parts.append(xp.asarray(bits, copy=True))
                continue
            key = keys if keys is not None else bits >> bucket.shift
            inside = bits[key == bucket.prefix]
            if not inside.shape[0]:
                continue
            if bucket.collect:
                bucket.parts.append(inside)
                continue
            digits = (inside >> (bucket.shift - _DIGIT)) & (_BINS - 1)
            counts = host_array(xp.bincount(digits))
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
            parts = [host_array(part) for part in bucket.parts]  # at most the collect limit
            values = np.concatenate(parts) if parts else np.zeros(0, np.int64)
            inner = sorted(set(bucket.ranks.values()))
            if inner:
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


def quantile_of(values: dict[int, float], count: int, q: float) -> float:
    """Linear-interpolation quantile (numpy's default) from the values at its ranks.

    Unlike np.quantile it gives Inf, not NaN, when an infinite value is interpolated.
    """
    low, high, t = quantile_ranks(count, q)
    below, above = values[low], values[high]
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


#: Errors of the whole pair again, as float64 or equal chunks (for the exact selection)
Reread = Callable[[], Iterable[ErrorChunk]]


class Quantiles(Statistic):
    """The median and quantile `q` of |a - e| and of the relative error.

    `sample` (float64 ErrorChunks of sampled positions, given for outputs of
    `TUNING.window_min` elements and more) sets the windows; `reread` gives the errors
    again when a window missed. `dense` tells whether the last chunk placed more than
    1/DENSE of its elements in a window (tied errors: the next is cheaper computed whole).
    """

    figures = ("median_abs_error", "median_rel_error", "quantile_abs_error", "quantile_rel_error")
    when = "reported"
    defaults: ClassVar = dict.fromkeys(figures)
    line = False

    def __init__(self, q: float, size: int, sample: Iterator[ErrorChunk] | None, reread: Reread):
        self.q = q
        self.compared = 0
        self._size = size
        self._reread = reread
        self.windows: list[tuple[str, Window]] = []
        self._kept: list[tuple[Any, Any, Any]] = []
        self._kept_count = 0  # (past TUNING.torch_kept it stops counting: too many)
        self.dense = False
        if sample is not None and size:
            parts: dict[str, list[np.ndarray]] = {"abs": [], "rel": []}
            for chunk in sample:
                parts["abs"].append(chunk.abs_err.copy())
                parts["rel"].append(chunk.rel_err.copy())
            cap = max(TUNING.window_cap, size // 16)
            for kind, values in parts.items():
                found = windows_for(np.concatenate(values), tuple(dict.fromkeys((0.5, q))), cap)
                self.windows += [(kind, window) for window in found]

    @classmethod
    def for_pair(cls, pair: Any) -> Quantiles:
        sample = pair.sample() if pair.windows else None
        return cls(pair.tol.quantile, pair.n, sample, pair.float64_chunks)

    def update(self, chunk: ErrorChunk) -> None:
        self.dense = False
        self.compared += chunk.compared
        if not isinstance(chunk.abs_err, np.ndarray):  # a tensor's: kept, then selected
            d, r = chunk.abs_err, chunk.rel_err  # (errors of 0 are only counted)
            if not self._too_many:
                kept = (chunk.xp, d[d > 0], r[r > 0])
                self._kept.append(kept)
                self._kept_count += kept[1].shape[0] + kept[2].shape[0]
                if self._too_many:  # `compute` reads the errors again
                    self._kept = []
        elif chunk.equal:
            for _, window in self.windows:
                window.add_zeros(chunk.compared)
        elif chunk.exact or chunk.whole is not None:
            exact = chunk.whole_chunk()
            for kind, window in self.windows:
                placed = window.place(exact.abs_err if kind == "abs" else exact.rel_err)
                self.dense |= placed * DENSE >= exact.abs_err.shape[0]
        elif self.windows:
            self._add_float32(chunk)

    def _add_float32(self, chunk: ErrorChunk) -> None:
        """float32 estimates place most elements; the others are placed in float64."""
        d, r = chunk.abs_err, chunk.rel_err
        masks = []
        for kind, window in self.windows:
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
        positions = np.flatnonzero(union)  # no NaN pair: their errors are 0, below windows
        refined = chunk.refine(positions)
        for kind, window, mask in masks:
            inside = mask[positions]
            window.keep((refined.abs_err if kind == "abs" else refined.rel_err)[inside])
        self.dense = chunk.whole is not None

    @property
    def _too_many(self) -> bool:
        return self._kept_count > TUNING.torch_kept

    def merge(self, other: Quantiles) -> None:
        """Adds the other half of the same pair (its windows, from the same sample, are
        these; where they are not, the exact selection decides)."""
        self.compared += other.compared
        self._kept += other._kept
        self._kept_count += other._kept_count
        if self._too_many:
            self._kept = []
        if len(self.windows) != len(other.windows):
            self.windows = []  # no windows: `compute` selects exactly
        for (_, mine), (_, theirs) in zip(self.windows, other.windows, strict=True):
            mine.merge(theirs)

    def compute(self) -> dict[str, float]:
        compared = self.compared
        if not compared:
            return dict.fromkeys(self.figures, 0.0)
        qs = {q: quantile_ranks(compared, q)[:2] for q in (0.5, self.q)}
        values: dict[str, dict[int, float]] = {"abs": {}, "rel": {}}
        if self._kept:
            values["abs"], values["rel"] = self._selected(compared)
            return self._figures(values, compared)
        missing = set() if self.windows else {"abs", "rel"}
        for kind, window in self.windows:
            found = window.values(qs[window.q])
            if found is None:
                missing.add(kind)
            else:
                values[kind].update(found)
        if missing:
            ranks = {rank for pair in qs.values() for rank in pair}
            for kind, select in self._select(ranks, compared, sorted(missing)).items():
                values[kind] = select.values
        return self._figures(values, compared)

    def _figures(self, values: dict[str, dict[int, float]], compared: int) -> dict[str, float]:
        """The figures from the errors at the wanted ranks, by kind ('abs', 'rel')."""
        return {
            f"{name}_{kind}_error": quantile_of(values[kind], compared, q)
            for name, q in (("median", 0.5), ("quantile", self.q))
            for kind in ("abs", "rel")
        }

    def _selected(self, compared: int) -> list[dict[int, float]]:
        """The errors at the wanted ranks, abs and rel, of errors kept whole (a tensor's, on
        its device): one selection each (equal chunks' errors are zeros, below every other)."""
        xp = self._kept[0][0]
        ranks = {rank for q in (0.5, self.q) for rank in quantile_ranks(compared, q)[:2]}
        found = []
        for which in (1, 2):
            kept = xp.concat([part[which] for part in self._kept])
            zeros = compared - kept.shape[0]
            found.append(
                {
                    rank: 0.0 if rank < zeros else float(kept.kthvalue(rank - zeros + 1).values)
                    for rank in ranks
                }
            )
        return found

    def _select(self, ranks: set[int], count: int, kinds: list[str]) -> dict[str, RankSelect]:
        """The exact selection over the errors read again (one pass for at most 65,536 of
        them, else two or three)."""
        selects = {kind: RankSelect(ranks, count, self._size // 32) for kind in kinds}
        while not all(s.done for s in selects.values()):
            for chunk in self._reread():
                for kind, select in selects.items():
                    if chunk.equal:
                        select.add_zeros(chunk.compared)
                    else:
                        select.add(chunk.abs_err if kind == "abs" else chunk.rel_err)
            for select in selects.values():
                if not select.done:
                    select.finish_round()
        return selects
