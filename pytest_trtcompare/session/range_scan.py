"""The range scan: which nodes of an fp32 ONNX model leave fp16's (bf16's) range or lose the
meaning of an addition there, the probable cause of a failure at that precision.

`scan_ranges` runs the model at fp32 on `RANGE_SCAN_RUNNER` with every intermediate tensor
marked an output, `SCAN_GROUP` tensors per run (as a per-layer comparison does, so that
memory stays bounded), and reads each float tensor as it comes:

- overflow: its largest |x| passes the precision's largest finite value (fp16: 65504);
  values of `SENTINEL` and beyond are left out (float32's min as an attention mask: at any
  precision a mask, which the conversion clamps);
- underflow: most of its significant values (those within the precision's digits of its
  largest) are below the precision's smallest normal (fp16: 6.1e-05), where they keep fewer
  digits or become 0;
- cancellation: an Add / Sub / Sum whose result, in at least `ADDITION_SHARE` of its elements,
  keeps fewer than half the precision's digits of its largest operand (fp16: the result is
  below 2**5 rounding steps of that operand): the operands' rounding is most of the result;
- swamping: an addition whose smaller operand (an input, not a weight) keeps fewer than half
  the precision's digits
  in the result (fp16: 5 of 11 bits) in at least `ADDITION_SHARE` of its elements, named
  where it matters:
  when a cancellation within `SWAMP_DEPTH` nodes downstream brings back what it lost.

The cost is one fp32 run of the model per `SCAN_GROUP` float tensors, per feed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from .. import runners
from ..errors import TrtCompareError
from ..inputs import Feed

#: Tensors exposed per fp32 run of the scan (memory stays bounded, as per layer).
SCAN_GROUP = 64


@dataclass(frozen=True)
class Limits:
    """What a reduced precision holds: its name, largest finite value, smallest normal and
    significant bits (the implicit one included)."""

    dtype: str
    largest: float
    smallest_normal: float
    digits: int


#: precision -> its limits (np.finfo(np.float16); ml_dtypes.finfo(bfloat16))
LIMITS = {
    "fp16": Limits("float16", 65504.0, 2.0**-14, 11),
    "bf16": Limits("bfloat16", (2 - 2.0**-7) * 2.0**127, 2.0**-126, 8),
}

#: An addition is named when this share of its elements cancels (or is swamped); sums of
#: unrelated values of one scale cancel so in about 1% (fp16) or 4% (bf16) of their elements.
ADDITION_SHARE = 0.1
#: A tensor underflows when this share of its significant values is below the smallest normal.
UNDERFLOW_SHARE = 0.5
#: Findings a report shows (the rest are counted).
SHOWN = 3
#: |x| from here on is a mask's sentinel (-3.4e38, float32's min), not a value.
SENTINEL = 1e38
#: How far upstream of a cancellation a swamped addition is named (nodes).
SWAMP_DEPTH = 4
_ADDITIONS = ("Add", "Sub", "Sum")
_CONVERTED = "float32"  # the tensors a conversion to fp16 / bf16 makes narrower


@dataclass(frozen=True)
class RangeFinding:
    """One node whose output leaves the precision's range or whose addition loses meaning."""

    node: str
    op_type: str
    tensor: str
    kind: str  # "overflow", "underflow", "cancellation", "swamping", "weight"
    magnitude: float  # the largest |x| of the tensor (of the operands, for an addition)
    share: float = 1.0  # the share of elements concerned (overflow: of elements past range)
    precision: str = "fp16"
    smallest: float = 0.0  # underflow: the smallest nonzero |x|

    def text(self) -> str:
        """'probable cause: MatMul_1 (MatMul) reaches 1.3e+05, past float16's 65504'."""
        limits = LIMITS[self.precision]
        where = f"probable cause: {self.node} ({self.op_type})"
        past = f"{limits.dtype}'s {limits.largest:.6g}"
        if self.kind == "overflow":
            return f"{where} reaches {self.magnitude:.3g}, past {past}"
        if self.kind == "weight":
            return (
                f"{where} has weight {self.tensor} up to {self.magnitude:.3g}, past {past}: "
                f"the conversion clamps {self.share:.0%} of it"
            )
        if self.kind == "underflow":
            return (
                f"{where} stays below {self.magnitude:.3g} (smallest nonzero "
                f"{self.smallest:.3g}): {self.share:.0%} of its significant values are below "
                f"{limits.dtype}'s smallest normal {limits.smallest_normal:.3g}"
            )
        if self.kind == "cancellation":
            return (
                f"{where} cancels operands up to {self.magnitude:.3g} to a result that keeps "
                f"fewer than {limits.digits // 2} of {limits.dtype}'s {limits.digits} bits in "
                f"{self.share:.0%} of its elements: their rounding is most of it"
            )
        return (
            f"{where} adds operands up to {self.magnitude:.3g} to others that keep fewer than "
            f"{limits.digits // 2} of {limits.dtype}'s {limits.digits} bits in {self.share:.0%} "
            "of its elements, which a cancellation downstream needs"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "op_type": self.op_type,
            "tensor": self.tensor,
            "kind": self.kind,
            "magnitude": self.magnitude,
            "share": self.share,
            "text": self.text(),
        }


