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


def _f32(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def cnn_weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": _f32(rng, 8, 3, 3, 3, scale=0.3),
        "b1": _f32(rng, 8, scale=0.05),
        "w2": _f32(rng, 16, 8, 3, 3, scale=0.15),
        "b2": _f32(rng, 16, scale=0.05),
        "fc": _f32(rng, 16, 10, scale=0.3),
    }


def cnn_model(w: dict[str, np.ndarray]) -> onnx.ModelProto:
    """x[n, 3, 32, 32] -> Conv-Relu-MaxPool-Conv-Relu-GlobalAveragePool-Flatten-MatMul."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "fc"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 32, 32])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 10])],
        [_initializer(name, value) for name, value in w.items()],
    )
    return _checked(graph)


def attention_weights(dim: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: _f32(rng, dim, dim, scale=dim**-0.5) for name in ("wq", "wk", "wv", "wo")}


def attention_model(w: dict[str, np.ndarray]) -> onnx.ModelProto:
    """Single-head self-attention over x[batch, seq, dim]; batch and seq are dynamic."""
    dim = w["wq"].shape[0]
    scale = _initializer("scale", np.array(dim**-0.5, dtype=np.float32))
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("MatMul", ["x", "wv"], ["v"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores_raw"]),
        helper.make_node("Mul", ["scores_raw", "scale"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["attn"], axis=-1),
        helper.make_node("MatMul", ["attn", "v"], ["ctx"]),
        helper.make_node("MatMul", ["ctx", "wo"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", dim])],
        [scale] + [_initializer(name, value) for name, value in w.items()],
    )
    return _checked(graph)


def multi_input_model() -> onnx.ModelProto:
    """features float[n, 4], token_ids int64[n, 3] (embedding lookup), mask bool[n, 4]."""
    table = np.linspace(-1, 1, 20 * 4, dtype=np.float32).reshape(20, 4)
    nodes = [
        helper.make_node("Gather", ["table", "token_ids"], ["emb"], axis=0),
        helper.make_node("ReduceMean", ["emb"], ["pooled"], axes=[1], keepdims=0),
        helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["features", "maskf"], ["masked"]),
        helper.make_node("Add", ["masked", "pooled"], ["mixed"]),
        helper.make_node("Tanh", ["mixed"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "multi_input",
        [
            helper.make_tensor_value_info("features", TensorProto.FLOAT, ["n", 4]),
            helper.make_tensor_value_info("token_ids", TensorProto.INT64, ["n", 3]),
            helper.make_tensor_value_info("mask", TensorProto.BOOL, ["n", 4]),
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 4])],
        [_initializer("table", table)],
    )
    return _checked(graph)


def _checked(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model


# -- torch twins (built only where torch is installed) ------------------------------------------
def torch_mlp(weights: list[np.ndarray]) -> object:
    import torch

    layers: list[torch.nn.Module] = []
    for i in range(0, len(weights), 2):
        linear = torch.nn.Linear(*weights[i].shape)
        linear.weight.data = torch.from_numpy(np.array(weights[i].T))
        linear.bias.data = torch.from_numpy(np.array(weights[i + 1]))
        layers += [linear, torch.nn.ReLU()]

    class TwinMLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = torch.nn.Sequential(*layers[:-1])

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            logits = self.body(x)
            return logits, torch.softmax(logits, dim=-1)

    return TwinMLP()


def torch_cnn(w: dict[str, np.ndarray]) -> object:
    import torch

    class TwinCNN(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.c2 = torch.nn.Conv2d(8, 16, 3, padding=1)
            self.fc = torch.nn.Parameter(torch.from_numpy(np.array(w["fc"])))
            for conv, weight, bias in ((self.c1, "w1", "b1"), (self.c2, "w2", "b2")):
                conv.weight.data = torch.from_numpy(np.array(w[weight]))
                conv.bias.data = torch.from_numpy(np.array(w[bias]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.max_pool2d(torch.relu(self.c1(x)), 2)
            h = torch.relu(self.c2(h)).mean(dim=(2, 3))
            return h @ self.fc

    return TwinCNN()


def torch_attention(w: dict[str, np.ndarray]) -> object:
    import torch

    class TwinAttention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            for name, value in w.items():
                self.register_buffer(name, torch.from_numpy(np.array(value)))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k, v = x @ self.wq, x @ self.wk, x @ self.wv
            attn = torch.softmax(q @ k.transpose(1, 2) * q.shape[-1] ** -0.5, dim=-1)
            return (attn @ v) @ self.wo

    return TwinAttention()
