"""Drift before failure: each output's margin (worst error / allowed error, over 1 fails)
against the same output's in an earlier run's JSON report (`--trt-baseline`, `trtcompare
drift`).

An output is matched to its baseline record by its test's node id and its name. It drifted
when its margin grew `ratio` times or more, or crossed `limit` from below; an output that
now fails where it passed drifted too. A baseline margin under FLOOR counts as FLOOR: an
output exact in the baseline (margin 0: a golden checked on the machine that wrote it, a
bit-exact twin) drifted once its margin reaches `ratio` x FLOOR (0.02 by default), while a
rounding error under that is no news. Outputs new since the baseline, and outputs gone, are
listed apart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..engine import num
from .summary import Record, table

#: The defaults: a margin that doubles, or passes half of the tolerance.
RATIO = 2.0
LIMIT = 0.5
#: The least baseline margin a ratio is taken from (1% of the allowed error).
FLOOR = 0.01


@dataclass(frozen=True)
class Drifted:
    """One output whose margin moved toward failing."""

    key: tuple[str, str]  # (node id, output)
    before: float
    now: float
    why: str  # 'grew 2.4x', 'crossed 0.5', 'now fails'


@dataclass
class Drift:
    """What a run's records did against the baseline's."""

    drifted: list[Drifted] = field(default_factory=list)
    new: list[tuple[str, str]] = field(default_factory=list)
    gone: list[tuple[str, str]] = field(default_factory=list)
    compared: int = 0  # outputs found in both

    def __bool__(self) -> bool:
        return bool(self.drifted)


def key_of(record: Record) -> tuple[str, str]:
    """A record's place in any run: its test's node id (its name in reports before node
    ids) and its output."""
    return (record.nodeid or record.test, record.output)


def margins(records: Iterable[Record]) -> dict[tuple[str, str], float]:
    return {key_of(record): record.margin for record in records}


def drift(
    baseline: dict[tuple[str, str], float],
    records: Sequence[Record],
    ratio: float = RATIO,
    limit: float = LIMIT,
) -> Drift:
    """The outputs of `records` that drifted from `baseline` (margins by key)."""
    found = Drift()
    seen = set()
    for record in records:
        key = key_of(record)
        seen.add(key)
        if key not in baseline:
            found.new.append(key)
            continue
        found.compared += 1
        why = _why(baseline[key], record.margin, ratio, limit)
        if why:
            found.drifted.append(Drifted(key, baseline[key], record.margin, why))
    found.gone = sorted(key for key in baseline if key not in seen)
    found.drifted.sort(key=lambda d: (-sortable(d.now), d.key))
    return found


def _why(before: float, now: float, ratio: float, limit: float) -> str:
    if math.isnan(now) or math.isnan(before):
        return ""
    if now > 1 >= before:
        return "now fails"
    if before < limit <= now:
        return f"crossed {num(limit)}"
    if before < now and now >= ratio * max(before, FLOOR) and math.isfinite(now):
        if before == 0:
            return "grew from 0"
        if before < FLOOR:
            return f"grew from under {num(FLOOR)}"
        return f"grew {num(now / before, 3)}x"
    return ""


def sortable(margin: float) -> float:
    """A margin to sort by, NaN last among the closest to failing first."""
    return margin if not math.isnan(margin) else -1.0


def drift_lines(found: Drift, baseline: str, width: int, verbosity: int = 0) -> list[str]:
    """The `drift` section: a row per drifted output (its margin then and now, why), then
    the new and gone outputs (their count; with -v, each)."""
    lines = [
        f"against {baseline}: {len(found.drifted)} of {found.compared} outputs drifted"
        + (f", {len(found.new)} new" if found.new else "")
        + (f", {len(found.gone)} gone" if found.gone else "")
    ]
    if found.drifted:
        rows = [
            (num(d.before, 3), num(d.now, 3), d.why, f"{d.key[0]} :: {d.key[1]}")
            for d in found.drifted
        ]
        texts = table([_HEADS, *rows])
        if all(len(text) <= width for text in texts):
            lines += texts
        else:  # too wide: each output's name on its line, its figures under it (no cut)
            shown = table([row[:3] for row in [_HEADS, *rows]])
            for row, text in zip([_HEADS, *rows], shown, strict=True):
                lines += [row[3], "    " + text]
    for label, keys in (("new", found.new), ("gone", found.gone)):
        if keys and verbosity > 0:
            lines += [f"  {label}: {test} :: {output}" for test, output in keys]
    return lines


_HEADS = ("before", "now", "why", "test :: output")
