"""Command-line options and ini keys, read and validated once into a frozen `Settings`.

pytest-xdist's habit: normalise every option in one place at configure time, then hand the
settings object to whoever needs it. A bad value is a usage error (exit 4) naming the option.
"""

from __future__ import annotations

import functools
import shlex
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ..engine import Tolerance
from ..errors import RunnerOptionError, ToleranceError, UnknownFrameworkError
from ..runners import canonical_framework, check_framework_name
from ..session.devices import parse_device
from ..session.option_table import option as declared_option
from ..session.option_table import resolve, session_values
from ..session.settings import (
    ToleranceSettings,
    parse_ini_tolerances,
    parse_input_shapes,
    parse_metrics,
    parse_val_range,
)
from ..vocabulary import parse_precisions
from .calibration_run import CalibrationSettings, calibration_settings
from .drift_gate import DriftSettings, drift_settings
from .names import UPDATE_GOLDENS, ini_value
from .split_paths import check_split_paths


@dataclass(frozen=True)
class Settings:
    """Everything the command line and ini decide, validated."""

    precisions: tuple[str, ...]
    tolerances: ToleranceSettings
    update_goldens: bool
    update_goldens_missing: bool  # write goldens that do not exist; leave the others alone
    repeat_options: tuple[str, ...]  # what a printed pytest command must repeat (ids, places)
    prune_goldens: bool
    strict_goldens: bool  # unused goldens fail the session
    goldens_root: Path | None  # None: beside each test module
    frameworks: tuple[str, ...] | None
    report_path: Path | None
    artifacts_root: Path | None  # None: under pytest's basetemp
    engine_cache: str | None
    isolate: bool
    debug_precision: bool  # --trt-debug-precision
    verbosity: int
    rootpath: Path
    library_tracebacks: bool  # --tb=long or -vv: a framework's error shows its traceback
    input_shapes: dict[str, tuple[int, ...]] | None = None  # --trt-input-shapes: one shape set
    seed: int | None = None  # --trt-seed
    val_range: Any = None  # --trt-val-range
    #: session/option_table.py `session_values`: (flag, ini) of each option with choices
    values: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    suite: str = ""  # ini trtcompare_suite, else the rootdir's name: the JSON report's
    drift: DriftSettings | None = None  # --trt-baseline and its rule (plugin/drift_gate.py)
    calibration: CalibrationSettings | None = None  # the tolerance file, --trt-calibrate
    device: str | None = None  # --trt-device, ini trtcompare_device (`_device`)
    worker: str | None = None  # this process's pytest-xdist worker id ('gw3'), else None
    update_flag: ClassVar[str] = UPDATE_GOLDENS  # what a printed command writes

    @property
    def artifacts_mode(self) -> str:
        """--trt-artifacts > ini trtcompare_artifacts_mode > failed."""
        return str(resolve("artifacts", None, self.values))


def _path(config: pytest.Config, option: str, ini: str | None = None) -> Path | None:
    value = config.getoption(option)
    if value:
        return (Path(config.invocation_params.dir) / str(value)).resolve()
    text = config.getini(ini) if ini else ""
    return (config.rootpath / str(text)).resolve() if text else None


def _flag(config: pytest.Config, name: str, parse: Callable[[Any], Any]) -> Any:
    """Option `name`'s flag value through `parse`, None where not given; a ValueError of
    `parse` is a usage error naming the flag and its value."""
    declared = declared_option(name)
    value = config.getoption(declared.attribute)
    try:
        return None if value is None else parse(value)
    except ValueError as exc:
        raise pytest.UsageError(f"{declared.flag}={value}: {exc}") from None


def _precisions(config: pytest.Config) -> tuple[str, ...]:
    given = config.getoption("trt_precision")
    if given:  # --trt-precision fp16 --trt-precision bf16: both
        return tuple(dict.fromkeys(p for group in given for p in group))
    try:
        return parse_precisions(str(config.getini("trtcompare_precisions")))
    except ValueError as exc:
        raise pytest.UsageError(f"ini trtcompare_precisions: {exc}") from None


def _tolerance_field(key: str, value: Any) -> Any:
    """A tolerance flag's value, checked (under its own flag) as the Tolerance field `key`."""
    return getattr(Tolerance(**{key: value}), key)


def _tolerances(config: pytest.Config, calibration: CalibrationSettings) -> ToleranceSettings:
    command_line = {}
    for name, key in (("atol", "atol"), ("rtol", "rtol"), ("check_error_stat", "check")):
        value = _flag(config, name, functools.partial(_tolerance_field, key))
        if value is not None:
            command_line[key] = value
    try:
        table, ini_metrics = parse_ini_tolerances(config.getini("trtcompare_tolerances"))
        metrics = parse_metrics(config.getoption("trt_check") or [], "--trt-check")
        settings = ToleranceSettings(
            ini_table=table,
            command_line=command_line,
            ini_metrics=ini_metrics,
            metrics=metrics,
            calibrated=calibration.entries,
            calibrated_path=str(calibration.path),
        )
        settings.resolve("fp32")
    except ToleranceError as exc:
        raise pytest.UsageError(str(exc)) from None
    return settings


def _frameworks(config: pytest.Config) -> tuple[str, ...] | None:
    text = config.getoption("trtcompare_frameworks")
    if text is None:
        return None
    given = [n.strip() for n in str(text).split(",") if n.strip()]
    if not given:  # `--trt-frameworks=` filtered nothing, silently
        raise pytest.UsageError(
            "--trt-frameworks is empty: give one or more names (trt,onnxrt,torch ...)"
        )
    for name in given:
        try:
            check_framework_name(name)
        except UnknownFrameworkError as exc:
            raise pytest.UsageError(f"--trt-frameworks: {exc}") from None
    return tuple(dict.fromkeys(canonical_framework(name) for name in given))


