"""fp16 / bf16 versions of an ONNX model, for runners that have no precision switch of their own.

Route, in order: NVIDIA ModelOpt AutoCast (`convert_to_mixed_precision`, float32 I/O) when
importable with the API we know; else onnxruntime's bundled float16 converter with
`keep_io_types=True` (inputs and outputs stay float32, so feeds and goldens
do not change). The converter's output is repaired before use: it appends its input/output
Cast nodes at the end of the graph (the reference evaluator runs nodes in listed order) and
leaves `Cast(to=FLOAT)` nodes whose outputs it retyped to float16. bf16 is derived from the
fp16 conversion: same graph, float16 types become bfloat16 and every converted weight is
rounded from its original float32 value (not from the clipped float16 one).
Results are cached per (model digest, precision).
"""

from __future__ import annotations

import importlib.util
import inspect
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from ..errors import FrameworkUnavailable, ModelLoadError
from .onnx_model import LoadedModel

_CACHE: dict[tuple[str, str], ConvertedModel] = {}


@dataclass(frozen=True)
class ConvertedModel:
    proto: onnx.ModelProto
    route: str  # how it was made, for describe()


def convert(loaded: LoadedModel, precision: str) -> ConvertedModel:
    """The model at `precision` ('fp32' returns it as is), cached by model digest."""
    if precision == "fp32":
        return ConvertedModel(loaded.proto, "fp32 model as given")
    key = (loaded.digest, precision)
    if key not in _CACHE:
        if precision == "fp16":
            _CACHE[key] = _to_float16(loaded)
        elif precision == "bf16":
            _CACHE[key] = _to_bfloat16(loaded)
        else:
            raise ValueError(f"no ONNX conversion to {precision}")
    return _CACHE[key]


def _to_float16(loaded: LoadedModel) -> ConvertedModel:
    if importlib.util.find_spec("modelopt") is not None:
        converted = _modelopt_autocast(loaded.proto, "fp16")
        if converted is not None:
            return ConvertedModel(converted, "fp16 by ModelOpt AutoCast (float32 I/O)")
    from onnxruntime.transformers.float16 import convert_float_to_float16

    try:
        proto = convert_float_to_float16(_copy(loaded.proto), keep_io_types=True)
    except Exception as exc:
        raise ModelLoadError(f"{loaded.source}: float16 conversion failed: {exc}") from None
    repair(proto)
    return ConvertedModel(
        proto, "fp16 by onnxruntime.transformers.float16 (keep_io_types=True, float32 I/O)"
    )


def _modelopt_autocast(model: onnx.ModelProto, precision: str) -> onnx.ModelProto | None:
    """ModelOpt AutoCast (`convert_to_mixed_precision`, which reads a file and keeps the
    nodes it finds sensitive in float32); None when its API is not the one we know."""
    try:
        from modelopt.onnx.autocast import convert_to_mixed_precision
    except ImportError:
        return None
    parameters = inspect.signature(convert_to_mixed_precision).parameters
    if "onnx_path" not in parameters or "keep_io_types" not in parameters:
        return None
    with tempfile.TemporaryDirectory(prefix="trtcompare-autocast-") as folder:
        path = Path(folder) / "model.onnx"
        onnx.save_model(model, str(path), save_as_external_data=model.ByteSize() > 2**30)
        result = convert_to_mixed_precision(
            onnx_path=str(path), low_precision_type=precision, keep_io_types=True
        )
    return result if isinstance(result, onnx.ModelProto) else None


