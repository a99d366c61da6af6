"""JUnit properties of the accuracy records: one name per output and field, and the whole
record as JSON, which is how records reach the xdist controller, the summary and the JSON
report (`user_properties` travel with test reports)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

PROPERTY = "trtcompare"
RECORD_SUFFIX = ".record"  # trtcompare.<output>.record: the whole record as JSON
LAYERS_PROPERTY = "trtcompare.layers"  # one JSON summary per per-layer test
REDUCED_PROPERTY = "trtcompare.reduced"  # --trt-reduce: the reduced graph and its files, JSON


def to_properties(items: Iterable[Any], taken: Iterable[str] = ()) -> list[tuple[str, Any]]:
    """JUnit properties, one name per output and field: trtcompare.<output>.passed, .failure
    (what failed where no error size says it), .max_abs, .max_rel, .margin, .check, .atol,
    .rtol (each left out where it was not computed), .<metric> and .<metric>.margin, other
    figures by name, and .record (every field as JSON, which the summary and JSON report read
    back). An output already recorded in this test (`taken` names) gets '#2', '#3' ... after
    its name, in its record too."""
    from ..engine import RECORD_KEYS as own  # (.max_abs, .max_rel; imported late: no numpy)

    properties: list[tuple[str, Any]] = []
    used = {key.removesuffix(RECORD_SUFFIX) for key in taken if key.endswith(RECORD_SUFFIX)}
    for record in items:
        prefix = f"{PROPERTY}.{record.output}"
        count = 1
        while prefix in used:
            count += 1
            prefix = f"{PROPERTY}.{record.output}#{count}"
        used.add(prefix)
        if count > 1:  # the summary and the JSON report name it as JUnit does
            record = dataclasses.replace(record, output=f"{record.output}#{count}")
        properties.append((f"{prefix}.passed", str(record.passed).lower()))
        if record.failure is not None:  # what failed where no error size says it
            properties.append((f"{prefix}.failure", record.failure))
        figures = record.figures
        for key, value in (
            *[(key, figures.get(name)) for name, key in own.items()],
            ("margin", record.margin),
            ("check", record.check),
            ("atol", record.atol),
            ("rtol", record.rtol),
        ):
            if value is not None:  # None: not computed (a shape or name failure)
                properties.append(
                    (f"{prefix}.{key}", value if isinstance(value, str) else json_number(value))
                )
        for metric in record.metrics:
            key = f"{prefix}.{metric['check']}"
            properties.append((key, json_number(metric["value"])))
            properties.append((f"{key}.margin", json_number(metric["margin"])))
        for name, value in figures.items():  # a registered statistic's
            if name not in own:
                properties.append((f"{prefix}.{name}", json_number(value)))
        record_json = _ENCODER.encode(record_fields(record))
        if reads_back_the_same(vars(record)):
            if len(_BUILT) >= _BUILT_MAX:  # records whose reports were never read back
                _BUILT.clear()
            _BUILT[record_json] = record
        properties.append((prefix + RECORD_SUFFIX, record_json))
    return properties


#: json.dumps(..., sort_keys=True) makes an encoder per call: one, made once
_ENCODER = json.JSONEncoder(sort_keys=True)

#: Records by their JSON, for the summary of this process to take back without parsing:
#: only those that JSON gives back as the same values (see `reads_back_the_same`).
_BUILT: dict[str, Any] = {}
_BUILT_MAX = 1024


def read_records(items: Iterable[tuple[str, Any]], parse: Callable[[str], Any]) -> list[Any]:
    """The records among a report's properties: each one this process built and kept is
    taken back (equal JSON is an equal record: every field is in it), the others are read
    from their JSON by `parse`."""
    return [
        (_BUILT.pop(value, None) if type(value) is str else None) or parse(value)
        for key, value in items
        if key.startswith(f"{PROPERTY}.") and key.endswith(RECORD_SUFFIX)
    ]


def reads_back_the_same(fields: Mapping[str, Any]) -> bool:
    """Whether reading a record's JSON back (summary.from_properties) gives values equal to
    its fields, of the same types: str, bool, None and finite floats (not ints, which it
    would make floats, but the count of iterations; not Inf or NaN, which travel as text;
    not numpy's floats), figures of those, no metrics (their tuples would come back as
    lists), and sources of str in key order."""
    return all(_reads_back(key, value) for key, value in fields.items())


def _reads_back(key: str, value: Any) -> bool:
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    if key == "figures":  # floats and None, as the fields
        return reads_back_the_same(value)
    if key == "tolerance_sources":  # JSON sorts keys
        return (
            type(value) is dict
            and list(value) == sorted(value)
            and all(type(k) is str and type(v) is str for k, v in value.items())
        )
    if key == "metrics":
        return bool(value == ())
    if key == "iterations":  # an int JSON gives back as it is (not one of NUMBERS)
        return kind is int
    return kind is str or kind is bool or value is None


#: the record's fields that are numbers, beside its figures
NUMBERS = ("margin", "atol", "rtol", "baseline_margin", "checked_abs_error")


def json_number(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def record_fields(record: Any) -> dict[str, Any]:
    """A record's fields as JSON takes them, its figures as fields of their own or its
    `statistics`: `dataclasses.asdict` deep-copies every field, a third of a small test's
    reporting cost; the fields are read here without a copy (metrics' dicts are copied by
    `jsonable`)."""
    from ..engine import RECORD_KEYS as own

    fields = jsonable(vars(record))
    figures = fields.pop("figures")
    fields.update([(name, figures.pop(name, None)) for name in own])
    fields["statistics"] = figures
    return fields


def jsonable(data: Mapping[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {
        k: json_number(v) if isinstance(v, float) else v for k, v in data.items()
    }
    if "metrics" in fields:
        fields["metrics"] = [jsonable(m) for m in fields["metrics"]]
    if "figures" in fields:
        fields["figures"] = jsonable(fields["figures"])
    return fields
