"""compare_outputs / assert_outputs_close: statistics, options, dtypes and bad input."""

from __future__ import annotations

import math
import warnings

import ml_dtypes
import numpy as np
import pytest

from pytest_trtcompare import (
    InvalidOutputError,
    OutputMismatchError,
    Tolerance,
    ToleranceError,
    ToleranceWarning,
    assert_outputs_close,
    compare_outputs,
)
from pytest_trtcompare.engine.tuning import TUNING


def _one(actual, expected, tolerance=None, **fields):
    return compare_outputs({"y": actual}, {"y": expected}, tolerance, **fields).outputs["y"]


def test_statistics_of_a_known_case():
    expected = np.array([[1.0, 2.0], [0.0, -4.0]], dtype=np.float32)
    actual = np.array([[1.1, 2.0], [0.5, -4.0]], dtype=np.float16)
    out = _one(actual, expected, atol=0.2, rtol=0.2)
    errors = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
    assert not out.passed
    assert out.count == 4 and out.mismatches == 1 and out.mismatch_share == 0.25
    assert out.max_abs_error == errors.max() and out.greatest_abs.index == (1, 0)
    assert out.greatest_abs.actual == 0.5 and out.greatest_abs.expected == 0.0
    assert out.max_rel_error == pytest.approx(0.5 / 2.220446049250313e-16)
    assert out.mean_abs_error == pytest.approx(errors.mean())
    assert out.median_abs_error == pytest.approx(np.median(errors))
    assert out.quantile_abs_error == pytest.approx(np.quantile(errors, 0.99))
    a64, e64 = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    cosine = a64 @ e64 / np.linalg.norm(a64) / np.linalg.norm(e64)
    assert out.cosine_similarity == pytest.approx(cosine)
    assert (out.actual_dtype, out.expected_dtype, out.shape) == ("float16", "float32", (2, 2))
    assert out.required_atol == out.max_abs_error and out.margin > 1


def test_passing_comparison_skips_order_statistics():
    out = _one(np.ones(10), np.ones(10))
    assert out.passed and out.margin == 0.0
    assert out.median_abs_error is None and out.quantile_abs_error is None


@pytest.mark.parametrize("check", ["max", "mean", "median", "quantile"])
def test_statistic_checks(check):
    expected = np.ones(100)
    actual = expected.copy()
    actual[:3] += 1.0  # three big errors, 97 exact
    lenient = _one(actual, expected, check=check, quantile=0.9, atol=0.5, rtol=0.5)
    assert lenient.passed is (check != "max")
    # p99 of 97 zeros and 3 ones interpolates between sorted positions 98 and 99: 1.0
    assert not _one(actual, expected, check="quantile", quantile=0.99, atol=0.5, rtol=0.5).passed


def test_margin_is_worst_error_over_allowed():
    out = _one(np.array([1.005, 2.0]), np.array([1.0, 2.0]), atol=0.01, rtol=0.0)
    assert out.passed and out.margin == pytest.approx(0.5)
    allclose = _one(np.array([1.005]), np.array([1.0]), atol=0.005, rtol=0.005, rule="allclose")
    assert allclose.margin == pytest.approx(0.5)


def test_rules_differ_as_documented():
    # |a-e| = 0.015: polygraphy allows max(0.01, 0.01*1) = 0.01, allclose 0.01 + 0.01 = 0.02
    actual, expected = np.array([1.015]), np.array([1.0])
    assert not _one(actual, expected, atol=0.01, rtol=0.01).passed
    assert _one(actual, expected, atol=0.01, rtol=0.01, rule="allclose").passed


def test_nan_and_inf_options():
    nan_both = np.array([np.nan, 1.0])
    assert not _one(nan_both, nan_both).passed
    out = _one(nan_both, nan_both, nan_equal=True)
    assert out.passed and out.nan_actual == out.nan_expected == 1 and out.nan_positions_match
    moved = _one(np.array([np.nan, 1.0]), np.array([1.0, np.nan]), nan_equal=True)
    assert not moved.passed and not moved.nan_positions_match and moved.nan_errors == 2
    inf = np.array([np.inf, -np.inf])
    assert _one(inf, inf).passed
    assert not _one(inf, inf, inf_equal=False).passed
    assert not _one(np.array([np.inf]), np.array([1e308])).passed
    assert not _one(np.array([1e308]), np.array([np.inf]), rule="allclose", rtol=1.0).passed


