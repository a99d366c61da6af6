"""The accuracy summary: one record per (test, output), its margin to tolerance, and the
JSON report. Records travel as `user_properties` on test reports, so they reach the xdist
controller and JUnit XML unchanged."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine import (
    RECORD_KEYS,
    THRESHOLD_CHECKS,
    ComparisonResult,
    OutputComparison,
    against,
    entry_sources,
    exact,
    format_pair,
    listed,
    metric_bound,
    num,
    recorded,
)
from ..session.layout import abbreviate, wrap
from ..vocabulary import FP64
from . import timings
from .properties import NUMBERS, read_records


@dataclass(frozen=True)
class Record:
    test: str
    output: str
    passed: bool
    margin: float
    check: str | None  # None: a missing output, no tolerance applied
    atol: float | None
    rtol: float | None
    source: str  # "compare_frameworks", "compare" or "golden"
    target: str | None = None
    reference: str | None = None
    #: per-layer: the producing node, '/encoder/layer.0/attn/MatMul (MatMul)'
    node: str | None = None
    gates: bool = True  # False: a layer out of tolerance that does not decide (layers='report')
    #: metric checks: {"check", "threshold", "value", "passed", "margin", "source"} each
    metrics: tuple[dict[str, Any], ...] = ()
    #: what failed when no error size says it: 'NaN in actual at 3 positions, first (0, 0)',
    #: 'shape (2, 3) vs (2, 4)', "missing output 'x' in actual"
    failure: str | None = None
    #: where each bound came from, keys sorted as JSON: {"atol": "ini", "check": "default", ...}
    tolerance_sources: dict[str, str] = field(default_factory=dict)
    #: the median of the target's and the reference's inference times in this test (ms);
    #: None where no runner ran (the compare fixture, a golden as the reference)
    target_ms: float | None = None
    reference_ms: float | None = None
    #: the test's pytest node id ('tests/test_m.py::test_x[fp16]'): `test` is its name
    #: within its file, which two files may share; None in records of earlier versions
    nodeid: str | None = None
    xfailed: bool = False  # a failing output of an expected failure (xfail) that failed
    #: the keys of the target's and the reference's descriptions in the JSON report's
    #: `runners` ('onnxrt-fp32@3fa2c1d0'); None where no runner ran
    target_runner: str | None = None
    reference_runner: str | None = None
    #: the same output's margin in the --trt-baseline report (None: no baseline, or new)
    baseline_margin: float | None = None
    #: the absolute error of the statistic `check` bounds (the largest element's for
    #: elemwise and max, the mean's for mean, ...): what `trtcompare tolerances` learns
    #: from; None in reports before calibration
    checked_abs_error: float | None = None
    #: its figures (engine/statistic.py `recorded`), attributes too: `max_abs_error`,
    #: `max_rel_error` (None: none computed: a shape, a name, every one NaN), `rms_error` ...
    figures: dict[str, float | None] = field(default_factory=dict)
    #: the input iterations compared (iterations=N, a golden's, --trt-calibrate's draws);
    #: the figures are those of the worst
    iterations: int = 1

    def __getattr__(self, name: str) -> Any:
        """A figure, as an attribute (`record.max_abs_error`; None where not computed)."""
        if name in RECORD_KEYS or name in self.__dict__.get("figures", ()):
            return self.figures.get(name)
        raise AttributeError(f"'Record' object has no attribute {name!r}")


def records(
    result: ComparisonResult,
    test: str,
    source: str,
    target: str | None,
    reference: str | None,
    verbosity: int = 0,
    times: tuple[float | None, float | None] = (None, None),
    nodeid: str | None = None,
    runners: tuple[str | None, str | None] = (None, None),
) -> list[Record]:
    """One record per output; per-layer, per layer that the report lists (engine/layers.py).
    `runners`: the target's and the reference's keys in the JSON report (runner_key)."""
    out = []
    view = result.layers
    names = list(result.outputs) if view is None else list(listed(result, verbosity).names)
    gating = set(names if view is None else view.gating(list(result.outputs)))
    run: dict[str, Any] = dict(test=test, source=source, target=target, reference=reference)
    run.update(target_ms=times[0], reference_ms=times[1], nodeid=nodeid)
    run.update(target_runner=runners[0], reference_runner=runners[1])
    for name in names:
        output = result.outputs[name]
        out.append(
            Record(
                output=name,
                passed=output.passed,
                margin=output.margin,
                checked_abs_error=output.required_atol,
                check=output.tolerance.check,
                atol=output.tolerance.atol,
                rtol=output.tolerance.rtol,
                node=None if view is None else view.label(name),
                gates=name in gating,
                metrics=tuple(dataclasses.asdict(m) for m in output.metrics),
                failure=_failure(output),
                tolerance_sources=dict(sorted(entry_sources(output.tolerance).items())),
                figures=recorded(output),
                **run,
            )
        )
    missing = [(name, "actual") for name in result.missing_in_actual]
    missing += [(name, "expected") for name in result.missing_in_expected]
    for name, side in missing:
        out.append(
            Record(
                output=name,
                passed=False,
                margin=math.inf,
                check=None,
                atol=None,
                rtol=None,
                failure=f"missing output {name!r} in {side}",
                figures=dict.fromkeys(RECORD_KEYS),
                **run,
            )
        )
    return out


def from_properties(properties: Iterable[tuple[str, Any]]) -> list[Record]:
    return read_records(properties, lambda value: record_of(json.loads(value)))


def _failure(output: OutputComparison) -> str | None:
    """What failed where no error size says it, and what validate=True found."""
    validated = None if output.invalid is None else f"validate: {output.invalid}"
    return "; ".join(text for text in (output.failure, validated) if text) or None


def record_of(fields: dict[str, Any]) -> Record:
    """A record from its JSON fields (a property's, or one of a JSON report's `outputs`)."""
    data = dict(fields)
    own = RECORD_KEYS
    missing = [name for name in (*_REQUIRED, *own) if name not in data]
    if missing:
        raise KeyError(f"a record of {data.get('test')!r} lacks {', '.join(missing)}")
    for name in (*NUMBERS, *own):  # non-finite numbers travel as "inf" / "nan" strings
        if name in data:  # baseline_margin, checked_*: absent from earlier reports
            data[name] = None if data[name] is None else float(data[name])
    data["figures"] = {name: data.pop(name) for name in own} | {
        k: float(v) for k, v in data.pop("statistics", {}).items()
    }
    data["metrics"] = tuple(
        {**m, **{k: float(m[k]) for k in _METRIC_NUMBERS if k in m}}
        for m in data.get("metrics", ())
    )
    return Record(**data)


_REQUIRED = tuple(
    f.name
    for f in dataclasses.fields(Record)
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
)
#: a metric check's numbers (the fp64 check's reference_error and floor besides)
_METRIC_NUMBERS = ("threshold", "value", "margin", "reference_error", "floor")


def format_summary(items: list[Record], verbosity: int = 0, width: int = 80) -> list[str]:
    """Lines of the "accuracy summary", closest to failing first, fitted to `width`: the 20
    first (all of them with -v); with -q one line per failing output and the totals; with
    -qq none."""
    if verbosity <= -2:
        return []
    ordered = sorted(items, key=lambda r: (-r.margin if not math.isnan(r.margin) else 0, r.test))
    if verbosity < 0:
        return _quiet(ordered, width)
    shown = ordered if verbosity > 0 else ordered[:20]
    rows = [(num(r.margin, 3), _verdict(r), _name(r), _figures(r), _tolerance(r)) for r in shown]
    lines = table([_HEADS, *rows])
    if max(map(len, lines)) > width:
        lines = _two_line_rows(rows, width)
    if len(ordered) > len(shown):
        lines.append(f"... {len(ordered) - len(shown)} more (all of them with -v)")
    return lines + timings.inference_lines(items, width)


_Row = tuple[str, str, str, str, str]  # margin, verdict, name, figures, tolerance


def expected_failure(record: Record) -> Record:
    """A record of a test that failed as expected (xfail): its failing outputs count apart."""
    return record if record.passed else dataclasses.replace(record, xfailed=True)


def _verdict(r: Record) -> str:
    return "ok" if r.passed else ("xfail" if r.xfailed else "FAIL" if r.gates else "over")


def _name(r: Record) -> str:
    return f"{r.test} :: {r.node or r.output}"


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows (the heads first) in columns as wide as their widest cell, 2 spaces apart."""
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def _two_line_rows(rows: list[_Row], width: int) -> list[str]:
    """Each row in two lines: margin, verdict and name; under the name its errors and
    tolerance. A name too long for its line puts ':: output' on a line of its own."""
    margin = max(len(_HEADS[0]), *(len(row[0]) for row in rows))
    verdicts = max(4, *(len(row[1]) for row in rows))  # 'ok', 'FAIL', 'over', 'xfail'
    column = margin + 2 + verdicts + 2
    indent = " " * column
    lines = [f"{_HEADS[0].ljust(column)}{_HEADS[2]}", f"{indent}{_HEADS[3]}  {_HEADS[4]}"]
    for value, verdict, name, figures, tolerance in rows:
        head = f"{value.ljust(margin)}  {verdict.ljust(verdicts)}  "
        if len(head + name) <= width:
            lines.append(head + name)
        else:
            test, _, output = name.partition(" :: ")
            lines.append(head + abbreviate(test, width - column))
            lines.append(indent + abbreviate(f":: {output}", width - column))
        lines.extend(wrap(f"{indent}{figures}  {tolerance}", width))
    return lines


