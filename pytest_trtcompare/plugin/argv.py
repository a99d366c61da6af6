"""The options this plugin adds, what pytest's argument parsing does to them, and the guards
against it.

pytest chooses its rootdir and ini file before plugins add options, so a path option written
with a space can move both; and a conftest may register --update-goldens after we did.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from ..engine import METRICS, PRECISIONS, STAT_CHECKS
from ..session.settings import parse_precisions

UPDATE_GOLDENS = "--update-goldens"
UPDATE_GOLDENS_FALLBACK = "--trt-update-goldens"
#: Installed plugins known to register --update-goldens themselves.
_UPDATE_GOLDENS_OWNERS = frozenset({"pytest-golden"})
#: Options whose value is a path: written with a space, pytest reads the value as a test path
#: while it looks for the rootdir and ini file, before this plugin's options exist.
PATH_OPTIONS = (
    "--goldens-dir",
    "--trtcompare-report",
    "--trtcompare-artifacts",
    "--trt-engine-cache",
)


def _option_names(parser: pytest.Parser, skip: Any = None) -> set[str]:
    groups = [*getattr(parser, "_groups", []), getattr(parser, "_anonymous", None)]
    return {
        name
        for group in groups
        if group is not None
        for option in group.options
        if option is not skip
        for name in option.names()
    }


def update_goldens_owned_elsewhere(parser: pytest.Parser) -> bool:
    if UPDATE_GOLDENS in _option_names(parser):
        return True
    for entry_point in importlib.metadata.entry_points(group="pytest11"):
        dist = getattr(entry_point, "dist", None)
        if dist is not None and dist.name in _UPDATE_GOLDENS_OWNERS:
            return True
    return False


UPDATE_HELP = "write or refresh the golden outputs of the tests that run"


def withdraw_update_goldens(parser: pytest.Parser) -> bool:
    """Before conftests load: take our --update-goldens out of the parser, so a conftest that
    adds its own does not crash pytest's argument parser (pytest 9 registers eagerly)."""
    group = parser.getgroup("trtcompare")
    ours = next((o for o in group.options if UPDATE_GOLDENS in o.names()), None)
    action = getattr(ours, "_action", None)
    if ours is None or action is None:
        return False
    try:
        action.container._remove_action(action)
        for name in action.option_strings:
            action.container._option_string_actions.pop(name, None)
    except (AttributeError, ValueError):  # an argparse without these internals: keep ours
        return False
    group.options.remove(ours)
    return True


def restore_update_goldens(parser: pytest.Parser, withdrawn: bool) -> None:
    """After conftests load: ours again, or the fallback flag if a conftest took the name."""
    group = parser.getgroup("trtcompare")
    ours = next((o for o in group.options if UPDATE_GOLDENS in o.names()), None)
    if ours is not None:  # pytest 8 builds argparse later: only a name clash to resolve
        if UPDATE_GOLDENS not in _option_names(parser, skip=ours):
            return
        group.options.remove(ours)
    elif not withdrawn:
        return
    taken = UPDATE_GOLDENS in _option_names(parser)
    flag = UPDATE_GOLDENS_FALLBACK if taken else UPDATE_GOLDENS
    group.addoption(flag, dest="trtcompare_update_goldens", action="store_true", help=UPDATE_HELP)


def check_split_paths(config: pytest.Config) -> None:
    """`--goldens-dir DIR` with an existing DIR moved pytest's rootdir and ini file: stop and
    say to write `--goldens-dir=DIR` (with `=`, pytest never mistakes DIR for a test path)."""
    args = [*shlex.split(os.environ.get("PYTEST_ADDOPTS", "")), *config.invocation_params.args]
    for option, value in itertools.pairwise(args):
        if option not in PATH_OPTIONS:
            continue
        if not (Path(config.invocation_params.dir) / value).exists():
            continue  # pytest ignores paths that do not exist when it looks for the rootdir
        if _rootdir_unchanged(config):
            return
        raise pytest.UsageError(
            f"{option} {value}: pytest took {value!r} for a test path while it chose the "
            f"rootdir ({config.rootpath}) and ini file; write {option}={value}"
        )


