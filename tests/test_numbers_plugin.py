"""Numbers that tell the truth (issue 26) as a pytest user sees them: NaN, shape and name
failures in the report, the accuracy summary, the JSON report and JUnit; each tolerance's
source (default, ini, option, marker, call) in the report, the summary and the JSON report;
with and without -n 2. And in the `trtcompare` console script."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from pytest_trtcompare.cli import main

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run
from .test_compare_frameworks import CONFTEST

FAILURES = """
import numpy as np

e = (np.arange(6, dtype=np.float32) / 7).reshape(2, 3)

def test_nan(compare):
    a = e.copy()
    a[0, 0] = a[0, 1] = a[1, 2] = np.nan
    compare({"y": a}, {"y": e})

def test_shape(compare):
    compare({"y": np.zeros((2, 3))}, {"y": np.zeros((2, 4))})

def test_name(compare):
    compare({"x": e}, {"y": e})
"""


def _summary(result: pytest.RunResult, test: str) -> str:
    rows = [line for line in result.stdout.lines if f"{test} :: " in line and "FAIL" in line]
    assert len(rows) == 1, result.stdout.str()
    return rows[0]


def _no_crash(result: pytest.RunResult) -> None:
    text = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text


@pytest.mark.parametrize("xdist", XDIST)
def test_non_numeric_failures_say_what_they_are(pytester, xdist):
    pytester.makepyfile(FAILURES)
    result = run(pytester, "--trt-report=r.json", "--junitxml=j.xml", *xdist)
    result.assert_outcomes(failed=3)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "E       y (float32 vs float32, shape (2, 3)): 3 / 6 elements (50%) exceed",
            "E         elemwise tolerance atol=1e-05 (default) rtol=1e-05 (default)",
            "E         NaN in actual at 3 positions, first (0, 0)",
            "E         the other 3 elements: no error",
        ]
    )
    assert "greatest abs error 0" not in result.stdout.str()
    assert "nanx" not in result.stdout.str() and "see nan_equal" not in result.stdout.str()
    nan_row = _summary(result, "test_nan")
    assert "NaN in actual at 3 positions, first (0, 0)" in nan_row
    assert "elemwise atol=1e-05 rtol=1e-05 (default)" in nan_row and "abs 0" not in nan_row
    shape_row = _summary(result, "test_shape")
    assert "shape (2, 3) vs (2, 4)" in shape_row and "abs 0" not in shape_row
    names = [line for line in result.stdout.lines if "test_name :: " in line and "FAIL" in line]
    assert len(names) == 2
    assert any("missing output 'y' in actual" in row and row.endswith("  -") for row in names)
    assert any("missing output 'x' in expected" in row and row.endswith("  -") for row in names)
    assert not any("atol=0 rtol=0" in row for row in names)

    records = {
        (r["test"].split("::")[-1], r["output"]): r
        for r in json.loads((pytester.path / "r.json").read_text())["outputs"]
    }
    nan = records[("test_nan", "y")]
    assert nan["failure"] == "NaN in actual at 3 positions, first (0, 0)"
    assert nan["max_abs_error"] == 0.0  # three elements compared, all equal
    shape = records[("test_shape", "y")]
    assert shape["failure"] == "shape (2, 3) vs (2, 4)"
    assert shape["max_abs_error"] is None and shape["max_rel_error"] is None
    missing = records[("test_name", "y")]
    assert missing["failure"] == "missing output 'y' in actual"
    assert (missing["atol"], missing["rtol"], missing["check"]) == (None, None, None)
    assert records[("test_name", "x")]["failure"] == "missing output 'x' in expected"

    properties = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(pytester.path / "j.xml").iter("testcase")
    }
    assert properties["test_shape"]["trtcompare.y.failure"] == "shape (2, 3) vs (2, 4)"
    assert "trtcompare.y.max_abs" not in properties["test_shape"]
    assert properties["test_name"]["trtcompare.y.failure"] == "missing output 'y' in actual"
    assert properties["test_nan"]["trtcompare.y.failure"].startswith("NaN in actual at 3 ")
    _no_crash(result)


SOURCES = """
import numpy as np
import pytest

e = {"y": np.linspace(1.0, 2.0, 8)}
a = {"y": e["y"] + 0.5}

def test_default(compare):
    compare(a, e, precision="fp16")

def test_call(compare):
    compare(a, e, precision="fp16", atol=0.25)

def test_golden_call(golden):
    golden.check(a, tolerance={"rtol": 0.125})
