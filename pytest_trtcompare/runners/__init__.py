"""Runners: one module per framework, each importing its framework only when used.

`create(name, model, precision="fp32", **options)` builds any of them. Third-party runners
register a Runner subclass (or factory) under the entry-point group
`pytest_trtcompare.runners`. `"callable:package.module:function"` names a callable runner.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable
from typing import Any

from ..errors import FrameworkUnavailable, UnknownFrameworkError
from .base import Runner, TensorSpec, check_feed

__all__ = ["Runner", "TensorSpec", "check_feed", "create", "known_runners"]

ENTRY_POINT_GROUP = "pytest_trtcompare.runners"

_BUILTIN = {
    "onnxrt": "pytest_trtcompare.runners.onnxrt:OnnxRuntimeRunner",
    "onnxref": "pytest_trtcompare.runners.onnxref:OnnxReferenceRunner",
    "torch": "pytest_trtcompare.runners.torch_runner:TorchRunner",
    "trt": "pytest_trtcompare.runners.trt:TensorRTRunner",
    "callable": "pytest_trtcompare.runners.callable_runner:CallableRunner",
}


def _load(target: str) -> Callable[..., Runner]:
    module_name, _, attribute = target.partition(":")
    factory: Callable[..., Runner] = getattr(importlib.import_module(module_name), attribute)
    return factory


def known_runners() -> dict[str, str]:
    """Runner name -> where it comes from ('builtin' or the entry point's value)."""
    names = dict.fromkeys(_BUILTIN, "builtin")
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        names.setdefault(entry_point.name, entry_point.value)
    return names


def runner_factory(name: str) -> Callable[..., Runner]:
    if name in _BUILTIN:
        return _load(_BUILTIN[name])
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.name == name:
            factory: Callable[..., Runner] = entry_point.load()
            return factory
    raise UnknownFrameworkError(
        f"unknown runner {name!r}; known runners: {', '.join(sorted(known_runners()))} "
        f"(or 'callable:package.module:function')"
    )


def create(
    name: str,
    model: Any = None,
    precision: str = "fp32",
    *,
    isolate: bool | None = None,
    **options: Any,
) -> Runner:
    """Build the runner `name` for `model` at `precision`.

    `isolate=True` runs it in a worker process (a crash fails the comparison, not the
    session; `timeout=` seconds bounds each call). TensorRT is isolated unless
    `isolate=False`. Raises FrameworkUnavailable / PrecisionUnsupported (skips under pytest)
    when this machine cannot run it, UnknownFrameworkError for a name nobody registered.
    """
    if isolate is None:
        isolate = name == "trt"
    if isolate:
        from .isolated import IsolatedRunner

        if name == "trt":  # say so before paying for a worker process
            from .trt import _NOT_INSTALLED, tensorrt_installed

            if not tensorrt_installed():
                raise FrameworkUnavailable(_NOT_INSTALLED)

        return IsolatedRunner(name, model, precision, **options)
    options.pop("timeout", None)
    if name.startswith("callable:"):
        return runner_factory("callable")(name.removeprefix("callable:"), precision, **options)
    return runner_factory(name)(model, precision, **options)
