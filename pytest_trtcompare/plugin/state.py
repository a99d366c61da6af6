"""The plugin's per-session objects, kept on the config: built in pytest_configure when the
run sets any of our options or ini keys, else on first use (a fixture, a marker, a golden
folder), so that a suite that never uses the plugin imports none of the session."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..session.cases import CaseRunner
    from .goldens import GoldenSession
    from .options import Settings
    from .reporting import Reporter


@dataclass(frozen=True)
class PluginState:
    settings: Settings
    cases: CaseRunner
    goldens: GoldenSession
    reporter: Reporter

    @classmethod
    def build(cls, settings: Settings) -> PluginState:
        from ..session.cases import CaseRunner
        from .goldens import GoldenSession
        from .reporting import Reporter

        cases = CaseRunner(
            settings.tolerances,
            settings.engine_cache,
            isolate=settings.isolate,
            debug_precision=settings.debug_precision,
            option_values=settings.values,
            calibrate=settings.calibration.seeds if settings.calibration else 0,
            device=(settings.device, settings.worker),
        )
        return cls(settings, cases, GoldenSession(settings), Reporter(settings))


@dataclass
class Pending:
    """What the session did before the plugin was in use, replayed when it is."""

    deselected: list[list[pytest.Item]] = field(default_factory=list)
    passed: set[str] = field(default_factory=set)
    session: pytest.Session | None = None  # set when collection finished


STATE = pytest.StashKey[PluginState]()
#: Where a worker puts what it did, for the controller.
WORKER_KEY = "trtcompare"
PENDING = pytest.StashKey[Pending]()
#: Builds the state and registers the session's hooks (set by the plugin in pytest_configure).
ACTIVATE = pytest.StashKey[Callable[[pytest.Config], PluginState]]()


def state_of(config: pytest.Config) -> PluginState:
    state = config.stash.get(STATE, None)
    return state if state is not None else config.stash[ACTIVATE](config)


def active(config: pytest.Config) -> bool:
    """Whether the session's state exists (the plugin is in use in this process)."""
    return STATE in config.stash
