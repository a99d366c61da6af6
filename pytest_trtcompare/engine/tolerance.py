"""Tolerance policy: what "close enough" means for one output, and per-output tables of it."""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
import re
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import numpy as np

from ..errors import ToleranceError, ToleranceWarning
from ..vocabulary import METRICS, PRECISIONS, STAT_CHECKS
from .digits import exact

CHECKS = (*STAT_CHECKS, "indices", *METRICS)
#: Default thresholds (Polygraphy's for cosine, l2, snr, psnr).
METRIC_DEFAULTS: Mapping[str, float] = {
    "cosine": 0.997,
    "l2": 1e-5,
    "snr": 20.0,
    "psnr": 30.0,
    "kl": 1e-3,
    "top1": 0.99,
}
#: Metrics that must reach their threshold (value >= threshold); the others must not exceed it.
MINIMUM_METRICS = frozenset({"cosine", "snr", "psnr", "top1"})
#: Allowed thresholds: (low, high), both inclusive; dB thresholds only need to be finite.
_THRESHOLD_RANGES: Mapping[str, tuple[float, float]] = {
    "cosine": (-1.0, 1.0),
    "l2": (0.0, math.inf),
    "snr": (-math.inf, math.inf),
    "psnr": (-math.inf, math.inf),
    "kl": (0.0, math.inf),
    "top1": (0.0, 1.0),
}
RULES = ("polygraphy", "allclose")

#: Built-in atol = rtol per precision (SPEC §6); the last resort of the precedence chain.
PRECISION_DEFAULTS: Mapping[str, float] = {
    "fp32": 1e-5,
    "tf32": 1e-3,
    "fp16": 1e-2,
    "bf16": 5e-2,
    "int8": 1e-1,
    "fp8": 1e-1,
}

#: Where a tolerance's field came from (README "Tolerances", precedence: option > marker /
#: call > ini > default): the built-in value, the ini key `trtcompare_tolerances`, the command
#: line, the compare_frameworks marker, a call (compare(..., atol=), golden.check,
#: assert_outputs_close, compare_outputs), or a golden's stored tolerance.
SOURCES = ("default", "ini", "option", "marker", "call", "golden")

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
    threshold: float | None = None  # metric checks only; None: the metric's default
    #: field name -> one of SOURCES; empty for a Tolerance made by hand, which the table
    #: that receives it credits whole to its own source. Neither compared nor stored.
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

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
        object.__setattr__(self, "threshold", _threshold(self.check, self.threshold))

    @property
    def is_metric(self) -> bool:
        """A metric check (cosine, l2, snr, psnr, kl, top1): verdict from `threshold`."""
        return self.check in METRICS

    @classmethod
    def for_precision(cls, precision: str, **fields: Any) -> Tolerance:
        """The built-in tolerance of a precision (fp16: atol = rtol = 1e-2, ...)."""
        if precision not in PRECISION_DEFAULTS:
            raise ToleranceError(
                f"unknown precision {precision!r}; valid precisions: {', '.join(PRECISIONS)}"
            )
        default = PRECISION_DEFAULTS[precision]
        return cls(**{"atol": default, "rtol": default, **fields}).sourced("default")

    def source(self, name: str) -> str:
        """Where field `name` came from (see SOURCES)."""
        return self.sources.get(name, "default")

    def sourced(self, source: str, names: Iterable[str] | None = None) -> Tolerance:
        """A copy with fields `names` (every field when None) credited to `source`."""
        if source not in SOURCES:
            raise ValueError(f"unknown tolerance source {source!r}")
        credited = FIELD_NAMES if names is None else set(names)
        sources = {**self.sources, **dict.fromkeys(sorted(credited), source)}
        return dataclasses.replace(self, sources=sources)

    def replace(self, **fields: Any) -> Tolerance:
        """A copy with some fields changed; unknown field names are a ToleranceError."""
        unknown = set(fields) - FIELD_NAMES
        if unknown:
            raise ToleranceError(
                f"unknown tolerance field(s) {', '.join(sorted(unknown))}; "
                f"valid fields: {', '.join(sorted(FIELD_NAMES))}"
            )
        check = fields.get("check", self.check)
        sources = dict(self.sources)
        if check != self.check and "threshold" not in fields:
            fields["threshold"] = None  # another check: its own default (or none)
            sources["threshold"] = "default"
        return dataclasses.replace(self, **fields, sources=sources)

    def describe(self, sources: bool = True) -> str:
        """Short human text, each bound followed by its source: 'elemwise tolerance
        atol=0.001 (ini) rtol=0.001 (ini)'; the check's own source when it is not elemwise:
        'mean tolerance (option) atol=...'."""

        def of(name: str) -> str:
            return f" ({self.source(name)})" if sources else ""

        if self.check == "indices":
            return f"index tolerance {self.index_tolerance}{of('index_tolerance')}"
        if self.is_metric:
            return metric_bound(self.check, self.threshold) + of("threshold")
        text = f"{self.check} tolerance"
        if self.check != "elemwise":
            text += of("check")
        text += f" atol={exact(self.atol)}{of('atol')} rtol={exact(self.rtol)}{of('rtol')}"
        if self.check == "quantile":
            text += f" (q={self.quantile:g})"
        if self.rule != "polygraphy":
            text += f" rule={self.rule}{of('rule')}"
        return text


