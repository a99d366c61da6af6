"""Reduction: the smallest subgraph of a model that still fails at a reduced precision.

`reduce_model` runs the model at fp32 once with every tensor exposed (the reference values of
every intermediate tensor, runners/onnx_graph.py `with_all_outputs`), then candidate
subgraphs: a contiguous range of the topologically ordered nodes, extracted as a model of
its own (`extract`). A candidate's graph inputs are the tensors it reads from outside the
range, fed the reference's fp32 values of them (so it sees exactly what it sees inside the
model); initializers and the outputs of Constant nodes it reads are folded in as
initializers; its outputs are the tensors it makes that are read after it or are model
outputs. A candidate fails when, converted to the target precision on the target runner, its
outputs miss the reference's values of them under the tolerance on any feed.

The search, as Polygraphy's `debug reduce` bisect then linear modes: the whole model must
fail; bisection keeps the half of the range that still fails (and stops when both halves
pass: the failure needs nodes of both); then nodes are dropped one at a time from the end,
then from the start, while the rest still fails. If and Loop nodes are single nodes of the
order: their bodies move whole. Every candidate costs one run per feed; the reference one.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import runners
from ..engine import ToleranceTable, compare_outputs, split_entry
from ..errors import TrtCompareError
from ..goldens import write_golden, write_polygraphy_inputs
from ..inputs import DEFAULT_SEED
from ..runners import DEBUG_PRECISION_RUNNER, load_model, with_all_outputs
from .layout import counted
from .precision_debug import named_sorted, tolerance_list
from .range_scan import LIMITS, SENTINEL
from .runs import make_feeds

Feed = Mapping[str, Any]
_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReduceResult:
    """The reduced subgraph (or the whole model when it passes), its inputs per feed, the
    verdict and the cost."""

    model: onnx.ModelProto = field(repr=False)
    nodes: tuple[str, ...]  # in topological order
    op_types: tuple[str, ...]
    passed: bool  # True: the whole model passes, nothing to reduce
    #: candidate models judged (each on every feed until one fails), and one more run of the
    #: reduced graph for its figures; the fp32 reference run not counted
    runs: int
    inputs: tuple[dict[str, np.ndarray], ...] = field(default=(), repr=False)
    expected: tuple[dict[str, np.ndarray], ...] = field(default=(), repr=False)
    error: str = ""  # the reduced graph's comparison on its first failing feed
    node_count: int = 0  # nodes of the whole model
    precision: str = "fp16"
    runner: str = DEBUG_PRECISION_RUNNER
    #: candidates the runner could not convert or run: no reproduction of an accuracy
    #: failure (a runtime error is another bug), so the search went on without them
    unrunnable: int = 0
    tolerances: tuple[Any, ...] = field(default=(), repr=False)  # the judge's, in order

    def describe(self) -> str:
        """'reduce (onnxref fp16): 2 of 63 nodes still fail: plant_add (Add), plant_sub
        (Sub) (9 runs)' and the comparison's figures, or that the model passes."""
        where = f"{self.runner} {self.precision}"
        cost = counted(self.runs, "run")
        if self.unrunnable:
            cost += f"; {counted(self.unrunnable, 'candidate')} could not run and were left out"
        if self.passed:
            return f"reduce ({where}): the model passes, nothing to reduce ({cost})"
        names = ", ".join(f"{n} ({t})" for n, t in zip(self.nodes, self.op_types, strict=True))
        head = (
            f"reduce ({where}): {len(self.nodes)} of {self.node_count} nodes still fail: "
            f"{names} ({cost})"
        )
        return "\n".join([head, self.error] if self.error else [head])

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": list(self.nodes),
            "op_types": list(self.op_types),
            "passed": self.passed,
            "runs": self.runs,
            "node_count": self.node_count,
            "unrunnable": self.unrunnable,
        }

    def save(self, output: Path) -> str:
        """Write the reduced model to `output`, its inputs beside it (OUT.inputs.safetensors:
        a golden of the inputs and the fp32 reference outputs of every feed;
        OUT.inputs.json for `trtcompare run --load-inputs`); the command that reproduces
        the failure."""
        output.parent.mkdir(parents=True, exist_ok=True)
        onnx.save_model(self.model, output)
        _, golden, inputs = saved_files(output)
        later = list(zip(self.expected[1:], self.inputs[1:], strict=True))
        write_golden(golden, self.expected[0], self.inputs[0], later=later)
        write_polygraphy_inputs(inputs, self.inputs)
        return reproduce_command(output, self.runner, self.precision, self.tolerances)


def saved_files(output: Path) -> tuple[Path, Path, Path]:
    """What `ReduceResult.save(output)` writes: the model, OUT.inputs.safetensors and
    OUT.inputs.json."""
    return output, _beside(output, ".inputs.safetensors"), _beside(output, ".inputs.json")


def _beside(output: Path, suffix: str) -> Path:
    return output.with_name(output.stem + suffix)


def reproduce_command(
    output: Path, runner: str, precision: str, tolerances: Sequence[Any] = ()
) -> str:
    """`trtcompare run OUT.onnx --onnxref --fp16 --load-inputs OUT.inputs.json --atol A
    --rtol R`: the reduced model at `precision` against itself at fp32 on its saved inputs,
    under the elementwise tolerance of the default entry of the first of `tolerances`."""
    words = ["trtcompare", "run", str(output), f"--{runner}", f"--{precision}"]
    words += ["--load-inputs", str(saved_files(output)[2])]
    if tolerances:
        elementwise, _ = split_entry(ToleranceTable(tolerances[0]).default)
        if elementwise is not None:
            words += ["--atol", repr(elementwise.atol), "--rtol", repr(elementwise.rtol)]
    return shlex.join(words)


def reduce_model(
    model: Any,
    precision: str = "fp16",
    runner: str = DEBUG_PRECISION_RUNNER,
    tolerance: Any = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    inputs: Any = None,
    *,
    seed: int = DEFAULT_SEED,
    iterations: int = 1,
    runner_options: Mapping[str, Any] | None = None,
    log: Callable[[str], None] | None = None,
) -> ReduceResult:
    """The smallest contiguous subgraph of `model` that fails at `precision` ('fp16' or
    'bf16') on `runner` against the fp32 reference under `tolerance` (as `find_fp32_nodes`
    takes it: one, a list that must all pass, or None for the precision's default), judged
    on every feed of `inputs` (a feed, a list of them, or a file as `inputs=` of the marker
    takes it; default: `iterations` seeded synthetic draws, `shapes` for dynamic dims).
    Unnamed nodes are named `<op_type>_<index>`."""
    if precision not in ("fp16", "bf16"):
        raise TrtCompareError(f"reduce takes precision fp16 or bf16, not {precision!r}")
    loaded = named_sorted(load_model(model))
    proto = loaded.proto
    options = dict(runner_options or {})
    tolerances = tolerance_list(tolerance, precision)
    marked, _ = with_all_outputs(proto)
    with runners.create(runner, marked, "fp32", **options) as reference:
        feeds = make_feeds(
            reference, inputs=inputs, seed=seed, shapes=shapes, iterations=iterations
        )
        values = [{**feed, **reference.infer(feed)} for feed in feeds]
    nodes = list(proto.graph.node)
    model_outputs = frozenset(vi.name for vi in proto.graph.output)
    model_inputs = frozenset(vi.name for vi in proto.graph.input)
    unrunnable: list[str] = []  # why each candidate that could not run did not
    verdicts: dict[tuple[int, int], str | None] = {}

    def fails(low: int, high: int) -> bool:
        """Whether nodes[low:high] fails; its first failing comparison kept."""
        if (low, high) not in verdicts:
            sub = extract(proto, low, high, values)
            verdicts[(low, high)] = None
            refused = None
            held = None if sub is None else _held(sub[1], precision, model_inputs)
            if sub is not None and held is not None:
                found, refused = _judge(
                    sub[0], runner, precision, options, held, sub[2], tolerances, model_outputs
                )
                verdicts[(low, high)] = found
                if refused is not None:
                    unrunnable.append(refused)
            if log is not None:
                verdict = "fail" if verdicts[(low, high)] is not None else "pass"
                verdict = f"could not run ({refused})" if refused is not None else verdict
                log(f"run {len(verdicts)}: nodes {low}..{high - 1} of {len(nodes)}: {verdict}")
        return verdicts[(low, high)] is not None

    def result(low: int, high: int, passed: bool) -> ReduceResult:
        runs = len(verdicts)
        sub = extract(proto, low, high, values)
        held = None if sub is None else _held(sub[1], precision, model_inputs)
        assert sub is not None and held is not None  # judged, so it was extracted and fed
        chosen = nodes[low:high]
        if not passed:  # its figures as `trtcompare run` on it shows them: nothing saturated
            every = frozenset(name for feed in sub[2] for name in feed)
            error, _ = _judge(sub[0], runner, precision, options, held, sub[2], tolerances, every)
            runs += 1
            verdicts[(low, high)] = error or verdicts[(low, high)]
            if log is not None:
                log(f"run {runs}: nodes {low}..{high - 1} of {len(nodes)} again, for its figures")
        return ReduceResult(
            sub[0] if not passed else proto,
            () if passed else tuple(node.name for node in chosen),
            () if passed else tuple(node.op_type for node in chosen),
            passed,
            runs,
            tuple(held),
            tuple(sub[2]),
            verdicts[(low, high)] or "",
            len(nodes),
            precision,
            runner,
            len(unrunnable),
            tuple(tolerances),
        )

    low, high = 0, len(nodes)
    if not nodes:
        raise TrtCompareError(f"model {loaded.source} has no nodes: nothing to reduce")
    if not fails(low, high):
        if unrunnable:  # the whole model: a runtime error, not an accuracy failure
            raise TrtCompareError(
                f"reduce: {runner} cannot run model {loaded.source} at {precision}: {unrunnable[0]}"
            )
        return result(low, high, passed=True)
    while high - low > 1:  # bisection
        middle = (low + high) // 2
        if fails(low, middle):
            high = middle
        elif fails(middle, high):
            low = middle
        else:
            break
    while high - low > 1 and fails(low, high - 1):  # node by node from the end
        high -= 1
    while high - low > 1 and fails(low + 1, high):  # and from the start
        low += 1
    return result(low, high, passed=False)


def _judge(
    candidate: onnx.ModelProto,
    runner: str,
    precision: str,
    options: Mapping[str, Any],
    feeds: Sequence[Feed],
    expected: Sequence[Mapping[str, np.ndarray]],
    tolerances: list[Any],
    model_outputs: frozenset[str] = frozenset(),
) -> tuple[str | None, str | None]:
    """The first failing comparison's text (None: every feed passes) and why the runner could
    not convert or run the candidate (None: it ran). A candidate that cannot run does not
    reproduce the accuracy failure; an intermediate output past the precision's range is
    judged by `_saturated`."""
    try:
        with runners.create(runner, candidate, precision, **options) as target:
            for feed, want in zip(feeds, expected, strict=True):
                actual = _saturated(target.infer(feed), want, precision, model_outputs)
                for tol in tolerances:
                    result = compare_outputs(actual, want, tol)
                    if not result.passed:
                        return _figures(result), None
    except Exception as exc:  # the runner refuses this candidate: not the failure sought
        _LOG.debug("candidate could not run: %s", exc)
        return None, str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
    return None, None


def _figures(result: Any) -> str:
    """The failing outputs of a candidate's comparison, a line each: how many elements, the
    greatest errors, how far past the tolerance."""
    lines = []
    for out in result.failed_outputs:
        if out.problem or out.invalid:
            lines.append(f"  {out.name}: {out.problem or out.invalid}")
            continue
        figures, tolerance = out.figures, out.tolerance.describe(sources=False)
        if out.failure or "mismatches" not in figures:
            lines.append(f"  {out.name}: {out.failure or 'out of tolerance'}")
            continue
        lines.append(
            f"  {out.name}: {figures['mismatches']} of {figures['count']} elements out of "
            f"tolerance, greatest abs error {figures['max_abs_error']:.4g}, rel "
            f"{figures['max_rel_error']:.4g} ({out.margin:.3g}x {tolerance})"
        )
    return "\n".join(lines)


def _held(
    feeds: Sequence[Mapping[str, np.ndarray]], precision: str, model_inputs: frozenset[str]
) -> list[dict[str, np.ndarray]] | None:
    """A candidate's feeds as the precision holds them, or None where it is fed an
    intermediate tensor with finite values past the precision's range that are no sentinel:
    what goes wrong there starts before the candidate (its producer's values cannot be held
    at that precision), so it is no reproduction of its own. A sentinel (|value| >= 1e38, a
    mask's float32 min) is fed as the precision's largest value of its sign; the model's own
    inputs are fed as given."""
    largest = LIMITS[precision].largest
    held = []
    for feed in feeds:
        fed = dict(feed)
        for name, value in feed.items():
            if name in model_inputs or not np.issubdtype(value.dtype, np.floating):
                continue
            size = np.abs(np.where(np.isfinite(value), value, 0))
            if not (size > largest).any():
                continue
            if ((size > largest) & (size < SENTINEL)).any():
                return None
            fed[name] = np.where(size >= SENTINEL, np.sign(value) * largest, value).astype(
                value.dtype
            )
        held.append(fed)
    return held


def _saturated(
    actual: Mapping[str, np.ndarray],
    expected: Mapping[str, np.ndarray],
    precision: str,
    model_outputs: frozenset[str],
) -> dict[str, np.ndarray]:
    """`actual` with the elements of intermediate tensors (not the model's outputs) that the
    precision gives as its infinity or largest value (a conversion clamps) of the sign of a
    reference value past its range taken as agreeing: that is the value at that precision (a
    mask's -3.4e38 is -65504 or -inf at fp16), and an
    error it causes shows where a finite value after it goes wrong, which a larger candidate
    holds. Without this, the first half of a model with such a mask would always "fail"."""
    largest = LIMITS[precision].largest
    fixed = dict(actual)
    for name, got in actual.items():
        want = expected.get(name)
        if name in model_outputs or want is None or not np.issubdtype(want.dtype, np.floating):
            continue
        got_array = np.asarray(got)
        if got_array.shape != want.shape:
            continue
        past = (np.abs(want) > largest) & (np.abs(got_array) >= largest)
        past &= np.sign(got_array) == np.sign(want)
        if past.any():
            fixed[name] = np.where(past, want, got_array)
    return fixed


def extract(
    model: onnx.ModelProto,
    low: int,
    high: int,
    values: Sequence[Mapping[str, np.ndarray]],
) -> tuple[onnx.ModelProto, list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]] | None:
    """`model`'s (topologically sorted) nodes[low:high] as a model of its own, its feeds and
    expected outputs from `values` (the reference's tensors per feed, the model's inputs
    among them); None when a tensor it needs has no reference value (untyped to shape
    inference) or it makes no tensor used outside it."""
    graph = model.graph
    every = list(graph.node)
    chosen = every[low:high]
    made = {name for node in chosen for name in node.output if name}
    read: list[str] = []
    for node in chosen:
        for name in [*node.input, *_outer_reads(node)]:
            if name and name not in made and name not in read:
                read.append(name)
    later_reads = {name for node in every[high:] for name in [*node.input, *_outer_reads(node)]}
    own_outputs = [vi.name for vi in graph.output]
    outputs = [
        name
        for node in chosen
        for name in node.output
        if name and (name in later_reads or name in own_outputs)
    ]
    if not outputs:
        return None
    initializers = {t.name: t for t in graph.initializer}
    outside = [*every[:low], *every[high:]]
    constants = {node.output[0] for node in outside if node.op_type == "Constant"}
    needed = [*read, *outputs]
    if any(name not in values[0] and name not in initializers for name in needed):
        return None
    inits = []
    fed: list[str] = []
    for name in read:
        if name in initializers:
            inits.append(initializers[name])
        elif name in constants:
            inits.append(numpy_helper.from_array(np.asarray(values[0][name]), name))
        else:
            fed.append(name)
    sub_graph = helper.make_graph(
        [_copy(node) for node in chosen],
        f"{graph.name or 'model'}_reduced",
        [_value_info(name, [v[name] for v in values]) for name in fed],
        [_value_info(name, [v[name] for v in values]) for name in outputs],
        inits,
    )
    sub = helper.make_model(sub_graph, opset_imports=list(model.opset_import))
    sub.ir_version = model.ir_version
    sub.functions.extend(model.functions)
    feeds = [{name: np.asarray(v[name]) for name in fed} for v in values]
    expected = [{name: np.asarray(v[name]) for name in outputs} for v in values]
    return sub, feeds, expected


def _copy(node: onnx.NodeProto) -> onnx.NodeProto:
    copied = onnx.NodeProto()
    copied.CopyFrom(node)
    return copied


def _outer_reads(node: onnx.NodeProto) -> set[str]:
    """The outer-scope tensors an If/Loop/Scan body reads (empty for other nodes)."""
    reads: set[str] = set()
    for attribute in node.attribute:
        bodies = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
        for body in bodies:
            defined = {vi.name for vi in body.input} | {t.name for t in body.initializer}
            for inner in body.node:
                defined.update(inner.output)
            for inner in body.node:
                reads.update(n for n in [*inner.input, *_outer_reads(inner)] if n)
            reads -= defined
    return reads


def _value_info(name: str, arrays: Sequence[Any]) -> onnx.ValueInfoProto:
    """A graph input or output typed from its reference values: a dimension that differs
    between feeds is left symbolic."""
    first = np.asarray(arrays[0])
    elem = helper.np_dtype_to_tensor_dtype(first.dtype)
    shapes = {np.asarray(a).shape for a in arrays}
    if len(shapes) == 1:
        dims: list[Any] = list(first.shape)
    else:
        dims = [
            size if all(np.asarray(a).shape[i] == size for a in arrays) else f"{name}_d{i}"
            for i, size in enumerate(first.shape)
        ]
    return helper.make_tensor_value_info(name, elem, dims)
