"""Numbers that tell the truth (issue 26): printed values read back to themselves in their
dtype, a figure never prints equal to the bound it exceeds, NaN / Inf / shape / name
failures say what they are, and every tolerance names its source."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_trtcompare import Tolerance, compare_outputs
from pytest_trtcompare.engine import against, exact, shortest
from pytest_trtcompare.engine.digits import pair_dtype
from pytest_trtcompare.session.settings import ToleranceSettings

#: (dtype, the most significant digits its shortest text may need)
DTYPES = [
    (np.dtype(np.float16), 5),
    (np.dtype(np.float32), 9),
    (np.dtype(np.float64), 17),
    (np.dtype(ml_dtypes.bfloat16), 4),
]


def _values(dtype: np.dtype) -> st.SearchStrategy[float]:
    """Finite values of `dtype`, from every bit pattern (subnormals and extremes too)."""
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize]
    top = int(np.iinfo(bits).max)
    return (
        st.integers(0, top)
        .map(lambda b: float(np.array(b, dtype=bits).view(dtype)))
        .filter(math.isfinite)
    )


def _digits(text: str) -> int:
    mantissa = text.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
    return len(mantissa.rstrip("0")) if "." in text or "e" in text else len(mantissa)


@pytest.mark.parametrize(("dtype", "most"), DTYPES, ids=lambda d: str(d))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_different_values_print_differently_and_read_back(dtype, most, data):
    first = data.draw(_values(dtype))
    second = data.draw(_values(dtype).filter(lambda v: v != first))
    texts = shortest(first, dtype), shortest(second, dtype)
    assert texts[0] != texts[1]
    for value, text in zip((first, second), texts, strict=True):
        assert float(dtype.type(float(text))) == value
        assert _digits(text) <= most or float(text) == int(float(text))


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_a_mixed_pair_prints_in_a_dtype_that_holds_both(data):
    """float16 0.0999755859375 beside float32 0.1: both 0.1 in their own dtypes."""
    low = data.draw(_values(np.dtype(np.float16)))
    high = data.draw(_values(np.dtype(np.float32)).filter(lambda v: v != low))
    dtype = pair_dtype("float16", "float32")
    assert shortest(low, dtype) != shortest(high, dtype)
    assert (shortest(float(np.float16(0.1)), dtype), shortest(float(np.float32(0.1)), dtype)) == (
        "0.099975586",
        "0.1",
    )


def test_the_issue_pair_no_longer_prints_the_same():
    expected = np.float32(0.0950661)
    actual = np.nextafter(expected, np.float32(1))
    text = compare_outputs({"y": np.array([actual])}, {"y": np.array([expected])}, atol=0, rtol=0)
    assert "actual 0.09506611 expected 0.0950661 " in str(text)


@pytest.mark.parametrize(
    ("value", "dtype", "text"),
    [
        (448.0, "float8_e4m3fn", "448"),
        (float(ml_dtypes.bfloat16(0.0950661)), "bfloat16", "0.095"),
        (float(np.float16(0.0950661)), "float16", "0.0951"),
        (1e-5, "float64", "1e-05"),
        (float(np.float32(3.4028235e38)), "float32", "3.4028235e+38"),
        (7, "int64", "7"),
        (math.nan, "float32", "nan"),
        (-math.inf, "float16", "-inf"),
    ],
)
def test_shortest_examples(value, dtype, text):
    assert shortest(value, dtype) == text


@settings(max_examples=300, deadline=None)
@given(value=st.floats(1e-12, 1e12), bound=st.floats(1e-12, 1e12))
def test_a_figure_compares_with_its_bound_as_printed(value, bound):
    printed = float(against(value, bound))
    assert (printed > bound) == (value > bound) and (printed < bound) == (value < bound)


def test_an_error_just_over_atol_does_not_print_as_atol():
    expected = np.array([1.0, 2.0])
    actual = expected + np.array([0.0, 1.000001e-4])
    text = compare_outputs({"y": actual}, {"y": expected}, atol=1e-4, rtol=0).report()
    assert "greatest abs error 0.0001000001 at (1,)" in text
    assert "elemwise tolerance atol=0.0001 (call) rtol=0 (call)" in text
    assert exact(1.2345678e-4) == "0.00012345678"  # a tolerance is never rounded


# NaN, Inf, shape and name failures say what they are


def test_nan_in_actual_says_so_and_no_zero_error():
    expected = (np.arange(6, dtype=np.float32) / 7).reshape(2, 3)
    actual = expected.copy()
    actual[[0, 0, 1], [0, 1, 2]] = np.nan
    out = compare_outputs({"y": actual}, {"y": expected}).outputs["y"]
    assert out.failure == "NaN in actual at 3 positions, first (0, 0)"
    lines = out_report(actual, expected)
    assert "  NaN in actual at 3 positions, first (0, 0)" in lines
    assert "  the other 3 elements: no error" in lines
    assert not any(line.startswith("  greatest abs error") for line in lines)
    assert any("(nan_equal cannot help: NaN in actual only)" in line for line in lines)
    assert "                 NaN          3  50.0% " + "█" * 32 in lines
    row = next(line for line in lines if line.strip().startswith("(0, 0)"))
    assert row.split()[-1] == "nan"  # no 'nanx'


def out_report(actual, expected, **fields):
    return compare_outputs({"y": actual}, {"y": expected}, **fields).report().splitlines()


def test_nan_beside_finite_errors_says_both():
    actual, expected = np.array([np.nan, 1.5]), np.array([np.nan, 1.0])
    lines = out_report(actual, expected)
    assert "  NaN in actual at 1 position and in expected at 1 position, first (0,)" in lines
    assert any(
        line.startswith("  greatest abs error (NaN errors aside) 0.5 at (1,)") for line in lines
    )
    assert any("(nan_equal=True excuses NaN on both sides)" in line for line in lines)
    assert any(line.startswith("  abs error (1 non-NaN): mean 0.5") for line in lines)


def test_inf_against_a_finite_value_says_where():
    out = compare_outputs(
        {"y": np.array([1, np.inf, np.inf], np.float32)}, {"y": np.array([1, 2, 3], np.float32)}
    ).outputs["y"]
    assert out.failure == "Inf in actual at 2 positions, first mismatch (1,)"
    assert out.max_abs_error == math.inf


def test_shape_and_structure_failures_record_no_error_size():
    out = compare_outputs({"y": np.zeros((2, 3))}, {"y": np.zeros((2, 4))}).outputs["y"]
    assert out.failure == "shape (2, 3) vs (2, 4)"
    assert out.max_abs_error is None and out.max_rel_error is None
    every_nan = compare_outputs({"y": np.full(3, np.nan)}, {"y": np.zeros(3)}).outputs["y"]
    assert every_nan.max_abs_error is None
    assert every_nan.failure == "NaN in actual at 3 positions, first (0,)"


def test_rtol_advice_is_not_driven_by_an_expected_zero():
    expected = np.zeros((2, 3), np.float32)
    actual = expected.copy()
    actual[0, 1] = 1e-3
    lines = out_report(actual, expected)
    assert "  would pass with atol ≥ 0.001001 (no rtol: expected is 0 at (0, 1))" in lines
    assert not any("rtol ≥ 4503599841280" in line for line in lines)


def test_a_passing_output_has_no_failure():
    out = compare_outputs({"y": np.array([np.nan])}, {"y": np.array([np.nan])}, nan_equal=True)
    assert out.passed and out.outputs["y"].failure is None


# sources


def test_each_layer_of_the_precedence_names_itself():
    settings_ = ToleranceSettings(
        ini_table={"fp16": {"atol": 1e-3}},
        command_line={"rtol": 0.5},
        ini_metrics={"fp16": (Tolerance(check="cosine", threshold=0.99),)},
        metrics=(Tolerance(check="snr", threshold=30),),
    )
    table = settings_.resolve("fp16")
    base, cosine, snr = table.default
    assert (base.source("atol"), base.source("rtol"), base.source("check")) == (
        "ini",
        "option",
        "default",
    )
    assert (cosine.source("threshold"), snr.source("threshold")) == ("ini", "option")
    marker = settings_.resolve("fp16", {"y": {"atol": 0.25}}, source="marker")
    assert marker["y"][0].source("atol") == "marker" and marker["y"][0].source("rtol") == "option"
    assert marker[""][0].source("atol") == "ini"
    call = settings_.resolve("fp32", Tolerance(atol=0.1))
    assert call.default[0].source("atol") == "call" and call.default[0].source("rtol") == "option"
    assert ToleranceSettings().resolve("fp16").default.describe() == (
        "elemwise tolerance atol=0.01 (default) rtol=0.01 (default)"
    )
    # a marker's fields over the precision's tolerance, not over fp32's (rtol stays fp16's)
    fields = ToleranceSettings(ini_table={"bf16": {"rtol": 0.2}})
    fp16 = fields.resolve("fp16", {"atol": 1e-3}, source="marker").default
    assert (fp16.atol, fp16.rtol, fp16.source("rtol")) == (1e-3, 1e-2, "default")
    listed = fields.resolve("bf16", [{"atol": 1e-3}, {"check": "cosine"}], source="marker")
    assert listed.default[0].rtol == 0.2 and listed.default[0].source("rtol") == "ini"


def test_sources_change_no_verdict_and_are_not_stored():
    made = Tolerance(atol=1e-3)
    sourced = made.sourced("ini")
    assert made == sourced and hash(made) == hash(sourced) and repr(made) == repr(sourced)
    from pytest_trtcompare.engine import entry_record

    assert "sources" not in entry_record(sourced)


def test_statistic_check_names_its_source():
    table = ToleranceSettings(command_line={"check": "mean"}).resolve("fp32")
    assert table.default.describe() == (
        "mean tolerance (option) atol=1e-05 (default) rtol=1e-05 (default)"
    )


def test_huge_whole_figures_print_in_their_significant_digits():
    """A relative error against an expected 0 (|e| taken as 2.2e-16) is a whole float64
    number: 3.288e+12, not 3287627857920 (a new-user trial's summary)."""
    from pytest_trtcompare.engine.digits import num

    assert num(7.3e-4 / 2.220446049250313e-16, 4) == "3.288e+12"
    assert num(37.0) == "37" and num(9999.0) == "9999" and num(65504.0, 5) == "65504"
