"""Precision debugging: which nodes must stay in fp32 for a reduced-precision model to pass.

`find_fp32_nodes` runs the model at fp32 once (the reference) and then candidate mixed models
(the target precision with some nodes kept in fp32, see `runners.precision.convert_mixed`)
on the same runner, as `polygraphy debug precision` does:

1. all nodes at the target precision; if that passes, nothing needs fp32;
   then, when the range scan (session/range_scan.py, one more fp32 run with every tensor
   exposed) names nodes whose values leave the precision's range or lose an addition's
   meaning: those nodes (and the readers of a tensor past the range) in fp32, then those
   and their neighbours; the first set that passes is shrunk as in 4 and is the answer;
   else the search goes on:
2. bisection for the shortest prefix of the topologically ordered nodes that passes in fp32;
3. bisection for the shortest suffix of that prefix that still passes (a window);
4. shrinking: interior nodes of the window are dropped by halves, then one at a time,
   whenever the comparison still passes without them.

The search assumes that keeping more nodes in fp32 never makes things worse. Steps 2 and 3
take about log2(N) runs each, so a small planted set among N nodes costs O(log N) runs. The
window's two ends are needed (a set without either is a subset of one that failed), and the
returned set is one whose comparison passed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from .. import runners
from ..engine import Tolerance, compare_outputs
from ..errors import TrtCompareError
from ..inputs import DEFAULT_SEED
from ..runners import (
    DEBUG_PRECISION_RUNNER,
    LoadedModel,
    convert_mixed,
    load_model,
    mixed_precision_of,
    name_unnamed_nodes,
    topological_sort,
)
from .layout import counted
from .range_scan import RangeScan, first_trial, neighbours, scan_ranges
from .runs import make_feeds

Feed = Mapping[str, Any]
_LOG = logging.getLogger(__name__)
_FLOAT = onnx.TensorProto.FLOAT
_NOT_CANDIDATES = {"Constant", "Cast"}  # no arithmetic of their own to keep in fp32


@dataclass(frozen=True)
class PrecisionDebugResult:
    """The search's answer: nodes to keep in fp32, whether that model passed, the cost."""

    keep_fp32: tuple[str, ...]  # in topological order
    passed: bool
    runs: int  # candidate models built and compared (the fp32 reference run not counted)
    model: onnx.ModelProto = field(compare=False, repr=False)  # the mixed-precision model
    precision: str = "fp16"
    runner: str = DEBUG_PRECISION_RUNNER
    node_count: int = 0  # candidates searched: nodes with a float32 output
    op_types: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    #: the range scan the search started from (None: not asked for, or it could not run)
    scan: RangeScan | None = field(default=None, compare=False, repr=False)

    @property
    def probable_causes(self) -> tuple[str, ...]:
        """The range scan's lines: 'probable cause: mm (MatMul) reaches 1.3e+05, past ...'."""
        return tuple(self.scan.lines()) if self.scan is not None else ()

    def describe(self) -> str:
        """The probable causes, then 'precision debugging (...): keep these 2 nodes in fp32:
        add (Add), sub (Sub) (13 runs; the mixed model passes)'; a model that passes as it is
        has no probable cause to show."""
        causes = self.probable_causes if self.keep_fp32 or not self.passed else ()
        return "\n".join([*causes, self._search_line()])

    def _search_line(self) -> str:
        where = f"{self.runner} {self.precision}, {counted(self.node_count, 'candidate node')}"
        if not self.passed:
            return (
                f"precision debugging ({where}): no set of fp32 nodes passes, not even all "
                f"of them ({counted(self.runs, 'run')}); the runner or the tolerance is the problem"
            )
        if not self.keep_fp32:
            return f"precision debugging ({where}): the model passes with no node in fp32"
        names = ", ".join(f"{name} ({self.op_types.get(name, '?')})" for name in self.keep_fp32)
        count = len(self.keep_fp32)
        these = "this 1 node" if count == 1 else f"these {count} nodes"
        return (
            f"precision debugging ({where}): keep {these} in fp32: {names} "
            f"({counted(self.runs, 'run')}; the mixed model passes)"
        )

    def to_json(self) -> dict[str, Any]:
        """keep_fp32, passed, runs; with a range scan, its findings ("probable_causes") and
        its fp32 runs ("scan_runs")."""
        report: dict[str, Any] = {
            "keep_fp32": list(self.keep_fp32),
            "passed": self.passed,
            "runs": self.runs,
        }
        if self.scan is not None:
            report["probable_causes"] = self.scan.to_json()
            report["scan_runs"] = self.scan.runs
        return report


