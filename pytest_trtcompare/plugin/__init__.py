"""The pytest plugin (entry point `pytest11: trtcompare`): every hook, each a few lines that
hand over to the module that owns the behaviour.

options.py builds the settings once; markers.py parametrizes; fixtures.py runs comparisons;
outcome.py turns every comparison's Outcome into the test's result; goldens.py and
reporting.py keep what the session did and print it.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Generator
from typing import Any

import pytest

from ..engine import OutputMismatchError
from ..errors import RunnerSkip, TrtCompareError
from ..session.layout import wrap
from ..session.outcome import Kind
from . import argv, goldens, markers, names, options, progress_lines, terminal
from .fixtures import (
    OUTCOME,
    CompareFixture,
    RunnersFixture,
    compare,
    comparison,
    golden,
    input_shapes,
    runners,
    trt_precision,
    trtcompare_case,
)
from .golden_fixture import GoldenFixture, unchecked_inputs
from .outcome import (
    ARTIFACT_FILES,
    LIBRARY_TRACEBACK,
    add_library_traceback,
    enrich_bare_mismatch,
    settle,
)
from .state import STATE, PluginState, state_of

__all__ = [
    "CompareFixture",
    "GoldenFixture",
    "RunnersFixture",
    "compare",
    "comparison",
    "golden",
    "input_shapes",
    "runners",
    "trt_precision",
    "trtcompare_case",
]

WORKER_KEY = "trtcompare"


def pytest_addoption(parser: pytest.Parser) -> None:
    argv.add_options(parser)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Generator[None, None, None]:
    try:
        yield
    finally:
        names.claim_update_goldens_alias(parser)


def pytest_configure(config: pytest.Config) -> None:
    for text in markers.MARKERS.values():
        config.addinivalue_line("markers", text)
    names.warn_deprecated(config)
    names.release_update_goldens_alias(config)
    state = PluginState.build(options.build_settings(config))
    config.stash[STATE] = state
    config.pluginmanager.register(_SessionHooks(state), "trtcompare-session")
    progress_lines.install(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    from ..runners import header_line

    return wrap(header_line(), terminal.terminal_width(config))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    markers.generate_tests(metafunc)


@pytest.hookimpl(tryfirst=True)  # before xdist reads xdist_group to form the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    markers.group_items(config, items)


def pytest_collection_finish(session: pytest.Session) -> None:
    narrowed = goldens.narrowed_modules(session.config)
    state_of(session.config).goldens.collected(session.items, narrowed=narrowed)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        state_of(items[0].config).goldens.collected(items, partial=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    markers.raise_marker_error(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """A compare_frameworks verdict comes before the body's own checks; an
    OutputMismatchError from the body gets its record, artifacts and verbosity."""
    __tracebackhide__ = True
    settings = state_of(item.config).settings
    outcome = item.stash.get(OUTCOME, None)
    if outcome is not None and outcome.kind not in (Kind.SKIPPED, Kind.ERROR):
        item.stash[OUTCOME] = dataclasses.replace(outcome, arrays=None)  # items live on
        settle(item, settings, outcome, in_body=False)
    try:
        result = yield
    except OutputMismatchError as error:
        enrich_bare_mismatch(item, settings, error)
        raise
    unchecked_inputs(item)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A runner that cannot run here skips; our own errors show as their message alone;
    pytest-html, when installed, shows the pictures of a failing test in its row."""
    report = yield
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
        details = getattr(error, "details", "")
    elif report.failed and report.when == "call" and getattr(error, terminal.OUR_ERROR, False):
        site = terminal.call_site(item, call.excinfo)
        if site:
            report.longrepr = _message_only(item, f"{error}{site}")
    if report.failed:
        add_library_traceback(report, state_of(item.config).settings, details)
        terminal.shape_failure(report, error, item)
    files = item.stash.get(ARTIFACT_FILES, None)
    if report.when == "call" and files:
        _html_pictures(report, files)
    return report


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


class _SessionHooks:
    """Hooks that need the session's state and receive no config (logreport, nodedown)."""

    def __init__(self, state: PluginState) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed:
            self.state.goldens.passed.add(report.nodeid)
        self.state.reporter.logreport(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        terminal.hand_width_to(node, node.config)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        data = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if data:
            self.state.goldens.merge_worker(data["goldens"])
            self.state.reporter.merge_worker(str(node.gateway.id), data["report"])

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        config = session.config
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
        self.state.reporter.terminal_summary(terminalreporter)
