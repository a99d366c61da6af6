"""The report of a per-layer comparison: the first divergence by node, in full; the failing
layers and a few around the first divergence in one line each; the rest counted."""

from __future__ import annotations

from typing import Protocol

from .layers import LayerView, Listing, listed
from .outputs import OutputComparison
from .report import ResultView, _dtypes, format_failure, margin_text, maxima


class LayerResultView(ResultView, Protocol):
    @property
    def layers(self) -> LayerView | None: ...
    @property
    def passed(self) -> bool: ...


def format_layers(result: LayerResultView, verbosity: int = 0) -> str:
    view = result.layers or LayerView()
    names = list(result.outputs)
    listing = listed(result, verbosity)
    lines = [_headline(result, view, names)]
    first = result.first_divergence
    if first is not None:
        lines.append(
            f"first divergence (topological order): {view.label(first)}, "
            f"layer {names.index(first) + 1} of {len(names)}"
        )
    for name in listing.detailed:
        out = result.outputs[name]
        detail = format_failure(out, verbosity)
        if detail[0].startswith(name):
            detail[0] = view.label(name) + detail[0][len(name) :]
        lines += ["", *detail]
    lines += ["", *_listing_lines(result, view, listing)]
    return "\n".join(lines)


def _headline(result: LayerResultView, view: LayerView, names: list[str]) -> str:
    failing = [name for name in names if not result.outputs[name].passed]
    left_out = (
        f" ({view.left_out} integer/bool tensors not compared; layer_dtypes='all' compares them)"
        if view.left_out
        else ""
    )
    if not failing:
        return f"all {len(names)} layers within tolerance{left_out}"
    text = f"{len(failing)} of {len(names)} layers out of tolerance{left_out}"
    finals = [name for name in view.model_outputs if name in result.outputs]
    bad = [name for name in finals if not result.outputs[name].passed]
    if bad:
        text += f"; model outputs out of tolerance: {', '.join(bad)}"
    elif finals:
        text += "; the model outputs pass"
        if view.mode == "report":
            text += " (layers='report': only they decide the verdict)"
    return text


def _listing_lines(result: LayerResultView, view: LayerView, listing: Listing) -> list[str]:
    first = result.first_divergence
    lines = ["layers (topological order):"]
    for name in listing.names:
        line = f"  {_brief(result.outputs[name], view.label(name))}"
        if name == first:
            line += "  <- first divergence"
        elif name in view.model_outputs:
            line += "  (model output)"
        lines.append(line)
    if listing.not_shown:
        lines.append(
            f"  ... {listing.not_shown} more passing layers not listed (-vv lists every layer)"
        )
    if view.unmatched:
        lines.append(unmatched_line(view.unmatched))
    if view.over_budget:
        lines.append(budget_line(view))
    return lines


def budget_line(view: LayerView) -> str:
    """The tensors larger than the per-layer memory budget: each was fetched alone."""
    shown = ", ".join(view.label(name) for name in view.over_budget[:5])
    more = f" (+{len(view.over_budget) - 5} more)" if len(view.over_budget) > 5 else ""
    return (
        f"note: {len(view.over_budget)} tensor(s) larger than the layer budget of {view.budget} "
        f"on both sides together, each fetched and compared alone: {shown}{more} "
        "(--trt-layer-budget)"
    )


def unmatched_line(names: tuple[str, ...], shown: int = 8) -> str:
    """'torch module outputs with no ONNX counterpart (not compared): conv1, ... (+12 more)'."""
    listed_names = ", ".join(names[:shown])
    more = f" (+{len(names) - shown} more)" if len(names) > shown else ""
    return f"torch module outputs with no ONNX counterpart (not compared): {listed_names}{more}"


def _brief(out: OutputComparison, label: str) -> str:
    figures = maxima(out)
    margin = margin_text(out.margin)
    if out.passed:
        return f"passed: {label} ({_dtypes(out)}): {figures}, margin {margin}"
    if out.problem is not None:
        return f"FAILED: {label}: {out.problem}"
    share = f"{out.mismatches} / {out.count} element{'' if out.count == 1 else 's'}"
    if out.failure is not None:
        return f"FAILED: {label} ({_dtypes(out)}): {share}, {out.failure}"
    return f"FAILED: {label} ({_dtypes(out)}): {share}, {figures}, margin {margin}"