def _fit_name(name: str, width: int) -> str:
    """'test :: output' in `width` columns: what is too long shortened in its middle (its
    start and its end stay), the test id keeping at least half of the line."""
    test, _, output = name.partition(" :: ")
    if len(name) <= width or not output:
        return abbreviate(name, width)
    space = width - 4
    test = abbreviate(test, max(space - len(output), min(len(test), space // 2)))
    return f"{test} :: {abbreviate(output, space - len(test))}"


def _quiet(ordered: list[Record], width: int) -> list[str]:
    """-q: one line per failing output (its margin, name and errors), then the totals."""
    failing = [r for r in ordered if not r.passed and r.gates and not r.xfailed]
    over = [r for r in ordered if not r.passed and not r.gates and not r.xfailed]
    expected = [r for r in ordered if r.xfailed]
    margin = max((len(num(r.margin, 3)) for r in failing), default=0)
    lines = []
    for r in failing:
        head = f"{num(r.margin, 3).ljust(margin)}  FAIL  "
        line = f"{head}{_name(r)}  {_figures(r)}"
        if len(line) > width:  # the name first: the errors are in the failure's report
            line = head + _fit_name(_name(r), width - len(head))
        lines.append(line)
    totals = f"{len(ordered)} outputs: {len(failing)} failing, "
    totals += f"{len(ordered) - len(failing) - len(over) - len(expected)} within tolerance"
    if expected:
        totals += f", {len(expected)} failing in xfailed tests"
    if over:
        totals += f", {len(over)} layers over tolerance that do not decide (layers='report')"
    return [*lines, *wrap(totals, width)]


def _figures(r: Record) -> str:
    """The worst errors, in digits enough to compare with the bounds as they do; what
    failed instead where no error size says it (NaN, a shape, a missing output)."""
    text = (
        r.failure
        if r.failure is not None
        else f"abs {against(r.max_abs_error, r.atol, 3)}  rel {against(r.max_rel_error, r.rtol, 3)}"
    )
    return "  ".join([text, *map(_metric_value, r.metrics)])  # digits enough to differ from bounds


def _metric_value(m: Mapping[str, Any]) -> str:
    """'cosine 0.99912'; the fp64 check's 'fp64 rmse 0.00017 (1.93x torch fp16's)'."""
    if m["check"] == FP64:
        ratio = m["value"] / m["reference_error"] if m["reference_error"] else math.inf
        return f"fp64 rmse {m['value']:.3g} ({ratio:.3g}x {m['reference']}'s)"
    return f"{m['check']} {format_pair(m['value'], m['threshold'])[0]}"


def _metric_bound(m: Mapping[str, Any]) -> str:
    if m["check"] == FP64:
        return f"fp64 <= {m['threshold']:g}x {m['reference']}'s + {m['floor']:g}"
    return metric_bound(m["check"], m["threshold"])


def _tolerance(r: Record) -> str:
    """'elemwise atol=0.0001 rtol=0.0001 (ini)': the bounds, exact, and their sources."""
    bounds = [f"{_metric_bound(m)} ({m.get('source', 'default')})" for m in r.metrics]
    if r.check is None:  # a missing output: no tolerance applied
        return "-"
    if r.check in THRESHOLD_CHECKS:  # metric checks alone
        return "; ".join(bounds)
    sources = r.tolerance_sources
    named = ["atol", "rtol"] + (["check"] if r.check != "elemwise" else [])
    found = {sources.get(name, "default") for name in named}
    text = f"{r.check} atol={exact(r.atol)} rtol={exact(r.rtol)}"
    if len(found) == 1:
        text += f" ({found.pop()})"
    else:
        text += " (" + ", ".join(f"{n} {sources.get(n, 'default')}" for n in named) + ")"
    return "; ".join([text, *bounds])


_HEADS = ("margin", "", "test :: output", "worst error", "tolerance")
