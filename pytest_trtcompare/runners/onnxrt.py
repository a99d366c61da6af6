"""ONNX Runtime runner: fp32, and fp16 / bf16 through a converted model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import (
    FrameworkUnavailable,
    ModelLoadError,
    PrecisionUnsupported,
)
from .failures import tidy_onnxruntime_text
from .onnx_runner import OnnxModelRunner
from .onnx_versions import RuntimeVersions, onnxruntime_versions
from .onnxrt_kernels import (
    DTYPE_NAMES,
    RECURRENT,
    crashes_building,
    is_type_failure,
    missing_kernels,
)
from .onnxrt_options import session_options_of, session_options_summary

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


class OnnxRuntimeRunner(OnnxModelRunner):
    """`providers` defaults to CPU; CUDA / TensorRT execution providers where installed.

    `session_options` (an onnxruntime.SessionOptions, used as given, or a dict of its
    settings, which an isolated worker can receive) is the user's; without it the session's
    threads do not spin-wait (onnxrt_options.py `default_session_options`).

    `outputs="all"` marks every intermediate tensor as an output (per-layer comparison).
    """

    framework = "onnxrt"
    precisions = ("fp32", "fp16", "bf16")
    converted = ("fp16", "bf16")
    takes = ("onnx",)
    # CUDA through its execution providers (providers=), not a device= that --trt-device sets
    layer_names = "onnx"

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
        given = session_options is not None
        session_options = session_options_of(ort, session_options)
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
        if precision != "fp32":
            self._refuse_crashing_build(ort, precision, wanted[0])
        try:
            self.session = ort.InferenceSession(
                self._session_source(),
                sess_options=session_options,
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
        self._options_given = given

    def _refuse_crashing_build(self, ort: Any, precision: str, wanted: Any) -> None:
        """PrecisionUnsupported where building this session would end the process: recurrent
        ops without a kernel in this type, whose build crashes a child process."""
        if not any(node.op_type in RECURRENT for node in self.proto.graph.node):
            return  # the kernel table and shape inference only for the models at risk
        provider = wanted if isinstance(wanted, str) else wanted[0]
        ops = missing_kernels(ort, self.proto, precision, provider, "")
        recurrent = [op for op in ops if op in RECURRENT]
        if not recurrent:
            return
        crashed = crashes_building(self.proto, provider)
        if crashed is None:
            return
        raise PrecisionUnsupported(
            f"onnxruntime {provider.removesuffix('ExecutionProvider')} has no "
            f"{DTYPE_NAMES[precision]} kernel for {', '.join(recurrent)}, and building such "
            f"a session ends the process ({crashed} in a child process that tried; onnxrt "
            f"{precision} of {self.loaded.source}; onnxruntime {ort.__version__}): compare "
            "these ops at fp16 with onnxref, torch or trt"
        )

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
