"""The fp64 check: an output's error against a float64 run, bounded by the reference's.

`Tolerance(check="fp64", threshold=M, atol=F)` passes when the RMSE of `actual` against the
float64 run of the reference (the anchor) is at most M times the RMSE that the reference
framework makes at the same precision against that anchor, plus F:

    rmse(actual, anchor) <= M * rmse(reference at the precision, anchor) + F

This is the rule of `torch._dynamo.utils.same(..., fp64_ref=...)` (M = 2 by default; there
the floor is tol / 10, here it is `atol`, 1e-5 by default). "TensorRT fp16 is at most twice
as wrong as PyTorch fp16" needs no atol to guess. compare_frameworks makes both extra runs
(session/cases.py); the engine only compares.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidOutputError, ToleranceError
from .arrays import host_array
from .chunks import dot
from .metrics import MetricResult, format_pair
from .tolerance import Tolerance
from .tuning import TUNING


@dataclass(frozen=True)
class Anchor:
    """The two extra runs of the fp64 check, output name -> array: the reference framework at
    float64 (`float64`) and at the case's precision (`reduced`), and who made them."""

    float64: Mapping[str, np.ndarray]
    reduced: Mapping[str, np.ndarray]
    reference: str  # 'onnxrt fp16': the framework and precision of `reduced`

    def arrays(self, name: str, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        found = []
        for side, outputs in (("float64", self.float64), (self.reference, self.reduced)):
            if name not in outputs:
                raise InvalidOutputError(
                    f"fp64 check: output {name!r} is missing from the {side} run "
                    f"(it has {', '.join(map(repr, outputs)) or 'no outputs'})"
                )
            array = host_array(outputs[name])
            if array.size != math.prod(shape):
                raise InvalidOutputError(
                    f"fp64 check: output {name!r} has shape {tuple(array.shape)} in the "
                    f"{side} run, {shape} in the compared ones"
                )
            found.append(array.reshape(shape))
        return found[0], found[1]


@dataclass(frozen=True)
class AnchoredResult(MetricResult):
    """The fp64 check of one output: `value` is its RMSE against float64, `threshold` the
    multiplier; `reference_error` the reference's RMSE at the precision, `floor` the atol."""

    reference_error: float = 0.0
    floor: float = 0.0
    reference: str = ""

    @property
    def allowed(self) -> float:
        return self.threshold * self.reference_error + self.floor

    @property
    def ratio(self) -> float:
        """The output's error over the reference's (inf when the reference's is 0)."""
        if self.reference_error > 0:
            return self.value / self.reference_error
        return 0.0 if self.value == 0 else math.inf

    def describe(self) -> str:
        """'fp64: rmse against float64 0.00017 <= 2 x 8.8e-05 (onnxrt fp16's) + 1e-05 =
        0.000186 (ratio 1.93; marker; margin 0.914)'."""
        value, allowed = format_pair(self.value, self.allowed)
        relation = "<=" if self.passed else ">"
        if math.isnan(self.value) or math.isnan(self.reference_error):
            relation = "is NaN, never within"
        return (
            f"fp64: rmse against float64 {value} {relation} {self.threshold:g} x "
            f"{self.reference_error:.3g} ({self.reference}'s) + {self.floor:g} = {allowed} "
            f"(ratio {self.ratio:.3g}; {self.source}; margin {self.margin:.3g})"
        )

    def brief(self) -> str:
        return f"fp64 rmse {self.value:.3g} ({self.ratio:.3g}x {self.reference}'s)"


def rmse(actual: np.ndarray, anchor: np.ndarray) -> float:
    """sqrt(mean((actual - anchor)^2)) in float64, over chunks; NaN stays NaN; 0 when empty."""
    a, e = actual.reshape(-1), anchor.reshape(-1)
    if a.size == 0:
        return 0.0
    total = 0.0
    size = max(1, TUNING.chunk_elements // 2)
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, a.size, size):
            diff = a[start : start + size].astype(np.float64) - e[start : start + size].astype(
                np.float64
            )
            total += dot(diff, diff)
    return math.sqrt(total / a.size) if total >= 0 else math.nan


def anchored(
    name: str, actual: np.ndarray, tol: Tolerance, anchor: Anchor | None
) -> AnchoredResult:
    """The fp64 check `tol` of output `name` (see the module)."""
    if anchor is None:
        raise ToleranceError(
            f"check='fp64' (output {name!r}) compares against a float64 run of the reference "
            "framework, which only compare_frameworks with a reference framework makes "
            "(not golden=True, saved outputs, golden.check or compare_outputs): "
            "@pytest.mark.compare_frameworks(..., tolerance=Tolerance(check='fp64'))"
        )
    float64, reduced = anchor.arrays(name, tuple(actual.shape))
    value, reference_error = rmse(actual, float64), rmse(reduced, float64)
    assert tol.threshold is not None
    allowed = tol.threshold * reference_error + tol.atol
    passed = value <= allowed  # NaN on either side fails
    if math.isnan(value) or math.isnan(allowed):
        margin = math.inf
    elif allowed > 0:
        margin = value / allowed
    else:
        margin = 0.0 if value == 0 else math.inf
    return AnchoredResult(
        check=tol.check,
        threshold=tol.threshold,
        value=value,
        passed=passed,
        margin=margin,
        source=tol.source("threshold"),
        reference_error=reference_error,
        floor=tol.atol,
        reference=anchor.reference,
    )
