"""Repairs of what onnxruntime's float16 converter leaves (runners/precision.py), and the
graph order the reference evaluator needs.

The converter appends every Cast it adds to the main graph, after the nodes that read it
(the reference evaluator runs nodes in listed order), also the Casts around a node of an
`If` / `Loop` / `Scan` body that it keeps in float32, whose input only exists inside that
body; and it leaves `Cast(to=FLOAT)` nodes whose outputs it retyped to float16.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator

import onnx
from onnx import TensorProto

#: The names of the Casts the converter adds around a node it keeps in float32: before it
#: (up to float32) and after it (down to float16), as onnxruntime 1.24 on names them
#: (`x_cast_to_fp32_node`, after the tensor) and as before (`Node_input_cast0`, after the node).
_UP_CAST = re.compile(r"(_cast_to_(fp32|bfloat16)_node|_input_cast\d+)$")
_DOWN_CAST = re.compile(r"(_cast_to_fp16_node|_output_cast\d+)$")


def repair(model: onnx.ModelProto) -> None:
    """Fix what the float16 converter leaves: Casts outside the body whose value they read,
    stale Cast targets and node order."""
    move_casts_into_bodies(model.graph)
    for graph in all_graphs(model.graph):
        types = {
            vi.name: vi.type.tensor_type.elem_type
            for vi in [*graph.value_info, *graph.input, *graph.output]
        }
        for node in graph.node:
            if node.op_type == "Cast" and types.get(node.output[0]) == TensorProto.FLOAT16:
                for attribute in node.attribute:
                    if attribute.name == "to" and attribute.i == TensorProto.FLOAT:
                        attribute.i = TensorProto.FLOAT16
    topological_sort(model.graph)


def move_casts_into_bodies(graph: onnx.GraphProto) -> None:
    """Move each converter Cast of the main graph that reads a value made inside a subgraph
    into that subgraph, right after the value's producer (its first node for a body input),
    with its output's value_info. Repeated, for a Cast that reads a moved Cast's output."""
    while True:
        homes = _body_values(graph)
        moving = [
            node
            for node in graph.node
            if (_is_up_cast(node) or _is_down_cast(node, graph_inputs=False))
            and node.input[0] in homes
        ]
        if not moving:
            return
        for node in moving:
            body = homes[node.input[0]]
            nodes = list(body.node)
            at = next((i + 1 for i, n in enumerate(nodes) if node.input[0] in n.output), 0)
            del body.node[:]
            body.node.extend([*nodes[:at], copy.deepcopy(node), *nodes[at:]])
            graph.node.remove(node)
            for info in [vi for vi in graph.value_info if vi.name == node.output[0]]:
                body.value_info.append(info)
                graph.value_info.remove(info)


def bodies(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The subgraphs of a node (If branches, Loop and Scan bodies)."""
    for attribute in node.attribute:
        if attribute.HasField("g"):
            yield attribute.g
        yield from attribute.graphs


def all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """The graph and every subgraph inside it."""
    yield graph
    for node in graph.node:
        for sub in bodies(node):
            yield from all_graphs(sub)


def _body_values(graph: onnx.GraphProto) -> dict[str, onnx.GraphProto]:
    """Each name defined inside a subgraph of `graph` (at any depth) -> that subgraph."""
    homes: dict[str, onnx.GraphProto] = {}
    for body in list(all_graphs(graph))[1:]:
        names = [vi.name for vi in body.input] + [t.name for t in body.initializer]
        for name in [*names, *(out for node in body.node for out in node.output)]:
            homes[name] = body
    return homes


def remove_round_trips(model: onnx.ModelProto) -> None:
    """Drop the converter's float32 -> float16 -> float32 Cast pairs between kept nodes (and
    between a float32 graph input and a kept node): readers get the float32 tensor. Before
    a float32 graph output the second Cast stays, reading the float32 tensor (a copy).
    Duplicate up-Casts (same name, same output: invalid ONNX) are merged first."""
    graph = model.graph
    seen: set[str] = set()
    unique = []
    for node in graph.node:  # the converter adds one Cast per kept reader of a tensor, all alike
        if not (_is_up_cast(node) and node.output[0] in seen):
            unique.append(node)
            seen.update(node.output)
    del graph.node[:]
    graph.node.extend(unique)
    producers = {out: node for node in graph.node for out in node.output}
    rename: dict[str, str] = {}
    for node in graph.node:
        source = producers.get(node.input[0]) if node.op_type == "Cast" else None
        if source is None or not _is_down_cast(source):
            continue
        if _is_up_cast(node):
            rename[node.output[0]] = source.input[0]
        elif node.name.startswith("graph_output_cast"):
            node.input[0] = source.input[0]
    kept = [node for node in graph.node if node.output[0] not in rename]
    for node in kept:
        node.input[:] = [rename.get(name, name) for name in node.input]
    read = {name for node in kept for name in node.input} | {vi.name for vi in graph.output}
    kept = [  # the first Cast of a pair, when nobody reads it any more
        node for node in kept if not (_is_down_cast(node) and node.output[0] not in read)
    ]
    del graph.node[:]
    graph.node.extend(kept)
    live = {name for node in kept for name in [*node.input, *node.output]}
    stale = [vi for vi in graph.value_info if vi.name not in live]
    for vi in stale:
        graph.value_info.remove(vi)


def _is_up_cast(node: onnx.NodeProto) -> bool:
    """A low-precision -> float32 Cast the converter inserted (before a kept node)."""
    return node.op_type == "Cast" and bool(_UP_CAST.search(node.name))


def _is_down_cast(node: onnx.NodeProto, graph_inputs: bool = True) -> bool:
    """A float32 -> low-precision Cast the converter inserted (after a kept node or, with
    `graph_inputs`, after a float32 graph input)."""
    return node.op_type == "Cast" and (
        bool(_DOWN_CAST.search(node.name))
        or (graph_inputs and node.name.startswith("graph_input_cast"))
    )


def topological_sort(graph: onnx.GraphProto) -> None:
    """Reorder nodes so each comes after the producers of its inputs (stable otherwise)."""
    available = {vi.name for vi in graph.input} | {t.name for t in graph.initializer} | {""}
    pending = list(graph.node)
    ordered: list[onnx.NodeProto] = []
    while pending:
        progress = []
        for node in pending:
            needed = [*node.input, *implicit_inputs(node)]
            if all(name in available for name in needed if name):
                ordered.append(node)
                available.update(node.output)
            else:
                progress.append(node)
        if len(progress) == len(pending):  # a cycle or an input nobody produces: keep as is
            ordered.extend(progress)
            break
        pending = progress
    copies = [copy.deepcopy(node) for node in ordered]
    del graph.node[:]
    graph.node.extend(copies)


def implicit_inputs(node: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs (If / Loop / Scan bodies) read from the enclosing graph."""
    names: set[str] = set()
    for sub in bodies(node):
        local = {vi.name for vi in sub.input} | {t.name for t in sub.initializer}
        for inner in sub.node:
            local.update(inner.output)
        for inner in sub.node:
            names.update(n for n in [*inner.input, *implicit_inputs(inner)] if n not in local)
    return names
