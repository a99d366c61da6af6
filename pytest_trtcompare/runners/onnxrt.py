"""ONNX Runtime runner: fp32, and fp16 / bf16 through a converted model.

Session options: the suite's defaults, the user's (an onnxruntime.SessionOptions, or a dict of
its settings that pickle can send to an isolated worker), and what describe() records of them.

Which ops of a converted model an execution provider has no kernel for: asked after
onnxruntime refused a fp16 / bf16 model, to name every op type at fault in one skip reason
instead of the first node its loader tripped on; and before a session of a model whose
recurrent ops (LSTM, GRU, RNN) have no kernel in that type: onnxruntime 1.32's CPU provider
ends the process building one (SIGSEGV), so such a session is first built in a child process
(`crashes_building`), which the test session survives.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto

from ..errors import FrameworkUnavailable, ModelLoadError, PrecisionUnsupported, RunnerOptionError
from .computed import Computed, onnx_computed, onnx_tensor_types, onnx_typed_nodes
from .failures import tidy_onnxruntime_text
from .onnx_runner import OnnxModelRunner, RuntimeVersions, onnxruntime_versions

_CPU_NOTE = (
    "onnxruntime's CPU provider computes most float16 ops in float32 (it casts around "
    "them), so this is not a real fp16 numerics check: use onnxref, torch or trt for that"
)

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
    return {
        "given": given,
        "graph_optimization_level": _name(options.graph_optimization_level),
        "execution_mode": _name(options.execution_mode),
        "intra_op_num_threads": int(options.intra_op_num_threads),
        "inter_op_num_threads": int(options.inter_op_num_threads),
        "use_deterministic_compute": bool(options.use_deterministic_compute),
        "allow_spinning": _config_entry(options, "session.intra_op.allow_spinning") != "0",
    }


def _name(value: Any) -> str:
    return str(getattr(value, "name", value))


#: The settings a dict may give, with the enum of each that takes a name ("ORT_DISABLE_ALL").
_ENUMS = {
    "graph_optimization_level": "GraphOptimizationLevel",
    "execution_mode": "ExecutionMode",
    "execution_order": "ExecutionOrder",
}
#: The other settings and the type each takes.
_VALUES: dict[str, type] = {
    "intra_op_num_threads": int,
    "inter_op_num_threads": int,
    "use_deterministic_compute": bool,
    "enable_cpu_mem_arena": bool,
    "enable_mem_pattern": bool,
    "enable_mem_reuse": bool,
    "log_severity_level": int,
    "optimized_model_filepath": str,
}
SETTINGS = (*_ENUMS, *_VALUES, "config")


def session_options_of(ort: Any, given: Any) -> Any:
    """The onnxruntime.SessionOptions a session is built with: the user's object as it is,
    one made from a dict of its settings ({"graph_optimization_level": "ORT_DISABLE_ALL",
    "intra_op_num_threads": 1, "config": {"session.intra_op.allow_spinning": "0"}}), or
    the suite's defaults (None)."""
    if given is None:
        return default_session_options(ort)
    if isinstance(given, ort.SessionOptions):
        return given
    if not isinstance(given, Mapping):
        raise RunnerOptionError(
            f"onnxrt option session_options={given!r} ({type(given).__name__}) takes an "
            "onnxruntime.SessionOptions or a dict of its settings, e.g. "
            "{'graph_optimization_level': 'ORT_DISABLE_ALL', 'intra_op_num_threads': 1}"
        )
    options = ort.SessionOptions()
    for key, value in given.items():
        if key == "config":
            if not isinstance(value, Mapping):
                raise RunnerOptionError(
                    f"onnxrt option session_options['config']={value!r}: takes a dict of "
                    "config entries, e.g. {'session.intra_op.allow_spinning': '0'}"
                )
            for entry, text in value.items():
                options.add_session_config_entry(str(entry), str(text))
        else:
            setattr(options, str(key), _setting(ort, str(key), value))
    return options


