"""A twin (a framework's own model, such as a torch module beside the ONNX export) whose
input and output names differ from the reference's takes them by position, as exporters
rename them (`torch.onnx.export(..., input_names=["input"])`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


class PositionalNames:
    """The twin runner, fed and read under the reference's names (matched by position)."""

    def __init__(self, runner: Any, inputs: dict[str, str], outputs: list[str]) -> None:
        self._runner = runner
        self._inputs = inputs  # reference name -> twin name
        self._outputs = outputs  # the reference's output names, in order
        self._renamed: dict[str, str] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def output_names(self) -> list[str]:
        return list(self._outputs) or list(self._runner.output_names())

    def infer(self, feed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        got: dict[str, np.ndarray] = self._runner.infer(
            {self._inputs.get(k, k): v for k, v in feed.items()}
        )
        if set(got) == set(self._outputs) or len(got) != len(self._outputs):
            return got  # names agree, or counts differ: the comparison says what is missing
        self._renamed = dict(zip(got, self._outputs, strict=True))
        return {self._renamed[name]: value for name, value in got.items()}

    def describe(self) -> dict[str, Any]:
        names = {"inputs": {v: k for k, v in self._inputs.items()}, "outputs": self._renamed}
        return {**self._runner.describe(), "names_by_position": names}


def by_position(twin: Any, reference: Any) -> Any:
    """The twin as it is when its names match the reference's; else the positional view."""
    want = [spec.name for spec in reference.input_specs()]
    have = [spec.name for spec in twin.input_specs()]
    inputs = {}
    if set(want) != set(have) and len(want) == len(have):
        inputs = {w: h for w, h in zip(want, have, strict=True) if w != h}
    outputs = list(reference.output_names())
    if not inputs and set(outputs) <= set(twin.output_names()):
        return twin
    return PositionalNames(twin, inputs, outputs)
