"""TEST DOUBLE — not TensorRT. A fake `tensorrt` module of one real version: 10.16.1.11 (weak
typing: BuilderFlag.FP16/BF16) or 11.4.0.106 (strongly typed only), made by `module(version)`.

Every name, enum value and return type it offers exists in the real module of that version
(tests/test_trt_double_conformance.py checks it against ../shared/tensorrt-api/), and it fails
the way TensorRT fails: `parse` returns False with errors, `build_serialized_network` and
`deserialize_cuda_engine` return None, `set_input_shape` / `set_tensor_address` return False,
data-dependent output shapes stay -1 (only an IOutputAllocator learns them), shape tensors live
in host memory. Public attributes are properties or methods, as on the real pybind classes.
"Engines" are the ONNX model plus a JSON header; executing one runs onnxruntime on the CPU.
This file holds the building half; fake_trt_engine.py the engine, context and runtime.
"""

from __future__ import annotations

import enum
import types
from typing import Any

from . import fake_trt_engine as _engine
from .fake_trt_context import IExecutionContext
from .fake_trt_engine import (
    CALLS,
    LOG,
    DataType,
    Dims,
    EngineInspector,
    ICudaEngine,
    IHostMemory,
    IOutputAllocator,
    LayerInformationFormat,
    Logger,
    ProfilingVerbosity,
    Runtime,
    TensorIOMode,
    TensorLocation,
    nptype,
)
from .fake_trt_network import (
    ErrorCode,
    ILayer,
    INetworkDefinition,
    ITensor,
    LayerType,
    OnnxParser,
    ParserError,
)

BUILDERS: list[Builder] = []  # every Builder made, for the tests to inspect
#: True: every layer is built in float32, whatever the model's types or the flags say, as
#: TensorRT 11 has built a float32 engine from `fp16=True` without a word
SILENT_FP32 = False
VERSIONS = ("10.16.1.11", "11.4.0.106")


class MemoryPoolType(enum.IntEnum):
    WORKSPACE = 0


class _BuilderFlag10(enum.IntEnum):
    FP16 = 0
    INT8 = 1
    TF32 = 6
    FP8 = 15
    BF16 = 17


class _BuilderFlag11(enum.IntEnum):  # 11 removed weak typing: FP16, BF16, INT8, FP8 are gone
    TF32 = 6


class _CreationFlag10(enum.IntEnum):
    EXPLICIT_BATCH = 0
    STRONGLY_TYPED = 1


class _CreationFlag11(enum.IntEnum):  # 11 renumbered: STRONGLY_TYPED is bit 0
    STRONGLY_TYPED = 0


_WEAK_TYPING_FLAGS = ("FP16", "BF16", "INT8", "FP8")


class IOptimizationProfile:
    def __init__(self) -> None:
        self._shapes: dict[str, list[tuple[int, ...]]] = {}
        self._values: dict[str, list[tuple[int, ...]]] = {}

    def set_shape(self, input: str, min: Any, opt: Any, max: Any) -> None:
        self._shapes[input] = [tuple(int(d) for d in s) for s in (min, opt, max)]

    def get_shape(self, input: str) -> list[Dims]:
        return [Dims(s) for s in self._shapes.get(input, [])]

    def set_shape_input(self, input: str, min: Any, opt: Any, max: Any) -> None:
        self._values[input] = [tuple(int(v) for v in s) for s in (min, opt, max)]

    def get_shape_input(self, input: str) -> list[list[int]]:
        return [list(s) for s in self._values.get(input, [])]


_CACHE_MAGIC = b"FAKE-TRT-TIMING-CACHE:"


class ITimingCache:
    def __init__(self, version: str) -> None:
        self._version = version

    def serialize(self) -> IHostMemory:
        return _engine.host_memory(_CACHE_MAGIC + self._version.encode())

    def reset(self) -> bool:
        return True


