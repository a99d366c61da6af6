"""The statistics of one output, each an accumulator fed chunk by chunk.

Every statistic has the same small interface (`statistic.Statistic`'s): `update(chunk)`
for each ErrorChunk (equal, float64 or float32; see `chunks`), `merge(other)` for the same
statistic of the chunks after them, `compute()` for its figures. Each is written once,
against float64 errors; a float32 chunk only narrows which elements it must `refine`.
The ones here decide a verdict and describe a passing output; `figures` holds those of a
failure report.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .chunks import ErrorChunk, dot, mismatch_mask, namespace_of, total, zero_unless
from .tolerance import Tolerance

#: A float32 ratio this far from 1 is surely on its side of 1 (it is within ~1e-7 of exact).
_SCREEN_BAND = 1e-5
#: A float64 chunk whose largest ratio stays below this holds no mismatch: its exact
#: per-element verdict is skipped (the ratio is a few ulps from exact).
_SURELY_WITHIN = 1.0 - 1e-12
#: Below the smallest normal float64, allowed errors lose precision: no skipping.
_TINY = float(np.finfo(np.float64).tiny)


class Accumulator(Protocol):
    """A statistic: fed every chunk of the pair once, in any order (`update`), then read
    (`compute`, under np.errstate(all="ignore"): sums of float32 squares may overflow, and
    then it takes float64's). `merge` adds the same statistic of the chunks that follow
    (the second half of the pair): the two halves give the figures of the whole."""

    def update(self, chunk: ErrorChunk) -> None: ...

    def merge(self, other: Any) -> None: ...

    def compute(self) -> object: ...


@dataclass
class Counts:
    """The verdict's counts: compared elements, mismatches, NaN/Inf, and the margin."""

    compared: int = 0
    mismatches: int = 0  # out of tolerance by the elementwise rule, NaN errors excluded
    nan_errors: int = 0
    nan_actual: int = 0
    nan_expected: int = 0
    inf_actual: int = 0
    inf_expected: int = 0
    nan_positions_differ: bool = False
    margin: float = 0.0  # largest error / allowed error


class Verdict:
    """Counts and the elementwise verdict; `failing` tells whether the last chunk failed."""

    def __init__(self, tol: Tolerance) -> None:
        self.counts = Counts()
        self.tol = tol
        self.failing = False

    def update(self, chunk: ErrorChunk) -> None:
        c = self.counts
        c.compared += chunk.compared
        special = chunk.nan_actual or chunk.nan_expected or chunk.inf_actual or chunk.inf_expected
        if special:  # (NaN errors come with NaN values)
            c.nan_errors += chunk.nan_errors
            c.nan_actual += chunk.nan_actual
            c.nan_expected += chunk.nan_expected
            c.inf_actual += chunk.inf_actual
            c.inf_expected += chunk.inf_expected
            c.nan_positions_differ |= chunk.nan_positions_differ
        if chunk.equal:  # every error 0
            self.failing = bool(chunk.nan_errors)
            return
        mismatches = 0
        margin = chunk.margin
        c.margin = max(c.margin, margin)
        if not chunk.abs_err.shape[0]:
            pass
        elif not chunk.exact:
            if margin > 1 - _SCREEN_BAND:
                mismatches = self._screened(chunk)
        else:
            mismatches = float64_mismatches(chunk, self.tol)
        c.mismatches += mismatches
        self.failing = bool(mismatches or chunk.nan_errors)

    def _screened(self, chunk: ErrorChunk) -> int:
        """float32 ratios (numpy's, of the screen) beyond the band decide; those within it
        are decided in float64."""
        ratio = chunk.ratio
        sure = int(np.count_nonzero(ratio > np.float32(1 + _SCREEN_BAND)))
        band = np.flatnonzero(
            (ratio >= np.float32(1 - _SCREEN_BAND)) & (ratio <= np.float32(1 + _SCREEN_BAND))
        )
        if not band.shape[0]:
            return sure
        refined = chunk.refine(band, dense=False)  # few; the report may want the chunk whole
        return sure + int(np.count_nonzero(mismatch_mask(refined, self.tol)))

    def merge(self, other: Verdict) -> None:
        mine, theirs = self.counts, other.counts
        for name in ("compared", "mismatches", "nan_errors", "nan_actual", "nan_expected"):
            setattr(mine, name, getattr(mine, name) + getattr(theirs, name))
        mine.inf_actual += theirs.inf_actual
        mine.inf_expected += theirs.inf_expected
        mine.nan_positions_differ |= theirs.nan_positions_differ
        mine.margin = max(mine.margin, theirs.margin)
        self.failing = other.failing

    def compute(self) -> Counts:
        return self.counts


def float64_mismatches(chunk: ErrorChunk, tol: Tolerance) -> int:
    """Elements of a float64 chunk out of tolerance: none when its largest ratio is surely
    within, else by the exact per-element verdict (always, for an atol below float64's
    smallest normal)."""
    if tol.atol >= _TINY and chunk.margin <= _SURELY_WITHIN:
        return 0
    return int(chunk.xp.count_nonzero(mismatch_mask(chunk, tol)))


@dataclass
class Extreme:
    """The largest error of a kind and its flat index (-1: nothing compared)."""

    value: float = 0.0
    at: int = -1

    def offer(self, value: float, at: int) -> None:
        """Keeps the larger value; the lower index on ties."""
        if at >= 0 and (
            self.at < 0 or value > self.value or (value == self.value and at < self.at)
        ):
            self.value, self.at = value, at


#: Chunks of float32 maxima: (start, first compared index, float32 max abs, max rel)
_Screened = list[tuple[int, int, float, float]]
#: A float32 chunk made again, by its start, for the maxima's last look
Remake = Callable[[int], ErrorChunk]


class Extremes:
    """The largest absolute and relative errors and where they are.

    |a - e| rounded to float32 is monotone in the exact difference, so the exact maximum is
    among the float32 maxima: `finish` refines those candidates once, in the chunks whose
    float32 maximum ties the overall one (the relative error with a small slack for its
    second rounding); a chunk already computed whole gives its float64 maxima at once.
    """

    _REL_SLACK = np.float32(1 - 1e-6)

    def __init__(self, remake: Remake) -> None:
        self.abs, self.rel = Extreme(), Extreme()
        self._screened: _Screened = []
        self._remake = remake

    def update(self, chunk: ErrorChunk) -> None:
        if chunk.equal:  # every error 0, at the first element that is not a NaN error
            at = chunk.start
            if chunk.nan_errors == chunk.size:
                at = -1
            elif chunk.nan_errors:  # the first that is not NaN
                side = chunk.side()
                if isinstance(side, np.ndarray):
                    at += int(np.argmin(np.isnan(side)))
                else:  # (torch has no argmin of bools)
                    at += int(
                        chunk.xp.argmax(chunk.xp.astype(~chunk.xp.isnan(side), chunk.xp.int8))
                    )
            self.abs.offer(0.0, at)
            self.rel.offer(0.0, at)
            return
        if not chunk.abs_err.shape[0]:
            return
        if not chunk.exact and chunk.whole is None:
            top_abs, top_rel = float(chunk.abs_err.max()), float(chunk.rel_err.max())
            self._screened.append((chunk.start, chunk.flat_index(0), top_abs, top_rel))
            return
        exact = chunk.whole_chunk()
        i, j = exact.argmax(0), exact.argmax(1)
        self.abs.offer(float(exact.abs_err[i]), exact.flat_index(i))
        self.rel.offer(float(exact.rel_err[j]), exact.flat_index(j))

    def merge(self, other: Extremes) -> None:
        self.abs.offer(other.abs.value, other.abs.at)
        self.rel.offer(other.rel.value, other.rel.at)
        self._screened += other._screened  # refined in `compute`, by the same pair's remake

    def compute(self) -> tuple[Extreme, Extreme]:
        if not self._screened:
            return self.abs, self.rel
        with np.errstate(all="ignore"):
            return self._finish_screened()

    def _finish_screened(self) -> tuple[Extreme, Extreme]:
        screened = self._screened
        best_abs = max(item[2] for item in screened)
        best_rel = max(item[3] for item in screened)
        if best_abs == 0:  # float32 |a - e| is 0 only for a == e: every error is exactly 0
            self.abs.offer(0.0, screened[0][1])
            self.rel.offer(0.0, screened[0][1])
            return self.abs, self.rel
        rel_floor = np.float32(best_rel) * self._REL_SLACK
        for start, _, top_abs, top_rel in screened:
            if top_abs < best_abs and top_rel < rel_floor:
                continue
            chunk = self._remake(start)
            if top_abs == best_abs:
                self._best(chunk, np.flatnonzero(chunk.abs_err == np.float32(best_abs)), 0)
            if top_rel >= rel_floor:
                self._best(chunk, np.flatnonzero(chunk.rel_err >= rel_floor), 1)
        return self.abs, self.rel

    def _best(self, chunk: ErrorChunk, candidates: np.ndarray, which: int) -> None:
        """Offers the float64 maximum of abs (0) or rel (1) errors among the candidates."""
        refined = chunk.refine(candidates)
        best = refined.argmax(which)
        values = refined.rel_err if which else refined.abs_err
        (self.rel if which else self.abs).offer(float(values[best]), refined.flat_index(best))


class Means:
    """Sums of the absolute and relative errors, for their means."""

    def __init__(self) -> None:
        self.sum_abs = self.sum_rel = 0.0
        self.compared = 0

    def update(self, chunk: ErrorChunk) -> None:
        self.compared += chunk.compared
        if chunk.equal or not chunk.abs_err.shape[0]:
            return
        sum_abs, sum_rel = total(chunk.abs_err), total(chunk.rel_err)
        if not (math.isfinite(sum_abs) and math.isfinite(sum_rel)) and not chunk.exact:
            whole = chunk.whole_chunk()  # float32 sums overflowed (values near 1e38)
            sum_abs, sum_rel = total(whole.abs_err), total(whole.rel_err)
        self.sum_abs += sum_abs
        self.sum_rel += sum_rel

    def merge(self, other: Means) -> None:
        self.sum_abs += other.sum_abs
        self.sum_rel += other.sum_rel
        self.compared += other.compared

    def compute(self) -> tuple[float, float]:
        if not self.compared:
            return 0.0, 0.0
        return self.sum_abs / self.compared, self.sum_rel / self.compared


class Cosine:
    """The cosine similarity over pairs where both values are finite, from |a|^2, |e|^2 and
    |a-e|^2 in float64 (float32 sums for passing float32 chunks: errors past the tolerance
    make 1 - cos hang on |a| - |e|, which float32 sums of squares lose)."""

    def __init__(self) -> None:
        self.aa = self.ee = self.dd = 0.0
        self._equal: list[ErrorChunk] = []
        self._all_equal = True

    def update(self, chunk: ErrorChunk) -> None:
        if chunk.equal:
            self._equal.append(chunk)
            return
        self._all_equal = False
        a, e, d = chunk.cosine
        narrow = not chunk.exact
        if narrow and chunk.margin > 1 - _SCREEN_BAND:  # may fail
            a, e, d = _widened(chunk)
            narrow = False
        sums = (dot(a, a), dot(e, e), dot(d, d))
        if narrow and not all(math.isfinite(x) for x in sums):
            a, e, d = chunk.whole_chunk().cosine  # float32 sums overflowed
            sums = (dot(a, a), dot(e, e), dot(d, d))
        elif narrow and _loses_precision(*sums):
            a, e, d = _widened(chunk)
            sums = (dot(a, a), dot(e, e), dot(d, d))
        self.aa += sums[0]
        self.ee += sums[1]
        self.dd += sums[2]

    def merge(self, other: Cosine) -> None:
        self.aa += other.aa
        self.ee += other.ee
        self.dd += other.dd
        self._equal += other._equal
        self._all_equal &= other._all_equal

    def compute(self) -> float:
        if self._equal and not self._all_equal:  # the equal chunks' squares count too
            squares = 0.0
            for c in self._equal:
                squares += _squares(c.side(), bool(c.nan_actual or c.inf_actual))
            self.aa += squares
            self.ee += squares
        return cosine_from_sums(self.aa, self.ee, self.dd)


#: A float32 chunk's sums give its cosine term to about this many times their own rounding
#: at most; beyond, the chunk's sums are taken in float64.
_COSINE_CONDITION = 8.0


def _loses_precision(aa: float, ee: float, dd: float) -> bool:
    """Whether float32 sums of squares lose the cosine: its term (|a-e|^2 - (|a| - |e|)^2) /
    (2 |a| |e|) cancels, and each sum's rounding is magnified by (|a-e|^2 + ||a|^2 - |e|^2|)
    / (2 |a| |e|): large where the norms differ far (a passing output with a loose atol,
    values near 0 on one side) or one side's squares underflow to 0."""
    return dd + abs(aa - ee) > _COSINE_CONDITION * 2.0 * math.sqrt(aa * ee)


def _widened(chunk: ErrorChunk) -> tuple[Any, Any, Any]:
    """A float32 chunk's cosine arrays in float64 (the chunk's float64 ones once computed)."""
    whole = chunk.whole
    if whole is not None and not chunk.nan_actual:
        return whole.cosine
    a, e, _ = chunk.cosine
    a, e = chunk.xp.astype(a, chunk.xp.float64), chunk.xp.astype(e, chunk.xp.float64)
    return a, e, a - e


def cosine_from_sums(aa: float, ee: float, dd: float) -> float:
    """cos = 1 - (|a-e|^2 - (|a| - |e|)^2) / (2 |a| |e|): no cancellation near 1, so even
    float32-accumulated sums resolve 1 - cos of 1e-10."""
    if aa == 0.0 and ee == 0.0:
        return 1.0
    if aa == 0.0 or ee == 0.0:
        return 0.0
    norm_a, norm_e = math.sqrt(aa), math.sqrt(ee)
    value = 1.0 - (dd - (norm_a - norm_e) ** 2) / (2.0 * norm_a * norm_e)
    return float(min(1.0, max(-1.0, value))) if math.isfinite(value) else math.nan


def _squares(values: Any, special: bool = False) -> float:
    """The float64 sum of squares; `special`: of the finite values (NaN or Inf among them)."""
    if not isinstance(values, np.ndarray):
        xp = namespace_of(values)
        wide = xp.astype(values, xp.float64)
        wide = xp.where(xp.isfinite(wide), wide, 0.0) if special else wide
        return dot(wide, wide)
    if special and values.dtype == np.float32:  # zeroed before widening: half the bytes
        values = zero_unless(values.copy(), np.isfinite(values))
        special = False
    as_float = values.astype(np.float64)
    if special:  # zeroed, not compressed: a random mask compresses slowly
        zero_unless(as_float, np.isfinite(as_float))
    return dot(as_float, as_float)
