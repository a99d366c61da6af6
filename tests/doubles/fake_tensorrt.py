"""TEST DOUBLE — not TensorRT. A fake of the `tensorrt` module's API subset that our runner
uses, and a fake CUDA API with host memory as "device" memory.

It lets CPU tests check our glue: the order of calls (GPU probe before any TensorRT object),
builder flags, strongly typed networks, optimization profiles, timing and engine caches,
set_input_shape / set_tensor_address / execute_async_v3, copies in and out, mark-all, and
freeing device memory. "Engines" are the ONNX model bytes plus a JSON header; executing one
runs onnxruntime. Two flavours: TensorRT 10 (weak typing: BuilderFlag.FP16/BF16 exist) and
TensorRT 11 (strongly typed only: those flags do not exist).
"""

from __future__ import annotations

import enum
import itertools
import json
import types
from typing import Any, ClassVar

import numpy as np
import onnx
import onnxruntime as ort

CALLS: list[str] = []  # every constructor and notable call, in order


class FakeCuda:
    """Host-memory stand-in for the CUDA API (pytest_trtcompare.runners.cuda.CudaApi)."""

    binding = "fake-cuda"

    def __init__(self, devices: int = 1) -> None:
        self.devices = devices
        self.memory: dict[int, np.ndarray] = {}
        self._next = itertools.count(0x1000, 0x1000)

    def device_count(self) -> int:
        CALLS.append("cuda.device_count")
        return self.devices

    def device_name(self, index: int) -> str:
        return "Fake GPU 80GB"

    def malloc(self, nbytes: int) -> int:
        pointer = next(self._next)
        self.memory[pointer] = np.zeros(max(1, nbytes), dtype=np.uint8)
        return pointer

    def free(self, pointer: int) -> None:
        del self.memory[pointer]

    def create_stream(self) -> int:
        return 7

    def synchronize(self, stream: int) -> None:
        CALLS.append("cuda.synchronize")

    def copy_to_device(self, pointer: int, array: np.ndarray, stream: int) -> None:
        data = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        self.memory[pointer][: data.size] = data

    def copy_to_host(self, array: np.ndarray, pointer: int, stream: int) -> None:
        array.reshape(-1).view(np.uint8)[:] = self.memory[pointer][: array.nbytes]


class DataType(enum.IntEnum):
    FLOAT = 0
    HALF = 1
    INT8 = 2
    INT32 = 3
    BOOL = 4
    INT64 = 8
    BF16 = 9


_FROM_ONNX = {
    onnx.TensorProto.FLOAT: DataType.FLOAT,
    onnx.TensorProto.FLOAT16: DataType.HALF,
    onnx.TensorProto.INT8: DataType.INT8,
    onnx.TensorProto.INT32: DataType.INT32,
    onnx.TensorProto.BOOL: DataType.BOOL,
    onnx.TensorProto.INT64: DataType.INT64,
}
_NUMPY = {
    DataType.FLOAT: np.float32,
    DataType.HALF: np.float16,
    DataType.INT8: np.int8,
    DataType.INT32: np.int32,
    DataType.BOOL: np.bool_,
    DataType.INT64: np.int64,
}


def nptype(dtype: DataType) -> type:
    return _NUMPY[dtype]


class TensorIOMode(enum.IntEnum):
    INPUT = 1
    OUTPUT = 2


class MemoryPoolType(enum.IntEnum):
    WORKSPACE = 0


class NetworkDefinitionCreationFlag(enum.IntEnum):
    STRONGLY_TYPED = 5


class Logger:
    WARNING = 2

    def __init__(self, severity: int) -> None:
        CALLS.append("trt.Logger")


class Tensor:
    def __init__(self, name: str, shape: tuple[int, ...], dtype: DataType, output: bool) -> None:
        self.name, self.shape, self.dtype = name, shape, dtype
        self.is_network_output = output
        self.is_shape_tensor = False


class Layer:
    def __init__(self, outputs: list[Tensor]) -> None:
        self._outputs = outputs
        self.num_outputs = len(outputs)

    def get_output(self, index: int) -> Tensor:
        return self._outputs[index]


