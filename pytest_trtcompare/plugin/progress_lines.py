"""Long work on pytest's terminal: the writer of progress.py's lines, when there is a terminal.

A line is written (from the main thread, when the work ends, or while an isolated worker is
being waited on) through the terminal reporter, with pytest's capture suspended as its live
logging does, so it lands on the terminal between test results. Nothing is installed under
`-q`, without the terminal plugin, on an xdist worker (its output never reaches the terminal;
the log records remain), and nothing is written while the terminal is not a TTY (CI logs).
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from .. import progress


def install(config: pytest.Config) -> None:
    """Send progress lines to this session's terminal (see the module doc)."""
    if hasattr(config, "workerinput") or config.get_verbosity() < 0:
        return

    def write(line: str) -> None:
        # looked up here: the terminal plugin registers its reporter after our configure
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or not reporter.isatty:
            return
        capture = config.pluginmanager.get_plugin("capturemanager")
        suspended: Any = (
            capture.global_and_fixture_disabled()
            if capture is not None
            else contextlib.nullcontext()
        )
        with suspended:
            reporter.write_line(line)

    previous = progress.set_writer(write)

    def restore() -> None:
        progress.set_writer(previous)

    config.add_cleanup(restore)