@dataclass(frozen=True)
class RangeScan:
    """The scan's answer: its findings in graph order, and what it cost."""

    findings: tuple[RangeFinding, ...]
    precision: str
    tensors: int  # float tensors read
    runs: int  # fp32 runs of the model (one per group of tensors, per feed)
    runner: str = ""  # the runner of the fp32 run
    nodes: tuple[str, ...] = field(default=(), repr=False)  # the nodes named, in graph order

    def lines(self, shown: int = SHOWN) -> list[str]:
        """The first `shown` findings' lines in graph order (the first is where it starts),
        and how many more there are."""
        lines = [finding.text() for finding in self.findings[:shown]]
        more = len(self.findings) - shown
        if more > 0:
            lines.append(
                f"... and {more} more (trtcompare debug-precision --json lists them all; the "
                "first in graph order is where it starts)"
            )
        return lines

    def describe(self) -> str:
        """The findings' lines, or that the scan names nothing (with its cost)."""
        if not self.findings:
            return (
                f"range scan ({self.runner} fp32, {self.tensors} tensors, {self.runs} runs): no "
                f"tensor leaves {LIMITS[self.precision].dtype}'s range"
            )
        return "\n".join(self.lines())

    def to_json(self) -> list[dict[str, Any]]:
        return [finding.to_json() for finding in self.findings]


@dataclass
class _Stats:
    magnitude: float = 0.0
    smallest: float = np.inf
    overflow: float = 0.0  # share of elements past the largest finite value
    underflow: float = 0.0  # share of significant values below the smallest normal
    cancelled: float = 0.0
    swamped: float = 0.0
    operands: float = 0.0  # the largest operand (additions)


def scan_ranges(
    model: onnx.ModelProto,
    precision: str,
    feeds: Sequence[Feed],
    *,
    group: int | None = None,
    runner: str | None = None,
) -> RangeScan:
    """Run `model` (fp32, every node named) at fp32 with every tensor exposed, `group` tensors
    per run, and name the nodes whose values do not survive `precision` ('fp16' or 'bf16')."""
    if precision not in LIMITS:
        raise TrtCompareError(f"the range scan takes precision fp16 or bf16, not {precision!r}")
    limits = LIMITS[precision]
    name = runner or runners.RANGE_SCAN_RUNNER
    nodes = {node.name: node for node in model.graph.node}
    constants = {t.name: t for t in model.graph.initializer}
    fixed = set(constants).union(  # weights: initializers and Constant nodes' outputs
        *(node.output for node in model.graph.node if node.op_type == "Constant")
    )
    stats: dict[str, _Stats] = {}
    runs = 0
    with runners.create(name, model, "fp32", outputs="all") as run:
        layers = [layer for layer in run.layers or () if layer.dtype == _CONVERTED]
        available = {layer.tensor for layer in layers}
        size = group or SCAN_GROUP
        for feed in feeds:
            for start in range(0, len(layers), size):
                chunk = layers[start : start + size]
                wanted = [layer.tensor for layer in chunk]
                for layer in chunk:
                    node = nodes.get(layer.node)
                    if node is not None and node.op_type in _ADDITIONS:
                        wanted += [n for n in node.input if n in available and n not in wanted]
                with run.select_outputs(wanted):
                    values = run.infer(feed)
                runs += 1
                for layer in chunk:
                    if layer.tensor not in values:
                        continue
                    out = np.asarray(values[layer.tensor], dtype=np.float64)
                    merged = stats.setdefault(layer.tensor, _Stats())
                    _read_tensor(out, limits, merged)
                    node = nodes.get(layer.node)
                    if node is not None and node.op_type in _ADDITIONS:
                        operands = [_operand(n, values, feed, constants) for n in node.input if n]
                        data = [n not in fixed for n in node.input if n]
                        if all(op is not None for op in operands):
                            _read_addition(operands, data, out, limits, merged)
                del values
    weights = _weights(model, constants, limits, precision)
    findings = _findings(layers, nodes, stats, limits, precision, weights)
    return RangeScan(
        findings=tuple(findings),
        precision=precision,
        tensors=len(layers),
        runs=runs,
        runner=name,
        nodes=tuple(dict.fromkeys(finding.node for finding in findings)),
    )