@pytest.mark.parametrize("check", ["max", "mean", "median", "quantile"])
def test_any_nan_fails_a_statistic_check(check):
    actual = np.zeros(1000)
    actual[5] = np.nan
    out = _one(actual, np.zeros(1000), check=check, atol=1.0, rtol=1.0)
    assert not out.passed and out.margin == math.inf


def test_empty_and_zero_d_tensors():
    assert _one(np.zeros((0, 3)), np.zeros((0, 3))).passed
    assert _one(np.float32(1.0), np.float64(1.0)).passed
    out = _one(np.array(2.0), np.array(1.0))
    assert not out.passed and out.greatest_abs.index == ()


def test_integer_and_bool_outputs():
    assert _one(np.array([0], np.uint64), np.array([1], np.uint64)).max_abs_error == 1.0
    big = np.iinfo(np.int64)
    out = _one(np.array([big.max], np.int64), np.array([big.min], np.int64), atol=0, rtol=0)
    assert out.max_abs_error == float(2**64 - 1)
    mixed = _one(np.array([2**64 - 1], np.uint64), np.array([-1], np.int64), atol=0, rtol=0)
    assert mixed.max_abs_error == float(2**64)
    flags = _one(np.array([True, False, True]), np.array([True, True, True]), atol=0, rtol=0)
    assert flags.mismatches == 1 and flags.max_abs_error == 1.0


@pytest.mark.parametrize(
    "low_dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.float16]
)
def test_low_precision_floats_against_float32(low_dtype):
    expected = np.linspace(-2, 2, 64, dtype=np.float32)
    actual = expected.astype(low_dtype)
    exact = np.abs(actual.astype(np.float64) - expected.astype(np.float64)).max()
    out = _one(actual, expected, atol=0.3, rtol=0.3)
    assert out.passed and out.max_abs_error == exact
    assert out.actual_dtype == np.dtype(low_dtype).name


def test_large_outputs_cross_many_chunks():
    expected = np.zeros(1_000_003, dtype=np.float32)
    actual = expected.copy()
    actual[777_777] = 0.5
    actual[1_000_002] = np.nan
    out = _one(actual, expected, atol=0.1, rtol=0.1)
    assert out.mismatches == 2 and out.nan_errors == 1
    assert out.greatest_abs.index == (777_777,)
    assert {w.index for w in out.worst[:2]} == {(777_777,), (1_000_002,)}


def test_non_contiguous_and_fortran_arrays():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = base[:, ::2]
    fortran = np.asfortranarray(view)
    out = _one(view + np.eye(4, 3, dtype=np.float32), fortran, atol=0.5, rtol=0)
    assert out.mismatches == 3 and out.greatest_abs.index in {(0, 0), (1, 1), (2, 2)}


def test_per_output_tolerance_mapping_like_polygraphy():
    actual = {"a": np.array([1.01]), "b": np.array([1.01])}
    expected = {"a": np.array([1.0]), "b": np.array([1.0])}
    table = {"": Tolerance(atol=1e-5, rtol=1e-5), "b": {"atol": 0.1}}
    result = compare_outputs(actual, expected, table)
    assert not result.outputs["a"].passed and result.outputs["b"].passed
    assert result.outputs["b"].tolerance.rtol == 1e-5
    overridden = compare_outputs(actual, expected, table, atol=1.0)
    assert overridden.passed


def test_unknown_output_in_tolerance_table_warns_at_the_callers_line():
    for call in (compare_outputs, assert_outputs_close):
        with pytest.warns(ToleranceWarning, match="typo") as caught:
            call({"a": [1.0]}, {"a": [1.0]}, {"typo": {"atol": 1.0}})
        assert [w.filename for w in caught] == [__file__], call.__name__


def test_missing_names_fail_with_both_lists():
    result = compare_outputs({"a": [1.0], "c": [1.0]}, {"a": [1.0], "b": [1.0]})
    assert not result.passed
    assert result.missing_in_actual == ("b",) and result.missing_in_expected == ("c",)
    text = result.report()
    assert "missing in actual: b" in text and "['a', 'b']" in text and "['a', 'c']" in text
    assert compare_outputs({"a": [1.0], "c": [1.0]}, {"a": [1.0]}, names=["a"]).passed


