"""Small ONNX models built in code with onnx.helper (no downloads), and numpy twins of them."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _initializer(name: str, values: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(values, name)


def mlp_weights(seed: int = 0, sizes: tuple[int, ...] = (64, 128, 10)) -> list[np.ndarray]:
    """[W0, b0, W1, b1, ...] drawn from a seeded generator, float32."""
    rng = np.random.default_rng(seed)
    weights = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        weights.append(
            (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32)
        )
        weights.append((rng.standard_normal(fan_out) * 0.1).astype(np.float32))
    return weights


def mlp_model(weights: list[np.ndarray]) -> onnx.ModelProto:
    """x -> (MatMul, Add, Relu)* -> logits, softmax -> probs. Batch dimension is dynamic."""
    nodes, inits, current = [], [], "x"
    layers = len(weights) // 2
    for i in range(layers):
        w, b = f"W{i}", f"b{i}"
        inits += [_initializer(w, weights[2 * i]), _initializer(b, weights[2 * i + 1])]
        nodes.append(helper.make_node("MatMul", [current, w], [f"mm{i}"]))
        out = "logits" if i == layers - 1 else f"add{i}"
        nodes.append(helper.make_node("Add", [f"mm{i}", b], [out]))
        if i < layers - 1:
            nodes.append(helper.make_node("Relu", [out], [f"relu{i}"]))
            current = f"relu{i}"
    nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], axis=-1))
    n_in, n_out = weights[0].shape[0], weights[-1].shape[0]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", n_in])],
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", n_out]),
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", n_out]),
        ],
        inits,
    )
    # IR 8 (opset 17): loadable by every onnxruntime we support; onnx 1.23 would write IR 14.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model


def mlp_numpy(
    x: np.ndarray, weights: list[np.ndarray], dtype: type = np.float64
) -> dict[str, np.ndarray]:
    """The same network in numpy, computed in `dtype` (float64 reference, float16 deployment)."""
    h = x.astype(dtype)
    layers = len(weights) // 2
    for i in range(layers):
        h = h @ weights[2 * i].astype(dtype) + weights[2 * i + 1].astype(dtype)
        if i < layers - 1:
            h = np.maximum(h, 0)
    logits = h
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return {"logits": logits, "probs": shifted / shifted.sum(axis=-1, keepdims=True)}
