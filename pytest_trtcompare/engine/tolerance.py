"""Tolerance policy: what "close enough" means for one output, and per-output tables of it."""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ToleranceError, ToleranceWarning

CHECKS = ("elemwise", "max", "mean", "median", "quantile", "indices")
RULES = ("polygraphy", "allclose")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")

#: Built-in atol = rtol per precision (SPEC §6); the last resort of the precedence chain.
PRECISION_DEFAULTS: Mapping[str, float] = {
    "fp32": 1e-5,
    "tf32": 1e-3,
    "fp16": 1e-2,
    "bf16": 5e-2,
    "int8": 1e-1,
    "fp8": 1e-1,
}

_TOP_K = re.compile(r"^top-(?P<k>\d+)(?:,axis=(?P<axis>-?\d+))?$")


@dataclass(frozen=True)
class Tolerance:
    """How far `actual` may be from `expected` for one output.

    `rule="polygraphy"` fails an element when |a-e| > atol and |a-e|/|e| > rtol;
    `rule="allclose"` fails it when |a-e| > atol + rtol*|e| (numpy, torch).
    `check` selects per-element verdicts or a statistic of the errors.
    """

    atol: float = 1e-5
    rtol: float = 1e-5
    check: str = "elemwise"
    quantile: float = 0.99
    rule: str = "polygraphy"
    nan_equal: bool = False
    inf_equal: bool = True
    index_tolerance: int = 0
    postprocess: str | None = None

    def __post_init__(self) -> None:
        for name in ("atol", "rtol"):
            value = _real(name, getattr(self, name))
            if not math.isfinite(value) or value < 0:
                raise ToleranceError(f"{name} must be finite and >= 0, got {value!r}")
            object.__setattr__(self, name, value)
        for name, allowed in (("check", CHECKS), ("rule", RULES)):
            value = getattr(self, name)
            if not isinstance(value, str) or value not in allowed:
                raise ToleranceError(f"{name}={value!r} is not one of {', '.join(allowed)}")
        quantile = _real("quantile", self.quantile)
        if not 0.0 <= quantile <= 1.0:
            raise ToleranceError(f"quantile must be in [0, 1], got {self.quantile!r}")
        object.__setattr__(self, "quantile", quantile)
        for name in ("nan_equal", "inf_equal"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise ToleranceError(
                    f"{name} must be True or False, got {value!r} ({type(value).__name__})"
                )
            object.__setattr__(self, name, bool(value))
        index_tolerance = self.index_tolerance
        if isinstance(index_tolerance, (bool, np.bool_)) or not isinstance(
            index_tolerance, numbers.Integral
        ):
            raise ToleranceError(f"index_tolerance must be an int, got {index_tolerance!r}")
        if index_tolerance < 0:
            raise ToleranceError(f"index_tolerance must be >= 0, got {index_tolerance}")
        object.__setattr__(self, "index_tolerance", int(index_tolerance))
        if self.postprocess is not None:
            parse_top_k(self.postprocess)

    @classmethod
    def for_precision(cls, precision: str, **fields: Any) -> Tolerance:
        """The built-in tolerance of a precision (fp16: atol = rtol = 1e-2, ...)."""
        if precision not in PRECISION_DEFAULTS:
            raise ToleranceError(
                f"unknown precision {precision!r}; valid precisions: {', '.join(PRECISIONS)}"
            )
        default = PRECISION_DEFAULTS[precision]
        return cls(**{"atol": default, "rtol": default, **fields})

    def replace(self, **fields: Any) -> Tolerance:
        """A copy with some fields changed; unknown field names are a ToleranceError."""
        unknown = set(fields) - FIELD_NAMES
        if unknown:
            raise ToleranceError(
                f"unknown tolerance field(s) {', '.join(sorted(unknown))}; "
                f"valid fields: {', '.join(sorted(FIELD_NAMES))}"
            )
        return dataclasses.replace(self, **fields)

    def describe(self) -> str:
        """Short human text, e.g. 'elemwise tolerance atol=0.001 rtol=0.001'."""
        if self.check == "indices":
            return f"index tolerance {self.index_tolerance}"
        text = f"{self.check} tolerance atol={self.atol:g} rtol={self.rtol:g}"
        if self.check == "quantile":
            text += f" (q={self.quantile:g})"
        if self.rule != "polygraphy":
            text += f" rule={self.rule}"
        return text


def _real(name: str, value: Any) -> float:
    """A Python or numpy real number as float; anything else (bool, str, None) is an error."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ToleranceError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    return float(value)


FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(Tolerance))

ToleranceLike = Tolerance | Mapping[str, Any]
ToleranceSpec = Tolerance | Mapping[str, ToleranceLike] | None


def parse_top_k(spec: str) -> tuple[int, int]:
    """Parse Polygraphy's post-processing syntax 'top-K' or 'top-K,axis=A' into (K, axis)."""
    match = _TOP_K.match(spec.strip()) if isinstance(spec, str) else None
    if match is None or int(match["k"]) < 1:
        raise ToleranceError(
            f"postprocess={spec!r} is not understood; use 'top-K' or 'top-K,axis=A' with K >= 1"
        )
    return int(match["k"]), int(match["axis"] or -1)


def _as_tolerance(value: ToleranceLike, base: Tolerance, where: str) -> Tolerance:
    if isinstance(value, Tolerance):
        return value
    if isinstance(value, Mapping):
        try:
            return base.replace(**dict(value))
        except ToleranceError as exc:
            raise ToleranceError(f"{where}: {exc}") from None
    problem = f"{where}: expected a Tolerance or a mapping of fields, got {value!r}"
    key = where.removeprefix("tolerance[").removesuffix("]").strip("'\"")
    if isinstance(value, (int, float, str)) and key:  # {"atl": 1e-3}: a field name misspelt?
        close = difflib.get_close_matches(key, sorted(FIELD_NAMES), n=1)
        fields = (
            f"did you mean {close[0]!r}?" if close else f"fields: {', '.join(sorted(FIELD_NAMES))}"
        )
        problem += f" ({key!r} is not a tolerance field; {fields})"
    raise ToleranceError(problem)


def _is_field_mapping(spec: Mapping[str, Any]) -> bool:
    """{"atol": 1e-3, ...}: fields of one tolerance, not a table keyed by output name."""
    return bool(spec) and all(
        key in FIELD_NAMES and not isinstance(value, (Tolerance, Mapping))
        for key, value in spec.items()
    )


class ToleranceTable:
    """Per-output tolerances with a default under the key "" (Polygraphy's `out0:1e-3`).

    A mapping whose keys are all tolerance fields ({"atol": 1e-3, "rtol": 0}) is read as the
    fields of the default tolerance instead.
    """

    def __init__(self, spec: ToleranceSpec = None, **overrides: Any) -> None:
        default = Tolerance()
        per_output: dict[str, Tolerance] = {}
        if isinstance(spec, Tolerance):
            default = spec
        elif isinstance(spec, Mapping) and _is_field_mapping(spec):
            default = _as_tolerance(spec, default, "tolerance")  # {"atol": 1e-3, "rtol": 0}
        elif isinstance(spec, Mapping):
            if "" in spec:
                default = _as_tolerance(spec[""], default, "tolerance['']")
            for name, value in spec.items():
                if name != "":
                    per_output[str(name)] = _as_tolerance(value, default, f"tolerance[{name!r}]")
        elif spec is not None:
            raise ToleranceError(
                f"tolerance must be a Tolerance, a dict of its fields ({{'atol': 1e-3, "
                f"'rtol': 1e-3}}) or a dict of output name to either; got {spec!r} "
                f"({type(spec).__name__})"
            )
        if overrides:
            default = default.replace(**overrides)
            per_output = {name: tol.replace(**overrides) for name, tol in per_output.items()}
        self.default = default
        self.per_output = per_output

    def __getitem__(self, name: str) -> Tolerance:
        return self.per_output.get(name, self.default)

    def warn_unknown(self, names: Iterable[str]) -> None:
        """Warn (as Polygraphy does) about per-output tolerances naming no output."""
        known = set(names)
        unknown = sorted(set(self.per_output) - known)
        if unknown:
            warnings.warn(
                f"tolerance given for output(s) {unknown} that the comparison does not have; "
                f"outputs are {sorted(known)}",
                ToleranceWarning,
                stacklevel=4,
            )
