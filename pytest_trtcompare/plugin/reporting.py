"""The accuracy summary, the JSON report and runner build counts, aggregated under xdist.

Accuracy records ride on `item.user_properties`, so the xdist controller and JUnit XML get
them from the test reports; runner descriptions and build counts come from each worker
through `workeroutput`.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ..engine import unmatched_line
from ..reports import properties, summary
from ..reports.document import report_json
from ..reports.drift import Drift, drift, drift_lines, key_of
from ..session.layout import wrap
from ..session.outcome import Outcome, runner_key
from .calibration_run import CalibrationRun
from .options import Settings
from .terminal import terminal_width

WORKER_KEY = "trtcompare_builds"


class Reporter:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.records: list[summary.Record] = []
        self.layers: list[dict[str, Any]] = []
        self.descriptions: dict[str, Any] = {}
        self.builds: dict[str, dict[str, dict[str, int]]] = {}
        self._xfailed: set[str] = set()  # node ids of expected failures (xfail) that failed
        self.drift: Drift | None = None  # against --trt-baseline, found at session end
        self.calibration: CalibrationRun | None = None  # --trt-calibrate
        if settings.calibration is not None and settings.calibration.seeds:
            self.calibration = CalibrationRun(settings.calibration)

    def note(self, outcome: Outcome) -> None:
        """Keep the runners' descriptions for the JSON report."""
        for info in (outcome.target, outcome.reference):
            self.describe(info)

    def describe(self, info: Mapping[str, Any] | None) -> None:
        """Keep one runner's description (its inference times are a test's) by its key."""
        key = runner_key(info)
        if info and key is not None:
            self.descriptions[key] = {k: v for k, v in info.items() if k != "inference_ms"}

    def logreport(self, report: pytest.TestReport) -> None:
        # A test's user_properties grow through its setup, call and teardown, and each report
        # carries all of them so far: the teardown's holds every record once (a compare in a
        # fixture's teardown too; the reports of subtests repeat the earlier ones). JUnit
        # reads them there too.
        if report.skipped and getattr(report, "wasxfail", None) is not None:
            self._xfailed.add(report.nodeid)
        if self.calibration is not None:
            self.calibration.logreport(report)
        if report.when == "teardown":
            records = summary.from_properties(report.user_properties)
            if report.nodeid in self._xfailed:
                records = [summary.expected_failure(r) for r in records]
            self.records.extend(records)
            self.layers.extend(
                json.loads(str(value))
                for key, value in report.user_properties
                if key == properties.LAYERS_PROPERTY
            )

    def worker_payload(self, builds: Mapping[str, Any]) -> dict[str, Any]:
        # plain JSON types only: execnet refuses e.g. torch's TorchVersion (a str subclass)
        # and would drop the whole workeroutput
        payload = {"builds": builds, "descriptions": self.descriptions}
        loaded: dict[str, Any] = json.loads(json.dumps(payload, default=str))
        return loaded

    def merge_worker(self, worker: str, data: Mapping[str, Any]) -> None:
        if data["builds"]:
            self.builds[worker] = data["builds"]
        self.descriptions.update(data["descriptions"])

    def check_drift(self, session: pytest.Session) -> None:
        """At session end (the controller under xdist): each record's baseline margin, the
        drifted outputs, and with --trt-drift=fail a failed session."""
        settings = self.settings.drift
        if settings is None:
            return
        self.records = [
            dataclasses.replace(r, baseline_margin=settings.margins.get(key_of(r)))
            for r in self.records
        ]
        self.drift = drift(settings.margins, self.records, settings.ratio, settings.limit)
        if settings.mode == "fail" and self.drift and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def count_drift(self, stats: dict[str, list[Any]]) -> None:
        """Drifted outputs join pytest's last line ('2 drifted (--trt-baseline)'), yellow."""
        if not self.drift:
            return
        stats.setdefault("drifted (--trt-baseline)", []).extend(
            pytest.TestReport(test, (test, None, output), {}, "failed", None, "call")
            for (test, output) in (d.key for d in self.drift.drifted)
        )

    def drift_lines(self, verbosity: int, width: int) -> list[str]:
        settings = self.settings.drift
        if self.drift is None or settings is None:
            return []
        shown = _shown(settings.baseline, self.settings.rootpath)
        lines = drift_lines(self.drift, shown, width, verbosity)
        if self.drift and settings.mode == "fail":
            lines.append("drift fails the session (--trt-drift=fail): exit status 1")
        return lines

    def terminal_summary(self, terminalreporter: Any, goldens: Mapping[str, Any]) -> None:
        """The accuracy summary, fitted to the terminal; -q shortens it, -qq leaves it out
        (the JSON report is written all the same, with `goldens`, the goldens' use)."""
        config = terminalreporter.config
        verbosity = int(config.option.verbose)
        width = terminal_width(config)
        lines = summary.format_summary(self.records, verbosity, width) if self.records else []
        if lines:
            terminalreporter.section("accuracy summary")
            for line in lines:
                terminalreporter.write_line(line)
        drifted = self.drift_lines(verbosity, width)
        if drifted and (verbosity >= -1 or self.drift):  # -q: that the gate ran, in a line
            terminalreporter.section("drift")
            for line in drifted:
                terminalreporter.write_line(line, yellow=bool(self.drift))
        if self.calibration is not None and verbosity > -2:
            terminalreporter.section("calibration")
            for line in self.calibration.lines(config.rootpath, width, verbosity):
                terminalreporter.write_line(line, red=self.calibration.error is not None)
        if lines and verbosity >= 0:
            for layers in self.layers:  # a passing per-layer test shows what it left out too
                if layers.get("unmatched"):
                    text = f"{layers['test']}: {layers['compared']} layers compared; "
                    text += unmatched_line(tuple(layers["unmatched_modules"]))
                    for line in wrap(text, width):
                        terminalreporter.write_line(line)
            for worker, builds in sorted(self.builds.items()):
                counts = ", ".join(
                    f"{name} x{n['builds']}"
                    + (f" ({n['models']} models)" if n["models"] > 1 else "")
                    for name, n in sorted(builds.items())
                )
                for line in wrap(f"runners built ({worker}): {counts}", width):
                    terminalreporter.write_line(line)
        path = self.settings.report_path
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            version = importlib.metadata.version("pytest-trtcompare")
            document = report_json(
                self.records,
                self.descriptions,
                self.builds,
                version,
                self.layers,
                goldens,
                self.settings.suite,
            )
            path.write_text(document)
        except OSError as exc:
            terminalreporter.write_line(f"accuracy report NOT written to {path}: {exc}", red=True)
            return
        if verbosity >= 0:  # as pytest's "generated xml file"
            for line in wrap(f"accuracy report: {path}", terminal_width(config)):
                terminalreporter.write_line(line)


def _shown(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)