class IBuilderConfig:
    def __init__(self, trt: types.ModuleType) -> None:
        self._trt = trt
        self._flags = 0
        self._pools: dict[int, int] = {}
        self._profiles: list[IOptimizationProfile] = []
        self._cache: ITimingCache | None = None
        self._verbosity = ProfilingVerbosity.LAYER_NAMES_ONLY

    @property
    def profiling_verbosity(self) -> ProfilingVerbosity:
        return self._verbosity

    @profiling_verbosity.setter
    def profiling_verbosity(self, value: ProfilingVerbosity) -> None:
        self._verbosity = ProfilingVerbosity(value)

    @property
    def flags(self) -> int:
        return self._flags

    def set_flag(self, flag: enum.IntEnum) -> None:
        self._flags |= 1 << int(flag)

    def clear_flag(self, flag: enum.IntEnum) -> None:
        self._flags &= ~(1 << int(flag))

    def get_flag(self, flag: enum.IntEnum) -> bool:
        return bool(self._flags & (1 << int(flag)))

    def set_memory_pool_limit(self, pool: MemoryPoolType, pool_size: int) -> None:
        self._pools[int(pool)] = int(pool_size)

    def get_memory_pool_limit(self, pool: MemoryPoolType) -> int:
        return self._pools.get(int(pool), 1 << 40)

    def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
        self._profiles.append(profile)
        return len(self._profiles) - 1

    @property
    def num_optimization_profiles(self) -> int:
        return len(self._profiles)

    def create_timing_cache(self, serialized_timing_cache: Any) -> ITimingCache | None:
        data = bytes(memoryview(serialized_timing_cache))
        if data and not data.startswith(_CACHE_MAGIC):
            LOG.append("IBuilderConfig::createTimingCache: the timing cache data is corrupted")
            return None
        return ITimingCache(self._trt.__version__)

    def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool) -> bool:
        self._cache = cache
        return True

    def get_timing_cache(self) -> ITimingCache | None:
        return self._cache


