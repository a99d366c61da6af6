"""OpenVINO runner: ONNX models (and OpenVINO IR) on the CPU, at OpenVINO's own precision.

fp32 is forced (inference precision f32, execution mode ACCURACY): left to itself, the CPU
plugin runs a float32 model in bf16 on a CPU with AVX512_BF16 or AMX (in fp16 on Arm), and
says so only in its properties. fp16 and bf16 set the inference-precision
hint: the plugin's own reduced-precision kernels on the model as given (no ONNX conversion),
where the CPU has the capability, else PrecisionUnsupported naming what it lacks.

Per layer (`outputs="all"`), every typed tensor of the ONNX model becomes a graph output
before OpenVINO reads it (runners/onnx_graph.py `with_all_outputs`, as for onnxrt): the
tensors keep their ONNX names, so they pair with onnxrt's, onnxref's and trt's. OpenVINO
IR has no ONNX names: per layer it is refused.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FrameworkUnavailable, ModelLoadError, PrecisionUnsupported, RunnerOptionError
from .base import Dim, Layer, Runner, TensorSpec
from .computed import Computed
from .onnx_graph import graph_input_specs, with_all_outputs
from .onnx_model import load_model

_NOT_INSTALLED = "openvino is not installed: pip install pytest-trtcompare[openvino]"
#: the CPU plugin's inference precision for each of ours, and its OPTIMIZATION_CAPABILITIES
_HINTS = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}
_CAPABILITIES = {"fp16": "FP16", "bf16": "BF16"}
#: what the CPU plugin needs for each capability (its utils/precision_support.cpp), in the
#: flag names of /proc/cpuinfo
_CPU_FEATURES = {
    "FP16": "AVX-512 FP16 (avx512_fp16) or AVX2-VNNI-2 (avx_vnni_int8, avx_ne_convert) on "
    "x86, half-precision arithmetic (asimdhp) on Arm",
    "BF16": "AVX-512 (avx512f, avx512bw, avx512dq, avx512vl) or AVX2-VNNI-2 (avx_vnni_int8, "
    "avx_ne_convert) on x86",
}
#: properties our precision sets: a `config=` may not set them too
_PRECISION_KEYS = ("INFERENCE_PRECISION_HINT", "EXECUTION_MODE_HINT")
#: OpenVINO's element types whose numpy dtype its Type.to_dtype() gets wrong or lacks
_DTYPES = {"bf16": "bfloat16", "string": "str"}
#: OpenVINO's element type names as numpy's
_FLOAT_NAMES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64"}
#: the executed graph's nodes that compute nothing
_PLUMBING = {"Input", "Output", "Const"}


def _import_openvino() -> Any:
    try:
        import openvino
    except ImportError:
        raise FrameworkUnavailable(_NOT_INSTALLED) from None
    return openvino


@functools.cache
def _core() -> Any:
    """One OpenVINO Core per process: it loads the CPU plugin once."""
    return _import_openvino().Core()


def tidy_openvino_text(text: str) -> str:
    """OpenVINO's message on one line, without the C++ locations it stacks before it."""
    lines = [line.strip() for line in text.strip().splitlines()]
    kept = [line for line in lines if line and not _LOCATION.match(line)]
    return " ".join(kept) or text.strip()


#: "Exception from src/inference/src/cpp/core.cpp:105:" and "Check 'x' failed at src/...:9:"
_LOCATION = re.compile(r"^(Exception from \S+:\d+:|Check '.*' failed at \S+:\d+:)$")


@dataclass
class _Source:
    """A model as OpenVINO reads it, and what the runner says of it."""

    model: Any  # openvino.Model
    label: str
    digest: str
    specs: list[TensorSpec]
    outputs: list[str]  # names of the model's outputs, in OpenVINO's order of them
    layers: list[Layer] | None = None


