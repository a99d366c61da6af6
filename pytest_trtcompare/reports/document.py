"""The JSON report (`--trt-report`): written at session end, read back and merged.

A report holds every accuracy record (`outputs`, each with its test's node id), the runners'
descriptions keyed as the records name them, the build counts, per-layer summaries, and what
the run did with the goldens (`goldens`: each module's tests run and deselected, the tests
that passed, the goldens used). `report_format` says which layout this is; `suite` tells the
reports of one suite from another's: the name of its rootdir folder, the same on every CI
machine and shard. `merge` joins the reports of one suite run in pieces (shards, reruns,
machines) into one of the same layout.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ReportError
from . import properties, timings
from .golden_use import ModuleRun, merged
from .summary import Record, record_of

#: The layout of the JSON report; a report of another layout is refused, never misread.
REPORT_FORMAT = 2


def report_json(
    items: Sequence[Record],
    runners: Mapping[str, Any],
    builds: Mapping[str, Any],
    version: str,
    layers: Sequence[Mapping[str, Any]] = (),
    goldens: Mapping[str, Any] | None = None,
    suite: str = "",
    written: str | None = None,
) -> str:
    """--trt-report: every record, the runners' descriptions, the build counts, per
    per-layer test what it compared, the goldens' use, and when it was written (UTC)."""
    document = {
        "report_format": REPORT_FORMAT,
        "suite": suite,
        "plugin_version": version,
        "written": written or datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "inference_ms": timings.inference_times(items),
        "layers": list(layers),
        "outputs": [properties.record_fields(r) for r in sorted(items, key=lambda r: -r.margin)],
        "runners": dict(sorted(described(runners, items).items())),
        "runner_builds": dict(builds),
        "goldens": dict(goldens or {"modules": {}, "passed": [], "used": []}),
    }
    return json.dumps(document, indent=2, sort_keys=True, default=str)


def described(runners: Mapping[str, Any], items: Sequence[Record]) -> dict[str, Any]:
    """The runners' descriptions, less one that no record names and another holds whole: the
    same runner built where no test described it, and described by a test elsewhere with
    how it was bound (a twin's `twin_names`). One process keeps it out as it goes; across
    xdist workers it is dropped here, so the report does not depend on which worker built
    what."""
    named = {key for r in items for key in (r.target_runner, r.reference_runner)}
    return {
        key: info
        for key, info in runners.items()
        if key in named
        or not any(
            other is not info and info.items() <= other.items() for other in runners.values()
        )
    }


@dataclass
class Report:
    """One JSON report, read and checked."""

    path: str
    suite: str
    version: str
    written: str
    records: list[Record]
    layers: list[dict[str, Any]]
    runners: dict[str, Any]
    builds: dict[str, Any]
    modules: dict[str, dict[str, Any]]
    passed: set[str]
    used: set[str]


