"""Metric checks in the engine: Tolerance fields, sequences of tolerances, verdicts, margins,
the failure report."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_trtcompare import Tolerance, assert_outputs_close, compare_outputs
from pytest_trtcompare.engine.metrics import margin, verdict
from pytest_trtcompare.engine.tolerance import METRIC_DEFAULTS, METRICS
from pytest_trtcompare.engine.tolerance_table import ToleranceTable
from pytest_trtcompare.errors import ToleranceError


def _pair(noise: float = 0.05, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    expected = rng.standard_normal((8, 100)).astype(np.float32)
    return (expected + noise * rng.standard_normal(expected.shape)).astype(np.float32), expected


def test_defaults():
    assert {c: Tolerance(check=c).threshold for c in METRICS} == {
        "cosine": 0.997,
        "l2": 1e-5,
        "snr": 20.0,
        "psnr": 30.0,
        "kl": 1e-3,
        "top1": 0.99,
    }
    checks = (*METRICS, "fp64")  # fp64: the multiplier of the fp64 check (test_fp64_check.py)
    assert dict(METRIC_DEFAULTS) == {c: Tolerance(check=c).threshold for c in checks}
    assert Tolerance().threshold is None
    assert Tolerance(check="cosine").describe() == "cosine >= 0.997 (default)"
    assert Tolerance(check="snr", threshold=25).describe(sources=False) == "snr >= 25 dB"
    assert Tolerance(check="l2").describe(sources=False) == "l2 <= 1e-05"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"check": "cosine", "threshold": 1.5}, "threshold of check='cosine' must be in [-1, 1]"),
        ({"check": "l2", "threshold": -1.0}, "threshold of check='l2' must be finite and >= 0"),
        ({"check": "kl", "threshold": math.inf}, "threshold of check='kl' must be finite"),
        ({"check": "top1", "threshold": 2}, "threshold of check='top1' must be in [0, 1]"),
        ({"check": "snr", "threshold": math.nan}, "must be a finite number of dB"),
        ({"check": "psnr", "threshold": "30"}, "threshold must be a number, got '30' (str)"),
        ({"check": "cosine", "threshold": True}, "threshold must be a number"),
        ({"threshold": 0.9}, "threshold=0.9 applies to the metric checks"),
        ({"check": "cosin"}, "check='cosin' is not one of"),
    ],
)
def test_bad_thresholds_are_clear_errors(fields, message):
    with pytest.raises(ToleranceError, match=None) as info:
        Tolerance(**fields)
    assert message in str(info.value)


def test_replace_to_another_check_takes_its_default():
    assert Tolerance(check="cosine", threshold=0.5).replace(check="l2").threshold == 1e-5
    assert Tolerance(check="cosine", threshold=0.5).replace(check="mean").threshold is None
    assert Tolerance(check="cosine").replace(threshold=0.9).threshold == 0.9


def test_a_sequence_must_all_pass():
    actual, expected = _pair(0.05)
    loose = Tolerance(atol=1.0, rtol=1.0)
    assert compare_outputs({"y": actual}, {"y": expected}, loose).passed
    both = [loose, Tolerance(check="cosine", threshold=0.9999)]
    result = compare_outputs({"y": actual}, {"y": expected}, both)
    out = result.outputs["y"]
    assert not result.passed and out.base_passed and out.gated
    cosine = out.metric("cosine")
    assert cosine is not None and not cosine.passed
    assert out.margin == cosine.margin > 1
    assert cosine.value == pytest.approx(out.cosine_similarity, rel=1e-6)
    assert compare_outputs({"y": actual}, {"y": expected}, [loose, {"check": "cosine"}]).passed


def test_sequences_per_output_and_dict_fields():
    actual, expected = _pair(0.05)
    spec = {
        "": {"atol": 1.0, "rtol": 1.0},
        "y": [{"atol": 1.0}, {"check": "snr", "threshold": 60}],
    }
    result = compare_outputs({"y": actual, "z": actual}, {"y": expected, "z": expected}, spec)
    assert not result.outputs["y"].passed and result.outputs["z"].passed
    assert result.outputs["y"].tolerance.rtol == 1.0  # a mapping starts from the default


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([], "an empty sequence of tolerances"),
        ([Tolerance(), Tolerance(check="mean")], "got elemwise, mean"),
        ([Tolerance(check="l2"), {"check": "l2"}], "check 'l2' given twice"),
        ([Tolerance(), {"check": "cosine", "threshold": 2}], "tolerance[1]: threshold of"),
        ([Tolerance(), 0.5], "tolerance[1]: expected a Tolerance or a mapping"),
    ],
)
def test_bad_sequences(spec, message):
    with pytest.raises(ToleranceError) as info:
        ToleranceTable(spec)
    assert message in str(info.value)


def test_keyword_fields_change_the_elementwise_member_only():
    table = ToleranceTable([Tolerance(), Tolerance(check="cosine", threshold=0.9)], atol=0.5)
    assert isinstance(table.default, tuple)
    assert [(t.check, t.atol, t.threshold) for t in table.default] == [
        ("elemwise", 0.5, None),
        ("cosine", 1e-5, 0.9),
    ]
    actual, expected = _pair(0.0)
    assert compare_outputs({"y": actual}, {"y": expected}, check="top1", threshold=1.0).passed


def test_metric_alone_decides_and_reports_without_elementwise_lines():
    actual, expected = _pair(0.05)
    result = compare_outputs({"y": actual}, {"y": expected}, check="psnr", threshold=60)
    out = result.outputs["y"]
    assert not out.passed and not out.gated and out.mismatches == 0
    text = result.report()
    lines = text.splitlines()
    assert lines[2] == "y (float32 vs float32, shape (8, 100)): 1 of 1 metric checks fail"
    assert lines[3].startswith("  FAILED psnr ") and " dB < 60 dB (call; margin " in lines[3]
    assert "would pass with" not in text and "÷ allowed" not in text
    assert "greatest abs error" in text and "worst elements" in text


def test_failure_report_of_a_sequence():
    actual, expected = _pair(0.05)
    tols = [Tolerance(atol=1.0, rtol=1.0), Tolerance(check="cosine", threshold=0.9999)]
    tols.append(Tolerance(check="l2", threshold=100.0))
    with pytest.raises(AssertionError) as info:
        assert_outputs_close({"y": actual}, {"y": expected}, tols)
    lines = str(info.value).splitlines()
    assert lines[2] == "y (float32 vs float32, shape (8, 100)): 1 of 2 metric checks fail"
    assert lines[3] == "  within elemwise tolerance atol=1 (call) rtol=1 (call)"
    assert lines[4].startswith("  FAILED cosine 0.99") and "< 0.9999 (call; margin " in lines[4]
    assert lines[5].startswith("  passed l2 ") and "<= 100 (call; margin 0.0" in lines[5]


def test_pass_line_shows_metric_values():
    actual, expected = _pair(0.0)
    result = compare_outputs({"y": actual}, {"y": expected}, [Tolerance(), Tolerance(check="kl")])
    assert result.report().splitlines()[-1] == (
        "passed: y (float32 vs float32, shape (8, 100)): max abs 0, max rel 0, kl 0, margin 0"
    )


def test_elementwise_failure_lists_metrics_too():
    actual, expected = _pair(0.05)
    result = compare_outputs(
        {"y": actual}, {"y": expected}, [Tolerance(), Tolerance(check="cosine", threshold=0.5)]
    )
    text = result.report()
    assert "elements (" in text and "exceed" in text and "  passed cosine 0.99" in text


def test_nan_fails_every_metric():
    actual, expected = _pair(0.0)
    actual[0, 0] = np.nan
    for check in METRICS:
        out = compare_outputs({"y": actual}, {"y": expected}, check=check).outputs["y"]
        assert not out.passed, check
        if check == "top1":  # a row with a NaN disagrees: 7 of 8 rows agree
            assert out.metrics[0].value == 0.875
        else:
            assert out.margin == math.inf
    assert "is NaN, never within" in compare_outputs(actual, expected, check="l2").report()


@given(
    st.sampled_from(METRICS),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.floats(0, 1, allow_nan=False),
)
@settings(max_examples=300, deadline=None)
def test_margin_exceeds_one_exactly_when_the_check_fails(check, value, threshold):
    """margin > 1 <=> fails, up to rounding at the boundary."""
    if check in ("cosine", "top1"):
        value = max(-1.0, min(1.0, value / 1e6))
    if check in ("l2", "kl"):
        value = abs(value)
    passed = verdict(check, value, threshold)
    m = margin(check, value, threshold)
    if not math.isclose(value, threshold, rel_tol=1e-9, abs_tol=1e-12):
        assert passed == (m <= 1.0), (value, threshold, m)
    assert m >= 0
