"""Tolerances no one has to guess: suggested from observed errors, kept in a reviewable file.

Each output's worst observed absolute error (over calibration draws, or over the runs of
several JSON reports) gives its suggestion: atol = FACTOR x that error, rounded up to two
significant digits (0.00123 x 2 = 0.00246 -> 0.0025), and rtol = 0. The error is that of
the statistic the output's tolerance checks (the largest element's for elemwise, the mean's
for check_error_stat="mean", ...). Every element observed passes by atol alone, under either
rule (Polygraphy's: an element fails when both its errors exceed their bounds; allclose's:
abs > atol + rtol |e|), with room for errors FACTOR times as large. No rtol is suggested: the
worst relative error comes from the elements nearest zero (18 against an absolute error of
0.0013 on the examples' attention model in fp16): as a bound it would pass almost anything. An
output exact on every draw gets atol 0: it must stay exact. The file may be edited by hand (an
rtol added, an atol loosened); the next calibration replaces the tests it runs.

The file (`trtcompare-tolerances.toml` in the rootdir) is TOML, one table per test and
output, sorted, so that a change reads as a diff. An entry kept from an earlier calibration
carries its own `made_from` and `date`:

    [calibration]
    made_from = "5 seeds"
    date = "2026-11-28"
    factor = 2.0

    ["tests/test_m.py::test_x[onnxrt-fp16-bs1]".logits]
    atol = 0.0025
    rtol = 0.0
"""

from __future__ import annotations

import datetime
import decimal
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import num
from ..errors import ToleranceError
from ..session.layout import abbreviate, counted, wrap
from ..vocabulary import STAT_CHECKS
from .drift import sortable

FILE_NAME = "trtcompare-tolerances.toml"
#: How much larger than the worst observed error the suggestion is.
FACTOR = 2.0
#: The checks whose atol / rtol calibration suggests (not indices, top-k, metric checks).
CALIBRATED_CHECKS = frozenset(STAT_CHECKS)

Key = tuple[str, str]  # (test node id, output)


@dataclass
class Observed:
    """The worst errors of one output over every draw or run seen (see the module)."""

    abs_error: float = 0.0  # the checked statistic's: what the suggestion bounds
    rel_error: float = 0.0  # the largest element's, shown, not suggested
    draws: int = 0
    margin: float = 0.0  # the worst error / allowed error under the current tolerance
    current: tuple[float | None, float | None] = (None, None)  # the current atol, rtol
    source: str = ""  # where the current atol came from ('default', 'calibrated (...)')
    #: why no tolerance can be suggested ('NaN in actual at 3 positions'): left out of the file
    problem: str | None = None
    #: False where the output's check is not one an atol bounds (a metric, the fp64 check)
    suggestable: bool = True

    def add(self, abs_error: float | None, rel_error: float | None, draws: int = 1) -> None:
        self.draws += draws
        if abs_error is None or not math.isfinite(abs_error):
            self.problem = self.problem or "no finite error to learn from"
        if abs_error is not None and not math.isnan(abs_error):
            self.abs_error = max(self.abs_error, abs_error)
        if rel_error is not None and not math.isnan(rel_error):
            self.rel_error = max(self.rel_error, rel_error)

    def merge(self, other: Observed) -> None:
        """Another run's observations of the same output (a shard, a report)."""
        self.add(other.abs_error, other.rel_error, other.draws)
        self.problem = self.problem or other.problem
        self.suggestable = self.suggestable and other.suggestable
        self.margin = max(self.margin, other.margin)
        self.current, self.source = other.current, other.source or self.source

    def fields(self) -> dict[str, Any]:
        """As the item's property carries it (JSON)."""
        return {
            "abs": self.abs_error,
            "rel": self.rel_error,
            "draws": self.draws,
            "margin": self.margin,
            "atol": self.current[0],
            "rtol": self.current[1],
            "source": self.source,
            "problem": self.problem,
            "suggestable": self.suggestable,
        }

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> Observed:
        return cls(
            float(fields["abs"]),
            float(fields["rel"]),
            int(fields["draws"]),
            float(fields["margin"]),
            (fields["atol"], fields["rtol"]),
            str(fields["source"]),
            fields["problem"],
            bool(fields.get("suggestable", True)),
        )


