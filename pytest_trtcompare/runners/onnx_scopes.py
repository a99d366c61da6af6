"""Which torch module each node of an exported ONNX model came from, as `torch.onnx.export`
records it, and the tensors by which a module's computation leaves it.

The default (dynamo) exporter writes each node's module stack in its `metadata_props` key
`pkg.torch.onnx.name_scopes`: `['', 'layer1', 'layer1.0', 'layer1.0.conv1', 'conv2d_1']`,
qualified module names between the root '' and the FX node's name. The legacy (TorchScript)
exporter writes it into node names: `/layer1/layer1.0/conv1/Conv`, each level named relative
to the one above or in full, a module's later calls suffixed `_1`, `_2` (`relu_1`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection
from dataclasses import dataclass

import onnx

SCOPES_KEY = "pkg.torch.onnx.name_scopes"
_CALL_SUFFIX = re.compile(r"^(.*)_(\d+)$")


@dataclass(frozen=True)
class Scope:
    """A module and which of its calls (None where the exporter does not say)."""

    module: str
    call: int | None = None


def node_scopes(model: onnx.ModelProto, modules: Collection[str]) -> list[tuple[Scope, ...]]:
    """Per node (in graph order), the modules it ran in, outermost first; () when the export
    recorded none. `modules` are the torch model's qualified module names (legacy names are
    resolved against them)."""
    known = set(modules)
    scopes = []
    for node in model.graph.node:
        props = {p.key: p.value for p in node.metadata_props}
        if SCOPES_KEY in props:
            scopes.append(tuple(Scope(n) for n in _dynamo_names(props[SCOPES_KEY]) if n in known))
        elif node.name.startswith("/"):
            scopes.append(_legacy_scopes(node.name, known))
        else:
            scopes.append(())
    return scopes


def scope_names(model: onnx.ModelProto) -> set[str]:
    """The qualified module names the export records: every scope of the dynamo exporter;
    the legacy exporter's node names joined level by level (a level named in full kept as
    it is: `/layer1/layer1.0/conv1` gives `layer1`, `layer1.0`, `layer1.0.conv1`; a level
    named relative to a grandparent comes out wrong, which `node_scopes` resolves right)."""
    names: set[str] = set()
    for node in model.graph.node:
        props = {p.key: p.value for p in node.metadata_props}
        if SCOPES_KEY in props:
            names.update(name for name in _dynamo_names(props[SCOPES_KEY]) if name)
        elif node.name.startswith("/"):
            path = ""
            for part in node.name.split("/")[1:-1]:
                path = part if not path or part.startswith(f"{path}.") else f"{path}.{part}"
                names.add(path)
    return names


def _dynamo_names(text: str) -> list[str]:
    """The module names of a dynamo exporter's scopes entry, between the root and the node."""
    try:
        names = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return []
    listed = names[1:-1] if isinstance(names, list) else []
    return [name for name in listed if isinstance(name, str)]


def _legacy_scopes(name: str, known: set[str]) -> tuple[Scope, ...]:
    found: list[Scope] = []
    path = ""
    for part in name.split("/")[1:-1]:
        resolved = _resolve(path, part, known)
        if resolved is None:
            break
        path = resolved[0]
        found.append(Scope(path, resolved[1]))
    return tuple(found)


def _resolve(path: str, part: str, known: set[str]) -> tuple[str, int] | None:
    """(qualified name, call index) of one level of a legacy node name."""
    prefixes = [path[:i] for i in range(len(path), 0, -1) if i == len(path) or path[i] == "."]
    suffixed = _CALL_SUFFIX.match(part)  # a later call: `relu_1`
    unsuffixed = [(suffixed.group(1), int(suffixed.group(2)))] if suffixed else []
    for candidate, call in ((part, 0), *unsuffixed):
        # relative to the level above (`conv1`), to one of its parents (`downsample.0` under
        # `layer2.0.downsample`), or in full (`layer1.0` under `layer1`)
        for full in (*(f"{prefix}.{candidate}" for prefix in prefixes), candidate):
            if full in known and (not path or full.startswith(f"{path}.")):
                return full, call
    return None


def module_nodes(scopes: list[tuple[Scope, ...]]) -> dict[Scope, set[int]]:
    """Per module call (and per module, call None), the indices of the nodes that ran in it."""
    members: dict[Scope, set[int]] = {}
    for index, chain in enumerate(scopes):
        for scope in chain:
            members.setdefault(scope, set()).add(index)
            if scope.call is not None:
                members.setdefault(Scope(scope.module), set()).add(index)
    return members


def module_exits(model: onnx.ModelProto, scopes: list[tuple[Scope, ...]]) -> dict[Scope, list[str]]:
    """Per module call (and per module, call None), the tensors its nodes make that nodes
    outside it read, or that are graph outputs, in graph order."""
    readers: dict[str, set[int]] = {}
    for index, node in enumerate(model.graph.node):
        for name in node.input:
            readers.setdefault(name, set()).add(index)
    outputs = {vi.name for vi in model.graph.output}
    exits: dict[Scope, list[str]] = {}
    for scope, nodes in module_nodes(scopes).items():
        found = []
        for index in sorted(nodes):
            for name in model.graph.node[index].output:
                if name and (name in outputs or readers.get(name, set()) - nodes):
                    found.append(name)
        exits[scope] = found
    return exits


def module_entries(model: onnx.ModelProto, nodes: set[int]) -> list[str]:
    """The tensors that these nodes read and nodes outside them make, in graph order."""
    made = {name for index in nodes for name in model.graph.node[index].output}
    producers = {
        name: index for index, node in enumerate(model.graph.node) for name in node.output if name
    }
    return [
        name
        for index in sorted(nodes)
        for name in model.graph.node[index].input
        if name in producers and name not in made
    ]


def subgraph_scopes(model: onnx.ModelProto) -> dict[str, str]:
    """Module names recorded only inside a subgraph (a Loop or If body, a Scan), each with
    the node holding that subgraph: `{'lin': '/Loop'}`. Their nodes run once per iteration
    or branch, so no tensor of the outer graph is one call of theirs."""
    outer = scope_names(model)
    found: dict[str, str] = {}
    for node in model.graph.node:
        for attribute in node.attribute:
            graphs = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
            for graph in graphs:
                inner = onnx.ModelProto(graph=graph)
                for name in sorted(scope_names(inner) | set(subgraph_scopes(inner))):
                    if name not in outer:
                        found.setdefault(name, node.name or node.op_type)
    return found
