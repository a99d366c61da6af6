"""The runner registry: built-in runners, entry points, and building a runner in-process."""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import progress
from ..errors import FrameworkUnavailable, RunnerOptionError, UnknownFrameworkError
from .labels import model_label

if TYPE_CHECKING:  # the report header reads the table below: no numpy at the plugin's start
    from .base import Runner

_log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "pytest_trtcompare.runners"


@dataclass(frozen=True)
class Library:
    """The package a runner runs, found without importing it (the report header, --version)."""

    name: str  # as the header and --version name it
    distributions: tuple[str, ...]  # those that provide it; the first is the one to install
    extra: str | None = None  # pytest-trtcompare[extra]; None: one of our own dependencies
    needs_cuda: bool = False  # unavailable without a CUDA device (probed, nothing built)

    @property
    def install_hint(self) -> str:
        if self.extra:
            return f"pip install pytest-trtcompare[{self.extra}]"
        return f"pip install {self.distributions[0]}"


@dataclass(frozen=True)
class Builtin:
    """A runner of this package: where its class is (what it can do is declared there), the
    library it runs and the other names it goes by. The library is said here, not on the
    class, so that the report header of a session that never uses the plugin imports no
    runner module (tests/test_once_per_session.py)."""

    target: str
    library: Library | None = None
    aliases: tuple[str, ...] = ()


_RUNNERS = "pytest_trtcompare.runners"
_BUILTIN = {
    "onnxrt": Builtin(
        f"{_RUNNERS}.onnxrt:OnnxRuntimeRunner",
        Library("onnxruntime", ("onnxruntime", "onnxruntime-gpu")),
        aliases=("onnxruntime",),
    ),
    "onnxref": Builtin(f"{_RUNNERS}.onnxref:OnnxReferenceRunner", Library("onnx", ("onnx",))),
    "torch": Builtin(
        f"{_RUNNERS}.torch_runner:TorchRunner",
        Library("torch", ("torch",), extra="torch"),
        aliases=("pytorch",),
    ),
    "trt": Builtin(
        f"{_RUNNERS}.trt:TensorRTRunner",
        Library(
            "tensorrt",
            ("tensorrt", "tensorrt-cu12", "tensorrt-cu13"),
            extra="tensorrt",
            needs_cuda=True,
        ),
        aliases=("tensorrt",),
    ),
    "openvino": Builtin(
        f"{_RUNNERS}.openvino:OpenVinoRunner",
        Library("openvino", ("openvino",), extra="openvino"),
    ),
    "callable": Builtin(f"{_RUNNERS}.callable_runner:CallableRunner"),
}

#: The documented defaults (docs/tutorials/first-test.md): the reference of a marker that
#: names none (when listed), the runner of the fp64 check's anchor for an ONNX model (its
#: float64 conversion) and of --trt-debug-precision / `trtcompare debug-precision`, and the
#: runner of the range scan (every intermediate tensor of the fp32 model,
#: session/range_scan.py).
DEFAULT_REFERENCE = "onnxrt"
FLOAT64_ONNX_RUNNER = "onnxref"
DEBUG_PRECISION_RUNNER = "onnxref"
RANGE_SCAN_RUNNER = "onnxrt"

#: The names the frameworks go by elsewhere (the report header, pip) -> the runner's name.
FRAMEWORK_ALIASES = {alias: name for name, entry in _BUILTIN.items() for alias in entry.aliases}


def libraries() -> list[Library]:
    """The libraries of the built-in runners, in the registry's order, each once."""
    return list(dict.fromkeys(e.library for e in _BUILTIN.values() if e.library is not None))


def framework_of(name: str) -> str:
    """The runner a framework name names: 'callable:pkg.mod:fn' -> 'callable',
    'tensorrt' -> 'trt'; the one place a `name:variant` is cut."""
    return canonical_framework(name.partition(":")[0])


def canonical_framework(name: str) -> str:
    """'tensorrt' -> 'trt', 'onnxruntime' -> 'onnxrt', 'pytorch' -> 'torch'; others as given."""
    return FRAMEWORK_ALIASES.get(name, name)


def capabilities(name: str) -> type[Runner]:
    """The runner class that `name` names, whose class attributes say what it can do; the
    base class (fp32, CPU, no layers) for a factory that is no Runner subclass or a runner
    that cannot be imported here (building it says why)."""
    from .base import Runner

    try:
        factory = runner_factory(framework_of(name))
    except (UnknownFrameworkError, FrameworkUnavailable):
        return Runner
    return factory if isinstance(factory, type) and issubclass(factory, Runner) else Runner


def runners_that(predicate: Callable[[type[Runner]], bool]) -> list[str]:
    """The built-in and registered runners whose class satisfies `predicate` (for messages
    that list them)."""
    return [name for name in known_runners() if predicate(capabilities(name))]


#: The registered entry points by the sys.path they were read under: reading them scans every
#: installed distribution (milliseconds each time), and a marker is checked per test.
_ENTRY_POINTS: dict[tuple[str, ...], tuple[importlib.metadata.EntryPoint, ...]] = {}


