"""A BERT-style transformer encoder built with onnx.helper, named the way torch.onnx.export
names things (`/encoder/layer.0/attn/Softmax` producing `/encoder/layer.0/attn/Softmax_output_0`).

Like an exported model it carries its shape plumbing: every head split and merge reshapes
through `Shape -> Gather -> Unsqueeze -> Concat` int64 tensors, because batch and sequence
length are dynamic. That plumbing is what a per-layer comparison should not drown in.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def transformer_weights(
    layers: int = 2, dim: int = 32, ffn: int = 64, seed: int = 0
) -> dict[str, np.ndarray]:
    """Seeded float32 weights (LeCun scale) for `layers` encoder layers."""
    rng = np.random.default_rng(seed)
    weights: dict[str, np.ndarray] = {}

    def add(name: str, *shape: int, scale: float | None = None, offset: float = 0.0) -> None:
        scale = shape[0] ** -0.5 if scale is None else scale
        values = offset + rng.standard_normal(shape) * scale
        weights[name] = values.astype(np.float32)

    for i in range(layers):
        p = f"encoder.layer.{i}"
        for ln in ("ln1", "ln2"):
            add(f"{p}.{ln}.weight", dim, scale=0.1, offset=1.0)
            add(f"{p}.{ln}.bias", dim, scale=0.05)
        for proj in ("query", "key", "value", "out"):
            add(f"{p}.attn.{proj}.weight", dim, dim)
            add(f"{p}.attn.{proj}.bias", dim, scale=0.05)
        add(f"{p}.ffn.fc1.weight", dim, ffn)
        add(f"{p}.ffn.fc1.bias", ffn, scale=0.05)
        add(f"{p}.ffn.fc2.weight", ffn, dim)
        add(f"{p}.ffn.fc2.bias", dim, scale=0.05)
    return weights


class _Graph:
    """Nodes named as torch.onnx.export names them: node `/a/b/Op`, output `/a/b/Op_output_0`."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.constants: dict[str, onnx.TensorProto] = {}

    def op(
        self, scope: str, op_type: str, inputs: list[str], tag: str = "", **attrs: object
    ) -> str:
        name = f"{scope}/{op_type}{tag}"
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=name, **attrs))
        return out

    def const(self, name: str, values: object, dtype: type = np.int64) -> str:
        if name not in self.constants:
            self.constants[name] = numpy_helper.from_array(np.array(values, dtype=dtype), name)
        return name

    def dim(self, scope: str, tensor: str, axis: int, tag: str) -> str:
        """One dynamic dimension of `tensor` as a 1-element int64 tensor (the exporter's way)."""
        shape = self.op(scope, "Shape", [tensor], tag)
        index = self.const(f"axis_{axis}", axis)
        gathered = self.op(scope, "Gather", [shape, index], tag, axis=0)
        return self.op(scope, "Unsqueeze", [gathered, self.const("axes_0", [0])], tag)

    def reshape(self, scope: str, tensor: str, tail: list[int], tag: str) -> str:
        """Reshape [batch, seq, ...] to [batch, seq, *tail] with the batch and seq read at run
        time: Shape, Gather, Unsqueeze for each, then Concat."""
        batch = self.dim(scope, tensor, 0, f"{tag}_b")
        seq = self.dim(scope, tensor, 1, f"{tag}_s")
        rest = self.const(f"tail_{'x'.join(map(str, tail))}", tail)
        target = self.op(scope, "Concat", [batch, seq, rest], tag, axis=0)
        return self.op(scope, "Reshape", [tensor, target], tag)

    def linear(self, scope: str, x: str, weight: str) -> str:
        return self.op(
            scope, "Add", [self.op(scope, "MatMul", [x, f"{weight}.weight"]), f"{weight}.bias"]
        )


def _layer(g: _Graph, x: str, i: int, dim: int, heads: int) -> str:
    p, w = f"/encoder/layer.{i}", f"encoder.layer.{i}"
    h = g.op(f"{p}/ln1", "LayerNormalization", [x, f"{w}.ln1.weight", f"{w}.ln1.bias"], axis=-1)
    split = {}
    for proj in ("query", "key", "value"):
        scope = f"{p}/attn/{proj}"
        t = g.linear(scope, h, f"{w}.attn.{proj}")
        t = g.reshape(scope, t, [heads, dim // heads], "")
        perm = [0, 2, 3, 1] if proj == "key" else [0, 2, 1, 3]
        split[proj] = g.op(scope, "Transpose", [t], perm=perm)
    scope = f"{p}/attn"
    scores = g.op(scope, "MatMul", [split["query"], split["key"]])
    scale = g.const("head_scale", np.sqrt(dim // heads), np.float32)
    scores = g.op(scope, "Div", [scores, scale])
    probs = g.op(scope, "Softmax", [scores], axis=-1)
    ctx = g.op(scope, "MatMul", [probs, split["value"]], "_1")
    ctx = g.op(scope, "Transpose", [ctx], perm=[0, 2, 1, 3])
    ctx = g.reshape(scope, ctx, [dim], "")
    attn = g.linear(f"{p}/attn/out", ctx, f"{w}.attn.out")
    x = g.op(p, "Add", [x, attn], "_residual1")
    h = g.op(f"{p}/ln2", "LayerNormalization", [x, f"{w}.ln2.weight", f"{w}.ln2.bias"], axis=-1)
    h = g.linear(f"{p}/ffn/fc1", h, f"{w}.ffn.fc1")
    scope = f"{p}/ffn/gelu"  # erf GELU, as exported before opset 20
    erf = g.op(scope, "Erf", [g.op(scope, "Div", [h, g.const("sqrt2", np.sqrt(2.0), np.float32)])])
    one_plus = g.op(scope, "Add", [erf, g.const("one", 1.0, np.float32)])
    h = g.op(
        scope, "Mul", [g.op(scope, "Mul", [h, one_plus]), g.const("half", 0.5, np.float32)], "_1"
    )
    h = g.linear(f"{p}/ffn/fc2", h, f"{w}.ffn.fc2")
    return g.op(p, "Add", [x, h], "_residual2")


def transformer_model(w: dict[str, np.ndarray], heads: int = 4) -> onnx.ModelProto:
    """x[batch, seq, dim] -> encoder layers (pre-LayerNorm attention + GELU FFN) -> hidden."""
    layers = len({name.split(".")[2] for name in w})
    dim = w["encoder.layer.0.attn.query.weight"].shape[0]
    g = _Graph()
    x = "hidden_in"
    for i in range(layers):
        x = _layer(g, x, i, dim, heads)
    g.nodes.append(helper.make_node("Identity", [x], ["hidden"], name="/encoder/output/Identity"))
    graph = helper.make_graph(
        g.nodes,
        "transformer_encoder",
        [helper.make_tensor_value_info("hidden_in", TensorProto.FLOAT, ["batch", "seq", dim])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", dim])],
        [numpy_helper.from_array(v, k) for k, v in w.items()] + list(g.constants.values()),
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model
