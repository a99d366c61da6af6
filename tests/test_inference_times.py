"""Issue 25 item 8: each runner's inference time (the median over a test's iterations) in the
accuracy summary, the JSON report and the JUnit properties, as Polygraphy logs it per runner.
What is asserted is that they are there and where, never their values."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.runners import median_ms

from .onnx_models import layer_chain
from .pytester_helpers import XDIST_SLOW, run

ROOT = Path(__file__).parents[1]

SUITE = """
import pytest
from tests.onnx_models import layer_chain

@pytest.mark.compare_frameworks(
    model=layer_chain(seed=7), frameworks=["onnxrt", "onnxref"], iterations=3
)
@pytest.mark.shapes({"x": (2, 16)}, {"x": (3, 16)})
def test_models():
    pass

def test_plain(compare):
    compare([1.0, 2.0], [1.0, 2.0])
"""

MS = r"\d+(\.\d+)?(e-\d+)?"


def test_a_runner_records_how_long_each_inference_took():
    runner = runners.create("onnxrt", layer_chain(seed=3))
    feed = {"x": np.ones((2, 16), np.float32)}
    for _ in range(3):
        runner.infer(feed)
    assert len(runner.inference_times) == 3 and all(t > 0 for t in runner.inference_times)
    assert median_ms([0.001, 0.003, 0.002]) == 2.0 and median_ms([]) is None


def test_an_isolated_runner_reports_the_workers_time():
    """The framework's time in the worker, without the pipe's round trip."""
    runner = runners.create("onnxrt", layer_chain(seed=3), isolate=True)
    try:
        start = time.perf_counter()
        runner.infer({"x": np.ones((2, 16), np.float32)})
        wall = time.perf_counter() - start
    finally:
        runner.close()
    (seconds,) = runner.inference_times
    assert 0 < seconds < wall


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_inference_times_in_the_summary_the_json_report_and_junit(pytester, xdist):
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n")
    pytester.makepyfile(test_times=SUITE)
    result = run(pytester, "--junitxml=junit.xml", "--trt-report=report.json", *xdist)
    result.assert_outcomes(passed=3)
    result.stdout.re_match_lines(
        [
            r"=+ accuracy summary =+",
            rf"inference time, median per test: onnxref-fp32 {MS} ms \(2 tests\), "
            rf"onnxrt-fp32 {MS} ms \(2 tests\)",
        ]
    )
    report = json.loads((pytester.path / "report.json").read_text())
    assert set(report["inference_ms"]) == {"onnxref-fp32", "onnxrt-fp32"}
    assert {t["tests"] for t in report["inference_ms"].values()} == {2}
    by_test = {r["test"]: r for r in report["outputs"]}
    for test in ("test_models[onnxref-fp32-bs2]", "test_models[onnxref-fp32-bs3]"):
        assert by_test[test]["target_ms"] > 0 and by_test[test]["reference_ms"] > 0
    assert by_test["test_plain"]["target_ms"] is None  # no runner ran
    assert all("inference_ms" not in d for d in report["runners"].values())  # a test's
    cases = ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")
    names = {case.get("name"): [p.get("name") for p in case.iter("property")] for case in cases}
    for test in ("test_models[onnxref-fp32-bs2]", "test_models[onnxref-fp32-bs3]"):
        timing = [n for n in names[test] if n.endswith(".inference_ms")]
        assert timing == [
            "trtcompare.onnxref-fp32.inference_ms",
            "trtcompare.onnxrt-fp32.inference_ms",
        ]
    assert not [n for n in names["test_plain"] if n.endswith(".inference_ms")]


def test_no_inference_time_line_without_runners(pytester):
    pytester.makepyfile(
        test_plain="""
        def test_plain(compare):
            compare([1.0], [1.0])
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert "inference time" not in result.stdout.str()
