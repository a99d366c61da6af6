"""The range scan in a failing fp16 / bf16 report (session/cases.py `CaseRunner._explained`):
the probable causes, always, for a target that runs the marker's ONNX model converted; with
--trt-debug-precision the search's line after them; nothing where the scan names nothing."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from .onnx_models import make
from .planted_models import planted
from .pytester_helpers import XDIST, run

TEST = (
    "import pytest\n\n"
    "@pytest.mark.compare_frameworks(model='{model}', frameworks=['onnxref', 'onnxrt'])\n"
    "def test_it():\n    pass\n"
)
ADD = (
    "probable cause: plant_add (Add) adds operands up to 3e+03 to others that keep fewer than "
    "5 of float16's 11 bits in 100% of its elements, which a cancellation downstream needs"
)
SUB = (
    "probable cause: plant_sub (Sub) cancels operands up to 3e+03 to a result that keeps fewer "
    "than 5 of float16's 11 bits in 100% of its elements: their rounding is most of it"
)


def _overflow() -> onnx.ModelProto:
    """x[1, 8] -> scale (* 2e5, past 65504 at fp16) -> back (* 1e-5) -> y."""
    weights = [
        numpy_helper.from_array(np.full(8, 2.0e5, np.float32), "big"),
        numpy_helper.from_array(np.full(8, 1.0e-5, np.float32), "small"),
    ]
    graph = helper.make_graph(
        [
            helper.make_node("Mul", ["x", "big"], ["scaled"], name="scale"),
            helper.make_node("Mul", ["scaled", "small"], ["y"], name="back"),
        ],
        "overflow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        weights,
    )
    return make(graph)


@pytest.mark.parametrize("xdist", XDIST)
def test_a_failing_fp16_report_names_the_probable_causes(pytester, xdist):
    onnx.save(planted(before=6, after=6), str(pytester.path / "planted.onnx"))
    pytester.makepyfile(test_p=TEST.format(model="planted.onnx"))
    result = run(pytester, "--trt-precision=fp16", *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*onnxref-fp16 vs onnxrt-fp32: 1 of 1 outputs out of tolerance: y*", ADD, SUB]
    )
    assert "precision debugging" not in result.stdout.str()  # the search only when asked
    result = run(pytester, "--trt-precision=fp16", "--trt-debug-precision", *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            ADD,
            SUB,
            "precision debugging (onnxref fp16, 15 candidate nodes): keep these 2 nodes in fp32: "
            "plant_add (Add), plant_sub (Sub) (4 runs; the mixed model passes)",
        ]
    )


@pytest.mark.parametrize("xdist", XDIST)
def test_an_overflow_is_named_with_its_largest_value(pytester, xdist):
    onnx.save(_overflow(), str(pytester.path / "overflow.onnx"))
    pytester.makepyfile(test_o=TEST.format(model="overflow.onnx"))
    result = run(pytester, "--trt-precision=fp16,bf16", *xdist)
    result.assert_outcomes(passed=1, failed=1)  # bf16 holds 2e5: it passes
    result.stdout.fnmatch_lines(
        ["probable cause: scale (Mul) reaches *e+05, past float16's 65504", "*1 failed, 1 passed*"]
    )


@pytest.mark.parametrize("xdist", XDIST)
def test_a_failure_the_scan_cannot_explain_says_nothing_of_it(pytester, xdist):
    """A tolerance no bf16 run meets, on a model whose values bf16 holds: the report has no
    probable cause line."""
    onnx.save(_overflow(), str(pytester.path / "overflow.onnx"))
    pytester.makepyfile(
        test_n="import pytest\n\n"
        "@pytest.mark.compare_frameworks(model='overflow.onnx', frameworks=['onnxref', 'onnxrt'],"
        " tolerance={'atol': 0, 'rtol': 0})\n"
        "def test_tight():\n    pass\n"
    )
    result = run(pytester, "--trt-precision=bf16", *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*onnxref-bf16 vs onnxrt-fp32: 1 of 1 outputs out of tolerance*"])
    assert "probable cause" not in result.stdout.str()