def read_report(path: Path) -> Report:
    """A report file, checked; ReportError naming the file and what is wrong."""
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (ValueError, RecursionError):
        raise ReportError(f"{path}: not a JSON report of pytest-trtcompare (not JSON)") from None
    if not isinstance(document, dict) or "outputs" not in document:
        raise ReportError(f"{path}: not a JSON report of pytest-trtcompare (--trt-report)")
    layout = document.get("report_format")
    if layout != REPORT_FORMAT:
        written = document.get("plugin_version", "an unknown version")
        raise ReportError(
            f"{path}: report format {layout or 1!r} (pytest-trtcompare {written}); this "
            f"version reads format {REPORT_FORMAT}: rerun the run that wrote it with this version"
        )
    try:
        goldens = document["goldens"]
        return Report(
            path=str(path),
            suite=str(document["suite"]),
            version=str(document["plugin_version"]),
            written=str(document.get("written", "")),
            records=[record_of(fields) for fields in document["outputs"]],
            layers=list(document["layers"]),
            runners=dict(document["runners"]),
            builds=dict(document["runner_builds"]),
            modules={str(name): _module(m) for name, m in dict(goldens["modules"]).items()},
            passed=_names(goldens["passed"]),
            used=_names(goldens["used"]),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ReportError(f"{path}: a damaged JSON report ({type(exc).__name__}: {exc})") from None


def _names(values: Any) -> set[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise TypeError(f"{values!r} is not a list of names")
    return set(values)


def _module(data: Any) -> dict[str, Any]:
    """A module's entry of a report's goldens section, checked."""
    if not isinstance(data, dict) or not isinstance(data["folder"], str):
        raise TypeError(f"{data!r} is not a module's entry")
    if not isinstance(data["narrowed"], bool):
        raise TypeError(f"narrowed: {data['narrowed']!r} is not true or false")
    return {**data, "selected": _names(data["selected"]), "deselected": _names(data["deselected"])}


@dataclass
class Merged:
    """Reports of one suite as one: what `trtcompare merge` writes and prints."""

    suite: str
    records: list[Record]
    layers: list[dict[str, Any]]
    runners: dict[str, Any]
    builds: dict[str, Any]
    modules: dict[str, ModuleRun]
    passed: set[str]
    used: set[str]  # goldens, as the reports name them (relative to the rootdir)
    #: tests in several reports with other records: (earlier report, kept report) -> tests
    replaced: dict[tuple[str, str], list[str]]
    same: int  # tests in several reports with the same records (a report given twice over)
    unrun: list[str]  # tests the reports collected that ran in none (a missing shard?)


def merge(reports: Sequence[Report], root: Path) -> Merged:
    """Join the reports of one suite. A test run in several (a rerun) keeps the newest
    report's outcome and records (by the time each was written; the last given on a tie),
    for the summary and for judging goldens alike. `root`: where the reports' relative
    paths (goldens folders) lie, the suite's rootdir here."""
    suites = {report.suite for report in reports}
    if len(suites) > 1:
        named = ", ".join(f"{r.path} ({r.suite or 'no suite'})" for r in reports)
        raise ReportError(
            f"reports of different suites (a suite is named by ini trtcompare_suite, else "
            f"its rootdir's folder): {named}"
        )
    ordered = sorted(reports, key=lambda r: r.written)  # stable: the last given on a tie
    by_test: dict[str, tuple[str, list[Record]]] = {}
    outcome: dict[str, tuple[str, bool]] = {}  # test -> (newest report that ran it, passed)
    replaced: dict[tuple[str, str], list[str]] = {}
    same = 0
    for report in ordered:
        tests: dict[str, list[Record]] = {}
        for record in report.records:
            tests.setdefault(record.nodeid or record.test, []).append(record)
        for test, records in tests.items():
            if test in by_test:
                if by_test[test][1] == records:
                    same += 1
                else:
                    replaced.setdefault((by_test[test][0], report.path), []).append(test)
            by_test[test] = (report.path, records)
        for entry in report.modules.values():
            for test in entry["selected"]:
                outcome[test] = (report.path, test in report.passed)
    modules = merged(
        {name: ModuleRun.from_json(m, root) for name, m in report.modules.items()}
        for report in ordered
    )
    for module in modules.values():
        module.deselected -= module.selected  # deselected by one shard, run by another
    layers = {layer.get("nodeid") or layer["test"]: layer for r in ordered for layer in r.layers}
    return Merged(
        suite=suites.pop() if suites else "",
        records=[record for _, records in by_test.values() for record in records],
        layers=list(layers.values()),
        runners={key: info for r in ordered for key, info in r.runners.items()},
        builds={f"{r.path}:{worker}": b for r in ordered for worker, b in r.builds.items()},
        modules=modules,
        passed={test for test, (_, passed) in outcome.items() if passed},
        used={path for report in reports for path in report.used},
        replaced=replaced,
        same=same,
        unrun=sorted(t for m in modules.values() for t in m.deselected),
    )


def merged_json(merged_reports: Merged, version: str, root: Path) -> str:
    """The merged report, in the layout of one."""
    goldens = {
        "modules": {
            name: module.to_json(_relative(module.folder, root))
            for name, module in sorted(merged_reports.modules.items())
        },
        "passed": sorted(merged_reports.passed),
        "used": sorted(merged_reports.used),
    }
    return report_json(
        merged_reports.records,
        merged_reports.runners,
        merged_reports.builds,
        version,
        merged_reports.layers,
        goldens,
        merged_reports.suite,
    )


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