def _setting(ort: Any, key: str, value: Any) -> Any:
    """The value of one setting of a dict, checked (an enum's by its name)."""
    where = f"onnxrt option session_options[{key!r}]"
    if key in _ENUMS:
        enum = getattr(ort, _ENUMS[key])
        if isinstance(value, enum):
            return value
        if not (isinstance(value, str) and value in enum.__members__):
            names = ", ".join(enum.__members__)
            raise RunnerOptionError(f"{where}={value!r}: takes one of {names}")
        return enum.__members__[value]
    kind = _VALUES.get(key)
    if kind is None:
        raise RunnerOptionError(f"{where}: unknown setting; the settings are {', '.join(SETTINGS)}")
    if type(value) is not kind:  # bool is no int here, nor 1 a bool
        raise RunnerOptionError(
            f"{where}={value!r}: takes {'an' if kind is int else 'a'} {kind.__name__}"
        )
    return value


def session_options_key(options: Any) -> tuple[tuple[str, str], ...]:
    """What a SessionOptions object holds of the settings a dict may give (and the spinning
    entries), for the session's runner cache: a shared object changed between tests is
    another session, not the one built before (config entries other than spinning cannot
    be read back without knowing their names)."""
    values = [(key, repr(getattr(options, key))) for key in (*_ENUMS, *_VALUES)]
    values += [(key, _config_entry(options, key)) for key in QUIET_THREADS]
    return tuple(values)


def _config_entry(options: Any, key: str) -> str:
    try:
        return str(options.get_session_config_entry(key))
    except Exception:  # onnxruntime raises when the entry was never set
        return ""


_LOW = {"fp16": TensorProto.FLOAT16, "bf16": TensorProto.BFLOAT16}
DTYPE_NAMES = {"fp16": "float16", "bf16": "bfloat16"}

#: onnxruntime's words for a model it cannot run in a type: no kernel, or an op schema that
#: does not admit the type ("Type 'tensor(bfloat16)' of input parameter ... is invalid").
_TYPE_FAILURE = re.compile(r"NOT_IMPLEMENTED|Type 'tensor\((?:b?float16)\)'")
#: Cast runs in any type; onnxruntime folds a Constant into an initializer as it loads.
_NEVER_A_KERNEL = ("Cast", "Constant")
_NAMED_OP = re.compile(r"(?:implementation for |of operator \()(\w+)")


def kernel_ops(model: onnx.ModelProto, precision: str, provider: str) -> set[str] | None:
    """Op types (of the ai.onnx domain, at the model's opset) that `provider` has a kernel
    for in `precision`'s float type; None where onnxruntime's kernel table cannot be read."""
    try:
        from onnxruntime.capi import _pybind_state

        kernels = _pybind_state.get_all_opkernel_def()
    except Exception:  # a build without the kernel table
        return None
    wanted = f"tensor({DTYPE_NAMES[precision]})"
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    return {
        k.op_name
        for k in kernels
        if k.provider == provider
        and k.domain in ("", "ai.onnx")
        and k.version_range[0] <= opset <= k.version_range[1]
        and any(wanted in types for types in k.type_constraints.values())
    }


def missing_kernels(
    ort: Any, model: onnx.ModelProto, precision: str, provider: str, message: str
) -> list[str]:
    """Op types of the model's `precision` nodes with no `provider` kernel for that type,
    sorted; the op onnxruntime named when its kernel table cannot be read."""
    named = _NAMED_OP.findall(message)
    has_kernel = kernel_ops(model, precision, provider)
    if has_kernel is None:
        return sorted(set(named))
    low = _LOW[precision]
    typed = onnx_tensor_types(model)
    missing = {
        node.op_type
        for node in model.graph.node
        if node.domain in ("", "ai.onnx")
        and node.op_type not in has_kernel
        and node.op_type not in _NEVER_A_KERNEL
        and any(typed.get(name) == low for name in [*node.input, *node.output])
    }
    return sorted(missing | set(named))


