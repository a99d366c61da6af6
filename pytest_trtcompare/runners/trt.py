"""TensorRT runner (TensorRT >= 10): build or load an engine, run it through CUDA bindings.

Order matters: `load_cuda_api()` probes for a GPU before any TensorRT object exists, since
TensorRT without a GPU raises or crashes. Features are detected, never version-compared:
- fp16 / bf16: when the builder has weak typing (`BuilderFlag.FP16` / `BF16`, TensorRT 10)
  those flags are used on the fp32 model; otherwise (TensorRT 11: strongly typed only) the
  ONNX model is converted first (see precision.py) and built strongly typed.
- fp32 clears TF32; tf32 sets it. int8 / fp8 come from Q/DQ models (strongly typed).
Engines are cached on disk by (model digest, precision, profile, TensorRT version, GPU name).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FrameworkUnavailable, ModelLoadError, PrecisionUnsupported
from .base import Runner, TensorSpec
from .cuda import CudaApi, load_cuda_api
from .onnx_graph import graph_input_specs
from .onnx_model import LoadedModel, load_model
from .precision import convert

ShapeProfile = Mapping[str, tuple[Sequence[int], Sequence[int], Sequence[int]]]
_ENGINE_SUFFIXES = (".engine", ".plan", ".trt")


_NOT_INSTALLED = "tensorrt is not installed: pip install pytest-trtcompare[tensorrt]"


def tensorrt_installed() -> bool:
    """Whether tensorrt can be imported, found without importing it."""
    return importlib.util.find_spec("tensorrt") is not None


def import_tensorrt() -> Any:
    try:
        import tensorrt
    except ImportError:
        raise FrameworkUnavailable(_NOT_INSTALLED) from None
    return tensorrt


def profile_from_shape_sets(shape_sets: Sequence[Mapping[str, Sequence[int]]]) -> dict[str, Any]:
    """min / opt / max per input spanning all shape sets (opt: the last set, usually largest)."""
    profile: dict[str, Any] = {}
    for name in shape_sets[0] if shape_sets else {}:
        shapes = [tuple(int(d) for d in s[name]) for s in shape_sets if name in s]
        lo = tuple(min(dims) for dims in zip(*shapes, strict=True))
        hi = tuple(max(dims) for dims in zip(*shapes, strict=True))
        profile[name] = (lo, shapes[-1], hi)
    return profile


class TensorRTRunner(Runner):
    framework = "trt"
    precisions = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")

    def __init__(
        self,
        model: Any,
        precision: str = "fp32",
        *,
        shapes: ShapeProfile | Sequence[Mapping[str, Sequence[int]]] | None = None,
        engine_cache: str | os.PathLike[str] | None = None,
        timing_cache: str | os.PathLike[str] | None = None,
        outputs: str | Sequence[str] | None = None,
        workspace_bytes: int | None = None,
    ) -> None:
        super().__init__(precision)
        if not tensorrt_installed():
            raise FrameworkUnavailable(_NOT_INSTALLED)
        self.cuda: CudaApi = load_cuda_api()  # before any TensorRT object: no GPU, no TensorRT
        self.trt = trt = import_tensorrt()
        self.logger = trt.Logger(trt.Logger.WARNING)
        self.gpu = self.cuda.device_name(0)
        self.profile = self._profile(shapes)
        self.mark_all = outputs == "all"
        self._layer_order: list[str] | None = None
        self.route = "prebuilt engine"
        self.loaded: LoadedModel | None = None
        path = Path(model) if isinstance(model, (str, os.PathLike)) else None
        if path is not None and path.suffix in _ENGINE_SUFFIXES:
            if not path.is_file():
                raise ModelLoadError(f"engine file {str(path)!r} does not exist")
            plan = path.read_bytes()
        else:
            self.loaded = load_model(model)
            plan = self._cached_or_built(engine_cache, timing_cache, workspace_bytes)
        self.runtime = trt.Runtime(self.logger)
        self.engine = self.runtime.deserialize_cuda_engine(plan)
        if self.engine is None:
            raise ModelLoadError(
                f"TensorRT {trt.__version__} cannot deserialize the engine (built by another "
                "TensorRT version or for another GPU?)"
            )
        self.context = self.engine.create_execution_context()
        self.stream = self.cuda.create_stream()
        names = [self.engine.get_tensor_name(i) for i in range(self.engine.num_io_tensors)]
        is_input = {n: self.engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT for n in names}
        self._inputs = [n for n in names if is_input[n]]
        self._outputs = [n for n in names if not is_input[n]]
        if isinstance(outputs, (list, tuple)):
            self._outputs = [n for n in self._outputs if n in outputs]
        self._allocations: list[int] = []

    def _profile(self, shapes: Any) -> dict[str, Any]:
        if not shapes:
            return {}
        if isinstance(shapes, Mapping):
            return {
                name: tuple(tuple(int(d) for d in s) for s in value)
                for name, value in shapes.items()
            }
        return profile_from_shape_sets(list(shapes))

    # -- building ---------------------------------------------------------------------------
    def _cache_key(self) -> str:
        assert self.loaded is not None
        parts = [
            self.loaded.digest,
            self.precision,
            json.dumps(self.profile, sort_keys=True),
            self.trt.__version__,
            self.gpu,
            str(self.mark_all),
        ]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]

    def _cached_or_built(
        self, engine_cache: Any, timing_cache: Any, workspace: int | None
    ) -> bytes:
        if not engine_cache:
            return self._build(timing_cache, workspace)
        from filelock import FileLock

        from ..goldens.atomic import atomic_write_bytes

        cache_dir = Path(engine_cache)
        cache_dir.mkdir(parents=True, exist_ok=True)
        cached = cache_dir / f"{self._cache_key()}.engine"
        # xdist workers share the cache: one builds, the others wait and load its engine
        with FileLock(str(cached.with_suffix(".lock"))):
            if cached.is_file():
                self.route = f"cached engine {cached.name}"
                return cached.read_bytes()
            plan = self._build(timing_cache, workspace)
            atomic_write_bytes(cached, plan)
        return plan

    def _weak_typing_flag(self) -> Any:
        flag_name = {"fp16": "FP16", "bf16": "BF16"}.get(self.precision)
        return getattr(self.trt.BuilderFlag, flag_name, None) if flag_name else None

    def _build(self, timing_cache: Any, workspace: int | None) -> bytes:
        trt, loaded = self.trt, self.loaded
        assert loaded is not None
        flag = self._weak_typing_flag()
        proto = loaded.proto
        strongly_typed = False
        if self.precision in ("fp16", "bf16") and flag is None:  # no weak typing (TensorRT 11)
            converted = convert(loaded, self.precision)
            proto, self.route = converted.proto, f"strongly typed; {converted.route}"
            strongly_typed = True
        elif self.precision in ("int8", "fp8"):
            if not any(n.op_type == "QuantizeLinear" for n in proto.graph.node):
                raise PrecisionUnsupported(f"TensorRT {self.precision} needs a Q/DQ model")
            self.route, strongly_typed = "strongly typed Q/DQ model", True
        elif flag is not None:
            self.route = f"fp32 model with BuilderFlag.{self.precision.upper()}"
        else:
            self.route = f"fp32 model, TF32 {'on' if self.precision == 'tf32' else 'off'}"
        builder = trt.Builder(self.logger)
        creation = 0
        strongly = getattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED", None)
        if strongly is not None and strongly_typed:
            creation |= 1 << int(strongly)
        network = builder.create_network(creation)
        parser = trt.OnnxParser(network, self.logger)
        if not parser.parse(proto.SerializeToString()):
            problems = "; ".join(str(parser.get_error(i).desc()) for i in range(parser.num_errors))
            raise ModelLoadError(f"TensorRT cannot parse model {loaded.source}: {problems}")
        if self.mark_all:
            self._layer_order = _mark_all_layer_outputs(trt, network)
        config = builder.create_builder_config()
        if workspace:
            config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace)
        tf32 = getattr(trt.BuilderFlag, "TF32", None)
        if tf32 is not None:
            (config.set_flag if self.precision == "tf32" else config.clear_flag)(tf32)
        if flag is not None:
            config.set_flag(flag)
        self._add_profile(builder, config, network)
        cache = self._timing_cache(config, timing_cache)
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            raise ModelLoadError(
                f"TensorRT failed to build an engine for {loaded.source} "
                f"at {self.precision} (see the TensorRT log above)"
            )
        if cache is not None and timing_cache:
            from ..goldens.atomic import atomic_write_bytes

            atomic_write_bytes(Path(timing_cache), bytes(cache.serialize()))
        return bytes(plan)

    def _add_profile(self, builder: Any, config: Any, network: Any) -> None:
        dynamic = []
        for i in range(network.num_inputs):
            tensor = network.get_input(i)
            if any(d < 0 for d in tensor.shape):
                dynamic.append(tensor.name)
        if not dynamic:
            return
        missing = [name for name in dynamic if name not in self.profile]
        if missing:
            raise ModelLoadError(
                f"TensorRT needs shapes for dynamic input(s) {missing}: pass shapes= "
                "(or @pytest.mark.shapes)"
            )
        profile = builder.create_optimization_profile()
        for name in dynamic:
            low, opt, high = self.profile[name]
            profile.set_shape(name, low, opt, high)
        config.add_optimization_profile(profile)

    def _timing_cache(self, config: Any, path: Any) -> Any:
        if not hasattr(config, "create_timing_cache"):
            return None
        data = Path(path).read_bytes() if path and Path(path).is_file() else b""
        cache = config.create_timing_cache(data)
        config.set_timing_cache(cache, ignore_mismatch=True)
        return cache

    # -- running ----------------------------------------------------------------------------
    def _numpy_dtype(self, name: str) -> np.dtype:
        trt_dtype = self.engine.get_tensor_dtype(name)
        if trt_dtype == getattr(self.trt.DataType, "BF16", object()):
            import ml_dtypes

            bfloat16: np.dtype = np.dtype(ml_dtypes.bfloat16)
            return bfloat16
        dtype: np.dtype = np.dtype(self.trt.nptype(trt_dtype))
        return dtype

    def input_specs(self) -> list[TensorSpec]:
        if self.loaded is not None:
            return graph_input_specs(self.loaded.proto)
        specs = []
        for name in self._inputs:
            shape = tuple(int(d) if d >= 0 else None for d in self.engine.get_tensor_shape(name))
            specs.append(TensorSpec(name, str(self._numpy_dtype(name)), shape))
        return specs

    def output_names(self) -> list[str]:
        return list(self._outputs)

    @property
    def layer_order(self) -> list[str] | None:
        """Layer outputs in the network's (topological) order, when built with outputs="all"."""
        if self._layer_order is None:
            return None
        return [name for name in self._layer_order if name in self._outputs]

    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        cuda, context = self.cuda, self.context
        pointers: list[int] = []
        try:
            for name in self._inputs:
                array = np.ascontiguousarray(feed[name].astype(self._numpy_dtype(name), copy=False))
                context.set_input_shape(name, array.shape)
                pointer = cuda.malloc(array.nbytes)
                pointers.append(pointer)
                cuda.copy_to_device(pointer, array, self.stream)
                context.set_tensor_address(name, pointer)
            hosts = {}
            for name in self._outputs:
                shape = tuple(context.get_tensor_shape(name))
                host = np.empty(shape, dtype=self._numpy_dtype(name))
                pointer = cuda.malloc(host.nbytes)
                pointers.append(pointer)
                context.set_tensor_address(name, pointer)
                hosts[name] = (host, pointer)
            if not context.execute_async_v3(self.stream):
                raise RuntimeError(f"{self.name}: execute_async_v3 failed (see the TensorRT log)")
            for host, pointer in hosts.values():
                cuda.copy_to_host(host, pointer, self.stream)
            cuda.synchronize(self.stream)
            return {name: hosts[name][0] for name in self.wanted_outputs() if name in hosts}
        finally:
            for pointer in pointers:
                cuda.free(pointer)

    def describe(self) -> dict[str, Any]:
        info = {
            **super().describe(),
            "version": self.trt.__version__,
            "device": self.gpu,
            "cuda_binding": self.cuda.binding,
            "precision_route": self.route,
        }
        if self.loaded is not None:
            info["model_digest"] = self.loaded.digest
        return info

    def close(self) -> None:
        self.context = None
        self.engine = None


def _mark_all_layer_outputs(trt: Any, network: Any) -> list[str]:
    """Polygraphy's mark-all: every layer output that is an execution tensor becomes an output.

    Returns the layer outputs in layer (topological) order.
    """
    order = []
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        for j in range(layer.num_outputs):
            tensor = layer.get_output(j)
            if getattr(tensor, "is_shape_tensor", False) or tensor.dtype == getattr(
                trt.DataType, "BOOL", None
            ):
                continue
            order.append(tensor.name)
            if not tensor.is_network_output:
                network.mark_output(tensor)
    return order
