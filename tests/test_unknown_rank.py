"""Issue 14 item 3: an input whose value info has no shape (unknown rank, as in Polygraphy's
attention test models) accepts any shape; synthetic data asks for one by name."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from pytest_trtcompare import runners
from pytest_trtcompare.errors import FeedError, InputDataError
from pytest_trtcompare.inputs import synthetic_feeds
from pytest_trtcompare.runners.base import TensorSpec

from .onnx_models import OPSET


def attention_like():
    """q, k of unknown rank -> softmax(q @ k^T) (shapes only at run time)."""
    nodes = [
        helper.make_node("Transpose", ["k"], ["kt"], perm=[1, 0]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["y"], axis=-1),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("q", "k")]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])
    graph = helper.make_graph(nodes, "attention", inputs, [output])
    # onnx.checker wants a shape on graph inputs; such models exist and onnxruntime runs them
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)


@pytest.mark.parametrize("framework", ["onnxrt", "onnxref"])
def test_unknown_rank_accepts_any_shape(framework):
    runner = runners.create(framework, attention_like())
    assert runner.input_specs()[0] == TensorSpec("q", "float32", None)
    assert runner.input_specs()[0].describe() == "q: float32[...]"
    rng = np.random.default_rng(0)
    for rows in (2, 5):
        feed = {
            "q": rng.standard_normal((rows, 4)).astype(np.float32),
            "k": rng.standard_normal((3, 4)).astype(np.float32),
        }
        assert runner.infer(feed)["y"].shape == (rows, 3)
    with pytest.raises(FeedError, match="input 'q' is float64, the model expects float32"):
        runner.infer({"q": np.ones((2, 4)), "k": np.ones((3, 4), np.float32)})


def test_synthetic_data_for_unknown_rank_needs_a_shape():
    specs = runners.create("onnxrt", attention_like()).input_specs()
    with pytest.raises(InputDataError, match=r"input q: float32\[\.\.\.\] has no known rank"):
        synthetic_feeds(specs)
    feed = synthetic_feeds(specs, shapes={"q": (2, 4), "k": (3, 4)})[0]
    assert feed["q"].shape == (2, 4) and feed["k"].shape == (3, 4)


def test_marker_with_shapes_compares_unknown_rank_models(pytester):
    import onnx

    onnx.save(attention_like(), str(pytester.path / "attention.onnx"))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.shapes({"q": (2, 4), "k": (3, 4)})
        @pytest.mark.compare_frameworks(
            model="attention.onnx", frameworks=["onnxrt", "onnxref"], reference="onnxref"
        )
        def test_attention():
            pass
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)