def find_fp32_nodes(
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
    range_scan: bool = True,
) -> PrecisionDebugResult:
    """Find a small set of nodes that must stay in fp32 for `model` at `precision` ('fp16' or
    'bf16') on `runner` to pass `tolerance` against the same runner at fp32.

    `tolerance`: a Tolerance (or anything `compare_outputs` takes), or a sequence of them that
    must all pass; default: the precision's built-in tolerance. `inputs`: one feed, a list of
    feeds (all must pass) or a file as the marker's `inputs=` takes it; default: `iterations`
    seeded synthetic draws from `seed`, `shapes` for dynamic dims.
    Unnamed nodes are named `<op_type>_<index>` (the names in the result and the model).
    `range_scan`: start from the nodes the range scan names (`scan_ranges`: one fp32 run per
    SCAN_GROUP tensors; `runs` does not count it); False: the bisection alone.
    """
    if precision not in ("fp16", "bf16"):
        raise TrtCompareError(
            f"precision debugging takes precision fp16 or bf16, not {precision!r}"
        )
    loaded = named_sorted(load_model(model))
    options = dict(runner_options or {})
    tolerances = tolerance_list(tolerance, precision)
    with runners.create(runner, loaded.proto, "fp32", **options) as reference:
        feeds = make_feeds(
            reference, inputs=inputs, seed=seed, shapes=shapes, iterations=iterations
        )
        expected = [reference.infer(feed) for feed in feeds]
    order, op_types = _candidates(loaded.proto)
    verdicts: dict[frozenset[str], bool] = {}

    def passes(keep: Sequence[str]) -> bool:
        key = frozenset(keep)
        if key not in verdicts:
            mixed = convert_mixed(loaded, precision, _ordered(key, order))
            with runners.create(runner, mixed, precision, **options) as candidate:
                verdicts[key] = all(
                    _passes(candidate.infer(feed), want, tolerances)
                    for feed, want in zip(feeds, expected, strict=True)
                )
            if log is not None:
                verdict = "pass" if verdicts[key] else "fail"
                log(f"run {len(verdicts)}: {len(key)} node(s) in fp32: {verdict}")
        return verdicts[key]

    scan = _scan(loaded.proto, precision, feeds) if range_scan else None
    first = first_trial(loaded.proto, scan) if scan is not None else []
    named = [name for name in first if name in set(order)]
    keep, passed = _search(order, passes, named, neighbours(loaded.proto, named))
    final = _ordered(frozenset(keep), order)
    return PrecisionDebugResult(
        keep_fp32=final,
        passed=passed,
        runs=len(verdicts),
        model=convert_mixed(loaded, precision, final),
        precision=precision,
        runner=runner,
        node_count=len(order),
        op_types={name: op_types[name] for name in final},
        scan=scan,
    )


def _scan(model: onnx.ModelProto, precision: str, feeds: list[dict[str, Any]]) -> RangeScan | None:
    """The range scan, or None where it cannot run (the search then goes without it)."""
    try:
        return scan_ranges(model, precision, feeds)
    except TrtCompareError:
        return None


def _search(
    order: list[str],
    passes: Callable[[Sequence[str]], bool],
    named: Sequence[str] = (),
    around: Sequence[str] = (),
) -> tuple[list[str], bool]:
    if passes([]):
        return [], True
    candidates = set(order)
    if named:  # the range scan's nodes, then those and their neighbours
        extra = [name for name in around if name in candidates]
        for trial in (list(named), [*named, *extra]):
            if passes(trial):
                keep = _shrink(trial, [name for name in trial if name not in named], passes)
                return _shrink(keep, list(named), passes), True
    low, high = 0, len(order)  # order[:low] fails; the shortest passing prefix is <= high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if passes(order[:middle]) else (middle, high)
    if not passes(order[:high]):
        return list(order), False
    end = high
    low, high = 0, end  # order[low:end] passes, order[high:end] fails
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if passes(order[middle:end]) else (low, middle)
    window = order[low:end]
    keep = list(window)
    interior = window[1:-1]
    return _shrink(keep, interior, passes), True


