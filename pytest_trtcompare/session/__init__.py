"""What one comparison does, without pytest: specs -> inputs -> runners -> outputs -> compare
-> outcome, with session-wide runner caches, per-layer comparison, precision debugging
(precision_debug.py) and the files a failing comparison leaves (artifacts.py, plots.py)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: Bound on first use: the plugin imports session.layout at every pytest run, and that must
#: not import runs.py (numpy, the engine, the runners).
_LAZY = frozenset({"RunnerCache", "compare_layers", "compare_runners", "make_feeds"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(".runs", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    from .runs import RunnerCache, compare_layers, compare_runners, make_feeds

__all__ = ["RunnerCache", "compare_layers", "compare_runners", "make_feeds"]
