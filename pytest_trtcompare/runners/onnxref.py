"""The ONNX reference evaluator: slow, but it rounds every op to the model's precision.

On a CPU this is the stand-in for real fp16 / bf16 numerics: the converted model's ops run
in numpy on float16 (or ml_dtypes bfloat16) arrays, each result rounded to that type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from ..errors import ModelLoadError
from .onnx_graph import value_spec
from .onnx_runner import OnnxModelRunner
from .onnx_versions import RuntimeVersions, onnx_reference_versions


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

    def __init__(
        self,
        model: Any,
        precision: str = "fp32",
        *,
        outputs: str | Sequence[str] | None = None,
    ) -> None:
        super().__init__(model, precision, outputs)
        from onnx.reference import ReferenceEvaluator

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
        names = self.wanted_outputs()
        values = self.evaluator.run(names, feed)
        return {
            name: _owned(_unwrapped(value, self._kinds.get(name, "tensor")))
            for name, value in zip(names, values, strict=True)
        }

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "version": onnx.__version__, "device": "cpu"}