class OpenVinoRunner(Runner):
    """OpenVINO on the CPU: an ONNX model (path, bytes, onnx.ModelProto) or an OpenVINO IR
    `.xml` file (its `.bin` beside it), compiled once with dynamic shapes where the model has
    them. `config=` adds CPU plugin properties (`{"INFERENCE_NUM_THREADS": 2}`); the
    precision's own are set by `precision`."""

    framework = "openvino"
    precisions = ("fp32", "fp16", "bf16")
    takes = ("onnx", "openvino-ir")
    devices = ("cpu",)
    layer_names = "onnx"

    def __init__(
        self,
        model: Any,
        precision: str = "fp32",
        *,
        outputs: str | Sequence[str] | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(precision)
        self._ov = _import_openvino()
        core = _core()
        self._config = _checked_config(config)
        _check_capability(core, precision)
        source = _read(core, model, outputs)
        self._label, self._digest = source.label, source.digest
        self._specs, self._layers = source.specs, source.layers
        self.compiled = self._compile(core, source.model)
        self._ports = _output_ports(self.compiled, source.outputs, source.label)
        fed = {name for port in self.compiled.inputs for name in port.get_names()}
        # OpenVINO drops an ONNX input nothing reads: the feed still has it, as onnxrt's has
        self._fed = {spec.name: spec.name in fed for spec in self._specs}
        self._request = self.compiled.create_infer_request()
        self._outputs = _restricted(source.outputs, outputs, source.label)

    def _properties(self, precision: str) -> dict[str, Any]:
        properties = {**self._config, "INFERENCE_PRECISION_HINT": _HINTS[precision]}
        if precision == "fp32":
            properties["EXECUTION_MODE_HINT"] = "ACCURACY"
        return properties

    def _compile(self, core: Any, model: Any) -> Any:
        try:
            compiled = core.compile_model(model, "CPU", self._properties(self.precision))
        except RuntimeError as exc:
            raise self._compile_error(core, model, tidy_openvino_text(str(exc))) from None
        ran = _type_name(compiled.get_property("INFERENCE_PRECISION_HINT"))
        if ran != _HINTS[self.precision]:
            raise PrecisionUnsupported(
                f"openvino {self.precision}: the CPU plugin compiled {self._label} at {ran}, "
                f"not {_HINTS[self.precision]} (openvino {self.version})"
            )
        return compiled

    def _compile_error(self, core: Any, model: Any, text: str) -> Exception:
        """The user's config, the precision (the model compiles at f32, not at this one: the
        CPU plugin lacks a kernel for it, as for a QDQ int8 model at f16), or the model."""
        if self._config and ("property" in text or "from str" in text):
            return RunnerOptionError(f"openvino option config={self._config!r}: {text}")
        if self.precision != "fp32":
            try:
                core.compile_model(model, "CPU", self._properties("fp32"))
            except RuntimeError:
                pass
            else:
                return PrecisionUnsupported(
                    f"openvino {self.precision}: the CPU plugin cannot compile {self._label} "
                    f"at inference precision {_HINTS[self.precision]} (it does at f32): {text} "
                    f"(openvino {self.version})"
                )
        return ModelLoadError(
            f"openvino cannot compile model {self._label}: {text} (openvino {self.version})"
        )

    @property
    def version(self) -> str:
        return str(self._ov.__version__)

    def input_specs(self) -> list[TensorSpec]:
        return list(self._specs)

    def output_names(self) -> list[str]:
        return list(self._outputs)

    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        fed = {name: value for name, value in feed.items() if self._fed.get(name, True)}
        request = self._request
        try:
            request.infer(fed, share_inputs=True, share_outputs=True)
        except RuntimeError as exc:  # its text begins with C++ locations: the rest says it
            raise RuntimeError(tidy_openvino_text(str(exc))) from exc
        # the request's output tensors are reused by the next call: the caller gets copies
        return {
            name: np.array(request.get_tensor(self._ports[name]).data, copy=True)
            for name in self.wanted_outputs()
        }

    def _what_computed(self) -> Computed | None:
        """The executed graph's computing ops by the precision the CPU plugin ran them in."""
        if self.compiled is None:
            return None
        counts = {_FLOAT_NAMES.get(k, k): n for k, n in runtime_precisions(self.compiled).items()}
        return Computed(self.precision, "ops", counts)

    def describe(self) -> dict[str, Any]:
        core = _core()
        compiled = self.compiled
        info: dict[str, Any] = {
            **super().describe(),
            "version": self.version,
            "device": "cpu",
            "device_name": str(core.get_property("CPU", "FULL_DEVICE_NAME")),
            "capabilities": [str(c) for c in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")],
            "inference_precision": _type_name(compiled.get_property("INFERENCE_PRECISION_HINT")),
            "execution_mode": compiled.get_property("EXECUTION_MODE_HINT").name,
            "runtime_precisions": runtime_precisions(compiled),
            "precision_route": (
                f"OpenVINO CPU plugin, inference precision {_HINTS[self.precision]} on the "
                "model as given"
            ),
            "model_digest": self._digest,
        }
        if self._config:
            info["config"] = {key: str(value) for key, value in self._config.items()}
        return info

    def close(self) -> None:
        self._request = None
        self.compiled = None


def _type_name(element_type: Any) -> str:
    """'f32', 'bf16', 'f16' of an openvino.Type."""
    return str(element_type.get_type_name())


def runtime_precisions(compiled: Any) -> dict[str, int]:
    """How many of the executed graph's computing nodes ran in each precision: what the CPU
    plugin made of the hint ({'bf16': 40, 'f32': 6}: some ops have no bf16 kernel). The
    bodies of Loop and If nodes are not counted: the runtime model does not list them."""
    counted: Counter[str] = Counter()
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if info["layerType"].astype(str) not in _PLUMBING:
            counted[info["runtimePrecision"].astype(str)] += 1
    return dict(sorted(counted.items()))


def _checked_config(config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The user's CPU plugin properties: a dict of names to str / int / float / bool, none
    of them one our precision sets."""
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise RunnerOptionError(
            f"openvino option config={config!r} ({type(config).__name__}) takes a dict of CPU "
            "plugin properties, e.g. {'INFERENCE_NUM_THREADS': 2}"
        )
    for key, value in config.items():
        if not isinstance(key, str) or not isinstance(value, (str, int, float, bool)):
            raise RunnerOptionError(
                f"openvino option config[{key!r}]={value!r}: takes a property name and a str, "
                "int, float or bool"
            )
        if key in _PRECISION_KEYS:
            raise RunnerOptionError(
                f"openvino option config[{key!r}]: set by the runner's precision (fp32: "
                "INFERENCE_PRECISION_HINT f32 and EXECUTION_MODE_HINT ACCURACY; fp16 / bf16: "
                "INFERENCE_PRECISION_HINT f16 / bf16): choose the precision instead"
            )
    return dict(config)


def _check_capability(core: Any, precision: str) -> None:
    """PrecisionUnsupported where the CPU lacks the capability the precision needs."""
    capability = _CAPABILITIES.get(precision)
    if capability is None:
        return
    found = [str(c) for c in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")]
    if capability in found:
        return
    raise PrecisionUnsupported(
        missing_capability(precision, str(core.get_property("CPU", "FULL_DEVICE_NAME")), found)
    )


def missing_capability(precision: str, cpu: str, capabilities: Sequence[str]) -> str:
    """Why openvino cannot run `precision` on this CPU: the capability and the CPU features
    it takes."""
    capability = _CAPABILITIES[precision]
    return (
        f"openvino {precision}: this CPU ({cpu}) lacks OpenVINO's {capability} capability, "
        f"which takes {_CPU_FEATURES[capability]}; it has {', '.join(capabilities)}"
    )


def _read(core: Any, model: Any, outputs: str | Sequence[str] | None) -> _Source:
    if isinstance(model, (str, os.PathLike)) and Path(model).suffix.lower() == ".xml":
        return _read_ir(core, Path(model), outputs)
    loaded = load_model(model)
    proto, layers = loaded.proto, None
    if outputs == "all":
        proto, layers = with_all_outputs(proto)
    # the file itself where it runs as saved: OpenVINO reads external weights beside it
    given: Any = str(loaded.path) if loaded.path is not None and proto is loaded.proto else None
    try:
        read = core.read_model(given if given is not None else proto.SerializeToString())
    except (RuntimeError, ValueError) as exc:  # ValueError: over protobuf's 2 GB
        raise ModelLoadError(_unreadable(loaded.source, exc)) from None
    names = [vi.name for vi in proto.graph.output]
    return _Source(read, loaded.source, loaded.digest, graph_input_specs(proto), names, layers)


def _unreadable(label: str, exc: Exception) -> str:
    version = _import_openvino().__version__
    return (
        f"openvino cannot read model {label}: {tidy_openvino_text(str(exc))} (openvino {version})"
    )


def _read_ir(core: Any, path: Path, outputs: str | Sequence[str] | None) -> _Source:
    """An OpenVINO IR file: its own inputs and outputs; no per-layer (no ONNX names)."""
    if outputs == "all":
        raise RunnerOptionError(
            f"openvino: outputs='all' pairs tensors by their ONNX names, which OpenVINO IR "
            f"{path} does not keep: compare the ONNX model it was converted from per layer"
        )
    if not path.is_file():
        where = "" if path.is_absolute() else f" (relative to the working directory {Path.cwd()})"
        raise ModelLoadError(f"model file {str(path)!r} does not exist{where}")
    try:
        read = core.read_model(str(path))
    except RuntimeError as exc:
        raise ModelLoadError(_unreadable(str(path), exc)) from None
    digest = hashlib.sha256(path.read_bytes())
    weights = path.with_suffix(".bin")
    if weights.is_file():
        digest.update(weights.read_bytes())
    specs = [_port_spec(port) for port in read.inputs]
    outputs_named = [port.get_any_name() for port in read.outputs]
    return _Source(read, str(path), digest.hexdigest(), specs, outputs_named)


def _port_spec(port: Any) -> TensorSpec:
    """The spec of an IR input: its dtype, and its shape with None for a dynamic dim."""
    element = _type_name(port.get_element_type())
    dtype = _DTYPES.get(element) or str(np.dtype(port.get_element_type().to_dtype()))
    partial = port.get_partial_shape()
    shape: tuple[Dim, ...] | None = None
    if not partial.rank.is_dynamic:
        shape = tuple(int(d.get_length()) if d.is_static else None for d in partial)
    return TensorSpec(port.get_any_name(), dtype, shape)


def _output_ports(compiled: Any, names: list[str], label: str) -> dict[str, Any]:
    """Each output name's port of the compiled model, by position: a Result keeps all the
    names of its tensor (constants folded together share one), so a name is checked, never
    looked up."""
    ports = list(compiled.outputs)
    if len(ports) != len(names):
        raise ModelLoadError(
            f"openvino compiled {label} with {len(ports)} outputs for its {len(names)}"
        )
    for name, port in zip(names, ports, strict=True):
        if name not in port.get_names():
            raise ModelLoadError(
                f"openvino renamed output {name!r} of {label} (its port is named "
                f"{sorted(port.get_names())})"
            )
    return dict(zip(names, ports, strict=True))


def _restricted(available: list[str], outputs: str | Sequence[str] | None, label: str) -> list[str]:
    """The outputs the user asked for (`outputs=[...]`, model outputs), else all."""
    if not isinstance(outputs, (list, tuple)):
        return available
    unknown = [name for name in outputs if name not in available]
    if unknown:
        close = difflib.get_close_matches(unknown[0], available, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ModelLoadError(f"model {label} has no output(s) {unknown}{hint}; it has {available}")
    return list(outputs)
