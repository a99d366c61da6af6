"""The statistics are written against a chunk's array namespace: fed torch tensors (CPU
here; the device path of issue 24), every figure is the one numpy's chunks give."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_trtcompare import Tolerance
from pytest_trtcompare.engine.accumulators import Cosine, Extremes, Means, Verdict
from pytest_trtcompare.engine.arrays import dtype_kind
from pytest_trtcompare.engine.chunks import Arithmetic, ErrorChunk
from pytest_trtcompare.engine.decades import Decades
from pytest_trtcompare.engine.figures import Required, Worst
from pytest_trtcompare.engine.quantiles import Quantiles

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


def _figures(chunks: list[ErrorChunk], tol: Tolerance) -> dict[str, object]:
    verdict, extremes, means, cosine = Verdict(tol), Extremes(lambda start: None), Means(), Cosine()
    worst, decades, required = Worst(10), Decades(), Required(tol)
    quantiles = Quantiles(tol.quantile, 0, None, lambda: iter(chunks))  # numpy's: selection
    with np.errstate(all="ignore"):  # as scan feeds them
        for chunk in chunks:
            for statistic in (
                verdict,
                extremes,
                means,
                cosine,
                worst,
                decades,
                quantiles,
                required,
            ):
                statistic.update(chunk)
    return {
        "counts": verdict.compute(),
        "extremes": extremes.compute(),
        "means": means.compute(),
        # its sums: the same up to the summation order (the cosine itself, from them,
        # cancels where |a| and |e| differ by orders of magnitude)
        "cosine sums": (cosine.aa, cosine.ee, cosine.dd),
        "worst": worst.compute(),
        "histogram": decades.compute(),
        "order": quantiles.compute(),
        "required": required.compute(),
    }


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
    for summed in ("cosine sums", "means"):  # the same up to the order of summation
        sums = on_torch.pop(summed), on_numpy.pop(summed)
        assert sums[0] == pytest.approx(sums[1], rel=1e-12, nan_ok=True)
    assert repr(on_torch) == repr(on_numpy)