def _real(name: str, value: Any) -> float:
    """A Python or numpy real number as float; anything else (bool, str, None) is an error."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ToleranceError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    return float(value)


def metric_bound(check: str, threshold: float | None) -> str:
    """'cosine >= 0.999', 'l2 <= 1e-05', 'snr >= 20 dB'."""
    unit = " dB" if check in ("snr", "psnr") else ""
    relation = ">=" if check in MINIMUM_METRICS else "<="
    return f"{check} {relation} {exact(threshold)}{unit}"


def _threshold(check: str, value: Any) -> float | None:
    """The checked threshold of a metric (its default when None); None for the other checks."""
    if check not in METRICS:
        if value is not None:
            raise ToleranceError(
                f"threshold={value!r} applies to the metric checks ({', '.join(METRICS)}) "
                f"only, not to check={check!r}"
            )
        return None
    if value is None:
        return METRIC_DEFAULTS[check]
    number = _real("threshold", value)
    low, high = _THRESHOLD_RANGES[check]
    if math.isnan(number) or not low <= number <= high or math.isinf(number):
        span = {
            "cosine": "in [-1, 1]",
            "top1": "in [0, 1]",
            "l2": "finite and >= 0",
            "kl": "finite and >= 0",
        }.get(check, "a finite number of dB")
        raise ToleranceError(f"threshold of check={check!r} must be {span}, got {value!r}")
    return number


#: The fields a user sets (`sources` is bookkeeping, not one of them).
FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(Tolerance) if f.name != "sources")
#: The built-in tolerance (fp32's), every field credited to "default".
DEFAULT = Tolerance().sourced("default")

ToleranceLike = Tolerance | Mapping[str, Any]
#: One output's tolerance, or a sequence of them that must all pass (Polygraphy's
#: `--compare simple cosine_similarity`).
Entry = Tolerance | tuple[Tolerance, ...]
ToleranceSpec = (
    Tolerance
    | Sequence[ToleranceLike]
    | Mapping[str, ToleranceLike | Sequence[ToleranceLike]]
    | None
)


def members(entry: Entry) -> tuple[Tolerance, ...]:
    """The tolerances of an entry, a single one as a 1-tuple."""
    return entry if isinstance(entry, tuple) else (entry,)


def entry_record(entry: Entry) -> dict[str, Any] | list[dict[str, Any]]:
    """JSON-able fields of an entry (golden metadata): a dict, or a list of them."""
    return _fields(entry) if isinstance(entry, Tolerance) else [_fields(t) for t in entry]


def _fields(tol: Tolerance) -> dict[str, Any]:
    return {f.name: getattr(tol, f.name) for f in dataclasses.fields(tol) if f.name in FIELD_NAMES}


def entry_sources(entry: Entry) -> dict[str, str]:
    """Where an entry's bounds came from, for the JSON report: {'atol': 'ini', 'rtol':
    'ini', 'check': 'default'}; a metric check's under its name ({'cosine': 'marker'})."""
    found: dict[str, str] = {}
    for tol in members(entry):
        if tol.is_metric:
            found[tol.check] = tol.source("threshold")
        elif tol.check == "indices":
            found.update(check=tol.source("check"), index_tolerance=tol.source("index_tolerance"))
        else:
            found.update({name: tol.source(name) for name in ("atol", "rtol", "check")})
    return found