def test_shape_mismatch_fails_clearly():
    with pytest.raises(OutputMismatchError) as info:
        assert_outputs_close({"y": np.zeros((8, 1000))}, {"y": np.zeros((8, 999))})
    first_line = str(info.value).splitlines()[0]
    assert first_line == "y: shape (8, 1000) differs from expected shape (8, 999)"
    assert info.value.result.outputs["y"].problem


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("text", "output 'y' (actual) is a str, not an array"),
        (np.array(["a", "b"]), "output 'y' (actual) is a string tensor"),
        (np.array([object(), 1], dtype=object), "object array"),
        (np.array([1 + 2j]), "complex tensor"),
        ([[1, 2], [3]], "cannot be read as an array"),
        ({1, 2}, "object array"),
    ],
)
def test_bad_outputs_give_one_line_errors(bad, message):
    with pytest.raises(InvalidOutputError) as info:
        assert_outputs_close({"y": bad}, {"y": np.zeros(2)})
    assert message in str(info.value) and "\n" not in str(info.value)


def test_bad_containers_and_tolerances():
    with pytest.raises(InvalidOutputError, match="actual must be a mapping"):
        compare_outputs("abc", {"y": [1]})
    with pytest.raises(ToleranceError, match="atol must be finite and >= 0"):
        compare_outputs([1.0], [1.0], atol=-1)
    with pytest.raises(ToleranceError, match="check='maximum' is not one of"):
        Tolerance(check="maximum")
    with pytest.raises(ToleranceError, match="unknown tolerance field"):
        compare_outputs([1.0], [1.0], atlo=1e-3)
    with pytest.raises(ToleranceError, match="postprocess='top5'"):
        Tolerance(postprocess="top5")


def test_bare_arrays_and_lists_compare_as_one_output():
    result = compare_outputs([1.0, 2.0], np.array([1.0, 2.0]))
    assert result.passed and list(result.outputs) == ["output"]


def test_error_is_an_assertion_error_carrying_the_result():
    with pytest.raises(AssertionError) as info:
        assert_outputs_close({"y": [1.0]}, {"y": [2.0]})
    assert isinstance(info.value, OutputMismatchError)
    assert info.value.result.outputs["y"].mismatches == 1


def test_torch_tensors_are_accepted():
    torch = pytest.importorskip("torch")
    expected = torch.linspace(-1, 1, 50)
    out = _one(expected.to(torch.bfloat16), expected, atol=1e-2, rtol=1e-2)
    assert out.passed and out.actual_dtype == "bfloat16" and out.expected_dtype == "float32"
    assert out.max_abs_error > 0  # really rounded to bfloat16


def test_no_numpy_warnings_escape():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compare_outputs(
            {"y": np.array([0.0, np.inf, np.nan, 1e308, -1e308])},
            {"y": np.array([0.0, np.inf, 1.0, -1e308, 0.0])},
            atol=0,
            rtol=0,
        ).report()


def test_a_mapping_of_fields_is_one_tolerance():
    result = compare_outputs({"y": [1.01]}, {"y": [1.0]}, {"atol": 0.1, "rtol": 0})
    assert result.passed and result.outputs["y"].tolerance.atol == 0.1
    table = compare_outputs({"atol": [1.01]}, {"atol": [1.0]}, {"atol": {"atol": 0.1}})
    assert table.passed  # an output named like a field still takes a table entry


def test_squares_that_overflow_in_an_equal_chunk_raise_no_warning(monkeypatch):
    """The cosine reads the squares of bit-equal chunks at its end, under the same errstate
    as the scan: under `-W error` a RuntimeWarning (float64 overflow) failed the comparison."""
    monkeypatch.setattr(TUNING, "chunk_elements", 4)
    actual = np.array([1e300] * 4 + [1.0, 2.0, 3.0, 4.0])
    expected = actual.copy()
    expected[5] = 2.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = compare_outputs(actual, expected, atol=1.0, rtol=0.0)
    assert result.passed and result.outputs["output"].max_abs_error == 0.5


def test_an_unknown_output_name_lists_the_names_there_are():
    outputs = {f"layer{i}": np.ones(2) for i in range(12)}
    result = compare_outputs(outputs, outputs)
    with pytest.raises(KeyError) as typo:
        result.outputs["layer1O"]
    assert typo.value.args[0] == (
        "'layer1O': no output of that name; did you mean 'layer1', 'layer11', 'layer10'? "
        "the outputs are 'layer0', 'layer1', 'layer2', 'layer3', 'layer4', 'layer5', "
        "'layer6', 'layer7', ... (12 in all)"
    )
    assert result.outputs.get("layer1O") is None and result.outputs == dict(result.outputs)
