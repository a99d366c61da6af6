"""Our failures on the terminal: fitted to its width, one line with --tb=line and --tb=no.

The width is pytest's (its TerminalWriter's `fullwidth`: COLUMNS, else the terminal, else 80
when output is not a terminal); xdist workers print nothing themselves, so the controller
hands them its width. The text of an error stays as raised (`str(error)` is what a caller
of assert_outputs_close catches); only the report pytest prints is laid out again.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import _pytest
import pluggy
import pytest
from _pytest._code.code import ExceptionChainRepr, ReprEntry, ReprFileLocation

from ..errors import TrtCompareError
from ..session.layout import fit_text

WIDTH_KEY = "trtcompare_width"
#: On an exception we raised: its outcome in one line (session/brief.py).
ONE_LINE = "trtcompare_one_line"


def terminal_width(config: pytest.Config) -> int:
    """The width pytest prints to; on an xdist worker, the controller's."""
    given = getattr(config, "workerinput", {}).get(WIDTH_KEY)
    if given:
        return int(given)
    if config.pluginmanager.get_plugin("terminalreporter") is None:
        return shutil.get_terminal_size().columns
    return int(config.get_terminal_writer().fullwidth)


def hand_width_to(node: Any, config: pytest.Config) -> None:
    """pytest_configure_node: a worker lays its failures out to the controller's width."""
    node.workerinput[WIDTH_KEY] = terminal_width(config)


#: set on a failure that carries one of our errors (golden.check's ToleranceError ...)
OUR_ERROR = "trtcompare_our_error"


def call_site(item: pytest.Item, excinfo: Any) -> str:
    """'\n  at test_m.py:12 in test_x: compare(a, b, atol=-1)': the user's line that called
    us when one of our errors fails a test body, whose traceback is not shown ('' when the
    error did not come through a file of the user's)."""
    entry = _user_entry(item, excinfo)
    if entry is None:
        return ""
    path = str(entry.path)
    shown = os.path.relpath(path, item.config.invocation_params.dir)
    if shown.startswith(".."):
        shown = path
    statement = str(entry.statement).strip().splitlines()
    code = f": {statement[0]}" if statement else ""
    return f"\n  at {shown}:{entry.lineno + 1} in {entry.name}{code}"


def point_at_call_site(longrepr: Any, item: pytest.Item, excinfo: Any) -> None:
    """Make a message-only failure's crash location (what --tb=line prints) the user's line
    that called us, not the test's `def` line."""
    entry = _user_entry(item, excinfo)
    crash = getattr(longrepr, "reprcrash", None)
    if entry is not None and isinstance(crash, ReprFileLocation):
        crash.path, crash.lineno = str(entry.path), entry.lineno + 1


def _user_entry(item: pytest.Item, excinfo: Any) -> Any:
    """The innermost traceback entry in a file of the user's under the rootdir, or None."""
    root = str(item.config.rootpath) + os.sep
    for entry in reversed(getattr(excinfo, "traceback", None) or []):
        path = str(entry.path)
        if path.endswith(".py") and path.startswith(root) and _user_file(path):
            return entry
    return None  # only the standard library, site-packages, pytest, this plugin


def mark(error: BaseException, line: str) -> None:
    """Remember the outcome's one-line form on the exception that fails the test."""
    setattr(error, ONE_LINE, line)


def shape_failure(
    report: pytest.TestReport, error: BaseException | None, item: pytest.Item
) -> None:
    """Fit a failure of ours to the terminal, or make it one line (--tb=line / --tb=no)."""
    config = item.config
    line = _one_line(error)
    longrepr = report.longrepr
    if line is None or not isinstance(longrepr, ExceptionChainRepr):
        return
    width = terminal_width(config)
    if config.option.tbstyle in ("line", "no"):
        reprtraceback, reprcrash, _ = longrepr.chain[-1]
        reprtraceback.reprentries = []
        reprtraceback.extraline = None
        crash = reprcrash or ReprFileLocation("", 0, line)
        crash.message = line
        if not crash.path or not _user_file(crash.path):  # a verdict outside the body: the test
            crash.path, crash.lineno = str(item.path), (item.reportinfo()[1] or 0) + 1
        longrepr.chain = [(reprtraceback, crash, None)]
        longrepr.reprcrash = crash
        return
    for reprtraceback, _, _ in longrepr.chain:
        reprtraceback.extraline = None  # "All traceback entries are hidden": ours, on purpose
        for entry in reprtraceback.reprentries:
            if isinstance(entry, ReprEntry):
                entry.lines = _fit_entry(list(entry.lines), entry.style, width)
    report.sections = [  # ours: settle.py's LIBRARY_TRACEBACK_HEADING
        (name, fit_text(content, width) if name.startswith("the library's") else content)
        for name, content in report.sections
    ]


#: Where a crash is not the user's: pytest, pluggy and this package.
_NOT_USER = tuple(
    str(Path(module.__file__).resolve().parent)
    for module in (pluggy, _pytest, sys.modules[__name__.split(".")[0]])
    if module.__file__
)


def _user_file(path: str) -> bool:
    return not str(Path(path).resolve()).startswith(_NOT_USER)


def _one_line(error: BaseException | None) -> str | None:
    if error is None:
        return None
    from ..engine import OutputMismatchError  # the plugin imports this module at every run
    from ..session.brief import joined

    line = getattr(error, ONE_LINE, None)
    if isinstance(line, str):
        if isinstance(error, OutputMismatchError):
            return f"{type(error).__name__}: {line}"
        return line
    if isinstance(error, TrtCompareError):
        return joined(f"{type(error).__name__}: {error}")
    return None


def _fit_entry(lines: list[str], style: str, width: int) -> list[str]:
    """A traceback entry's message fitted: all of it in the 'value' style (a failure with no
    traceback), else the lines pytest marks with 'E', inside their marker's indent."""
    if style == "value":
        return fit_text("\n".join(lines), width).split("\n")
    marked = [i for i, line in enumerate(lines) if line.startswith("E")]
    if not marked:
        return lines
    first = lines[marked[0]]
    prefix = len(first) - len(first[1:].lstrip(" "))
    body = "\n".join(lines[i][prefix:] for i in marked)
    fitted = fit_text(body, max(width - prefix, 20)).split("\n")
    marker = first[:prefix]
    return [*lines[: marked[0]], *(marker + text for text in fitted), *lines[marked[-1] + 1 :]]