def _value_info_tensor(vi: onnx.ValueInfoProto, output: bool) -> Tensor:
    dims = tuple(
        d.dim_value if d.HasField("dim_value") else -1 for d in vi.type.tensor_type.shape.dim
    )
    return Tensor(vi.name, dims, _FROM_ONNX[vi.type.tensor_type.elem_type], output)


class Network:
    def __init__(self, flags: int) -> None:
        self.flags = flags
        self.model: onnx.ModelProto | None = None
        self.inputs: list[Tensor] = []
        self.layers: list[Layer] = []
        self.marked: list[str] = []

    @property
    def strongly_typed(self) -> bool:
        return bool(self.flags & (1 << NetworkDefinitionCreationFlag.STRONGLY_TYPED))

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    def get_input(self, index: int) -> Tensor:
        return self.inputs[index]

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def get_layer(self, index: int) -> Layer:
        return self.layers[index]

    def mark_output(self, tensor: Tensor) -> None:
        tensor.is_network_output = True
        self.marked.append(tensor.name)


class ParserError:
    def __init__(self, text: str) -> None:
        self._text = text

    def desc(self) -> str:
        return self._text


class OnnxParser:
    def __init__(self, network: Network, logger: Logger) -> None:
        CALLS.append("trt.OnnxParser")
        self.network = network
        self.errors: list[ParserError] = []

    @property
    def num_errors(self) -> int:
        return len(self.errors)

    def get_error(self, index: int) -> ParserError:
        return self.errors[index]

    def parse(self, data: bytes) -> bool:
        model = onnx.ModelProto()
        model.ParseFromString(data)
        inferred = onnx.shape_inference.infer_shapes(model)
        typed = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output]}
        outputs = {vi.name for vi in model.graph.output}
        weights = {t.name for t in model.graph.initializer}
        self.network.model = model
        self.network.inputs = [
            _value_info_tensor(vi, False) for vi in model.graph.input if vi.name not in weights
        ]
        self.network.layers = [
            Layer([_value_info_tensor(typed[o], o in outputs) for o in node.output if o in typed])
            for node in model.graph.node
        ]
        return True


class OptimizationProfile:
    def __init__(self) -> None:
        self.shapes: dict[str, tuple[tuple[int, ...], ...]] = {}

    def set_shape(self, name: str, low: Any, opt: Any, high: Any) -> None:
        self.shapes[name] = (tuple(low), tuple(opt), tuple(high))


class TimingCache:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def serialize(self) -> bytes:
        return b"fake timing cache"


class BuilderConfig:
    def __init__(self) -> None:
        self.flags: set[str] = set()
        self.cleared: set[str] = set()
        self.profiles: list[OptimizationProfile] = []
        self.timing_cache: TimingCache | None = None

    def set_flag(self, flag: enum.Enum) -> None:
        self.flags.add(flag.name)

    def clear_flag(self, flag: enum.Enum) -> None:
        self.cleared.add(flag.name)
        self.flags.discard(flag.name)

    def add_optimization_profile(self, profile: OptimizationProfile) -> None:
        self.profiles.append(profile)

    def set_memory_pool_limit(self, pool: MemoryPoolType, size: int) -> None:
        self.workspace = size

    def create_timing_cache(self, data: bytes) -> TimingCache:
        return TimingCache(data)

    def set_timing_cache(self, cache: TimingCache, ignore_mismatch: bool) -> None:
        self.timing_cache = cache


class Builder:
    instances: ClassVar[list[Builder]] = []

    def __init__(self, logger: Logger) -> None:
        CALLS.append("trt.Builder")
        Builder.instances.append(self)
        self.network: Network | None = None
        self.config: BuilderConfig | None = None

    def create_network(self, flags: int = 0) -> Network:
        self.network = Network(flags)
        return self.network

    def create_builder_config(self) -> BuilderConfig:
        self.config = BuilderConfig()
        return self.config

    def create_optimization_profile(self) -> OptimizationProfile:
        return OptimizationProfile()

    def build_serialized_network(self, network: Network, config: BuilderConfig) -> bytes:
        CALLS.append("trt.build_serialized_network")
        assert network.model is not None
        model = onnx.ModelProto()
        model.CopyFrom(network.model)
        existing = {vi.name for vi in model.graph.output}
        inferred = onnx.shape_inference.infer_shapes(model)
        typed = {vi.name: vi for vi in inferred.graph.value_info}
        for name in network.marked:
            if name not in existing and name in typed:
                model.graph.output.append(typed[name])
        header = {
            "flags": sorted(config.flags),
            "strongly_typed": network.strongly_typed,
            "profiles": [p.shapes for p in config.profiles],
        }
        return json.dumps(header).encode() + b"\n" + model.SerializeToString()


