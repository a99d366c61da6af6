"""Per-output tolerance tables (`ToleranceTable`): a spec given by a call, a marker, the ini
or the command line, read into entries, with keyword fields applied to them."""

from __future__ import annotations

import dataclasses
import difflib
import numbers
import os
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from types import FrameType
from typing import Any

from ..errors import ToleranceError, ToleranceWarning
from ..vocabulary import METRICS
from .tolerance import (
    CHECKS,
    DEFAULT,
    FIELD_NAMES,
    THRESHOLD_CHECKS,
    Entry,
    Tolerance,
    ToleranceSpec,
    checked_entry,
    entry_sources,
    split_entry,
    with_metrics,
)


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
        return checked_entry(found, where)
    return _as_tolerance(value, base, where, source)


def _as_tolerance(value: Any, base: Tolerance, where: str, source: str = "call") -> Tolerance:
    """A Tolerance made by hand is credited whole to `source`; a mapping, its fields (the
    others keep `base`'s sources)."""
    if isinstance(value, Tolerance):
        if not value.sources:  # made by hand: the fields given are those not at their default
            given = {
                f.name: getattr(value, f.name)
                for f in dataclasses.fields(Tolerance)
                if f.name != "sources" and getattr(value, f.name) != f.default
            }
            _no_fields_beside_a_metric(given, where)
        return value if value.sources else value.sourced(source)
    if isinstance(value, Mapping):
        _no_fields_beside_a_metric(dict(value), where)
        try:
            return base.replace(**dict(value)).sourced(source, dict(value))
        except ToleranceError as exc:
            raise ToleranceError(f"{where}: {exc}") from None
    problem = f"{where}: expected a Tolerance or a mapping of fields, got {value!r}"
    key = where.removeprefix("tolerance[").removesuffix("]")
    name = key.strip("'\"")  # the output name it was given under
    if isinstance(value, str) and value in CHECKS:  # ["kl"]
        problem += f" (a check name: write {{'check': {value!r}}})"
    elif isinstance(value, (int, float, str)) and name in FIELD_NAMES:
        problem += (  # {"atol": 1e-3, "logits": {...}}: the default's field
            f" ({name!r} is a field: beside outputs, the default's fields go under '': "
            f"{{'': {{{name!r}: {value!r}}}, ...}})"
        )
    elif isinstance(value, (int, float, str)) and key[:1] in "'\"" and name:
        problem += f" ({_not_a_field(name)})"  # {"atl": 1e-3}: a field name misspelt?
    raise ToleranceError(problem)


#: Keyword fields a metric check takes: its threshold and the post-processing before it.
_METRIC_FIELDS = frozenset({"threshold", "postprocess"})
#: The fp64 check's: its multiplier and its floor.
_FP64_FIELDS = frozenset({"threshold", "atol"})


def _no_fields_beside_a_metric(fields: Mapping[str, Any], where: str) -> None:
    """A metric check takes only threshold= and postprocess= (the fp64 check threshold= and
    atol=): `check="kl", atol=0.1` would drop the atol without a word."""
    check = fields.get("check")
    if check not in THRESHOLD_CHECKS:
        return
    takes = _METRIC_FIELDS if check in METRICS else _FP64_FIELDS
    unused = sorted(set(fields) - takes - {"check"})
    if unused:
        names = ", ".join(f"{name}=" for name in unused)
        said = " and ".join(f"{name}=" for name in sorted(takes, reverse=True))
        raise ToleranceError(
            f"{where}: {names} does nothing for a metric check (check={check!r} takes "
            f"{said}); for both, give a list: "
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
        return checked_entry([t.replace(**fields).sourced(source, fields) for t in metrics], where)
    changed = [base.replace(**fields).sourced(source, fields)]
    changed += [
        t.replace(threshold=threshold).sourced(source, ["threshold"])
        if threshold is not None
        else t
        for t in metrics
    ]
    return checked_entry(changed, where)


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


def _check_misspelt_fields(spec: Mapping[str, Any]) -> None:
    """{"atol": 1e-3, "rtoll": 1e-3}: fields of one tolerance, one misspelt, rather than a
    table keyed by output name (whose values are tolerances, never plain numbers)."""
    plain = [k for k, v in spec.items() if not isinstance(v, (Tolerance, Mapping, list, tuple))]
    misspelt = [k for k in plain if k not in FIELD_NAMES]
    if misspelt and len(misspelt) < len(plain):
        raise ToleranceError(f"tolerance: {_not_a_field(str(misspelt[0]))}")


def _not_a_field(name: str) -> str:
    """ "'atl' is not a tolerance field; did you mean 'atol'?" (else the fields)."""
    close = difflib.get_close_matches(name, sorted(FIELD_NAMES), n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"fields: {', '.join(sorted(FIELD_NAMES))}"
    return f"{name!r} is not a tolerance field; {hint}"


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
        outputs = f"{len(known)} output{'' if len(known) == 1 else 's'}"
        return f"did you mean {', '.join(map(repr, close))}? ({outputs})"
    shown = sorted(known)[:8]
    if len(known) > len(shown):
        return f"outputs are {', '.join(map(repr, shown))}, ... ({len(known)} in all)"
    return f"outputs are {shown}"


def first_line_with(path: str | os.PathLike[str], *texts: str) -> int:
    """The first line of file `path` holding every one of `texts` (1 when none, or
    unreadable): where a warning about a file's entry points."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = enumerate(file, 1)
            return next((n for n, line in lines if all(t in line for t in texts)), 1)
    except OSError:
        return 1


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

    def __init__(
        self,
        spec: ToleranceSpec = None,
        source: str = "call",
        below: Tolerance = DEFAULT,
        **overrides: Any,
    ) -> None:
        """`below`: the tolerance whose fields a mapping's unnamed fields keep (the built-in
        fp32 default; the session's resolve gives the precision's, under its ini)."""
        if not isinstance(below, Tolerance):  # compare_outputs(..., below=...): a field?
            raise ToleranceError(f"unknown tolerance field below={below!r}")
        default: Entry = DEFAULT
        per_output: dict[str, Entry] = {}
        if isinstance(spec, (Tolerance, list, tuple)):
            default = _as_entry(spec, below, "tolerance", source)
        elif isinstance(spec, Mapping) and is_field_mapping(spec):
            default = _as_tolerance(spec, below, "tolerance", source)  # {"atol": 1e-3}
        elif isinstance(spec, Mapping):
            _check_misspelt_fields(spec)
            if "" in spec:
                default = _as_entry(spec[""], below, "tolerance['']", source)
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
        #: (the calibrated tolerance file, the test) where its entries made this table
        self.calibrated_from: tuple[str, str] | None = None
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
            calibrated = any(
                source.startswith("calibrated")
                for name in unknown
                for source in entry_sources(self.per_output[name]).values()
            )
            if calibrated and self.calibrated_from is not None:
                path, test = self.calibrated_from
                warnings.warn_explicit(  # at the file's entry, where the typo is
                    f"{os.path.basename(path)}: a tolerance of {test} for output(s) {unknown} "
                    f"that the comparison does not have; {_some_names(unknown, known)}",
                    ToleranceWarning,
                    filename=path,
                    lineno=first_line_with(path, f'"{test}"', unknown[0]),
                )
                return
            warnings.warn(
                f"tolerance given for output(s) {unknown} that the comparison does not "
                f"have; {_some_names(unknown, known)}",
                ToleranceWarning,
                stacklevel=_caller_level(),
            )