def round_up(value: float, digits: int = 2) -> float:
    """`value` rounded up to `digits` significant digits (0.00246 -> 0.0025, 0 stays 0)."""
    if value <= 0 or not math.isfinite(value):
        return value
    exponent = math.floor(math.log10(value)) - digits + 1
    step = decimal.Decimal(1).scaleb(exponent)
    exact = decimal.Decimal(f"{value:.12g}")  # 2 x 0.0003 is 0.0006000000000000001 in binary
    rounded = (exact / step).to_integral_value(decimal.ROUND_CEILING)
    return float(rounded * step)


@dataclass(frozen=True)
class Entry:
    """One output's calibrated tolerance and how it was made."""

    atol: float
    rtol: float
    made_from: str  # "5 seeds" (--trt-calibrate), '3 reports' (trtcompare tolerances)
    date: str

    @property
    def source(self) -> str:
        """The tolerance source reports name: 'calibrated (5 seeds, 2026-11-28)'."""
        return f"calibrated ({self.made_from}, {self.date})"

    def bounds(self) -> dict[str, float]:
        return {"atol": self.atol, "rtol": self.rtol}


@dataclass
class Calibration:
    """Calibrated tolerances by (test node id, output), and how the file's newest were made."""

    entries: dict[Key, Entry] = field(default_factory=dict)
    made_from: str = "1 seed"
    date: str = field(default_factory=lambda: datetime.date.today().isoformat())
    factor: float = FACTOR

    def tests(self) -> dict[str, dict[str, Entry]]:
        """The entries by test, then output."""
        found: dict[str, dict[str, Entry]] = {}
        for (test, output), entry in sorted(self.entries.items()):
            found.setdefault(test, {})[output] = entry
        return found


def suggest(
    observed: Mapping[Key, Observed],
    made_from: str,
    factor: float = FACTOR,
    earlier: Calibration | None = None,
) -> Calibration:
    """The suggestions for the outputs observed (not those with a problem), and the earlier
    file's entries of every test not observed now (a test calibrated again loses its old
    entries, an output it no longer has among them)."""
    made = Calibration(made_from=made_from, factor=factor)
    tests = {test for test, _ in observed}
    if earlier is not None:
        made.entries = {k: e for k, e in earlier.entries.items() if k[0] not in tests}
    for key, worst in observed.items():
        if worst.problem is None:
            made.entries[key] = Entry(round_up(worst.abs_error * factor), 0.0, made_from, made.date)
    return made


def to_toml(calibration: Calibration, command: str) -> str:
    lines = [
        f"# Tolerances suggested by {command}: the worst error observed x {calibration.factor:g},",
        "# rounded up to two significant digits (the manual: Choosing tolerances). Review, commit,",
        "# and later runs read them as the tolerance source 'calibrated'.",
        "",
        "[calibration]",
        f"made_from = {_quoted(calibration.made_from)}",
        f"date = {_quoted(calibration.date)}",
        f"factor = {calibration.factor!r}",
    ]
    for (test, output), entry in sorted(calibration.entries.items()):
        lines += ["", f"[{_quoted(test)}.{_quoted(output)}]"]
        lines += [f"atol = {entry.atol!r}", f"rtol = {entry.rtol!r}"]
        if (entry.made_from, entry.date) != (calibration.made_from, calibration.date):
            lines += [f"made_from = {_quoted(entry.made_from)}", f"date = {_quoted(entry.date)}"]
    return "\n".join(lines) + "\n"


