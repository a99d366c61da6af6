"""fp16 / bf16 / fp64 versions of an ONNX model, for runners that have no precision switch of
their own (fp64: `to_float64`, the anchor of the fp64 check).

Route, in order: NVIDIA ModelOpt AutoCast (`convert_to_mixed_precision`, float32 I/O) when
importable with the API we know; else onnxruntime's bundled float16 converter with
`keep_io_types=True` (inputs and outputs stay float32, so feeds and goldens
do not change), its output repaired before use (runners/float16_repair.py). bf16 is derived
from the fp16 conversion: same graph, float16 types become bfloat16 and every converted weight is
rounded from its original float32 value (not from the clipped float16 one).
Results are cached per (model digest, precision).

`convert_mixed(model, precision, keep_fp32)` keeps the named nodes in float32 (the
converter's node block list) and removes the float32 -> float16 -> float32 Cast round trip
the converter puts between two kept nodes, so adjacent kept nodes talk in float32. The
result carries metadata (`MIXED_KEY`) that makes `convert` use it as is.
"""

from __future__ import annotations

import copy
import importlib.util
import inspect
import json
import logging
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .. import progress
from ..errors import FrameworkUnavailable, ModelLoadError, PrecisionUnsupported
from .float16_repair import all_graphs, bodies, remove_round_trips, repair
from .labels import loaded_label
from .onnx_model import LoadedModel

_log = logging.getLogger(__name__)

#: Converted models by (model digest, precision): each is converted once per process.
CONVERTED: dict[tuple[str, str], ConvertedModel] = {}

#: metadata_props key of a mixed-precision model: its precision; KEPT_KEY lists its fp32 nodes.
MIXED_KEY = "pytest_trtcompare.mixed_precision"
KEPT_KEY = "pytest_trtcompare.keep_fp32"


def mixed_precision_of(proto: onnx.ModelProto) -> tuple[str, int] | None:
    """(its precision, how many nodes it keeps in fp32) of a model `convert_mixed` wrote;
    None for any other model."""
    marked = {p.key: p.value for p in proto.metadata_props}
    if MIXED_KEY not in marked:
        return None
    return marked[MIXED_KEY], len(json.loads(marked.get(KEPT_KEY, "[]")))


@dataclass(frozen=True)
class ConvertedModel:
    proto: onnx.ModelProto
    route: str  # how it was made, for describe()
    kept_fp32: tuple[str, ...] | None = None  # nodes left in float32 (None: not known)


def convert(loaded: LoadedModel, precision: str) -> ConvertedModel:
    """The model at `precision` ('fp32' returns it as is), cached by model digest."""
    if precision == "fp32":
        return ConvertedModel(loaded.proto, "fp32 model as given")
    marked = {p.key: p.value for p in loaded.proto.metadata_props}
    if marked.get(MIXED_KEY) == precision:  # made by convert_mixed: not cached, used as is
        kept = len(json.loads(marked.get(KEPT_KEY, "[]")))
        return ConvertedModel(loaded.proto, f"{precision} model as given ({kept} nodes in fp32)")
    key = (loaded.digest, precision)
    if key in CONVERTED:
        _log.debug("%s at %s: converted earlier in this process", loaded_label(loaded), precision)
        return CONVERTED[key]
    if precision not in ("fp16", "bf16", "fp64"):
        raise ValueError(f"no ONNX conversion to {precision}")
    label = loaded_label(loaded)
    with progress.step(f"converting {label} to {precision}") as timing:
        if precision == "fp64":
            converted = ConvertedModel(to_float64(loaded.proto), "fp64 (float32 inputs cast)")
        elif precision == "fp16":
            converted = _to_float16(loaded)
        else:
            converted = _to_bfloat16(loaded)
        _check_conversion(loaded, precision, converted)
    CONVERTED[key] = converted
    log_conversion(label, precision, converted, timing.elapsed)
    return converted


