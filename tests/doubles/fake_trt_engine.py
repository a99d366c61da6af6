"""TEST DOUBLE — not TensorRT: plans, the engine, the execution context and the runtime.

A plan is an IHostMemory (buffer protocol, no len()) holding a JSON header and the ONNX model.
The context computes output shapes from the input shapes by ONNX shape inference, never by
running the model: a dimension that depends on data stays -1, and only an IOutputAllocator
(`reallocate_output[_async]` then `notify_shape`) gets such an output. See fake_tensorrt.py.
"""

from __future__ import annotations

import ctypes
import enum
import json
import types
from typing import TYPE_CHECKING, Any

import ml_dtypes
import numpy as np
import onnx

from . import fake_cuda

if TYPE_CHECKING:
    from .fake_trt_context import IExecutionContext
    from .fake_trt_network import INetworkDefinition

CALLS: list[str] = []  # constructors and notable calls, in order
LOG: list[str] = []  # what TensorRT would log as errors


class DataType(enum.IntEnum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    UINT8 = 5
    FP8 = 6
    BF16 = 7
    INT64 = 8
    INT4 = 9
    FP4 = 10
    E8M0 = 11


class ProfilingVerbosity(enum.IntEnum):
    LAYER_NAMES_ONLY = 0
    NONE = 1
    DETAILED = 2


class LayerInformationFormat(enum.IntEnum):
    ONELINE = 0
    JSON = 1


class TensorIOMode(enum.IntEnum):
    NONE = 0
    INPUT = 1
    OUTPUT = 2


class TensorLocation(enum.IntEnum):
    DEVICE = 0
    HOST = 1


_FROM_ONNX = {
    onnx.TensorProto.FLOAT: DataType.FLOAT,
    onnx.TensorProto.FLOAT16: DataType.HALF,
    onnx.TensorProto.BFLOAT16: DataType.BF16,
    onnx.TensorProto.INT8: DataType.INT8,
    onnx.TensorProto.UINT8: DataType.UINT8,
    onnx.TensorProto.INT32: DataType.INT32,
    onnx.TensorProto.INT64: DataType.INT64,
    onnx.TensorProto.BOOL: DataType.BOOL,
    onnx.TensorProto.FLOAT8E4M3FN: DataType.FP8,
    onnx.TensorProto.INT4: DataType.INT4,
    onnx.TensorProto.FLOAT4E2M1: DataType.FP4,
}
_NUMPY: dict[DataType, Any] = {
    DataType.FLOAT: np.float32,
    DataType.HALF: np.float16,
    DataType.INT8: np.int8,
    DataType.INT32: np.int32,
    DataType.BOOL: np.bool_,
    DataType.UINT8: np.uint8,
    DataType.INT64: np.int64,
}
_STORAGE = {**_NUMPY, DataType.BF16: ml_dtypes.bfloat16, DataType.FP8: ml_dtypes.float8_e4m3fn}


def data_type(onnx_type: int) -> DataType:
    return _FROM_ONNX[onnx_type]


def nptype(trt_type: DataType) -> type:
    """As the real one: no numpy type for BF16, FP8, INT4, FP4 or E8M0."""
    if trt_type in _NUMPY:
        return _NUMPY[trt_type]  # type: ignore[no-any-return]
    raise TypeError("Could not resolve TensorRT datatype to an equivalent numpy datatype.")


class Dims:
    """Indexable and sized, no __eq__ or __iter__ of its own: compare tuple(dims)."""

    def __init__(self, shape: Any = ()) -> None:
        self._dims = tuple(int(d) for d in shape)

    def __len__(self) -> int:
        return len(self._dims)

    def __getitem__(self, index: int) -> int:
        return self._dims[index]


class IHostMemory(ctypes.Structure):
    """Bytes through the buffer protocol (bytes(m), memoryview(m)); no len(), no slicing."""

    @property
    def nbytes(self) -> int:
        return ctypes.sizeof(self)

    @property
    def dtype(self) -> DataType:
        return DataType.UINT8


def host_memory(data: bytes) -> IHostMemory:
    cls = type("IHostMemory", (IHostMemory,), {"_fields_": [("_data", ctypes.c_ubyte * len(data))]})
    memory: IHostMemory = cls.from_buffer_copy(data)
    return memory


class Logger:
    class Severity(enum.IntEnum):
        INTERNAL_ERROR = 0
        ERROR = 1
        WARNING = 2
        INFO = 3
        VERBOSE = 4

    INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE = Severity

    def __init__(self, min_severity: Logger.Severity = Severity.WARNING) -> None:
        CALLS.append("trt.Logger")
        self._min_severity = min_severity

    @property
    def min_severity(self) -> Logger.Severity:
        return self._min_severity

    def log(self, severity: Logger.Severity, msg: str) -> None:
        LOG.append(msg)


class IOutputAllocator:
    """Only a constructor, as in the real binding: subclasses add reallocate_output[_async]
    and notify_shape, which the context calls while it executes."""

    def __init__(self) -> None:
        pass


def plan(
    version: str,
    network: INetworkDefinition,
    shapes: dict[str, Any],
    values: dict[str, Any],
    layers: list[dict[str, Any]] | None = None,
) -> IHostMemory:
    """Serialize a built network: the header (tensors, profile) and the model to run."""
    assert network._model is not None
    model = onnx.ModelProto()
    model.CopyFrom(network._model)
    graph_outputs = {vi.name for vi in model.graph.output}
    to_onnx = {v: k for k, v in _FROM_ONNX.items()}
    tensors = [(tensor, "input") for tensor in network._inputs]
    for tensor in network._marked:
        tensors.append((tensor, "output"))
        if tensor.name not in graph_outputs:
            info = onnx.helper.make_tensor_value_info(tensor.name, to_onnx[tensor.dtype], None)
            model.graph.output.append(info)
    header = {
        "version": version,
        "strongly_typed": network._strongly_typed,
        "profile": shapes,
        "shape_values": values,
        "layers": layers or [],
        "tensors": [
            {
                "name": t.name,
                "mode": kind,
                "dtype": int(t.dtype),
                "shape": list(t._shape),
                "shape_io": t._shape_tensor,
            }
            for t, kind in tensors
        ],
    }
    return host_memory(json.dumps(header).encode() + b"\n" + model.SerializeToString())


class ICudaEngine:
    def __init__(self, header: dict[str, Any], model: bytes) -> None:
        self._header, self._model = header, model
        self._tensors = {t["name"]: t for t in header["tensors"]}
        self._session: Any = None

    @property
    def num_io_tensors(self) -> int:
        return len(self._tensors)

    @property
    def num_optimization_profiles(self) -> int:
        return 1

    def get_tensor_name(self, index: int) -> str:
        return list(self._tensors)[index]

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        if name not in self._tensors:
            return TensorIOMode.NONE
        return TensorIOMode.INPUT if self._tensors[name]["mode"] == "input" else TensorIOMode.OUTPUT

    def get_tensor_dtype(self, name: str) -> DataType:
        return DataType(self._tensors[name]["dtype"])

    def get_tensor_shape(self, name: str) -> Dims:
        return Dims(self._tensors[name]["shape"])

    def is_shape_inference_io(self, name: str) -> bool:
        return bool(self._tensors[name]["shape_io"])

    def get_tensor_location(self, name: str) -> TensorLocation:
        shape_input = self._tensors[name]["shape_io"] and self._tensors[name]["mode"] == "input"
        return TensorLocation.HOST if shape_input else TensorLocation.DEVICE

    def get_tensor_profile_shape(self, name: str, profile_index: int) -> list[Dims]:
        if self._tensors[name]["mode"] != "input" or profile_index != 0:
            return []
        shape = self._tensors[name]["shape"]
        return [Dims(s) for s in self._header["profile"].get(name, [shape] * 3)]

    def create_engine_inspector(self) -> EngineInspector:
        CALLS.append("trt.create_engine_inspector")
        return EngineInspector(self._header.get("layers", []))

    def create_execution_context(self) -> IExecutionContext:
        CALLS.append("trt.create_execution_context")
        from .fake_trt_context import IExecutionContext

        return IExecutionContext(self)

    def serialize(self) -> IHostMemory:
        return host_memory(json.dumps(self._header).encode() + b"\n" + self._model)


#: How the engine inspector writes each type, as TensorRT's JSON says it ("Format/Datatype").
FORMATS = {
    DataType.FLOAT: "Row major linear FP32",
    DataType.HALF: "Row major linear FP16 format",
    DataType.BF16: "Row major linear BF16 format",
    DataType.INT8: "Row major linear Int8",
    DataType.INT32: "Row major linear Int32",
    DataType.INT64: "Row major linear Int64",
    DataType.BOOL: "Row major linear Bool",
    DataType.UINT8: "Row major linear UInt8",
    DataType.FP8: "Row major linear FP8",
}


class EngineInspector:
    """The engine's layers as TensorRT's inspector gives them: with ProfilingVerbosity.DETAILED
    at build time each a dict (Name, LayerType, Inputs, Outputs with their Format/Datatype),
    else (LAYER_NAMES_ONLY, the default) their names alone."""

    def __init__(self, layers: list[dict[str, Any]]) -> None:
        self._layers = layers
        self._context: IExecutionContext | None = None

    @property
    def execution_context(self) -> IExecutionContext | None:
        return self._context

    @execution_context.setter
    def execution_context(self, context: IExecutionContext) -> None:
        self._context = context

    def get_layer_information(self, layer_index: int, format: LayerInformationFormat) -> str:
        layer = self._layers[layer_index]
        if format == LayerInformationFormat.JSON:
            return json.dumps(layer)
        return layer if isinstance(layer, str) else str(layer["Name"])

    def get_engine_information(self, format: LayerInformationFormat) -> str:
        if format == LayerInformationFormat.JSON:
            return json.dumps({"Layers": self._layers, "Bindings": []})
        return "\n".join(self.get_layer_information(i, format) for i in range(len(self._layers)))


class Runtime:
    _trt: types.ModuleType  # set on the per-version subclass that fake_tensorrt.module() makes

    def __init__(self, logger: Logger) -> None:
        CALLS.append("trt.Runtime")

    def deserialize_cuda_engine(self, serialized_engine: Any) -> ICudaEngine | None:
        CALLS.append("trt.deserialize_cuda_engine")
        head, _, model = bytes(memoryview(serialized_engine)).partition(b"\n")
        try:
            header = json.loads(head)
            version = header["version"]
        except (ValueError, KeyError, TypeError):
            LOG.append("IRuntime::deserializeCudaEngine: Error Code 1: Serialization assertion")
            return None
        if version != self._trt.__version__:
            LOG.append(
                "IRuntime::deserializeCudaEngine: Error Code 6: The engine plan file is not "
                f"compatible with this version of TensorRT, expecting library version "
                f"{self._trt.__version__} got {version}"
            )
            return None
        return ICudaEngine(header, model)


def storage_dtype(trt_type: DataType) -> np.dtype:
    return np.dtype(_STORAGE[trt_type])


def device_memory() -> fake_cuda.FakeCuda:
    assert fake_cuda.CURRENT is not None, "make a FakeCuda first"
    return fake_cuda.CURRENT
