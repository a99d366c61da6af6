"""TOML for the tests that read pyproject.toml: tomllib from Python 3.11, tomli before."""

from __future__ import annotations

try:
    from tomllib import loads
except ModuleNotFoundError:  # Python 3.10
    from tomli import loads

__all__ = ["loads"]
