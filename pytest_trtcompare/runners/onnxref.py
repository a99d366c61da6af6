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
from .base import Runner, TensorSpec
from .onnx_graph import graph_input_specs, with_all_outputs
from .onnx_model import load_model
from .precision import convert


class OnnxReferenceRunner(Runner):
    framework = "onnxref"
    precisions = ("fp32", "fp16", "bf16")

    def __init__(
        self,
        model: Any,
        precision: str = "fp32",
        *,
        outputs: str | Sequence[str] | None = None,
    ) -> None:
        super().__init__(precision)
        from onnx.reference import ReferenceEvaluator

        self.loaded = load_model(model)
        converted = convert(self.loaded, precision)
        self.route = converted.route
        proto = converted.proto
        self._layer_order: list[str] | None = None
        if outputs == "all":
            proto, self._layer_order = with_all_outputs(proto)
        self._specs = graph_input_specs(proto)
        try:
            self.evaluator = ReferenceEvaluator(proto)
        except Exception as exc:  # the evaluator raises many types for unsupported graphs
            raise ModelLoadError(
                f"onnx.reference cannot load model {self.loaded.source}: {exc}"
            ) from None
        self._outputs = [vi.name for vi in proto.graph.output]
        if isinstance(outputs, (list, tuple)):
            unknown = [name for name in outputs if name not in self._outputs]
            if unknown:
                raise ModelLoadError(f"model {self.loaded.source} has no output(s) {unknown}")
            self._outputs = list(outputs)

    def input_specs(self) -> list[TensorSpec]:
        return list(self._specs)

    def output_names(self) -> list[str]:
        return list(self._outputs)

    @property
    def layer_order(self) -> list[str] | None:
        return self._layer_order

    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = self.wanted_outputs()
        values = self.evaluator.run(names, feed)
        return {
            name: np.array(value, copy=True)  # the evaluator may hand back views of its state
            for name, value in zip(names, values, strict=True)
        }

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "version": onnx.__version__,
            "device": "cpu",
            "precision_route": self.route,
            "model_digest": self.loaded.digest,
        }
