"""Graph helpers shared by the ONNX runners: dtypes, specs, and marking every tensor an output."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

from .base import Dim, Layer, TensorSpec


def numpy_dtype_name(elem_type: int) -> str:
    """ONNX element type -> numpy dtype name ('bfloat16' for BFLOAT16, via ml_dtypes)."""
    if elem_type == TensorProto.BFLOAT16:
        return "bfloat16"
    try:
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)))
    except (KeyError, ValueError):
        return str(TensorProto.DataType.Name(elem_type)).lower()


def _dims(tensor_type: onnx.TypeProto.Tensor) -> tuple[Dim, ...] | None:
    if not tensor_type.HasField("shape"):
        return None  # unknown rank: any shape fits
    dims: list[Dim] = []
    for dim in tensor_type.shape.dim:
        if dim.HasField("dim_value"):
            dims.append(int(dim.dim_value))
        elif dim.HasField("dim_param"):
            dims.append(dim.dim_param)
        else:
            dims.append(None)
    return tuple(dims)


def value_spec(value_info: onnx.ValueInfoProto) -> TensorSpec:
    """The spec of a tensor, sequence, optional or optional sequence value."""
    kinds: list[str] = []
    value_type = value_info.type
    while value_type.WhichOneof("value") in ("sequence_type", "optional_type"):
        if value_type.HasField("sequence_type"):
            kinds.append("sequence")
            value_type = value_type.sequence_type.elem_type
        else:
            kinds.append("optional")
            value_type = value_type.optional_type.elem_type
    tensor = value_type.tensor_type
    dtype = numpy_dtype_name(tensor.elem_type) if tensor.elem_type else "undefined"
    shape = _dims(tensor) if value_type.HasField("tensor_type") else None
    return TensorSpec(value_info.name, dtype, shape, " ".join(kinds) or "tensor")


def graph_input_specs(model: onnx.ModelProto) -> list[TensorSpec]:
    """Inputs that are not initializers (older exporters list weights as inputs too); an
    integer input that indexes an embedding table carries the table's rows as its range."""
    weights = {t.name for t in model.graph.initializer}
    specs = [value_spec(vi) for vi in model.graph.input if vi.name not in weights]
    if not any(spec.dtype.startswith(("int", "uint")) for spec in specs):
        return specs
    rows = embedding_rows(model.graph)
    return [
        dataclasses.replace(spec, value_range=(0, rows[spec.name] - 1))
        if spec.name in rows and spec.kind == "tensor"
        else spec
        for spec in specs
    ]


#: Ops through which an index tensor reaches its Gather unchanged in value.
_PASS_THROUGH = {"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Cast", "Expand"}


def embedding_rows(graph: onnx.GraphProto) -> dict[str, int]:
    """Graph input -> rows of the smallest constant table a Gather indexes with it (axis 0),
    directly or through reshapes and casts: the token ids of an embedding."""
    tables = {t.name: list(t.dims) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant" and node.attribute and node.attribute[0].name == "value":
            tables[node.output[0]] = list(node.attribute[0].t.dims)
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, index))
    found: dict[str, int] = {}
    for vi in graph.input:
        frontier, seen, smallest = [vi.name], {vi.name}, None
        while frontier:
            for node, index in consumers.get(frontier.pop(), []):
                if node.op_type == "Gather" and index == 1 and node.input[0] in tables:
                    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                    dims = tables[node.input[0]]
                    if axis == 0 and dims and dims[0] > 0:
                        smallest = dims[0] if smallest is None else min(smallest, dims[0])
                elif node.op_type in _PASS_THROUGH and index == 0:
                    for name in node.output:
                        if name not in seen:
                            seen.add(name)
                            frontier.append(name)
        if smallest is not None:
            found[vi.name] = smallest
    return found


def with_outputs(model: onnx.ModelProto, names: Sequence[str]) -> onnx.ModelProto:
    """The model with the intermediate tensors among `names` marked outputs beside its own
    (the model itself when `names` are all outputs; names of no tensor are left for the
    runner to refuse)."""
    own = {vi.name for vi in model.graph.output}
    if all(name in own for name in names):
        return model
    marked, _ = with_all_outputs(model)
    kept = [vi for vi in marked.graph.output if vi.name in own or vi.name in names]
    del marked.graph.output[:]
    marked.graph.output.extend(kept)
    return marked


def with_all_outputs(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[Layer]]:
    """A copy whose graph outputs are every typed intermediate tensor, and those tensors in
    topological order with the node that produces each: every node output typed by shape
    inference (untyped ones skipped), the graph's own outputs at the place their producer runs.
    """
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # shape inference is best effort: fall back to what the model says
        inferred = model
    typed = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    marked = copy.deepcopy(model)
    existing = {vi.name for vi in marked.graph.output}
    layers: list[Layer] = []
    seen: set[str] = set()
    for node in model.graph.node:
        for name in node.output:
            vi = typed.get(name) if name and name not in seen else None
            if vi is None or not vi.type.tensor_type.elem_type:  # untyped, or no tensor
                continue
            seen.add(name)
            if name not in existing:
                marked.graph.output.append(vi)
            dtype = numpy_dtype_name(vi.type.tensor_type.elem_type)
            layers.append(Layer(name, node.name or name, node.op_type, dtype, name in existing))
    return marked, layers
