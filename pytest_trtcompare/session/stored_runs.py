"""A case's target against stored outputs rather than a reference runner: its golden
(`golden=True`) or saved outputs (`reference='outputs.json'`, Polygraphy's --load-outputs).
`cases`, a session/cases.py `CaseRunner`, gives the runners, feeds and tolerances."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..engine import ComparisonResult, compare_outputs
from ..errors import InputDataError, user_code_raised
from ..goldens import GoldenError, GoldenMeta, load_reference
from ..inputs import val_range_record
from ..runners import median_ms
from .expand import Case
from .explain import unreduced
from .golden_check import GoldenAccess, check_golden, inputs_problem
from .layer_runs import golden_layer_plan
from .layout import counted
from .outcome import Outcome, compared
from .runs import numbered
from .spec import CompareSpec


def run_saved(cases: Any, spec: CompareSpec, case: Case, path: Path) -> Outcome:
    """reference='outputs.json' (or a golden, .npz, test data): Polygraphy's
    --load-outputs. Every iteration saved is compared, each on the inputs saved with it,
    else on the feed of `inputs=` of the same iteration."""
    try:
        saved = cases.saved.get(path) or load_reference(path)
    except GoldenError as exc:  # missing, unreadable: named as the marker's argument
        raise InputDataError(f"{cases.said('reference', _as_given(path))}: {exc}") from None
    cases.saved[path] = saved
    built = cases.runner(spec, case.target, case.precision, case)
    refused = cases.fallback_refused(spec, case, built)
    if refused is not None:
        return refused  # type: ignore[no-any-return]
    target = cases.as_export(spec, case, built)
    iterations = saved.iterations
    if saved.inputs:
        feeds = [iteration.inputs for iteration in iterations]
    elif spec.inputs is not None:
        feeds = cases.feeds(spec, target, case)
        if len(feeds) != len(iterations):
            raise InputDataError(
                f"{cases.said('reference', _as_given(path))} holds "
                f"{counted(len(iterations), 'iteration')} "
                f"of outputs, inputs={shown(spec.inputs)} {counted(len(feeds), 'feed')}: "
                "give the inputs the outputs were made from (polygraphy run --save-inputs "
                "with the same --iterations)"
            )
    else:
        raise InputDataError(
            f"{cases.said('reference', _as_given(path))} holds no inputs: give the inputs its "
            f"outputs were made from, e.g. {cases.said('inputs', 'inputs.json')} (polygraphy run "
            "--save-inputs)"
        )
    problem = inputs_problem(None, feeds, case.shapes, iterations=len(feeds))
    if problem is not None:  # the inputs the outputs were made from decide the shapes
        raise InputDataError(
            f"{cases.said('reference', _as_given(path))}: {problem.replace('stored', 'saved')}"
        )
    own = {layer.tensor for layer in getattr(target, "layers", None) or [] if layer.model_output}
    if spec.outputs == "all" and own and set(iterations[0].outputs) <= own:
        raise InputDataError(
            f"{cases.said('reference', _as_given(path))} holds the model's outputs only "
            f"({', '.join(iterations[0].outputs)}); outputs='all' compares every layer: save "
            "every tensor (polygraphy run --onnx-outputs mark all --save-outputs)"
        )
    mark = len(target.inference_times)
    results, kept, closest = [], None, None
    for index, (feed, iteration) in enumerate(zip(feeds, iterations, strict=True)):
        got = numbered(target.infer, feed, index, len(feeds))
        tolerance = cases.tolerance(spec, case)
        result = _stored_result(cases, spec, target, got, iteration.outputs, tolerance)
        if reported_before(result, closest):
            kept, closest = (got, iteration.outputs), result
        results.append(result)
    outcome = compared(
        results,
        source="compare_frameworks",
        target=timed(target.describe(), median_ms(target.inference_times[mark:])),
        reference={"runner": f"saved {path.name}"},
        arrays=kept,
    )
    return unreduced(cases.option_values, spec, case, outcome, f"saved outputs ({path.name})")


def run_golden(
    cases: Any, spec: CompareSpec, case: Case, path: Path, goldens: GoldenAccess
) -> Outcome:
    """golden=True: the target against the stored golden, or (updating) write it."""
    __tracebackhide__ = user_code_raised
    # first the runner: what cannot run here skips, whether or not its golden exists
    built = cases.runner(spec, case.target, case.precision, case)
    refused = cases.fallback_refused(spec, case, built)
    if refused is not None:
        return refused  # type: ignore[no-any-return]
    target = cases.as_export(spec, case, built)
    mark = len(target.inference_times)
    outcome = check_golden(
        goldens,
        path,
        target.infer,  # on the golden's stored inputs, else on the case's feeds
        cases.tolerance(spec, case),
        inputs=lambda: cases.feeds(spec, target, case),  # one per iteration, each stored
        fits=lambda stored: inputs_problem(
            target.input_specs() if target.checks_feed else None,
            stored,
            case.shapes,
            # iterations=N, else as many as the saved inputs= hold
            iterations=len(cases.feeds(spec, target, case)) if spec.inputs else spec.iterations,
        ),
        meta=GoldenMeta(
            name=None,  # compare_frameworks(golden=True) keeps the test's one golden
            precision=case.precision,
            seed=spec.seed,
            shapes={k: list(v) for k, v in (case.shapes or {}).items()},
            val_range=val_range_record(spec.val_range),
        ),
        target=target,
        compare=lambda got, want, tolerance: _stored_result(
            cases, spec, target, got, want, tolerance
        ),
    )
    outcome = unreduced(cases.option_values, spec, case, outcome, "its golden")
    milliseconds = median_ms(target.inference_times[mark:])
    if not outcome.target or milliseconds is None:
        return outcome
    return dataclasses.replace(outcome, target=timed(dict(outcome.target), milliseconds))


def _stored_result(
    cases: Any, spec: CompareSpec, target: Any, outputs: Any, stored: Any, tolerance: Any
) -> ComparisonResult:
    """The target against its golden (or saved outputs); per layer (outputs="all") as
    compare_layers reports: the target's order, float tensors, the first divergence, over
    the tensors the golden holds."""
    if spec.outputs != "all":
        compare: Callable[..., ComparisonResult] = cases.compare(spec)
        return compare(outputs, stored, tolerance)
    names, view = golden_layer_plan(target, stored, spec.layer_dtypes or "float")
    result = compare_outputs(outputs, stored, tolerance, names=names)
    view = dataclasses.replace(view, mode=cases.layers_mode(spec))
    return dataclasses.replace(result, per_layer=True, layers=view)


def timed(description: dict[str, Any], milliseconds: float | None) -> dict[str, Any]:
    """A runner's describe() with the median of its inference times in a test (ms)."""
    if milliseconds is None:
        return description
    return {**description, "inference_ms": milliseconds}


def reported_before(result: ComparisonResult, other: ComparisonResult | None) -> bool:
    """Whether Outcome.worst names `result` rather than the earlier iteration `other`: the
    first failing one, else the one closest to failing."""
    if other is None:
        return True
    return other.passed and (not result.passed or result.margin > other.margin)


def shown(inputs: Any) -> str:
    """The marker's inputs= as a message shows it: a path's name, else the kind given."""
    if isinstance(inputs, (str, os.PathLike)):
        return repr(Path(inputs).name)
    return f"({type(inputs).__name__})"


def _as_given(path: Path) -> str:
    """A saved reference as the user wrote it, near enough: relative to the working folder
    where it lies under it ('saved/outputs.json'), else the whole path."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
