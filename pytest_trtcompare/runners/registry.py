"""The runner registry: built-in runners, entry points, and building a runner in-process."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
import sys
from collections.abc import Callable
from typing import Any

from .. import progress
from ..errors import FrameworkUnavailable, RunnerOptionError, UnknownFrameworkError
from .base import Runner
from .labels import model_label

_log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "pytest_trtcompare.runners"

_BUILTIN = {
    "onnxrt": "pytest_trtcompare.runners.onnxrt:OnnxRuntimeRunner",
    "onnxref": "pytest_trtcompare.runners.onnxref:OnnxReferenceRunner",
    "torch": "pytest_trtcompare.runners.torch_runner:TorchRunner",
    "trt": "pytest_trtcompare.runners.trt:TensorRTRunner",
    "callable": "pytest_trtcompare.runners.callable_runner:CallableRunner",
}

#: The names the frameworks go by elsewhere (the report header, pip) -> the runner's name.
FRAMEWORK_ALIASES = {"tensorrt": "trt", "onnxruntime": "onnxrt", "pytorch": "torch"}


def canonical_framework(name: str) -> str:
    """'tensorrt' -> 'trt', 'onnxruntime' -> 'onnxrt', 'pytorch' -> 'torch'; others as given."""
    return FRAMEWORK_ALIASES.get(name, name)


def _load(target: str) -> Callable[..., Runner]:
    module_name, _, attribute = target.partition(":")
    factory: Callable[..., Runner] = getattr(importlib.import_module(module_name), attribute)
    return factory


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
    if (
        canonical_framework(name) not in _BUILTIN
        and canonical_framework(name) not in known_runners()
    ):
        aliases = ", ".join(f"{alias} = {runner}" for alias, runner in FRAMEWORK_ALIASES.items())
        raise UnknownFrameworkError(
            f"unknown framework {name!r}; known frameworks: "
            f"{', '.join(sorted(known_runners()))} ({aliases}; or "
            "'callable:package.module:function')"
        )


def runner_factory(name: str) -> Callable[..., Runner]:
    check_framework_name(name)
    name = canonical_framework(name)
    if name in _BUILTIN:
        return _load(_BUILTIN[name])
    for entry_point in _entry_points():
        if entry_point.name == name:
            try:
                factory: Callable[..., Runner] = entry_point.load()
            except Exception as exc:  # a broken third-party package: it cannot run here
                raise FrameworkUnavailable(
                    f"runner {name!r} ({entry_point.value}) failed to import: "
                    f"{type(exc).__name__}: {exc}"
                ) from None
            return factory
    raise UnknownFrameworkError(f"unknown framework {name!r}")  # unreachable after the check


def runner_options(name: str) -> tuple[str, ...] | None:
    """The options runner `name` takes (after model and precision); None when it takes any."""
    base = "callable" if name.startswith("callable:") else name
    try:
        signature = inspect.signature(runner_factory(base))
    except (TypeError, ValueError, FrameworkUnavailable):
        return None  # not introspectable, or not installed: creating it will say so
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


def create_local(name: str, model: Any = None, precision: str = "fp32", **options: Any) -> Runner:
    """Build the runner in this process (isolated workers call this too)."""
    options.pop("timeout", None)
    check_runner_options(name, options)
    framework, label = name.partition(":")[0], model_label(name, model)
    with progress.step(f"building {framework} runner {label} {precision}") as timing:
        if name.startswith("callable:"):
            factory = runner_factory("callable")
            runner = factory(name.removeprefix("callable:"), precision, **options)
        else:
            runner = runner_factory(name)(model, precision, **options)
    details = _described(runner)
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


def _described(runner: Runner) -> dict[str, Any]:
    """The runner's describe() for a log record; a third-party runner's failure is not ours."""
    try:
        details = runner.describe()
    except Exception as exc:
        return {"describe": f"failed: {type(exc).__name__}: {exc}"}
    return details if isinstance(details, dict) else {"describe": details}
