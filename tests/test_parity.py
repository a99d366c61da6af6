"""Verdict parity with the peers users know: Polygraphy's simple comparator and numpy.

Cases are seeded (not hypothesis) so they are identical on every run: a verdict only
differs from a peer's exactly at a tolerance boundary, where the peer rounds in float32.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytest_trtcompare import Tolerance, compare_outputs

polygraphy_comparator = pytest.importorskip("polygraphy.comparator")

# Where Polygraphy's own arithmetic is right: it wraps uint64/int64 (no wide type) and turns
# 0/0 into NaN for integer references; those mixes are covered against tests/reference.py.
PARITY_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int32, np.uint8]
CHECKS = ["elemwise", "max", "mean", "median", "quantile"]
SCALES = [0.0, 1e-4, 1e-3, 1e-2, 0.3]


def _polygraphy_passed(actual, expected, tol: Tolerance) -> bool:
    from polygraphy.logger import G_LOGGER

    G_LOGGER.module_severity = G_LOGGER.CRITICAL
    simple = getattr(polygraphy_comparator, "SimpleCompareFunc", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if simple is None:
            simple = polygraphy_comparator.CompareFunc.simple
        func = simple(
            atol=tol.atol,
            rtol=tol.rtol,
            check_error_stat=tol.check,
            error_quantile=tol.quantile,
            infinities_compare_equal=True,
        )
        iteration = polygraphy_comparator.IterationResult
        with np.errstate(all="ignore"):
            result = func(
                iteration({"out": actual}, runner_name="actual"),
                iteration({"out": expected}, runner_name="expected"),
            )
    return bool(result["out"])


def _case(rng: np.random.Generator, a_dtype, e_dtype, scale: float, special: bool):
    shape = tuple(rng.integers(1, 6, size=rng.integers(1, 4)))
    if np.dtype(e_dtype).kind == "f":
        base = rng.standard_normal(shape) * rng.choice([0.01, 1.0, 100.0])
    else:
        info = np.iinfo(e_dtype)
        base = rng.integers(max(info.min, -100), min(info.max, 100) + 1, size=shape)
    expected = base.astype(e_dtype)
    noise = rng.standard_normal(shape) * scale * (1 + np.abs(base))
    with np.errstate(all="ignore"):
        if np.dtype(a_dtype).kind == "f":
            actual = (base + noise).astype(a_dtype)
        else:
            info = np.iinfo(a_dtype)
            actual = np.clip(np.rint(base + noise * 100), info.min, info.max).astype(a_dtype)
    if special and np.dtype(a_dtype).kind == "f" and np.dtype(e_dtype).kind == "f":
        flat_a, flat_e = actual.reshape(-1), expected.reshape(-1)
        i = rng.integers(flat_a.size)
        value = rng.choice([np.nan, np.inf, -np.inf])
        flat_a[i] = value
        if rng.random() < 0.5:
            flat_e[i] = value
    return actual, expected


def _parity_cases():
    rng = np.random.default_rng(20261121)
    for a_dtype, e_dtype in itertools.product(PARITY_DTYPES, repeat=2):
        for check in CHECKS:
            for _ in range(4):
                scale = float(rng.choice(SCALES))
                tol_value = float(rng.choice([1e-5, 1e-3, 1e-2, 0.1]))
                tol = Tolerance(
                    atol=tol_value,
                    rtol=float(rng.choice([tol_value, 0.0, 10 * tol_value])),
                    check=check,
                    quantile=float(rng.choice([0.5, 0.9, 0.99])),
                )
                yield (*_case(rng, a_dtype, e_dtype, scale, rng.random() < 0.25), tol)


PARITY_CASES = list(_parity_cases())


def test_parity_cases_cover_both_verdicts():
    verdicts = {compare_outputs({"out": a}, {"out": e}, t).passed for a, e, t in PARITY_CASES}
    assert verdicts == {True, False}
    assert len(PARITY_CASES) == len(PARITY_DTYPES) ** 2 * len(CHECKS) * 4


def test_same_verdicts_as_polygraphy_simple_compare():
    disagreements = []
    for actual, expected, tol in PARITY_CASES:
        ours = compare_outputs({"out": actual}, {"out": expected}, tol).passed
        theirs = _polygraphy_passed(actual, expected, tol)
        if ours != theirs:
            disagreements.append((actual.dtype, expected.dtype, tol, ours, theirs))
    assert disagreements == []


def _numpy_passed(actual, expected, tol: Tolerance) -> bool:
    try:
        np.testing.assert_allclose(
            actual, expected, rtol=tol.rtol, atol=tol.atol, equal_nan=tol.nan_equal
        )
    except AssertionError:
        return False
    return True


def test_same_verdicts_as_numpy_assert_allclose():
    disagreements = []
    for actual, expected, tol in PARITY_CASES:
        for nan_equal in (False, True):
            allclose = Tolerance(atol=tol.atol, rtol=tol.rtol, rule="allclose", nan_equal=nan_equal)
            ours = compare_outputs({"out": actual}, {"out": expected}, allclose).passed
            if ours != _numpy_passed(actual, expected, allclose):
                disagreements.append((actual.dtype, expected.dtype, allclose, ours))
    assert disagreements == []


_float64_values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1.0, 1.0 + 1e-9, -1.0, 1e-300, float("nan"), float("inf")]),
)


@given(
    data=st.data(),
    shape=hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=5),
    atol=st.sampled_from([0.0, 1e-9, 1e-5, 1e-2, 1.0]),
    rtol=st.sampled_from([0.0, 1e-9, 1e-5, 1e-2, 1.0]),
    nan_equal=st.booleans(),
)
def test_allclose_rule_is_numpy_on_float64(data, shape, atol, rtol, nan_equal):
    """In float64 numpy's arithmetic is ours, so every verdict must agree, boundaries too."""
    expected = data.draw(hnp.arrays(np.float64, shape, elements=_float64_values))
    actual = data.draw(hnp.arrays(np.float64, shape, elements=_float64_values))
    tol = Tolerance(atol=atol, rtol=rtol, rule="allclose", nan_equal=nan_equal)
    with np.errstate(all="ignore"):
        theirs = _numpy_passed(actual, expected, tol)
    assert compare_outputs({"o": actual}, {"o": expected}, tol).passed == theirs


def test_deliberate_difference_uint64_does_not_wrap():
    """Polygraphy subtracts uint64 without a wide type: 0 - 1 wraps to 1.8e19 and fails."""
    actual, expected = np.array([0], dtype=np.uint64), np.array([1], dtype=np.uint64)
    tol = Tolerance(atol=2.0, rtol=0.0)
    assert _polygraphy_passed(actual, expected, tol) is False
    result = compare_outputs({"out": actual}, {"out": expected}, tol)
    assert result.passed
    assert result.outputs["out"].max_abs_error == 1.0
