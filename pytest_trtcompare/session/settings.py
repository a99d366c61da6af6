"""Run settings without pytest: precision lists, the ini tolerance table, precedence.

Precedence of tolerances (SPEC §6): command line > marker / call > ini > built-in; each
field of the resolved tolerances names which of them it came from (`Tolerance.source`).
"""

from __future__ import annotations

import copy
import difflib
import re
import shlex
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..engine import (
    FIELD_NAMES,
    METRICS,
    MINIMUM_METRICS,
    PRECISIONS,
    Entry,
    Tolerance,
    ToleranceSpec,
    ToleranceTable,
    fields_key,
    is_field_mapping,
    split_entry,
    with_metrics,
)
from ..errors import ToleranceError

_FLOAT_FIELDS = {"atol", "rtol", "quantile", "threshold"}
_INT_FIELDS = {"index_tolerance"}
_BOOL_FIELDS = {"nan_equal", "inf_equal"}
_METRIC_SPEC = re.compile(r"^\s*(?P<name>[a-z0-9_]+)\s*(?:(?P<op>>=|<=|=)\s*(?P<value>\S*))?\s*$")


def is_metric_spec(text: str) -> bool:
    """'cosine>=0.999', 'l2<=1e-3', 'snr=25', 'kl': a metric check, not tolerance fields."""
    match = _METRIC_SPEC.match(text)
    return match is not None and match["name"] in METRICS


def parse_metric(text: str, where: str, separator: str = ";") -> Tolerance:
    """'cosine>=0.999' (also 'cosine=0.999', or 'cosine' for the default threshold) -> a
    metric check; the relation must be the metric's: >= for cosine, snr, psnr, top1 and <= for
    l2 and kl. `separator` is the one between checks, for the hint on run-on checks."""
    match = _METRIC_SPEC.match(text)
    words = text.split()
    if match is None and len(words) > 1 and all(is_metric_spec(w) for w in words):
        joined = (separator + (" " if separator == ";" else "")).join(words)
        raise ToleranceError(
            f"{where}: {text.strip()!r}: separate metric checks with {separator!r} ({joined!r})"
        )
    if match is None or match["name"] not in METRICS:
        raise ToleranceError(
            f"{where}: {text.strip()!r} is not a metric check; write NAME>=T or NAME<=T with "
            f"NAME one of {', '.join(METRICS)} (e.g. cosine>=0.999, l2<=1e-3)"
        )
    name, op, value = match["name"], match["op"], match["value"]
    minimum = name in MINIMUM_METRICS
    if op in (">=", "<=") and (op == ">=") != minimum:
        right = ">=" if minimum else "<="
        kind = "minimum" if minimum else "maximum"
        raise ToleranceError(
            f"{where}: {name} is a {kind}: write {name}{right}{value} instead of {text.strip()!r}"
        )
    fields: dict[str, Any] = {"check": name}
    if op is not None:
        try:
            fields["threshold"] = float(value)
        except ValueError:
            raise ToleranceError(
                f"{where}: {text.strip()!r}: threshold {value!r} is not a number"
            ) from None
    try:
        return Tolerance(**fields)
    except ToleranceError as exc:
        raise ToleranceError(f"{where}: {text.strip()!r}: {exc}") from None


def parse_metrics(texts: Iterable[str], where: str) -> tuple[Tolerance, ...]:
    """--trt-check values: each 'cosine=0.999' or several 'cosine=0.999,snr=25'."""
    found: dict[str, Tolerance] = {}
    for text in texts:
        for part in text.split(","):
            if not part.strip():
                raise ToleranceError(f"{where} {text!r}: an empty check between commas")
            metric = parse_metric(part, f"{where} {text!r}", ",")
            found[metric.check] = metric  # the last one of a check wins
    return tuple(found.values())


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
        if is_metric_spec(token) and name not in FIELD_NAMES:
            raise ToleranceError(
                f"{where}: {token!r} is a metric check; put it after the fields, separated by "
                f"';' ('atol=1e-2 rtol=1e-2; {token}')"
            )
        if not sep or name not in FIELD_NAMES:
            close = difflib.get_close_matches(name, sorted(FIELD_NAMES), n=1) if sep else []
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ToleranceError(
                f"{where}: {token!r} is not FIELD=VALUE with FIELD one of "
                f"{', '.join(sorted(FIELD_NAMES))}{hint}"
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


def parse_ini_tolerances(
    lines: Iterable[str],
) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[Tolerance, ...]]]:
    """The ini key `trtcompare_tolerances`: one 'PRECISION: FIELD=VALUE ...[; METRIC>=T ...]'
    per line -> (fields per precision, metric checks per precision)."""
    table: dict[str, dict[str, Any]] = {}
    metrics: dict[str, tuple[Tolerance, ...]] = {}
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"trtcompare_tolerances line {line!r}"
        precision, sep, rest = line.partition(":")
        precision = precision.strip().lower()
        if sep and precision not in PRECISIONS and re.fullmatch(r"[a-z0-9_]+", precision):
            raise ToleranceError(
                f"{where}: unknown precision {precision!r}; valid precisions: "
                f"{', '.join(PRECISIONS)}"
            )
        if not sep or precision not in PRECISIONS:
            raise ToleranceError(
                f"{where}: expected 'PRECISION: atol=... rtol=...' with PRECISION one of "
                f"{', '.join(PRECISIONS)}"
            )
        first, *others = rest.split(";")
        if is_metric_spec(first):
            first, others = "", [first, *others]
        table[precision] = parse_tolerance_fields(first, where)
        found: dict[str, Tolerance] = {}
        for part in others:
            metric = parse_metric(part, where)
            if metric.check in found:
                raise ToleranceError(f"{where}: metric check {metric.check!r} given twice")
            found[metric.check] = metric
        if found:
            metrics[precision] = tuple(found.values())
    return table, metrics


