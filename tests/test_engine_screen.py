"""The float32 screen decides failing chunks too: its mismatch counts, maxima and margins
against the plain float64 path and tests/reference.py, on data at the tolerance's edge."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_trtcompare import Tolerance, compare_outputs
from pytest_trtcompare.engine.tuning import TUNING

from .reference import reference_verdict
from .results import ROUNDED, flat

# the float32 screen on these tests' small data too (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("screen_small_outputs")


_NARROW = [np.float16, np.float32, ml_dtypes.bfloat16]


@st.composite
def edge_pairs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, Tolerance]:
    """expected, and actual off by about the allowed error: many elements within ulps of it."""
    tol = Tolerance(
        atol=draw(st.sampled_from([1e-30, 1e-20, 1e-5, 1e-3, 0.5])),
        rtol=draw(st.sampled_from([0.0, 1e-5, 1e-3, 1e-2, 1.0])),
        rule=draw(st.sampled_from(["polygraphy", "allclose"])),
        check=draw(st.sampled_from(["elemwise", "max", "median", "quantile"])),
        quantile=draw(st.sampled_from([0.5, 0.9, 0.99])),
        nan_equal=True,
    )
    size = draw(st.integers(1, 60))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    e_dtype, a_dtype = draw(st.sampled_from(_NARROW)), draw(st.sampled_from(_NARROW))
    expected = rng.standard_normal(size) * draw(st.sampled_from([1e-3, 1.0, 100.0]))
    expected[rng.random(size) < 0.2] = 0.0
    expected = expected.astype(e_dtype)
    e64 = expected.astype(np.float64)
    if tol.rule == "allclose":
        allowed = tol.atol + tol.rtol * np.abs(e64)
    else:
        allowed = np.maximum(tol.atol, tol.rtol * np.where(e64 == 0, 2.2e-16, np.abs(e64)))
    factor = rng.choice([0.0, 0.5, 1 - 1e-7, 1.0, 1 + 1e-7, 1 + 1e-6, 2.0, 1e6], size)
    sign = rng.choice([-1.0, 1.0], size)
    with np.errstate(over="ignore"):
        actual = (e64 + sign * factor * allowed).astype(a_dtype)
    if draw(st.booleans()):  # NaN pairs excused by nan_equal
        both = rng.random(size) < 0.2
        actual[both], expected[both] = np.nan, np.nan
    return actual, expected, tol


def _fields(out):
    return flat(out, ROUNDED)


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(TUNING, "chunk_elements", 7)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=edge_pairs())
def test_screened_counts_and_figures_are_float64s(tiny, monkeypatch, case):
    actual, expected, tol = case
    fast = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    with monkeypatch.context() as patch:
        patch.setattr(TUNING, "screen", False)
        plain = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    passed, mismatches, _ = reference_verdict(actual, expected, tol)
    assert (fast.passed, fast.mismatches) == (passed, mismatches)
    if fast.passed:  # a passing margin stays the screen's float32 estimate
        assert fast.margin == pytest.approx(plain.margin, rel=1e-5)
        object.__setattr__(fast, "margin", plain.margin)
    assert repr(_fields(fast)) == repr(_fields(plain))


def test_allclose_allowed_error_at_zero_expected_has_no_epsilon():
    """rtol * eps (Polygraphy's stand-in for |e| = 0) can dwarf a tiny atol: not in allclose."""
    actual = np.array([1e-20, 1.0], np.float32)
    expected = np.array([0.0, 1.0], np.float32)
    out = compare_outputs({"o": actual}, {"o": expected}, atol=1e-30, rtol=1e-3, rule="allclose")
    assert (out.outputs["o"].passed, out.outputs["o"].mismatches) == (False, 1)


@pytest.mark.parametrize("scale", [1.0, 1e19, 1e37, 3e38])
def test_float32_sums_that_would_overflow_take_float64(monkeypatch, scale):
    """Squares of values near 1e38 overflow float32: means and cosine stay float64's."""
    expected = (np.linspace(-1, 1, 1000) * scale).astype(np.float32)
    actual = expected * np.float32(0.5)  # fails everywhere
    fast = compare_outputs({"o": actual}, {"o": expected}).outputs["o"]
    with monkeypatch.context() as patch:
        patch.setattr(TUNING, "screen", False)
        plain = compare_outputs({"o": actual}, {"o": expected}).outputs["o"]
    assert fast.cosine_similarity == pytest.approx(plain.cosine_similarity, rel=1e-9)
    assert fast.mean_abs_error == pytest.approx(plain.mean_abs_error, rel=1e-5)
    assert repr(_fields(fast)) == repr(_fields(plain))
