"""The failure report of SPEC §2: order, content, width, verbosity."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pytest_trtcompare import OutputMismatchError, assert_outputs_close, compare_outputs


def _logits_case():
    rng = np.random.default_rng(0)
    expected = {
        "logits": rng.standard_normal((8, 1000)).astype(np.float32),
        "probs": rng.random((8, 10)).astype(np.float32),
    }
    actual = {name: value.astype(np.float16) for name, value in expected.items()}
    actual["logits"][3, 517] += 0.04
    actual["logits"][6, 12], expected["logits"][6, 12] = 0.0031, 0.0002
    return actual, expected


def _report(verbosity=0):
    actual, expected = _logits_case()
    with pytest.raises(OutputMismatchError) as info:
        assert_outputs_close(actual, expected, atol=1e-3, rtol=1e-3)
    return str(info.value), info.value.result.report(verbosity)


def test_report_lines_in_order_of_importance():
    text, _ = _report()
    lines = text.splitlines()
    assert lines[0] == "1 of 2 outputs out of tolerance: logits"
    assert lines[2] == (
        "logits (float16 vs float32, shape (8, 1000)): 2 / 8000 elements (0.025%) exceed"
    )
    assert lines[3] == "  elemwise tolerance atol=0.001 (call) rtol=0.001 (call)"
    assert lines[4] == (
        "  greatest abs error 0.03989 at (3, 517): actual 0.6977539 expected 0.65786374 "
        "(rel 0.06064)"
    )
    assert lines[5] == (
        "  greatest rel error 14.5 at (6, 12): actual 0.0030994415 expected 0.0002 (abs 0.002899)"
    )
    assert lines[6].startswith("  abs error: mean ") and "p99" in lines[6] and "cosine" in lines[6]
    assert lines[7] == "  would pass with atol ≥ 0.0399 or rtol ≥ 14.5"  # rounded up: passes
    assert lines[8].startswith("  worst elements:  index")
    assert lines[9].split()[:2] == ["(3,", "517)"]
    assert "error histogram (log10 |abs err|)" in text and "← atol" in text
    assert lines[-1].startswith("passed: probs (float16 vs float32, shape (8, 10)): max abs")


def test_report_fits_100_columns():
    text, verbose = _report(verbosity=2)
    assert max(len(line) for line in text.splitlines()) <= 100
    assert max(len(line) for line in verbose.splitlines()) <= 100


def test_verbose_report_shows_more_rows_and_relative_statistics():
    short, verbose = _report(verbosity=1)
    assert "(more with -v)" in short and "rel error: mean" not in short
    assert "rel error: mean" in verbose
    rows = [line for line in verbose.splitlines() if line.startswith("                   (")]
    assert len(rows) > 10


def test_statistic_check_header_says_which_statistic_failed():
    expected = np.ones(100)
    actual = expected + 0.1
    result = compare_outputs({"y": actual}, {"y": expected}, check="mean", atol=0.01, rtol=0.01)
    text = result.report()
    assert "mean abs error 0.1 > atol 0.01 and mean rel error 0.1 > rtol 0.01" in text
    assert "mean tolerance (call) atol=0.01 (call) rtol=0.01 (call)" in text


def test_nan_report_counts_each_side_and_positions():
    actual = np.array([np.nan, 1.0, np.nan])
    expected = np.array([np.nan, 1.0, 2.0])
    text = compare_outputs({"y": actual}, {"y": expected}).report()
    assert "NaN: actual 2, expected 1 (positions differ)" in text
    assert "no tolerance passes" in text
    assert "(2,)" in text  # the NaN element is among the worst


def test_nan_hint_names_the_option_that_could_excuse_the_errors():
    nan_one_side = compare_outputs(
        {"y": np.array([np.nan, 1.0])}, {"y": np.array([2.0, 1.0])}, nan_equal=True
    ).report()
    assert "  NaN in actual at 1 position, first (0,)\n" in nan_one_side
    assert "(nan_equal cannot help: NaN in actual only)" in nan_one_side
    inf_pair = compare_outputs(
        {"y": np.array([np.inf, 1.0])}, {"y": np.array([np.inf, 1.0])}, inf_equal=False
    ).report()
    assert "NaN errors fail at any atol/rtol (Inf - Inf is NaN unless inf_equal)" in inf_pair
    both = compare_outputs(
        {"y": np.array([np.inf, np.nan])}, {"y": np.array([np.inf, 1.0])}, inf_equal=False
    ).report()
    assert "  no tolerance passes: NaN errors fail at any atol/rtol\n" in both
    assert (
        "    (nan_equal cannot help: NaN in actual only; Inf - Inf is NaN unless inf_equal)" in both
    )
    same_positions = compare_outputs({"y": np.array([np.nan, 1.0])}, {"y": np.array([np.nan, 1.0])})
    assert "(nan_equal=True excuses NaN on both sides)" in same_positions.report()
    assert max(len(line) for line in both.splitlines()) <= 100


def test_inf_against_a_finite_value_suggests_no_tolerance():
    """Inf errors: no "would pass with atol ≥ inf" (atol must be finite), and the histogram
    labels its top decade, where larger errors and Inf count, up to inf."""
    text = compare_outputs(
        {"y": np.array([1, 2, 3, np.inf], np.float32)}, {"y": np.array([1, 2, 3, 4], np.float32)}
    ).report()
    assert "no tolerance passes: Inf against a finite value (or the other Inf)" in text
    assert "would pass with" not in text
    assert "[1e300, inf]" in text and "1e301" not in text


def test_nan_pairs_do_not_hide_the_finite_errors_in_the_worst_table():
    """NaN pairs without nan_equal are errors; the worst table lists the first few and then
    the largest finite errors, which NaN rows filled before."""
    expected = np.linspace(1.0, 2.0, 1000)
    expected[::10] = np.nan
    actual = expected.copy()
    actual[[501, 777]] += [0.5, 0.25]
    text = compare_outputs({"y": actual}, {"y": expected}).report()
    table = text.split("worst elements:")[1].split("error histogram")[0]
    rows = table.splitlines()[1:-1]
    assert [row.split()[0] for row in rows] == [
        "(0,)",
        "(10,)",
        "(20,)",
        "(30,)",
        "(40,)",
        "(501,)",
        "(777,)",
    ]
    assert "100 elements compare as NaN and fail" in text


def test_one_mismatch_exceeds():
    text = compare_outputs({"y": np.array([1.0, 5.0])}, {"y": np.array([1.0, 1.0])}).report()
    assert "1 / 2 elements (50%) exceeds" in text


def test_every_element_a_nan_error_prints_no_statistics_of_zero():
    nan = np.full(4, np.nan)
    text = compare_outputs({"y": nan}, {"y": nan}).report(verbosity=1)
    assert "no error statistics: every element is a NaN error" in text
    assert "abs error" not in text and "rel error" not in text and "greatest" not in text
    assert "4 elements compare as NaN and fail" in text
    assert "  NaN in actual at 4 positions and in expected at 4 positions, first (0,)\n" in text


def test_sharper_tolerance_shown_only_when_it_differs():
    expected = np.array([1000.0, 0.001])
    actual = np.array([1001.0, 0.003])  # abs 1 at rel 1e-3 (within rtol); abs 2e-3 at rel 2
    text = compare_outputs({"y": actual}, {"y": expected}, atol=1e-3, rtol=1e-3).report()
    assert "  would pass with atol ≥ 1 or rtol ≥ 2 (atol ≥ 0.002 at rtol 0.001)\n" in text


def test_would_pass_with_prints_bounds_that_pass():
    """Tied errors of 1 + 1e-7: the printed atol is rounded up (1.001, not 1), the check
    at the printed values passes, and a failing element's ratio shows it is over 1."""
    rng = np.random.default_rng(5)
    expected = rng.standard_normal(1 << 12).astype(np.float32)
    actual = expected + np.float32(1)
    failing = compare_outputs({"o": actual}, {"o": expected}, atol=1, rtol=1e-3)
    text = str(failing)
    assert not failing.passed
    bound = re.search(r"would pass with atol ≥ (\S+) or rtol ≥ (\S+)", text)
    assert bound is not None and bound.group(1) == "1.001"
    assert compare_outputs({"o": actual}, {"o": expected}, atol=1.001, rtol=1e-3).passed
    ratios = re.findall(r"(\S+)x\n", text.split("worst elements:")[1])
    assert ratios and all(float(r) > 1 for r in ratios)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_value_beyond_the_actual_dtypes_range_is_called_saturated(dtype):
    """An attention mask's float32 minimum becomes -inf in float16 / bfloat16: the report
    says why and what to do (issue 22 new-user trial: per-layer BERT at fp16)."""
    from pytest_trtcompare.engine.arrays import dtype_from_name

    expected = np.array([0.5, -3.4028235e38], np.float32)
    with np.errstate(over="ignore"):
        actual = expected.astype(dtype_from_name(dtype))
    text = compare_outputs({"mask": actual}, {"mask": expected}, atol=1e-2, rtol=1e-2).report()
    largest = "65504" if dtype == "float16" else "3.39e+38"  # the shortest of each dtype
    assert (
        f"  saturated: expected -3.4028235e+38 is beyond {dtype}'s range (±{largest}); a mask or "
        "bias constant (an attention mask's float32 minimum) saturates harmlessly before a "
        "softmax: let the model outputs decide (layers='report') or give this tensor its own "
        "tolerance"
    ) in text.splitlines()
    within = compare_outputs({"x": np.float16([600.0])}, {"x": np.float32([1.0])}).report()
    assert "saturated" not in within


def test_a_histogram_row_with_elements_never_reads_zero_percent():
    """1 error in 10^4 is 0.01%: the row says <0.1% beside its one-cell bar, not 0.0%."""
    expected = np.zeros(10_000, np.float32)
    actual = expected.copy()
    actual[:9_999] += np.float32(1e-2)
    actual[9_999] += np.float32(1e-4)
    text = compare_outputs({"y": actual}, {"y": expected}, atol=1e-3, rtol=0).report()
    rows = [line.strip() for line in text.splitlines() if line.strip().startswith("[1e-")]
    assert rows == [
        "[1e-5, 1e-4)          1  <0.1% █",
        "[1e-3, 1e-2)       9999 100.0% " + "█" * 32 + "  ← atol",
    ]
