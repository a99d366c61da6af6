"""TEST DOUBLE — not TensorRT: the network, its tensors and layers, and the ONNX parser.

The parser turns ONNX nodes into layers the way TensorRT's does where it matters here:
initializers become CONSTANT layers, `Shape` a SHAPE layer with a shape-tensor output, `If`
and `Loop` boundary layers around the layers of their bodies (which cannot be network outputs),
custom-domain nodes a parse error. See fake_tensorrt.py.
"""

from __future__ import annotations

import enum
import os
from typing import Any

import onnx
from onnx import external_data_helper

from .fake_trt_engine import CALLS, DataType, Dims, data_type

_SHAPE_OPERANDS = {"Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,)}


class ErrorCode(enum.IntEnum):
    SUCCESS = 0
    MODEL_DESERIALIZE_FAILED = 3
    INVALID_GRAPH = 5
    UNSUPPORTED_NODE = 8


class LayerType(enum.IntEnum):
    CONVOLUTION = 0
    CAST = 1
    ACTIVATION = 2
    SOFTMAX = 6
    CONCATENATION = 8
    ELEMENTWISE = 9
    UNARY = 11
    SHUFFLE = 13
    REDUCE = 14
    GATHER = 16
    MATRIX_MULTIPLY = 17
    CONSTANT = 19
    IDENTITY = 20
    SLICE = 22
    SHAPE = 23
    TRIP_LIMIT = 26
    LOOP_OUTPUT = 29
    QUANTIZE = 32
    DEQUANTIZE = 33
    CONDITION = 34
    CONDITIONAL_OUTPUT = 36
    NON_ZERO = 41


_LAYER_TYPES = {
    **dict.fromkeys(["MatMul", "Gemm"], LayerType.MATRIX_MULTIPLY),
    **dict.fromkeys(["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"], LayerType.ELEMENTWISE),
    **dict.fromkeys(["Relu", "Sigmoid", "Tanh", "LeakyRelu", "Elu"], LayerType.ACTIVATION),
    **dict.fromkeys(["Exp", "Log", "Sqrt", "Abs", "Neg", "Not", "Sin", "Cos"], LayerType.UNARY),
    **dict.fromkeys(["Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze"], LayerType.SHUFFLE),
    **dict.fromkeys(["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"], LayerType.REDUCE),
    "Conv": LayerType.CONVOLUTION,
    "Cast": LayerType.CAST,
    "Softmax": LayerType.SOFTMAX,
    "Concat": LayerType.CONCATENATION,
    "Gather": LayerType.GATHER,
    "Constant": LayerType.CONSTANT,
    "Slice": LayerType.SLICE,
    "Shape": LayerType.SHAPE,
    "NonZero": LayerType.NON_ZERO,
    "QuantizeLinear": LayerType.QUANTIZE,
    "DequantizeLinear": LayerType.DEQUANTIZE,
}


class ITensor:
    def __init__(self, name: str, shape: tuple[int, ...], dtype: DataType) -> None:
        self._name, self._shape, self._dtype = name, shape, dtype
        self._input = self._output = self._shape_tensor = self._in_subgraph = False

    @property
    def name(self) -> str:
        return self._name

    @property
    def shape(self) -> Dims:
        return Dims(self._shape)

    @property
    def dtype(self) -> DataType:
        return self._dtype

    @property
    def is_network_input(self) -> bool:
        return self._input

    @property
    def is_network_output(self) -> bool:
        return self._output

    @property
    def is_shape_tensor(self) -> bool:
        return self._shape_tensor


class ILayer:
    def __init__(self, name: str, kind: LayerType, inputs: list[ITensor], outputs: list[ITensor]):
        self._name, self._type, self._inputs, self._outputs = name, kind, inputs, outputs

    @property
    def name(self) -> str:
        return self._name

    @property
    def type(self) -> LayerType:
        return self._type

    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def get_input(self, index: int) -> ITensor:
        return self._inputs[index]

    def get_output(self, index: int) -> ITensor:
        return self._outputs[index]


class INetworkDefinition:
    def __init__(self, flags: int, strongly_typed: bool) -> None:
        self._flags, self._strongly_typed = flags, strongly_typed
        self._model: onnx.ModelProto | None = None
        self._inputs: list[ITensor] = []
        self._layers: list[ILayer] = []
        self._marked: list[ITensor] = []

    @property
    def flags(self) -> int:
        return self._flags

    def get_flag(self, flag: enum.IntEnum) -> bool:
        return bool(self._flags & (1 << int(flag)))

    @property
    def num_inputs(self) -> int:
        return len(self._inputs)

    def get_input(self, index: int) -> ITensor:
        return self._inputs[index]

    @property
    def num_layers(self) -> int:
        return len(self._layers)

    def get_layer(self, index: int) -> ILayer:
        return self._layers[index]

    def __len__(self) -> int:
        return len(self._layers)

    def __getitem__(self, index: int) -> ILayer:
        return self._layers[index]

    @property
    def num_outputs(self) -> int:
        return len(self._marked)

    def get_output(self, index: int) -> ITensor:
        return self._marked[index]

    def mark_output(self, tensor: ITensor) -> None:
        if not tensor._output:
            tensor._output = True
            self._marked.append(tensor)

    def unmark_output(self, tensor: ITensor) -> None:
        if tensor._output:
            tensor._output = False
            self._marked.remove(tensor)


class ParserError:
    def __init__(self, code: ErrorCode, desc: str, node: int = -1, name: str = "", op: str = ""):
        self._code, self._desc, self._node, self._name, self._op = code, desc, node, name, op

    def code(self) -> ErrorCode:
        return self._code

    def desc(self) -> str:
        return self._desc

    def node(self) -> int:
        return self._node

    def node_name(self) -> str:
        return self._name

    def node_operator(self) -> str:
        return self._op


class OnnxParser:
    def __init__(self, network: INetworkDefinition, logger: Any) -> None:
        CALLS.append("trt.OnnxParser")
        self._network = network
        self._errors: list[ParserError] = []

    @property
    def num_errors(self) -> int:
        return len(self._errors)

    def get_error(self, index: int) -> ParserError:
        return self._errors[index]

    def clear_errors(self) -> None:
        self._errors.clear()

    def parse(self, model: Any, path: str | None = None) -> bool:
        CALLS.append("trt.OnnxParser.parse")
        proto = onnx.ModelProto()
        try:
            proto.ParseFromString(bytes(memoryview(model)))
        except Exception:
            return self._fail(ErrorCode.MODEL_DESERIALIZE_FAILED, "Failed to parse ONNX model")
        return self._load_external(proto, path) and self._import(proto)

    def parse_from_file(self, model: str) -> bool:
        CALLS.append("trt.OnnxParser.parse_from_file")
        try:
            proto = onnx.load_model(model, load_external_data=False)
        except Exception:
            return self._fail(ErrorCode.MODEL_DESERIALIZE_FAILED, f"Failed to parse {model}")
        return self._load_external(proto, model) and self._import(proto)

    def _fail(self, code: ErrorCode, desc: str, node: int = -1, name: str = "", op: str = ""):
        self._errors.append(ParserError(code, desc, node, name, op))
        return False

    def _load_external(self, proto: onnx.ModelProto, path: str | None) -> bool:
        tensors = external_data_helper._get_all_tensors(proto)
        if not any(external_data_helper.uses_external_data(t) for t in tensors):
            return True
        base = os.path.dirname(path) if path else os.getcwd()
        try:
            external_data_helper.load_external_data_for_model(proto, base)
        except OSError as exc:
            return self._fail(ErrorCode.INVALID_GRAPH, f"Failed to open external weights: {exc}")
        return True

    def _import(self, proto: onnx.ModelProto) -> bool:
        for index, node in enumerate(proto.graph.node):
            if node.domain not in ("", "ai.onnx"):
                desc = f"No importer registered for op: {node.op_type}"
                return self._fail(ErrorCode.UNSUPPORTED_NODE, desc, index, node.name, node.op_type)
        _Importer(self._network, proto).run()
        return True


class _Importer:
    def __init__(self, network: INetworkDefinition, proto: onnx.ModelProto) -> None:
        self.network, self.proto = network, proto
        graph = onnx.shape_inference.infer_shapes(proto).graph
        self.types = {vi.name: vi.type.tensor_type for vi in _value_infos(graph)}
        self.weights = {t.name: t for t in proto.graph.initializer}
        self.tensors: dict[str, ITensor] = {}

    def tensor(self, name: str, in_subgraph: bool = False) -> ITensor:
        if name not in self.tensors:
            tt = self.types.get(name)
            if name in self.weights:
                shape, dtype = tuple(self.weights[name].dims), self.weights[name].data_type
            elif tt is not None:
                shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim)
                dtype = tt.elem_type
            else:
                shape, dtype = (), onnx.TensorProto.FLOAT
            self.tensors[name] = ITensor(name, shape, data_type(dtype))
            self.tensors[name]._in_subgraph = in_subgraph
        return self.tensors[name]

    def layer(self, name: str, kind: LayerType, ins: list[str], outs: list[str], sub: bool = False):
        inputs = [self.tensor(n) for n in ins if n]
        outputs = [self.tensor(n, sub) for n in outs if n]
        if kind == LayerType.SHAPE or (
            any(t._shape_tensor for t in inputs)
            and all(t._shape_tensor or t.name in self.weights for t in inputs)
        ):
            for t in outputs:
                t._shape_tensor = t.dtype in (DataType.INT32, DataType.INT64)
        self.network._layers.append(ILayer(name, kind, inputs, outputs))

    def nodes(self, nodes: Any, sub: bool) -> None:
        for node in nodes:
            for name in node.input:
                if name in self.weights and name not in self.tensors:
                    self.layer(f"{name}_constant", LayerType.CONSTANT, [], [name])
            if node.op_type in ("If", "Loop"):
                start = LayerType.CONDITION if node.op_type == "If" else LayerType.TRIP_LIMIT
                end = (
                    LayerType.CONDITIONAL_OUTPUT if node.op_type == "If" else LayerType.LOOP_OUTPUT
                )
                self.layer(f"{node.name}_start", start, list(node.input[:1]), [], sub)
                for attr in node.attribute:
                    if attr.type == onnx.AttributeProto.GRAPH:
                        self.nodes(attr.g.node, sub=True)
                self.layer(f"{node.name}_end", end, [], list(node.output), sub)
                continue
            kind = _LAYER_TYPES.get(node.op_type, LayerType.IDENTITY)
            self.layer(node.name or node.output[0], kind, list(node.input), list(node.output), sub)

    def run(self) -> None:
        graph, network = self.proto.graph, self.network
        network._model = self.proto
        shape_operands = {
            node.input[i]
            for node in graph.node
            for i in _SHAPE_OPERANDS.get(node.op_type, ())
            if i < len(node.input)
        }
        for vi in graph.input:
            if vi.name not in self.weights:
                tensor = self.tensor(vi.name)
                tensor._input = True
                tensor._shape_tensor = vi.name in shape_operands and len(tensor._shape) <= 1
                network._inputs.append(tensor)
        self.nodes(graph.node, sub=False)
        for vi in graph.output:
            network.mark_output(self.tensor(vi.name))


def _value_infos(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    infos = [*graph.input, *graph.value_info, *graph.output]
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                infos += _value_infos(attr.g)
    return infos
