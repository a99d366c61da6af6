"""Exact order statistics in one pass, from windows guessed on a sample.

A sample of the errors (a few tens of thousands, stratified over the output) brackets each
wanted quantile by a window [lo, hi] of exact float64 values, several standard errors wide.
The pass over the data places every element exactly: below the window, at its edges,
inside or above it. A float32 estimate within a relative `SLACK` of the float64 value
places an element when it is clear of the edges by that much; the others (the caller
computes them) are placed by their float64 values. The window counts the elements below
it and those equal to lo or to hi, and keeps the float64 values strictly inside: so a
quantile that falls on many tied errors costs counting, not keeping. A wanted rank that
falls inside the window is then exact. Otherwise (a sample that misled, a window that grew
past its cap) the caller falls back to the exact radix selection of `_select`; `None` says
so.
"""

from __future__ import annotations

import math

import numpy as np

SLACK = 1e-6  # float32 errors and ratios are within ~2.4e-7 of float64's
TINY = 2.0**-140  # absolute slack where float32 values are subnormal
_SIGMAS = 5.0
SAMPLE = 1 << 17
CAP_MIN = 1 << 16  # a window keeps at most max(CAP_MIN, count / 16) values


@np.errstate(over="ignore")  # beyond float32's range: -inf / inf, bounds that still hold
def float32_down(value: float) -> np.float32:
    """The largest float32 at most `value`."""
    low = np.float32(value)
    return np.nextafter(low, np.float32(-np.inf)) if float(low) > value else low


@np.errstate(over="ignore")
def float32_up(value: float) -> np.float32:
    """The smallest float32 at least `value`."""
    high = np.float32(value)
    return np.nextafter(high, np.float32(np.inf)) if float(high) < value else high


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
