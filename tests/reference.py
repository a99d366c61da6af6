"""A plain, element-by-element reference of the comparison rules in SPEC §1.

Deliberately slow and obvious: Python numbers, one element at a time, exact integer
differences. The property tests check the chunked numpy engine against it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pytest_trtcompare import Tolerance

EPS = 2.220446049250313e-16


@dataclass
class RefElement:
    abs_err: float  # NaN when the element cannot compare
    rel_err: float


def _py(value: object) -> float | int | bool:
    if isinstance(value, np.generic) and value.dtype.kind == "V":  # ml_dtypes
        return float(value)  # type: ignore[arg-type]
    return value.item() if isinstance(value, np.generic) else value  # type: ignore[return-value]


def element_error(a: object, e: object, nan_equal: bool, inf_equal: bool) -> RefElement:
    a, e = _py(a), _py(e)
    if isinstance(a, (bool, int)) and isinstance(e, (bool, int)):
        diff = float(abs(int(a) - int(e)))
    else:
        fa, fe = float(a), float(e)
        if math.isnan(fa) or math.isnan(fe):
            both = math.isnan(fa) and math.isnan(fe)
            diff = 0.0 if (nan_equal and both) else math.nan
        elif math.isinf(fa) or math.isinf(fe):
            same_infinity = fa == fe
            diff = (0.0 if inf_equal else math.nan) if same_infinity else math.inf
        else:
            diff = abs(fa - fe)
    denominator = abs(float(e))
    if denominator == 0:
        denominator = EPS
    if diff == 0:
        rel = 0.0
    elif math.isinf(diff) and math.isinf(denominator):
        rel = math.inf
    else:
        rel = diff / denominator
    return RefElement(diff, rel)


def element_fails(el: RefElement, e: object, atol: float, rtol: float, rule: str) -> bool:
    if math.isnan(el.abs_err):
        return True
    if rule == "polygraphy":
        return el.abs_err > atol and el.rel_err > rtol
    if math.isinf(el.abs_err):
        return True
    if el.abs_err == 0:  # equal, or a NaN pair excused by nan_equal
        return False
    return el.abs_err > atol + rtol * abs(float(_py(e)))


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    below, above, t = ordered[low], ordered[high], position - low
    if t == 0 or below == above:
        return below
    return math.inf if math.isinf(above) else below + t * (above - below)


def _mean(values: list[float]) -> float:
    try:
        return math.fsum(values) / len(values)
    except OverflowError:  # finite values whose sum exceeds float64: numpy gives Inf too
        return math.inf


def reference_verdict(
    actual: np.ndarray, expected: np.ndarray, tol: Tolerance
) -> tuple[bool, int, list[RefElement]]:
    """(passed, elementwise mismatch count, per-element errors) under `tol`."""
    atol, rtol, check, rule = tol.atol, tol.rtol, tol.check, tol.rule
    quantile, nan_equal, inf_equal = tol.quantile, tol.nan_equal, tol.inf_equal
    a_flat, e_flat = actual.reshape(-1), expected.reshape(-1)
    elements = [
        element_error(a, e, nan_equal, inf_equal) for a, e in zip(a_flat, e_flat, strict=True)
    ]
    mismatches = sum(
        element_fails(el, e, atol, rtol, rule) for el, e in zip(elements, e_flat, strict=True)
    )
    if check == "elemwise":
        return mismatches == 0, mismatches, elements
    if any(math.isnan(el.abs_err) for el in elements):
        return False, mismatches, elements
    if not elements:
        return True, mismatches, elements
    absolute = [el.abs_err for el in elements]
    relative = [el.rel_err for el in elements]
    statistic = {
        "max": max,
        "mean": _mean,
        "median": lambda v: _quantile(v, 0.5),
        "quantile": lambda v: _quantile(v, quantile),
    }[check]
    passed = not (statistic(absolute) > atol and statistic(relative) > rtol)
    return passed, mismatches, elements
