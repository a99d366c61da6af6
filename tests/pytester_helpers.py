"""Running pytester scenarios with and without pytest-xdist."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_trtcompare import runners

#: Parametrize a scenario to run in-process and under `-n 2` (a subprocess).
XDIST = [pytest.param([], id="no-xdist"), pytest.param(["-n", "2"], id="xdist-n2")]
#: The same, its `-n 2` run marked slow (left out of `pytest -n auto`, run by `-m slow`): for
#: the files whose xdist scenarios cost the most (tests/README: the test command's 10 minutes).
XDIST_SLOW = [
    pytest.param([], id="no-xdist"),
    pytest.param(["-n", "2"], id="xdist-n2", marks=pytest.mark.slow),
]


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """In-process, unless `-n` asks for xdist workers (they need a real subprocess)."""
    if "-n" in args:
        return pytester.runpytest_subprocess(*args)
    return pytester.runpytest(*args)


def library_says(action: Callable[[], object]) -> str:
    """'RuntimeError: shape ...': what a library itself raises for `action`, its type and the
    first line of its text, so a test that expects our message to carry it does not depend on
    the library's wording, which changes between versions."""
    try:
        action()
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
    raise AssertionError(f"{action} raised nothing")


def glob_escape(text: str) -> str:
    """`text` as a literal in fnmatch_lines patterns."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


#: The runners a message lists as known (runners/registry.py), as it lists them.
KNOWN_RUNNERS = ", ".join(sorted(runners.known_runners()))
