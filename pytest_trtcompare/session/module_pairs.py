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

import contextlib
import re
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import onnx

from ..errors import LayerMatchError
from ..runners import (
    Layer,
    Scope,
    module_entries,
    module_exits,
    module_nodes,
    node_scopes,
    scope_names,
    subgraph_scopes,
)
from .twins import Twin, input_map


def match_modules(
    model: onnx.ModelProto,
    taps: Sequence[Layer],
    float_tensors: set[str],
    batch_norms: Collection[str] | None = None,
) -> tuple[dict[str, str], list[str]]:
    """(torch output name -> ONNX tensor, torch outputs without a counterpart).
    `batch_norms`: the modules that are batch norms (default: those whose class name says
    BatchNorm), whose folding into the Conv before them is looked for."""
    modules = {tap.node for tap in taps}
    prefix = export_prefix(model, modules)
    scopes = node_scopes(model, _under(prefix, modules))
    exits = module_exits(model, scopes)
    members = module_nodes(scopes)

    def qualified(module: str) -> str:
        return f"{prefix}.{module}" if prefix else module

    call_of = {tap.tensor: _call_of(tap) for tap in taps}
    calls = Counter(tap.node for tap in taps if call_of[tap.tensor] is not None)
    exit_of: dict[str, str | None] = {}  # each tap's exit tensor, before the float filter
    for tap in taps:
        call = call_of[tap.tensor]
        module = qualified(tap.node)
        exit_of[tap.tensor] = None if call is None else _exit(exits, module, call, calls[tap.node])
    exit_of.update(_leaf_exits(model, taps, exits, float_tensors, qualified))
    if batch_norms is None:
        batch_norms = {tap.node for tap in taps if "BatchNorm" in tap.op}
    float_tensors = float_tensors - _fused_after_export(model)
    matched: dict[str, str] = {}
    folded: set[str] = set()  # Conv outputs the export folded a BatchNorm into
    for tap in taps:
        tensor = exit_of[tap.tensor]
        tensor = tensor if tensor in float_tensors else None
        nodes = members.get(Scope(qualified(tap.node)), set())
        if tap.node in batch_norms and not _runs(model, nodes, *_FOLDS):
            # folded by the exporter into the Conv before it, whose tensor holds Conv and
            # BatchNorm: that Conv module's own output has no counterpart. (The dynamo
            # exporter's folded Conv is in the BatchNorm's scope: nothing to undo then.)
            entries = set(module_entries(model, nodes)) if nodes else set()
            for conv, conv_tensor in list(matched.items()):
                if conv_tensor in entries and _made_by(model, conv_tensor, _CONVS):
                    del matched[conv]
                    folded.add(conv)
            last = next(reversed(matched), None)  # the module matched last: that Conv
            if not nodes and tensor is None and last and _made_by(model, matched[last], _CONVS):
                tensor = matched.pop(last)  # no node of its own: it takes the Conv's tensor
                folded.add(last)
        if tensor is not None and tensor not in matched.values():
            matched[tap.tensor] = tensor
    shared = set(matched.values())
    unmatched = [
        tap.tensor
        for tap in taps
        if tap.tensor not in matched and (tap.tensor in folded or exit_of[tap.tensor] not in shared)
    ]
    return matched, unmatched


_LEGACY_NAME = re.compile(r"^(/.+)_output_\d+$")


def _fused_after_export(model: onnx.ModelProto) -> set[str]:
    """Tensors that a node makes under the name the exporter gave another node's output
    (`/layer1/relu/Relu_output_0` made by `/layer1/conv1/Conv`): the graph was rewritten
    after the export (a quantizer fused the Relu into the Conv), so the tensor holds more
    than its producer's module computed; no module is paired with it."""
    names = {node.name for node in model.graph.node}
    found = set()
    for node in model.graph.node:
        for tensor in node.output:
            match = _LEGACY_NAME.match(tensor)
            if match and match.group(1) != node.name and match.group(1) not in names:
                found.add(tensor)
    return found


_CONVS = ("Conv", "ConvTranspose")
_FOLDS = ("BatchNormalization", *_CONVS)  # a BatchNorm scope holding one was not folded away


def _runs(model: onnx.ModelProto, nodes: set[int], *op_types: str) -> bool:
    return any(model.graph.node[index].op_type in op_types for index in nodes)


def _made_by(model: onnx.ModelProto, tensor: str, op_types: tuple[str, ...]) -> bool:
    return any(tensor in node.output for node in model.graph.node if node.op_type in op_types)


