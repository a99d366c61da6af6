"""Which ops of a converted model an onnxruntime execution provider has no kernel for.

Asked after onnxruntime refused a fp16 / bf16 model, to name every op type at fault in one
skip reason instead of the first node its loader tripped on; and before a session of a
model whose recurrent ops (LSTM, GRU, RNN) have no kernel in that type: onnxruntime 1.32's
CPU provider ends the process building one (SIGSEGV), so such a session is first built in a
child process (`crashes_building`), which the test session survives.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import onnx
from onnx import TensorProto

_LOW = {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}
_TYPE_TEXT = {"fp16": "tensor(float16)", "bf16": "tensor(bfloat16)"}
DTYPE_NAMES = {"fp16": "float16", "bf16": "bfloat16"}

#: onnxruntime's words for a model it cannot run in a type: no kernel, or an op schema that
#: does not admit the type ("Type 'tensor(bfloat16)' of input parameter ... is invalid").
_TYPE_FAILURE = re.compile(r"NOT_IMPLEMENTED|Type 'tensor\((?:b?float16)\)'")
#: Cast runs in any type; onnxruntime folds a Constant into an initializer as it loads.
_NEVER_A_KERNEL = ("Cast", "Constant")
_NAMED_OP = re.compile(r"(?:implementation for |of operator \()(\w+)")


def is_type_failure(text: str) -> bool:
    return bool(_TYPE_FAILURE.search(text))


def missing_kernels(
    ort: Any, model: onnx.ModelProto, precision: str, provider: str, message: str
) -> list[str]:
    """Op types of the model's `precision` nodes with no `provider` kernel for that type,
    sorted; the op onnxruntime named when its kernel table cannot be read."""
    named = _NAMED_OP.findall(message)
    try:
        from onnxruntime.capi import _pybind_state

        kernels = _pybind_state.get_all_opkernel_def()
    except Exception:  # a build without the kernel table: what the message said
        return sorted(set(named))
    low, wanted = _LOW[precision], _TYPE_TEXT[precision]
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    has_kernel = {
        k.op_name
        for k in kernels
        if k.provider == provider
        and k.domain in ("", "ai.onnx")
        and k.version_range[0] <= opset <= k.version_range[1]
        and any(wanted in types for types in k.type_constraints.values())
    }
    typed = _types(model)
    missing = {
        node.op_type
        for node in model.graph.node
        if node.domain in ("", "ai.onnx")
        and node.op_type not in has_kernel
        and node.op_type not in _NEVER_A_KERNEL
        and any(typed.get(name) == low for name in [*node.input, *node.output])
    }
    return sorted(missing | set(named))


def _types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type of every typed tensor: inputs, weights, shape-inferred intermediates."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:
        inferred = model
    graph = inferred.graph
    types = {t.name: t.data_type for t in graph.initializer}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    for node in graph.node:  # shape inference gives up on a type the op does not admit
        if node.op_type == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), 0)
            types.setdefault(node.output[0], to)
    return types


#: ops whose missing low-precision kernel has crashed onnxruntime building the session
RECURRENT = ("LSTM", "GRU", "RNN")
_BUILD = (
    "import sys, onnxruntime; onnxruntime.InferenceSession(sys.argv[1], providers=[sys.argv[2]])"
)
_PROBE_SECONDS = 300


def crashes_building(model: onnx.ModelProto, provider: str) -> str | None:
    """How building an onnxruntime session of `model` ended a child process ('SIGSEGV'),
    None where it did not (it built, or raised as Python does)."""
    import signal

    with tempfile.TemporaryDirectory(prefix="trtcompare-probe-") as folder:
        path = Path(folder) / "model.onnx"
        path.write_bytes(model.SerializeToString())
        try:
            done = subprocess.run(
                [sys.executable, "-c", _BUILD, str(path), provider],
                capture_output=True,
                timeout=_PROBE_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return None  # slow, not crashed: the session is built here as usual
    if done.returncode >= 0:
        return None
    try:
        return signal.Signals(-done.returncode).name
    except ValueError:
        return f"signal {-done.returncode}"