def _check_conversion(loaded: LoadedModel, precision: str, converted: ConvertedModel) -> None:
    """A converted model that onnx's checker refuses, where the model as given passes, is
    our conversion's fault: PrecisionUnsupported says so (the test skips, naming the
    conversion and what the checker found), instead of a runtime blaming the user's file."""
    try:
        onnx.checker.check_model(converted.proto)
    except onnx.checker.ValidationError as exc:
        try:
            onnx.checker.check_model(loaded.proto)
        except (onnx.checker.ValidationError, ValueError):
            return  # the model as given fails too: the runtime's own words say what is wrong
        bodies_of = sorted({n.op_type for n in loaded.proto.graph.node if any(bodies(n))})
        construct = f" (a model with {', '.join(bodies_of)} subgraphs)" if bodies_of else ""
        found = " ".join(str(exc).split())
        raise PrecisionUnsupported(
            f"pytest-trtcompare's {precision} conversion of {loaded.source}{construct} made an "
            f"invalid model ({converted.route}): {found}; the model as given is valid"
        ) from None
    except ValueError:  # over protobuf's 2 GB: the checker needs a file; the runtime checks
        return


def log_conversion(label: str, precision: str, converted: ConvertedModel, seconds: float) -> None:
    kept = converted.kept_fp32
    shown = "nodes kept in fp32 not known" if kept is None else f"{len(kept)} nodes kept in fp32"
    _log.info(
        "converted %s to %s in %.2f s (%s; %s)", label, precision, seconds, converted.route, shown
    )
    if kept:
        _log.debug("%s at %s: nodes kept in fp32: %s", label, precision, ", ".join(kept))


def convert_mixed(loaded: LoadedModel, precision: str, keep_fp32: Sequence[str]) -> onnx.ModelProto:
    """The model at `precision` ('fp16' or 'bf16') with the nodes named in `keep_fp32` in
    float32, marked so that `convert` uses it as is. Not cached."""
    names = {node.name for node in loaded.proto.graph.node}
    unknown = sorted(set(keep_fp32) - names)
    if unknown:
        raise ModelLoadError(f"model {loaded.source} has no node(s) named {unknown}")
    if precision not in ("fp16", "bf16"):
        raise ValueError(f"no mixed ONNX conversion to {precision}")
    make = _to_float16 if precision == "fp16" else _to_bfloat16
    label = loaded_label(loaded)
    with progress.step(f"converting {label} to {precision}") as timing:
        converted = make(loaded, tuple(keep_fp32))
    log_conversion(label, precision, converted, timing.elapsed)
    proto = converted.proto
    for key, value in ((MIXED_KEY, precision), (KEPT_KEY, json.dumps(list(keep_fp32)))):
        entry = next((p for p in proto.metadata_props if p.key == key), None)
        entry = entry if entry is not None else proto.metadata_props.add(key=key)
        entry.value = value
    return proto


def _to_float16(loaded: LoadedModel, keep: Sequence[str] = ()) -> ConvertedModel:
    converted = _modelopt_autocast(loaded.proto, "fp16", keep)
    if converted is not None:
        return ConvertedModel(converted, "fp16 by ModelOpt AutoCast (float32 I/O)")
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    proto = copy.deepcopy(loaded.proto)
    # onnxruntime's converter before 1.24 names its Casts after the node (`<node>_input_cast0`),
    # so two unnamed kept nodes (NMS in both branches of an If) would make two Casts of one
    # output name: every node gets a name first
    name_unnamed_nodes(list(_all_nodes(proto.graph)))
    try:
        proto = convert_float_to_float16(
            proto, keep_io_types=True, node_block_list=list(keep) or None
        )
    except Exception as exc:
        raise ModelLoadError(f"{loaded.source}: float16 conversion failed: {exc}") from None
    repair(proto)
    if keep:
        remove_round_trips(proto)
    blocked = set(DEFAULT_OP_BLOCK_LIST)
    kept = tuple(n.name or n.op_type for n in loaded.proto.graph.node if n.op_type in blocked)
    return ConvertedModel(
        proto,
        "fp16 by onnxruntime.transformers.float16 (keep_io_types=True, float32 I/O)",
        (*keep, *(name for name in kept if name not in keep)),
    )