def cast_around(
    model: onnx.ModelProto, precision: str, provider: str, types: Mapping[str, int] | None = None
) -> str:
    """What `provider` makes of the model's `precision` nodes that it has no kernel for in
    that type: onnxruntime computes them in float32, casting around them (its CPU provider
    for most float16 ops), which the note says; '' where it has a kernel for each."""
    has_kernel = kernel_ops(model, precision, provider)
    low = DTYPE_NAMES[precision]
    typed = [
        node.op_type
        for node, dtype in onnx_typed_nodes(model, types)
        if dtype == low and node.domain in ("", "ai.onnx")
    ]
    if has_kernel is None:
        return f"{provider} kernels not known (onnxruntime's kernel table is unreadable)"
    cast = Counter(op for op in typed if op not in has_kernel)
    if not cast:
        return ""
    ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in sorted(cast.items()))
    where = provider.removesuffix("ExecutionProvider")
    return (
        f"onnxruntime {where} computes {sum(cast.values())} of the {len(typed)} {low} nodes "
        f"in float32, cast around (no {low} kernel: {ops})"
    )


#: ops whose missing low-precision kernel has crashed onnxruntime building the session
RECURRENT = ("LSTM", "GRU", "RNN")
_BUILD = (
    "import sys, onnxruntime; onnxruntime.InferenceSession(sys.argv[1], providers=[sys.argv[2]])"
)
_PROBE_SECONDS = 300


