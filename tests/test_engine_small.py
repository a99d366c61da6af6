"""Small outputs (under `TUNING.screen_min` elements) go to float64 at once, through the same
accumulators: the same result as the float32 screen gives them, but for the figures that the
screen only estimates (means, cosine, a passing output's margin), which are float64's."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from pytest_trtcompare import Tolerance, compare_outputs
from pytest_trtcompare.engine import scan
from pytest_trtcompare.engine.tuning import TUNING

from .test_engine_screen import edge_pairs

_ESTIMATES = ("mean_abs_error", "mean_rel_error", "margin", "cosine_similarity")


def _both(monkeypatch: pytest.MonkeyPatch, actual: np.ndarray, expected: np.ndarray, tol: object):
    small = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    with monkeypatch.context() as patch:
        patch.setattr(TUNING, "screen_min", 0)
        screened = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    return small, screened


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=edge_pairs())
def test_small_outputs_give_the_screens_result(monkeypatch, pair):
    actual, expected, tol = pair
    small, screened = _both(monkeypatch, actual, expected, tol)
    if screened.passed:  # a failing output's margin is float64's on both paths
        for name in _ESTIMATES:
            assert getattr(small, name) == pytest.approx(getattr(screened, name), rel=1e-5)
    for name in ("mean_abs_error", "mean_rel_error", "cosine_similarity", "margin"):
        object.__setattr__(screened, name, getattr(small, name))
    assert repr(dataclasses.asdict(small)) == repr(dataclasses.asdict(screened))


def test_the_small_path_takes_no_screen_and_its_report_reads_the_same(monkeypatch):
    rng = np.random.default_rng(3)
    expected = rng.standard_normal(300).astype(np.float32)
    actual = (expected + rng.standard_normal(300).astype(np.float32) * 1e-3).astype(np.float16)
    actual[7] += np.float16(0.5)  # fails
    tol = {"atol": 1e-2, "rtol": 1e-2}
    pair = scan.Pair(actual, expected, ("float", "float"), Tolerance(**tol))
    assert pair.screen is None
    small = compare_outputs(actual, expected, **tol)
    with monkeypatch.context() as patch:
        patch.setattr(TUNING, "screen_min", 0)
        screened = compare_outputs(actual, expected, **tol)
    assert not small.passed
    for verbosity in (0, 1, 2):
        assert small.report(verbosity) == screened.report(verbosity)
