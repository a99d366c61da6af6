"""One output's comparison: one loop over its chunks, feeding the statistics.

`Pair` makes each chunk (`chunks`: equal, float32-screened or float64); `scan` feeds the
statistics of every comparison (`when = "scanned"`) and, from the first failing chunk on
(or from the start, when a check statistic or the caller wants it), the failure report's
(`when = "reported"`, `Report`), so a failing output's report costs no second reading of the
chunks after its first mismatch; `Report.finish` adds the chunks before it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .accumulators import Cosine, Extremes, Means, Verdict
from .arrays import Kind, is_torch_tensor
from .chunks import Arithmetic, Equality, ErrorChunk
from .decades import Decades
from .figures import Required, Worst
from .quantiles import Quantiles, sample_positions
from .screen import Screen, applies
from .statistic import STATISTICS, Statistic, computed, register_statistic, updated
from .tensors import TorchArithmetic, TorchEquality, chunk_elements
from .tolerance import Tolerance
from .tuning import TUNING

__all__ = ["Pair", "Report", "scan"]

_FLOAT32_MAX = float(np.finfo(np.float32).max)


class Pair:
    """The flattened pair and how its chunks are made."""

    def __init__(
        self, actual: Any, expected: Any, kinds: tuple[Kind, Kind], tol: Tolerance
    ) -> None:
        self.a, self.e = actual.reshape(-1), expected.reshape(-1)
        self.n = int(self.a.shape[0])
        self.kinds, self.tol = kinds, tol
        self.torch = is_torch_tensor(self.a)  # both sides are tensors on one device (`tensors`)
        self.size = max(1, min(self.n, chunk_elements(self.a)))
        self.arithmetic = self._arithmetic(self.size)
        self.screen = (
            Screen(tol, self.arithmetic, self.size)
            if not self.torch
            and self.n >= TUNING.screen_min
            and applies(self.a.dtype, self.e.dtype, tol)
            else None
        )
        #: the pair's float64 chunk, while it is all of the pair and its buffers hold it
        self.whole_chunk: ErrorChunk | None = None
        self._equality: Equality | TorchEquality = (
            TorchEquality(self.a.dtype, self.e.dtype, tol)
            if self.torch
            else Equality(self.a.dtype, self.e.dtype, tol, self.size)
        )
        self._equal: dict[int, ErrorChunk] = {}  # equal chunks by start: not compared again

    def _arithmetic(self, size: int) -> Any:
        if self.torch:
            return TorchArithmetic(*self.kinds, self.tol)
        return Arithmetic(*self.kinds, self.tol, size)

    @property
    def windows(self) -> bool:
        """Whether the order statistics place a sample's windows (numpy, large outputs);
        else they select exactly (numpy; torch: each wanted rank, `kthvalue`)."""
        return not self.torch and 0 < self.n >= TUNING.window_min

    def starts(self, stop: int | None = None) -> range:
        return range(0, self.n if stop is None else stop, self.size)

    def chunk(self, start: int, exact: bool = False, ratio: bool = True) -> ErrorChunk:
        """The chunk at `start`: equal, else float32 where the screen takes it (not
        `exact`), else float64."""
        known = self._equal.get(start)
        if known is not None:
            return known
        a, e = self.a[start : start + self.size], self.e[start : start + self.size]
        made = self._equality.equal(a, e, start)
        if made is not None:
            self._equal[start] = made
            return made
        if self.screen is not None and not exact and ratio:
            made = self.screen.chunk(a, e, start)
            if made is not None:
                return made
        computed: ErrorChunk = self.arithmetic.compute(a, e, start, ratio)
        computed.narrow = self.screen is not None
        # the arithmetic's buffers hold this chunk until its next one; whole, of every
        # element, with ratios: `elements` reads its figures there
        whole = self.n <= self.size and self.screen is None and ratio
        self.whole_chunk = computed if whole and computed.positions is None else None
        return computed

    def remake(self, start: int) -> ErrorChunk:
        """A float32 chunk made again (for the maxima's last look)."""
        assert self.screen is not None
        a, e = self.a[start : start + self.size], self.e[start : start + self.size]
        made = self.screen.chunk(a, e, start)
        assert made is not None  # the same chunk passed the screen before
        return made

    def elements(self, flats: Iterable[int]) -> dict[int, tuple[Any, Any, float, float, float]]:
        """(actual, expected, abs error, rel error, ratio) of the elements at flat indices
        `flats`, errors NaN for a NaN error. The errors are read off the pair's float64
        chunk when it is the whole pair and was made last, else computed in one chunk of
        those elements: each figure is an elementwise float64 operation, so the numbers are
        the same; a tensor's come to the host in one transfer each."""
        wanted = sorted(set(flats))
        if not wanted:
            return {}
        chunk = self.whole_chunk
        if chunk is not None:
            rows = [
                (flat, chunk.abs_err[flat], chunk.rel_err[flat], chunk.ratio[flat])
                for flat in wanted
            ]
        else:
            chunk = self._arithmetic(len(wanted)).compute(self.a[wanted], self.e[wanted], 0)
            kept = range(len(wanted)) if chunk.positions is None else chunk.positions.tolist()
            errors = (chunk.abs_err.tolist(), chunk.rel_err.tolist(), chunk.ratio.tolist())
            rows = [(wanted[i], *figures) for i, *figures in zip(kept, *errors, strict=True)]
        found = {flat: (float(d), float(r), float(q)) for flat, d, r, q in rows}
        nan = (math.nan, math.nan, math.nan)
        sides = zip(wanted, _values(self.a, wanted), _values(self.e, wanted), strict=True)
        return {flat: (a, e, *found.get(flat, nan)) for flat, a, e in sides}

    def float64_chunks(self) -> Iterator[ErrorChunk]:
        for start in self.starts():
            yield self.chunk(start, exact=True, ratio=False)

    def sample(self) -> Iterator[ErrorChunk]:
        """float64 errors of `TUNING.sample` positions spread over the pair (in its own buffers)."""
        positions = sample_positions(self.n, TUNING.sample)
        arithmetic = self._arithmetic(self.size)
        for start in range(0, positions.shape[0], self.size):
            at = positions[start : start + self.size]
            yield arithmetic.compute(self.a[at], self.e[at], 0, ratio=False)


def _values(values: Any, at: list[int]) -> list[Any]:
    """The values at flat indices `at` as Python numbers (ml_dtypes' as float): a tensor's
    in one transfer."""
    if not isinstance(values, np.ndarray):
        found: list[Any] = values[at].tolist()
        return found
    if values.dtype.kind == "V":
        return [float(values[i]) for i in at]
    return [values[i].item() for i in at]


class Report:
    """The failure report's statistics (`when = "reported"`): nothing is made before
    `begin`, and they are fed from there on (the chunks before it at `finish`)."""

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.began_at: int | None = None
        self.statistics: list[Statistic] = []
        self._figures: dict[str, Any] | None = None

    @property
    def active(self) -> bool:
        return self.began_at is not None

    def begin(self, start: int) -> None:
        """Accumulate from flat index `start` (a chunk boundary) on."""
        elemwise = self.pair.tol.check == "elemwise"  # Required: "would pass with atol ..."
        wanted = [s for s in STATISTICS if s.when == "reported" and (elemwise or s is not Required)]
        self.statistics = [statistic.for_pair(self.pair) for statistic in wanted]
        self.quantiles = next(s for s in self.statistics if isinstance(s, Quantiles))
        self.began_at = start

    def add(self, chunk: ErrorChunk) -> None:
        for statistic in self.statistics:
            updated(statistic, chunk)

    def whole_next(self, chunk: ErrorChunk, expected: bool) -> bool:
        """Whether the next chunk is cheaper made in float64 at once: this float32 chunk's
        errors tied, so a figure computed it whole (with windows: the order statistics
        take float32 too), or this whole one filled a window."""
        if chunk.equal:
            return expected
        if not chunk.exact:
            return chunk.whole is not None and bool(self.quantiles.windows)
        return expected and self.quantiles.dense

    def finish(self) -> dict[str, Any]:
        """The figures, once the chunks before `begin`'s are added."""
        if self._figures is None:
            if self.began_at is None:
                self.begin(self.pair.n)
            with np.errstate(all="ignore"):
                for start in self.pair.starts(self.began_at):
                    self.add(self.pair.chunk(start))
                self._figures = computed(self.statistics)
        return self._figures


#: The engine's statistics, registered as a user's is, in the order they are fed: `Verdict`
#: first, it tells where the report begins (whose statistics are fed before the others);
#: `Worst` first of the report's: where float32 errors tie, it computes the chunk whole.
for _statistic in (Verdict, Extremes, Means, Cosine, Worst, Decades, Quantiles, Required):
    register_statistic(_statistic)


def _plain(chunk: ErrorChunk) -> bool:
    """A float64 chunk the screen would have taken whole: no NaN, Inf or huge errors."""
    special = chunk.nan_actual or chunk.nan_expected or chunk.inf_actual or chunk.inf_expected
    return not special and (
        not chunk.abs_err.shape[0] or chunk.abs_err[chunk.argmax(0)] < _FLOAT32_MAX
    )


def scan(pair: Pair, report: Report | None = None) -> dict[str, Any]:
    """One pass over the pair: the figures of every statistic `when = "scanned"`. `report`
    is fed from its first failing chunk on (or from where the caller began it)."""
    verdict, *others = statistics = [s.for_pair(pair) for s in STATISTICS if s.when == "scanned"]
    assert isinstance(verdict, Verdict)
    expect_whole = False  # the last float32 chunk needed float64 whole: so may this one
    with np.errstate(all="ignore"):  # float32 sums that overflow take float64's
        for start in pair.starts():
            chunk = pair.chunk(start, exact=expect_whole)
            if expect_whole and not (chunk.equal or _plain(chunk)):
                expect_whole = False  # NaN, Inf or huge errors: the screen decides again
                chunk = pair.chunk(start)
            updated(verdict, chunk)
            if report is not None:
                if not report.active and verdict.failing:
                    report.begin(start)
                if report.active:
                    report.add(chunk)
                    expect_whole = report.whole_next(chunk, expect_whole)
            for statistic in others:  # after the report's, which may compute it whole
                updated(statistic, chunk)
        return computed(statistics)  # (equal chunks' squares may overflow)
