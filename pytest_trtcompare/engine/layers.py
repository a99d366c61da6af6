"""What a per-layer comparison knows beyond its tensors, and which of them a report lists.

A per-layer result can hold hundreds of tensors. The report, the accuracy summary, the JSON
report and JUnit properties all list the same few (`listed`): every failing layer, the
`AROUND` passing layers just before the first divergence, and the model's own outputs (when
nothing fails: the layer closest to failing and the model outputs); the rest are counted.
With verbosity 2 (`-vv`) every layer is listed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from .outputs import OutputComparison

#: Passing layers listed just before the first divergence.
AROUND = 2
#: `layer_dtypes=`: "float" (floating-point tensors only) or "all" (also int, bool, shapes).
LAYER_DTYPES = ("float", "all")


@dataclass(frozen=True)
class LayerView:
    """The producing node of each compared tensor and what the comparison left out."""

    nodes: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # tensor -> (node, op)
    model_outputs: tuple[str, ...] = ()  # the model's own outputs among the compared tensors
    left_out: int = 0  # tensors not compared because of their dtype (int, bool, shapes)
    mode: str = "gate"
    #: torch against ONNX: the torch module output compared with each ONNX tensor, and the
    #: module outputs that have no ONNX counterpart (listed, not compared)
    modules: Mapping[str, str] = field(default_factory=dict)
    unmatched: tuple[str, ...] = ()
    #: tensors larger than the memory budget (`budget`, as text), each fetched alone
    over_budget: tuple[str, ...] = ()
    budget: str = ""

    def label(self, tensor: str) -> str:
        """'/encoder/layer.3/attn/Softmax (Softmax)', and the tensor's name after an arrow
        where it is not the exporter's '<node>_output_0'; the torch module it is compared
        with, for torch against ONNX."""
        node_op = self.nodes.get(tensor)
        module = self.modules.get(tensor)
        suffix = f" = torch {module}" if module and module != tensor else ""
        if node_op is None:
            return tensor + suffix
        node, op = node_op
        text = f"{node} ({op})" if op else node
        if tensor not in (node, f"{node}_output_0"):
            text += f" -> {tensor}"
        return text + suffix

    def gating(self, names: list[str]) -> list[str]:
        """The tensors whose verdict is the comparison's: all, or the model outputs alone."""
        if self.mode == "report" and self.model_outputs:
            return [name for name in names if name in self.model_outputs]
        return names


class LayerResult(Protocol):
    @property
    def outputs(self) -> Mapping[str, OutputComparison]: ...
    @property
    def layers(self) -> LayerView | None: ...


@dataclass(frozen=True)
class Listing:
    """Which tensors a report lists: `detailed` in full, `names` (all listed, topological
    order) in one line each, and how many passing layers it leaves unlisted."""

    detailed: tuple[str, ...]
    names: tuple[str, ...]
    not_shown: int


def listed(result: LayerResult, verbosity: int = 0) -> Listing:
    """The tensors to list (see the module docstring)."""
    view = result.layers or LayerView()
    names = list(result.outputs)
    failing = [name for name in names if not result.outputs[name].passed]
    if verbosity >= 2:
        return Listing(tuple(failing), tuple(names), 0)
    first = failing[0] if failing else None
    detailed = [name for name in failing if verbosity >= 1 or name in (first, *view.model_outputs)]
    shown = set(failing) | {name for name in view.model_outputs if name in result.outputs}
    if first is not None:
        before = [name for name in names[: names.index(first)] if result.outputs[name].passed]
        shown.update(before[-AROUND:])
    elif names:  # nothing failed: the layer closest to failing
        shown.add(max(names, key=lambda name: result.outputs[name].margin))
    ordered = tuple(name for name in names if name in shown)
    return Listing(tuple(detailed), ordered, len(names) - len(ordered))
