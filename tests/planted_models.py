"""A chain of benign Add/Mul nodes with a planted fp16-unsafe pair, helpers to run it, and
`plant_overflow`: a real model with one node planted to pass fp16's 65504."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from .onnx_models import make

WIDTH = 64


def planted(
    before: int = 30, after: int = 30, pair: tuple[tuple[str, str, float], ...] = ()
) -> onnx.ModelProto:
    """x -> `before` benign Add/Mul -> plant_add (+3000) -> plant_sub (-3000) -> `after`
    benign -> y. The constants are exact in fp16 and bf16, so the benign nodes only round;
    at 3000 the fp16 ulp is 2 (bf16: 16): the planted pair destroys values in [0, 2].
    `pair`: other planted (name, op, constant) nodes (scaled(): a weight past fp16's range,
    which even a runtime computing float16 nodes in float32 gets wrong)."""
    nodes, weights, current = [], [], "x"

    def node(op: str, value: float, name: str) -> None:
        nonlocal current
        weights.append(numpy_helper.from_array(np.full(WIDTH, value, np.float32), f"{name}_c"))
        nodes.append(helper.make_node(op, [current, f"{name}_c"], [f"{name}_out"], name=name))
        current = f"{name}_out"

    for i in range(before):
        node("Mul" if i % 2 else "Add", 1.0625 if i % 2 else 0.0625, f"pre{i}")
    for name, op, value in pair or (("plant_add", "Add", 3000.0), ("plant_sub", "Sub", 3000.0)):
        node(op, value, name)
    for i in range(after):
        node("Mul" if i % 2 else "Add", 0.9375 if i % 2 else -0.0625, f"post{i}")
    nodes.append(helper.make_node("Relu", [current], ["y"], name="relu_out"))
    graph = helper.make_graph(
        nodes,
        "planted",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])],
        weights,
    )
    return make(graph)


def scaled(before: int = 4, after: int = 4) -> onnx.ModelProto:
    """The planted chain with plant_scale (x 1e5: a weight fp16 cannot hold, clamped to
    65504 by the conversion) and plant_unscale (x 1e-5)."""
    return planted(before, after, (("plant_scale", "Mul", 1e5), ("plant_unscale", "Mul", 1e-5)))


def feed() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).uniform(0, 1, (1, WIDTH)).astype(np.float32)}


def run(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {"y": ReferenceEvaluator(model).run(["y"], feed())[0]}


def check_written(model: onnx.ModelProto) -> None:
    onnx.checker.check_model(model, full_check=True)
    known = {vi.name for vi in model.graph.input} | {t.name for t in model.graph.initializer}
    for node in model.graph.node:  # topologically sorted
        assert all(name in known for name in node.input if name), node.name
        known.update(node.output)


def constant_model() -> onnx.ModelProto:
    """y = x + Constant(1.0001): at fp16 the Constant rounds to 1 whatever is kept in fp32
    (a Constant is no candidate: it does no arithmetic), so atol=rtol=0 never passes."""
    nodes = [
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.float32(1.0001))),
        helper.make_node("Add", ["x", "c"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "constant",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    return make(graph)


def plant_overflow(
    model: onnx.ModelProto, op_type: str, feed: dict[str, np.ndarray]
) -> tuple[onnx.ModelProto, str]:
    """`model` (changed in place, and returned) with the middle node of `op_type` among those
    with a weight of their own planted: its weight times a power of two k that takes its
    output past 65504 (about 4x) on `feed`, and a node `plant_rescale` (Mul by 1/k, exact)
    after it that gives the rest its fp32 values back. Both must run in fp32 at fp16. Unnamed
    nodes are named `<op_type>_<index>`; returns the planted node's name."""
    import onnxruntime

    from pytest_trtcompare.runners.onnx_graph import with_outputs

    weights = {t.name: t for t in model.graph.initializer}
    uses: dict[str, int] = {}
    for index, node in enumerate(model.graph.node):
        node.name = node.name or f"{node.op_type}_{index}"
        for tensor in node.input:
            uses[tensor] = uses.get(tensor, 0) + 1
    chosen = [
        node
        for node in model.graph.node
        if node.op_type == op_type
        and len(node.input) > 1
        and node.input[1] in weights
        and uses[node.input[1]] == 1
    ]
    node = chosen[len(chosen) // 2]
    original = node.output[0]
    session = onnxruntime.InferenceSession(with_outputs(model, [original]).SerializeToString())
    largest = float(np.abs(session.run([original], feed)[0]).max())
    k = 2.0 ** math.ceil(math.log2(4 * 65504 / largest))
    weight = weights[node.input[1]]
    scaled = numpy_helper.to_array(weight) * np.float32(k)
    weight.CopyFrom(numpy_helper.from_array(scaled, weight.name))
    node.output[0] = original + "_planted"
    model.graph.initializer.append(numpy_helper.from_array(np.float32(1 / k), "plant_inv_k"))
    rescale = helper.make_node(
        "Mul", [node.output[0], "plant_inv_k"], [original], name="plant_rescale"
    )
    model.graph.node.insert(list(model.graph.node).index(node) + 1, rescale)
    return model, node.name
