"""The pytest plugin (entry point `pytest11: trtcompare`): every hook, each a few lines that
hand over to the module that owns the behaviour.

Importing it, and a run that never uses it, costs little: this module imports only what
registers the options, ini keys and markers. The session's state and the hooks that need it
(session_hooks.py: numpy, the engine, the session, goldens) come in pytest_configure when the
run sets any option or ini key of ours or runs xdist workers, else on first use: a test that
asks for a fixture or carries a marker of ours, a goldens folder beside a collected module,
an error of ours (state.state_of).

options.py builds the settings once; markers.py parametrizes; fixtures.py runs comparisons;
settle.py turns every comparison's Outcome into the test's result; goldens.py and
reporting.py keep what the session did and print it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import TrtCompareError
from ..reports import properties
from ..session.option_table import ini_defaults
from . import argv, calibration_run, names, progress_lines
from .fixtures import (
    CASE_FIXTURE,
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
from .state import (
    ACTIVATE,
    PENDING,
    WORKER_KEY,
    Pending,
    PluginState,
    active,
    state_of,
)

if TYPE_CHECKING:
    from .golden_fixture import GoldenFixture

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

#: The fixtures whose use puts the plugin to work (input_shapes alone needs nothing).
_FIXTURES = frozenset({"compare", "runners", "golden", CASE_FIXTURE, "comparison", "trt_precision"})


def __getattr__(name: str) -> Any:
    if name == "GoldenFixture":
        return importlib.import_module(".golden_fixture", __name__).GoldenFixture
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _activate(config: pytest.Config) -> PluginState:
    from . import session_hooks

    return session_hooks.activate(config)


#: Options that argparse checks in full while parsing (their type= converters are numpy-free):
#: set alone, they need no session before the plugin's first use. An xdist controller, which
#: runs no test, then never imports numpy and the engine before it starts the workers.
_CHECKED_WHILE_PARSING = frozenset({"trt_precision"})


def _in_use_from_start(config: pytest.Config) -> bool:
    """Any option or ini key of ours set that argparse did not check: checked now, a bad value
    is a usage error. (An xdist controller waits for a worker's report or payload of ours.)"""
    if any(
        value is not None and value is not False and dest not in _CHECKED_WHILE_PARSING
        for dest, value in vars(config.option).items()
        if dest.startswith(("trt_", "trtcompare_"))
    ):
        return True
    return calibration_run.default_file_exists(config) or any(
        names.ini_value(config, name) != default for name, default in ini_defaults().items()
    )


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
    for text in names.MARKERS.values():
        config.addinivalue_line("markers", text)
    names.warn_deprecated(config)
    names.release_update_goldens_alias(config)
    config.stash[PENDING] = Pending()
    config.stash[ACTIVATE] = _activate
    if _in_use_from_start(config):
        _activate(config)
    else:
        config.pluginmanager.register(_BeforeUse(config), "trtcompare-before-use")
    progress_lines.install(config)


class _BeforeUse:
    """Until the plugin is in use: which tests passed (find_unused needs them), and in an
    xdist controller the first report of a worker's comparison, which puts it to use; after,
    the session's hooks keep them."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if active(self.config):
            return
        if any(str(key).startswith(_OUR_PROPERTIES) for key, _ in report.user_properties):
            from . import session_hooks

            session_hooks.SessionHooks(state_of(self.config)).pytest_runtest_logreport(report)
        elif report.when == "call" and report.passed:
            self.config.stash[PENDING].passed.add(report.nodeid)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """A worker's payload (only one that used the plugin sends it) puts it to use here."""
        data = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if data and not active(self.config):
            from . import session_hooks

            session_hooks.merge_worker(state_of(self.config), node, data)


_OUR_PROPERTIES = f"{properties.PROPERTY}."


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    from . import terminal

    terminal.hand_width_to(node, node.config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    from ..runners import header_line
    from ..session.layout import wrap
    from .terminal import terminal_width

    return wrap(header_line(), terminal_width(config))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    definition = metafunc.definition
    if not active(metafunc.config):
        if _FIXTURES.isdisjoint(metafunc.fixturenames) and not any(
            definition.get_closest_marker(name) for name in names.MARKERS
        ):
            return  # a test of another kind: nothing to parametrize, nothing to import
        state_of(metafunc.config)
    from . import markers

    markers.generate_tests(metafunc)


@pytest.hookimpl(tryfirst=True)  # before xdist reads xdist_group to form the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if active(config):  # items of ours exist only once the plugin is in use
        from . import markers

        markers.group_items(config, items)
        tolerances = state_of(config).settings.calibration
        worker = getattr(config, "workerinput", {}).get("workerid")
        if tolerances is not None and worker in (None, "gw0"):  # before -k / -m deselect any
            calibration_run.warn_unknown_tests(
                tolerances, items, config.rootpath, worker is not None
            )


def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    if not active(config):
        if not _goldens_beside(session.items):
            config.stash[PENDING].session = session  # replayed if the plugin is used later
            return
        state_of(config)
    from . import session_hooks

    session_hooks.collection_finished(session)


def _goldens_beside(items: list[pytest.Item]) -> bool:
    """Whether a collected module has a goldens folder where GoldenSession.folder looks by
    default (--trt-goldens-dir and its ini key put the plugin in use from the start)."""
    modules = {Path(item.path) for item in items}
    return any(argv.default_goldens_folder(path).is_dir() for path in modules)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if not items:
        return
    config = items[0].config
    if active(config):
        state_of(config).goldens.collected(items, deselected=True)
    else:
        config.stash[PENDING].deselected.append(list(items))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if active(item.config):  # marker errors come from pytest_generate_tests, in use
        from . import markers

        markers.raise_marker_error(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """A compare_frameworks verdict comes before the body's own checks; an
    OutputMismatchError from the body gets its record, artifacts and verbosity."""
    __tracebackhide__ = True
    outcome = item.stash.get(OUTCOME, None)
    if outcome is not None:
        from . import session_hooks

        session_hooks.before_call(item, outcome)
    try:
        result = yield
    except AssertionError as error:
        if "pytest_trtcompare.engine" in sys.modules:  # else the error cannot be ours
            from . import session_hooks

            session_hooks.after_call(item, error)
        raise
    if active(item.config):  # the golden fixture puts the plugin to use
        from .golden_fixture import unchecked_inputs

        unchecked_inputs(item)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    error = call.excinfo.value if call.excinfo is not None else None
    if active(item.config) or isinstance(error, TrtCompareError) or _marked_ours(error):
        from . import session_hooks

        session_hooks.shape_report(item, call, report)
    return report


def _marked_ours(error: BaseException | None) -> bool:
    if error is None:
        return False
    from . import terminal

    return bool(getattr(error, terminal.OUR_ERROR, False))
