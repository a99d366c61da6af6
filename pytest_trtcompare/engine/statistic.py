"""Every statistic, the engine's and a user's: one class, registered once, shown everywhere a
result goes.

`Statistic` is the interface: `update(chunk)` for each chunk of the output pair, in any
order; `merge(other)` for the same statistic of the chunks that follow (two halves give the
figures of the whole); `compute()` for its figures, by the names in `figures`. A subclass
passed to `register_statistic` (the engine's own: engine/scan.py) is fed by every
comparison's scan, and its figures become attributes of the output's result
(`result.outputs["logits"].rms_error`), a line of its failure report and of its pass line
(`describe`), figures of the accuracy record (the JSON report's) and the JUnit properties
`trtcompare.<output>.<figure>`, as its class attributes declare.

A chunk (engine/chunks.py `ErrorChunk`) holds the errors of the elements it compares
(`compared` of them; NaN errors are counted apart): `chunk.whole_chunk()` gives them in
float64, `abs_err` (|a - e|) and `rel_err` (|a - e| / |e|), arrays of `chunk.xp`, the
array namespace (numpy's, or torch's for a tensor on its device). A chunk of bit-equal sides
(`chunk.equal`) has empty arrays: its `compared` errors are all 0.
"""

from __future__ import annotations

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

    #: the names of the figures `compute` gives: attributes of the output's result
    figures: ClassVar[tuple[str, ...]] = ()
    #: "scanned": fed every chunk; "reported": a failure report's (engine/scan.py `Report`)
    when: ClassVar[str] = "scanned"
    #: figures' values where not computed (a figure without one is then no attribute)
    defaults: ClassVar[Mapping[str, Any]] = {}
    #: whether `describe` gives it a report line and its figures (floats) are the record's
    #: `statistics` and JUnit properties by name (else engine/report.py lays them out)
    line: ClassVar[bool] = True
    #: figures the record holds as fields, by JUnit name ({"max_abs_error": "max_abs"})
    record: ClassVar[Mapping[str, str]] = {}
    #: figures equal across paths (the screen, torch, merged halves) to rounding only
    rounded: ClassVar[tuple[str, ...]] = ()

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
#: Their `defaults`, every figure's value where it was not computed
DEFAULTS: dict[str, Any] = {}
#: Their `record`: the figures a record holds as fields of their own, by JUnit property
RECORD_KEYS: dict[str, str] = {}


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
    if statistic in STATISTICS:
        return statistic
    # the result's names (`margin`: Verdict's figure is its), JUnit's and the other figures
    taken = {*OutputComparison.__dataclass_fields__, *dir(OutputComparison)} - {"margin"}
    taken |= {"check", "atol", "rtol", "record", *RECORD_KEYS.values(), *METRICS}
    taken |= {n for s in STATISTICS for n in s.figures}
    clash = sorted(set(names) & taken)
    if clash:
        raise StatisticError(f"{statistic.__name__}.figures: {', '.join(clash)} already taken")
    STATISTICS.append(statistic)
    DEFAULTS.update(statistic.defaults)
    RECORD_KEYS.update(statistic.record)
    return statistic


def recorded(out: Any) -> dict[str, Any]:
    """A result's figures that its record holds: its fields', then its `statistics`."""
    figures = out.figures
    lines = [n for s in STATISTICS if s.line for n in s.figures if n in figures]
    return {n: figures.get(n) for n in RECORD_KEYS} | {n: figures[n] for n in lines}


def updated(statistic: Statistic, chunk: ErrorChunk) -> None:
    """`statistic.update(chunk)`; what it raises becomes a StatisticError naming it."""
    try:
        statistic.update(chunk)
    except Exception as exc:
        raise _failed(statistic, "update", exc) from exc


def computed(statistics: list[Statistic]) -> dict[str, Any]:
    """Every statistic's figures, checked against its `figures`."""
    found: dict[str, Any] = {}
    for statistic in statistics:
        try:
            figures = dict(statistic.compute())
            expected = type(statistic).figures
            if figures.keys() != set(expected):
                raise StatisticError(f"gave {sorted(figures)}, its figures are {list(expected)}")
            if statistic.line:  # (a line's figures, and a record's `statistics`, are floats)
                figures = {name: float(figures[name]) for name in expected}
            found.update(figures)
        except Exception as exc:
            raise _failed(statistic, "compute", exc) from exc
    return found


def _failed(statistic: Statistic, step: str, exc: Exception) -> StatisticError:
    what = str(exc) if isinstance(exc, StatisticError) else f"{type(exc).__name__}: {exc}"
    return StatisticError(f"statistic {type(statistic).__name__}.{step}(): {what}")