def split_entry(entry: Entry) -> tuple[Tolerance | None, tuple[Tolerance, ...]]:
    """(the elementwise / statistic / indices tolerance or None, the metric checks)."""
    found = members(entry)
    base = [t for t in found if not t.is_metric]
    return (base[0] if base else None), tuple(t for t in found if t.is_metric)


def with_metrics(entry: Entry, metrics: Sequence[Tolerance]) -> Entry:
    """`entry` with `metrics` added, each replacing a member of the same check."""
    if not metrics:
        return entry
    replaced = {t.check for t in metrics}
    kept = tuple(t for t in members(entry) if t.check not in replaced)
    return _entry([*kept, *metrics], "tolerance")


def _entry(found: Sequence[Tolerance], where: str) -> Entry:
    if not found:
        raise ToleranceError(f"{where}: an empty sequence of tolerances")
    non_metric = [t.check for t in found if not t.is_metric]
    if len(non_metric) > 1:
        raise ToleranceError(
            f"{where}: a sequence takes one elementwise/statistic tolerance and any metric "
            f"checks; got {', '.join(non_metric)}"
        )
    checks = [t.check for t in found]
    twice = sorted({c for c in checks if checks.count(c) > 1 and c in METRICS})
    if twice:
        raise ToleranceError(f"{where}: check {twice[0]!r} given twice")
    return found[0] if len(found) == 1 else tuple(found)


def parse_top_k(spec: str) -> tuple[int, int]:
    """Parse Polygraphy's post-processing syntax 'top-K' or 'top-K,axis=A' into (K, axis)."""
    match = _TOP_K.match(spec.strip()) if isinstance(spec, str) else None
    if match is None or int(match["k"]) < 1:
        raise ToleranceError(
            f"postprocess={spec!r} is not understood; use 'top-K' or 'top-K,axis=A' with K >= 1"
        )
    return int(match["k"]), int(match["axis"] or -1)


def _as_entry(value: Any, base: Tolerance, where: str, source: str = "call") -> Entry:
    """A Tolerance, a mapping of its fields, or a list/tuple of either; what it sets is
    credited to `source`."""
    if (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and value[0] in METRICS
        and isinstance(value[1], numbers.Real)
    ):  # ("cosine", 0.99)
        check, threshold = value
        raise ToleranceError(
            f"{where}: {value!r} is not a tolerance; write "
            f"{{'check': {check!r}, 'threshold': {threshold!r}}}"
        )
    if isinstance(value, (list, tuple)):
        found = [_as_tolerance(v, base, f"{where}[{i}]", source) for i, v in enumerate(value)]
        return _entry(found, where)
    return _as_tolerance(value, base, where, source)


def _as_tolerance(value: Any, base: Tolerance, where: str, source: str = "call") -> Tolerance:
    """A Tolerance made by hand is credited whole to `source`; a mapping, its fields (the
    others keep `base`'s sources)."""
    if isinstance(value, Tolerance):
        return value if value.sources else value.sourced(source)
    if isinstance(value, Mapping):
        _no_fields_beside_a_metric(dict(value), where)
        try:
            return base.replace(**dict(value)).sourced(source, dict(value))
        except ToleranceError as exc:
            raise ToleranceError(f"{where}: {exc}") from None
    problem = f"{where}: expected a Tolerance or a mapping of fields, got {value!r}"
    key = where.removeprefix("tolerance[").removesuffix("]")
    if isinstance(value, str) and value in CHECKS:  # ["kl"]
        problem += f" (a check name: write {{'check': {value!r}}})"
    elif isinstance(value, (int, float, str)) and key[:1] in "'\"" and key.strip("'\""):
        key = key.strip("'\"")  # {"atl": 1e-3}: a field name misspelt?
        close = difflib.get_close_matches(key, sorted(FIELD_NAMES), n=1)
        fields = (
            f"did you mean {close[0]!r}?" if close else f"fields: {', '.join(sorted(FIELD_NAMES))}"
        )
        problem += f" ({key!r} is not a tolerance field; {fields})"
    raise ToleranceError(problem)


#: Keyword fields a metric check takes: its threshold and the post-processing before it.
_METRIC_FIELDS = frozenset({"threshold", "postprocess"})


