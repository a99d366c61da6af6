"""A statistic of your own: one class, registered once, shown everywhere a result goes.

`Statistic` is the interface of every statistic of the engine (engine/accumulators.py,
figures.py, decades.py, quantiles.py): `update(chunk)` for each chunk of the output pair,
in any order; `merge(other)` for the same statistic of the chunks that follow (two halves
give the figures of the whole); `compute()` for its figures, by the names in `figures`.
The engine's own are listed in engine/scan.py (`SCANNED`, `REPORTED`): their figures are
the fields of the output's result of the same names (`max_abs_error`, `histogram` ...).
A subclass passed to `register_statistic` is fed by every comparison's scan, and its
figures become attributes of the output's result (`result.outputs["logits"].rms_error`), a
line of its failure report and of its pass line (`describe`), the accuracy record's
`statistics` (the JSON report's) and the JUnit properties `trtcompare.<output>.<figure>`.

A chunk (engine/chunks.py `ErrorChunk`) holds the errors of the elements it compares
(`compared` of them; NaN errors are counted apart): `chunk.whole_chunk()` gives them in
float64, `abs_err` (|a - e|) and `rel_err` (|a - e| / |e|), arrays of `chunk.xp`, the
array namespace (numpy's, or torch's for a tensor on its device). A chunk of bit-equal sides
(`chunk.equal`) has empty arrays: its `compared` errors are all 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from ..errors import StatisticError
from ..vocabulary import METRICS
from .chunks import ErrorChunk
from .digits import num
from .outputs import OutputComparison
from .tolerance import Tolerance

__all__ = ["STATISTICS", "Statistic", "register_statistic"]


class Statistic:
    """One statistic of an output pair (see the module's text)."""

    #: the names of the figures `compute` gives: result attributes and record fields
    figures: ClassVar[tuple[str, ...]] = ()

    def __init__(self, tolerance: Tolerance) -> None:
        self.tolerance = tolerance

    @classmethod
    def for_pair(cls, pair: Any) -> Statistic:
        """One for an output pair (engine/scan.py `Pair`): of its tolerance, unless the
        statistic needs more of the pair (its size, a way to read it again)."""
        return cls(pair.tol)

    def update(self, chunk: ErrorChunk) -> None:
        raise NotImplementedError

    def merge(self, other: Any) -> None:
        raise NotImplementedError

    def compute(self) -> Mapping[str, Any]:
        raise NotImplementedError

    @classmethod
    def describe(cls, figures: Mapping[str, float]) -> str:
        """Its text in the report: 'rms_error 0.0123' for each figure."""
        return ", ".join(f"{name} {num(figures[name])}" for name in cls.figures)


#: The registered statistics, in order: the scan feeds one of each to every output.
STATISTICS: list[type[Statistic]] = []

#: A figure's name is an attribute of the result and a JUnit property beside these.
_TAKEN = (
    {field.name for field in dataclasses.fields(OutputComparison)}
    | {name for name in dir(OutputComparison) if not name.startswith("_")}
    | {"max_abs", "max_rel", "check", "atol", "rtol", "record", *METRICS}
)


def register_statistic(statistic: type[Statistic]) -> type[Statistic]:
    """Feeds `statistic` to every comparison from now on (usable as a class decorator);
    registering it again does nothing."""
    if not (isinstance(statistic, type) and issubclass(statistic, Statistic)):
        raise StatisticError(f"register_statistic takes a Statistic subclass, not {statistic!r}")
    names = statistic.figures
    if (
        not isinstance(names, (tuple, list))
        or not names
        or not all(isinstance(name, str) and name.isidentifier() for name in names)
        or len(set(names)) < len(names)
    ):
        raise StatisticError(
            f"{statistic.__name__}.figures must be a tuple of distinct names (identifiers), "
            f"e.g. ('rms_error',), got {names!r}"
        )
    taken = sorted(set(names) & (_TAKEN | {n for s in STATISTICS for n in s.figures}))
    if taken and statistic not in STATISTICS:
        raise StatisticError(f"{statistic.__name__}.figures: {', '.join(taken)} already taken")
    if statistic not in STATISTICS:
        STATISTICS.append(statistic)
    return statistic


def updated(statistic: Statistic, chunk: ErrorChunk) -> None:
    """`statistic.update(chunk)`; what it raises becomes a StatisticError naming it."""
    try:
        statistic.update(chunk)
    except Exception as exc:
        raise _failed(statistic, "update", exc) from exc


def computed(statistics: list[Statistic]) -> dict[str, float]:
    """Every statistic's figures, checked against its `figures`."""
    found: dict[str, float] = {}
    for statistic in statistics:
        try:
            figures = dict(statistic.compute())
            expected = type(statistic).figures
            if set(figures) != set(expected):
                raise StatisticError(f"gave {sorted(figures)}, its figures are {list(expected)}")
            found.update((name, float(figures[name])) for name in expected)
        except Exception as exc:
            raise _failed(statistic, "compute", exc) from exc
    return found


def _failed(statistic: Statistic, step: str, exc: Exception) -> StatisticError:
    what = str(exc) if isinstance(exc, StatisticError) else f"{type(exc).__name__}: {exc}"
    return StatisticError(f"statistic {type(statistic).__name__}.{step}(): {what}")