def _operand(
    name: str, values: Mapping[str, Any], feed: Feed, constants: Mapping[str, onnx.TensorProto]
) -> np.ndarray | None:
    if name in values:
        return np.asarray(values[name], dtype=np.float64)
    if name in feed:
        return np.asarray(feed[name], dtype=np.float64)
    if name in constants:
        return np.asarray(numpy_helper.to_array(constants[name]), dtype=np.float64)
    return None


def _read_tensor(out: np.ndarray, limits: Limits, merged: _Stats) -> None:
    magnitude = np.abs(out[np.isfinite(out)])
    magnitude = magnitude[magnitude < SENTINEL]
    if not magnitude.size:
        return
    largest = float(magnitude.max())
    merged.magnitude = max(merged.magnitude, largest)
    nonzero = magnitude[magnitude > 0]
    if nonzero.size:
        merged.smallest = min(merged.smallest, float(nonzero.min()))
    merged.overflow = max(merged.overflow, float(np.mean(magnitude > limits.largest)))
    significant = magnitude[magnitude >= largest * 2.0**-limits.digits]
    if largest > 0 and significant.size:
        below = float(np.mean(significant < limits.smallest_normal))
        merged.underflow = max(merged.underflow, below)


def _step(values: np.ndarray, digits: int) -> np.ndarray:
    """The rounding step (ulp) of |values| at a precision of `digits` significant bits
    (exponent range aside)."""
    _, exponent = np.frexp(values)
    step: np.ndarray = np.ldexp(1.0, exponent - digits)
    return step


