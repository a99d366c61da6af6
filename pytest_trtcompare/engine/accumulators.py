"""The statistics of one output, each a `Statistic` fed chunk by chunk.

Each is fed ErrorChunks (equal, float64 or float32; see `chunks`) and written once, against
float64 errors; a float32 chunk only narrows which elements it must `refine`. They are read
(`compute`) under np.errstate(all="ignore"): sums of float32 squares may overflow, and then
they take float64's. The ones here decide a verdict and describe a passing output; `figures`
holds those of a failure report.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .chunks import ErrorChunk, dot, mismatch_mask, namespace_of, total, zero_unless
from .statistic import Statistic
from .tolerance import Tolerance

#: A float32 ratio this far from 1 is surely on its side of 1 (it is within ~1e-7 of exact).
_SCREEN_BAND = 1e-5
#: A float64 chunk whose largest ratio stays below this holds no mismatch: its exact
#: per-element verdict is skipped (the ratio is a few ulps from exact).
_SURELY_WITHIN = 1.0 - 1e-12
#: Below the smallest normal float64, allowed errors lose precision: no skipping.
_TINY = float(np.finfo(np.float64).tiny)
#: The counts of NaN and Inf a chunk holds, and those the verdict sums over chunks
_SPECIAL = ("nan_errors", "nan_actual", "nan_expected", "inf_actual", "inf_expected")
_SUMMED = ("compared", "mismatches", *_SPECIAL)


class Verdict(Statistic):
    """Counts and the elementwise verdict (mismatches and the margin: the largest error
    over its allowed error); `failing` tells whether the last chunk failed."""

    figures = ("count", "mismatches", *_SPECIAL, "nan_positions_match", "margin")
    defaults: ClassVar = {**dict.fromkeys(figures[:-2], 0), "nan_positions_match": True}
    line = False

    def __init__(self, tolerance: Tolerance) -> None:
        super().__init__(tolerance)
        self.counts = dict.fromkeys(_SUMMED, 0)
        self.nan_positions_differ = False
        self.margin = 0.0
        self.failing = False

    def update(self, chunk: ErrorChunk) -> None:
        c = self.counts
        c["compared"] += chunk.compared
        special = chunk.nan_actual or chunk.nan_expected or chunk.inf_actual or chunk.inf_expected
        if special:  # (NaN errors come with NaN values)
            for name in _SPECIAL:
                c[name] += getattr(chunk, name)
            self.nan_positions_differ |= chunk.nan_positions_differ
        if chunk.equal:  # every error 0
            self.failing = bool(chunk.nan_errors)
            return
        mismatches = 0
        margin = chunk.margin
        self.margin = max(self.margin, margin)
        if not chunk.abs_err.shape[0]:
            pass
        elif not chunk.exact:
            if margin > 1 - _SCREEN_BAND:
                mismatches = self._screened(chunk)
        else:
            mismatches = float64_mismatches(chunk, self.tolerance)
        c["mismatches"] += mismatches
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
        return sure + int(np.count_nonzero(mismatch_mask(refined, self.tolerance)))

    def merge(self, other: Verdict) -> None:
        for name in _SUMMED:
            self.counts[name] += other.counts[name]
        self.nan_positions_differ |= other.nan_positions_differ
        self.margin = max(self.margin, other.margin)
        self.failing = other.failing

    def compute(self) -> dict[str, Any]:
        """NaN errors are mismatches, and make the margin infinite."""
        c = self.counts
        return dict(
            count=c["compared"] + c["nan_errors"],
            mismatches=c["mismatches"] + c["nan_errors"],
            **{name: c[name] for name in _SPECIAL},
            nan_positions_match=not self.nan_positions_differ,
            margin=math.inf if c["nan_errors"] else self.margin,
        )


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


class Extremes(Statistic):
    """The largest absolute and relative errors, and where they are (`greatest_abs`,
    `greatest_rel`: flat indices, -1 for none, which the comparison reads as elements);
    None where every error is NaN.

    |a - e| rounded to float32 is monotone in the exact difference, so the exact maximum is
    among the float32 maxima: `finish` refines those candidates once, in the chunks whose
    float32 maximum ties the overall one (the relative error with a small slack for its
    second rounding); a chunk already computed whole gives its float64 maxima at once.
    """

    figures = ("max_abs_error", "max_rel_error", "greatest_abs", "greatest_rel")
    defaults: ClassVar = dict.fromkeys(figures)
    record: ClassVar = {"max_abs_error": "max_abs", "max_rel_error": "max_rel"}
    line = False
    _REL_SLACK = np.float32(1 - 1e-6)

    def __init__(self, remake: Remake) -> None:
        self.abs, self.rel = Extreme(), Extreme()
        self._screened: _Screened = []
        self._remake = remake
        self._elements = 0  # (NaN errors included)

    @classmethod
    def for_pair(cls, pair: Any) -> Extremes:
        return cls(pair.remake)

    def update(self, chunk: ErrorChunk) -> None:
        self._elements += chunk.size
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
        self._elements += other._elements

    def compute(self) -> dict[str, Any]:
        if self._screened:
            with np.errstate(all="ignore"):
                self._finish_screened()
        none = self._elements and self.abs.at < 0  # every error NaN
        return dict(
            max_abs_error=None if none else self.abs.value,
            max_rel_error=None if none else self.rel.value,
            greatest_abs=self.abs.at,
            greatest_rel=self.rel.at,
        )

    def _finish_screened(self) -> None:
        screened, self._screened = self._screened, []
        best_abs = max(item[2] for item in screened)
        best_rel = max(item[3] for item in screened)
        if best_abs == 0:  # float32 |a - e| is 0 only for a == e: every error is exactly 0
            self.abs.offer(0.0, screened[0][1])
            self.rel.offer(0.0, screened[0][1])
            return
        rel_floor = np.float32(best_rel) * self._REL_SLACK
        for start, _, top_abs, top_rel in screened:
            if top_abs < best_abs and top_rel < rel_floor:
                continue
            chunk = self._remake(start)
            if top_abs == best_abs:
                self._best(chunk, np.flatnonzero(chunk.abs_err == np.float32(best_abs)), 0)
            if top_rel >= rel_floor:
                self._best(chunk, np.flatnonzero(chunk.rel_err >= rel_floor), 1)

    def _best(self, chunk: ErrorChunk, candidates: np.ndarray, which: int) -> None:
        """Offers the float64 maximum of abs (0) or rel (1) errors among the candidates."""
        refined = chunk.refine(candidates)
        best = refined.argmax(which)
        values = refined.rel_err if which else refined.abs_err
        (self.rel if which else self.abs).offer(float(values[best]), refined.flat_index(best))


class Means(Statistic):
    """The means of the absolute and relative errors (NaN errors left out)."""

    figures = ("mean_abs_error", "mean_rel_error")
    defaults: ClassVar = dict.fromkeys(figures, 0.0)
    line = False
    rounded = figures

    def __init__(self, tolerance: Any = None) -> None:
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

    def compute(self) -> dict[str, float]:
        count = max(1, self.compared)
        return dict(mean_abs_error=self.sum_abs / count, mean_rel_error=self.sum_rel / count)


class Cosine(Statistic):
    """The cosine similarity over pairs where both values are finite, from |a|^2, |e|^2 and
    |a-e|^2 in float64 (float32 sums for passing float32 chunks: errors past the tolerance
    make 1 - cos hang on |a| - |e|, which float32 sums of squares lose)."""

    figures = ("cosine_similarity",)
    defaults: ClassVar = {"cosine_similarity": 1.0}
    line = False
    rounded = figures

    def __init__(self, tolerance: Any = None) -> None:
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

    def compute(self) -> dict[str, float]:
        if self._equal and not self._all_equal:  # the equal chunks' squares count too
            squares = 0.0
            for c in self._equal:
                squares += _squares(c.side(), bool(c.nan_actual or c.inf_actual))
            self.aa += squares
            self.ee += squares
            self._equal = []
        return dict(cosine_similarity=cosine_from_sums(self.aa, self.ee, self.dd))


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
