"""Building a TensorRT engine from an ONNX model: parse, mark, configure, build.

Features are detected, never version-compared:
- fp16 / bf16: when the builder has weak typing (`BuilderFlag.FP16` / `BF16`, TensorRT 10)
  those flags are used on the fp32 model; otherwise (TensorRT 11: strongly typed only) the
  ONNX model is converted first (see precision.py) and built strongly typed.
- fp32 clears TF32; tf32 sets it. int8 / fp8 come from Q/DQ models (strongly typed).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import atomic_write_bytes
from ..errors import ModelLoadError, PrecisionUnsupported
from .base import Layer
from .onnx_model import LoadedModel
from .precision import convert
from .trt_io import TRT_TO_ML_DTYPES, TRT_TO_NUMPY

_log = logging.getLogger(__name__)

# Polygraphy's layer-wise marking: tensors inside loops and conditionals cannot be network
# outputs (this assumes the parser's topological layer order), nor do shape and constant
# layers give anything worth comparing.
SUBGRAPH_START = ("TRIP_LIMIT", "ITERATOR", "RECURRENCE", "CONDITION", "CONDITIONAL_INPUT")
SUBGRAPH_END = ("LOOP_OUTPUT", "CONDITIONAL_OUTPUT")
NOT_MARKED = ("SHAPE", "CONSTANT")
NOT_MARKED_DTYPES = ("BOOL", "INT4", "FP4", "E8M0")  # see trt_io: no numpy exchange for 4-bit


@dataclass
class BuildSpec:
    """What to build: the model, the precision, the shape profile and the outputs."""

    loaded: LoadedModel
    precision: str
    profile: Mapping[str, Any]
    mark_all: bool
    workspace: int | None = None
    timing_cache: Path | None = None
    route: str = ""
    layers: list[Layer] | None = field(default=None)


def build_engine(trt: Any, logger: Any, spec: BuildSpec) -> bytes:
    """A serialized engine (bytes); sets spec.route and, with mark_all, spec.layers."""
    loaded = spec.loaded
    flag_name = {"fp16": "FP16", "bf16": "BF16"}.get(spec.precision)  # weak typing's flags
    flag = getattr(trt.BuilderFlag, flag_name, None) if flag_name else None
    proto, strongly_typed = loaded.proto, False
    if spec.precision in ("fp16", "bf16") and flag is None:  # no weak typing (TensorRT 11)
        converted = convert(loaded, spec.precision)
        proto, spec.route = converted.proto, f"strongly typed; {converted.route}"
        strongly_typed = True
    elif spec.precision in ("int8", "fp8"):
        if not any(n.op_type == "QuantizeLinear" for n in proto.graph.node):
            raise PrecisionUnsupported(f"TensorRT {spec.precision} needs a Q/DQ model")
        spec.route, strongly_typed = "strongly typed Q/DQ model", True
    elif flag is not None:
        spec.route = f"fp32 model with BuilderFlag.{spec.precision.upper()}"
    else:
        spec.route = f"fp32 model, TF32 {'on' if spec.precision == 'tf32' else 'off'}"
    builder = trt.Builder(logger)
    creation = 0
    if strongly_typed:  # STRONGLY_TYPED is bit 1 in TensorRT 10 and bit 0 in 11
        creation |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(creation)
    parser = trt.OnnxParser(network, logger)
    _parse(parser, loaded, proto)
    if spec.mark_all:
        spec.layers = mark_layerwise(trt, network)
    config = builder.create_builder_config()
    # the inspector then says the type each layer computes in (runners/computed.py)
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    if spec.workspace:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, spec.workspace)
    tf32 = getattr(trt.BuilderFlag, "TF32", None)
    if tf32 is not None:
        (config.set_flag if spec.precision == "tf32" else config.clear_flag)(tf32)
    if flag is not None:
        config.set_flag(flag)
    _add_profile(builder, config, network, spec.profile)
    cache = _timing_cache(config, spec.timing_cache)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise ModelLoadError(
            f"TensorRT failed to build an engine for {loaded.source} "
            f"at {spec.precision} (see the TensorRT log above)"
        )
    if cache is not None and spec.timing_cache is not None:
        atomic_write_bytes(spec.timing_cache, bytes(memoryview(cache.serialize())))
    return bytes(memoryview(plan))


def _parse(parser: Any, loaded: LoadedModel, proto: Any) -> None:
    # Given the model's path, the parser finds external weights beside the file.
    if loaded.path is not None and proto is loaded.proto:
        ok = parser.parse_from_file(str(loaded.path))
    elif loaded.path is not None:
        ok = parser.parse(proto.SerializeToString(), str(loaded.path))
    else:
        ok = parser.parse(proto.SerializeToString())
    if ok:
        return
    problems = []
    for i in range(parser.num_errors):
        error = parser.get_error(i)
        where = f" (node {error.node()} {error.node_name()!r}, {error.node_operator()})"
        problems.append(f"{error.desc()}{where if error.node() >= 0 else ''}")
    raise ModelLoadError(
        f"TensorRT cannot parse model {loaded.source}: {'; '.join(problems) or 'no reason given'}"
    )


#: TensorRT tensor types as numpy dtype names (what a per-layer comparison filters on).
_DTYPE_NAMES = {**{k: np.dtype(v).name for k, v in TRT_TO_NUMPY.items()}, **TRT_TO_ML_DTYPES}


def mark_layerwise(trt: Any, network: Any) -> list[Layer]:
    """Mark every markable layer output as a network output; returns them in layer order,
    each with its layer's name and type."""

    def layer_types(names: tuple[str, ...]) -> list[Any]:
        return [getattr(trt.LayerType, n) for n in names if hasattr(trt.LayerType, n)]

    start, end = layer_types(SUBGRAPH_START), layer_types(SUBGRAPH_END)
    excluded = layer_types(NOT_MARKED)
    order, inside = [], False
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        if layer.type in start:
            inside = True
        elif layer.type in end:
            inside = False
        if inside or layer.type in excluded:
            continue
        for j in range(layer.num_outputs):
            tensor = layer.get_output(j)
            if tensor is None or tensor.is_shape_tensor or tensor.dtype.name in NOT_MARKED_DTYPES:
                continue
            dtype = _DTYPE_NAMES.get(tensor.dtype.name, tensor.dtype.name.lower())
            output = bool(tensor.is_network_output)
            order.append(
                Layer(tensor.name, layer.name or tensor.name, layer.type.name, dtype, output)
            )
            if not output:
                network.mark_output(tensor)
    return order