def _values(config: pytest.Config) -> dict[str, tuple[Any, Any]]:
    try:
        return session_values(
            lambda o: config.getoption(o.attribute), lambda o: str(config.getini(o.ini or ""))
        )
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


def _device(config: pytest.Config) -> str | None:
    """--trt-device, else ini trtcompare_device, checked at the start; None when neither is
    set: each runner's own default (torch: cpu, trt: cuda:0)."""
    given = config.getoption("trt_device")
    text = given or str(config.getini("trtcompare_device")).strip()
    if not text:
        return None
    where = f"--trt-device={given}" if given else "ini trtcompare_device"
    try:
        return parse_device(text, where)
    except RunnerOptionError as exc:
        raise pytest.UsageError(str(exc)) from None


def _seed(seed: int) -> int:
    if seed < 0:
        raise ValueError("the seed must be >= 0")
    return seed


#: Ini keys that item ids and golden paths depend on: a printed command repeats their -o.
_REPEATED_INI = ("trtcompare_precisions", "trtcompare_goldens_dir")


def _check_writable(path: Path) -> None:
    """--trt-report names a file the run can write, found out now rather than after the
    tests (a CI job would pass without its report): not a folder, under folders (made if
    missing) and in one this user may write."""
    if path.is_dir():
        raise pytest.UsageError(f"--trt-report={path} is a directory; give a file name")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise pytest.UsageError(f"--trt-report={path}: {folder} is a file, not a folder")
    try:  # os.access says yes to root where the filesystem says no (/proc, read-only)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise pytest.UsageError(
            f"--trt-report={path}: cannot write in {folder} ({exc.strerror})"
        ) from None


def _check_folder(root: Path, config: pytest.Config) -> None:
    """A goldens folder that is a file, or lies under one, is a usage error at the start."""
    blocked = next((p for p in (root, *root.parents) if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        given = config.getoption("trtcompare_goldens_dir")
        where = f"--trt-goldens-dir={given}" if given else "ini trtcompare_goldens_dir"
        raise pytest.UsageError(f"{where}: {blocked} is a file, not a folder")


def build_settings(config: pytest.Config) -> Settings:
    """All options validated; a usage error (exit 4) names the first bad one."""
    check_split_paths(config)
    report_path = _path(config, "trtcompare_report")
    if report_path is not None:
        _check_writable(report_path)
    engine_cache = _path(config, "trt_engine_cache")
    if engine_cache is None and getattr(config, "cache", None) is not None:
        engine_cache = Path(config.cache.mkdir("trtcompare-engines"))
    precisions = _precisions(config)
    goldens_root = _path(config, "trtcompare_goldens_dir", "trtcompare_goldens_dir")
    if goldens_root is not None:
        _check_folder(goldens_root, config)
    repeat = []
    if config.getoption("trt_precision"):  # item ids name the precision
        repeat.append(f"--trt-precision={','.join(precisions)}")
    if config.getoption("trtcompare_goldens_dir"):
        repeat.append(shlex.quote(f"--trt-goldens-dir={goldens_root}"))
    if config.getoption("trt_input_shapes"):  # item ids end in '-cli' only with it
        repeat.append(shlex.quote(f"--trt-input-shapes={config.getoption('trt_input_shapes')}"))
    for override in config.option.override_ini or ():
        if override.partition("=")[0].strip() in _REPEATED_INI:
            repeat += ["-o", shlex.quote(override)]
    calibration = calibration_settings(config)
    return Settings(
        precisions=precisions,
        tolerances=_tolerances(config, calibration),
        update_goldens=bool(config.getoption("trtcompare_update_goldens")),
        update_goldens_missing=bool(config.getoption("trtcompare_update_goldens_missing")),
        repeat_options=tuple(repeat),
        prune_goldens=bool(config.getoption("trtcompare_prune_goldens")),
        strict_goldens=bool(
            config.getoption("trtcompare_strict_goldens")
            or ini_value(config, "trtcompare_strict_goldens")
        ),
        goldens_root=goldens_root,
        frameworks=_frameworks(config),
        report_path=report_path,
        artifacts_root=_path(config, "trtcompare_artifacts", "trtcompare_artifacts"),
        engine_cache=None if engine_cache is None else str(engine_cache),
        isolate=bool(config.getoption("trtcompare_isolate")),
        debug_precision=bool(config.getoption("trt_debug_precision")),
        verbosity=max(0, int(config.option.verbose)),
        rootpath=Path(config.rootpath),
        library_tracebacks=config.option.tbstyle == "long" or int(config.option.verbose) >= 2,
        values=_values(config),
        # ini trtcompare_suite, else the rootdir's folder name: the same on every machine and
        # shard of one suite (a checkout folder that differs, as Jenkins' `suite@2`, needs it)
        suite=str(config.getini("trtcompare_suite")).strip() or config.rootpath.name,
        drift=drift_settings(config),
        calibration=calibration,
        device=_device(config),
        worker=getattr(config, "workerinput", {}).get("workerid"),
        input_shapes=_flag(config, "input_shapes", parse_input_shapes),
        val_range=_flag(config, "val_range", parse_val_range),
        seed=_flag(config, "seed", _seed),
    )
