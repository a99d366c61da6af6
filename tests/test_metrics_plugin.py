"""Metric checks in pytest: the ini table, --trt-check, marker tolerance lists, the accuracy
summary, the JSON report and JUnit properties, with and without -n 2; and their misuse."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run
from .test_compare_frameworks import CONFTEST

NOISY = """
import numpy as np

rng = np.random.default_rng(0)
e = {"y": rng.standard_normal((4, 50))}
a = {"y": e["y"] + 0.05 * rng.standard_normal((4, 50))}  # cosine about 0.9988

def test_noisy(compare):
    compare(a, e, precision="fp16")

def test_exact(compare):
    compare(e, e, precision="fp16")
"""


def _no_crash(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text
    assert "Traceback" not in text


@pytest.mark.parametrize("xdist", XDIST)
def test_ini_metric_checks_gate_the_precision(pytester, xdist):
    pytester.makeini(
        """
        [pytest]
        trtcompare_tolerances =
            fp16: atol=1 rtol=1; cosine>=0.9999; snr>=20
        """
    )
    pytester.makepyfile(NOISY)
    result = run(pytester, "-rA", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*y (float64 vs float64, shape (4, 50)): 1 of 2 metric checks fail",
            "*  within elemwise tolerance atol=1 (ini) rtol=1 (ini)",
            "*  FAILED cosine 0.998* < 0.9999 (ini; margin *)",
            "*  passed snr 2*dB >= 20 dB (ini; margin *)",
        ]
    )
    result.stdout.fnmatch_lines(["*accuracy summary*", "*FAIL*test_noisy*cosine >= 0.9999*"])
    _no_crash(result)


@pytest.mark.parametrize("xdist", XDIST)
def test_command_line_check_summary_json_and_junit(pytester, xdist):
    pytester.makepyfile(NOISY)
    args = ["--trt-check", "cosine=0.9999", "--trt-report=r.json", "--junitxml=j.xml"]
    result = run(pytester, "--trt-atol=1", "--trt-rtol=1", *args, *xdist)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*FAILED cosine 0.998* < 0.9999 (option; margin *)"])
    summary = [line for line in result.stdout.lines if "test_noisy :: y" in line]
    assert len(summary) == 1 and "FAIL" in summary[0]
    assert "cosine 0.998" in summary[0]
    assert "elemwise atol=1 rtol=1 (option); cosine >= 0.9999 (option)" in summary[0]
    report = json.loads((pytester.path / "r.json").read_text())
    noisy = next(r for r in report["outputs"] if r["test"].endswith("test_noisy"))
    (cosine,) = noisy["metrics"]
    assert cosine["check"] == "cosine" and cosine["threshold"] == 0.9999
    assert cosine["source"] == "option"
    assert noisy["tolerance_sources"] == {"atol": "option", "rtol": "option", "check": "default"}
    assert not cosine["passed"] and 0.998 < cosine["value"] < 0.9999 and cosine["margin"] > 1
    assert noisy["margin"] == cosine["margin"]
    exact = next(r for r in report["outputs"] if r["test"].endswith("test_exact"))
    assert exact["metrics"][0]["value"] == 1.0 and exact["metrics"][0]["passed"]
    properties = {
        (p.get("name"), p.get("value"))
        for case in ET.parse(pytester.path / "j.xml").iter("testcase")
        if case.get("name") == "test_exact"
        for p in case.iter("property")
    }
    assert ("trtcompare.y.cosine", "1.0") in properties
    assert ("trtcompare.y.cosine.margin", "0.0") in properties
    loose = run(pytester, "--trt-atol=1", "--trt-check", "cosine=0.99,top1>=0.75", *xdist)
    loose.assert_outcomes(passed=2)


@pytest.mark.parametrize("xdist", XDIST)
def test_marker_tolerance_list_on_compare_frameworks(pytester, xdist):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compare_frameworks(
            model="model.onnx",
            frameworks=["onnxref", "onnxrt"],
            tolerance=[{"atol": 1, "rtol": 1}, {"check": "snr", "threshold": 200}],
        )
        @pytest.mark.shapes({"x": (4, 8)})
        def test_model(comparison):
            pass

        @pytest.mark.compare_frameworks(
            model="model.onnx",
            frameworks=["onnxref", "onnxrt"],
            tolerance={"y": [{"check": "cosine", "threshold": 0.999}, {"check": "top1"}]},
        )
        @pytest.mark.shapes({"x": (4, 8)})
        def test_metrics_only(comparison):
            assert comparison.outputs["y"].metric("top1").value == 1.0
        """
    )
    result = run(pytester, "--trt-precision", "fp16", "-v", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*FAILED snr * dB < 200 dB (marker; margin *)"])
    _no_crash(result)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--trt-check", "cosine=1.5"],
            "*--trt-check 'cosine=1.5': 'cosine=1.5': threshold of check='cosine' must be in "
            "[[]-1, 1], got 1.5",
        ),
        (["--trt-check", "l2=-1"], "*threshold of check='l2' must be finite and >= 0, got -1.0"),
        (["--trt-check", "cosinus=0.9"], "*--trt-check 'cosinus=0.9': 'cosinus=0.9' is not a "),
        (["--trt-check", "snr=loud"], "*threshold 'loud' is not a number"),
        (["--trt-check", "l2>=1e-3"], "*l2 is a maximum: write l2<=1e-3 instead of 'l2>=1e-3'"),
    ],
)
def test_bad_command_line_checks_are_usage_errors(pytester, args, message):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}*"])
    _no_crash(result)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("fp16: atol=1; cosine>=2", "*threshold of check='cosine' must be in [[]-1, 1], got 2.0"),
        ("fp16: atol=1 cosine>=0.9", "*'cosine>=0.9' is a metric check; put it after the fields*"),
        ("fp16: atol=1; kl>=0.1", "*kl is a maximum: write kl<=0.1*"),
        ("fp16: atol=1; cosine; cosine=0.9", "*metric check 'cosine' given twice"),
        ("fp16: atol=1;", "*'' is not a metric check*"),
    ],
)
def test_bad_ini_metric_checks_are_usage_errors(pytester, line, message):
    pytester.makeini(f"[pytest]\ntrtcompare_tolerances =\n    {line}\n")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: trtcompare_tolerances line*{message}"])
    _no_crash(result)


