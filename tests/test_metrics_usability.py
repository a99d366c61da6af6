"""Metric checks as a new user meets them: ini threshold=, keyword fields with lists, NaN and
the statistics line, summary digits, advice after metric-only failures, small messages, and
kl / top1 on outputs without a last axis to speak of."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_trtcompare.errors import ToleranceError
from pytest_trtcompare.session.settings import (
    parse_tolerance_fields,
)

from .pytester_helpers import run


def _pair(noise: float = 0.05, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    expected = rng.standard_normal((4, 50))
    return expected + noise * rng.standard_normal(expected.shape), expected


def _no_crash(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text
    assert "Traceback" not in text


NOISY = """
import numpy as np

rng = np.random.default_rng(0)
e = {"y": rng.standard_normal((4, 50))}
a = {"y": e["y"] + 0.05 * rng.standard_normal((4, 50))}  # cosine about 0.9988

def test_noisy(compare):
    compare(a, e)
"""


# 1. ini threshold=


def test_ini_threshold_field_is_a_number():
    assert parse_tolerance_fields("check=cosine threshold=0.99", "here") == {
        "check": "cosine",
        "threshold": 0.99,
    }
    with pytest.raises(ToleranceError, match=r"^here: threshold='high': could not convert"):
        parse_tolerance_fields("check=cosine threshold=high", "here")


def test_every_numeric_field_is_converted_from_ini_text():
    text = "atol=0.5 rtol=0.25 quantile=0.5 index_tolerance=2 nan_equal=yes inf_equal=no"
    assert parse_tolerance_fields(text, "here") == {
        "atol": 0.5,
        "rtol": 0.25,
        "quantile": 0.5,
        "index_tolerance": 2,
        "nan_equal": True,
        "inf_equal": False,
    }


@pytest.mark.parametrize(("threshold", "passed"), [("0.99", True), ("0.9999", False)])
def test_ini_threshold_field_decides(pytester, threshold, passed):
    pytester.makeini(
        "[pytest]\ntrtcompare_tolerances =\n"
        f"    fp32: atol=1e-5 rtol=1e-5 check=cosine threshold={threshold}\n"
    )
    pytester.makepyfile(NOISY)
    result = run(pytester)
    if passed:
        result.assert_outcomes(passed=1)
    else:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*  FAILED cosine 0.998* < 0.9999 (margin *)"])
    _no_crash(result)
