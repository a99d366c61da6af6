"""An output's result as the tests compare it: every figure of the registered statistics
(engine/statistic.py), none listed here."""

from __future__ import annotations

import dataclasses
from typing import Any

from pytest_trtcompare import OutputComparison
from pytest_trtcompare.engine.statistic import STATISTICS

#: The figures equal across paths (the screen, torch, merged halves) to rounding only
ROUNDED = tuple(name for statistic in STATISTICS for name in statistic.rounded)


def flat(out: OutputComparison, leave_out: tuple[str, ...] = ()) -> dict[str, Any]:
    """Its fields and figures in one dict (ElementErrors as dicts), less `leave_out`."""
    data = dataclasses.asdict(out)
    data |= data.pop("figures")
    return {name: value for name, value in data.items() if name not in leave_out}


def replaced(out: OutputComparison, **changes: Any) -> OutputComparison:
    """`dataclasses.replace`, figures among the changes (a figure it lacks stays out)."""
    header = {f.name for f in dataclasses.fields(out)}
    figures = {**out.figures, **{k: v for k, v in changes.items() if k in out.figures}}
    kept = {k: v for k, v in changes.items() if k in header}
    return dataclasses.replace(out, **kept, figures=figures)