@dataclass(frozen=True)
class ToleranceSettings:
    """Everything above the built-in defaults that decides one comparison's tolerance."""

    ini_table: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    command_line: Mapping[str, Any] = field(default_factory=dict)
    ini_metrics: Mapping[str, tuple[Tolerance, ...]] = field(default_factory=dict)
    metrics: tuple[Tolerance, ...] = ()  # --trt-check: added to every comparison
    #: the calibrated tolerance file: test node id -> output -> ({"atol", "rtol"}, its
    #: source, 'calibrated (5 seeds, 2026-11-28)')
    calibrated: Mapping[str, Mapping[str, tuple[Mapping[str, float], str]]] = field(
        default_factory=dict
    )
    calibrated_path: str = ""  # that file, named by the warnings about its entries

    #: resolved tables of calls without a tolerance object (most `compare` calls): the same
    #: fields give the same table, so a suite of small tests resolves each once
    _resolved: dict[Hashable, ToleranceTable] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def base_for(self, precision: str) -> Entry:
        """ini entry of the precision (fields and metric checks) over its built-in default."""
        ini = self.ini_table.get(precision, {})
        base = Tolerance.for_precision(precision).replace(**ini).sourced("ini", ini)
        metrics = [metric.sourced("ini") for metric in self.ini_metrics.get(precision, ())]
        return with_metrics(base, metrics)

    def resolve(
        self,
        precision: str,
        tolerance: ToleranceSpec = None,
        *,
        source: str = "call",
        shared: bool = False,
        test: str | None = None,
        **call_fields: Any,
    ) -> ToleranceTable:
        """Built-in < ini < calibrated (the tolerance file's entries of `test`, a node id,
        where the call or marker gives no tolerance object) < the call's (or marker's:
        `source`) tolerance and fields < command line. The command line's fields change every
        elementwise / statistic member (an entry of metric checks alone has none and
        stays); its metric checks are added to every entry, replacing ones of the same
        check. Each field names its source. `shared`: the kept table itself, for a caller
        that only reads it (else a copy)."""
        calibrated = self.calibrated.get(test or "", {}) if tolerance is None else {}
        # the cache key, or None where none is kept: a tolerance object or a field value that
        # is no plain scalar (the table would not be the same for another)
        fields = None if tolerance is not None else fields_key(call_fields)
        key: Hashable | None = None if fields is None else (precision, source, fields)
        key = (key, test) if calibrated and key is not None else key
        known = self._resolved.get(key) if key is not None else None
        if known is None:
            known = self._resolve(precision, tolerance, source, call_fields, calibrated)
            if calibrated:
                known.calibrated_from = (self.calibrated_path, test or "")
            if key is not None:
                self._resolved[key] = known
        if shared:
            return known
        table = copy.copy(known)  # entries are frozen; the mapping is the table's own
        table.per_output = dict(known.per_output)
        return table

    def _resolve(
        self,
        precision: str,
        tolerance: ToleranceSpec,
        source: str,
        call_fields: Mapping[str, Any],
        calibrated: Mapping[str, tuple[Mapping[str, float], str]],
    ) -> ToleranceTable:
        spec = self.base_for(precision) if tolerance is None else tolerance
        if calibrated:
            base = self.base_for(precision)
            spec = {
                "": base,
                **{
                    output: _calibrated(base, fields, source)
                    for output, (fields, source) in calibrated.items()
                },
            }
        if isinstance(spec, Mapping) and "" not in spec and not is_field_mapping(spec):
            spec = {"": self.base_for(precision), **spec}  # outputs not named: the default
        below = split_entry(self.base_for(precision))[0] or Tolerance.for_precision(precision)
        table = ToleranceTable(spec, source, below, **call_fields)
        if self.command_line:
            table.override(self.command_line, strict=False, source="option")
        table.add_metrics([metric.sourced("option") for metric in self.metrics])
        return table


def _calibrated(entry: Entry, fields: Mapping[str, float], source: str) -> Entry:
    """An entry with the calibrated atol / rtol in its elementwise member (its first; the
    ini's metric checks after it stay)."""
    if isinstance(entry, Tolerance):
        return entry.replace(**fields).sourced(source, fields)
    first, *rest = entry
    return (first.replace(**fields).sourced(source, fields), *rest)


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
