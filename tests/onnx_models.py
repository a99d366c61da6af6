"""Small ONNX models for the runner tests, built with onnx.helper (IR 8, opset 17)."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IR_VERSION = 8
OPSET = 17


def make(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION
    )
    onnx.checker.check_model(model)
    return model


def layer_chain(
    widths: tuple[int, ...] = (16, 32, 32, 32, 8), seed: int = 0, perturb_layer: int | None = None
) -> onnx.ModelProto:
    """x[batch, w0] -> (MatMul, Add, Tanh) per layer -> y. Tensors: mm{i}, add{i}, act{i}.

    `perturb_layer` adds 0.05 to that layer's bias: the model a broken kernel would give.
    """
    rng = np.random.default_rng(seed)
    nodes, weights, current = [], [], "x"
    for i, (fan_in, fan_out) in enumerate(itertools.pairwise(widths)):
        w = (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32)
        b = (rng.standard_normal(fan_out) * 0.1).astype(np.float32)
        if perturb_layer == i:
            b = b + np.float32(0.05)
        weights += [numpy_helper.from_array(w, f"W{i}"), numpy_helper.from_array(b, f"b{i}")]
        out = "y" if i == len(widths) - 2 else f"act{i}"
        nodes += [
            helper.make_node("MatMul", [current, f"W{i}"], [f"mm{i}"], name=f"matmul{i}"),
            helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"add{i}"], name=f"bias{i}"),
            helper.make_node("Tanh", [f"add{i}"], [out], name=f"tanh{i}"),
        ]
        current = out
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", widths[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", widths[-1]])],
        weights,
    )
    return make(graph)


def chain_weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: np.array(numpy_helper.to_array(t)) for t in model.graph.initializer}


def multi_input() -> onnx.ModelProto:
    """x float[2, 4], ids int64[2, 3] (gathered from a table), mask bool[2, 4]."""
    table = numpy_helper.from_array(
        np.linspace(-1, 1, 11 * 4, dtype=np.float32).reshape(11, 4), "table"
    )
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0),  # [2, 3, 4]
        helper.make_node("ReduceSum", ["emb", "axis1"], ["pooled_row"], keepdims=0),  # [2, 4]
        helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "maskf"], ["masked"]),
        helper.make_node("Add", ["masked", "pooled_row"], ["out"]),
    ]
    axis = numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1")
    graph = helper.make_graph(
        nodes,
        "multi",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
            helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3]),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, [2, 4]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 4])],
        [table, axis],
    )
    return make(graph)


def branches_into_nms() -> onnx.ModelProto:
    """boxes float[1, 4, 4], scores float[1, 1, 4], flag float[2] -> selected int64[N, 3]:
    an If whose branches scale the boxes and run NonMaxSuppression on them, as a detection
    model's exported post-processing does. The float16 converter keeps NonMaxSuppression in
    float32, so each branch needs a Cast of a value only that branch makes."""

    def branch(name: str, scale: float) -> onnx.GraphProto:
        nodes = [
            helper.make_node(
                "Constant",
                [],
                [f"{name}_scale"],
                value=helper.make_tensor(f"{name}_value", TensorProto.FLOAT, [], [scale]),
            ),
            helper.make_node("Mul", ["boxes", f"{name}_scale"], [f"{name}_boxes"]),
            helper.make_node(
                "NonMaxSuppression",
                [f"{name}_boxes", "scores", "max_boxes", "iou"],
                [f"{name}_selected"],
            ),
        ]
        out = helper.make_tensor_value_info(f"{name}_selected", TensorProto.INT64, [None, 3])
        return helper.make_graph(nodes, name, [], [out])

    nodes = [
        helper.make_node("ReduceSum", ["flag"], ["total"], keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["positive"]),
        helper.make_node(
            "If",
            ["positive"],
            ["selected"],
            then_branch=branch("then", 1.0),
            else_branch=branch("else", 2.0),
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "branches_into_nms",
        [
            helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, 4]),
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 4]),
            helper.make_tensor_value_info("flag", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, [None, 3])],
        [
            helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
            helper.make_tensor("max_boxes", TensorProto.INT64, [1], [10]),
            helper.make_tensor("iou", TensorProto.FLOAT, [1], [0.5]),
        ],
    )
    return make(graph)


def where_scaled(a: float, dims: list[int | str]) -> onnx.ModelProto:
    """y = where(x < 0.4, x * a, x), float32 of shape `dims`: a change of `a` shows only on
    the elements below 0.4, which a draw may not have (issue 45's silent golden)."""
    nodes = [
        helper.make_node("Less", ["x", "t"], ["c"]),
        helper.make_node("Mul", ["x", "a"], ["m"]),
        helper.make_node("Where", ["c", "m", "x"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "where_scaled",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
        [
            numpy_helper.from_array(np.array([a], np.float32), "a"),
            numpy_helper.from_array(np.array([0.4], np.float32), "t"),
        ],
    )
    return make(graph)
