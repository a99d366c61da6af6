"""Tolerances no one has to guess: suggested from observed errors, kept in a reviewable file.

Each output's worst observed errors (over calibration seeds, or over the runs of several JSON
reports) give its suggestion: atol = FACTOR x the worst absolute error and rtol = FACTOR x
the worst relative error, each rounded up to two significant digits (0.00123 x 2 = 0.00246
-> 0.0025). Under either rule (Polygraphy's: an element fails when both its errors exceed
their bounds; allclose's: abs > atol + rtol |e|) no element observed fails at the
suggestion, with room for errors FACTOR times as large.

The file (`trtcompare-tolerances.toml` in the rootdir) is TOML, one table per test and
output, sorted, so that a change reads as a diff:

    [calibration]
    made_from = "5 seeds"
    date = "2026-11-28"
    factor = 2.0

    ["tests/test_m.py::test_x[onnxrt-fp16-bs1]".logits]
    atol = 0.0025
    rtol = 0.034
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ToleranceError

FILE_NAME = "trtcompare-tolerances.toml"
#: How much larger than the worst observed error the suggestion is.
FACTOR = 2.0


@dataclass
class Observed:
    """The worst errors of one output over every run seen."""

    abs_error: float = 0.0
    rel_error: float = 0.0
    runs: int = 0

    def add(self, abs_error: float | None, rel_error: float | None) -> None:
        self.runs += 1
        if abs_error is not None and not math.isnan(abs_error):
            self.abs_error = max(self.abs_error, abs_error)
        if rel_error is not None and not math.isnan(rel_error):
            self.rel_error = max(self.rel_error, rel_error)


def round_up(value: float, digits: int = 2) -> float:
    """`value` rounded up to `digits` significant digits (0.00246 -> 0.0025, 0 stays 0)."""
    if value <= 0 or not math.isfinite(value):
        return value
    exponent = math.floor(math.log10(value)) - digits + 1
    step = decimal.Decimal(1).scaleb(exponent)
    rounded = (decimal.Decimal(repr(value)) / step).to_integral_value(decimal.ROUND_CEILING)
    return float(rounded * step)


def suggestion(observed: Observed, factor: float = FACTOR) -> dict[str, float]:
    return {
        "atol": round_up(observed.abs_error * factor),
        "rtol": round_up(observed.rel_error * factor),
    }


@dataclass
class Calibration:
    """Suggested tolerances by (test node id, output), and how they were made."""

    entries: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    made_from: str = "1 seed"  # '5 seeds' (--trt-calibrate), '3 reports' (trtcompare tolerances)
    date: str = field(default_factory=lambda: datetime.date.today().isoformat())
    factor: float = FACTOR

    @property
    def source(self) -> str:
        """The tolerance source reports name: 'calibrated (5 seeds, 2026-11-28)'."""
        return f"calibrated ({self.made_from}, {self.date})"

    def for_test(self, nodeid: str) -> dict[str, dict[str, float]]:
        return {output: fields for (test, output), fields in self.entries.items() if test == nodeid}


def suggest(
    observed: Mapping[tuple[str, str], Observed], made_from: str, factor: float = FACTOR
) -> Calibration:
    return Calibration(
        {key: suggestion(worst, factor) for key, worst in sorted(observed.items())},
        made_from=made_from,
        factor=factor,
    )


def counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def to_toml(calibration: Calibration, command: str) -> str:
    lines = [
        f"# Tolerances suggested by {command}: the worst error observed x {calibration.factor:g},",
        "# rounded up to two significant digits (README: Choosing tolerances). Review, commit,",
        "# and later runs read them as the tolerance source 'calibrated'.",
        "",
        "[calibration]",
        f'made_from = "{calibration.made_from}"',
        f'date = "{calibration.date}"',
        f"factor = {calibration.factor!r}",
    ]
    for (test, output), fields in sorted(calibration.entries.items()):
        lines += ["", f"[{_quoted(test)}.{_quoted(output)}]"]
        lines += [f"{name} = {value!r}" for name, value in sorted(fields.items())]
    return "\n".join(lines) + "\n"


def _quoted(key: str) -> str:
    escaped = key.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def read_calibration(path: Path) -> Calibration:
    """The tolerance file, checked: ToleranceError naming the file and what is wrong."""
    try:
        from tomllib import loads
    except ModuleNotFoundError:  # Python 3.10
        from tomli import loads
    try:
        document = loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ToleranceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ToleranceError(f"{path}: not TOML ({exc})") from None
    header = document.pop("calibration", None)
    if not isinstance(header, dict):
        raise ToleranceError(f"{path}: no [calibration] table (made_from, date, factor)")
    entries: dict[tuple[str, str], dict[str, float]] = {}
    for test, outputs in document.items():
        if not isinstance(outputs, dict):
            raise ToleranceError(f"{path}: {test!r} is not a table of outputs")
        for output, fields in outputs.items():
            entries[(test, output)] = _fields(path, test, output, fields)
    return Calibration(
        entries,
        made_from=str(header.get("made_from", "")),
        date=str(header.get("date", "")),
        factor=float(header.get("factor", FACTOR)),
    )


def _fields(path: Path, test: str, output: str, fields: Any) -> dict[str, float]:
    where = f"{path}: [{_quoted(test)}.{_quoted(output)}]"
    if not isinstance(fields, dict) or not fields:
        raise ToleranceError(f"{where} holds no atol / rtol")
    unknown = sorted(set(fields) - {"atol", "rtol"})
    if unknown:
        raise ToleranceError(f"{where}: {unknown} (it takes atol and rtol)")
    for name, value in fields.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ToleranceError(f"{where}: {name} = {value!r} is not a number >= 0")
    return {name: float(value) for name, value in fields.items()}


def observed_from(records: Iterable[Any]) -> dict[tuple[str, str], Observed]:
    """The worst errors of each output over records (of several reports, runs, shards)."""
    found: dict[tuple[str, str], Observed] = {}
    for record in records:
        if record.check is None:  # a missing output: no error to learn from
            continue
        key = (record.nodeid or record.test, record.output)
        found.setdefault(key, Observed()).add(record.max_abs_error, record.max_rel_error)
    return found
