"""Issue 14 item 4: sequence and optional inputs and outputs: runners feed and return them
(lists of arrays, None for an empty optional) and the comparison goes element by element."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from pytest_trtcompare import compare_outputs, runners
from pytest_trtcompare.errors import FeedError
from pytest_trtcompare.runners.base import TensorSpec

from .onnx_models import make

X = np.arange(12, dtype=np.float32).reshape(6, 2)


def split_model():
    """x[6, 2] -> SplitToSequence (chunks of 2 rows) -> seq; ConcatFromSequence -> y."""
    nodes = [
        helper.make_node("SplitToSequence", ["x", "two"], ["seq"], axis=0),
        helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0),
    ]
    seq_type = helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, [None, 2])
    graph = helper.make_graph(
        nodes,
        "split",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 2])],
        [seq_type, helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 2])],
        [helper.make_tensor("two", TensorProto.INT64, [], [2])],
    )
    return make(graph)


def concat_model():
    """A sequence input: seq (list of float32[?, 2]) -> ConcatFromSequence -> y."""
    graph = helper.make_graph(
        [helper.make_node("ConcatFromSequence", ["seq"], ["y"], axis=0)],
        "concat",
        [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])],
    )
    return make(graph)


@pytest.mark.parametrize("framework", ["onnxrt", "onnxref"])
@pytest.mark.parametrize("isolate", [False, True])
def test_sequence_outputs_come_back_as_lists(framework, isolate):
    runner = runners.create(framework, split_model(), isolate=isolate)
    outputs = runner.infer({"x": X})
    assert isinstance(outputs["seq"], list) and len(outputs["seq"]) == 3
    np.testing.assert_array_equal(outputs["seq"][1], X[2:4])
    result = compare_outputs(outputs, {"seq": list(np.split(X, 3)), "y": X})
    assert result.passed
    assert list(result.outputs) == ["seq", "seq[0]", "seq[1]", "seq[2]", "y"]
    runner.close()


@pytest.mark.parametrize("framework", ["onnxrt", "onnxref"])
@pytest.mark.parametrize("isolate", [False, True])
def test_sequence_inputs_are_fed_as_lists(framework, isolate):
    runner = runners.create(framework, concat_model(), isolate=isolate)
    spec = runner.input_specs()[0]
    assert spec == TensorSpec("seq", "float32", (None, 2), "sequence")
    assert spec.describe() == "seq: sequence<float32[?, 2]>"
    parts = [X[:1], X[1:4]]
    np.testing.assert_array_equal(runner.infer({"seq": parts})["y"], X[:4])
    with pytest.raises(FeedError, match=r"input 'seq\[1\]' is float64, the model expects"):
        runner.infer({"seq": [X[:1], X[1:4].astype(np.float64)]})
    with pytest.raises(FeedError, match=r"input 'seq' is ndarray, the model expects seq: seq"):
        runner.infer({"seq": X})
    runner.close()


def test_a_shorter_sequence_fails_with_both_lengths():
    parts = list(np.split(X, 3))
    result = compare_outputs({"seq": parts[:2]}, {"seq": parts})
    assert not result.passed
    assert result.outputs["seq"].problem == (
        "sequence of 2 elements, expected 3 (the first 2 are compared)"
    )
    assert result.outputs["seq[1]"].passed
    assert "seq: sequence of 2 elements, expected 3" in result.report()


def test_elements_are_compared_with_the_same_report():
    parts = list(np.split(X, 3))
    wrong = [parts[0], parts[1] + np.float32(0.5), parts[2]]
    result = compare_outputs({"seq": wrong}, {"seq": parts}, atol=0.1, rtol=0)
    assert [out.name for out in result.failed_outputs] == ["seq[1]"]
    assert result.outputs["seq[1]"].max_abs_error == pytest.approx(0.5)
    assert "seq[1] (float32 vs float32, shape (2, 2))" in result.report()


def test_optionals_empty_on_both_sides_pass_on_one_side_fail():
    assert compare_outputs({"opt": None, "y": X}, {"opt": None, "y": X}).passed
    one_side = compare_outputs({"opt": None}, {"opt": X})
    assert not one_side.passed
    assert one_side.outputs["opt"].problem == "empty optional, expected tensor"
    other_side = compare_outputs({"opt": [X]}, {"opt": None})
    assert other_side.outputs["opt"].problem == "sequence of 1, expected empty optional"


def test_a_list_of_numbers_is_still_an_array():
    result = compare_outputs({"y": [1.0, 2.0]}, {"y": np.array([1.0, 2.0])})
    assert result.passed and list(result.outputs) == ["y"]


def test_names_restrict_to_a_sequence_and_its_elements():
    parts = list(np.split(X, 3))
    result = compare_outputs({"seq": parts, "y": X}, {"seq": parts, "y": X + 1}, names=["seq"])
    assert result.passed and list(result.outputs) == ["seq", "seq[0]", "seq[1]", "seq[2]"]


def test_a_marker_compares_a_sequence_model(pytester):
    import onnx

    onnx.save(split_model(), str(pytester.path / "split.onnx"))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compare_frameworks(
            model="split.onnx", frameworks=["onnxrt", "onnxref"], reference="onnxref"
        )
        def test_split():
            pass
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
