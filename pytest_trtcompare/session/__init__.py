"""What one comparison does, without pytest: specs -> inputs -> runners -> outputs -> compare
-> outcome, with session-wide runner caches, per-layer comparison, precision debugging
(precision_debug.py) and the files a failing comparison leaves (artifacts.py, plots.py)."""

from __future__ import annotations

from .runs import LAYER_GROUP, RunnerCache, compare_layers, compare_runners, make_feeds

__all__ = ["LAYER_GROUP", "RunnerCache", "compare_layers", "compare_runners", "make_feeds"]