"""


def _line(result: pytest.RunResult, test: str, needle: str) -> str:
    section = result.stdout.str().split(f"_ {test} _")[1]
    return next(line for line in section.splitlines() if needle in line)


@pytest.mark.parametrize("xdist", XDIST)
def test_each_tolerance_names_its_source(pytester, xdist):
    pytester.makeini(
        """
        [pytest]
        trtcompare_tolerances =
            fp16: atol=1e-4
        """
    )
    pytester.makepyfile(SOURCES)
    (pytester.path / "goldens").mkdir()
    run(pytester, "--trt-update-goldens", "-p", "no:randomly")
    (pytester.path / "test_each_tolerance_names_its_source.py").write_text(
        SOURCES.replace("golden.check(a,", "golden.check({'y': a['y'] * 2},")
    )
    result = run(pytester, "--trt-report=r.json", "--trt-rtol=0.001", *xdist)
    result.assert_outcomes(failed=3)
    assert _line(result, "test_default", "elemwise tolerance") == (
        "E         elemwise tolerance atol=0.0001 (ini) rtol=0.001 (option)"
    )
    assert _line(result, "test_call", "elemwise tolerance") == (
        "E         elemwise tolerance atol=0.25 (call) rtol=0.001 (option)"
    )
    assert _line(result, "test_golden_call", "elemwise tolerance") == (
        "E         elemwise tolerance atol=1e-05 (default) rtol=0.001 (option)"
    )
    assert "elemwise atol=0.0001 rtol=0.001 (atol ini, rtol option)" in _summary(
        result, "test_default"
    )
    records = {
        r["test"].split("::")[-1]: r
        for r in json.loads((pytester.path / "r.json").read_text())["outputs"]
    }
    assert records["test_default"]["tolerance_sources"] == {
        "atol": "ini",
        "rtol": "option",
        "check": "default",
    }
    assert records["test_call"]["tolerance_sources"]["atol"] == "call"
    assert records["test_golden_call"]["tolerance_sources"]["atol"] == "default"
    plain = run(pytester, "--trt-report=r.json", *xdist)
    assert _line(plain, "test_golden_call", "elemwise tolerance") == (
        "E         elemwise tolerance atol=1e-05 (default) rtol=0.125 (call)"
    )
    assert "elemwise atol=0.25 rtol=0.01 (atol call, rtol default)" in _summary(plain, "test_call")
    _no_crash(result)


@pytest.mark.parametrize("xdist", XDIST)
def test_marker_and_check_error_stat_sources(pytester, xdist):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compare_frameworks(
            model="model.onnx", frameworks=["onnxref", "onnxrt"],
            tolerance={"y": {"atol": 1e-9, "rtol": 1e-9}},
        )
        @pytest.mark.shapes({"x": (4, 8)})
        def test_model(comparison):
            pass
        """
    )
    result = run(pytester, "--trt-precision", "fp16", "--trt-report=r.json", *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["  elemwise tolerance atol=1e-09 (marker) rtol=1e-09 (marker)"])
    assert "elemwise atol=1e-09 rtol=1e-09 (marker)" in _summary(
        result, "test_model[onnxref-fp16-bs4]"
    )
    (record,) = json.loads((pytester.path / "r.json").read_text())["outputs"]
    assert record["tolerance_sources"] == {"atol": "marker", "rtol": "marker", "check": "default"}
    stat = run(pytester, "--trt-precision", "fp16", "--trt-check-error-stat=mean", *xdist)
    stat.assert_outcomes(failed=1)
    stat.stdout.fnmatch_lines(["  mean tolerance (option) atol=1e-09 (marker) rtol=1e-09 (marker)"])
    assert "mean atol=1e-09 rtol=1e-09 (atol marker, rtol marker, check option)" in _summary(
        stat, "test_model[onnxref-fp16-bs4]"
    )
    _no_crash(stat)


# the console script


@pytest.fixture
def nan_pair(tmp_path):
    expected = {"y": (np.arange(6, dtype=np.float32) / 7).reshape(2, 3)}
    actual = {"y": expected["y"].copy()}
    actual["y"][1, 1] = np.nan
    np.savez(tmp_path / "expected.npz", **expected)
    np.savez(tmp_path / "actual.npz", **actual)
    return tmp_path


def test_trtcompare_diff_and_check_say_nan_and_the_option(nan_pair, capsys):
    actual, expected = str(nan_pair / "actual.npz"), str(nan_pair / "expected.npz")
    assert main(["diff", actual, expected, "--atol", "0.5"]) == 1
    out = capsys.readouterr().out
    assert "  elemwise tolerance atol=0.5 (option) rtol=1e-05 (default)\n" in out
    assert "  NaN in actual at 1 position, first (1, 1)\n" in out
    golden = str(nan_pair / "y.safetensors")
    assert main(["check", golden, expected, "--update"]) == 0
    capsys.readouterr()
    assert main(["check", golden, actual, "--precision", "fp16", "--rtol", "0.5"]) == 1
    out = capsys.readouterr().out
    assert "  elemwise tolerance atol=0.01 (default) rtol=0.5 (option)\n" in out
    assert "  NaN in actual at 1 position, first (1, 1)\n" in out


def test_trtcompare_show_prints_values_that_read_back_and_counts_nan(nan_pair, capsys):
    assert main(["show", str(nan_pair / "actual.npz")]) == 0
    out = capsys.readouterr().out
    assert "output y: float32 (2, 3)  min 0  max 0.71428573  mean 0.3143  NaN at 1 of 6" in out