def _add_profile(builder: Any, config: Any, network: Any, shapes: Mapping[str, Any]) -> None:
    dynamic, shape_inputs = [], []
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        if tensor.is_shape_tensor:
            shape_inputs.append(tensor.name)
        elif any(tensor.shape[d] < 0 for d in range(len(tensor.shape))):
            dynamic.append(tensor.name)
    if not dynamic and not shape_inputs:
        return
    parts = []
    if missing := [name for name in dynamic if name not in shapes]:
        parts.append(f"shapes for dynamic input(s) {missing}")
    if missing := [name for name in shape_inputs if name not in shapes]:
        parts.append(f"min / opt / max values for shape-tensor input(s) {missing}")
    if parts:
        raise ModelLoadError(
            f"TensorRT needs {' and '.join(parts)}: pass shapes= (or @pytest.mark.shapes)"
        )
    profile = builder.create_optimization_profile()
    for name in dynamic:
        profile.set_shape(name, *shapes[name])
    for name in shape_inputs:  # for a shape tensor, min / opt / max are its values
        profile.set_shape_input(name, *shapes[name])
    config.add_optimization_profile(profile)


def _timing_cache(config: Any, path: Path | None) -> Any:
    """The cache from `path`, or an empty one where the file is missing or TensorRT rejects it."""
    if not hasattr(config, "create_timing_cache"):
        return None
    data = path.read_bytes() if path is not None and path.is_file() else b""
    try:
        cache = config.create_timing_cache(data)
    except (RuntimeError, TypeError, ValueError):
        cache = None
    if cache is None and data:
        _log.warning("timing cache %s is unreadable by this TensorRT: rebuilding it", path)
        cache = config.create_timing_cache(b"")
    if cache is not None:
        config.set_timing_cache(cache, ignore_mismatch=True)
    return cache
