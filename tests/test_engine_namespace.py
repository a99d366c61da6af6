"""The statistics are written against a chunk's array namespace: fed torch tensors (CPU
here; the device path of issue 24), every figure is the one numpy's chunks give."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_trtcompare import Statistic, Tolerance
from pytest_trtcompare.engine.arrays import dtype_kind
from pytest_trtcompare.engine.chunks import Arithmetic, ErrorChunk
from pytest_trtcompare.engine.statistic import STATISTICS

from .strategies import output_pairs, tolerances

torch = pytest.importorskip("torch")
array_api_compat = pytest.importorskip("array_api_compat")


def _on_torch(chunk: ErrorChunk) -> ErrorChunk:
    """The same chunk with torch tensors for arrays."""

    def tensor(values):
        return torch.from_numpy(np.array(values))

    return dataclasses.replace(
        chunk,
        abs_err=tensor(chunk.abs_err),
        rel_err=tensor(chunk.rel_err),
        ratio=tensor(chunk.ratio),
        expected_abs=tensor(chunk.expected_abs),
        cosine=tuple(tensor(part) for part in chunk.cosine),
        positions=None if chunk.positions is None else tensor(chunk.positions),
        xp=array_api_compat.array_namespace(torch.zeros(0)),
    )


class _Pair:
    """What `for_pair` reads of engine/scan.py's `Pair`: the chunks are made here."""

    def __init__(self, chunks: list[ErrorChunk], tol: Tolerance) -> None:
        self.tol, self.n, self.windows = tol, 0, False  # numpy's order statistics: selection
        self.float64_chunks = lambda: iter(chunks)
        self.remake = lambda start: None


def _figures(chunks: list[ErrorChunk], tol: Tolerance) -> dict[str, object]:
    """Every registered statistic's figures; the rounded ones' sums, which are the same up to
    the order of summation (the cosine itself, from them, cancels where |a| and |e| differ
    by orders of magnitude)."""
    statistics = [statistic.for_pair(_Pair(chunks, tol)) for statistic in STATISTICS]
    with np.errstate(all="ignore"):  # as scan feeds them
        for chunk in chunks:
            for statistic in statistics:
                statistic.update(chunk)
    return {type(s).__name__: sums(s) if s.rounded else s.compute() for s in statistics}


def sums(statistic: Statistic) -> tuple[float, ...]:
    """A rounded statistic's state: its floats, the sums its figures come from."""
    return tuple(v for v in vars(statistic).values() if type(v) is float)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=output_pairs(), tol=tolerances, size=st.integers(1, 9))
def test_accumulators_give_numpys_figures_on_torch_tensors(pair, tol, size):
    actual, expected = (x.reshape(-1) for x in pair)
    kinds = (dtype_kind(actual.dtype), dtype_kind(expected.dtype))
    chunks = []
    for start in range(0, actual.shape[0], size):
        one = Arithmetic(*kinds, tol, size)  # a chunk's arrays are its computer's buffers
        part = slice(start, start + size)
        chunks.append(one.compute(actual[part], expected[part], start))
    on_numpy = _figures(chunks, tol)
    on_torch = _figures([_on_torch(chunk) for chunk in chunks], tol)
    for summed in (s.__name__ for s in STATISTICS if s.rounded):  # up to the order of sums
        found = on_torch.pop(summed), on_numpy.pop(summed)
        assert found[0] == pytest.approx(found[1], rel=1e-12, nan_ok=True)
    assert repr(on_torch) == repr(on_numpy)
