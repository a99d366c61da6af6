"""Models with If / Loop bodies at reduced precision, as the user meets them (issue 35, item
3): a detection model's post-processing keeps NonMaxSuppression in float32 inside an If
branch; its fp16 / bf16 conversion loads and runs on onnxruntime and the reference
evaluator, and what cannot run here skips with the reason, never an error blaming the file."""

from __future__ import annotations

import onnx
import pytest

from .onnx_models import branches_into_nms
from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run

TEST = """
import pytest

@pytest.mark.compare_frameworks(model="nms.onnx", frameworks=["onnxrt", "onnxref"])
def test_onnxref_targets():
    pass

@pytest.mark.compare_frameworks(
    model="nms.onnx", frameworks=["onnxrt", "onnxref"], reference="onnxref"
)
def test_onnxrt_targets():
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_if_branches_with_float32_nodes_run_at_every_precision(pytester, xdist):
    onnx.save(branches_into_nms(), str(pytester.path / "nms.onnx"))
    pytester.makepyfile(test_nms=TEST)
    result = run(pytester, "-rs", "-v", "--trt-precision=fp32,fp16,bf16", *xdist)
    result.assert_outcomes(passed=5, skipped=1)
    result.stdout.fnmatch_lines_random(
        [
            "*test_onnxrt_targets[[]onnxrt-fp16[]]*",
            "SKIPPED [[]1[]] test_nms.py:*: onnxruntime CPU has no bfloat16 kernel for Greater, "
            "ReduceSum (onnxrt bf16 of */nms.onnx, converted by pytest-trtcompare*",
        ]
    )
    assert "cannot load model" not in result.stdout.str()
