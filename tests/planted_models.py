"""A chain of benign Add/Mul nodes with a planted fp16-unsafe pair, and helpers to run it."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from .onnx_models import make

WIDTH = 64


def planted(before: int = 30, after: int = 30) -> onnx.ModelProto:
    """x -> `before` benign Add/Mul -> plant_add (+3000) -> plant_sub (-3000) -> `after`
    benign -> y. The constants are exact in fp16 and bf16, so the benign nodes only round;
    at 3000 the fp16 ulp is 2 (bf16: 16): the planted pair destroys values in [0, 2]."""
    nodes, weights, current = [], [], "x"

    def node(op: str, value: float, name: str) -> None:
        nonlocal current
        weights.append(numpy_helper.from_array(np.full(WIDTH, value, np.float32), f"{name}_c"))
        nodes.append(helper.make_node(op, [current, f"{name}_c"], [f"{name}_out"], name=name))
        current = f"{name}_out"

    for i in range(before):
        node("Mul" if i % 2 else "Add", 1.0625 if i % 2 else 0.0625, f"pre{i}")
    node("Add", 3000.0, "plant_add")
    node("Sub", 3000.0, "plant_sub")
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