def crashes_building(model: onnx.ModelProto, provider: str) -> str | None:
    """How building an onnxruntime session of `model` ended a child process ('SIGSEGV'),
    None where it did not (it built, or raised as Python does)."""
    with tempfile.TemporaryDirectory(prefix="trtcompare-probe-") as folder:
        path = Path(folder) / "model.onnx"
        path.write_bytes(model.SerializeToString())
        try:
            done = subprocess.run(
                [sys.executable, "-c", _BUILD, str(path), provider],
                capture_output=True,
                timeout=_PROBE_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return None  # slow, not crashed: the session is built here as usual
    if done.returncode >= 0:
        return None
    try:
        return signal.Signals(-done.returncode).name
    except ValueError:
        return f"signal {-done.returncode}"


class OnnxRuntimeRunner(OnnxModelRunner):
    """`providers` defaults to CPU; CUDA / TensorRT execution providers where installed.

    `session_options` (an onnxruntime.SessionOptions, used as given, or a dict of its
    settings, which an isolated worker can receive) is the user's; without it the session's
    threads do not spin-wait (`default_session_options`).

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
        try:
            import onnxruntime as ort
        except ImportError:
            raise FrameworkUnavailable(
                "onnxruntime is not installed: pip install onnxruntime"
            ) from None
        self._ort = ort
        self._options_given = session_options is not None
        session_options = session_options_of(ort, session_options)
        super().__init__(model, precision, outputs)
        wanted = list(providers) if providers else ["CPUExecutionProvider"]
        names = [p if isinstance(p, str) else p[0] for p in wanted]
        available = ort.get_available_providers()
        missing = [p for p in names if p not in available]
        if missing:
            raise FrameworkUnavailable(
                f"onnxruntime {ort.__version__} lacks execution provider(s) {missing}; "
                f"available: {available}"
            )
        provider = names[0]
        if precision != "fp32":
            self._refuse_crashing_build(precision, provider)
        # the file itself when the model runs as saved (onnxruntime reads it and the weights
        # beside it, as `polygraphy run` does); else the converted model's bytes
        as_saved = self.loaded.path is not None and self.proto is self.loaded.proto
        source = str(self.loaded.path) if as_saved else self.proto.SerializeToString()
        try:
            with self._as_written(session_options):
                self.session = ort.InferenceSession(
                    source, sess_options=session_options, providers=wanted
                )
        except Exception as exc:  # onnxruntime raises its own pybind exception types
            text = str(exc)
            if precision != "fp32" and _TYPE_FAILURE.search(text):
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
        self._build = (session_options, wanted)  # a group's session (`select_outputs`)
        self._restrict_outputs([out.name for out in self.session.get_outputs()])

    def _refuse_crashing_build(self, precision: str, provider: str) -> None:
        """PrecisionUnsupported where building this session would end the process: recurrent
        ops without a kernel in this type, whose build crashes a child process."""
        if not any(node.op_type in RECURRENT for node in self.proto.graph.node):
            return  # the kernel table and shape inference only for the models at risk
        ops = missing_kernels(self._ort, self.proto, precision, provider, "")
        recurrent = [op for op in ops if op in RECURRENT]
        crashed = crashes_building(self.proto, provider) if recurrent else None
        if crashed is None:
            return
        raise PrecisionUnsupported(
            f"onnxruntime {provider.removesuffix('ExecutionProvider')} has no "
            f"{DTYPE_NAMES[precision]} kernel for {', '.join(recurrent)}, and building such "
            f"a session ends the process ({crashed} in a child process that tried; onnxrt "
            f"{precision} of {self.loaded.source}; onnxruntime {self._ort.__version__}): "
            "compare these ops at fp16 with onnxref, torch or trt"
        )

    def _runtime_versions(self) -> RuntimeVersions:
        return onnxruntime_versions(self._ort)

    @contextlib.contextmanager
    def _as_written(self, options: Any) -> Iterator[None]:
        """outputs="all": the session runs the graph as written, no graph optimization, so
        that which tensors a session marks (all, or a group's: `select_outputs`) changes no
        fusion; the user's options object is given back as it was."""
        if self._layers is None:
            yield
            return
        level = options.graph_optimization_level
        options.graph_optimization_level = self._ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            yield
        finally:
            options.graph_optimization_level = level

    @contextlib.contextmanager
    def select_outputs(self, names: Sequence[str]) -> Iterator[None]:
        """outputs="all": a session with only these tensors marked, for the block. The
        session of every layer allocates all of them at each run (onnxruntime never reuses
        a graph output's memory), whichever are fetched; a group's allocates only its own."""
        marked = set(self._outputs)
        if self._layers is None or not names or marked <= set(names):
            with super().select_outputs(names):
                yield
            return
        proto, kept = self.proto, set(names)
        everything = list(proto.graph.output)
        del proto.graph.output[:]
        proto.graph.output.extend(vi for vi in everything if vi.name in kept)
        try:
            source = proto.SerializeToString()
        finally:
            del proto.graph.output[:]
            proto.graph.output.extend(everything)
        options, providers = self._build
        with self._as_written(options):
            session = self._ort.InferenceSession(source, sess_options=options, providers=providers)
        del source
        previous, self._run = self._run, session.run
        try:
            with super().select_outputs(names):
                yield
        finally:
            self._run = previous

    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = self._selection if self._selection is not None else self._outputs
        values = self._run(names, feed)  # fresh arrays: no copy needed
        return dict(zip(names, values))  # noqa: B905 (onnxruntime returns one value per name)

    def _what_computed(self) -> Computed | None:
        """The model's nodes by float type, and the note of those its provider computes in
        float32 where it has no kernel in the precision's type (the CPU's float16)."""
        provider = self.session.get_providers()[0]
        types = onnx_tensor_types(self.proto)
        note = ""
        if self.precision != "fp32":
            note = cast_around(self.proto, self.precision, provider, types)
        return onnx_computed(self.proto, self.precision, note, types)

    def describe(self) -> dict[str, Any]:
        providers = self.session.get_providers()
        info = {
            **super().describe(),
            "version": self._ort.__version__,
            "providers": providers,
            "device": "cuda" if "CUDAExecutionProvider" in providers else "cpu",
            "session_options": session_options_summary(
                self.session.get_session_options(), given=self._options_given
            ),
        }
        if self.precision != "fp32" and providers[:1] == ["CPUExecutionProvider"]:
            info["note"] = _CPU_NOTE
        return info
