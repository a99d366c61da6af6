"""Mixed fp16/bf16 models with named nodes kept in fp32 (runners.precision.convert_mixed)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from pytest_trtcompare.compare import Tolerance, compare_outputs
from pytest_trtcompare.errors import ModelLoadError
from pytest_trtcompare.runners import precision
from pytest_trtcompare.runners.onnx_model import load_model

from .onnx_models import make
from .planted_models import check_written, planted, run


@pytest.mark.parametrize("level", ["fp16", "bf16"])
def test_mixed_model_keeps_adjacent_fp32_nodes_in_fp32(level):
    mixed = precision.convert_mixed(load_model(planted(2, 2)), level, ["plant_add", "plant_sub"])
    check_written(mixed)
    add, sub = (
        next(n for n in mixed.graph.node if n.name == name) for name in ("plant_add", "plant_sub")
    )
    assert list(sub.input) == [add.output[0], "plant_sub_c"]  # no Cast round trip between
    casts = [n for n in mixed.graph.node if n.op_type == "Cast"]
    assert not any(n.input[0] == add.output[0] for n in casts)
    weight = next(t for t in mixed.graph.initializer if t.name == "plant_add_c")
    assert weight.data_type == TensorProto.FLOAT
    meta = {p.key: p.value for p in mixed.metadata_props}
    assert meta[precision.MIXED_KEY] == level
    converted = precision.convert(load_model(mixed), level)  # used as is, not converted again
    assert converted.proto is not None and "2 nodes in fp32" in converted.route
    fp32, full = (
        run(planted(2, 2)),
        run(precision.convert(load_model(planted(2, 2)), level).proto),
    )
    tolerance = Tolerance.for_precision(level)
    assert not compare_outputs(full, fp32, tolerance).passed
    assert compare_outputs(run(mixed), fp32, tolerance).passed


def test_first_node_kept_reads_the_fp32_input_and_last_writes_the_fp32_output():
    model = planted(0, 0)
    mixed = precision.convert_mixed(load_model(model), "fp16", ["plant_add", "relu_out"])
    check_written(mixed)
    add = next(n for n in mixed.graph.node if n.name == "plant_add")
    assert add.input[0] == "x"
    producer = next(n for n in mixed.graph.node if "y" in n.output)
    assert producer.op_type == "Cast"  # whatever the converter of this onnxruntime names it
    relu = next(n for n in mixed.graph.node if n.name == "relu_out")
    assert producer.input[0] in relu.output  # the fp32 Relu output, copied


def test_unknown_node_names_are_an_error_naming_them():
    with pytest.raises(ModelLoadError, match=r"no node\(s\) named \['nope'\]"):
        precision.convert_mixed(load_model(planted(1, 1)), "fp16", ["plant_add", "nope"])


def test_a_tensor_read_by_two_kept_nodes_gets_one_cast():
    """The converter makes one `<t>_cast_to_fp32_node` per kept reader: same name, same output."""
    nodes = [
        helper.make_node("Tanh", ["x"], ["t"], name="tanh"),
        helper.make_node("Sigmoid", ["t"], ["a"], name="left"),
        helper.make_node("Relu", ["t"], ["b"], name="right"),
        helper.make_node("Sum", ["a", "b", "t"], ["y"], name="sum"),
    ]
    graph = helper.make_graph(
        nodes,
        "fan-out",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])],
    )
    model = make(graph)
    for keep in (["left", "right"], ["left", "right", "sum"], ["tanh", "right"]):
        mixed = precision.convert_mixed(load_model(model), "fp16", keep)
        check_written(mixed)
        names = [node.name for node in mixed.graph.node]
        assert len(names) == len(set(names)), keep
        x = {"x": np.linspace(-2, 2, 8, dtype=np.float32)}
        got = ReferenceEvaluator(mixed).run(None, x)[0]
        want = ReferenceEvaluator(model).run(None, x)[0]
        np.testing.assert_allclose(got, want, atol=1e-2, rtol=1e-2)
