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
from ._errors_chunked import ChunkComputer
from ._figures import Worst as _Worst
from ._figures import required_tolerances as _required_tolerances
from ._report32 import Report32
from ._select import RankSelect, quantile_ranks
from .arrays import Kind
from .tolerance import Tolerance

__all__ = ["FailureDetails", "OrderStatistics", "_Worst", "report_pass"]

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
    """The pair's chunks: (start, actual, expected, whether bit-for-bit equal)."""

    def __init__(self, a: np.ndarray, e: np.ndarray, kinds: tuple[Kind, Kind], tol: Tolerance):
        self.a, self.e = a, e
        self.size = max(1, min(a.shape[0], _chunked.CHUNK_ELEMENTS))
        self.computer = ChunkComputer(*kinds, tol, capacity=self.size)
        self.equality = EqualChunks(a.dtype, e.dtype, self.size)

    def __iter__(self) -> Iterator[tuple[int, np.ndarray, np.ndarray, bool]]:
        for start in range(0, self.a.shape[0], self.size):
            a, e = self.a[start : start + self.size], self.e[start : start + self.size]
            yield start, a, e, self.equality.enabled and self.equality.equal(a, e)


def _windows_from_sample(
    chunks: _Chunks, ranks: dict[float, tuple[int, int]], count: int
) -> list[tuple[str, _windows.Window]]:
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
        found += [(kind, _windows.window_for(sample, q, r, cap)) for q, r in ranks.items()]
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
                    select.add_zeros(a.shape[0])
                continue
            chunk = chunks.computer.compute(a, e, start, dots=False, ratio=False)
            for kind, select in selects.items():
                select.add(chunk.abs_err if kind == "abs" else chunk.rel_err)
        for select in selects.values():
            if not select.done:
                select.finish_round()
    return selects


@np.errstate(all="ignore")
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
    """Worst elements, histogram, sharper tolerances and order statistics of one pair.

    `float32`: the pair may take the float32 pass (`_screen32.applies`).
    """
    chunks = _Chunks(actual.reshape(-1), expected.reshape(-1), (a_kind, e_kind), tol)
    worst, decades = _Worst(worst_count), Decades()
    need_atol = need_rtol = 0.0
    required = tol.check == "elemwise"
    qs: dict[float, tuple[int, int]] = {}
    for q in (0.5, tol.quantile) if compared else ():
        low, high, _ = quantile_ranks(compared, q)
        qs[q] = (low, high)
    windows = (
        _windows_from_sample(chunks, qs, compared)
        if compared and chunks.a.shape[0] >= WINDOW_MIN
        else []
    )
    fast = Report32(tol, chunks.computer, chunks.size) if float32 and windows else None
    for start, a, e, equal in chunks:
        if equal:
            decades.zeros += a.shape[0]
            for _, window in windows:
                window.add_zeros(a.shape[0])
            continue
        best = (need_atol, need_rtol) if required else None
        needs = fast.add(a, e, start, worst, decades, windows, best) if fast else None
        if needs is None:
            chunk = chunks.computer.compute(a, e, start, dots=False)
            worst.add(chunk)
            decades.add(chunk.abs_err, top_counts(chunk.abs_err))
            for kind, window in windows:
                errors = chunk.abs_err if kind == "abs" else chunk.rel_err
                mask = window.members(errors, chunk.abs_err)
                if mask is not None:
                    window.keep(errors[mask])
            needs = _required_tolerances(chunk, tol) if required else (0.0, 0.0)
        need_atol, need_rtol = max(need_atol, needs[0]), max(need_rtol, needs[1])
    details = FailureDetails(worst.ranked(), decades.histogram(), need_atol, need_rtol)
    if not compared:
        return details, OrderStatistics(0.0, 0.0, 0.0, 0.0)
    values: dict[str, dict[int, float]] = {"abs": {}, "rel": {}}
    missing = set()
    for kind, window in windows:
        found = window.values()
        if found is None:
            missing.add(kind)
        else:
            values[kind].update(found)
    if not windows:
        missing = {"abs", "rel"}
    if missing:
        ranks = {rank for pair in qs.values() for rank in pair}
        selected = _select_exact(chunks, ranks, compared, sorted(missing))
        for kind, select in selected.items():
            values[kind] = select.values

    def quantile(kind: str, q: float) -> float:
        return _quantile(values[kind], compared, q)

    return details, OrderStatistics(
        median_abs=quantile("abs", 0.5),
        median_rel=quantile("rel", 0.5),
        quantile_abs=quantile("abs", tol.quantile),
        quantile_rel=quantile("rel", tol.quantile),
    )


def _quantile(values: dict[int, float], count: int, q: float) -> float:
    """Linear-interpolation quantile (numpy's default) from the values at its ranks."""
    low, high, t = quantile_ranks(count, q)
    below, above = values[low], values[high]
    if t == 0 or below == above:
        return below
    if math.isinf(above):
        return math.inf
    return float(below + t * (above - below))