def _leaf_exits(
    model: onnx.ModelProto,
    taps: Sequence[Layer],
    exits: Mapping[Scope, list[str]],
    float_tensors: set[str],
    qualified: Any,
) -> dict[str, str]:
    """The exits of modules that return several tensors (an LSTM's output and its states).
    An exit that is an output of an ONNX LSTM, GRU or RNN node (reshaped at most) goes to the
    module's output of that position, torch's (output, (h_n, c_n)) being the node's (Y, Y_h,
    Y_c), where its shape fits (the export's; a dynamic dimension fits any). Any other exit
    goes to the one output of its call whose shape is its shape, where the export fixes every
    dimension of it. Else the outputs stay unmatched (and are listed)."""
    leaves: dict[tuple[str, str], list[Layer]] = {}
    for tap in taps:
        base, colon, _ = tap.tensor.partition(":")
        if colon and _call_of(Layer(base, tap.node, tap.op, tap.dtype)) is not None:
            leaves.setdefault((tap.node, base), []).append(tap)
    if not leaves:
        return {}
    bases = Counter(module for module, _ in leaves)
    shapes = _tensor_shapes(model)
    found: dict[str, str] = {}
    for (module, base), outputs in leaves.items():
        call = _call_of(Layer(base, module, "", ""))
        assert call is not None
        numbered = exits.get(Scope(qualified(module), call))
        if numbered is None and bases[module] == 1:
            numbered = exits.get(Scope(qualified(module)), [])
        for tensor in [t for t in numbered or [] if t in float_tensors]:
            fits = [
                leaf
                for leaf in outputs
                if leaf.tensor not in found and _fits(leaf.shape, shapes.get(tensor))
            ]
            position = _recurrent_output(model, tensor)
            if position is not None and position < len(outputs):
                fits = [leaf for leaf in fits if leaf is outputs[position]]
            elif not _static(shapes.get(tensor)):
                continue
            if len(fits) == 1:
                found[fits[0].tensor] = tensor
    return found


_RECURRENT = ("LSTM", "GRU", "RNN")
_RESHAPING = ("Transpose", "Squeeze", "Unsqueeze", "Reshape", "Identity", "Flatten")


def _recurrent_output(model: onnx.ModelProto, tensor: str) -> int | None:
    """Which output of an ONNX LSTM / GRU / RNN node `tensor` is, through ops that only
    reshape it; None where it is none."""
    producers = {
        name: (node, position)
        for node in model.graph.node
        for position, name in enumerate(node.output)
        if name
    }
    seen = set()
    while tensor in producers and tensor not in seen:
        seen.add(tensor)
        node, position = producers[tensor]
        if node.op_type in _RECURRENT:
            return position
        if node.op_type not in _RESHAPING or not node.input:
            return None
        tensor = node.input[0]
    return None


def _fits(shape: tuple[int, ...] | None, exported: tuple[int | None, ...] | None) -> bool:
    """Whether a torch output's shape can be the exported tensor's (None: a dynamic dim)."""
    if shape is None or exported is None or len(shape) != len(exported):
        return False
    return all(want is None or want == got for want, got in zip(exported, shape, strict=True))


def _static(exported: tuple[int | None, ...] | None) -> bool:
    """A shape the export fixes in every dimension: one that a data-dependent tensor (a
    detector's boxes before NMS) cannot merely share by its rank."""
    return exported is not None and None not in exported


def _tensor_shapes(model: onnx.ModelProto) -> dict[str, tuple[int | None, ...]]:
    """The shapes the export records (value_info, inputs, outputs), inferred where it
    records none; a dimension without a fixed size is None."""
    infos = [*model.graph.value_info, *model.graph.output, *model.graph.input]
    if not model.graph.value_info:
        with contextlib.suppress(Exception):  # one shape inference cannot read: no guesses
            infos = list(onnx.shape_inference.infer_shapes(model).graph.value_info) + infos
    shapes = {}
    for info in infos:
        tensor = info.type.tensor_type
        if tensor.HasField("shape"):
            shapes[info.name] = tuple(
                dim.dim_value if dim.HasField("dim_value") else None for dim in tensor.shape.dim
            )
    return shapes


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
        matched, unmatched = match_modules(self._model, taps, floats, self._batch_norms(taps))
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

    def _batch_norms(self, taps: Sequence[Layer]) -> set[str] | None:
        """The twin's batch norms (BatchNorm1d/2d/3d, SyncBatchNorm and subclasses such as
        timm's BatchNormAct2d): modules with running statistics and a momentum, as torch's
        _BatchNorm has (None where the runner holds no module: told by class name)."""
        module = getattr(self._runner, "module", None)
        named = getattr(module, "named_modules", None)
        if named is None:
            return None
        wanted = {tap.node for tap in taps}
        return {
            name
            for name, child in named()
            if name in wanted and hasattr(child, "running_mean") and hasattr(child, "momentum")
        }

    def _no_module_matched(self, taps: Sequence[Layer]) -> str:
        module = getattr(self._runner, "module", None)
        twin = "the torch twin" + (f" {type(module).__name__}" if module is not None else "")
        names = list(dict.fromkeys(tap.node for tap in taps))
        shown = ", ".join(names[:8]) + (f" (+{len(names) - 8} more)" if len(names) > 8 else "")
        looped = {
            name: node for name, node in subgraph_scopes(self._model).items() if name in names
        }
        if looped:
            inside = ", ".join(f"{name} (in {node})" for name, node in list(looped.items())[:8])
            return (
                f"outputs='all': the modules of {twin} that the export records ({inside}) run "
                "inside a subgraph (a Loop or If body), once per iteration or branch, so no "
                "tensor of the model is one call of theirs and no layer could be compared; "
                "compare the model's outputs (no outputs=), or per layer an export whose "
                "loop is unrolled (torch.onnx.export of the eager module traces it)"
            )
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