def _shrink(
    keep: list[str], chunk: list[str], passes: Callable[[Sequence[str]], bool]
) -> list[str]:
    """Drop `chunk` from `keep` when the rest passes; else try its halves, down to one node."""
    if not chunk:
        return keep
    dropped = set(chunk)
    without = [name for name in keep if name not in dropped]
    if passes(without):
        return without
    if len(chunk) == 1:
        return keep
    half = len(chunk) // 2
    keep = _shrink(keep, chunk[:half], passes)
    return _shrink(keep, chunk[half:], passes)


def _passes(actual: Mapping[str, np.ndarray], expected: Any, tolerances: list[Any]) -> bool:
    return all(compare_outputs(actual, expected, tol).passed for tol in tolerances)


def tolerance_list(tolerance: Any, precision: str) -> list[Any]:
    """One tolerance, a list that must all pass, or None: the precision's default."""
    if tolerance is None:
        return [Tolerance.for_precision(precision)]
    if isinstance(tolerance, (list, tuple)):
        if not tolerance:
            raise TrtCompareError("precision debugging: an empty list of tolerances")
        return list(tolerance)
    return [tolerance]


def _ordered(keep: frozenset[str], order: list[str]) -> tuple[str, ...]:
    return tuple(name for name in order if name in keep)


def named_sorted(loaded: LoadedModel) -> LoadedModel:
    """The model topologically sorted, every node named (the block list goes by name); a
    mixed-precision model (one `find_fp32_nodes` wrote) is refused: the searches convert an
    fp32 model, and its fp32 run is their reference."""
    mixed = mixed_precision_of(loaded.proto)
    if mixed is not None:
        raise TrtCompareError(
            f"model {loaded.source} is a mixed-precision model ({mixed[0]}, "
            f"{counted(mixed[1], 'node')} kept in fp32, written by debug-precision): reduce "
            "and debug-precision take the fp32 model it was made from"
        )
    proto = onnx.ModelProto()
    proto.CopyFrom(loaded.proto)
    topological_sort(proto.graph)
    taken = {node.name for node in proto.graph.node if node.name}
    duplicates = len(taken) != sum(1 for node in proto.graph.node if node.name)
    if duplicates:
        raise TrtCompareError(
            f"model {loaded.source}: node names are not unique; precision debugging keeps "
            "nodes in fp32 by name"
        )
    name_unnamed_nodes(proto.graph.node)
    return LoadedModel(proto, loaded.source, loaded.digest + ":named", loaded.path)


def _candidates(model: onnx.ModelProto) -> tuple[list[str], dict[str, str]]:
    """Nodes with a float32 output, in graph order (float tensors per shape inference)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # shape inference is best effort: every node is then a candidate
        inferred = model
    graph = inferred.graph
    types = {
        vi.name: vi.type.tensor_type.elem_type
        for vi in [*graph.value_info, *graph.output, *graph.input]
    }
    order, op_types = [], {}
    for node in model.graph.node:
        op_types[node.name] = node.op_type
        if node.op_type in _NOT_CANDIDATES:
            continue
        if any(types.get(name, _FLOAT) == _FLOAT for name in node.output if name):
            order.append(node.name)
    return order, op_types


def explain_failure(
    model: Any,
    precision: str,
    runner: str,
    tolerance: Any = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    inputs: Feed | Sequence[Feed] | None = None,
    **runner_options: Any,
) -> str:
    """The text block for a failing reduced-precision comparison's report: which nodes to keep
    in fp32 (or why the search could not run). Never raises a TrtCompareError."""
    try:
        result = find_fp32_nodes(
            model, precision, runner, tolerance, shapes, inputs, runner_options=runner_options
        )
    except TrtCompareError as exc:
        return f"precision debugging could not run: {exc}"
    return result.describe()


def explain_range(
    model: Any,
    precision: str,
    feeds: Sequence[Feed],
) -> str:
    """The probable causes of a failing fp16 / bf16 comparison, one line each, from the range
    scan of `model` at fp32 on `feeds` ('' when it names nothing or cannot run: the report
    stays as it is, the reason logged at debug level). Never raises."""
    try:
        scan = scan_ranges(
            named_sorted(load_model(model)).proto, precision, [dict(f) for f in feeds]
        )
    except Exception:  # an extra of a report that failed already: it must not change it
        _LOG.debug("range scan of %s could not run", model, exc_info=True)
        return ""
    return "\n".join(scan.lines())