def _no_fields_beside_a_metric(fields: Mapping[str, Any], where: str) -> None:
    """A metric check takes only threshold= and postprocess=: `check="kl", atol=0.1` would
    drop the atol without a word."""
    check = fields.get("check")
    if check not in METRICS:
        return
    unused = sorted(set(fields) - _METRIC_FIELDS - {"check"})
    if unused:
        names = ", ".join(f"{name}=" for name in unused)
        raise ToleranceError(
            f"{where}: {names} does nothing for a metric check (check={check!r} takes "
            f"threshold= and postprocess=); for both, give a list: "
            f"[{{'atol': ..., 'rtol': ...}}, {{'check': {check!r}}}]"
        )


def _override(
    entry: Entry, overrides: Mapping[str, Any], where: str, strict: bool, source: str = "call"
) -> Entry:
    """`entry` with keyword fields applied (credited to `source`): to its elementwise /
    statistic member, `threshold` to its one metric check, every field to a lone metric that
    `check` replaces by a non-metric. A field with no member to change is a ToleranceError
    when `strict`, else left out (the command line's fields change every elementwise member
    there is)."""
    base, metrics = split_entry(entry)
    fields = dict(overrides)
    _no_fields_beside_a_metric(fields, where)
    if base is not None and metrics and fields.get("check") in METRICS:
        listed = ", ".join(t.check for t in (base, *metrics))
        raise ToleranceError(
            f"{where}: check={fields['check']!r} would replace the {base.check} tolerance in "
            f"[{listed}]: add {{'check': {fields['check']!r}}} to the list instead"
        )
    lone = base is None and len(metrics) == 1
    if lone and strict and fields.get("check", metrics[0].check) not in METRICS:
        # replaced by an elementwise / statistic check
        return metrics[0].replace(**fields).sourced(source, fields)
    checks = ", ".join(t.check for t in metrics)
    threshold = None
    if "threshold" in fields and metrics and not lone:
        if len(metrics) > 1:
            raise ToleranceError(
                f"{where}: threshold= is ambiguous with {len(metrics)} metric checks "
                f"({checks}): give each its threshold"
            )
        threshold = fields.pop("threshold")
    if base is None:
        lost = sorted(set(fields) - _METRIC_FIELDS - ({"check"} if lone and strict else set()))
        if lost and strict:
            names = ", ".join(f"{name}=" for name in lost)
            verb = "has" if len(lost) == 1 else "have"
            raise ToleranceError(
                f"{where}: {names} {verb} no elementwise tolerance to change in [{checks}]"
            )
        fields = {k: v for k, v in fields.items() if k not in lost}
        if not fields:
            return entry
        return _entry([t.replace(**fields).sourced(source, fields) for t in metrics], where)
    changed = [base.replace(**fields).sourced(source, fields)]
    changed += [
        t.replace(threshold=threshold).sourced(source, ["threshold"])
        if threshold is not None
        else t
        for t in metrics
    ]
    return _entry(changed, where)


_PLAIN_FIELDS = (str, int, float, bool, type(None))


def fields_key(fields: Mapping[str, Any]) -> tuple[tuple[str, type, str], ...] | None:
    """A cache key for keyword tolerance fields, or None where none is kept: a value that is
    no plain scalar. Each value by its type and text, which decide what it makes (-0.0 is
    not 0.0, True is not 1); the names sorted (their order changes nothing)."""
    if not all(type(value) in _PLAIN_FIELDS for value in fields.values()):
        return None
    return tuple(sorted((name, type(value), repr(value)) for name, value in fields.items()))


_OVERRIDDEN: dict[tuple[Any, ...], tuple[Entry, Entry]] = {}
_OVERRIDDEN_MAX = 256


def _override_once(
    entry: Entry, overrides: Mapping[str, Any], where: str, strict: bool, source: str = "call"
) -> Entry:
    """`_override`, kept per (entry object, fields, where, strict, source) when every field
    value is a plain scalar: a test suite's `compare(..., atol=1e-3)` repeats the same
    override thousands of times, and validating the copied Tolerance is most of a small
    comparison's tolerance cost. Entries are frozen, so the kept result is the same one a
    new call would make; the entry is kept beside it so that its id is not reused."""
    fields = fields_key(overrides)
    if fields is None:
        return _override(entry, overrides, where, strict, source)
    key = (id(entry), fields, where, strict, source)
    known = _OVERRIDDEN.get(key)
    if known is not None and known[0] is entry:
        return known[1]
    changed = _override(entry, overrides, where, strict, source)
    if len(_OVERRIDDEN) >= _OVERRIDDEN_MAX:
        _OVERRIDDEN.clear()
    _OVERRIDDEN[key] = (entry, changed)
    return changed


