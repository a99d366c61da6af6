"""The pytest plugin (entry point `pytest11: trtcompare`): the hooks pytest finds here."""

from __future__ import annotations

from .hooks import (
    compare,
    pytest_addoption,
    pytest_configure,
    pytest_report_header,
    pytest_runtest_makereport,
)

__all__ = [
    "compare",
    "pytest_addoption",
    "pytest_configure",
    "pytest_report_header",
    "pytest_runtest_makereport",
]
