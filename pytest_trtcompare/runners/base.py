"""The Runner protocol: a model turned into `infer(feed) -> outputs`, plus its specs."""

from __future__ import annotations

import abc
import contextlib
import statistics
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar

import numpy as np

from ..engine import PRECISIONS, dtype_from_name
from ..errors import (
    FeedError,
    PrecisionUnsupported,
    RunnerOptionError,
    TrtCompareError,
    user_code_raised,
)
from ..vocabulary import FP64
from .computed import Computed

Dim = int | str | None


#: What a value of a spec is: a tensor, a sequence (list) of tensors, an optional (None or a
#: tensor), or an optional sequence (None or a list).
KINDS = ("tensor", "sequence", "optional", "optional sequence")


@dataclass(frozen=True)
class TensorSpec:
    """Name, numpy dtype name and shape of a model input or output (None/str: dynamic dim).

    For a sequence or optional (`kind`), dtype and shape are those of its tensors."""

    name: str
    dtype: str
    shape: tuple[Dim, ...] | None  # None: rank unknown (a torch module, a callable, no shape)
    kind: str = "tensor"
    #: The values the model can take when it says so (the rows of the embedding table that
    #: token ids index); synthetic data draws from it unless val_range says otherwise.
    value_range: tuple[float, float] | None = None

    @property
    def is_dynamic(self) -> bool:
        return self.shape is None or any(not isinstance(d, int) or d < 0 for d in self.shape)

    def describe(self) -> str:
        if self.shape is None:
            tensor = f"{self.dtype}[...]"
        else:
            tensor = f"{self.dtype}[{', '.join('?' if d is None else str(d) for d in self.shape)}]"
        if self.kind != "tensor":
            for wrapper in reversed(self.kind.split()):
                tensor = f"{wrapper}<{tensor}>"
        return f"{self.name}: {tensor}"


@dataclass(frozen=True)
class Layer:
    """One tensor of a per-layer runner (`outputs="all"`) and the node that produces it."""

    tensor: str
    node: str  # the producing node's (or TensorRT layer's) name; the tensor's when unnamed
    op: str  # its op type: "Softmax", "MatMul" (TensorRT: the layer type)
    dtype: str  # numpy dtype name of the tensor
    model_output: bool = False  # one of the model's own outputs (not marked for the comparison)
    shape: tuple[int, ...] | None = None  # where the runner knows it (a torch module's output)


def tensor_nbytes(shape: Sequence[int], dtype: str) -> int:
    """Bytes of a tensor of this shape and numpy dtype name."""
    try:
        itemsize = dtype_from_name(dtype).itemsize
    except (ValueError, TypeError):
        itemsize = 8  # a dtype numpy does not name: count it as the widest
    return int(np.prod(shape, dtype=np.int64)) * itemsize


def shape_fits(spec: TensorSpec, shape: Sequence[int]) -> bool:
    """Whether a concrete shape fits a spec: same rank, equal static dims."""
    return spec.shape is None or (
        len(shape) == len(spec.shape)
        and all(
            not isinstance(want, int) or want < 0 or want == got
            for want, got in zip(spec.shape, shape, strict=True)
        )
    )


