"""Runners: one module per framework, each importing its framework only when used.

`create(name, model, precision="fp32", **options)` builds any of them. Third-party runners
register a Runner subclass (or factory) under the entry-point group
`pytest_trtcompare.runners`. `"callable:package.module:function"` names a callable runner.
"""

from __future__ import annotations

from typing import Any

from ..errors import FrameworkUnavailable
from .base import Runner, TensorSpec, check_feed
from .registry import (
    ENTRY_POINT_GROUP,
    check_framework_name,
    check_runner_options,
    create_local,
    known_runners,
    runner_factory,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "Runner",
    "TensorSpec",
    "check_feed",
    "check_framework_name",
    "check_runner_options",
    "create",
    "known_runners",
    "runner_factory",
]


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
    return create_local(name, model, precision, **options)
