"""The failure report's figures in one chunked pass, with bounded memory.

One pass gives the worst elements (a bounded heap fed by a per-chunk partial sort), the
log10 histogram of |error|, the "would pass with" tolerances and the median and quantile:
windows guessed on a sample keep the few float64 values around each wanted rank
(`_windows`). Narrow floats take that pass in float32, every figure refined in float64
(`_report32`). Where a window missed, `RankSelect` finishes the order statistics exactly
(usually two more passes). Bit-for-bit equal chunks are zeros, as in the scan, without
computing them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from . import _errors_chunked as _chunked
from . import _windows
from ._decades import Decades, top_counts
from ._equal import EqualChunks
from ._errors_chunked import Chunk, ChunkComputer
from ._figures import Worst as _Worst
from ._figures import required_tolerances as _required_tolerances
from ._report32 import Report32, place_chunk
from ._select import RankSelect, quantile_ranks
from .arrays import Kind
from .tolerance import Tolerance

__all__ = ["FailureDetails", "OrderStatistics", "ReportBuilder", "_Worst", "report_pass"]

#: Below this many elements the windows are not worth a sample (tests lower it).
WINDOW_MIN = 1 << 18


@dataclass(frozen=True)
class FailureDetails:
    """The report's extra figures: where the worst elements are and how errors spread."""

    worst: tuple[tuple[int, float], ...]  # (flat index, ratio), worst first
    histogram: tuple[tuple[int | None, int], ...]  # (floor(log10 |err|) or None for 0, count)
    required_atol: float  # smallest atol that passes with rtol unchanged
    required_rtol: float  # smallest rtol that passes with atol unchanged


@dataclass(frozen=True)
class OrderStatistics:
    median_abs: float
    median_rel: float
    quantile_abs: float
    quantile_rel: float


class _Chunks:
    """The pair's chunks: (start, actual, expected, whether bit-for-bit equal); an equal
    chunk's NaN errors (NaN pairs without nan_equal) are in `nan_errors` meanwhile."""

    def __init__(
        self, a: np.ndarray, e: np.ndarray, kinds: tuple[Kind, Kind], tol: Tolerance, size: int
    ):
        self.a, self.e = a, e
        self.size = max(1, min(a.shape[0], size))
        self.computer = ChunkComputer(*kinds, tol, capacity=self.size)
        self.equality = EqualChunks(a.dtype, e.dtype, self.size, tol.nan_equal, tol.inf_equal)
        self.nan_errors = 0
        #: start -> (stop, NaN errors) of chunks the scan found equal: not checked again
        self.known_equal: dict[int, tuple[int, int]] = {}

    def __iter__(self) -> Iterator[tuple[int, np.ndarray, np.ndarray, bool]]:
        return self.until(self.a.shape[0])

    def until(self, stop: int) -> Iterator[tuple[int, np.ndarray, np.ndarray, bool]]:
        for start in range(0, stop, self.size):
            end = min(start + self.size, stop)
            a, e = self.a[start:end], self.e[start:end]
            known = self.known_equal.get(start)
            if known is not None and known[0] == end:
                self.nan_errors = known[1]
                yield start, a, e, True
                continue
            equal = self.equality.enabled and self.equality.equal(a, e)
            self.nan_errors = self.equality.nan_errors if equal else 0
            yield start, a, e, equal