def specs_from(value: Any, default_dtype: str = "float32") -> list[TensorSpec]:
    """TensorSpecs from a list of specs or a mapping name -> (dtype, shape) / shape; a value
    of another form, an unknown dtype or a bad dimension is a RunnerOptionError naming it."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [_spec_of(str(name), item, default_dtype) for name, item in value.items()]
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise RunnerOptionError(_SPEC_FORMS.format(what=f"input_specs={value!r}"))
    specs = []
    for item in value:
        if isinstance(item, TensorSpec):
            specs.append(_checked(item))
        elif isinstance(item, (tuple, list)) and len(item) in (2, 3) and isinstance(item[0], str):
            specs.append(_spec_of(item[0], tuple(item[1:]), default_dtype))
        else:
            raise RunnerOptionError(_SPEC_FORMS.format(what=f"input_specs entry {item!r}"))
    return specs


_SPEC_FORMS = (
    "{what} is not an input spec: give {{name: (dtype, shape)}} such as "
    "{{'input_ids': ('int64', ('batch', 'seq'))}}, {{name: shape}} (float32), or TensorSpec"
)


def _spec_of(name: str, item: Any, default_dtype: str) -> TensorSpec:
    if isinstance(item, TensorSpec):
        return _checked(item)
    if isinstance(item, (str, bytes)):
        raise RunnerOptionError(_SPEC_FORMS.format(what=f"input_specs[{name!r}]={item!r}"))
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        dtype, shape = item
    else:
        dtype, shape = default_dtype, item
    if shape is not None and (
        isinstance(shape, (str, bytes))
        or not isinstance(shape, Sequence)
        or not all(d is None or isinstance(d, (int, str)) for d in shape)
    ):
        raise RunnerOptionError(_SPEC_FORMS.format(what=f"input_specs[{name!r}]={item!r}"))
    return _checked(TensorSpec(name, dtype, None if shape is None else tuple(shape)))


def _checked(spec: TensorSpec) -> TensorSpec:
    try:
        dtype_from_name(spec.dtype)
    except ValueError as exc:
        raise RunnerOptionError(
            f"input_specs[{spec.name!r}]: dtype {spec.dtype!r}: {exc}"
        ) from None
    return spec


class FeedChecker:
    """The hot-path form of `check_feed`: precomputed names, dtypes, ranks and static dims.

    `fits` answers in a few hundred nanoseconds; only a feed that does not fit pays for the
    detailed message of `check_feed`.
    """

    def __init__(self, specs: Sequence[TensorSpec]) -> None:
        self.specs = list(specs)
        self.names = frozenset(spec.name for spec in specs)
        self.rules: list[tuple[str, Any, int | None, tuple[tuple[int, int], ...]]] = []
        for spec in specs:
            if spec.kind != "tensor":
                self.rules.append((spec.name, None, -1, ()))  # never fits: check_feed decides
                continue
            try:
                dtype: Any = np.dtype(spec.dtype)
            except TypeError:
                dtype = spec.dtype  # bfloat16 without ml_dtypes imported: compared by name
            static = tuple(
                (i, dim)
                for i, dim in enumerate(spec.shape or ())
                if isinstance(dim, int) and dim >= 0
            )
            rank = None if spec.shape is None else len(spec.shape)
            self.rules.append((spec.name, dtype, rank, static))

    def fits(self, feed: Mapping[str, Any]) -> bool:
        if feed.keys() != self.names:
            return False
        for name, dtype, rank, static in self.rules:
            array = feed[name]
            if type(array) is not np.ndarray or rank == -1:
                return False
            if array.dtype != dtype or (rank is not None and array.ndim != rank):
                return False
            shape = array.shape
            for index, dim in static:
                if shape[index] != dim:
                    return False
        return True


def check_feed(specs: Sequence[TensorSpec], feed: Mapping[str, Any], runner: str) -> None:
    """One clear error for a feed that does not fit the inputs: name, dtype, rank, static dim."""
    known = {spec.name: spec for spec in specs}
    unknown = [name for name in feed if name not in known]
    if unknown:
        raise FeedError(
            f"{runner}: feed has unknown input(s) {unknown}; the model's inputs are "
            f"{[spec.describe() for spec in specs]}"
        )
    missing = [name for name in known if name not in feed]
    if missing:
        raise FeedError(f"{runner}: feed lacks input(s) {missing}; it has {list(feed)}")
    for name, value in feed.items():
        _check_value(known[name], value, runner, name, known[name].kind)


def _check_value(spec: TensorSpec, value: Any, runner: str, where: str, kind: str) -> None:
    if kind.startswith("optional"):
        if value is not None:
            _check_value(spec, value, runner, where, kind.removeprefix("optional").strip())
        return
    if kind == "sequence":
        if not isinstance(value, (list, tuple)):
            raise FeedError(
                f"{runner}: input {where!r} is {type(value).__name__}, the model expects "
                f"{spec.describe()} (a list of arrays)"
            )
        for index, item in enumerate(value):
            _check_value(spec, item, runner, f"{where}[{index}]", "tensor")
        return
    array = np.asarray(value)
    if str(array.dtype) != spec.dtype:
        raise FeedError(
            f"{runner}: input {where!r} is {array.dtype}, the model expects {spec.dtype}"
        )
    if not shape_fits(spec, array.shape):
        raise FeedError(
            f"{runner}: input {where!r} has shape {tuple(array.shape)}, the model expects "
            f"{spec.describe()}"
        )


def as_feed_value(value: Any) -> Any:
    """An array, or for a sequence / optional input a list of arrays / None."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)) and (
        not value or any(item is None or isinstance(item, (np.ndarray, list)) for item in value)
    ):
        return [as_feed_value(item) for item in value]
    return np.asarray(value)


