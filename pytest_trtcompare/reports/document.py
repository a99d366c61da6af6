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

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
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
) -> str:
    """--trt-report: every record, the runners' descriptions, the build counts, per
    per-layer test what it compared, and the goldens' use."""
    document = {
        "report_format": REPORT_FORMAT,
        "suite": suite,
        "plugin_version": version,
        "inference_ms": timings.inference_times(items),
        "layers": list(layers),
        "outputs": [properties.record_fields(r) for r in sorted(items, key=lambda r: -r.margin)],
        "runners": dict(sorted(runners.items())),
        "runner_builds": dict(builds),
        "goldens": dict(goldens or {"modules": {}, "passed": [], "used": []}),
    }
    return json.dumps(document, indent=2, sort_keys=True, default=str)


@dataclass
class Report:
    """One JSON report, read and checked."""

    path: str
    suite: str
    version: str
    records: list[Record]
    layers: list[dict[str, Any]]
    runners: dict[str, Any]
    builds: dict[str, Any]
    goldens: dict[str, Any] = field(default_factory=dict)


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
            f"{path}: report format {layout or 1} (pytest-trtcompare {written}); this "
            f"version merges format {REPORT_FORMAT}: rerun that shard with this version"
        )
    try:
        return Report(
            path=str(path),
            suite=str(document["suite"]),
            version=str(document["plugin_version"]),
            records=[record_of(fields) for fields in document["outputs"]],
            layers=list(document["layers"]),
            runners=dict(document["runners"]),
            builds=dict(document["runner_builds"]),
            goldens=dict(document["goldens"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportError(f"{path}: a damaged JSON report ({type(exc).__name__}: {exc})") from None


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
    duplicates: list[str]  # '<node id>: in a.json and b.json (b.json's kept)'


def merge(reports: Sequence[Report], root: Path) -> Merged:
    """Join the reports of one suite. A test found in several (a rerun) keeps the last
    report's records; each such test is named. `root`: where the reports' relative paths
    (goldens folders) lie, the suite's rootdir here."""
    suites = {report.suite for report in reports}
    if len(suites) > 1:
        named = ", ".join(f"{r.path} ({r.suite or 'no suite'})" for r in reports)
        raise ReportError(
            f"reports of different suites (a suite is named by its rootdir folder): {named}"
        )
    by_test: dict[str, tuple[str, list[Record]]] = {}
    duplicates = []
    for report in reports:
        for test, records in _by_test(report.records).items():
            if test in by_test:
                duplicates.append(
                    f"{test}: in {by_test[test][0]} and {report.path} ({report.path}'s kept)"
                )
            by_test[test] = (report.path, records)
    layers: dict[str, dict[str, Any]] = {}
    runners: dict[str, Any] = {}
    builds: dict[str, Any] = {}
    for report in reports:
        layers.update({layer.get("nodeid") or layer["test"]: layer for layer in report.layers})
        runners.update(report.runners)
        builds.update({f"{report.path}:{worker}": b for worker, b in report.builds.items()})
    goldens = [report.goldens for report in reports]
    modules = merged(
        {name: ModuleRun.from_json(m, root) for name, m in g.get("modules", {}).items()}
        for g in goldens
    )
    return Merged(
        suite=suites.pop() if suites else "",
        records=[record for _, records in by_test.values() for record in records],
        layers=list(layers.values()),
        runners=runners,
        builds=builds,
        modules=modules,
        passed={test for g in goldens for test in g.get("passed", ())},
        used={path for g in goldens for path in g.get("used", ())},
        duplicates=duplicates,
    )


def _by_test(records: Sequence[Record]) -> dict[str, list[Record]]:
    found: dict[str, list[Record]] = {}
    for record in records:
        found.setdefault(record.nodeid or record.test, []).append(record)
    return found


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
