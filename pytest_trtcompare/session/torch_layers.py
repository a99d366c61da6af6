"""Per-layer comparison of a torch model against its ONNX export: each submodule's output
(forward hooks, `outputs="all"`) matched to the ONNX tensor by which that module's nodes
leave it, through the module scopes `torch.onnx.export` records (runners/onnx_scopes.py).

A module's k-th call takes the k-th float tensor leaving its scope (the legacy exporter
numbers calls where it suffixes the module's own name, `relu_1`; the dynamo exporter's
calls share one scope, as do the legacy exporter's calls of a module only whose inner names
it suffixed, `conv.0/conv.0.1_2`: their exits are taken in order when there are as many as
calls, else those calls stay unmatched and named; a single call with several exits takes
the last). A BatchNorm that the legacy exporter folded into the Conv before it has no nodes:
it takes that Conv's tensor, which holds the folded result. One ONNX tensor is compared
once, with the first module (in call order) that reaches it. Modules with no counterpart
(fused away, identities, dropout) are listed in the report, not failed. A twin exported
inside a wrapper is matched under the wrapper's scope prefix (`export_prefix`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import onnx

from ..errors import LayerMatchError
from ..runners import Layer, Scope, module_exits, node_scopes, scope_names
from .twins import Twin, input_map


def match_modules(
    model: onnx.ModelProto, taps: Sequence[Layer], float_tensors: set[str]
) -> tuple[dict[str, str], list[str]]:
    """(torch output name -> ONNX tensor, torch outputs without a counterpart)."""
    modules = {tap.node for tap in taps}
    prefix = export_prefix(model, modules)
    exits = module_exits(model, node_scopes(model, _under(prefix, modules)))
    call_of = {tap.tensor: _call_of(tap) for tap in taps}
    calls = Counter(tap.node for tap in taps if call_of[tap.tensor] is not None)
    exit_of: dict[str, str | None] = {}  # each tap's exit tensor, before the float filter
    for tap in taps:
        call = call_of[tap.tensor]
        module = f"{prefix}.{tap.node}" if prefix else tap.node
        exit_of[tap.tensor] = None if call is None else _exit(exits, module, call, calls[tap.node])
    matched: dict[str, str] = {}
    folded: set[str] = set()  # Conv outputs the export folded a BatchNorm into
    previous: str | None = None
    for tap in taps:
        tensor = exit_of[tap.tensor]
        tensor = tensor if tensor in float_tensors else None
        if tensor is None and previous in matched and "BatchNorm" in tap.op:
            tensor = matched.pop(previous)  # folded into the Conv before it (legacy export)
            folded.add(previous)
        if tensor is not None and tensor not in matched.values():
            matched[tap.tensor] = tensor
        previous = tap.tensor
    shared = set(matched.values())
    unmatched = [
        tap.tensor
        for tap in taps
        if tap.tensor not in matched and (tap.tensor in folded or exit_of[tap.tensor] not in shared)
    ]
    return matched, unmatched


def export_prefix(model: onnx.ModelProto, modules: set[str]) -> str:
    """'' when the export's scopes name the twin's modules as they are; else the scope of the
    exported module that holds the twin (the user exported a wrapper, `self.model = twin`,
    and gave the twin: `model.lin1` in the export is the twin's `lin1`). The prefixes that
    put a twin module's name under an export scope are tried, the most voted first, and
    one wins only where it names more of the twin's modules than none does (a Hugging Face
    twin has a module `model` of its own, which a wrapper's `model` scope also matches)."""
    votes: Counter[str] = Counter()
    for name in scope_names(model):
        for at, char in enumerate(name):
            if char == "." and name[at + 1 :] in modules:
                votes[name[:at]] += 1
    best, found = "", _named(model, modules, "")
    for candidate, _ in votes.most_common(_CANDIDATES):
        count = _named(model, modules, candidate)
        if count > found:
            best, found = candidate, count
    return best


_CANDIDATES = 3  # prefixes checked in full (each reads the graph's scopes once)


def _named(model: onnx.ModelProto, modules: set[str], prefix: str) -> int:
    """How many of the twin's modules the export's scopes name under `prefix`."""
    under = _under(prefix, modules)
    named = {scope.module for chain in node_scopes(model, under) for scope in chain}
    return len(named - _under(prefix, set()))


def _under(prefix: str, modules: set[str]) -> set[str]:
    """The modules' names under `prefix`, with the prefix and its parents (`a`, `a.b`)."""
    if not prefix:
        return set(modules)
    parts = prefix.split(".")
    parents = {".".join(parts[: i + 1]) for i in range(len(parts))}
    return parents | {f"{prefix}.{module}" for module in modules}


def _call_of(tap: Layer) -> int | None:
    """0 for `module`, k - 1 for `module#k`; None for one leaf of a module's tuple output."""
    if tap.tensor == tap.node:
        return 0
    head, _, count = tap.tensor.rpartition("#")
    return int(count) - 1 if head == tap.node and count.isdigit() else None


def _exit(exits: Mapping[Scope, list[str]], module: str, call: int, calls: int) -> str | None:
    numbered = exits.get(Scope(module, call))
    if numbered and all(Scope(module, k) in exits for k in range(calls)):
        return numbered[-1]  # the legacy exporter says which call a node belongs to
    # A module whose own name is never suffixed (the exporter suffixes the innermost name
    # that repeats: `conv.0/conv.0.1_2`) has every call's nodes under call 0.
    shared = exits.get(Scope(module), [])
    if len(shared) == calls:
        return shared[call]
    return shared[-1] if calls == 1 and shared else None


class TorchLayers(Twin):
    """A torch runner built with outputs="all", read under the ONNX reference's tensor names."""

    def __init__(self, runner: Any, reference: Any, model: onnx.ModelProto) -> None:
        inputs = input_map(reference.input_specs(), runner)
        outputs = [vi.name for vi in model.graph.output]
        super().__init__(runner, inputs, outputs, reference.input_specs())
        self._reference = reference
        self._model = model
        self._to_onnx: dict[str, str] | None = None
        self.unmatched_layers: tuple[str, ...] = ()
        self.module_of: dict[str, str] = {}  # ONNX tensor -> torch module output

    def discover_layers(self, feed: Mapping[str, Any]) -> None:
        if self._to_onnx is not None:
            return
        self._runner.discover_layers(self._renamed_feed(feed))
        layers = self._runner.layers or []
        floats = {
            layer.tensor
            for layer in self._reference.layers or ()
            if layer.dtype.startswith(("float", "bfloat"))
        }
        taps = [layer for layer in layers if not layer.model_output]
        matched, unmatched = match_modules(self._model, taps, floats)
        if taps and not matched:
            raise LayerMatchError(self._no_module_matched(taps))
        outputs = [layer.tensor for layer in layers if layer.model_output]
        self._match_outputs(outputs)
        for name in outputs:  # the model's outputs, unless a module's output is the same tensor
            tensor = self._renamed.get(name, name)
            if name not in self._set_aside and tensor not in matched.values():
                matched[name] = tensor
        self._to_onnx = matched
        self.module_of = {tensor: name for name, tensor in matched.items()}
        self.unmatched_layers = tuple(unmatched)

    def _no_module_matched(self, taps: Sequence[Layer]) -> str:
        module = getattr(self._runner, "module", None)
        twin = "the torch twin" + (f" {type(module).__name__}" if module is not None else "")
        names = list(dict.fromkeys(tap.node for tap in taps))
        shown = ", ".join(names[:8]) + (f" (+{len(names) - 8} more)" if len(names) > 8 else "")
        scopes = sorted(scope_names(self._model), key=lambda n: (n.count("."), n))
        outer = ", ".join(scopes[:8]) or "none recorded (an export without module scopes)"
        source = getattr(getattr(self._reference, "loaded", None), "source", None)
        export = f"its export {source}" if source else "its export"
        return (
            f"outputs='all': no module of {twin} ({shown}) is named in the module scopes of "
            f"{export} (outer scopes: {outer}), so no layer could be compared; give as the "
            "twin the module that was exported"
        )

    def output_names(self) -> list[str]:
        return list((self._to_onnx or {}).values())

    @property
    def layers(self) -> list[Layer] | None:
        if self._to_onnx is None:
            return None
        own = {layer.tensor: layer for layer in self._runner.layers or ()}
        return [
            Layer(tensor, own[name].node, own[name].op, own[name].dtype, own[name].model_output)
            for name, tensor in self._to_onnx.items()
        ]

    @property
    def layer_order(self) -> list[str] | None:
        layers = self.layers
        return None if layers is None else [layer.tensor for layer in layers]

    @contextmanager
    def select_outputs(self, names: Sequence[str]) -> Iterator[None]:
        back = {tensor: name for name, tensor in (self._to_onnx or {}).items()}
        with self._runner.select_outputs([back[n] for n in names if n in back]):
            yield

    def infer(self, feed: Mapping[str, Any]) -> dict[str, np.ndarray]:
        self.discover_layers(feed)
        assert self._to_onnx is not None
        got: dict[str, np.ndarray] = self._runner.infer(self._renamed_feed(feed))
        return {self._to_onnx[name]: value for name, value in got.items() if name in self._to_onnx}

    def describe(self) -> dict[str, Any]:
        info = super().describe()
        info["layers_matched"] = len(self._to_onnx or {})
        if self.unmatched_layers:
            info["layers_without_onnx_counterpart"] = list(self.unmatched_layers)
        return info
