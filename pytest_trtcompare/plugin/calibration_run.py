"""Calibrated tolerances: `--trt-calibrate=N` runs every compare_frameworks case on N input
draws and writes the tolerances they suggest to the tolerance file, which later runs read as
the tolerance source `calibrated` (reports/calibration.py: the rule and the file).

Imported with the plugin at every pytest run: what it needs of the reports (numpy, the
engine) is imported when a run uses it.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..reports.calibration import Calibration, Observed

#: The property of a calibrated item: {output: Observed.fields()}.
PROPERTY = "trtcompare-calibration"
FILE_NAME = "trtcompare-tolerances.toml"


def default_file_exists(config: pytest.Config) -> bool:
    """A tolerance file in the rootdir puts the plugin in use from the start (its entries
    are checked against the tests collected)."""
    return (config.rootpath / FILE_NAME).exists()  # a folder there is a usage error


@dataclass(frozen=True)
class CalibrationSettings:
    path: Path  # the tolerance file, read when it exists, written by a calibration run
    seeds: int  # --trt-calibrate: 0 when not calibrating
    earlier: Calibration | None = None  # the file as it was at the start (None: no file)
    #: test node id -> output -> ({"atol", "rtol"}, 'calibrated (5 seeds, 2026-11-28)')
    entries: Mapping[str, Mapping[str, tuple[Mapping[str, float], str]]] = field(
        default_factory=dict
    )


def calibration_settings(config: pytest.Config) -> CalibrationSettings:
    """The file's entries (none where it does not exist); a usage error (exit 4) naming the
    file or option for a damaged file or a bad N."""
    seeds = config.getoption("trt_calibrate")
    if seeds is not None and seeds < 1:
        raise pytest.UsageError(f"--trt-calibrate={seeds}: takes a number of input draws, >= 1")
    given = config.getoption("trt_tolerances_file")
    text = given or str(config.getini("trtcompare_tolerances_file")).strip()
    base = Path(config.invocation_params.dir) if given else config.rootpath
    path = (base / (text or FILE_NAME)).resolve()
    where = f"--trt-tolerances-file={given}" if given else "ini trtcompare_tolerances_file"
    where = where if given or text else f"{FILE_NAME} in the rootdir"
    if path.is_dir():
        raise pytest.UsageError(f"{where}: {path} is a folder; the tolerance file is TOML")
    if seeds and not path.parent.is_dir():
        raise pytest.UsageError(
            f"{where}: {path.parent} does not exist (--trt-calibrate writes the file there)"
        )
    if not path.exists():
        if text and not seeds:
            raise pytest.UsageError(f"{where}: {path} does not exist (--trt-calibrate writes it)")
        return CalibrationSettings(path, seeds or 0)
    from ..errors import ToleranceError
    from ..reports.calibration import read_calibration

    try:
        earlier = read_calibration(path)
    except ToleranceError as exc:
        raise pytest.UsageError(str(exc)) from None
    entries = {
        test: {output: (entry.bounds(), entry.source) for output, entry in outputs.items()}
        for test, outputs in earlier.tests().items()
    }
    return CalibrationSettings(path, seeds or 0, earlier, entries)


def observed_property(results: Iterable[Any]) -> tuple[str, str]:
    """The property of a calibrated item: each output's worst errors over its draws."""
    from ..reports.calibration import observed_of_results

    found = observed_of_results(results)
    return PROPERTY, json.dumps({name: worst.fields() for name, worst in found.items()})


