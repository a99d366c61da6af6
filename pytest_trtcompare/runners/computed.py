"""The precision that really ran: how many of a runner's computing nodes (ONNX nodes, TensorRT
layers, torch parameters, OpenVINO's executed ops) hold each float type, and which were kept
in float32 at a reduced precision. Each runner says it once per build, in its describe()
(`"computed"`), so that it travels with an isolated runner's description, goldens and reports.

A test at fp16 or bf16 whose target computed no node at that precision compares float32
against float32 (TensorRT 11 can build such an engine from `fp16=True` and say nothing):
`no_low_precision` is the one message the session fails it with.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: The float type each reduced precision computes in.
LOW_DTYPES = {"fp16": "float16", "bf16": "bfloat16"}
#: ONNX ops that move or make values without computing on them.
PLUMBING = frozenset(
    {"Cast", "CastLike", "Constant", "ConstantOfShape", "Identity", "Shape", "Size"}
)
#: how many op types `text` names among the nodes kept in float32
_NAMED = 4


@dataclass(frozen=True)
class Computed:
    """What a runner computed at `precision`: `counts` {float type: computing nodes},
    `kept` {op type: nodes in float32} where the precision is reduced, and a `note` (what
    the runtime does beyond the model: onnxruntime CPU's fp16 ops computed in float32)."""

    precision: str
    unit: str  # "nodes", "layers", "parameters", "ops"
    counts: Mapping[str, int]
    kept: Mapping[str, int] = field(default_factory=dict)
    note: str = ""

    @property
    def low_dtype(self) -> str | None:
        return LOW_DTYPES.get(self.precision)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def at_precision(self) -> int:
        """Computing nodes in the precision's float type (all of them at fp32)."""
        low = self.low_dtype
        return self.counts.get(low, 0) if low else self.counts.get("float32", 0)

    @property
    def none_at_precision(self) -> bool:
        """A reduced precision that no computing node ran in (none counted: not known)."""
        return self.low_dtype is not None and self.total > 0 and self.at_precision == 0

    def text(self) -> str:
        """'fp16: 48 of 52 nodes in float16, 4 kept in float32 (Softmax x2, ...)'."""
        if not self.total:
            text = f"{self.precision}: no {self.unit} counted"
        else:
            low = self.low_dtype
            main = low or max(self.counts, key=lambda k: (self.counts[k], k))
            share = f"{self.counts.get(main, 0)} of {self.total} {self.unit}"
            text = f"{self.precision}: {share} in {main}"
            others = [(k, n) for k, n in sorted(self.counts.items()) if k != main]
            for dtype, count in others:
                verb = "kept in" if low and dtype == "float32" else "in"
                text += f", {count} {verb} {dtype}"
                if verb == "kept in" and self.kept:
                    text += f" ({_listed(self.kept)})"
        return f"{text}; {self.note}" if self.note else text

    def as_dict(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "precision": self.precision,
            "unit": self.unit,
            "counts": dict(sorted(self.counts.items())),
            "text": self.text(),
        }
        if self.kept:
            info["kept_fp32"] = dict(sorted(self.kept.items()))
        if self.note:
            info["note"] = self.note
        return info

    @classmethod
    def of(cls, description: Mapping[str, Any] | None) -> Computed | None:
        """From a runner's describe() (its "computed"), None where it says nothing."""
        info = (description or {}).get("computed")
        if not isinstance(info, Mapping) or not isinstance(info.get("counts"), Mapping):
            return None
        return cls(
            str(info.get("precision", (description or {}).get("precision", ""))),
            str(info.get("unit", "nodes")),
            {str(k): int(v) for k, v in info["counts"].items()},
            {str(k): int(v) for k, v in dict(info.get("kept_fp32") or {}).items()},
            str(info.get("note", "")),
        )


def _listed(kept: Mapping[str, int]) -> str:
    ordered = sorted(kept.items(), key=lambda item: (-item[1], item[0]))
    named = [f"{op} x{n}" if n > 1 else op for op, n in ordered[:_NAMED]]
    if len(ordered) > _NAMED:
        named.append(f"{len(ordered) - _NAMED} more op types")
    return ", ".join(named)


def counted(
    precision: str, unit: str, dtypes: Iterable[tuple[str, str]], note: str = ""
) -> Computed:
    """A Computed from (op type, float type) of each computing node."""
    pairs = list(dtypes)
    counts = Counter(dtype for _, dtype in pairs)
    kept: Counter[str] = Counter()
    if precision in LOW_DTYPES:
        kept = Counter(op for op, dtype in pairs if dtype == "float32")
    return Computed(precision, unit, dict(counts), dict(kept), note)


def no_low_precision(runner: str, computed: Computed, option: str) -> str:
    """The failure of a reduced-precision test whose target computed nothing in it."""
    low = computed.low_dtype
    found = ", ".join(f"{n} in {dtype}" for dtype, n in sorted(computed.counts.items()))
    return (
        f"{runner} {computed.precision}: no {computed.unit[:-1]} computed in {low} (all "
        f"{computed.total}: {found}): the comparison would be float32 against float32, not a "
        f"{computed.precision} check; {option} allows it on purpose"
    )


# -- ONNX -----------------------------------------------------------------------------------
_FLOATS = {1: "float32", 10: "float16", 16: "bfloat16", 11: "float64"}


def onnx_tensor_types(model: Any) -> dict[str, int]:
    """Element type of every typed tensor of the main graph: inputs, weights, outputs and
    the intermediates shape inference finds (a Cast's output by its `to`)."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(_without_weights(model), strict_mode=False)
    except Exception:  # a model shape inference cannot read: what the model itself says
        inferred = model
    graph = inferred.graph
    types = {t.name: t.data_type for t in model.graph.initializer}
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    for node in graph.node:  # shape inference gives up on a type the op does not admit
        if node.op_type == "Cast":
            to = next((a.i for a in node.attribute if a.name == "to"), 0)
            types.setdefault(node.output[0], to)
    return types


def _without_weights(model: Any) -> Any:
    """The model with its weights as typed inputs: shape inference reads types and shapes,
    and serializing the weights for it cost more than a second for resnet18."""
    from onnx import helper

    graph = model.graph
    named = {value.name for value in graph.input}
    weights = [
        helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
        for t in graph.initializer
        if t.name not in named
    ]
    light = helper.make_graph(
        list(graph.node),
        graph.name,
        [*graph.input, *weights],
        list(graph.output),
        value_info=list(graph.value_info),
    )
    made = helper.make_model(light, opset_imports=list(model.opset_import))
    made.ir_version = model.ir_version
    made.functions.extend(model.functions)
    return made


def onnx_typed_nodes(model: Any, types: Mapping[str, int] | None = None) -> list[tuple[Any, str]]:
    """(node, float type) of each computing node of the main graph: the type of its first
    float output, else of its first float input (plumbing and nodes that touch no float
    tensor are not counted)."""
    types = onnx_tensor_types(model) if types is None else types
    found = []
    for node in model.graph.node:
        if node.op_type in PLUMBING:
            continue
        names = [*node.output, *node.input]
        dtype = next((_FLOATS[types[n]] for n in names if types.get(n) in _FLOATS), None)
        if dtype is not None:
            found.append((node, dtype))
    return found


def onnx_computed(
    model: Any, precision: str, note: str = "", types: Mapping[str, int] | None = None
) -> Computed:
    """The nodes of an ONNX model (as a runner executes it) by the float type they compute in;
    `types`: its tensors' element types, where the caller has them (`onnx_tensor_types`)."""
    typed = onnx_typed_nodes(model, types)
    return counted(precision, "nodes", [(node.op_type, dtype) for node, dtype in typed], note)


# -- TensorRT ---------------------------------------------------------------------------------
#: The type words of the engine inspector's "Format/Datatype" ('Row major linear FP16 format').
_TRT_TYPES = {
    "fp32": "float32",
    "float": "float32",
    "fp16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "fp8": "float8",
    "int8": "int8",
}
_TRT_WORD = re.compile(r"\b(FP32|Float|FP16|Half|BF16|FP8|Int8|Int32|Int64|UInt8|Bool)\b", re.I)
#: engine layers that move data or make constants
_TRT_PLUMBING = frozenset({"Reformat", "NoOp", "Constant", "Shape", "Identity", "Cast"})
#: what the engine inspector gives without ProfilingVerbosity.DETAILED at build time
NAMES_ONLY = (
    "layer precisions not known: the engine was built without ProfilingVerbosity.DETAILED "
    "(a prebuilt engine, or one cached by an earlier version)"
)


def trt_layer_dtypes(information: str) -> list[tuple[str, str]] | None:
    """(layer type, type it computes in) of each computing layer of an engine, from the
    inspector's JSON (`get_engine_information(LayerInformationFormat.JSON)`): the type of its
    first output; None where the layers are names alone (no DETAILED profiling verbosity)."""
    try:
        layers = json.loads(information).get("Layers", [])
    except (ValueError, AttributeError):
        return None
    found = []
    for layer in layers:
        if not isinstance(layer, dict):
            return None
        kind = str(layer.get("LayerType", ""))
        if kind in _TRT_PLUMBING:
            continue
        for tensor in [*layer.get("Outputs", []), *layer.get("Inputs", [])]:
            match = _TRT_WORD.search(str(tensor.get("Format/Datatype", "")))
            dtype = _TRT_TYPES.get(match.group(1).lower()) if match else None
            if dtype is not None:
                found.append((kind, dtype))
                break
    return found


def trt_computed(information: str, precision: str) -> Computed:
    """An engine's layers by the type they compute in, from its inspector's JSON."""
    dtypes = trt_layer_dtypes(information)
    if dtypes is None:
        return Computed(precision, "layers", {}, note=NAMES_ONLY)
    return counted(precision, "layers", dtypes)