def name_unnamed_nodes(nodes: Sequence[onnx.NodeProto]) -> None:
    """Name each unnamed node of `nodes` `<op_type>_<index>` (its index among them),
    underscores added until the name is one no node has."""
    taken = {node.name for node in nodes if node.name}
    for index, node in enumerate(nodes):
        if not node.name:
            name = f"{node.op_type}_{index}"
            while name in taken:
                name += "_"
            node.name = name
            taken.add(name)


def _modelopt_autocast(
    model: onnx.ModelProto, precision: str, keep: Sequence[str] = ()
) -> onnx.ModelProto | None:
    """ModelOpt AutoCast (`convert_to_mixed_precision`, which reads a file and keeps the
    nodes it finds sensitive in float32); None when its API is not the one we know (or it
    cannot take the nodes to keep, `nodes_to_exclude`)."""
    try:
        from modelopt.onnx.autocast import convert_to_mixed_precision
    except ImportError:
        return None
    parameters = inspect.signature(convert_to_mixed_precision).parameters
    if "onnx_path" not in parameters or "keep_io_types" not in parameters:
        return None
    extra: dict[str, list[str]] = {}
    if keep:
        if "nodes_to_exclude" not in parameters:
            return None
        extra["nodes_to_exclude"] = [f"^{re.escape(name)}$" for name in keep]
    with tempfile.TemporaryDirectory(prefix="trtcompare-autocast-") as folder:
        path = Path(folder) / "model.onnx"
        onnx.save_model(model, str(path), save_as_external_data=model.ByteSize() > 2**30)
        result = convert_to_mixed_precision(
            onnx_path=str(path), low_precision_type=precision, keep_io_types=True, **extra
        )
    return result if isinstance(result, onnx.ModelProto) else None


def _to_bfloat16(loaded: LoadedModel, keep: Sequence[str] = ()) -> ConvertedModel:
    if importlib.util.find_spec("ml_dtypes") is None:
        raise FrameworkUnavailable(
            "bf16 ONNX models need ml_dtypes: pip install pytest-trtcompare[bf16]"
        )
    converted = _modelopt_autocast(loaded.proto, "bf16", keep)
    if converted is not None:
        return ConvertedModel(converted, "bf16 by ModelOpt AutoCast (float32 I/O)")
    fp16 = _to_float16(loaded, keep)
    proto = copy.deepcopy(fp16.proto)
    originals = {  # by name: _all_tensors names the unnamed ones alike in both copies
        t.name: t
        for t in _all_tensors(copy.deepcopy(loaded.proto))
        if t.data_type == TensorProto.FLOAT
    }
    for tensor in _all_tensors(proto):
        if tensor.data_type == TensorProto.FLOAT16:
            source = originals.get(tensor.name, tensor)  # _bf16_tensor rounds from float32
            tensor.CopyFrom(_bf16_tensor(numpy_helper.to_array(source), tensor.name))
    for graph in all_graphs(proto.graph):
        for value_info in [*graph.value_info, *graph.input, *graph.output]:
            tensor_type = value_info.type.tensor_type
            if tensor_type.elem_type == TensorProto.FLOAT16:
                tensor_type.elem_type = TensorProto.BFLOAT16
    for node in _all_nodes(proto.graph):
        for attribute in node.attribute:
            if attribute.name == "to" and attribute.i == TensorProto.FLOAT16:
                attribute.i = TensorProto.BFLOAT16
    return ConvertedModel(
        proto, "bf16 from the fp16 conversion, weights rounded from float32", fp16.kept_fp32
    )


def _bf16_tensor(values: np.ndarray, name: str) -> TensorProto:
    import ml_dtypes

    bits = values.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    tensor = TensorProto(name=name, data_type=TensorProto.BFLOAT16, dims=values.shape)
    tensor.raw_data = bits.tobytes()
    return tensor