def _to_bfloat16(loaded: LoadedModel) -> ConvertedModel:
    if importlib.util.find_spec("ml_dtypes") is None:
        raise FrameworkUnavailable(
            "bf16 ONNX models need ml_dtypes: pip install pytest-trtcompare[bf16]"
        )
    if importlib.util.find_spec("modelopt") is not None:
        converted = _modelopt_autocast(loaded.proto, "bf16")
        if converted is not None:
            return ConvertedModel(converted, "bf16 by ModelOpt AutoCast (float32 I/O)")
    fp16 = _to_float16(loaded).proto
    proto = _copy(fp16)
    originals = _float_tensors(loaded.proto)
    for tensor in _all_tensors(proto):
        if tensor.data_type == TensorProto.FLOAT16:
            source = originals.get(tensor.name)
            values = (
                numpy_helper.to_array(source)
                if source is not None
                else (numpy_helper.to_array(tensor).astype(np.float32))
            )
            tensor.CopyFrom(_bf16_tensor(values, tensor.name))
    for value_info in _value_infos(proto):
        tensor_type = value_info.type.tensor_type
        if tensor_type.elem_type == TensorProto.FLOAT16:
            tensor_type.elem_type = TensorProto.BFLOAT16
    for node in _all_nodes(proto.graph):
        for attribute in node.attribute:
            if attribute.name == "to" and attribute.i == TensorProto.FLOAT16:
                attribute.i = TensorProto.BFLOAT16
    return ConvertedModel(proto, "bf16 from the fp16 conversion, weights rounded from float32")


def _bf16_tensor(values: np.ndarray, name: str) -> TensorProto:
    import ml_dtypes

    bits = values.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    tensor = TensorProto(name=name, data_type=TensorProto.BFLOAT16, dims=values.shape)
    tensor.raw_data = bits.tobytes()
    return tensor


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def _all_nodes(graph: onnx.GraphProto) -> Iterable[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            for sub in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                yield from _all_nodes(sub)


def _all_tensors(model: onnx.ModelProto) -> Iterable[TensorProto]:
    yield from model.graph.initializer
    for node in _all_nodes(model.graph):
        for attribute in node.attribute:
            if attribute.HasField("t"):
                if not attribute.t.name:
                    attribute.t.name = f"{node.output[0]}:{attribute.name}"
                yield attribute.t


def _float_tensors(model: onnx.ModelProto) -> dict[str, TensorProto]:
    tensors = {}
    for tensor in _all_tensors(_copy(model)):
        if tensor.data_type == TensorProto.FLOAT:
            tensors[tensor.name] = tensor
    return tensors


def _value_infos(model: onnx.ModelProto) -> Iterable[onnx.ValueInfoProto]:
    yield from model.graph.value_info
    yield from model.graph.input
    yield from model.graph.output


def repair(model: onnx.ModelProto) -> None:
    """Fix what the float16 converter leaves: node order and stale Cast targets."""
    types = {vi.name: vi.type.tensor_type.elem_type for vi in _value_infos(model)}
    for node in model.graph.node:
        if node.op_type == "Cast" and types.get(node.output[0]) == TensorProto.FLOAT16:
            for attribute in node.attribute:
                if attribute.name == "to" and attribute.i == TensorProto.FLOAT:
                    attribute.i = TensorProto.FLOAT16
    topological_sort(model.graph)


def topological_sort(graph: onnx.GraphProto) -> None:
    """Reorder nodes so each comes after the producers of its inputs (stable otherwise)."""
    available = {vi.name for vi in graph.input} | {t.name for t in graph.initializer} | {""}
    pending = list(graph.node)
    ordered: list[onnx.NodeProto] = []
    while pending:
        progress = []
        for node in pending:
            needed = [*node.input, *implicit_inputs(node)]
            if all(name in available for name in needed if name):
                ordered.append(node)
                available.update(node.output)
            else:
                progress.append(node)
        if len(progress) == len(pending):  # a cycle or an input nobody produces: keep as is
            ordered.extend(progress)
            break
        pending = progress
    copies = [onnx.NodeProto() for _ in ordered]
    for copy, node in zip(copies, ordered, strict=True):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)


def implicit_inputs(node: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs (If / Loop / Scan bodies) read from the enclosing graph."""
    names: set[str] = set()
    for attribute in node.attribute:
        for sub in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
            local = {vi.name for vi in sub.input} | {t.name for t in sub.initializer}
            for inner in sub.node:
                local.update(inner.output)
            for inner in sub.node:
                names.update(n for n in [*inner.input, *implicit_inputs(inner)] if n not in local)
    return names