class Runner(abc.ABC):
    """Base of every runner. Subclasses set `framework` and `precisions` and implement the
    abstract methods; `infer` checks the feed and returns fresh arrays the caller owns."""

    # What it can do, declared here and read by the registry and the session without building
    # it (ARCHITECTURE.md "A runner"); a third-party runner that declares nothing is taken to
    # run fp32 on the CPU, in process, with no layers.
    framework: ClassVar[str] = ""
    #: the precisions it runs; `converted` those it runs on a model converted to them
    precisions: ClassVar[tuple[str, ...]] = ("fp32",)
    converted: ClassVar[tuple[str, ...]] = ()
    #: whether it runs precision "fp64" (float64), the anchor of the fp64 check: not one of
    #: the precisions a test selects, so not among `precisions`
    float64: ClassVar[bool] = False
    #: the models it takes: "onnx" (a file, bytes or ModelProto), "torch", "callable",
    #: "openvino-ir"
    takes: ClassVar[tuple[str, ...]] = ()
    #: the devices its `device=` option takes: "cuda" among them, --trt-device places it;
    #: without "cpu", it needs a GPU
    devices: ClassVar[tuple[str, ...]] = ("cpu",)
    #: built in a worker process unless the test says isolate=False (a crash-prone library)
    isolated: ClassVar[bool] = False
    #: per layer (`outputs="all"`), how its layers are named: "onnx" (every tensor of the
    #: ONNX graph), "engine" (the ONNX names of the tensors an engine keeps after fusing),
    #: "modules" (a torch module's submodules); None: no per-layer run
    layer_names: ClassVar[str | None] = None

    def __init__(self, precision: str = "fp32") -> None:
        if precision != FP64 and precision not in PRECISIONS:
            raise ValueError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
        if not (self.float64 if precision == FP64 else precision in self.precisions):
            raise PrecisionUnsupported(
                f"{self.framework} runs {', '.join(self.precisions)}, not {precision}"
            )
        self.precision = precision

    @property
    def name(self) -> str:
        return f"{self.framework}-{self.precision}"

    @abc.abstractmethod
    def input_specs(self) -> list[TensorSpec]:
        """The model's inputs."""

    @abc.abstractmethod
    def output_names(self) -> list[str]:
        """Names of the outputs `infer` returns, in model order."""

    @abc.abstractmethod
    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the model; the feed is already checked against `input_specs`."""

    #: Per-layer runners set it (`outputs="all"`): every marked tensor, topologically.
    _layers: list[Layer] | None = None

    @property
    def layers(self) -> list[Layer] | None:
        """Per-layer runners (`outputs="all"`): every marked tensor in topological order with
        its producing node; None for others."""
        return None if self._layers is None else list(self._layers)

    @property
    def layer_order(self) -> list[str] | None:
        """The tensors of `layers`, in topological order; None when not per-layer."""
        layers = self.layers
        return None if layers is None else [layer.tensor for layer in layers]

    def layer_bytes(self, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
        """Per-layer runners: the bytes of each layer's tensor for inputs of these `shapes`,
        for those it knows before fetching them (a torch module's from its first run; an
        ONNX model's from shape inference); a per-layer comparison fetches them in groups
        that fit its budget (session/layer_budget.py)."""
        return {
            layer.tensor: tensor_nbytes(layer.shape, layer.dtype)
            for layer in self._layers or ()
            if layer.shape is not None
        }

    def free_device_bytes(self) -> int | None:
        """The free memory of the device where the runner leaves the tensors it returns,
        when that is not the host's (a torch runner on CUDA); None for the host."""
        return None

    #: False when the runner cannot know its inputs (a callable without input_specs=).
    checks_feed: bool = True
    #: Whether an exception from inside `_infer` is a framework's (one InferenceError message)
    #: or the user's own code (a callable: it propagates with its traceback).
    wraps_errors: ClassVar[bool] = True
    _selection: list[str] | None = None

    @contextlib.contextmanager
    def select_outputs(self, names: Sequence[str]) -> Iterator[None]:
        """Within the block, `infer` returns (and computes, where it can) only these outputs."""
        previous, self._selection = self._selection, list(names)
        try:
            yield
        finally:
            self._selection = previous

    def wanted_outputs(self) -> list[str]:
        """The outputs to compute now: the selection, or all (callers must not modify it)."""
        return self._selection if self._selection is not None else self.output_names()

    _checker: FeedChecker | None = None

    def infer(self, feed: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Check the feed against `input_specs` (FeedError names the tensor) and run."""
        __tracebackhide__ = user_code_raised
        checker = self._checker
        if checker is None and self.checks_feed:
            checker = self._checker = FeedChecker(self.input_specs())
        if checker is not None and type(feed) is dict and checker.fits(feed):
            arrays: dict[str, Any] = feed  # the hot path: a dict of fitting ndarrays, as is
        else:
            if not isinstance(feed, Mapping):
                raise self._not_a_feed(feed)
            structured = (
                {spec.name for spec in checker.specs if spec.kind != "tensor"} if checker else set()
            )
            arrays = {
                name: as_feed_value(value) if name in structured else np.asarray(value)
                for name, value in feed.items()
            }
            if checker is not None:
                check_feed(checker.specs, arrays, self.name)
        try:
            start = time.perf_counter()
            outputs = self._infer(arrays)
            self._timed(time.perf_counter() - start)
            return outputs
        except TrtCompareError:
            raise
        except Exception as exc:  # the framework's own error, as one message naming it all
            if not self.wraps_errors:
                raise
            from .failures import inference_error

            raise inference_error(self, arrays, exc) from exc

    _inference_times: list[float] | None = None

    @property
    def inference_times(self) -> list[float]:
        """Seconds each inference took, in order (what Polygraphy logs as inference time: the
        framework's run, after the feed check); a caller takes the median of its own calls."""
        if self._inference_times is None:
            self._inference_times = []
        return self._inference_times

    def _timed(self, seconds: float) -> None:
        self.inference_times.append(seconds)

    def _not_a_feed(self, feed: Any) -> FeedError:
        """infer(array) instead of infer({name: array}): the error says what to pass."""
        try:
            names = [spec.name for spec in self.input_specs()]
        except Exception:  # a runner that cannot list its inputs: say it without names
            names = []
        example = "{" + ", ".join(f"{name!r}: array" for name in names[:4]) + "}"
        return FeedError(
            f"{self.name}.infer() takes a dict of input name to array, got "
            f"{type(feed).__name__}; pass {example if names else '{input_name: array}'}"
        )

    def describe(self) -> dict[str, Any]:
        """Framework version, device, precision route: recorded with goldens and reports;
        "computed": what ran at which precision (runners/computed.py), where the runner
        knows it."""
        info: dict[str, Any] = {
            "runner": self.name,
            "framework": self.framework,
            "precision": self.precision,
        }
        computed = self.computed()
        if computed is not None:
            info["computed"] = computed.as_dict()
        return info

    _computed: Computed | None = None
    _computed_known: bool = False

    def computed(self) -> Computed | None:
        """The precision that really ran: its computing nodes (layers, parameters) by float
        type, counted once per build; None where the runner cannot tell (a callable)."""
        if not self._computed_known:
            self._computed = self._what_computed()
            self._computed_known = True
        return self._computed

    def _what_computed(self) -> Computed | None:
        """A runner's own count of what it computes in which float type (`computed`)."""
        return None

    def close(self) -> None:  # noqa: B027 (optional hook: most runners hold nothing to free)
        """Release framework resources (sessions, engines, device memory)."""

    def __enter__(self) -> Runner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def median_ms(seconds: Sequence[float]) -> float | None:
    """The median of inference times in milliseconds, to 4 significant digits as Polygraphy
    logs its inference times; None for none."""
    if not seconds:
        return None
    return float(f"{statistics.median(seconds) * 1e3:.4g}")
