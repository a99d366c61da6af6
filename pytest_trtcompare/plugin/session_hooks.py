"""The plugin's working half, imported when a session first uses it (state.py): builds the
session's state and registers the hooks that need it; the bodies of the call and report
hooks for items that compared something."""

from __future__ import annotations

import base64
import dataclasses
import logging
from typing import Any

import pytest

from ..engine import OutputMismatchError
from ..errors import RunnerSkip, TrtCompareError
from ..session.outcome import Kind
from . import goldens, options, terminal
from .fixtures import OUTCOME, RunnersFixture
from .settle import (
    ARTIFACT_FILES,
    LIBRARY_TRACEBACK,
    add_library_traceback,
    enrich_bare_mismatch,
    settle,
)
from .state import PENDING, STATE, WORKER_KEY, PluginState, state_of

_log = logging.getLogger(__name__)


def activate(config: pytest.Config) -> PluginState:
    """Build the session's state and register its hooks, then replay what the session did
    before (nothing when the run's options made pytest_configure call this)."""
    state = PluginState.build(options.build_settings(config))
    config.stash[STATE] = state
    config.pluginmanager.register(SessionHooks(state), "trtcompare-session")
    pending = config.stash[PENDING]
    for items in pending.deselected:
        state.goldens.collected(items, deselected=True)
    if pending.session is not None:
        collection_finished(pending.session)
    state.goldens.passed |= pending.passed
    return state


def collection_finished(session: pytest.Session) -> None:
    narrowed = goldens.narrowed_modules(session.config)
    state_of(session.config).goldens.collected(session.items, narrowed=narrowed)


def before_call(item: pytest.Item, outcome: Any) -> None:
    """A compare_frameworks verdict comes before the body's own checks."""
    __tracebackhide__ = True
    if outcome.kind not in (Kind.SKIPPED, Kind.ERROR):
        # items live on: their arrays and reduced model go
        item.stash[OUTCOME] = dataclasses.replace(outcome, arrays=None, reduced=None)
        settle(item, state_of(item.config).settings, outcome, in_body=False)


def after_call(item: pytest.Item, error: AssertionError) -> None:
    """An OutputMismatchError from the body gets its record, artifacts and verbosity."""
    if isinstance(error, OutputMismatchError):
        enrich_bare_mismatch(item, state_of(item.config).settings, error)


def shape_report(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
    """A runner that cannot run here skips; our own errors show as their message alone;
    pytest-html, when installed, shows the pictures of a failing test in its row."""
    error = call.excinfo.value if call.excinfo is not None else None
    details = item.stash.get(LIBRARY_TRACEBACK, "")
    if details:
        del item.stash[LIBRARY_TRACEBACK]
    if isinstance(error, RunnerSkip) and not report.skipped:
        path, line, _ = item.reportinfo()
        report.outcome = "skipped"
        report.longrepr = (str(path), (line or 0) + 1, f"Skipped: {error}")
    elif isinstance(error, TrtCompareError) and report.failed:
        site = terminal.call_site(item, call.excinfo) if report.when == "call" else ""
        report.longrepr = _message_only(item, f"{type(error).__name__}: {error}{site}")
        if site:
            terminal.point_at_call_site(report.longrepr, item, call.excinfo)
        details = getattr(error, "details", "")
    elif report.failed and report.when == "call" and getattr(error, terminal.OUR_ERROR, False):
        site = terminal.call_site(item, call.excinfo)
        if site:
            report.longrepr = _message_only(item, f"{error}{site}")
            terminal.point_at_call_site(report.longrepr, item, call.excinfo)
    if report.failed:
        add_library_traceback(report, state_of(item.config).settings, details)
        terminal.shape_failure(report, error, item)
    files = item.stash.get(ARTIFACT_FILES, None)
    if report.when == "call" and files:
        _html_pictures(report, files)


def _message_only(item: pytest.Item, message: str) -> Any:
    """What pytest.fail(message, pytrace=False) shows: the message, in the short summary too."""
    try:
        pytest.fail(message, pytrace=False)
    except pytest.fail.Exception:
        info = pytest.ExceptionInfo.from_current()
    return item._repr_failure_py(info, style="value")


def _html_pictures(report: pytest.TestReport, files: list[Any]) -> None:
    try:
        from pytest_html import extras
    except ImportError:
        return
    pictures = [
        extras.png(base64.b64encode(path.read_bytes()).decode(), name=path.name)
        for path in files
        if path.suffix == ".png" and path.is_file()
    ]
    setattr(report, "extras", [*getattr(report, "extras", []), *pictures])  # noqa: B010


def merge_worker(state: PluginState, node: Any, data: dict[str, Any]) -> None:
    state.goldens.merge_worker(data["goldens"])
    state.reporter.merge_worker(str(node.gateway.id), data["report"])


class SessionHooks:
    """Hooks that need the session's state and receive no config (logreport, nodedown)."""

    def __init__(self, state: PluginState) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed:
            self.state.goldens.passed.add(report.nodeid)
        self.state.reporter.logreport(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        data = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if data:
            merge_worker(self.state, node, data)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        config = session.config
        # those of no record too (a twin's bare description: reports/document.py `described`)
        for runner in self.state.cases.runners.built():
            try:
                self.state.reporter.describe(runner.describe())
            except Exception as exc:  # a description must not fail the session
                _log.debug("no description of %s for the report: %s", runner.name, exc)
        builds = RunnersFixture(self.state.cases.runners).builds
        workeroutput = getattr(config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKER_KEY] = {
                "goldens": self.state.goldens.worker_payload(),
                "report": self.state.reporter.worker_payload(builds),
            }
        else:
            if builds:
                self.state.reporter.builds["main"] = builds
            self.state.goldens.find_unused(session)
            self.state.reporter.check_drift(session)
            if self.state.reporter.calibration is not None:
                self.state.reporter.calibration.write()
        self.state.cases.runners.close()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(terminalreporter.config, "workerinput"):
            return
        goldens = self.state.goldens
        verbosity = int(terminalreporter.config.option.verbose)
        lines = goldens.summary_lines() if verbosity >= 0 or goldens.noteworthy else []
        if lines:
            terminalreporter.section("goldens")
            for line in lines:
                terminalreporter.write_line(line, red=line == goldens.FAILING_LINE)
        goldens.count_failing(terminalreporter.stats)
        self.state.reporter.count_drift(terminalreporter.stats)
        self.state.reporter.terminal_summary(terminalreporter, goldens.report_section())
