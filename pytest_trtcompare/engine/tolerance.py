"""Tolerance policy: what "close enough" means for one output (`Tolerance`), and the entries
that combine an elementwise tolerance with metric checks. Per-output tables: tolerance_table.py."""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ToleranceError
from ..vocabulary import FP64, METRICS, PRECISIONS, STAT_CHECKS
from .digits import exact

CHECKS = (*STAT_CHECKS, "indices", *METRICS, FP64)
#: Checks decided by a threshold alone: the metrics and the fp64 check (its multiplier).
THRESHOLD_CHECKS = (*METRICS, FP64)
#: Default thresholds (Polygraphy's for cosine, l2, snr, psnr).
METRIC_DEFAULTS: Mapping[str, float] = {
    "cosine": 0.997,
    "l2": 1e-5,
    "snr": 20.0,
    "psnr": 30.0,
    "kl": 1e-3,
    "top1": 0.99,
    FP64: 2.0,  # the multiplier, as torch._dynamo.utils.same(fp64_ref=...)
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
    FP64: (0.0, math.inf),
}
RULES = ("polygraphy", "allclose")
#: The fp64 check's default floor (its atol): well under an fp16 model's RMSE (about 1e-4).
FP64_FLOOR = 1e-5

#: Built-in atol = rtol per precision (SPEC §6); the last resort of the precedence chain.
PRECISION_DEFAULTS: Mapping[str, float] = {
    "fp32": 1e-5,
    "tf32": 1e-3,
    "fp16": 1e-2,
    "bf16": 5e-2,
    "int8": 1e-1,
    "fp8": 1e-1,
}

#: Where a tolerance's field came from (docs/reference/option-notes.md; precedence:
#: option > marker / call > ini > default): the built-in value, the ini key
#: `trtcompare_tolerances`, the command line, the compare_frameworks marker, a call
#: (compare(..., atol=), golden.check, assert_outputs_close, compare_outputs), or a golden's
#: stored tolerance.
SOURCES = ("default", "ini", "calibrated", "option", "marker", "call", "golden")

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
        """A metric check (cosine, l2, snr, psnr, kl, top1) or the fp64 check: verdict from
        `threshold` (fp64: the multiplier; its floor is `atol`)."""
        return self.check in THRESHOLD_CHECKS

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
        if source.split(" ", 1)[0] not in SOURCES:  # 'calibrated (5 seeds, 2026-11-28)'
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
        if check == FP64 and check != self.check and "atol" not in fields:
            fields["atol"] = FP64_FLOOR  # not the precision's atol: a floor, not a bound
            sources["atol"] = "default"
        return dataclasses.replace(self, **fields, sources=sources)

    def describe(self, sources: bool = True) -> str:
        """Short human text, each bound followed by its source: 'elemwise tolerance
        atol=0.001 (ini) rtol=0.001 (ini)'; the check's own source when it is not elemwise:
        'mean tolerance (option) atol=...'."""

        def of(name: str) -> str:
            return f" ({self.source(name)})" if sources else ""

        if self.check == "indices":
            return f"index tolerance {self.index_tolerance}{of('index_tolerance')}"
        if self.check == FP64:
            return (
                f"fp64 check: rmse against float64 <= {exact(self.threshold)}{of('threshold')} "
                f"x the reference's at this precision + {exact(self.atol)}{of('atol')}"
            )
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
    if check not in THRESHOLD_CHECKS:
        if value is not None:
            raise ToleranceError(
                f"threshold={value!r} applies to the metric checks "
                f"({', '.join(THRESHOLD_CHECKS)}) "
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
            FP64: "finite and >= 0 (the multiplier)",
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


def outputs_checked_by(entries: Mapping[str, Entry], check: str) -> list[str]:
    """The output names ("" the default) whose entry has a member of `check`."""
    return [name for name, e in entries.items() if any(t.check == check for t in members(e))]


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
    return checked_entry([*kept, *metrics], "tolerance")


def checked_entry(found: Sequence[Tolerance], where: str) -> Entry:
    """The entry of these tolerances (one alone as itself): at most one elementwise /
    statistic tolerance and each metric check once, else a ToleranceError at `where`."""
    if not found:
        raise ToleranceError(f"{where}: an empty sequence of tolerances")
    non_metric = [t.check for t in found if not t.is_metric]
    if len(non_metric) > 1:
        raise ToleranceError(
            f"{where}: a sequence takes one elementwise/statistic tolerance and any metric "
            f"checks; got {', '.join(non_metric)}"
        )
    checks = [t.check for t in found]
    twice = sorted({c for c in checks if checks.count(c) > 1 and c in THRESHOLD_CHECKS})
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
