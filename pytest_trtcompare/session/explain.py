"""What a failing fp16 / bf16 compare_frameworks item is told beyond its comparison.

The range scan's probable causes (always, where the target converts the ONNX model); with
--trt-debug-precision, the nodes to keep in fp32 (session/precision_debug.py); with
--trt-reduce (or the marker's reduce=True), the smallest subgraph that still fails
(session/reduce.py), its model and inputs written beside the item's artifacts by the plugin.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import runners
from ..engine import outputs_checked_by
from ..errors import TrtCompareError
from ..inputs import Feed
from ..vocabulary import FP64
from .expand import Case
from .option_table import resolve
from .outcome import Kind, Outcome
from .spec import CompareSpec

#: what a search that varies the ONNX model cannot judge: the fp64 check
_FP64_REASON = (
    "its search compares each candidate model under an elementwise or statistic tolerance, "
    "and this test's is the fp64 check"
)


@dataclasses.dataclass(frozen=True)
class Searches:
    """What the session asks of a failing item: --trt-debug-precision, the option values
    (--trt-reduce among them), and the item's tolerance as its comparison had it."""

    debug_precision: bool
    option_values: Mapping[str, tuple[Any, Any]]
    tolerance: Any


def explained(
    asked: Searches,
    spec: CompareSpec,
    case: Case,
    outcome: Outcome,
    feeds: Sequence[Feed],
    scanned: Sequence[Feed],
) -> Outcome:
    """A failing fp16 / bf16 outcome with its notes: the probable causes (of `scanned`, the
    first failing feed) or, with --trt-debug-precision, the nodes to keep in fp32 (on every
    feed); with --trt-reduce, the reduced graph (on every feed) after them."""
    if outcome.kind is not Kind.MISMATCH:
        return outcome
    wanted = resolve("reduce", spec.given.get("reduce"), asked.option_values)
    if case.precision == "fp32" and not wanted:
        return outcome
    notes = [] if case.precision == "fp32" else [_fp32_nodes(asked, spec, case, feeds, scanned)]
    reduced = None
    if wanted and case.precision not in runners.LOW_DTYPES:
        notes.append(
            f"--trt-reduce: not run; the item runs at {case.precision}, and a reduction "
            "converts the model to fp16 or bf16"
        )
    elif wanted:
        note, reduced = _reduced(asked.tolerance, spec, case, feeds)
        notes.append(note)
    note = "\n\n".join(text for text in notes if text)
    return dataclasses.replace(outcome, note=note, reduced=reduced)


def _fp32_nodes(
    asked: Searches,
    spec: CompareSpec,
    case: Case,
    feeds: Sequence[Feed],
    scanned: Sequence[Feed],
) -> str:
    if not asked.debug_precision:
        if not_converted(spec, case) is not None:
            return ""
        from .precision_debug import explain_range

        return explain_range(spec.model_for(case.target), case.precision, scanned)
    why_not = not_converted(spec, case)
    if why_not is None and outputs_checked_by(asked.tolerance, FP64):
        why_not = _FP64_REASON
    if why_not is not None:
        return f"--trt-debug-precision: not run; {why_not}"
    from .precision_debug import explain_failure

    return explain_failure(
        spec.model_for(case.target),
        case.precision,
        case.target,
        tolerance=asked.tolerance,
        shapes=case.shapes,
        inputs=list(feeds),
        **spec.options.get(case.target, {}),
    )


def _reduced(
    tolerance: Any, spec: CompareSpec, case: Case, feeds: Sequence[Feed]
) -> tuple[str, Any]:
    """The reduce note and the ReduceResult (None when it did not run or nothing failed).
    A target that runs its own model beside the ONNX export (a torch twin) has the ONNX
    model reduced on onnxref at the case's precision instead."""
    if outputs_checked_by(tolerance, FP64):
        return f"--trt-reduce: not run; {_FP64_REASON}", None
    runner, model, options = case.target, spec.model_for(case.target), spec.options
    instead = ""
    if not_converted(spec, case) is not None:
        if spec.model is None or not is_onnx(spec.model):
            return f"--trt-reduce: not run; {not_converted(spec, case)}, and no ONNX model", None
        runner, model = runners.DEBUG_PRECISION_RUNNER, spec.model
        instead = (
            f"{case.target} runs its own model: its ONNX model is reduced on {runner} "
            f"{case.precision} instead\n"
        )
    from .reduce import reduce_model

    try:
        result = reduce_model(
            model,
            case.precision,
            runner,
            tolerance,
            shapes=case.shapes,
            inputs=list(feeds),
            runner_options=options.get(runner, {}),
        )
    except TrtCompareError as exc:
        return f"--trt-reduce could not run: {exc}", None
    if result.passed:
        return (
            f"{instead}{result.describe()}: at {case.precision} the model agrees with "
            f"{runner}'s own fp32 run; the failure is against the reference, not its conversion",
            None,
        )
    return instead + result.describe(), result


def unreduced(
    option_values: Mapping[str, tuple[Any, Any]],
    spec: CompareSpec,
    case: Case,
    outcome: Outcome,
    against: str,
) -> Outcome:
    """A failing fp16 / bf16 item compared `against` stored outputs (a golden, saved outputs)
    with --trt-reduce asked: the note that says why it was not reduced, and how to."""
    asked = resolve("reduce", spec.given.get("reduce"), option_values)
    if not asked or outcome.kind is not Kind.MISMATCH or case.precision == "fp32":
        return outcome
    note = (
        f"--trt-reduce: not run; this item compares with {against}, and a reduction judges "
        "each subgraph against the target's own fp32 run: reduce the model from the shell "
        f"({shell_command(spec, case)})"
    )
    return dataclasses.replace(outcome, note="\n\n".join(t for t in (outcome.note, note) if t))


def shell_command(spec: CompareSpec, case: Case) -> str:
    """`trtcompare reduce MODEL --precision fp16 --runner onnxref --shapes x:1x16`: the
    item's model (MODEL where it is no file), precision, converting runner and shapes."""
    converted = not_converted(spec, case) is None
    model = spec.model_for(case.target) if converted else spec.model  # a twin's ONNX model
    path = str(model) if isinstance(model, (str, os.PathLike)) else "MODEL"
    runner = case.target if converted else runners.DEBUG_PRECISION_RUNNER
    words = ["trtcompare", "reduce", path, "--precision", case.precision, "--runner", runner]
    if case.shapes:
        shapes = ",".join(f"{k}:{'x'.join(map(str, v))}" for k, v in case.shapes.items())
        words += ["--shapes", shapes]
    return shlex.join(words)


def not_converted(spec: CompareSpec, case: Case) -> str | None:
    """Why the target does not run the marker's ONNX model converted to the case's
    precision (then neither the range scan nor the searches say anything of it)."""
    if runners.framework_of(case.target) in spec.models:
        return f"{case.target} runs its own model (models=), not the ONNX model it converts"
    if case.precision not in runners.capabilities(case.target).converted:
        return (
            f"{case.target} runs {case.precision} by its own means, not on an ONNX model "
            "converted to it, which the search varies"
        )
    return None


def is_onnx(model: Any) -> bool:
    """A path, bytes or ModelProto: an ONNX model, which a twin's golden is fed as (an
    OpenVINO IR .xml file is none: no float64 conversion of it is made)."""
    if isinstance(model, (str, os.PathLike)):
        return Path(model).suffix.lower() != ".xml"
    return isinstance(model, (bytes, bytearray)) or type(model).__name__ == "ModelProto"