class Builder:
    _trt: types.ModuleType  # set on the per-version subclass that module() makes

    def __init__(self, logger: Logger) -> None:
        CALLS.append("trt.Builder")
        BUILDERS.append(self)
        self._networks: list[INetworkDefinition] = []
        self._configs: list[IBuilderConfig] = []

    def create_network(self, flags: int = 0) -> INetworkDefinition:
        strongly = 1 << int(self._trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
        network = INetworkDefinition(int(flags), strongly_typed=bool(flags & strongly))
        self._networks.append(network)
        return network

    def create_builder_config(self) -> IBuilderConfig:
        config = IBuilderConfig(self._trt)
        self._configs.append(config)
        return config

    def create_optimization_profile(self) -> IOptimizationProfile:
        return IOptimizationProfile()

    def build_serialized_network(
        self, network: INetworkDefinition, config: IBuilderConfig
    ) -> IHostMemory | None:
        CALLS.append("trt.build_serialized_network")
        problem = self._problem(network, config)
        if problem:
            LOG.append(f"Builder::buildSerializedNetwork: Error Code 4: {problem}")
            return None
        profile = config._profiles[0] if config._profiles else IOptimizationProfile()
        layers = self._layer_information(network, config)
        return _engine.plan(
            self._trt.__version__, network, profile._shapes, profile._values, layers
        )

    def _layer_information(self, network: INetworkDefinition, config: IBuilderConfig) -> list[Any]:
        """What the engine inspector will say of each layer: its name alone, or with
        DETAILED its type and the type each output is computed in (a weak-typing flag makes
        float layers FP16 / BF16; strongly typed, the network's own types; SILENT_FP32
        makes them FP32 whatever the model or flags say)."""
        flags = self._trt.BuilderFlag
        low = None
        for name, dtype in (("FP16", DataType.HALF), ("BF16", DataType.BF16)):
            if hasattr(flags, name) and config.get_flag(flags[name]):
                low = dtype
        layers: list[Any] = []
        for index in range(network.num_layers):
            layer = network.get_layer(index)
            if config._verbosity != ProfilingVerbosity.DETAILED:
                layers.append(layer.name)
                continue
            outputs = []
            for j in range(layer.num_outputs):
                tensor = layer.get_output(j)
                dtype = tensor.dtype
                if dtype == DataType.FLOAT and low is not None and not network._strongly_typed:
                    dtype = low
                if SILENT_FP32 and dtype in (DataType.HALF, DataType.BF16):
                    dtype = DataType.FLOAT
                written = _engine.FORMATS[dtype]
                outputs.append(
                    {"Name": tensor.name, "Location": "Device", "Format/Datatype": written}
                )
            kind = layer.type.name.title()
            layers.append({"Name": layer.name, "LayerType": kind, "Inputs": [], "Outputs": outputs})
        return layers

    def _problem(self, network: INetworkDefinition, config: IBuilderConfig) -> str | None:
        flags = self._trt.BuilderFlag
        weak = [n for n in _WEAK_TYPING_FLAGS if hasattr(flags, n) and config.get_flag(flags[n])]
        if network._strongly_typed and weak:
            return f"BuilderFlag {weak} is not allowed on a strongly typed network"
        if network.num_outputs == 0:
            return "network has no outputs"
        profile = config._profiles[0] if config._profiles else None
        for tensor in network._inputs:
            if tensor.is_shape_tensor and (profile is None or tensor.name not in profile._values):
                return f"no optimization profile values for shape input {tensor.name}"
            dynamic = any(d < 0 for d in tensor.shape)
            shapes = profile._shapes.get(tensor.name) if profile else None
            if dynamic and shapes is None:
                return f"network has dynamic input {tensor.name} but no optimization profile"
            if shapes is not None and not _profile_fits(tensor.shape, shapes):
                return f"optimization profile {shapes} does not fit input {tensor.name}"
        for tensor in network._marked:
            if tensor._in_subgraph:
                return f"tensor {tensor.name} inside a loop or conditional cannot be an output"
        return None


def _profile_fits(shape: tuple[int, ...], shapes: list[tuple[int, ...]]) -> bool:
    low, opt, high = shapes
    if not len(low) == len(opt) == len(high) == len(shape):
        return False
    for d, lo, op, hi in zip(shape, low, opt, high, strict=True):
        if not 0 <= lo <= op <= hi or (d >= 0 and not lo == hi == d):
            return False
    return True


def init_libnvinfer_plugins(logger: Logger, namespace: str) -> bool:
    CALLS.append("trt.init_libnvinfer_plugins")
    return True


def module(version: str = "10.16.1.11") -> types.ModuleType:
    """A fake `tensorrt` of one of VERSIONS (11.x: strongly typed only)."""
    if version not in VERSIONS:
        raise ValueError(f"the double imitates {VERSIONS}, not {version}")
    fake = types.ModuleType("tensorrt")
    major11 = version.startswith("11.")
    fake.__version__ = version  # type: ignore[attr-defined]
    fake.BuilderFlag = _BuilderFlag11 if major11 else _BuilderFlag10  # type: ignore[attr-defined]
    creation = _CreationFlag11 if major11 else _CreationFlag10
    fake.NetworkDefinitionCreationFlag = creation  # type: ignore[attr-defined]
    fake.Builder = type("Builder", (Builder,), {"_trt": fake})  # type: ignore[attr-defined]
    fake.Runtime = type("Runtime", (Runtime,), {"_trt": fake})  # type: ignore[attr-defined]
    for cls in (
        Logger, OnnxParser, ParserError, INetworkDefinition, ITensor, ILayer, IBuilderConfig,
        IOptimizationProfile, ITimingCache, IHostMemory, ICudaEngine, IExecutionContext,
        IOutputAllocator, Dims, DataType, LayerType, TensorIOMode, TensorLocation,
        MemoryPoolType, ErrorCode, EngineInspector, LayerInformationFormat, ProfilingVerbosity,
    ):  # fmt: skip
        setattr(fake, cls.__name__, cls)
    fake.nptype = nptype  # type: ignore[attr-defined]
    fake.init_libnvinfer_plugins = init_libnvinfer_plugins  # type: ignore[attr-defined]
    return fake


def reset() -> None:
    """Forget the calls, log and builders of earlier tests."""
    global SILENT_FP32
    CALLS.clear()
    LOG.clear()
    BUILDERS.clear()
    SILENT_FP32 = False