def _all_nodes(graph: onnx.GraphProto) -> Iterable[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for sub in bodies(node):
            yield from _all_nodes(sub)


def _all_tensors(model: onnx.ModelProto) -> Iterable[TensorProto]:
    yield from model.graph.initializer
    for node in _all_nodes(model.graph):
        for attribute in node.attribute:
            if attribute.HasField("t"):
                if not attribute.t.name:
                    attribute.t.name = f"{node.output[0]}:{attribute.name}"
                yield attribute.t


FLOAT, DOUBLE = TensorProto.FLOAT, TensorProto.DOUBLE
#: Nodes whose attribute names the type they make.
_TYPE_ATTRIBUTES = {
    "Cast": "to",
    "EyeLike": "dtype",
    "RandomNormal": "dtype",
    "RandomNormalLike": "dtype",
    "RandomUniform": "dtype",
    "RandomUniformLike": "dtype",
    "Bernoulli": "dtype",
}
# LayerNormalization's stash_type stays FLOAT: onnx.reference takes no other, and computes in
# the type of its input (float64 here) whatever stash_type says.
FP64_SUFFIX = "__fp64"


def to_float64(model: onnx.ModelProto) -> onnx.ModelProto:
    """The float64 copy of an ONNX model: the anchor of the fp64 check (session/anchored.py).

    Every float32 tensor becomes float64: initializers (from their float32 values, exactly),
    Constant and ConstantOfShape values, the `to` of Casts and the `dtype` of the generators, in
    the graph and in every subgraph. float32 inputs stay float32 (and outputs that are inputs),
    each cast to float64 as the graph's first node (feeds and goldens do not change; the cast is
    exact); outputs become float64, so the anchor keeps its digits. Intermediate type
    annotations (value_info) are dropped: they would name float32. onnx.reference computes in
    the types it is given, so the whole graph runs in float64; ONNX Runtime's CPU kernels lack
    float64 for Conv and others, which is why the anchor of an ONNX reference is onnx.reference.
    """
    proto = copy.deepcopy(model)
    graph = proto.graph
    weights = {init.name for init in graph.initializer}
    renamed = {
        value.name: value.name + FP64_SUFFIX
        for value in graph.input
        if value.type.tensor_type.elem_type == FLOAT and value.name not in weights
    }
    casts = [
        helper.make_node("Cast", [old], [new], to=DOUBLE, name=new) for old, new in renamed.items()
    ]
    for sub in all_graphs(graph):
        _to_double(sub)
    if renamed:
        for sub in all_graphs(graph):
            for node in sub.node:
                node.input[:] = [renamed.get(name, name) for name in node.input]
        nodes = [copy.deepcopy(node) for node in graph.node]  # copies: del frees the originals
        del graph.node[:]
        graph.node.extend([*casts, *nodes])
    for value in [*graph.input, *graph.output]:  # an input may also be an output
        if value.name in renamed:
            value.type.tensor_type.elem_type = FLOAT  # _to_double made it DOUBLE
    return proto


def _to_double(graph: onnx.GraphProto) -> None:
    for index, init in enumerate(graph.initializer):
        if init.data_type == FLOAT:
            graph.initializer[index].CopyFrom(
                numpy_helper.from_array(numpy_helper.to_array(init).astype("float64"), init.name)
            )
    for value in [*graph.input, *graph.output]:
        if value.type.tensor_type.elem_type == FLOAT:
            value.type.tensor_type.elem_type = DOUBLE
    del graph.value_info[:]
    for node in graph.node:
        typed = _TYPE_ATTRIBUTES.get(node.op_type)
        for attribute in node.attribute:
            if attribute.name == typed and attribute.i == FLOAT:
                attribute.i = DOUBLE
            elif attribute.type == onnx.AttributeProto.TENSOR and attribute.t.data_type == FLOAT:
                array = numpy_helper.to_array(attribute.t).astype("float64")
                attribute.t.CopyFrom(numpy_helper.from_array(array, attribute.t.name))
            elif node.op_type == "Constant" and attribute.name in ("value_float", "value_floats"):
                scalar = attribute.name == "value_float"
                values = [attribute.f] if scalar else list(attribute.floats)
                shape = () if scalar else (len(values),)
                tensor = helper.make_tensor("value", DOUBLE, shape, values)
                attribute.Clear()
                attribute.CopyFrom(helper.make_attribute("value", tensor))
