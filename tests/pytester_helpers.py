"""Running pytester scenarios with and without pytest-xdist."""

from __future__ import annotations

import pytest

#: Parametrize a scenario to run in-process and under `-n 2` (a subprocess).
XDIST = [pytest.param([], id="no-xdist"), pytest.param(["-n", "2"], id="xdist-n2")]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """In-process, unless `-n` asks for xdist workers (they need a real subprocess)."""
    if "-n" in args:
        return pytester.runpytest_subprocess(*args)
    return pytester.runpytest(*args)
