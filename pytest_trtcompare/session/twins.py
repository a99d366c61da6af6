"""A twin (a framework's own model beside its ONNX export: a torch module) fed and read under
the reference's names.

Inputs go by name first: a reference input the twin takes by that name is passed by it (a
torch forward's parameters, keyword-bound). Only the inputs no name matched go by position,
to the twin's inputs no name matched, and only when their counts agree; otherwise the
comparison stops with an error that says what could not be bound. Never a silent shift.
Outputs go by name when the twin returns every reference output name (extra twin outputs,
such as a cache the export left out, are set aside), else by position when the counts agree
(`torch.onnx.export` writes outputs in the order torch_outputs.py flattens them). `describe()`
records which input and output went how, and `binding_note` says it in the failure report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

from ..errors import FeedError
from ..runners import TensorSpec, graph_input_specs


def input_map(reference: Sequence[TensorSpec], twin: Any) -> dict[str, tuple[str, str]]:
    """Reference input name -> (twin input name, "by name" | "by position")."""
    want = [spec.name for spec in reference]
    signature = getattr(twin, "signature", None)
    if signature is not None and signature.positional_names is None:
        takes = list(signature.names)
        needs = [name for name in signature.input_names() if name in takes]
        if not takes and signature.var_keyword:
            takes = want  # forward(**inputs): whatever the feed names
        star = signature.var_positional
    else:
        names = list(signature.positional_names) if signature is not None else []
        takes = needs = names or [spec.name for spec in twin.input_specs()]
        star = False
    mapping = {name: (name, "by name") for name in want if name in takes}
    left = [name for name in want if name not in mapping]
    free = [name for name in needs if name not in mapping]
    if not left:
        return mapping
    if len(left) == len(free):
        return {**mapping, **{w: (h, "by position") for w, h in zip(left, free, strict=True)}}
    if star and not free:
        return {**mapping, **{w: (w, "by position (*args)") for w in left}}
    described = getattr(signature, "text", None) or f"inputs {needs}"
    raise FeedError(
        f"{twin.name}: cannot bind the reference's input(s) {left} to {described}: no "
        f"parameter has their names and {len(free)} unnamed required parameter(s) "
        f"{free} cannot take {len(left)} by position; name them alike, or give the twin "
        "input_names=[...] (its positional arguments, in the reference's input order)"
    )


class ExportSpecs:
    """An ONNX export's inputs and outputs, standing for the reference where there is no
    reference runner (golden=True): a twin's golden is fed and named as the export is."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self._specs = graph_input_specs(model)
        self._outputs = [vi.name for vi in model.graph.output]

    def input_specs(self) -> list[TensorSpec]:
        return list(self._specs)

    def output_names(self) -> list[str]:
        return list(self._outputs)


class Twin:
    """The twin runner, fed and read under the reference's names."""

    def __init__(
        self,
        runner: Any,
        inputs: dict[str, tuple[str, str]],
        outputs: list[str],
        specs: list[TensorSpec] | None = None,
    ) -> None:
        self._runner = runner
        self._specs = specs  # the reference's inputs: what the twin is fed
        self._inputs = inputs  # reference name -> (twin name, how)
        self._outputs = outputs  # the reference's output names, in order
        self._how_outputs = ""
        self._renamed: dict[str, str] = {}  # twin output name -> reference name
        self._set_aside: list[str] = []
        self._output_hint = ""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def input_specs(self) -> list[TensorSpec]:
        return list(self._specs) if self._specs is not None else self._runner.input_specs()

    def specs_for(self, names: list[str]) -> list[TensorSpec]:
        """Shapes name the reference's inputs, whose specs are all known."""
        return [] if self._specs is not None else list(self._runner.specs_for(names))

    def _kept(self) -> list[str]:
        """The twin's own output names, but those set aside."""
        return [name for name in self._runner.output_names() if name not in self._set_aside]

    def output_names(self) -> list[str]:
        if self._how_outputs:
            return [self._renamed.get(name, name) for name in self._kept()]
        return list(self._outputs) or list(self._runner.output_names())

    def _renamed_feed(self, feed: Mapping[str, Any]) -> dict[str, Any]:
        """The feed under the twin's own input names."""
        return {self._inputs.get(name, (name, ""))[0]: value for name, value in feed.items()}

    def infer(self, feed: Mapping[str, Any]) -> dict[str, np.ndarray]:
        got: dict[str, np.ndarray] = self._runner.infer(self._renamed_feed(feed))
        if not self._how_outputs:
            self._match_outputs(list(got))
        return {self._renamed.get(k, k): v for k, v in got.items() if k not in self._set_aside}

    def _match_outputs(self, got: list[str]) -> None:
        """Bind the model's outputs to the reference's; a per-layer twin's module outputs
        (`outputs="all"` against a golden) keep their module names, never set aside."""
        layers = getattr(self._runner, "layers", None) or ()
        modules = {layer.tensor for layer in layers if not layer.model_output}
        got = [name for name in got if name not in modules]
        want = self._outputs
        if not want or set(want) <= set(got):
            self._how_outputs = "by name"
            self._set_aside = [name for name in got if want and name not in want]
        elif len(got) == len(want):
            self._how_outputs = "by position"
            self._renamed = {g: w for g, w in zip(got, want, strict=True) if g != w}
        else:
            self._how_outputs = "by name"  # the comparison names what is missing
            self._output_hint = (
                f"outputs neither by name nor by position: the twin returns {got}, the "
                f"reference {want}; give the twin output_names=[...] ({len(got)} names) or "
                "outputs=[...] (the ones to compare)"
            )

    @property
    def binding_note(self) -> str:
        """'inputs by position: input -> x; outputs by position: output -> logits', or ''."""
        parts = []
        inputs = [f"{w} -> {h}" for w, (h, how) in self._inputs.items() if how != "by name"]
        if inputs:
            parts.append(f"inputs by position: {', '.join(inputs)}")
        if self._renamed:
            renamed = ", ".join(f"{g} -> {w}" for g, w in self._renamed.items())
            parts.append(f"outputs by position: {renamed}")
        if self._output_hint:
            parts.append(self._output_hint)
        return "; ".join(parts)

    def describe(self) -> dict[str, Any]:
        names = {
            "inputs": {w: f"{h} ({how})" for w, (h, how) in self._inputs.items()},
            "outputs": {
                self._renamed.get(g, g): f"{g} ({self._how_outputs})" for g in self._kept()
            },
        }
        info = {**self._runner.describe(), "twin_names": names}
        if self._set_aside:
            info["outputs_set_aside"] = list(self._set_aside)
        return info


def as_twin(twin: Any, reference: Any) -> Any:
    """The twin under the reference's names (its own runner when every name agrees and its
    input specs are the reference's: a torch runner's default float32 specs, or those a
    runner of the same module learned in another test, must never make the feed)."""
    specs = list(reference.input_specs())
    inputs = input_map(specs, twin)
    outputs = list(reference.output_names())
    same = all(how == "by name" for _, how in inputs.values())
    if (
        same
        and outputs
        and set(outputs) <= set(twin.output_names())
        and len(outputs) == len(twin.output_names())
        and list(twin.input_specs()) == specs
    ):
        return twin
    return Twin(twin, inputs, outputs, specs)
