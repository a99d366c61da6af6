"""A chain of benign Add/Mul nodes with a planted fp16-unsafe pair, helpers to run it, and
plants in real models: `plant_overflow` (one node's output past fp16's 65504) and
`plant_scaled_weight` (one node's weight past it)."""

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
    model: onnx.ModelProto, op_type: str, feed: dict[str, np.ndarray], name: str | None = None
) -> tuple[onnx.ModelProto, str]:
    """`model` (changed in place, and returned) with the middle node of `op_type` among those
    with a weight of their own planted: its weight times a power of two k that takes its
    output past 65504 (about 4x) on `feed`, and a node `plant_rescale` (Mul by 1/k, exact)
    after it that gives the rest its fp32 values back (a bias is scaled with the weight). Both
    must run in fp32 at fp16. `name`: the node of that name instead. Unnamed nodes are named
    `<op_type>_<index>`; returns the planted node's name."""
    import onnxruntime

    from pytest_trtcompare.runners.onnx_graph import with_outputs

    node = _plantable(model, op_type, name)
    original = node.output[0]
    session = onnxruntime.InferenceSession(with_outputs(model, [original]).SerializeToString())
    largest = float(np.abs(session.run([original], feed)[0]).max())
    return _rescaled(model, node, 2.0 ** math.ceil(math.log2(4 * 65504 / largest)))


def plant_scaled_weight(
    model: onnx.ModelProto, op_type: str, name: str | None = None
) -> tuple[onnx.ModelProto, str]:
    """`model` (changed in place, and returned) with the middle node of `op_type` among those
    with a weight of their own planted as `plant_overflow` does, but k taken from the weight:
    its largest values land 4 to 8x past 65504, so the fp16 conversion clamps every value
    above an eighth to a quarter of the largest to 65504 (the weight itself is wrong, not only
    the arithmetic), and `plant_rescale` (Mul by 1/k) after it. At fp32 the model computes
    what it did (k is a power of two). At fp16 the node's output is wrong even on a runtime
    that computes float16 nodes in float32 from the float16 weights (onnxruntime's CPU
    provider, which folds the rescale back in and so never sees `plant_overflow`'s plant);
    its output passes 65504 as well. `name`: the node of that name instead. Returns the
    planted node's name."""
    node = _plantable(model, op_type, name)
    weight = next(t for t in model.graph.initializer if t.name == node.input[1])
    largest = float(np.abs(numpy_helper.to_array(weight)).max())
    return _rescaled(model, node, 2.0 ** math.ceil(math.log2(4 * 65504 / largest)))


def _plantable(model: onnx.ModelProto, op_type: str, name: str | None) -> onnx.NodeProto:
    """The middle node of `op_type` whose second input is a weight read by no other node (nor
    its bias, if it has one), or the one named `name`; unnamed nodes named `<op_type>_<index>`
    first."""
    weights = {t.name for t in model.graph.initializer}
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
        and all(uses[tensor] == 1 for tensor in node.input[1:3] if tensor in weights)
    ]
    if name is not None:
        return next(node for node in chosen if node.name == name)
    return chosen[len(chosen) // 2]


def _rescaled(
    model: onnx.ModelProto, node: onnx.NodeProto, k: float
) -> tuple[onnx.ModelProto, str]:
    """`node`'s weight (and bias: a Conv's or Gemm's third input) times k, and `plant_rescale`
    (Mul by 1/k) after it under the name of its output."""
    initializers = {t.name: t for t in model.graph.initializer}
    for tensor in node.input[1:3]:
        if tensor in initializers:
            weight = initializers[tensor]
            scaled = numpy_helper.to_array(weight) * np.float32(k)
            weight.CopyFrom(numpy_helper.from_array(scaled, weight.name))
    original = node.output[0]
    node.output[0] = original + "_planted"
    model.graph.initializer.append(numpy_helper.from_array(np.float32(1 / k), "plant_inv_k"))
    rescale = helper.make_node(
        "Mul", [node.output[0], "plant_inv_k"], [original], name="plant_rescale"
    )
    model.graph.node.insert(list(model.graph.node).index(node) + 1, rescale)
    return model, node.name
