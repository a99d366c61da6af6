"""Issue 14 item 5: the reference evaluator runs fp32 models whose nodes are out of
topological order, and an fp16 model failing inside onnx's function bodies skips as an
unsupported precision naming the op."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from pytest_trtcompare import runners
from pytest_trtcompare.errors import PrecisionUnsupported

from .onnx_models import layer_chain, make

X = np.random.default_rng(1).standard_normal((2, 3, 4, 4)).astype(np.float32)


def unordered():
    """y = Relu(Neg(x)) with the Relu listed first (valid ONNX needs order; exporters slip)."""
    nodes = [helper.make_node("Relu", ["a"], ["y"]), helper.make_node("Neg", ["x"], ["a"])]
    graph = helper.make_graph(
        nodes,
        "unordered",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_nodes_out_of_order_run_sorted(precision):
    model = unordered()
    runner = runners.create("onnxref", model, precision)
    y = runner.infer({"x": np.array([-1.0, 2.0], np.float32)})["y"]
    np.testing.assert_array_equal(y, [1.0, 0.0])
    assert [n.op_type for n in model.graph.node] == ["Relu", "Neg"]  # the user's model as is


def test_an_ordered_model_is_used_as_given():
    model = layer_chain()
    assert runners.create("onnxref", model).proto is model


def mvn():
    graph = helper.make_graph(
        [helper.make_node("MeanVarianceNormalization", ["x"], ["y"])],
        "mvn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(X.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(X.shape))],
    )
    return make(graph)


def test_fp16_failing_in_a_function_body_is_an_unsupported_precision():
    runner = runners.create("onnxref", mvn(), "fp16")
    with pytest.raises(PrecisionUnsupported) as info:
        runner.infer({"x": X})
    text = str(info.value)
    assert "onnxref fp16: onnx's reference evaluator cannot run MeanVarianceNormalization" in text
    assert "function body" in text and "float16 != float32" in text
    assert runners.create("onnxref", mvn()).infer({"x": X})["y"].shape == X.shape


def test_the_marker_skips_it_with_the_reason(pytester):
    import onnx

    onnx.save(mvn(), str(pytester.path / "mvn.onnx"))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compare_frameworks(
            model="mvn.onnx", frameworks=["onnxref", "onnxrt"], reference="onnxrt"
        )
        def test_mvn():
            pass
        """
    )
    result = pytester.runpytest("-rs", "--trt-precision", "fp16")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*cannot run MeanVarianceNormalization*"])
