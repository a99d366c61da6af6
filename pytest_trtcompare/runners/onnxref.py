"""The ONNX reference evaluator: slow, but it rounds every op to the model's precision.

On a CPU this is the stand-in for real fp16 / bf16 numerics: the converted model's ops run
in numpy on float16 (or ml_dtypes bfloat16) arrays, each result rounded to that type.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from ..errors import ModelLoadError, PrecisionUnsupported
from .float16_repair import implicit_inputs, topological_sort
from .onnx_graph import value_spec
from .onnx_runner import OnnxModelRunner, RuntimeVersions, onnx_reference_versions


def _in_order(graph: onnx.GraphProto) -> bool:
    """Whether every node comes after the producers of its inputs (subgraph reads included)."""
    produced = {node_output for node in graph.node for node_output in node.output}
    available = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        needed = [*node.input, *implicit_inputs(node)]
        if any(name and name in produced and name not in available for name in needed):
            return False
        available.update(node.output)
    return True


def _unwrapped(value: Any, kind: str) -> Any:
    """onnx's evaluator returns an optional sequence made by `If` as [[t0, t1 ...]]: a
    sequence of tensors cannot hold a list, so the extra level is its wrapping."""
    wrapped = isinstance(value, list) and len(value) == 1 and isinstance(value[0], list)
    return value[0] if wrapped and kind in ("sequence", "optional sequence") else value


def _owned(value: Any) -> Any:
    """A copy (the evaluator may hand back views of its state); sequences as lists of arrays,
    an empty optional as None."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [_owned(item) for item in value]
    return np.array(value, copy=True)


class OnnxReferenceRunner(OnnxModelRunner):
    framework = "onnxref"
    precisions = ("fp32", "fp16", "bf16")
    converted = ("fp16", "bf16")
    float64 = True  # on runners/precision.py `to_float64`
    takes = ("onnx",)
    layer_names = "onnx"

    def __init__(
        self,
        model: Any,
        precision: str = "fp32",
        *,
        outputs: str | Sequence[str] | None = None,
    ) -> None:
        super().__init__(model, precision, outputs)
        from onnx.reference import ReferenceEvaluator

        if not _in_order(self.proto.graph):  # the evaluator runs nodes as listed
            self.proto = copy.deepcopy(self.proto)  # never reorder the user's ModelProto
            topological_sort(self.proto.graph)

        try:
            self.evaluator = ReferenceEvaluator(self.proto)
        except Exception as exc:  # the evaluator raises many types for unsupported graphs
            raise ModelLoadError(
                f"onnx.reference cannot load model {self.loaded.source}: {exc}"
            ) from None
        self._restrict_outputs([vi.name for vi in self.proto.graph.output])
        self._kinds = {vi.name: value_spec(vi).kind for vi in self.proto.graph.output}

    def _runtime_versions(self) -> RuntimeVersions:
        return onnx_reference_versions()

    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from onnx.reference.op_run import OpFunction, RuntimeTypeError

        names = self.wanted_outputs()
        try:
            # an fp16 overflow to inf is what is compared, not a fault of the run: numpy's
            # warning of it would fail the run under -W error
            with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
                values = self.evaluator.run(names, feed)
        except RuntimeTypeError as exc:
            if self.precision == "fp32":
                raise
            # name the ops the evaluator runs through their function bodies: those bodies keep
            # float32 constants, so they fail in float16 / bfloat16 where a kernel would not
            rt_nodes = self.evaluator.rt_nodes_
            bodies = sorted({n.op_type for n in rt_nodes if isinstance(n, OpFunction)})
            where = (
                f"{', '.join(bodies)} (run through its onnx function body)"
                if bodies
                else "an op of the model"
            )
            raise PrecisionUnsupported(
                f"onnxref {self.precision}: onnx's reference evaluator cannot run {where} in "
                f"{self.precision} for model {self.loaded.source}: {str(exc).strip()}"
            ) from None
        return {
            name: _owned(_unwrapped(value, self._kinds.get(name, "tensor")))
            for name, value in zip(names, values, strict=True)
        }

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "version": onnx.__version__, "device": "cpu"}
