"""ONNX Runtime runner: fp32, and fp16 / bf16 through a converted model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import (
    FrameworkUnavailable,
    ModelLoadError,
    PrecisionUnsupported,
    RunnerOptionError,
)
from .failures import tidy_onnxruntime_text
from .onnx_runner import OnnxModelRunner
from .onnx_versions import RuntimeVersions, onnxruntime_versions
from .onnxrt_kernels import DTYPE_NAMES, is_type_failure, missing_kernels

_CPU_NOTE = (
    "onnxruntime's CPU provider computes most float16 ops in float32 (it casts around "
    "them), so this is not a real fp16 numerics check: use onnxref, torch or trt for that"
)


def _import_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise FrameworkUnavailable(
            "onnxruntime is not installed: pip install onnxruntime"
        ) from None
    return onnxruntime


#: Session config entries of the sessions built without the user's `session_options`.
QUIET_THREADS = {
    "session.intra_op.allow_spinning": "0",
    "session.inter_op.allow_spinning": "0",
}


def default_session_options(ort: Any) -> Any:
    """Session options for a test suite: the thread pool's threads sleep between ops instead
    of spin-waiting. Spinning buys a little latency for a service; in a suite it burned about
    as much CPU as the inference itself, taken from the comparisons, the conversions and the
    other xdist workers on the same cores. It changes no result."""
    options = ort.SessionOptions()
    for key, value in QUIET_THREADS.items():
        options.add_session_config_entry(key, value)
    return options


def session_options_summary(options: Any, *, given: bool) -> dict[str, Any]:
    """What of a session's options can change its numbers or its speed, as JSON: the graph
    optimizations (fusions change rounding), execution mode, thread counts (0: onnxruntime
    chooses), deterministic compute and thread spinning; `given`: the user's options, not
    `default_session_options`."""

    def entry(key: str, default: str) -> str:
        try:
            return str(options.get_session_config_entry(key))
        except Exception:  # onnxruntime raises when the entry was never set
            return default

    return {
        "given": given,
        "graph_optimization_level": _name(options.graph_optimization_level),
        "execution_mode": _name(options.execution_mode),
        "intra_op_num_threads": int(options.intra_op_num_threads),
        "inter_op_num_threads": int(options.inter_op_num_threads),
        "use_deterministic_compute": bool(options.use_deterministic_compute),
        "allow_spinning": entry("session.intra_op.allow_spinning", "1") != "0",
    }


def _name(value: Any) -> str:
    return str(getattr(value, "name", value))


class OnnxRuntimeRunner(OnnxModelRunner):
    """`providers` defaults to CPU; CUDA / TensorRT execution providers where installed.

    `session_options` (an onnxruntime.SessionOptions) is used as given; without it the
    session's threads do not spin-wait (`default_session_options`).

    `outputs="all"` marks every intermediate tensor as an output (per-layer comparison).
    """

    framework = "onnxrt"
    precisions = ("fp32", "fp16", "bf16")

    def __init__(
        self,
        model: Any,
        precision: str = "fp32",
        *,
        providers: Sequence[str | tuple[str, dict[str, Any]]] | None = None,
        session_options: Any = None,
        outputs: str | Sequence[str] | None = None,
    ) -> None:
        ort = self._ort = _import_onnxruntime()
        if session_options is not None and not isinstance(session_options, ort.SessionOptions):
            raise RunnerOptionError(
                f"onnxrt option session_options={session_options!r} "
                f"({type(session_options).__name__}) takes an onnxruntime.SessionOptions, "
                "e.g. options = onnxruntime.SessionOptions(); options.intra_op_num_threads = 1"
            )
        super().__init__(model, precision, outputs)
        wanted = list(providers) if providers else ["CPUExecutionProvider"]
        available = ort.get_available_providers()
        missing = [p if isinstance(p, str) else p[0] for p in wanted]
        missing = [p for p in missing if p not in available]
        if missing:
            raise FrameworkUnavailable(
                f"onnxruntime {ort.__version__} lacks execution provider(s) {missing}; "
                f"available: {available}"
            )
        try:
            self.session = ort.InferenceSession(
                self._session_source(),
                sess_options=session_options or default_session_options(ort),
                providers=wanted,
            )
        except Exception as exc:  # onnxruntime raises its own pybind exception types
            text = str(exc)
            if precision != "fp32" and is_type_failure(text):
                provider = wanted[0] if isinstance(wanted[0], str) else wanted[0][0]
                ops = missing_kernels(ort, self.proto, precision, provider, text)
                raise PrecisionUnsupported(
                    f"onnxruntime {provider.removesuffix('ExecutionProvider')} has no "
                    f"{DTYPE_NAMES[precision]} kernel for {', '.join(ops) or 'an op of the model'}"
                    f" (onnxrt {precision} of {self.loaded.source}, converted by "
                    f"pytest-trtcompare; onnxruntime {ort.__version__})"
                ) from None
            raise ModelLoadError(
                f"onnxruntime cannot load model {self.loaded.source}: "
                f"{tidy_onnxruntime_text(text)} (onnxruntime {ort.__version__})"
            ) from None
        self._run = self.session.run
        self._restrict_outputs([out.name for out in self.session.get_outputs()])
        self._version = ort.__version__
        self._options_given = session_options is not None

    def _session_source(self) -> str | bytes:
        """The file itself when the model runs as saved (onnxruntime reads it and the weights
        beside it, as `polygraphy run` does); else the converted model's bytes."""
        if self.loaded.path is not None and self.proto is self.loaded.proto:
            return str(self.loaded.path)
        serialized: bytes = self.proto.SerializeToString()
        return serialized

    def _runtime_versions(self) -> RuntimeVersions:
        return onnxruntime_versions(self._ort)

    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = self._selection if self._selection is not None else self._outputs
        values = self._run(names, feed)  # fresh arrays: no copy needed
        return dict(zip(names, values))  # noqa: B905 (onnxruntime returns one value per name)

    def describe(self) -> dict[str, Any]:
        providers = self.session.get_providers()
        info = {
            **super().describe(),
            "version": self._version,
            "providers": providers,
            "device": "cuda" if "CUDAExecutionProvider" in providers else "cpu",
        }
        info["session_options"] = session_options_summary(
            self.session.get_session_options(), given=self._options_given
        )
        if self.precision != "fp32" and providers[:1] == ["CPUExecutionProvider"]:
            info["note"] = _CPU_NOTE
        return info