class Engine:
    def __init__(self, plan: bytes) -> None:
        header, _, model_bytes = plan.partition(b"\n")
        self.header = json.loads(header)
        self.session = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
        self.inputs = {i.name: i for i in self.session.get_inputs()}
        self.outputs = {o.name: o for o in self.session.get_outputs()}
        self.names = [*self.inputs, *self.outputs]

    @property
    def num_io_tensors(self) -> int:
        return len(self.names)

    def get_tensor_name(self, index: int) -> str:
        return self.names[index]

    def get_tensor_mode(self, name: str) -> TensorIOMode:
        return TensorIOMode.INPUT if name in self.inputs else TensorIOMode.OUTPUT

    def get_tensor_dtype(self, name: str) -> DataType:
        arg = self.inputs.get(name) or self.outputs[name]
        return {
            "tensor(float)": DataType.FLOAT,
            "tensor(float16)": DataType.HALF,
            "tensor(int64)": DataType.INT64,
            "tensor(bool)": DataType.BOOL,
            "tensor(int32)": DataType.INT32,
        }[arg.type]

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        arg = self.inputs.get(name) or self.outputs[name]
        return tuple(d if isinstance(d, int) else -1 for d in arg.shape)

    def create_execution_context(self) -> Context:
        CALLS.append("trt.create_execution_context")
        return Context(self)


class Context:
    cuda: FakeCuda | None = None  # set by the tests to the FakeCuda the runner uses

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.addresses: dict[str, int] = {}
        self._results: dict[str, np.ndarray] | None = None

    def set_input_shape(self, name: str, shape: tuple[int, ...]) -> bool:
        self.shapes[name] = tuple(shape)
        self._results = None
        return True

    def set_tensor_address(self, name: str, pointer: int) -> bool:
        self.addresses[name] = pointer
        return True

    def _run(self) -> dict[str, np.ndarray]:
        if self._results is None:
            assert Context.cuda is not None
            feed = {}
            for name in self.engine.inputs:
                dtype = nptype(self.engine.get_tensor_dtype(name))
                size = int(np.prod(self.shapes[name])) * np.dtype(dtype).itemsize
                raw = Context.cuda.memory[self.addresses[name]][:size]
                feed[name] = raw.view(dtype).reshape(self.shapes[name]).copy()
            values = self.engine.session.run(None, feed)
            self._results = dict(zip(self.engine.outputs, values, strict=True))
        return self._results

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        if name in self.engine.inputs:
            return self.shapes[name]
        return tuple(self._run()[name].shape)

    def execute_async_v3(self, stream: int) -> bool:
        CALLS.append("trt.execute_async_v3")
        assert Context.cuda is not None
        for name, value in self._run().items():
            Context.cuda.copy_to_device(self.addresses[name], value, stream)
        self._results = None
        return True


class Runtime:
    def __init__(self, logger: Logger) -> None:
        CALLS.append("trt.Runtime")

    def deserialize_cuda_engine(self, plan: bytes) -> Engine:
        return Engine(plan)


def module(version: str = "10.9.0", weak_typing: bool = True) -> types.ModuleType:
    """A fake `tensorrt` module of TensorRT 10 (weak typing) or 11 (strongly typed only)."""
    fake = types.ModuleType("tensorrt")
    flags = ["TF32"] + (["FP16", "BF16", "INT8", "FP8"] if weak_typing else [])
    fake.BuilderFlag = enum.Enum("BuilderFlag", flags)  # type: ignore[attr-defined]
    for name in (
        "Logger",
        "Builder",
        "OnnxParser",
        "Runtime",
        "DataType",
        "TensorIOMode",
        "MemoryPoolType",
        "NetworkDefinitionCreationFlag",
        "nptype",
    ):
        setattr(fake, name, globals()[name])
    fake.__version__ = version  # type: ignore[attr-defined]
    return fake