def is_field_mapping(spec: Mapping[str, Any]) -> bool:
    """{"atol": 1e-3, ...}: fields of one tolerance, not a table keyed by output name."""
    return bool(spec) and all(
        key in FIELD_NAMES and not isinstance(value, (Tolerance, Mapping))
        for key, value in spec.items()
    )


def _some_names(unknown: list[str], known: set[str]) -> str:
    """The closest known names, or the first few: a per-layer comparison has hundreds."""
    close = sorted({m for name in unknown for m in difflib.get_close_matches(name, known, n=3)})
    if close:
        return f"did you mean {', '.join(map(repr, close))}? ({len(known)} outputs)"
    shown = sorted(known)[:8]
    if len(known) > len(shown):
        return f"outputs are {', '.join(map(repr, shown))}, ... ({len(known)} in all)"
    return f"outputs are {shown}"


def _caller_level() -> int:
    """warnings.warn's stacklevel of the first frame outside this package, for a warning
    raised by its caller (the user's compare, compare_outputs or assert_outputs_close)."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


_PACKAGE = __name__.split(".", 1)[0] + "."


class ToleranceTable:
    """Per-output tolerances with a default under the key "" (Polygraphy's `out0:1e-3`).

    A mapping whose keys are all tolerance fields ({"atol": 1e-3, "rtol": 0}) is read as the
    fields of the default tolerance instead. Any entry may be a sequence of tolerances that
    must all pass: at most one elementwise / statistic one, and metric checks. Keyword
    `overrides` change the elementwise / statistic member of every entry, `threshold` its one
    metric check (a lone metric check takes threshold, postprocess and check); a field that
    cannot apply unambiguously is a ToleranceError. Fields of a mapping entry start from the
    default's.

    What `spec` and `overrides` set is credited to `source` (a Tolerance made by hand
    whole, a mapping its fields; a Tolerance that already names its sources keeps them);
    the rest is the built-in default's.
    """

    def __init__(self, spec: ToleranceSpec = None, source: str = "call", **overrides: Any) -> None:
        default: Entry = DEFAULT
        per_output: dict[str, Entry] = {}
        if isinstance(spec, (Tolerance, list, tuple)):
            default = _as_entry(spec, DEFAULT, "tolerance", source)
        elif isinstance(spec, Mapping) and is_field_mapping(spec):
            default = _as_tolerance(spec, DEFAULT, "tolerance", source)  # {"atol": 1e-3}
        elif isinstance(spec, Mapping):
            if "" in spec:
                default = _as_entry(spec[""], DEFAULT, "tolerance['']", source)
            base = split_entry(default)[0] or DEFAULT
            for name, value in spec.items():
                if name != "":
                    where = f"tolerance[{name!r}]"
                    per_output[str(name)] = _as_entry(value, base, where, source)
        elif spec is not None:
            raise ToleranceError(
                f"tolerance must be a Tolerance, a dict of its fields ({{'atol': 1e-3, "
                f"'rtol': 1e-3}}), a list of them that must all pass, or a dict of output "
                f"name to any of these; got {spec!r} ({type(spec).__name__})"
            )
        self.default = default
        self.per_output = per_output
        if overrides:
            self.override(overrides, strict=True, source=source)

    def override(self, fields: Mapping[str, Any], strict: bool, source: str = "call") -> None:
        """Apply keyword fields to every entry (see `_override`), credited to `source`."""
        self.default = _override_once(self.default, fields, "tolerance", strict, source)
        self.per_output = {
            name: _override_once(entry, fields, f"tolerance[{name!r}]", strict, source)
            for name, entry in self.per_output.items()
        }

    def __getitem__(self, name: str) -> Entry:
        return self.per_output.get(name, self.default)

    def add_metrics(self, metrics: Sequence[Tolerance]) -> None:
        """Add metric checks to every entry (replacing ones of the same check)."""
        self.default = with_metrics(self.default, metrics)
        self.per_output = {n: with_metrics(e, metrics) for n, e in self.per_output.items()}

    def warn_unknown(self, names: Iterable[str]) -> None:
        """Warn (as Polygraphy does) about per-output tolerances naming no output."""
        known = set(names)
        unknown = sorted(set(self.per_output) - known)
        if unknown:
            warnings.warn(
                f"tolerance given for output(s) {unknown} that the comparison does not have; "
                f"{_some_names(unknown, known)}",
                ToleranceWarning,
                stacklevel=_caller_level(),
            )
