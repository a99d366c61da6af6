"""Real architectures from the `light_*.onnx` models the onnx package ships.

Those files keep the graph of each model (resnet50, squeezenet, shufflenet, ...) but replace
every weight by a `ConstantOfShape` node. `light_model()` swaps each of those for a seeded
random initializer of the same shape, scaled so activations stay in range, also in float16
(LeCun init for conv / gemm weights, batch-norm scales below 1 for the residual sums).
No download: the files are in site-packages.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

LIGHT_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def available() -> list[str]:
    return sorted(p.stem.removeprefix("light_") for p in LIGHT_DIR.glob("light_*.onnx"))


def _weights(name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    lowered = name.lower()
    if len(shape) >= 2:  # conv / gemm weights: LeCun initialisation
        fan_in = int(np.prod(shape[1:])) if len(shape) > 2 else shape[0]
        return rng.standard_normal(shape) * np.sqrt(1.0 / max(1, fan_in))
    if "var" in lowered or "riv" in lowered:
        return rng.uniform(1.0, 2.0, shape)
    if "_s_" in lowered or "scale" in lowered or lowered.endswith("_s") or "gamma" in lowered:
        return rng.uniform(0.4, 0.6, shape)  # residual sums stay in range (and in fp16)
    return rng.standard_normal(shape) * 0.05  # biases, shifts, running means


def _drop_final_softmax(graph: onnx.GraphProto) -> None:
    """Make the output the logits: random weights give near-uniform, uninformative softmaxes."""
    output = graph.output[0].name
    producers = [n for n in graph.node if n.output[0] == output and n.op_type == "Softmax"]
    softmax = producers[0] if producers else None
    if softmax is None:
        return
    logits = softmax.input[0]
    graph.node.remove(softmax)
    for node in graph.node:
        node.output[:] = [output if name == logits else name for name in node.output]
        node.input[:] = [output if name == logits else name for name in node.input]


def light_model(name: str, seed: int = 0) -> onnx.ModelProto:
    """The light_<name> model with seeded random weights and logits as output (no softmax),
    checked by onnx.checker."""
    model = onnx.load(str(LIGHT_DIR / f"light_{name}.onnx"))
    _drop_final_softmax(model.graph)
    shapes = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    rng = np.random.default_rng(seed)
    kept, weights = [], []
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in shapes:
            shape = tuple(int(d) for d in shapes[node.input[0]])
            values = _weights(node.output[0], shape, rng).astype(np.float32)
            weights.append(numpy_helper.from_array(values, node.output[0]))
        else:
            kept.append(node)
    used = {name for node in kept for name in node.input}
    model.graph.ClearField("node")
    model.graph.node.extend(kept)
    initializers = [t for t in model.graph.initializer if t.name in used] + weights
    model.graph.ClearField("initializer")
    model.graph.initializer.extend(initializers)
    names = {t.name for t in initializers}
    real_inputs = [vi for vi in model.graph.input if vi.name not in names and vi.name in used]
    model.graph.ClearField("input")
    model.graph.input.extend(real_inputs)
    model.ir_version = 8  # IR 3 wants every weight listed as an input; IR >= 4 does not
    onnx.checker.check_model(model)
    return model