def _windows_from_sample(
    chunks: _Chunks, quantiles: tuple[float, ...], count: int
) -> list[tuple[str, _windows.Window]]:
    """Windows per (error kind, quantile); the ranks they serve are known at the end."""
    positions = _windows.sample_positions(chunks.a.shape[0], _windows.SAMPLE)
    parts: dict[str, list[np.ndarray]] = {"abs": [], "rel": []}
    for start in range(0, positions.shape[0], chunks.size):
        at = positions[start : start + chunks.size]
        chunk = chunks.computer.compute(chunks.a[at], chunks.e[at], 0, dots=False, ratio=False)
        parts["abs"].append(chunk.abs_err.copy())
        parts["rel"].append(chunk.rel_err.copy())
    cap = max(_windows.CAP_MIN, count // 16)
    found = []
    for kind, values in parts.items():
        sample = np.concatenate(values)
        found += [(kind, window) for window in _windows.windows_for(sample, quantiles, cap)]
    return found


def _select_exact(
    chunks: _Chunks, ranks: set[int], count: int, kinds: list[str]
) -> dict[str, RankSelect]:
    """The exact radix selection of `_select`, over float64 chunks (two or three passes)."""
    limit = chunks.a.shape[0] // 32
    selects = {kind: RankSelect(ranks, count, limit) for kind in kinds}
    while not all(s.done for s in selects.values()):
        for start, a, e, equal in chunks:
            if equal:
                for select in selects.values():
                    select.add_zeros(a.shape[0] - chunks.nan_errors)
                continue
            chunk = chunks.computer.compute(a, e, start, dots=False, ratio=False)
            for kind, select in selects.items():
                select.add(chunk.abs_err if kind == "abs" else chunk.rel_err)
        for select in selects.values():
            if not select.done:
                select.finish_round()
    return selects


class ReportBuilder:
    """The failure report's figures, accumulated chunk by chunk.

    The scan `begin`s it at its first failing chunk and `add`s every chunk from there on,
    handing over the float32 errors it has just computed, so a failing output's report
    costs no second reading of those chunks; `finish` adds the chunks before that one.
    Every figure is independent of the order chunks arrive in. Nothing is allocated
    before `begin`, so a passing comparison pays nothing for having a builder.
    """

    def __init__(
        self,
        actual: np.ndarray,
        expected: np.ndarray,
        kinds: tuple[Kind, Kind],
        tol: Tolerance,
        worst_count: int,
        float32: bool = False,
        chunk_elements: int | None = None,
    ) -> None:
        self._args = (actual.reshape(-1), expected.reshape(-1), kinds, tol)
        self._size = chunk_elements or _chunked.CHUNK_ELEMENTS
        self.tol = tol
        self.worst_count = worst_count
        self.float32 = float32
        self.began_at: int | None = None
        self.need = (0.0, 0.0)
        self._known_equal: dict[int, tuple[int, int]] = {}
        #: The chunk `add` was last given, in float64 with its cosine sums, when the report
        #: needed it whole; None otherwise.
        self.whole: Chunk | None = None

    def whole_chunk(self, start: int, a: np.ndarray, e: np.ndarray) -> Chunk | None:
        """The chunk in float64, to take the scan's exact path and be added whole, when
        the chunk before needed computing whole (tied errors); None otherwise."""
        fast = self.fast if self.active else None
        if fast is None or not fast.expect_whole:
            return None
        return fast.whole_chunk(a, e, start)

    def exact_maxima(self) -> dict[int, tuple[float, int, float, int]]:
        """Chunk start -> exact (max abs, its index, max rel, its index), for the chunks
        the report computed whole in float64."""
        return self.fast.maxima if self.active and self.fast is not None else {}

    def known_equal(self, start: int, stop: int, nan_errors: int) -> None:
        """The scan found chunk [start, stop) bit-for-bit equal: the chunks read again (those
        before `begin`'s, the radix selection's passes) take it as such, no bits compared."""
        self._known_equal[start] = (stop, nan_errors)

    @property
    def active(self) -> bool:
        return self.began_at is not None

    def begin(self, start: int) -> None:
        """Start accumulating at flat index `start` (a chunk boundary)."""
        self.chunks = _Chunks(*self._args, self._size)
        self.chunks.known_equal = self._known_equal
        self.worst, self.decades = _Worst(self.worst_count), Decades()
        n = self.chunks.a.shape[0]
        quantiles = tuple(dict.fromkeys((0.5, self.tol.quantile)))
        self.windows = (
            _windows_from_sample(self.chunks, quantiles, n) if n and n >= WINDOW_MIN else []
        )
        self.fast = (
            Report32(self.tol, self.chunks.computer, self.chunks.size)
            if self.float32 and self.windows
            else None
        )
        self.began_at = start

    @np.errstate(all="ignore")
    def add(
        self,
        start: int,
        a: np.ndarray,
        e: np.ndarray,
        equal: bool,
        screened: tuple[np.ndarray, ...] | None = None,
        whole: Chunk | None = None,
        exact: Chunk | None = None,
        nan_errors: int = 0,
    ) -> None:
        """Add one chunk; `screened`: its float32 (e, |a - e|, relative error, ratio);
        `whole`: the chunk as `whole_chunk` gave it; `exact`: the chunk as the scan's
        float64 path computed it (NaN or Inf, or wide types): not computed again;
        `nan_errors`: of an `equal` chunk, its NaN pairs that are errors (no nan_equal)."""
        self.whole = whole
        if whole is not None and self.fast is not None:
            got = self.fast.add_whole(
                whole, self.worst, self.decades, self.windows, self.tol.check == "elemwise"
            )
            self.need = (max(self.need[0], got[0]), max(self.need[1], got[1]))
            return
        if equal:
            zeros = a.shape[0] - nan_errors
            self.decades.zeros += zeros
            for _, window in self.windows:
                window.add_zeros(zeros)
            if nan_errors and self.worst.nan_may_enter(start):
                self.worst.add_nan_errors(np.flatnonzero(np.isnan(a)) + start)
            return
        tol, fast, windows = self.tol, self.fast, self.windows
        required = tol.check == "elemwise"
        best = self.need if required else None
        needs = (
            fast.add(a, e, start, self.worst, self.decades, windows, best, screened)
            if fast and exact is None
            else None
        )
        if needs is not None and fast is not None:
            self.whole = fast.whole()
        if needs is None:
            chunk = exact
            if chunk is None:
                chunk = self.chunks.computer.compute(a, e, start, dots=False)
            self.worst.add(chunk)
            self.decades.add(chunk.abs_err, top_counts(chunk.abs_err))
            place_chunk(windows, chunk)
            needs = _required_tolerances(chunk, tol) if required else (0.0, 0.0)
        self.need = (max(self.need[0], needs[0]), max(self.need[1], needs[1]))

    def finish(self, compared: int) -> tuple[FailureDetails, OrderStatistics]:
        """Add the chunks before `begin`'s, and read the figures."""
        if self.began_at is None:
            self.begin(self._args[0].shape[0])
        assert self.began_at is not None
        for start, a, e, equal in self.chunks.until(self.began_at):
            self.add(start, a, e, equal, nan_errors=self.chunks.nan_errors)
        details = FailureDetails(
            self.worst.ranked(), self.decades.histogram(), self.need[0], self.need[1]
        )
        if not compared:
            return details, OrderStatistics(0.0, 0.0, 0.0, 0.0)
        return details, self._order_statistics(compared)

    def _order_statistics(self, compared: int) -> OrderStatistics:
        qs = {q: quantile_ranks(compared, q)[:2] for q in (0.5, self.tol.quantile)}
        values: dict[str, dict[int, float]] = {"abs": {}, "rel": {}}
        missing = set() if self.windows else {"abs", "rel"}
        for kind, window in self.windows:
            found = window.values(qs[window.q])
            if found is None:
                missing.add(kind)
            else:
                values[kind].update(found)
        if missing:
            ranks = {rank for pair in qs.values() for rank in pair}
            selected = _select_exact(self.chunks, ranks, compared, sorted(missing))
            for kind, select in selected.items():
                values[kind] = select.values

        def quantile(kind: str, q: float) -> float:
            return _quantile(values[kind], compared, q)

        return OrderStatistics(
            median_abs=quantile("abs", 0.5),
            median_rel=quantile("rel", 0.5),
            quantile_abs=quantile("abs", self.tol.quantile),
            quantile_rel=quantile("rel", self.tol.quantile),
        )


def report_pass(
    actual: np.ndarray,
    expected: np.ndarray,
    a_kind: Kind,
    e_kind: Kind,
    tol: Tolerance,
    compared: int,
    worst_count: int,
    float32: bool = False,
) -> tuple[FailureDetails, OrderStatistics]:
    """Worst elements, histogram, sharper tolerances and order statistics of one pair, in
    a pass of its own (`float32`: the pair may take the float32 pass, `_screen32.applies`).
    """
    builder = ReportBuilder(actual, expected, (a_kind, e_kind), tol, worst_count, float32)
    return builder.finish(compared)


def _quantile(values: dict[int, float], count: int, q: float) -> float:
    """Linear-interpolation quantile (numpy's default) from the values at its ranks."""
    low, high, t = quantile_ranks(count, q)
    below, above = values[low], values[high]
    if t == 0 or below == above:
        return below
    if math.isinf(above):
        return math.inf
    return float(below + t * (above - below))
