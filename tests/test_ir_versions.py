"""Issue 14 item 1: a model stamped with a newer IR version than the runtime reads loads with
the IR lowered when every opset it imports is supported, and says so; otherwise one message
keeps both versions. The runtime's versions come from the runtime itself."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper

from pytest_trtcompare import runners
from pytest_trtcompare.errors import ModelLoadError
from pytest_trtcompare.runners.onnx_runner import (
    ORT_TABLE,
    onnx_reference_versions,
    onnxruntime_versions,
)

from .onnx_models import layer_chain

ORT = onnxruntime_versions(onnxruntime)
FEED = {"x": np.random.default_rng(3).standard_normal((2, 16)).astype(np.float32)}


def _stamped(ir_version: int, opset: int) -> onnx.ModelProto:
    model = layer_chain()
    model.ir_version = ir_version
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("", opset))
    return model


def test_the_runtime_versions_come_from_onnxruntime_and_match_the_table():
    assert ORT.max_ir >= 10 and ORT.opsets[""] >= 21
    release = ".".join(onnxruntime.__version__.split(".")[:2])
    if release in ORT_TABLE:
        assert (ORT.max_ir, dict(ORT.opsets)) == ORT_TABLE[release]
    ref = onnx_reference_versions()
    assert ref.max_ir == onnx.IR_VERSION and ref.opsets[""] == onnx.defs.onnx_opset_version()


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_newer_ir_with_supported_opsets_loads_lowered_and_says_so(precision):
    newer = _stamped(ORT.max_ir + 1, 17)
    runner = runners.create("onnxrt", newer, precision)
    as_supported = runners.create("onnxrt", _stamped(ORT.max_ir, 17), precision)
    np.testing.assert_array_equal(runner.infer(FEED)["y"], as_supported.infer(FEED)["y"])
    note = runner.describe()["ir_version"]
    assert f"model IR version {ORT.max_ir + 1}" in note
    assert f"loaded as IR version {ORT.max_ir}" in note and "ai.onnx 17" in note
    assert "ir_version" not in as_supported.describe()


def test_onnx_default_stamp_with_a_too_new_opset_keeps_both_versions():
    graph = layer_chain().graph
    model = helper.make_model(graph)  # onnx's own default IR and opset
    if model.ir_version <= ORT.max_ir and model.opset_import[0].version <= ORT.opsets[""]:
        pytest.skip("this onnxruntime reads onnx's default stamp")
    with pytest.raises(ModelLoadError) as info:
        runners.create("onnxrt", model)
    text = str(info.value)
    if model.ir_version > ORT.max_ir:
        assert f"IR version {model.ir_version}" in text
        assert f"IR version <= {ORT.max_ir}" in text
        assert f"ai.onnx opset <= {ORT.opsets['']}" in text
    assert f"opset {model.opset_import[0].version}" in text


def test_onnxruntime_refusal_is_not_cut_before_the_versions():
    with pytest.raises(ModelLoadError) as info:
        runners.create("onnxrt", _stamped(ORT.max_ir, ORT.opsets[""] + 2))
    text = str(info.value)
    assert "onnxruntime cannot load model <ModelProto>" in text
    assert f"(onnxruntime {onnxruntime.__version__})" in text
    assert f"till opset {ORT.opsets['']}" in text and "model_load_utils" not in text


def test_the_reference_evaluator_lowers_and_refuses_the_same_way():
    ref = onnx_reference_versions()
    runner = runners.create("onnxref", _stamped(ref.max_ir + 1, 17))
    assert f"loaded as IR version {ref.max_ir}" in runner.describe()["ir_version"]
    expected = runners.create("onnxref", layer_chain()).infer(FEED)["y"]
    np.testing.assert_array_equal(runner.infer(FEED)["y"], expected)
    with pytest.raises(ModelLoadError, match=rf"opset <= {ref.opsets['']}"):
        runners.create("onnxref", _stamped(ref.max_ir + 1, ref.opsets[""] + 1))


def test_the_json_report_shows_the_lowered_ir(pytester):
    model = _stamped(ORT.max_ir + 1, 17)
    onnx.save(model, str(pytester.path / "newer.onnx"))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.shapes({"x": (2, 16)})
        @pytest.mark.compare_frameworks(
            model="newer.onnx", frameworks=["onnxrt", "onnxref"], reference="onnxref",
        )
        def test_newer():
            pass
        """
    )
    result = pytester.runpytest("--trt-report=report.json")
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "report.json").read_text())
    notes = json.dumps(report)
    assert f"loaded as IR version {ORT.max_ir}" in notes
