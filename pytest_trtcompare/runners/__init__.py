"""Runners: one module per framework, each importing its framework only when used.

`create(name, model, precision="fp32", **options)` builds any of them. Third-party runners
register a Runner subclass (or factory) under the entry-point group
`pytest_trtcompare.runners`. `"callable:package.module:function"` names a callable runner.

These names are its surface: every module outside runners/ imports them from here, never from
a submodule (ARCHITECTURE.md, enforced by tests/test_layout.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import FrameworkUnavailable

#: Every name is bound on first use: importing the plugin (every pytest run where it is
#: installed) imports no numpy and no framework (the onnx modules import onnx).
_LAZY = {
    name: module
    for module, names in {
        "base": "Layer Runner TensorSpec check_feed median_ms shape_fits",
        "frameworks": "header_line",
        "isolated": "IsolatedRunner RunnerCrashed",
        "onnx_model": "LoadedModel file_digest load_model",
        "registry": (
            "ENTRY_POINT_GROUP FRAMEWORK_ALIASES runners_that libraries framework_of capabilities "
            "Library DEBUG_PRECISION_RUNNER FLOAT64_ONNX_RUNNER DEFAULT_REFERENCE "
            "RANGE_SCAN_RUNNER "
            "canonical_framework check_framework_name check_runner_options create_local "
            "known_runners runner_factory runner_options"
        ),
        "onnx_scopes": (
            "Scope module_entries module_exits module_nodes subgraph_scopes node_scopes scope_names"
        ),
        "precision": "convert_mixed mixed_precision_of name_unnamed_nodes",
        "onnx_graph": "graph_input_specs with_all_outputs",
        "float16_repair": "topological_sort",
        "onnxrt": "session_options_key",
        "cuda": "visible_device_count",
        "computed": "Computed LOW_DTYPES no_low_precision",
    }.items()
    for name in names.split()
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    from .base import Layer, Runner, TensorSpec, check_feed, median_ms, shape_fits
    from .computed import LOW_DTYPES, Computed, no_low_precision
    from .cuda import visible_device_count
    from .float16_repair import topological_sort
    from .frameworks import header_line
    from .isolated import IsolatedRunner as IsolatedRunner
    from .isolated import RunnerCrashed
    from .onnx_graph import graph_input_specs, with_all_outputs
    from .onnx_model import LoadedModel, file_digest, load_model
    from .onnx_scopes import (
        Scope,
        module_entries,
        module_exits,
        module_nodes,
        node_scopes,
        scope_names,
        subgraph_scopes,
    )
    from .onnxrt import session_options_key
    from .precision import convert_mixed, mixed_precision_of, name_unnamed_nodes
    from .registry import (
        DEBUG_PRECISION_RUNNER,
        DEFAULT_REFERENCE,
        ENTRY_POINT_GROUP,
        FLOAT64_ONNX_RUNNER,
        FRAMEWORK_ALIASES,
        RANGE_SCAN_RUNNER,
        Library,
        canonical_framework,
        capabilities,
        check_framework_name,
        check_runner_options,
        framework_of,
        known_runners,
        libraries,
        runner_factory,
        runner_options,
        runners_that,
    )
    from .registry import create_local as create_local

__all__ = [
    "DEBUG_PRECISION_RUNNER",
    "DEFAULT_REFERENCE",
    "ENTRY_POINT_GROUP",
    "FLOAT64_ONNX_RUNNER",
    "FRAMEWORK_ALIASES",
    "LOW_DTYPES",
    "RANGE_SCAN_RUNNER",
    "Computed",
    "Layer",
    "Library",
    "LoadedModel",
    "Runner",
    "RunnerCrashed",
    "Scope",
    "TensorSpec",
    "canonical_framework",
    "capabilities",
    "check_feed",
    "check_framework_name",
    "check_runner_options",
    "convert_mixed",
    "create",
    "file_digest",
    "framework_of",
    "graph_input_specs",
    "header_line",
    "known_runners",
    "libraries",
    "load_model",
    "median_ms",
    "mixed_precision_of",
    "module_entries",
    "module_exits",
    "module_nodes",
    "name_unnamed_nodes",
    "no_low_precision",
    "node_scopes",
    "runner_factory",
    "runner_options",
    "runners_that",
    "scope_names",
    "session_options_key",
    "shape_fits",
    "subgraph_scopes",
    "topological_sort",
    "visible_device_count",
    "with_all_outputs",
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
    session; `timeout=` seconds bounds each call). A runner class that declares `isolated`
    (TensorRT) is isolated unless `isolate=False`. Raises FrameworkUnavailable /
    PrecisionUnsupported (skips under pytest) when this machine cannot run it,
    UnknownFrameworkError for a name nobody registered.
    """
    from .registry import capabilities, library_problem

    if isolate is None:
        isolate = capabilities(name).isolated
    if isolate:
        problem = library_problem(name)  # say so before paying for a worker process
        if problem is not None:
            raise FrameworkUnavailable(problem)
        from .isolated import IsolatedRunner

        return IsolatedRunner(name, model, precision, **options)
    from .registry import create_local

    return create_local(name, model, precision, **options)
