"""Run settings without pytest: precision lists, the ini tolerance table, precedence.

Precedence of tolerances (SPEC §6): command line > marker / call > ini > built-in.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine.tolerance import FIELD_NAMES, PRECISIONS, Tolerance, ToleranceSpec, ToleranceTable
from ..errors import ToleranceError

_FLOAT_FIELDS = {"atol", "rtol", "quantile"}
_INT_FIELDS = {"index_tolerance"}
_BOOL_FIELDS = {"nan_equal", "inf_equal"}


def parse_precisions(text: str) -> tuple[str, ...]:
    """'fp32,fp16' -> ('fp32', 'fp16'); unknown names raise ValueError listing valid ones."""
    names = tuple(dict.fromkeys(p.strip().lower() for p in text.split(",") if p.strip()))
    unknown = [p for p in names if p not in PRECISIONS]
    if unknown or not names:
        shown = ", ".join(unknown) if unknown else repr(text)
        raise ValueError(f"unknown precision {shown}; valid precisions: {', '.join(PRECISIONS)}")
    return names


def _field_value(name: str, text: str) -> Any:
    if name in _FLOAT_FIELDS:
        return float(text)
    if name in _INT_FIELDS:
        return int(text)
    if name in _BOOL_FIELDS:
        lowered = text.lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no"):
            raise ValueError(f"{text!r} is not a boolean")
        return lowered in ("true", "1", "yes")
    return text


def parse_tolerance_fields(text: str, where: str) -> dict[str, Any]:
    """'atol=1e-2 rtol=1e-2 check=mean' -> {'atol': 0.01, ...}, with errors naming `where`."""
    fields: dict[str, Any] = {}
    try:
        tokens = shlex.split(text)
    except ValueError as exc:  # an unclosed quote
        raise ToleranceError(f"{where}: {exc}") from None
    for token in tokens:
        name, sep, value = token.partition("=")
        if not sep or name not in FIELD_NAMES:
            raise ToleranceError(
                f"{where}: {token!r} is not FIELD=VALUE with FIELD one of "
                f"{', '.join(sorted(FIELD_NAMES))}"
            )
        try:
            fields[name] = _field_value(name, value)
        except ValueError as exc:
            raise ToleranceError(f"{where}: {name}={value!r}: {exc}") from None
    try:
        Tolerance(**fields)
    except ToleranceError as exc:
        raise ToleranceError(f"{where}: {exc}") from None
    return fields


def parse_tolerance_table(lines: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The ini key `trtcompare_tolerances`: one 'PRECISION: FIELD=VALUE ...' per line."""
    table: dict[str, dict[str, Any]] = {}
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"trtcompare_tolerances line {line!r}"
        precision, sep, rest = line.partition(":")
        precision = precision.strip().lower()
        if not sep or precision not in PRECISIONS:
            raise ToleranceError(
                f"{where}: expected 'PRECISION: atol=... rtol=...' with PRECISION one of "
                f"{', '.join(PRECISIONS)}"
            )
        table[precision] = parse_tolerance_fields(rest, where)
    return table


@dataclass(frozen=True)
class ToleranceSettings:
    """Everything above the built-in defaults that decides one comparison's tolerance."""

    ini_table: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    command_line: Mapping[str, Any] = field(default_factory=dict)

    def base_for(self, precision: str) -> Tolerance:
        """ini entry of the precision over its built-in default."""
        return Tolerance.for_precision(precision, **self.ini_table.get(precision, {}))

    def resolve(
        self, precision: str, tolerance: ToleranceSpec = None, **call_fields: Any
    ) -> ToleranceTable:
        """Built-in < ini < the call's tolerance and fields < command line."""
        spec = self.base_for(precision) if tolerance is None else tolerance
        return ToleranceTable(spec, **{**call_fields, **self.command_line})


_SHAPE_ENTRY = re.compile(r"\s*([^\s:,]+):(\[[^\]]*\]|\d+(?:x\d+)*)\s*(?:,|$|\s)")
_RANGE = re.compile(r"^\[?\s*([-+0-9.eE]+)\s*,\s*([-+0-9.eE]+)\s*\]?$")


def parse_input_shapes(text: str) -> dict[str, tuple[int, ...]]:
    """'x:1x3x224x224,y:2x5' or Polygraphy's 'x:[1,3,224,224] y:[2,5]' -> {name: shape}."""
    shapes: dict[str, tuple[int, ...]] = {}
    position = 0
    while position < len(text.rstrip()):
        match = _SHAPE_ENTRY.match(text, position)
        if match is None:
            raise ValueError(
                f"cannot read {text[position:]!r}: give NAME:1x3x224x224 (or NAME:[1,3,224,224]) "
                "entries separated by commas or spaces"
            )
        dims = match.group(2).strip("[]").replace(",", "x")
        shapes[match.group(1)] = tuple(int(d) for d in dims.split("x") if d.strip()) if dims else ()
        position = match.end()
    if not shapes:
        raise ValueError("no input shapes given")
    return shapes


def parse_val_range(text: str) -> tuple[float, float] | dict[str, tuple[float, float]]:
    """'0,1' or '[0,1]' for every input, or Polygraphy's 'x:[0,1] y:[-1,1]' per input."""

    def pair(part: str) -> tuple[float, float]:
        match = _RANGE.match(part.strip())
        if match is None:
            raise ValueError(f"{part!r} is not LOW,HIGH or [LOW,HIGH]")
        low, high = float(match.group(1)), float(match.group(2))
        if not low <= high:
            raise ValueError(f"{part!r}: LOW must not exceed HIGH")
        return low, high

    if ":" not in text:
        return pair(text)
    ranges = {}
    for entry in text.split():
        name, sep, part = entry.partition(":")
        if not sep or not name:
            raise ValueError(f"{entry!r} is not NAME:[LOW,HIGH]")
        ranges[name] = pair(part)
    return ranges
