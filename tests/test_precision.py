"""fp16 / bf16 ONNX conversion: the converter's known traps, caching, and the ModelOpt route."""

from __future__ import annotations

import importlib.machinery
import sys
import types

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare import compare_outputs, runners
from pytest_trtcompare.errors import PrecisionUnsupported
from pytest_trtcompare.runners import float16_repair, precision
from pytest_trtcompare.runners.onnx_model import load_model

from .onnx_models import branches_into_nms, make


def tricky_model() -> onnx.ModelProto:
    """x feeds two nodes; an explicit Cast(to=FLOAT); an output that another node consumes."""
    w = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "W")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["h"]),
        helper.make_node("Mul", ["x", "x"], ["sq"]),  # second consumer of x
        helper.make_node("Cast", ["h"], ["hc"], to=TensorProto.FLOAT),
        helper.make_node("Tanh", ["hc"], ["t"]),  # graph output ...
        helper.make_node("Sigmoid", ["t"], ["s"]),  # ... also consumed here
    ]
    graph = helper.make_graph(
        nodes,
        "tricky",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [
            helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("sq", TensorProto.FLOAT, [2, 4]),
        ],
        [w],
    )
    return make(graph)


FEED = {"x": np.random.default_rng(0).uniform(-1, 1, (2, 4)).astype(np.float32)}


@pytest.mark.parametrize(
    ("framework", "level", "tol"),
    [
        ("onnxrt", "fp16", 1e-2),
        ("onnxref", "fp16", 1e-2),
        ("onnxref", "bf16", 5e-2),
    ],
)
def test_converted_models_are_valid_and_close(framework, level, tol):
    model = tricky_model()
    converted = precision.convert(load_model(model), level).proto
    onnx.checker.check_model(converted)
    produced = set()
    for node in converted.graph.node:  # topologically sorted: inputs exist before use
        assert all(name in produced or name in {"x", "W"} for name in node.input if name)
        produced.update(node.output)
    casts = [n for n in converted.graph.node if n.op_type == "Cast" and n.output[0] == "hc"]
    assert casts[0].attribute[0].i != TensorProto.FLOAT  # the stale Cast was repaired
    io_types = {vi.name: vi.type.tensor_type.elem_type for vi in converted.graph.output}
    assert set(io_types.values()) == {TensorProto.FLOAT}  # keep_io_types
    reference = runners.create("onnxrt", model).infer(FEED)
    out = runners.create(framework, model, level).infer(FEED)
    result = compare_outputs(out, reference, atol=tol, rtol=tol)
    assert result.passed, result.report()


def test_conversion_is_cached_by_model_digest():
    model = tricky_model()
    first = precision.convert(load_model(model), "fp16")
    again = precision.convert(load_model(model.SerializeToString()), "fp16")
    assert first is again
    assert precision.convert(load_model(model), "fp32").proto is not first.proto


def test_bf16_weights_round_from_float32_not_from_clipped_float16():
    big = numpy_helper.from_array(np.array([1e6, -3e5, 7.0], dtype=np.float32), "big")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "big"], ["y"])],
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [big],
    )
    converted = precision.convert(load_model(make(graph)), "bf16").proto
    weight = next(t for t in converted.graph.initializer if t.name == "big")
    import ml_dtypes

    values = np.frombuffer(weight.raw_data, dtype=np.uint16).view(ml_dtypes.bfloat16)
    assert values.astype(np.float32).tolist() == [999424.0, -299008.0, 7.0]  # not 65504


def test_modelopt_autocast_is_preferred_when_importable(monkeypatch):
    calls = {}

    def convert_to_mixed_precision(onnx_path, low_precision_type="fp16", keep_io_types=False):
        calls.update(path=onnx_path, level=low_precision_type, keep_io_types=keep_io_types)
        from onnxruntime.transformers.float16 import convert_float_to_float16

        converted = convert_float_to_float16(onnx.load(onnx_path), keep_io_types=True)
        precision.repair(converted)
        return converted

    autocast = types.ModuleType("modelopt.onnx.autocast")
    autocast.convert_to_mixed_precision = convert_to_mixed_precision
    for name in ("modelopt", "modelopt.onnx", "modelopt.onnx.autocast"):
        module = autocast if name.endswith("autocast") else types.ModuleType(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(precision, "CONVERTED", {})
    runner = runners.create("onnxrt", tricky_model(), "fp16")
    assert runner.describe()["precision_route"] == "fp16 by ModelOpt AutoCast (float32 I/O)"
    assert calls["level"] == "fp16" and calls["keep_io_types"] is True
    assert calls["path"].endswith("model.onnx")


BOXES = np.random.default_rng(1).uniform(0, 1, (1, 4, 4)).astype(np.float32)
NMS_FEED = {
    "boxes": np.sort(BOXES.reshape(1, 4, 2, 2), axis=2).reshape(1, 4, 4),
    "scores": np.random.default_rng(2).uniform(0, 1, (1, 1, 4)).astype(np.float32),
}


@pytest.mark.parametrize(
    ("framework", "level"), [("onnxrt", "fp16"), ("onnxref", "fp16"), ("onnxref", "bf16")]
)
@pytest.mark.parametrize("flag", [1.0, -1.0], ids=["then", "else"])
def test_casts_for_values_made_inside_if_branches_stay_in_their_branch(framework, level, flag):
    """The converter keeps NonMaxSuppression in float32 and appends the Cast of its float16
    input (made inside the branch) to the main graph, where no runtime can read it (issue
    35, item 3): the Cast moves into the branch, after the value's producer."""
    model = branches_into_nms()
    converted = precision.convert(load_model(model), level).proto
    onnx.checker.check_model(converted)
    (branching,) = [n for n in converted.graph.node if n.op_type == "If"]
    for branch in (attribute.g for attribute in branching.attribute):
        nodes = list(branch.node)
        (at,) = [i for i, n in enumerate(nodes) if n.op_type == "Cast" and "_boxes" in n.input[0]]
        assert nodes[at - 1].op_type == "Mul" and nodes[at - 1].output[0] == nodes[at].input[0]
    assert not any(n.input[0].startswith(("then_", "else_")) for n in converted.graph.node)
    feed = {**NMS_FEED, "flag": np.full(2, flag, np.float32)}
    expected = runners.create("onnxrt", model).infer(feed)
    got = runners.create(framework, model, level).infer(feed)
    assert compare_outputs(got, expected, atol=0, rtol=0).passed


def test_a_conversion_we_cannot_make_valid_is_named_as_ours_not_the_users_file(monkeypatch):
    """Where our repair misses a construct, onnx's checker refuses the converted model while
    the model as given passes: a skip (PrecisionUnsupported) naming our conversion and the
    construct, never the runtime's 'cannot load model <your file>'."""
    monkeypatch.setattr(float16_repair, "move_casts_into_bodies", lambda graph: None)
    monkeypatch.setattr(precision, "CONVERTED", {})
    with pytest.raises(PrecisionUnsupported) as raised:
        runners.create("onnxrt", branches_into_nms(), "fp16")
    text = str(raised.value)
    assert text.startswith(
        "pytest-trtcompare's fp16 conversion of <ModelProto> (a model with If subgraphs) made "
        "an invalid model (fp16 by onnxruntime.transformers.float16"
    )
    assert "else_cast_to_fp32" not in text and "the model as given is valid" in text
    assert "cannot load model" not in text
