"""Per-layer comparison: every tensor both runners expose (built with outputs="all"), in the
reference's topological order, a group at a time whose tensors on both sides fit the memory
budget (layer_budget.py), each group compared as it is fetched and then dropped. The marker
path (`outputs="all"`) and `compare_layers` share it."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..engine import (
    LAYER_DTYPES,
    LAYER_MODES,
    ComparisonResult,
    LayerView,
    OutputComparison,
    ToleranceSpec,
    ToleranceTable,
    compare_outputs,
)
from ..errors import ToleranceWarning
from ..inputs import Feed
from ..runners import Layer, Runner
from .layer_budget import LayerBudget, budget_bytes, plan_groups, size_text


def _is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


def layer_plan(
    target: Runner, reference: Runner, layer_dtypes: str = "float"
) -> tuple[list[str], LayerView]:
    """The tensors to compare, in the reference's order, and what the report says of them:
    producing nodes (from the reference's graph, else the target's), model outputs, how many
    tensors their dtype left out (integers, bools: shape plumbing)."""
    known: dict[str, Layer] = {}
    for runner in (target, reference):  # the reference's names win
        known.update({layer.tensor: layer for layer in runner.layers or ()})
    order = getattr(reference, "layer_order", None) or reference.output_names()
    return _plan(known, order, set(target.output_names()), layer_dtypes, target)


def golden_layer_plan(
    target: Runner, stored: Iterable[str], layer_dtypes: str = "float"
) -> tuple[list[str], LayerView]:
    """`layer_plan` against a golden of every layer: the target's order and graph."""
    known = {layer.tensor: layer for layer in target.layers or ()}
    order = getattr(target, "layer_order", None) or target.output_names()
    return _plan(known, order, set(stored), layer_dtypes, target)


def _plan(
    known: dict[str, Layer],
    order: Sequence[str],
    available: set[str],
    layer_dtypes: str,
    target: Runner,
) -> tuple[list[str], LayerView]:
    names = [name for name in order if name in available]
    kept = [
        name
        for name in names
        if layer_dtypes == "all" or name not in known or _is_float(known[name].dtype)
    ]
    view = LayerView(
        nodes={name: (known[name].node, known[name].op) for name in kept if name in known},
        model_outputs=tuple(name for name in kept if name in known and known[name].model_output),
        left_out=len(names) - len(kept),
        modules={k: v for k, v in getattr(target, "module_of", {}).items() if k in kept},
        unmatched=tuple(getattr(target, "unmatched_layers", ())),
    )
    return kept, view


def compare_layers(
    target: Runner,
    reference: Runner,
    feed: Feed,
    tolerance: ToleranceSpec = None,
    *,
    budget: LayerBudget | int | None = None,
    group: int | None = None,
    layers: str = "gate",
    layer_dtypes: str = "float",
    keep: dict[str, tuple[Any, Any]] | None = None,
    validate: bool = False,
    **tolerance_fields: Any,
) -> ComparisonResult:
    """Compare every tensor both runners expose in topological order; the result's
    `first_divergence` (`first_divergence_node`) names the first one over tolerance.

    `validate=True`: a NaN or Inf in any tensor fails it (compare_outputs'). `layers="report"` lets
    only the model outputs decide `passed`; `layer_dtypes="all"` also compares integer and bool
    tensors. Tensors are fetched in groups whose bytes on both sides stay within `budget`
    (bytes, or a LayerBudget; default: layer_budget.py DEFAULT_FRACTION of the free memory),
    at most `group` tensors each when given, and dropped once compared; `keep`, when given,
    receives the (actual, expected) arrays of the first divergence and of failing model
    outputs (for failure artifacts)."""
    if layers not in LAYER_MODES:
        raise ValueError(f"layers={layers!r}: takes one of {', '.join(LAYER_MODES)}")
    if layer_dtypes not in LAYER_DTYPES:
        raise ValueError(f"layer_dtypes={layer_dtypes!r}: takes one of {', '.join(LAYER_DTYPES)}")
    for runner in (reference, target):  # a torch model learns its layers by running
        discover = getattr(runner, "discover_layers", None)
        if discover is not None:
            discover(feed)
    names, view = layer_plan(target, reference, layer_dtypes)
    # Per-output tolerances are checked against every layer once, not against each group.
    ToleranceTable(tolerance, **tolerance_fields).warn_unknown(
        [*names, *target.output_names(), *reference.output_names()]
    )
    limit = budget if isinstance(budget, int) else budget_bytes(budget, (target, reference))
    chunks, over = plan_groups(names, _sizes(target, reference, feed), limit)
    if group:
        chunks = [chunk[i : i + group] for chunk in chunks for i in range(0, len(chunk), group)]
    outputs: dict[str, OutputComparison] = {}
    first: str | None = None
    for chunk in chunks:
        expected = _subset(reference, feed, chunk)
        actual = _subset(target, feed, chunk)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ToleranceWarning)
            result = compare_outputs(
                actual,
                expected,
                tolerance,
                names=chunk,
                validate=validate,
                **tolerance_fields,
            )
        outputs.update(result.outputs)
        for name, out in result.outputs.items():
            if out.passed or keep is None:
                continue
            if first is None or name in view.model_outputs:
                first = first or name
                if name in actual and name in expected:
                    keep[name] = (actual[name], expected[name])
        del expected, actual
    return ComparisonResult(
        outputs=outputs,
        actual_names=tuple(target.output_names()),
        expected_names=tuple(reference.output_names()),
        restricted_to=tuple(names),
        per_layer=True,
        layers=dataclasses.replace(
            view, mode=layers, over_budget=tuple(over), budget=size_text(limit) if over else ""
        ),
    )


def _sizes(target: Runner, reference: Runner, feed: Feed) -> dict[str, int]:
    """Each tensor's bytes on both sides, where either side knows it before fetching it (the
    other side's count stands for a side that does not)."""
    shapes = {}
    for name, value in feed.items():
        try:
            shapes[name] = np.shape(value)
        except ValueError:  # a ragged sequence: its layers' sizes stay unknown
            continue
    theirs, ours = reference.layer_bytes(shapes), target.layer_bytes(shapes)
    both = {}
    for name in {*theirs, *ours}:
        one = ours.get(name) or theirs[name]
        both[name] = one + (theirs.get(name) or one)
    return both


def _subset(runner: Runner, feed: Feed, names: Sequence[str]) -> dict[str, np.ndarray]:
    with runner.select_outputs(names):
        outputs = runner.infer(feed)
    return {name: outputs[name] for name in names if name in outputs}
