"""What the ONNX-executing runners share: load, convert to the precision, mark all, specs."""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

import onnx

from ..errors import ModelLoadError
from .base import Layer, Runner, TensorSpec
from .onnx_graph import graph_input_specs, with_all_outputs
from .onnx_model import load_model
from .onnx_versions import RuntimeVersions, fit_ir_version
from .precision import convert


class OnnxModelRunner(Runner):
    """Base of `onnxrt` and `onnxref`: `self.proto` is the model to execute (converted to the
    precision, every tensor marked an output when `outputs="all"`)."""

    def __init__(self, model: Any, precision: str, outputs: str | Sequence[str] | None) -> None:
        super().__init__(precision)
        self.loaded = load_model(model)
        versions = self._runtime_versions()
        fitted, self.ir_note = (
            (self.loaded, "") if versions is None else fit_ir_version(self.loaded, versions)
        )
        converted = convert(fitted, precision)
        self.route = converted.route
        self.proto: onnx.ModelProto = converted.proto
        self._layers: list[Layer] | None = None
        if outputs == "all":
            self.proto, self._layers = with_all_outputs(self.proto)
        self._specs = graph_input_specs(self.proto)
        self._requested = list(outputs) if isinstance(outputs, (list, tuple)) else None
        self._outputs: list[str] = [vi.name for vi in self.proto.graph.output]

    def _runtime_versions(self) -> RuntimeVersions | None:
        """The IR / opset versions the runtime reads (None: load the model as stamped)."""
        return None

    def _restrict_outputs(self, available: list[str]) -> None:
        """Keep the outputs the user asked for (`outputs=[...]`), failing on unknown names."""
        self._outputs = available
        if self._requested is not None:
            unknown = [name for name in self._requested if name not in available]
            if unknown:
                close = difflib.get_close_matches(unknown[0], available, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ModelLoadError(
                    f"model {self.loaded.source} has no output(s) {unknown}{hint}; it has "
                    f"{available}"
                )
            self._outputs = self._requested

    def input_specs(self) -> list[TensorSpec]:
        return list(self._specs)

    def output_names(self) -> list[str]:
        return list(self._outputs)

    def describe(self) -> dict[str, Any]:
        info = {
            **super().describe(),
            "precision_route": self.route,
            "model_digest": self.loaded.digest,
        }
        if self.ir_note:
            info["ir_version"] = self.ir_note
        return info
