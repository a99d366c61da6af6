"""Drift before failure (`--trt-baseline=REPORT.json`): each output's margin against the
same output's in an earlier run's JSON report, at session end (reports/drift.py decides).

By default drift is shown (a `drift` section; pytest's last line counts the drifted outputs,
in yellow) and the session's verdict is left alone; `--trt-drift=fail` fails the session.
This module is imported with the plugin at every pytest run: what it needs of the reports
(numpy, the engine) is imported when a run sets a baseline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ..session.option_table import DRIFT_MODES


@dataclass(frozen=True)
class DriftSettings:
    """The baseline read and checked at the start, and the drift rule."""

    baseline: Path
    margins: dict[tuple[str, str], float] = field(repr=False)
    mode: str = "warn"
    ratio: float = 2.0
    limit: float = 0.5


def drift_settings(config: pytest.Config) -> DriftSettings | None:
    """None without a baseline; a usage error (exit 4) naming the option for a baseline that
    is missing, not a report, of another report format, or a bad mode or number."""
    mode = config.getoption("trt_drift") or str(config.getini("trtcompare_drift")).strip()
    if mode and mode not in DRIFT_MODES:
        raise pytest.UsageError(f"ini trtcompare_drift = {mode!r}: takes warn or fail")
    ratio = _number(config, "ratio", 2.0, low=1.0)
    limit = _number(config, "margin", 0.5, low=0.0)
    given = config.getoption("trt_baseline")
    text = given or str(config.getini("trtcompare_baseline")).strip()
    if not text:
        flags = [f"--trt-drift{n}" for n in ("", "-ratio", "-margin") if _given(config, n)]
        if flags:  # a drift gate that would silently gate nothing
            raise pytest.UsageError(
                f"{', '.join(flags)}: needs --trt-baseline=REPORT.json (or ini "
                "trtcompare_baseline), the report to compare with"
            )
        return None
    where = f"--trt-baseline={given}" if given else "ini trtcompare_baseline"
    base = Path(config.invocation_params.dir) if given else config.rootpath
    path = (base / text).resolve()
    from ..errors import ReportError
    from ..reports.document import read_report
    from ..reports.drift import margins

    try:
        report = read_report(path)
    except ReportError as exc:
        raise pytest.UsageError(f"{where}: {exc}") from None
    return DriftSettings(
        baseline=path,
        margins=margins(report.records),
        mode=mode or "warn",
        ratio=ratio,
        limit=limit,
    )


def _given(config: pytest.Config, suffix: str) -> bool:
    """Whether the command line gave --trt-drift<suffix> (ini defaults stay quiet)."""
    return config.getoption(f"trt_drift{suffix.replace('-', '_')}") is not None


def _number(config: pytest.Config, which: str, default: float, low: float) -> float:
    given = config.getoption(f"trt_drift_{which}")
    text = given or str(config.getini(f"trtcompare_drift_{which}")).strip()
    if not text:
        return default
    where = f"--trt-drift-{which}={given}" if given else f"ini trtcompare_drift_{which}"
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > low):
        raise pytest.UsageError(f"{where}: takes a number above {low:g}, not {text!r}")
    return value
