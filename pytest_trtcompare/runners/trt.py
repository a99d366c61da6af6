"""TensorRT runner (TensorRT >= 10): build or load an engine, run it through CUDA bindings.

Order matters: `load_cuda_api()` probes for a GPU before any TensorRT object exists, since
TensorRT without a GPU raises or crashes. Building is in trt_build.py, running in trt_io.py.
Engines are cached on disk by (model digest, precision, profile, TensorRT version, GPU name).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import progress
from ..errors import FrameworkUnavailable, ModelLoadError, RunnerOptionError
from .base import Layer, Runner, TensorSpec
from .computed import Computed, trt_computed
from .cuda import CudaApi, load_cuda_api
from .labels import loaded_label
from .onnx_graph import graph_input_specs
from .onnx_model import LoadedModel, load_model
from .trt_build import BuildSpec, build_engine
from .trt_io import EngineIO

_log = logging.getLogger(__name__)
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


def _profile(shapes: Any) -> dict[str, Any]:
    """min / opt / max per input: as given (a mapping), or spanning all shape sets (opt: the
    last set, usually largest)."""
    if not shapes:
        return {}
    if isinstance(shapes, Mapping):
        return {
            name: tuple(tuple(int(d) for d in s) for s in value) for name, value in shapes.items()
        }
    shape_sets: list[Mapping[str, Sequence[int]]] = list(shapes)
    profile: dict[str, Any] = {}
    for name in shape_sets[0]:
        shapes = [tuple(int(d) for d in s[name]) for s in shape_sets if name in s]
        lo = tuple(min(dims) for dims in zip(*shapes, strict=True))
        hi = tuple(max(dims) for dims in zip(*shapes, strict=True))
        profile[name] = (lo, shapes[-1], hi)
    return profile


def _device_index(device: Any) -> int:
    """'cuda:1' or 1 -> 1; 'cuda' -> 0; the CPU or anything else cannot run TensorRT."""
    if isinstance(device, int) and not isinstance(device, bool) and device >= 0:
        return device
    text = str(device).strip().lower()
    if text == "cuda":
        return 0
    if text.startswith("cuda:") and text[5:].isdigit():
        return int(text[5:])
    if text == "cpu":
        raise FrameworkUnavailable("TensorRT runs on a CUDA device, not the CPU")
    raise RunnerOptionError(f"trt runner: device={device!r} is not a CUDA device ('cuda:N')")


class TensorRTRunner(Runner):
    framework = "trt"
    precisions = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")
    converted = ("fp16", "bf16")  # where the builder has no precision flags (TensorRT 11)
    takes = ("onnx",)
    devices = ("cuda",)
    isolated = True  # a TensorRT crash takes the process with it
    layer_names = "engine"

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
        device: str | int = "cuda:0",
    ) -> None:
        super().__init__(precision)
        if not tensorrt_installed():
            raise FrameworkUnavailable(_NOT_INSTALLED)
        self.device_index = _device_index(device)
        self.cuda: CudaApi = load_cuda_api()  # before any TensorRT object: no GPU, no TensorRT
        visible = self.cuda.device_count()
        if self.device_index >= visible:
            raise FrameworkUnavailable(
                f"TensorRT on cuda:{self.device_index}: this process sees {visible} CUDA "
                "device(s) (after CUDA_VISIBLE_DEVICES)"
            )
        self.cuda.set_device(self.device_index)  # this runner's buffers, streams, engine
        self.trt = trt = import_tensorrt()
        self.logger = trt.Logger(trt.Logger.WARNING)
        trt.init_libnvinfer_plugins(self.logger, "")  # plugin layers: parse and deserialize
        self.gpu = self.cuda.device_name(self.device_index)
        self.profile = _profile(shapes)
        self.mark_all = outputs == "all"
        self._layers: list[Layer] | None = None
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
        self.stream: int | None = self.cuda.create_stream()
        self.io = EngineIO(trt, self.cuda, self.engine, self.context, self.stream)
        self._inputs, self._outputs = list(self.io.inputs), list(self.io.outputs)
        if isinstance(outputs, (list, tuple)):
            self._outputs = [n for n in self._outputs if n in outputs]

    # -- building ---------------------------------------------------------------------------
    def _cached_or_built(
        self, engine_cache: Any, timing_cache: Any, workspace: int | None
    ) -> bytes:
        if not engine_cache:
            return self._build(timing_cache, workspace)
        from filelock import FileLock

        from ..atomic import atomic_write_bytes

        assert self.loaded is not None
        cache_dir = Path(engine_cache)
        cache_dir.mkdir(parents=True, exist_ok=True)
        key = [self.loaded.digest, self.precision, json.dumps(self.profile, sort_keys=True)]
        key += [self.trt.__version__, self.gpu, str(self.mark_all), "profiling=detailed"]
        digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:32]
        cached = cache_dir / f"{digest}.engine"
        # xdist workers share the cache: one builds, the others wait and load its engine
        where = (loaded_label(self.loaded), self.precision, cached.name, cache_dir)
        with FileLock(str(cached.with_suffix(".lock"))):
            if cached.is_file():
                self.route = f"cached engine {cached.name}"
                _log.info("engine cache hit: %s at %s, %s in %s", *where)
                return cached.read_bytes()
            _log.info("engine cache miss: %s at %s, building %s in %s", *where)
            plan = self._build(timing_cache, workspace)
            atomic_write_bytes(cached, plan)
        return plan

    def _build(self, timing_cache: Any, workspace: int | None) -> bytes:
        assert self.loaded is not None
        spec = BuildSpec(
            self.loaded,
            self.precision,
            self.profile,
            self.mark_all,
            workspace,
            Path(timing_cache) if timing_cache else None,
        )
        label = loaded_label(self.loaded)
        with progress.step(f"building TensorRT engine {label} {self.precision}") as timing:
            plan = build_engine(self.trt, self.logger, spec)
        _log.info(
            "built TensorRT %s engine of %s at %s on %s in %.2f s (%d bytes; %s)",
            self.trt.__version__,
            label,
            self.precision,
            self.gpu,
            timing.elapsed,
            len(plan),
            spec.route,
        )
        self.route, self._layers = spec.route, spec.layers
        return plan

    # -- running ----------------------------------------------------------------------------
    def input_specs(self) -> list[TensorSpec]:
        if self.loaded is not None:
            return graph_input_specs(self.loaded.proto)
        specs = []
        for name in self._inputs:
            dims = self.engine.get_tensor_shape(name)
            shape = tuple(int(dims[i]) if dims[i] >= 0 else None for i in range(len(dims)))
            specs.append(TensorSpec(name, str(self.io.dtypes[name]), shape))
        return specs

    def output_names(self) -> list[str]:
        return list(self._outputs)

    @property
    def layers(self) -> list[Layer] | None:
        if self._layers is None:
            return None
        outputs = set(self._outputs)
        return [marked for marked in self._layers if marked.tensor in outputs]

    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.stream is None:
            raise RuntimeError(f"{self.name} is closed")
        outputs = set(self._outputs)
        # this runner's device again: another runner, or torch, may have made another current
        self.cuda.set_device(self.device_index)
        return self.io.run(feed, [n for n in self.wanted_outputs() if n in outputs])

    def _what_computed(self) -> Computed | None:
        """The engine's layers by the type TensorRT built each in, from its inspector."""
        inspector = self.engine.create_engine_inspector()
        information = inspector.get_engine_information(self.trt.LayerInformationFormat.JSON)
        return trt_computed(str(information), self.precision)

    def describe(self) -> dict[str, Any]:
        info = {
            **super().describe(),
            "version": self.trt.__version__,
            "device": self.gpu,
            "cuda_device": f"cuda:{self.device_index}",
            "cuda_binding": self.cuda.binding,
            "precision_route": self.route,
        }
        if self.loaded is not None:
            info["model_digest"] = self.loaded.digest
        return info

    def close(self) -> None:
        if self.stream is not None:
            self.io.close()
            self.cuda.destroy_stream(self.stream)
            self.stream = None
        self.context = None
        self.engine = None
