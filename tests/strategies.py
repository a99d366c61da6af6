"""Hypothesis strategies: output pairs of every dtype mix, with NaN, Inf, zeros, extremes."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytest_trtcompare import Tolerance

FLOAT_DTYPES = [np.float16, np.float32, np.float64, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]
INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64]
ALL_DTYPES = [*FLOAT_DTYPES, *INT_DTYPES, np.bool_]

_POOL = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    1.0001,
    0.9999,
    1e-8,
    2.0,
    1e-3,
    65504.0,
    3e38,
    float("nan"),
    float("inf"),
    float("-inf"),
]

shapes = st.one_of(
    st.sampled_from([(), (0,), (1,), (0, 3)]),
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6),
)


def _floats_like(dtype: Any, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    elements = st.one_of(st.sampled_from(_POOL), st.floats(width=32), st.floats(width=64))
    base = hnp.arrays(np.float64, shape, elements=elements)
    return base.map(lambda a: _cast(a, dtype))


def _cast(values: np.ndarray, dtype: Any) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(dtype)


def arrays_of(dtype: Any, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    if dtype in FLOAT_DTYPES:
        return _floats_like(dtype, shape)
    return hnp.arrays(np.dtype(dtype), shape)


@st.composite
def output_pairs(draw: st.DrawFn, dtypes: list[Any] = ALL_DTYPES) -> tuple[np.ndarray, np.ndarray]:
    """(actual, expected): independent, or actual = expected plus noise of some scale."""
    shape = draw(shapes)
    a_dtype, e_dtype = draw(st.sampled_from(dtypes)), draw(st.sampled_from(dtypes))
    expected = draw(arrays_of(e_dtype, shape))
    if a_dtype in FLOAT_DTYPES and draw(st.booleans()):
        scale = draw(st.sampled_from([0.0, 1e-7, 1e-4, 1e-2, 1.0]))
        noise = draw(hnp.arrays(np.float64, shape, elements=st.floats(-1, 1)))
        with np.errstate(all="ignore"):
            actual = (expected.astype(np.float64) * (1 + scale * noise)).astype(a_dtype)
    else:
        actual = draw(arrays_of(a_dtype, shape))
    return actual, expected


tolerances = st.builds(
    Tolerance,
    atol=st.sampled_from([0.0, 1e-5, 1e-3, 1e-2, 0.5, 1.0, 100.0]),
    rtol=st.sampled_from([0.0, 1e-5, 1e-3, 1e-2, 0.5, 1.0, 100.0]),
    check=st.sampled_from(["elemwise", "max", "mean", "median", "quantile"]),
    quantile=st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0]),
    rule=st.sampled_from(["polygraphy", "allclose"]),
    nan_equal=st.booleans(),
    inf_equal=st.booleans(),
)
