"""The result of a comparison and the error that carries it."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .layer_report import format_layers
from .layers import LayerView
from .outputs import OutputComparison
from .report import format_result


class Outputs(dict[str, OutputComparison]):
    """The per-output results by name. An unknown name's KeyError says which names there
    are (the closest first), not the name alone."""

    def __missing__(self, name: str) -> OutputComparison:
        __tracebackhide__ = True  # the user's line shows, not this one
        names = list(self)
        close = difflib.get_close_matches(str(name), [str(n) for n in names], n=3)
        hint = f"did you mean {', '.join(map(repr, close))}? " if close else ""
        shown = ", ".join(map(repr, names[:8])) + (
            f", ... ({len(names)} in all)" if len(names) > 8 else ""
        )
        raise KeyError(f"{name!r}: no output of that name; {hint}the outputs are {shown or 'none'}")


@dataclass(frozen=True)
class ComparisonResult:
    """Per-output results plus the names that only one side had."""

    outputs: Mapping[str, OutputComparison]
    missing_in_actual: tuple[str, ...] = ()
    missing_in_expected: tuple[str, ...] = ()
    actual_names: tuple[str, ...] = ()
    expected_names: tuple[str, ...] = ()
    restricted_to: tuple[str, ...] | None = field(default=None)
    per_layer: bool = False  # outputs are a model's intermediate tensors in topological order
    layers: LayerView | None = None  # per-layer: producing nodes, model outputs, gate mode

    def __post_init__(self) -> None:
        if type(self.outputs) is not Outputs:
            object.__setattr__(self, "outputs", Outputs(self.outputs))

    @property
    def first_divergence(self) -> str | None:
        """The first output over tolerance, in comparison order (topological for per-layer)."""
        return next((out.name for out in self.outputs.values() if not out.passed), None)

    @property
    def first_divergence_node(self) -> str | None:
        """The first divergence as '/encoder/layer.3/attn/Softmax (Softmax)' (per-layer)."""
        first = self.first_divergence
        if first is None or self.layers is None:
            return first
        return self.layers.label(first)

    @property
    def passed(self) -> bool:
        """Every output within tolerance; per-layer with layers='report', the model outputs."""
        if self.missing_in_actual or self.missing_in_expected:
            return False
        names = list(self.outputs)
        if self.layers is not None:
            names = self.layers.gating(names)
        return all(self.outputs[name].passed for name in names)

    def __bool__(self) -> bool:
        return self.passed

    @property
    def failed_outputs(self) -> list[OutputComparison]:
        return [out for out in self.outputs.values() if not out.passed]

    @property
    def margin(self) -> float:
        """The largest margin over outputs (inf when names are missing)."""
        if self.missing_in_actual or self.missing_in_expected:
            return math.inf
        return max((out.margin for out in self.outputs.values()), default=0.0)

    def report(self, verbosity: int = 0) -> str:
        """The failure report (pass lines only for passing outputs); -v adds rows."""
        if self.layers is not None:
            return format_layers(self, verbosity)
        return format_result(self, verbosity)

    def __str__(self) -> str:
        return self.report()


class OutputMismatchError(AssertionError):
    """Raised by `assert_outputs_close`; `.result` holds the full ComparisonResult and
    `.arrays` the (actual, expected) outputs when known (for failure artifacts)."""

    def __init__(
        self, message: str, result: ComparisonResult, arrays: tuple[Any, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.result = result
        self.arrays = arrays
        self.settled = False  # set once the pytest plugin has recorded and reported it


OutputMismatchError.__module__ = "pytest_trtcompare"  # its public home, shown by pytest
