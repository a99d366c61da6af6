from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import os
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Timing health checks and deadlines are off: the suite shares loaded machines (CI, xdist).
settings.register_profile(
    "default",
    deadline=None,
    max_examples=int(os.environ.get("HYPOTHESIS_MAX_EXAMPLES", "200")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# CI: the same examples on every run (derandomize: seeded from each test), so a red build is
# a change of the code, not of the draw; no example database to carry between runs, and a
# failure prints the blob that reproduces it (@reproduce_failure).
settings.register_profile(
    "ci",
    parent=settings.get_profile("default"),
    derandomize=True,
    database=None,
    print_blob=True,
)


#: HYPOTHESIS_PROFILE picks one; else "ci" where the CI variable is set (GitHub Actions,
#: GitLab, tox's CI passenv), else "default". pytest's header names the one loaded.
def hypothesis_profile(environ: Mapping[str, str]) -> str:
    return environ.get("HYPOTHESIS_PROFILE") or ("ci" if environ.get("CI") else "default")


PROFILE = hypothesis_profile(os.environ)
settings.load_profile(PROFILE)


def pytest_report_header(config: pytest.Config) -> str:
    derandomized = " (derandomized)" if settings.default.derandomize else ""
    return f"hypothesis profile: {PROFILE}{derandomized}"


# pytester's in-process runs (runpytest) drop the modules first imported inside them when they
# end, and native extensions cannot load twice in one process (onnx aborts it; onnxruntime and
# torch raise). The plugin imports these lazily, so load them once here, in the outer process.
for _name in ("onnx", "onnxruntime", "torch"):
    if importlib.util.find_spec(_name) is not None:
        importlib.import_module(_name)
# The plugin's working half (the engine, the session) too: it is imported when a run first
# uses the plugin, and a run that drops it would leave the next with two engines' classes.
importlib.import_module("pytest_trtcompare.plugin.session_hooks")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that runs pytest on a scenario (the pytester fixture) is a plugin scenario:
    `-m scenario` selects them, which CI runs on both ends of the supported pytest and
    Python versions (docs/development.md: Supported versions)."""
    for item in items:
        if "pytester" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.scenario)


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytester runs print to an 80-column terminal, where pytest drops the message of a long
    node id from the short summary; the scenario tests read those messages."""
    monkeypatch.setenv("COLUMNS", "240")
    # pytest prints whole messages in the short summary on CI (CI or BUILD_NUMBER set): the
    # scenarios see what a user's terminal shows wherever the suite runs; a scenario about
    # CI sets the variable itself
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)


@pytest.fixture(autouse=True)
def _no_hypothesis_plugin_in_subprocesses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytest processes that scenarios start (and their xdist workers) do without
    hypothesis's pytest plugin: importing it costs each one about 1.3 s, which made up a
    third of the suite's time. In-process runs have it already imported, and keep it."""
    start = pytest.Pytester.runpytest_subprocess

    def without_hypothesis(self: pytest.Pytester, *args: Any, **kwargs: Any) -> Any:
        return start(self, "-p", "no:hypothesispytest", *args, **kwargs)

    monkeypatch.setattr(pytest.Pytester, "runpytest_subprocess", without_hypothesis)


@pytest.fixture(autouse=True)
def _tuning_restored(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every field of the engine's TUNING as it was, after each test: an in-process pytester
    run imports its conftest in this process, and one that sets a field (`TUNING.torch =
    True`) would leave it set for the tests after it."""
    from pytest_trtcompare.engine import TUNING

    for field in dataclasses.fields(TUNING):
        monkeypatch.setattr(TUNING, field.name, getattr(TUNING, field.name))


@pytest.fixture(autouse=True)
def _no_rewrite_warning_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """An in-process run finds pytest_trtcompare imported by this session already: where it
    is installed editable, pytest warns that it cannot rewrite its asserts (it has none a user
    sees), which a scenario would count among its warnings and lines."""
    start = pytest.Pytester.runpytest_inprocess

    def without_the_warning(self: pytest.Pytester, *args: Any, **kwargs: Any) -> Any:
        ignore = "ignore:Module already imported so cannot be rewritten:pytest.PytestWarning"
        return start(self, "-W", ignore, *args, **kwargs)

    monkeypatch.setattr(pytest.Pytester, "runpytest_inprocess", without_the_warning)


@pytest.fixture(scope="module")
def screen_small_outputs() -> Iterator[None]:
    """The float32 screen on small data too (outputs under `TUNING.screen_min` elements go
    to float64 at once otherwise), for the modules that test the screen itself."""
    from pytest_trtcompare.engine.tuning import TUNING

    before, TUNING.screen_min = TUNING.screen_min, 0
    yield
    TUNING.screen_min = before