def _quoted(key: str) -> str:
    escaped = key.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def read_calibration(path: Path) -> Calibration:
    """The tolerance file, checked: ToleranceError naming the file and what is wrong."""
    if sys.version_info >= (3, 11):
        from tomllib import loads
    else:  # the same library before it joined Python
        from tomli import loads
    try:
        document = loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ToleranceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ToleranceError(f"{path}: not TOML ({exc})") from None
    header = document.pop("calibration", None)
    if not isinstance(header, dict) or not isinstance(header.get("made_from"), str):
        raise ToleranceError(f"{path}: no [calibration] table with made_from, date, factor")
    made = Calibration(
        made_from=header["made_from"],
        date=str(header.get("date", "")),
        factor=_number(path, "[calibration] factor", header.get("factor", FACTOR)),
    )
    for test, outputs in document.items():
        if not isinstance(outputs, dict):
            raise ToleranceError(f"{path}: {test!r} is not a table of outputs")
        for output, fields in outputs.items():
            made.entries[(test, output)] = _entry(path, (test, output), fields, made)
    return made


def _entry(path: Path, key: Key, fields: Any, made: Calibration) -> Entry:
    where = f"[{_quoted(key[0])}.{_quoted(key[1])}]"
    if not isinstance(fields, dict) or not {"atol", "rtol"} <= set(fields):
        raise ToleranceError(f"{path}: {where} needs atol and rtol")
    unknown = sorted(set(fields) - {"atol", "rtol", "made_from", "date"})
    if unknown:
        raise ToleranceError(f"{path}: {where} has {unknown} (it takes atol, rtol)")
    return Entry(
        atol=_number(path, f"{where} atol", fields["atol"]),
        rtol=_number(path, f"{where} rtol", fields["rtol"]),
        made_from=str(fields.get("made_from", made.made_from)),
        date=str(fields.get("date", made.date)),
    )


