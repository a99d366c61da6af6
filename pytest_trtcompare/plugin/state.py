"""The plugin's per-session objects, built once in pytest_configure and kept on the config."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

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
        cases = CaseRunner(
            settings.tolerances,
            settings.engine_cache,
            isolate=settings.isolate,
            debug_precision=settings.debug_precision,
            layers=settings.layers,
            shape_check=settings.shape_check,
        )
        return cls(settings, cases, GoldenSession(settings), Reporter(settings))


STATE = pytest.StashKey[PluginState]()


def state_of(config: pytest.Config) -> PluginState:
    return config.stash[STATE]
