"""The float64 version of an ONNX model: the anchor of the fp64 check (session/anchored.py).

Every float32 tensor becomes float64: initializers (from their float32 values, exactly),
Constant and ConstantOfShape values, the `to` of Casts and the `dtype` of the generators,
in the graph and in every subgraph. float32 inputs stay float32 (and outputs that are
inputs), each cast to float64 as the graph's first node (feeds and goldens do not change;
the cast is exact); outputs become
float64, so the anchor keeps its digits. Intermediate type annotations (value_info) are
dropped: they would name float32. onnx.reference computes in the types it is given, so the
whole graph runs in float64; ONNX Runtime's CPU kernels lack float64 for Conv and others,
which is why the anchor of an ONNX reference is onnx.reference.
"""

from __future__ import annotations

import copy

import onnx
from onnx import TensorProto, helper, numpy_helper

from .float16_repair import all_graphs

FLOAT, DOUBLE = TensorProto.FLOAT, TensorProto.DOUBLE
#: Nodes whose attribute names the type they make.
_TYPE_ATTRIBUTES = {
    "Cast": "to",
    "EyeLike": "dtype",
    "RandomNormal": "dtype",
    "RandomNormalLike": "dtype",
    "RandomUniform": "dtype",
    "RandomUniformLike": "dtype",
    "Bernoulli": "dtype",
}
# LayerNormalization's stash_type stays FLOAT: onnx.reference takes no other, and computes in
# the type of its input (float64 here) whatever stash_type says.
SUFFIX = "__fp64"


def to_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """A float64 copy of `model` (see the module)."""
    proto = copy.deepcopy(model)
    graph = proto.graph
    weights = {init.name for init in graph.initializer}
    renamed = {
        value.name: value.name + SUFFIX
        for value in graph.input
        if value.type.tensor_type.elem_type == FLOAT and value.name not in weights
    }
    casts = [
        helper.make_node("Cast", [old], [new], to=DOUBLE, name=new) for old, new in renamed.items()
    ]
    for sub in all_graphs(graph):
        _convert(sub)
    if renamed:
        for sub in all_graphs(graph):
            for node in sub.node:
                node.input[:] = [renamed.get(name, name) for name in node.input]
        nodes = [copy.deepcopy(node) for node in graph.node]  # copies: del frees the originals
        del graph.node[:]
        graph.node.extend([*casts, *nodes])
    for value in [*graph.input, *graph.output]:  # an input may also be an output
        if value.name in renamed:
            value.type.tensor_type.elem_type = FLOAT  # _convert made it DOUBLE
    return proto


def _convert(graph: onnx.GraphProto) -> None:
    for index, init in enumerate(graph.initializer):
        if init.data_type == FLOAT:
            graph.initializer[index].CopyFrom(
                numpy_helper.from_array(numpy_helper.to_array(init).astype("float64"), init.name)
            )
    for value in [*graph.input, *graph.output]:
        if value.type.tensor_type.elem_type == FLOAT:
            value.type.tensor_type.elem_type = DOUBLE
    del graph.value_info[:]
    for node in graph.node:
        typed = _TYPE_ATTRIBUTES.get(node.op_type)
        for attribute in node.attribute:
            if attribute.name == typed and attribute.i == FLOAT:
                attribute.i = DOUBLE
            elif attribute.type == onnx.AttributeProto.TENSOR and attribute.t.data_type == FLOAT:
                array = numpy_helper.to_array(attribute.t).astype("float64")
                attribute.t.CopyFrom(numpy_helper.from_array(array, attribute.t.name))
            elif node.op_type == "Constant" and attribute.name in ("value_float", "value_floats"):
                scalar = attribute.name == "value_float"
                values = [attribute.f] if scalar else list(attribute.floats)
                shape = () if scalar else (len(values),)
                tensor = helper.make_tensor("value", DOUBLE, shape, values)
                attribute.Clear()
                attribute.CopyFrom(helper.make_attribute("value", tensor))
