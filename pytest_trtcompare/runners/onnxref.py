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
from .onnx_runner import OnnxModelRunner
from .onnx_versions import RuntimeVersions, onnx_reference_versions


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

    def _runtime_versions(self) -> RuntimeVersions:
        return onnx_reference_versions()

    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = self.wanted_outputs()
        values = self.evaluator.run(names, feed)
        return {
            name: np.array(value, copy=True)  # the evaluator may hand back views of its state
            for name, value in zip(names, values, strict=True)
        }

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "version": onnx.__version__, "device": "cpu"}