def warn_unknown_tests(
    settings: CalibrationSettings, items: list[pytest.Item], rootpath: Path, worker: bool
) -> None:
    """Entries of a test function that its collected module no longer has (renamed), or of
    a module file that does not exist (a typo, a moved file): named in a warning, never
    silently ignored. An entry whose function is there but whose parameters were not
    collected (another precision, framework or shape set this run) is no news. (Entries
    naming an output the test lacks are warned about where the tolerance is applied.)
    Under `-W error` the warning is a usage error naming the file; in an xdist worker, whose
    failed collection would crash the run, it stays a warning."""
    if not settings.entries:
        return
    functions = {_function(item.nodeid) for item in items}
    modules = {nodeid.split("::", 1)[0] for nodeid in functions}
    unknown = sorted(
        test
        for test in settings.entries
        if (test.split("::", 1)[0] in modules and _function(test) not in functions)
        or not (rootpath / test.split("::", 1)[0]).exists()
    )
    if not unknown:
        return
    shown = ", ".join(unknown[:5])
    shown += f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    from ..engine import first_line_with
    from ..errors import ToleranceWarning

    message = f"tolerances for tests that do not exist: {shown} (renamed? --trt-calibrate "
    message += "writes them anew)"
    try:
        with warnings.catch_warnings():
            if worker:
                warnings.simplefilter("always", ToleranceWarning)
            warnings.warn_explicit(  # at the file's first such entry, not in the plugin
                f"{settings.path.name}: {message}",
                ToleranceWarning,
                filename=str(settings.path),
                lineno=first_line_with(settings.path, unknown[0]),
            )
    except ToleranceWarning:  # made an error by -W error / filterwarnings = error
        raise pytest.UsageError(
            f"{settings.path}: {message}; a ToleranceWarning, made an error by -W or filterwarnings"
        ) from None


def _function(nodeid: str) -> str:
    """'m.py::test_x' of 'm.py::test_x[onnxrt-fp16-bs2]' (a class's too)."""
    return nodeid.split("[", 1)[0]


class CalibrationRun:
    """A calibration session's observations (from every item's property, on the xdist
    controller too) and, at its end, the file it writes."""

    def __init__(self, settings: CalibrationSettings) -> None:
        self.settings = settings
        self.observed: dict[tuple[str, str], Observed] = {}
        self.made: Calibration | None = None
        self.error: str | None = None  # why the file could not be written
        self.cases = 0  # compare_frameworks cases that ran, calibrated or not

    def logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        from ..reports.calibration import Observed

        for key, value in report.user_properties:
            if key == PROPERTY:
                self.cases += 1
                for output, fields in json.loads(str(value)).items():
                    found = Observed.of(fields)
                    known = self.observed.setdefault((report.nodeid, output), Observed())
                    known.merge(found)

    def write(self) -> None:
        """The file: the new suggestions and the earlier entries of the tests not run."""
        if not any(worst.suggestable for worst in self.observed.values()):
            return  # metric checks alone: nothing to suggest, the file left as it is
        from ..atomic import atomic_write_bytes
        from ..reports.calibration import suggest, to_toml

        seeds = self.settings.seeds
        made_from = f"{seeds} seed{'' if seeds == 1 else 's'}"
        self.made = suggest(self.observed, made_from, earlier=self.settings.earlier)
        text = to_toml(self.made, f"pytest --trt-calibrate={seeds}")
        try:
            atomic_write_bytes(self.settings.path, text.encode())
        except OSError as exc:
            self.error = str(exc)

    def lines(self, rootpath: Path, width: int, verbosity: int) -> list[str]:
        from ..reports.calibration import calibration_lines
        from ..session.layout import counted, wrap

        path = self.settings.path
        shown = str(path.relative_to(rootpath)) if path.is_relative_to(rootpath) else str(path)
        if self.error is not None:
            return [f"tolerance file NOT written to {shown}: {self.error}"]
        if self.observed and self.made is None:
            lines = wrap(
                f"{shown}: nothing calibrated: {counted(self.cases, 'case')} ran, under "
                "metric checks alone (fp64, cosine, ...), which have no atol to suggest",
                width,
            )
            return lines + [f"  {test} :: {output}" for test, output in sorted(self.observed)]
        if self.made is None:
            return [
                f"{shown}: nothing calibrated (no compare_frameworks case ran; "
                "`trtcompare tolerances REPORT.json` learns from the reports of other tests)"
            ]
        return calibration_lines(self.observed, self.made, f"written {shown}", width, verbosity)