def _read_addition(
    operands: list[Any], data: list[bool], out: np.ndarray, limits: Limits, merged: _Stats
) -> None:
    """`data`: which operands are no weight (a lost weight digit is rounding, a lost input's
    digit is information)."""
    try:
        shaped = np.broadcast_arrays(*operands, out)
    except ValueError:
        return
    magnitudes = np.stack([np.abs(op) for op in shaped[:-1]])
    largest = magnitudes.max(axis=0)
    inputs = [m for m, is_data in zip(magnitudes, data, strict=True) if is_data]
    smallest = np.min(inputs, axis=0) if inputs else np.zeros_like(largest)
    result = np.abs(shaped[-1])
    live = (largest < SENTINEL) & np.isfinite(result) & (largest > 0)
    if not live.any():
        return
    merged.operands = max(merged.operands, float(largest[live].max()))
    kept = 2.0 ** (limits.digits // 2)  # fewer digits than this of a value survive
    # the result within `kept` rounding steps of the largest operand (exact zeros are left
    # out: x - x stays 0 at any precision)
    cancelled = live & (result > 0) & (result < _step(largest, limits.digits) * kept)
    merged.cancelled = max(merged.cancelled, float(cancelled.sum() / live.sum()))
    lost = smallest < _step(result, limits.digits) * kept
    swamped = live & (smallest > 0) & (smallest < largest) & lost
    merged.swamped = max(merged.swamped, float(swamped.sum() / live.sum()))


#: Ops that move or select values without computing new ones: a range finding in their
#: output that their input holds already is that input's, not theirs.
MOVERS = frozenset(
    {
        "Reshape",
        "Transpose",
        "Split",
        "Squeeze",
        "Unsqueeze",
        "Flatten",
        "Slice",
        "Gather",
        "Concat",
        "Expand",
        "Identity",
        "Tile",
        "DepthToSpace",
        "SpaceToDepth",
        "Pad",
    }
)


def _findings(
    layers: Sequence[runners.Layer],
    nodes: Mapping[str, onnx.NodeProto],
    stats: Mapping[str, _Stats],
    limits: Limits,
    precision: str,
    weights: Mapping[str, RangeFinding] | None = None,
) -> list[RangeFinding]:
    """In graph order: each node's weight past the range (`weights`), then what its output
    holds."""
    producer = {layer.tensor: layer for layer in layers}
    cancelling = {
        layer.node
        for layer in layers
        if layer.tensor in stats and stats[layer.tensor].cancelled >= ADDITION_SHARE
    }
    needed = _upstream(cancelling, nodes, producer)
    findings = []
    kinds: dict[str, str] = {}  # tensor -> the kind found in it
    weights = dict(weights or {})
    for layer in layers:
        if layer.node in weights:
            findings.append(weights.pop(layer.node))
        got = stats.get(layer.tensor)
        if got is None:
            continue
        if got.overflow > 0:
            found = ("overflow", got.magnitude, got.overflow)
        elif got.magnitude > 0 and got.underflow >= UNDERFLOW_SHARE:
            found = ("underflow", got.magnitude, got.underflow)
        elif layer.node in cancelling:
            found = ("cancellation", got.operands, got.cancelled)
        elif got.swamped >= ADDITION_SHARE and layer.node in needed:
            found = ("swamping", got.operands, got.swamped)
        else:
            continue
        kind, magnitude, share = found
        kinds[layer.tensor] = kind
        node = nodes.get(layer.node)
        moved = node is not None and any(kinds.get(name) == kind for name in node.input)
        if layer.op in MOVERS and moved:
            continue  # it passes on a tensor named already: no cause of its own
        findings.append(
            RangeFinding(
                layer.node,
                layer.op,
                layer.tensor,
                kind,
                magnitude,
                share,
                precision,
                got.smallest if kind == "underflow" else 0.0,
            )
        )
    return findings + list(weights.values())  # nodes with no float output scanned


def _weights(
    model: onnx.ModelProto,
    constants: Mapping[str, onnx.TensorProto],
    limits: Limits,
    precision: str,
) -> dict[str, RangeFinding]:
    """Node -> its first float32 initializer with values past the precision's range (not a
    mask's sentinel): the conversion clamps them before any runtime computes."""
    found: dict[str, RangeFinding] = {}
    for node in model.graph.node:
        for name in node.input:
            tensor = constants.get(name)
            if tensor is None or tensor.data_type != onnx.TensorProto.FLOAT:
                continue
            size = np.abs(numpy_helper.to_array(tensor))
            past = (size > limits.largest) & (size < SENTINEL)
            if past.any():
                magnitude = float(size[past].max())
                share = float(past.mean())
                found[node.name] = RangeFinding(
                    node.name, node.op_type, name, "weight", magnitude, share, precision
                )
                break
    return found


def _upstream(
    start: set[str], nodes: Mapping[str, onnx.NodeProto], producer: Mapping[str, Any]
) -> set[str]:
    """The nodes within SWAMP_DEPTH producers upstream of `start`."""
    found: set[str] = set()
    frontier = set(start)
    for _ in range(SWAMP_DEPTH):
        step = set()
        for name in frontier:
            node = nodes.get(name)
            for tensor in node.input if node is not None else ():
                layer = producer.get(tensor)
                if layer is not None and layer.node not in found:
                    step.add(layer.node)
        found |= step
        frontier = step
    return found


def first_trial(model: onnx.ModelProto, scan: RangeScan) -> list[str]:
    """The nodes to keep in fp32 first: those the scan names, and the readers of a tensor past
    the precision's range (read at that precision, it is inf), in graph order."""
    past = {f.tensor for f in scan.findings if f.kind == "overflow"}
    named = set(scan.nodes)
    return [
        node.name
        for node in model.graph.node
        if node.name in named or past.intersection(node.input)
    ]


def neighbours(model: onnx.ModelProto, names: Sequence[str]) -> list[str]:
    """The nodes that produce an input of one of `names` or consume one of their outputs, in
    graph order (the first place to look when keeping the named nodes is not enough)."""
    chosen = set(names)
    outputs = {t for node in model.graph.node if node.name in chosen for t in node.output}
    inputs = {t for node in model.graph.node if node.name in chosen for t in node.input}
    return [
        node.name
        for node in model.graph.node
        if node.name not in chosen
        and (inputs.intersection(node.output) or outputs.intersection(node.input))
    ]
