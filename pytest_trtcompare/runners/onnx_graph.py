"""Graph helpers shared by the ONNX runners: dtypes, specs, and marking every tensor an output."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

from .base import Dim, Layer, TensorSpec, tensor_nbytes


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


def inferred_bytes(model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """The bytes of each node output that shape inference gives a whole shape to, with the
    graph inputs at `shapes`; the weights are typed, not copied (a model over 2 GB too)."""
    inputs = {vi.name for vi in model.graph.input}
    fed = [
        helper.make_tensor_value_info(vi.name, vi.type.tensor_type.elem_type, shapes[vi.name])
        if vi.name in shapes and vi.type.HasField("tensor_type")
        else vi
        for vi in model.graph.input
    ]
    small, typed = [], []
    for weight in model.graph.initializer:
        if int(np.prod(weight.dims, dtype=np.int64)) <= 64:  # shape data: Reshape's, Slice's
            small.append(weight)
        elif weight.name not in inputs:
            typed.append(helper.make_tensor_value_info(weight.name, weight.data_type, weight.dims))
    outputs = [
        helper.make_tensor_value_info(vi.name, vi.type.tensor_type.elem_type, None)
        for vi in model.graph.output
    ]
    light = helper.make_model(
        helper.make_graph(model.graph.node, model.graph.name, fed + typed, outputs, small),
        opset_imports=model.opset_import,
        ir_version=model.ir_version,
    )
    light.functions.extend(model.functions)
    try:
        inferred = onnx.shape_inference.infer_shapes(light, strict_mode=False, data_prop=True)
    except Exception:  # best effort: tensors without a size are fetched alone
        return {}
    found = {}
    for vi in [*inferred.graph.value_info, *inferred.graph.output]:
        dims = _dims(vi.type.tensor_type) if vi.type.HasField("tensor_type") else None
        if dims is not None and all(isinstance(d, int) and d >= 0 for d in dims):
            whole = [int(d) for d in dims if isinstance(d, int)]
            found[vi.name] = tensor_nbytes(whole, numpy_dtype_name(vi.type.tensor_type.elem_type))
    return found
