"""Any Python function `dict -> dict` as a runner: the escape hatch for TF, JAX, custom code.

The function may be given as an import string "package.module:function" so that it can be
rebuilt in another process. If it takes a `precision` keyword, the runner passes its own.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..engine import PRECISIONS, as_named_array
from ..errors import FeedError, ModelLoadError, user_code_raised
from .base import Runner, TensorSpec, specs_from


def resolve_callable(target: Any) -> tuple[Callable[..., Any], str]:
    """(function, its dotted name) from a callable or a 'module:function' string."""
    if callable(target):
        qualname = getattr(target, "__qualname__", repr(target))
        return target, f"{getattr(target, '__module__', '?')}:{qualname}"
    if isinstance(target, str) and ":" in target:
        module_name, _, attribute = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ModelLoadError(
                f"callable {target!r}: cannot import {module_name!r} ({exc})"
            ) from None
        function: Any = module
        for part in attribute.split("."):
            function = getattr(function, part, None)
            if function is None:
                raise ModelLoadError(f"callable {target!r}: {module_name!r} has no {attribute!r}")
        if not callable(function):
            raise ModelLoadError(f"callable {target!r} is not callable")
        return function, target
    raise ModelLoadError(
        f"callable runner needs a function or a 'package.module:function' string, got {target!r}"
    )


class CallableRunner(Runner):
    framework = "callable"
    takes = ("callable",)
    precisions = PRECISIONS  # whatever the function does
    wraps_errors = False  # the function is the user's own code: its traceback is theirs

    def __init__(
        self,
        model: Any,
        precision: str = "fp32",
        *,
        input_specs: Any = None,
        output_names: list[str] | None = None,
    ) -> None:
        super().__init__(precision)
        self.function, self.target = resolve_callable(model)
        self._specs = specs_from(input_specs)
        self.checks_feed = bool(self._specs)
        self._outputs = list(output_names or [])
        try:
            self._takes_precision = "precision" in inspect.signature(self.function).parameters
        except (TypeError, ValueError):
            self._takes_precision = False

    def input_specs(self) -> list[TensorSpec]:
        return list(self._specs)

    def output_names(self) -> list[str]:
        return list(self._outputs)

    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        __tracebackhide__ = user_code_raised
        kwargs = {"precision": self.precision} if self._takes_precision else {}
        result = self.function(dict(feed), **kwargs)
        if not isinstance(result, Mapping):
            raise FeedError(
                f"callable {self.target} returned {type(result).__name__}; it must return a "
                f"mapping of output name to array"
            )
        return {
            str(name): np.array(as_named_array(value, str(name), self.target).array, copy=True)
            for name, value in result.items()
        }

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "callable": self.target, "device": "as the callable does"}