def _entry_points() -> tuple[importlib.metadata.EntryPoint, ...]:
    """The group's entry points, read once per process for each sys.path (a package put on
    the path later, as a test does, is found)."""
    key = tuple(sys.path)
    found = _ENTRY_POINTS.get(key)
    if found is None:
        found = _ENTRY_POINTS[key] = tuple(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    return found


def known_runners() -> dict[str, str]:
    """Runner name -> where it comes from ('builtin' or the entry point's value)."""
    names = dict.fromkeys(_BUILTIN, "builtin")
    for entry_point in _entry_points():
        names.setdefault(entry_point.name, entry_point.value)
    return names


def check_framework_name(name: str) -> None:
    """UnknownFrameworkError unless `name` is built in, registered, or 'callable:mod:func'."""
    if name.startswith("callable:"):
        module, sep, function = name.removeprefix("callable:").partition(":")
        if module and sep and function:
            return
        raise UnknownFrameworkError(f"{name!r} is not 'callable:package.module:function'")
    if canonical_framework(name) not in known_runners():  # the built-in ones among them
        aliases = ", ".join(f"{alias} = {runner}" for alias, runner in FRAMEWORK_ALIASES.items())
        raise UnknownFrameworkError(
            f"unknown framework {name!r}; known frameworks: "
            f"{', '.join(sorted(known_runners()))} ({aliases}; or "
            "'callable:package.module:function')"
        )


def runner_factory(name: str) -> Callable[..., Runner]:
    check_framework_name(name)
    name = canonical_framework(name)
    factory: Callable[..., Runner]
    if name in _BUILTIN:
        module_name, _, attribute = _BUILTIN[name].target.partition(":")
        factory = getattr(importlib.import_module(module_name), attribute)
        return factory
    for entry_point in _entry_points():
        if entry_point.name == name:
            try:
                factory = entry_point.load()
            except Exception as exc:  # a broken third-party package: it cannot run here
                raise FrameworkUnavailable(
                    f"runner {name!r} ({entry_point.value}) failed to import: "
                    f"{type(exc).__name__}: {exc}"
                ) from None
            return factory
    raise UnknownFrameworkError(f"unknown framework {name!r}")  # unreachable after the check


def runner_options(name: str) -> tuple[str, ...] | None:
    """The options runner `name` takes (after model and precision); None when it takes any."""
    try:
        factory = runner_factory(framework_of(name))
    except FrameworkUnavailable:
        return None  # not installed: creating it will say so
    try:
        return _constructor_options(factory)
    except TypeError:  # an unhashable callable object as a factory: read it each time
        return _constructor_options.__wrapped__(factory)


@functools.cache
def _constructor_options(factory: Callable[..., Runner]) -> tuple[str, ...] | None:
    """A factory's keyword options, read once: the session asks per item which it takes."""
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return None  # not introspectable
    parameters = list(signature.parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    named = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return tuple(named[2:])  # after (model, precision)


#: Options every runner takes through `create` (isolation), not its constructor.
CREATE_OPTIONS = ("isolate", "timeout")


def check_runner_options(name: str, options: Any) -> None:
    """RunnerOptionError naming the unknown options and the ones runner `name` takes."""
    accepted = runner_options(name)
    if accepted is None:
        return
    unknown = sorted(set(options) - set(accepted) - set(CREATE_OPTIONS))
    if unknown:
        raise RunnerOptionError(
            f"runner {name!r} has no option(s) {', '.join(unknown)}; it takes "
            f"{', '.join(sorted({*accepted, *CREATE_OPTIONS}))}"
        )


def library_problem(name: str) -> str | None:
    """Why a built-in runner's library cannot be imported here (found without importing it),
    said before an isolated runner pays for its worker process; None when it can."""
    entry = _BUILTIN.get(framework_of(name))
    library = entry.library if entry is not None else None
    if library is None or importlib.util.find_spec(library.name) is not None:
        return None
    return f"{library.name} is not installed: {library.install_hint}"


def create_local(name: str, model: Any = None, precision: str = "fp32", **options: Any) -> Runner:
    """Build the runner in this process (isolated workers call this too)."""
    options.pop("timeout", None)
    check_runner_options(name, options)
    framework, label = framework_of(name), model_label(name, model)
    with progress.step(f"building {framework} runner {label} {precision}") as timing:
        if name.startswith("callable:"):
            factory = runner_factory("callable")
            runner = factory(name.removeprefix("callable:"), precision, **options)
        else:
            runner = runner_factory(name)(model, precision, **options)
    try:
        details = runner.describe()
    except Exception as exc:  # a third-party runner's failure is not ours
        details = {"describe": f"failed: {type(exc).__name__}: {exc}"}
    if not isinstance(details, dict):
        details = {"describe": details}
    _log.info(
        "built %s runner of %s at %s (device %s) in %.2f s",
        framework,
        label,
        precision,
        details.get("device", "not named"),
        timing.elapsed,
    )
    _log.debug("%s runner of %s at %s: %s", framework, label, precision, details)
    return runner