def test_bad_marker_threshold_is_an_error_of_its_test_naming_it(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compare_frameworks(
            model="model.onnx",
            frameworks=["onnxrt"],
            tolerance={"check": "cosine", "threshold": 1.5},
        )
        def test_marker(comparison):
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_marker: @pytest.mark.compare_frameworks(tolerance=...): tolerance: threshold of "
            "check='cosine' must be in [[]-1, 1], got 1.5"
        ]
    )
    _no_crash(result)


@pytest.mark.parametrize("xdist", XDIST)
def test_a_misspelt_tolerance_field_is_named_not_its_neighbour(pytester, xdist):
    """{"atol": ..., "rtoll": ...} names 'rtoll', not 'atol' as an output's tolerance."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compare_frameworks(
            model="model.onnx", frameworks=["onnxrt"], tolerance={"atol": 1e-3, "rtoll": 1e-3}
        )
        def test_marker(comparison):
            pass
        """
    )
    result = pytester.runpytest(*xdist)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_marker: @pytest.mark.compare_frameworks(tolerance=...): tolerance: 'rtoll' is "
            "not a tolerance field; did you mean 'rtol'?"
        ]
    )
    _no_crash(result)


@pytest.mark.parametrize("xdist", XDIST)
def test_bad_thresholds_in_calls_fail_those_tests_clearly(pytester, xdist):
    pytester.makepyfile(
        """
        import numpy as np

        def test_call(compare):
            compare({"y": np.ones(3)}, {"y": np.ones(3)}, check="top1", threshold="high")

        def test_two_statistics(compare):
            compare({"y": np.ones(3)}, {"y": np.ones(3)}, [{"check": "max"}, {"check": "mean"}])
        """
    )
    result = run(pytester, "-rf", *xdist)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*threshold must be a number, got 'high' (str)*"])
    result.stdout.fnmatch_lines(
        [
            "*a sequence takes one elementwise/statistic tolerance and any metric checks; got max, "
            "mean*"
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str()