def _number(path: Path, where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ToleranceError(f"{path}: {where} = {value!r} is not a number >= 0")
    return float(value)


def observed_of_results(results: Iterable[Any]) -> dict[str, Observed]:
    """Each output's worst errors over a case's comparison results (its draws): those of
    the statistic its tolerance checks."""
    found: dict[str, Observed] = {}
    for result in results:
        for name, output in result.outputs.items():
            if not output.gated or output.tolerance.check not in CALIBRATED_CHECKS:
                # metric checks alone (fp64, cosine ...), indices: named, never left out
                checks = [m.check for m in output.metrics] if not output.gated else []
                checks = checks or [output.tolerance.check]
                uncalibrated = found.setdefault(name, Observed())
                one = len(checks) == 1
                uncalibrated.problem = (
                    f"{'its' if one else 'their'} {' and '.join(checks)} "
                    f"{'check has' if one else 'checks have'} no atol to suggest"
                )
                uncalibrated.suggestable = False
                uncalibrated.margin = max(uncalibrated.margin, output.margin)
                continue
            worst = found.setdefault(name, Observed())
            worst.add(output.required_atol, output.max_rel_error)
            if output.failure:
                worst.problem = output.failure
            worst.margin = max(worst.margin, output.margin)
            worst.current = (output.tolerance.atol, output.tolerance.rtol)
            worst.source = output.tolerance.sources.get("atol", "default")
        for name in (*result.missing_in_actual, *result.missing_in_expected):
            found.setdefault(name, Observed()).problem = f"output {name!r} missing"
    return found


def observed_from(records: Iterable[Any]) -> dict[Key, Observed]:
    """The worst errors of each output over records (of several reports, runs, shards):
    model outputs that an atol / rtol bounds and that were not expected to fail."""
    found: dict[Key, Observed] = {}
    for record in records:
        if record.check not in CALIBRATED_CHECKS or record.node is not None or record.xfailed:
            continue
        worst = found.setdefault((record.nodeid or record.test, record.output), Observed())
        errors = (record.checked_abs_error, record.max_rel_error)
        if errors[0] is None and record.check in ("elemwise", "max"):
            errors = (record.max_abs_error, record.max_rel_error)  # a report before 0.9
        if errors[0] is None:
            worst.draws += 1
            worst.problem = (
                worst.problem
                or record.failure
                or (f"the report holds no {record.check} errors (write it with this version)")
            )
            continue
        worst.add(*errors)
        if record.failure:
            worst.problem = worst.problem or record.failure
        worst.margin = max(worst.margin, record.margin)
        worst.current = (record.atol, record.rtol)
        worst.source = record.tolerance_sources.get("atol", "")
    return found


def calibration_lines(
    observed: Mapping[Key, Observed],
    made: Calibration,
    written: str,
    width: int,
    verbosity: int = 0,
) -> list[str]:
    """The session-end table: each output's worst observed errors, the suggestion, the
    current tolerance and its headroom (allowed / worst error: under 1 fails now), the
    closest to failing first; the 20 first (all with -v). Where a row is wider than the
    terminal, each output takes two lines: its name, then its figures (and between them,
    wrapped, why it is not calibrated)."""
    usable = [key for key, worst in observed.items() if worst.problem is None]
    lines = wrap(
        f"{written}: {counted(len(usable), 'output')} of "
        f"{counted(len({test for test, _ in usable}), 'test')}; "
        f"atol = {made.factor:g}x the worst abs error, rounded up to 2 digits; rtol 0",
        width,
    )
    ordered = sorted(observed.items(), key=lambda kv: (-sortable(kv[1].margin), kv[0]))
    shown = ordered[: None if verbosity > 0 else 20]
    rows = [_HEADS, *(_row(key, worst, made) for key, worst in shown)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADS) - 1)]
    figures = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) for r in rows]
    names = [row[-1] for row in rows]
    if all(len(f + "  " + n) <= width for f, n in zip(figures, names, strict=True)):
        lines += [f"{f}  {n}".rstrip() for f, n in zip(figures, names, strict=True)]
    else:
        for text, name in zip(figures, names, strict=True):
            name, note, why = name.partition(" (not calibrated: ")
            lines.append(abbreviate(name, width))
            lines += wrap(f"    {note.strip()}{why}", width) if note else []
            lines.append(abbreviate("    " + text.rstrip(), width))
    if len(ordered) > len(shown):
        lines.append(f"... and {len(ordered) - len(shown)} more outputs (-v lists them)")
    shadowed = sum(w.source.split(" ", 1)[0] in _ABOVE for w in observed.values())
    if shadowed:
        lines += wrap(
            f"{counted(shadowed, 'output')} {'keeps' if shadowed == 1 else 'keep'} a "
            "tolerance given above the file (marker, call, command line, golden): their "
            "suggestion is written, not applied",
            width,
        )
    return lines


_HEADS = ("worst abs / rel", "suggested atol", "current atol / rtol", "headroom", "test :: output")
_ABOVE = ("option", "marker", "call", "golden")


def _row(key: Key, worst: Observed, made: Calibration) -> tuple[str, ...]:
    name = f"{key[0]} :: {key[1]}"
    if worst.problem is not None:
        return ("-", "-", _current(worst), "-", f"{name} (not calibrated: {worst.problem})")
    return (
        f"{num(worst.abs_error, 2)} / {num(worst.rel_error, 2)}",
        num(made.entries[key].atol),
        _current(worst),
        _headroom(worst.margin),
        name,
    )


def _current(worst: Observed) -> str:
    atol, rtol = worst.current
    if atol is None or rtol is None:
        return "-"
    source = worst.source.split(" ", 1)[0]  # 'calibrated', not its date
    return f"{num(atol)} / {num(rtol)} ({source})" if source else f"{num(atol)} / {num(rtol)}"


def _headroom(margin: float) -> str:
    """How many times the worst error fits in the current tolerance."""
    if margin == 0:
        return "exact"
    if not math.isfinite(margin):
        return "none"
    return f"{num(1 / margin, 3)}x"
