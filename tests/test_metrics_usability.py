"""Metric checks as a new user meets them: ini threshold=, keyword fields with lists, NaN and
the statistics line, summary digits, advice after metric-only failures, small messages, and
kl / top1 on outputs without a last axis to speak of."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_trtcompare import Tolerance, compare_outputs
from pytest_trtcompare.engine.tolerance_table import ToleranceTable
from pytest_trtcompare.errors import InvalidOutputError, ToleranceError
from pytest_trtcompare.reports.summary import Record, format_summary
from pytest_trtcompare.session.settings import (
    parse_ini_tolerances,
    parse_metrics,
    parse_tolerance_fields,
)

from .pytester_helpers import XDIST, run


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
        result.stdout.fnmatch_lines(["*  FAILED cosine 0.998* < 0.9999 (ini; margin *)"])
    _no_crash(result)


# 2. keyword fields that cannot apply unambiguously


@pytest.mark.parametrize(
    ("spec", "fields", "message"),
    [
        (
            [{"check": "kl"}, {"check": "cosine"}],
            {"threshold": 0.5},
            "tolerance: threshold= is ambiguous with 2 metric checks (kl, cosine): give each "
            "its threshold",
        ),
        (
            [{"check": "kl"}],
            {"atol": 0.1},
            "tolerance: atol= has no elementwise tolerance to change in [kl]",
        ),
        (
            [{"check": "kl"}, {"check": "cosine"}],
            {"rtol": 0.1, "nan_equal": True},
            "tolerance: nan_equal=, rtol= have no elementwise tolerance to change in [kl, cosine]",
        ),
        (
            {"": Tolerance(), "y": [{"check": "kl"}]},
            {"atol": 0.1},
            "tolerance['y']: atol= has no elementwise tolerance to change in [kl]",
        ),
        (
            [{"atol": 1}, {"check": "kl"}, {"check": "top1"}],
            {"threshold": 0.5},
            "tolerance: threshold= is ambiguous with 2 metric checks (kl, top1): give each its "
            "threshold",
        ),
        (  # the elementwise member would vanish: a shifted output passes kl and cosine
            [{"atol": 1e-3}, {"check": "cosine", "threshold": 0.99}],
            {"check": "kl"},
            "tolerance: check='kl' would replace the elemwise tolerance in [elemwise, cosine]: "
            "add {'check': 'kl'} to the list instead",
        ),
        (
            {"": [{"atol": 1e-3}, {"check": "cosine"}]},
            {"check": "top1"},
            "tolerance: check='top1' would replace the elemwise tolerance in "
            "[elemwise, cosine]: add {'check': 'top1'} to the list instead",
        ),
        (
            None,
            {"check": "kl", "atol": 0.1},
            "tolerance: atol= does nothing for a metric check (check='kl' takes threshold= and "
            "postprocess=); for both, give a list: [{'atol': ..., 'rtol': ...}, {'check': 'kl'}]",
        ),
        (
            {"check": "cosine", "atol": 0.1, "rtol": 0.1},
            {},
            "tolerance: atol=, rtol= does nothing for a metric check (check='cosine' takes "
            "threshold= and postprocess=); for both, give a list: "
            "[{'atol': ..., 'rtol': ...}, {'check': 'cosine'}]",
        ),
        (  # a Tolerance object as a dict: what it sets off its defaults (issue 45's trial)
            Tolerance(check="cosine", atol=0.5),
            {},
            "tolerance: atol= does nothing for a metric check (check='cosine' takes "
            "threshold= and postprocess=); for both, give a list: "
            "[{'atol': ..., 'rtol': ...}, {'check': 'cosine'}]",
        ),
        (
            {"": Tolerance(check="fp64", rtol=1e-3)},
            {},
            "tolerance['']: rtol= does nothing for a metric check (check='fp64' takes "
            "threshold= and atol=); for both, give a list: "
            "[{'atol': ..., 'rtol': ...}, {'check': 'fp64'}]",
        ),
    ],
)
def test_keyword_fields_that_cannot_apply_are_errors(spec, fields, message):
    actual, expected = _pair()
    with pytest.raises(ToleranceError) as info:
        compare_outputs({"y": actual}, {"y": expected}, spec, **fields)
    assert str(info.value) == message


def test_keyword_fields_where_they_apply_unambiguously():
    elementwise_and_one = ToleranceTable([{"atol": 1}, {"check": "cosine"}], threshold=0.5)
    assert [t.threshold for t in elementwise_and_one.default] == [None, 0.5]  # type: ignore[union-attr]
    assert ToleranceTable([{"check": "kl"}], threshold=0.5).default == Tolerance(
        check="kl", threshold=0.5
    )
    changed = ToleranceTable([{"atol": 1}, {"check": "kl"}], atol=0.5, check="mean").default
    assert [(t.check, t.atol) for t in changed] == [("mean", 0.5), ("kl", 1e-5)]  # type: ignore[union-attr]
    # a lone metric replaced by an elementwise check takes every field
    assert ToleranceTable(Tolerance(check="kl"), check="max", atol=0.5).default == Tolerance(
        check="max", atol=0.5
    )
    assert ToleranceTable([{"check": "kl"}, {"check": "top1"}], postprocess="top-3").default == (
        Tolerance(check="kl", postprocess="top-3"),
        Tolerance(check="top1", postprocess="top-3"),
    )


def test_call_fields_that_cannot_apply_fail_the_test(pytester):
    pytester.makepyfile(
        """
        import numpy as np

        def test_ambiguous(compare):
            y = {"y": np.ones((2, 3))}
            compare(y, y, [{"check": "kl"}, {"check": "cosine"}], threshold=0.5)
        """
    )
    result = run(pytester, "-rf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*tolerance: threshold= is ambiguous with 2 metric checks (kl, cosine): give each "
            "its threshold*"
        ]
    )
    _no_crash(result)


@pytest.mark.parametrize("xdist", XDIST)
def test_a_metric_keyword_never_drops_a_field_in_a_test(pytester, xdist):
    """compare(..., check="kl", atol=0.1) used to pass an output off by 1 (atol ignored);
    check="kl" alone still works."""
    pytester.makepyfile(
        """
        import numpy as np

        e = {"y": np.arange(12.0).reshape(3, 4)}
        a = {"y": e["y"] + 1.0}

        def test_dropped_atol(compare):
            compare(a, e, check="kl", atol=0.1)

        def test_kl_alone(compare):
            assert compare(e, e, check="kl").outputs["y"].metric("kl").passed
        """
    )
    result = run(pytester, "-rf", *xdist)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*atol= does nothing for a metric check (check='kl'*"])
    _no_crash(result)


def test_command_line_fields_leave_metric_only_entries_alone(pytester):
    """--trt-atol / --trt-check-error-stat change every elementwise member; an entry of
    metric checks alone has none and keeps its checks (it was turned into check=mean)."""
    pytester.makepyfile(
        """
        import numpy as np

        y = {"y": np.arange(6.0).reshape(2, 3)}

        def test_metric_only(compare):
            result = compare(y, y, check="cosine")
            assert [t.check for t in [result.outputs["y"].tolerance]] == ["cosine"]

        def test_elementwise(compare):
            result = compare(y, y, [{"atol": 1}, {"check": "kl"}])
            assert result.outputs["y"].tolerance.check == "mean"
            assert result.outputs["y"].tolerance.atol == 0.5
        """
    )
    result = run(pytester, "--trt-atol=0.5", "--trt-check-error-stat=mean")
    result.assert_outcomes(passed=2)
    _no_crash(result)


# 3. one NaN: the metric sees every element, the statistics line the finite pairs


def test_nan_cosine_report_does_not_contradict_itself():
    _, expected = _pair()
    actual = expected.copy()
    actual[0, 0] = np.nan
    text = compare_outputs({"y": actual}, {"y": expected}, check="cosine").report()
    assert "  FAILED cosine nan is NaN, never within 0.997 (default; margin inf)" in text
    assert "cosine 1" not in text
    assert "1 element compares as NaN and fails" in text
    elementwise = compare_outputs({"y": actual}, {"y": expected}).report()
    assert "   cosine of finite pairs 1.000000000" in elementwise
    assert "1 element compares as NaN and fails" in elementwise
    two = actual.copy()
    two[1, 1] = np.nan
    assert "2 elements compare as NaN and fail" in compare_outputs(two, expected).report()
    stat = compare_outputs(actual, expected, check="mean").report()
    assert "1 error is NaN, so the mean statistic fails" in stat


# 5. only metric checks fail: no advice about the elementwise tolerance that passed


def test_no_elementwise_advice_when_only_metrics_fail():
    actual, expected = _pair()
    spec = [Tolerance(atol=1, rtol=1), Tolerance(check="cosine", threshold=0.9999)]
    text = compare_outputs({"y": actual}, {"y": expected}, spec).report()
    assert "  within elemwise tolerance atol=1 (call) rtol=1 (call)" in text
    assert "would pass with" not in text and "÷ allowed" not in text
    assert "worst elements:" in text
    both = [Tolerance(), Tolerance(check="cosine", threshold=0.9999)]
    failing = compare_outputs({"y": actual}, {"y": expected}, both).report()
    assert "would pass with atol ≥" in failing and "÷ allowed" in failing


# 4. the accuracy summary shows values that differ from their bounds


def _record(check: str, value: float, threshold: float, passed: bool) -> Record:
    metric = {"check": check, "threshold": threshold, "value": value, "passed": passed}
    return Record(
        test="t",
        output="y",
        passed=passed,
        margin=2.0 if not passed else 0.5,
        check=check,
        atol=1e-5,
        rtol=1e-5,
        source="compare",
        metrics=({**metric, "margin": 2.0 if not passed else 0.5},),
        figures={"max_abs_error": 1e-3, "max_rel_error": 1e-3},
    )


def test_summary_values_differ_from_their_bounds():
    lines = format_summary([_record("cosine", 0.9999998, 0.9999999, False)], 1, 200)
    assert "cosine 0.9999998" in lines[1] and "cosine >= 0.9999999" in lines[1]
    passing = format_summary([_record("cosine", 0.99912345, 0.999, True)], 1, 200)[1]
    assert "cosine 0.99912" in passing  # the pass line's digits (format_pair)


def test_kl_of_shifted_logits_is_not_negative():
    _, expected = _pair()
    (kl,) = compare_outputs(expected + 1, expected, check="kl").outputs["output"].metrics
    assert kl.value == 0.0 and kl.passed
    assert "kl 0," in compare_outputs(expected + 1, expected, check="kl").report()


# 6. small messages


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            ("cosine", 0.99),
            "tolerance: ('cosine', 0.99) is not a tolerance; write "
            "{'check': 'cosine', 'threshold': 0.99}",
        ),
        (
            [Tolerance(), "kl"],
            "tolerance[1]: expected a Tolerance or a mapping of fields, got 'kl' "
            "(a check name: write {'check': 'kl'})",
        ),
        (
            [Tolerance(), "abc"],
            "tolerance[1]: expected a Tolerance or a mapping of fields, got 'abc'",
        ),
        ({"atl": 1e-3, "rtol": 0}, "did you mean 'atol'?"),
        # a field misspelt beside a right one: not a table of outputs 'atol' and 'rtoll'
        ({"atol": 1e-3, "rtoll": 1e-3}, "tolerance: 'rtoll' is not a tolerance field; did you"),
        ({"atol": 1e-3, "zzz": 1}, "tolerance: 'zzz' is not a tolerance field; fields: atol,"),
        (
            {"atol": 1e-3, "logits": {"atol": 1e-2}},
            "tolerance['atol']: expected a Tolerance or a mapping of fields, got 0.001 ('atol' "
            "is a field: beside outputs, the default's fields go under '': {'': {'atol': 0.001}",
        ),
    ],
)
def test_non_tolerance_values_are_named_sensibly(spec, message):
    with pytest.raises(ToleranceError) as info:
        ToleranceTable(spec)
    assert (
        str(info.value).startswith(message)
        if "did you" not in message
        else message in str(info.value)
    )
    assert "'0' is not" not in str(info.value) and "'1' is not" not in str(info.value)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            "fp32: atol=1e-5; cosine>=0.999 snr>=30",
            "'cosine>=0.999 snr>=30': separate metric checks with ';' ('cosine>=0.999; snr>=30')",
        ),
        ("fp99: atol=1e-5", "unknown precision 'fp99'; valid precisions: fp32, tf32, fp16,"),
        ("fp32 atol=1e-5", "expected 'PRECISION: atol=... rtol=...' with PRECISION one of"),
    ],
)
def test_ini_line_messages(line, message):
    with pytest.raises(ToleranceError) as info:
        parse_ini_tolerances([line])
    assert str(info.value).startswith(f"trtcompare_tolerances line {line!r}: ")
    assert message in str(info.value)


@pytest.mark.parametrize("text", ["cosine=0.99,,snr=3", "cosine=0.99,", ",cosine=0.99"])
def test_empty_trt_check_entries_are_rejected(text):
    with pytest.raises(ToleranceError) as info:
        parse_metrics([text], "--trt-check")
    assert str(info.value) == f"--trt-check {text!r}: an empty check between commas"


def test_run_on_check_hint_on_the_command_line():
    with pytest.raises(ToleranceError) as info:
        parse_metrics(["cosine=0.99 snr=3"], "--trt-check")
    assert "separate metric checks with ',' ('cosine=0.99,snr=3')" in str(info.value)


def test_bad_trt_check_is_a_usage_error_naming_the_option(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--trt-check", "cosine=0.99,,snr=3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --trt-check 'cosine=0.99,,snr=3': an empty check between commas"]
    )
    _no_crash(result)


# 7. kl and top1 need a last axis of at least 2 values


@pytest.mark.parametrize(
    ("value", "check", "shape"),
    [(np.float32(3), "top1", "()"), (np.ones((3, 1)), "kl", "(3, 1)")],
)
def test_kl_top1_need_a_last_axis(value, check, shape):
    with pytest.raises(InvalidOutputError) as info:
        compare_outputs({"x": value + 1}, {"x": value}, check=check)
    assert str(info.value) == (
        f"{check} needs a last axis of at least 2 values; output 'x' has shape {shape}"
    )
    assert compare_outputs({"x": np.ones((0, 1))}, {"x": np.ones((0, 1))}, check=check).passed


def test_kl_on_a_scalar_fails_the_test_with_one_message(pytester):
    pytester.makepyfile(
        """
        import numpy as np

        def test_scalar(compare):
            compare({"x": np.float32(3)}, {"x": np.float32(2)}, [{"atol": 2}, {"check": "top1"}])
        """
    )
    result = run(pytester, "-rf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*top1 needs a last axis of at least 2 values; output 'x' has shape ()*"]
    )
    _no_crash(result)