def _rootdir_unchanged(config: pytest.Config) -> bool:
    """Whether pytest finds the same rootdir and ini file from the real test paths alone."""
    try:
        from _pytest.config.findpaths import determine_setup

        rootpath, inipath, *_ = determine_setup(
            inifile=config.option.inifilename,
            override_ini=config.option.override_ini,
            args=[str(a) for a in config.option.file_or_dir or []],
            rootdir_cmd_arg=config.option.rootdir or None,
            invocation_dir=Path(config.invocation_params.dir),
        )
    except Exception:  # pytest changed its private API: be safe and ask for the = form
        return False
    return bool(rootpath == config.rootpath and inipath == config.inipath)


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
        choices=STAT_CHECKS,
        help="error statistic checked by every comparison",
    )
    add(
        "--trt-check",
        dest="trt_check",
        action="append",
        metavar="METRIC=T",
        help=f"a metric check every comparison must pass too, from {', '.join(METRICS)} "
        "(cosine=0.999, snr>=25, l2<=1e-3; repeatable or comma-separated; overrides markers "
        "and ini)",
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
        "--trt-artifacts",
        dest="trt_artifacts",
        choices=["none", "failed", "all"],
        help="which outputs get arrays and pictures written (the folder: --trtcompare-artifacts):"
        " none, failed (the default) or all, passing ones too (ini: trtcompare_artifacts_mode)",
    )
    add(
        "--trt-engine-cache",
        dest="trt_engine_cache",
        metavar="DIR",
        help="where built TensorRT engines are cached (--trt-engine-cache=DIR)",
    )
    add(
        "--trt-input-shapes",
        dest="trt_input_shapes",
        metavar="NAME:1x3x224x224,...",
        help="input shapes of every compare test, replacing its @pytest.mark.shapes sets "
        "(Polygraphy's --input-shapes; NAME:[1,3,224,224] works too)",
    )
    add(
        "--trt-seed",
        dest="trt_seed",
        type=int,
        metavar="SEED",
        help="seed of the synthetic inputs of every compare test and golden (overrides markers)",
    )
    add(
        "--trt-val-range",
        dest="trt_val_range",
        metavar="LOW,HIGH",
        help="value range of synthetic inputs: LOW,HIGH for all, or NAME:[LOW,HIGH] ... per input",
    )
    add(
        "--trt-debug-precision",
        dest="trt_debug_precision",
        action="store_true",
        help="when a reduced-precision compare_frameworks item fails, search the nodes to keep "
        "in fp32 (onnxref, onnxrt and trt targets of ONNX models) and add them to its report",
    )
    add(
        "--trt-layers",
        dest="trt_layers",
        choices=["gate", "report"],
        help="per-layer tests (outputs='all'): 'gate' fails on any layer out of tolerance; "
        "'report' fails only on the model outputs and reports the first divergence "
        "(overrides the layers= marker argument; ini: trtcompare_layers)",
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
        "per-precision tolerances, one 'PRECISION: atol=.. rtol=.. [check=..]' per line, "
        "metric checks after ';' ('fp16: atol=1e-2 rtol=1e-2; cosine>=0.999')",
        type="linelist",
        default=[],
    )
    parser.addini("trtcompare_goldens_dir", "where goldens live", default="")
    parser.addini("trtcompare_layers", "default of layers= (gate or report)", default="")
    parser.addini("trtcompare_artifacts", "where failure artifacts go", default="")
    parser.addini(
        "trtcompare_artifacts_mode", "default for --trt-artifacts (none, failed, all)", default=""
    )
    parser.addini(
        "trtcompare_strict_goldens", "unused goldens fail the session", type="bool", default=False
    )
