"""Exact order statistics in one pass, from windows guessed on a sample.

A sample of the errors (a few tens of thousands, stratified over the output) brackets each
wanted quantile by a window [lo, hi], several standard errors wide. The pass over the data
counts the values below the window and keeps, in float64, those inside it. A value is placed
by a float32 estimate within a relative `SLACK` of its float64 value (or by the float64 value
itself): an element counted below has a float64 value under lo / (1 - SLACK), one above a
value over hi / (1 + SLACK). So when the wanted rank falls inside the window and its value
lies between those two bounds, it is exact, whatever the estimates were. Otherwise (a
sample that misled, a window that grew past its cap) the caller falls back to the exact
radix selection of `_select`; `None` says so.
"""

from __future__ import annotations

import math

import numpy as np

SLACK = 1e-6  # float32 errors and ratios are within ~2.4e-7 of float64's
TINY = 2.0**-140  # absolute slack where float32 values are subnormal
_SIGMAS = 5.0
SAMPLE = 1 << 17
CAP_MIN = 1 << 16  # a window keeps at most max(CAP_MIN, count / 16) values


def _float32_down(value: float) -> np.float32:
    low = np.float32(value)
    return np.nextafter(low, np.float32(-np.inf)) if float(low) > value else low


def _float32_up(value: float) -> np.float32:
    high = np.float32(value)
    return np.nextafter(high, np.float32(np.inf)) if float(high) < value else high


class Window:
    """Counts values below [lo, hi] and keeps the float64 values inside it."""

    def __init__(self, ranks: tuple[int, int], lo: float, hi: float, cap: int) -> None:
        self.ranks = ranks
        self.lo32, self.hi32 = _float32_down(lo), _float32_up(hi)
        self.lo, self.hi = float(self.lo32), float(self.hi32)
        self.cap = cap
        self.below = 0
        self.kept = 0
        self.parts: list[np.ndarray] = []
        self.failed = False

    def members(self, values: np.ndarray, errors: np.ndarray) -> np.ndarray | None:
        """Mask of this chunk's values inside the window (counting those below), or None.

        `errors` are the chunk's absolute errors (same precision as `values`): where the
        window starts at 0, exact zeros are the part below it.
        """
        if self.failed:
            return None
        f32 = values.dtype == np.float32
        lo, hi = (self.lo32, self.hi32) if f32 else (self.lo, self.hi)
        if self.lo == 0:
            zero = errors == 0
            self.below += int(np.count_nonzero(zero))
            inside = values <= hi
            inside &= ~zero
            return inside
        inside = values >= lo
        self.below += values.shape[0] - int(np.count_nonzero(inside))
        inside &= values <= hi
        return inside

    def keep(self, exact: np.ndarray) -> None:
        self.kept += exact.shape[0]
        if self.kept > self.cap:
            self.failed, self.parts = True, []
        elif exact.shape[0]:
            self.parts.append(exact.copy())

    def add_zeros(self, n: int) -> None:
        self.below += n  # below a window starting above 0; the exact zeros of one at 0

    def values(self) -> dict[int, float] | None:
        """The float64 values at the wanted ranks, or None when the window missed them."""
        if self.failed:
            return None
        kept = np.concatenate(self.parts) if self.parts else np.zeros(0)
        low_bound = -math.inf if self.lo == 0 else self.lo / (1 - SLACK) + TINY
        high_bound = self.hi / (1 + SLACK) - TINY if math.isfinite(self.hi) else math.inf
        inner = sorted({r - self.below for r in self.ranks if r >= self.below})
        if inner and inner[-1] >= kept.shape[0]:
            return None
        if inner:
            kept.partition(inner)
        found: dict[int, float] = {}
        for rank in self.ranks:
            if rank < self.below:
                if self.lo != 0:
                    return None
                found[rank] = 0.0
                continue
            value = float(kept[rank - self.below])
            if not low_bound <= value <= high_bound:
                return None
            found[rank] = value
        return found


def window_for(sample: np.ndarray, q: float, ranks: tuple[int, int], cap: int) -> Window:
    """A window for the ranks of quantile q, from a sample of the values (reordered)."""
    size = sample.shape[0]
    if not size:
        return Window(ranks, 0.0, math.inf, cap)
    spread = _SIGMAS * math.sqrt(q * (1 - q) * size) + 2
    first = math.floor(q * (size - 1) - spread)
    last = math.ceil(q * (size - 1) + spread)
    inner = [i for i in (first, last) if 0 < i < size - 1]
    if inner:
        sample.partition(inner)
    lo = 0.0 if first <= 0 else float(sample[first]) * (1 - 4 * SLACK)
    hi = math.inf if last >= size - 1 else float(sample[last]) * (1 + 4 * SLACK) + TINY
    return Window(ranks, lo, hi, cap)


def sample_positions(n: int, size: int) -> np.ndarray:
    """`size` positions spread over range(n): one at random in each of `size` strata."""
    if size >= n:
        return np.arange(n)
    starts = np.arange(size, dtype=np.int64) * n // size
    widths = np.diff(np.append(starts, n))
    rng = np.random.default_rng(0)
    return starts + (rng.random(size) * widths).astype(np.int64)
