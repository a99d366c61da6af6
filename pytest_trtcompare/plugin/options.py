"""Command-line options and ini keys, read and validated once into a frozen `Settings`.

pytest-xdist's habit: normalise every option in one place at configure time, then hand the
settings object to whoever needs it. A bad value is a usage error (exit 4) naming the option.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..engine.tolerance import CHECKS, PRECISIONS
from ..errors import ToleranceError, UnknownFrameworkError
from ..runners import check_framework_name
from ..session.settings import ToleranceSettings, parse_precisions, parse_tolerance_table
from .argv import (
    UPDATE_GOLDENS,
    UPDATE_GOLDENS_FALLBACK,
    UPDATE_HELP,
    check_split_paths,
    update_goldens_owned_elsewhere,
)


@dataclass(frozen=True)
class Settings:
    """Everything the command line and ini decide, validated."""

    precisions: tuple[str, ...]
    tolerances: ToleranceSettings
    update_goldens: bool
    update_goldens_missing: bool  # write goldens that do not exist; leave the others alone
    update_flag: str  # "--update-goldens", or the fallback when another plugin owns it
    repeat_options: tuple[str, ...]  # what a printed pytest command must repeat (ids, places)
    prune_goldens: bool
    strict_goldens: bool  # unused goldens fail the session
    goldens_root: Path | None  # None: beside each test module
    frameworks: tuple[str, ...] | None
    report_path: Path | None
    artifacts_root: Path | None  # None: under pytest's basetemp
    engine_cache: str | None
    isolate: bool
    verbosity: int
    rootpath: Path


def _precision_list(text: str) -> tuple[str, ...]:
    try:
        return parse_precisions(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("trtcompare", "accuracy comparison (pytest-trtcompare)")
    add = group.addoption
    add(
        "--trt-precision",
        dest="trt_precision",
        type=_precision_list,
        action="append",
        metavar="P[,P...]",
        help=f"precisions to run compare tests at, from {', '.join(PRECISIONS)}; repeatable "
        "(ini: trtcompare_precisions; default fp32)",
    )
    owned = update_goldens_owned_elsewhere(parser)
    flag = UPDATE_GOLDENS_FALLBACK if owned else UPDATE_GOLDENS
    add(flag, dest="trtcompare_update_goldens", action="store_true", help=UPDATE_HELP)
    add(
        "--update-goldens-missing",
        dest="trtcompare_update_goldens_missing",
        action="store_true",
        help="write the goldens that do not exist yet; leave existing ones untouched",
    )
    add(
        "--strict-goldens",
        dest="trtcompare_strict_goldens",
        action="store_true",
        help="unused goldens fail the session (ini: trtcompare_strict_goldens)",
    )
    add(
        "--prune-goldens",
        dest="trtcompare_prune_goldens",
        action="store_true",
        help="delete goldens of tests that ran in full but no longer use them",
    )
    add(
        "--goldens-dir",
        dest="trtcompare_goldens_dir",
        metavar="DIR",
        help="where goldens live, written --goldens-dir=DIR (ini: trtcompare_goldens_dir; "
        "default: beside each test module)",
    )
    add(
        "--frameworks",
        dest="trtcompare_frameworks",
        metavar="NAME[,NAME...]",
        help="only run compare tests of these target frameworks",
    )
    add(
        "--trt-atol",
        dest="trt_atol",
        type=float,
        metavar="ATOL",
        help="absolute tolerance for every comparison (overrides markers and ini)",
    )
    add(
        "--trt-rtol",
        dest="trt_rtol",
        type=float,
        metavar="RTOL",
        help="relative tolerance for every comparison (overrides markers and ini)",
    )
    add(
        "--trt-check-error-stat",
        dest="trt_check_error_stat",
        choices=[c for c in CHECKS if c != "indices"],
        help="error statistic checked by every comparison",
    )
    add(
        "--trtcompare-report",
        dest="trtcompare_report",
        metavar="PATH.json",
        help="write the accuracy summary as JSON, written --trtcompare-report=PATH",
    )
    add(
        "--trtcompare-artifacts",
        dest="trtcompare_artifacts",
        metavar="DIR",
        help="write arrays and plots of failing outputs here, written --trtcompare-artifacts=DIR",
    )
    add(
        "--trt-engine-cache",
        dest="trt_engine_cache",
        metavar="DIR",
        help="where built TensorRT engines are cached (--trt-engine-cache=DIR)",
    )
    add(
        "--trtcompare-isolate",
        dest="trtcompare_isolate",
        action="store_true",
        help="run every compare_frameworks runner in a worker process, so a crash fails one "
        "test, not the session (TensorRT always is, unless isolate=False)",
    )
    parser.addini("trtcompare_precisions", "default for --trt-precision", default="fp32")
    parser.addini(
        "trtcompare_tolerances",
        "per-precision tolerances, one 'PRECISION: atol=.. rtol=.. [check=..]' per line",
        type="linelist",
        default=[],
    )
    parser.addini("trtcompare_goldens_dir", "where goldens live", default="")
    parser.addini("trtcompare_artifacts", "where failure artifacts go", default="")
    parser.addini(
        "trtcompare_strict_goldens", "unused goldens fail the session", type="bool", default=False
    )


def _usage(message: str) -> pytest.UsageError:
    return pytest.UsageError(message)


def _path(config: pytest.Config, option: str, ini: str | None = None) -> Path | None:
    value = config.getoption(option)
    if value:
        return (Path(config.invocation_params.dir) / str(value)).resolve()
    text = config.getini(ini) if ini else ""
    return (config.rootpath / str(text)).resolve() if text else None


def _precisions(config: pytest.Config) -> tuple[str, ...]:
    given = config.getoption("trt_precision")
    if given:  # --trt-precision fp16 --trt-precision bf16: both
        return tuple(dict.fromkeys(p for group in given for p in group))
    try:
        return parse_precisions(str(config.getini("trtcompare_precisions")))
    except ValueError as exc:
        raise _usage(f"ini trtcompare_precisions: {exc}") from None


def _tolerances(config: pytest.Config) -> ToleranceSettings:
    try:
        table = parse_tolerance_table(config.getini("trtcompare_tolerances"))
        command_line = {
            name: value
            for name, value in (
                ("atol", config.getoption("trt_atol")),
                ("rtol", config.getoption("trt_rtol")),
                ("check", config.getoption("trt_check_error_stat")),
            )
            if value is not None
        }
        settings = ToleranceSettings(ini_table=table, command_line=command_line)
        settings.resolve("fp32")  # validates the command-line values (negative atol ...)
    except ToleranceError as exc:
        raise _usage(str(exc)) from None
    return settings


def _frameworks(config: pytest.Config) -> tuple[str, ...] | None:
    text = config.getoption("trtcompare_frameworks")
    if not text:
        return None
    names = tuple(dict.fromkeys(n.strip() for n in str(text).split(",") if n.strip()))
    for name in names:
        try:
            check_framework_name(name)
        except UnknownFrameworkError as exc:
            raise _usage(f"--frameworks: {exc}") from None
    return names


def build_settings(config: pytest.Config) -> Settings:
    """All options validated; a usage error (exit 4) names the first bad one."""
    check_split_paths(config)
    report_path = _path(config, "trtcompare_report")
    if report_path is not None and report_path.is_dir():
        raise _usage(f"--trtcompare-report={report_path} is a directory; give a file name")
    engine_cache = _path(config, "trt_engine_cache")
    if engine_cache is None and getattr(config, "cache", None) is not None:
        engine_cache = Path(config.cache.mkdir("trtcompare-engines"))
    update_names = ("--update-goldens", "--trt-update-goldens")
    flag = next(
        (n for n in update_names if n in _registered_flags(config)), UPDATE_GOLDENS_FALLBACK
    )
    precisions = _precisions(config)
    goldens_root = _path(config, "trtcompare_goldens_dir", "trtcompare_goldens_dir")
    repeat = []
    if config.getoption("trt_precision"):  # item ids name the precision
        repeat.append(f"--trt-precision={','.join(precisions)}")
    if config.getoption("trtcompare_goldens_dir"):
        repeat.append(shlex.quote(f"--goldens-dir={goldens_root}"))
    return Settings(
        precisions=precisions,
        tolerances=_tolerances(config),
        update_goldens=bool(config.getoption("trtcompare_update_goldens")),
        update_goldens_missing=bool(config.getoption("trtcompare_update_goldens_missing")),
        update_flag=flag,
        repeat_options=tuple(repeat),
        prune_goldens=bool(config.getoption("trtcompare_prune_goldens")),
        strict_goldens=bool(
            config.getoption("trtcompare_strict_goldens")
            or config.getini("trtcompare_strict_goldens")
        ),
        goldens_root=goldens_root,
        frameworks=_frameworks(config),
        report_path=report_path,
        artifacts_root=_path(config, "trtcompare_artifacts", "trtcompare_artifacts"),
        engine_cache=None if engine_cache is None else str(engine_cache),
        isolate=bool(config.getoption("trtcompare_isolate")),
        verbosity=max(0, int(config.option.verbose)),
        rootpath=Path(config.rootpath),
    )


def _registered_flags(config: pytest.Config) -> set[str]:
    group = config._parser.getgroup("trtcompare")
    return {name for option in group.options for name in option.names()}
