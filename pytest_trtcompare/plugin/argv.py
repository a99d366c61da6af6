"""The options this plugin adds, what pytest's argument parsing does to them, and the guards
against it.

pytest chooses its rootdir and ini file before plugins add options, so a path option written
with a space can move both. The options' names and their deprecated aliases: names.py.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import os
import shlex
from pathlib import Path
from typing import Any

import pytest

from ..vocabulary import METRICS, PRECISIONS, SHAPE_CHECKS, STAT_CHECKS, parse_precisions
from . import names

#: Options whose value is a path: written with a space, pytest reads the value as a test path
#: while it looks for the rootdir and ini file, before this plugin's options exist.
PATH_OPTIONS = (
    *names.names("--trt-goldens-dir"),
    *names.names("--trt-report"),
    *names.names("--trt-artifacts-dir"),
    "--trt-engine-cache",
)


def _artifacts_mode(text: str) -> str:
    """--trt-artifacts takes a mode; a folder given to it (the old --trtcompare-artifacts
    took one) is pointed to --trt-artifacts-dir."""
    if text in ("none", "failed", "all"):
        return text
    hint = f"; the folder is --trt-artifacts-dir={text}" if ("/" in text or "." in text) else ""
    raise argparse.ArgumentTypeError(
        f"invalid choice: {text!r} (choose from 'none', 'failed', 'all'){hint}"
    )


def check_split_paths(config: pytest.Config) -> None:
    """`--trt-goldens-dir DIR` with an existing DIR moved pytest's rootdir and ini file: stop
    and say to write `--trt-goldens-dir=DIR` (with `=`, pytest never mistakes DIR for a test
    path)."""
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
    try:  # private: pytest has no public way to ask where a set of paths puts the rootdir
        from _pytest.config.findpaths import determine_setup

        given = {
            "inifile": config.option.inifilename,
            "override_ini": config.option.override_ini,  # pytest 8.1 on
            "args": [str(a) for a in config.option.file_or_dir or []],
            "rootdir_cmd_arg": config.option.rootdir or None,
            "invocation_dir": Path(config.invocation_params.dir),
        }
        taken = inspect.signature(determine_setup).parameters
        rootpath, inipath, *_ = determine_setup(**{k: v for k, v in given.items() if k in taken})
    except Exception:  # pytest changed its private API: be safe and ask for the = form
        return False
    return bool(rootpath == config.rootpath and inipath == config.inipath)


def _precision_list(text: str) -> tuple[str, ...]:
    try:
        return parse_precisions(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: Our ini keys and their defaults: a run that sets one to another value uses the plugin
#: from pytest_configure on (plugin/__init__.py).
INI_DEFAULTS: dict[str, Any] = {
    "trtcompare_precisions": "fp32",
    "trtcompare_tolerances": [],
    "trtcompare_goldens_dir": "",
    "trtcompare_layers": "",
    "trtcompare_shape_check": "",
    "trtcompare_artifacts": "",
    "trtcompare_artifacts_mode": "",
    "trtcompare_strict_goldens": False,
}


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
    names.add_update_goldens(group, alias=False)  # the alias: names.claim_update_goldens_alias

    def renamed(option: str, attrs: dict[str, Any]) -> None:
        """An option with its deprecated alias, if it has one, named in its help."""
        help_text = attrs.pop("help") + names.deprecated_note(option)
        add(*names.names(option), **attrs, help=help_text)

    renamed(
        "--trt-update-goldens-missing",
        names.flag(
            dest="trtcompare_update_goldens_missing",
            help="write the goldens that do not exist yet; leave existing ones untouched",
        ),
    )
    renamed(
        "--trt-strict-goldens",
        names.flag(
            dest="trtcompare_strict_goldens",
            help="unused goldens fail the session (ini: trtcompare_strict_goldens)",
        ),
    )
    renamed(
        "--trt-prune-goldens",
        names.flag(
            dest="trtcompare_prune_goldens",
            help="delete goldens of tests that ran in full but no longer use them",
        ),
    )
    renamed(
        "--trt-goldens-dir",
        names.value(
            dest="trtcompare_goldens_dir",
            metavar="DIR",
            help="where goldens live, written --trt-goldens-dir=DIR (ini: "
            "trtcompare_goldens_dir; default: beside each test module)",
        ),
    )
    renamed(
        "--trt-frameworks",
        names.value(
            dest="trtcompare_frameworks",
            metavar="NAME[,NAME...]",
            help="only run compare tests of these target frameworks (trt, onnxrt, torch ...; "
            "tensorrt, onnxruntime, pytorch work too)",
        ),
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
    renamed(
        "--trt-report",
        names.value(
            dest="trtcompare_report",
            metavar="PATH.json",
            help="write the accuracy summary as JSON, written --trt-report=PATH",
        ),
    )
    renamed(
        "--trt-artifacts-dir",
        names.value(
            dest="trtcompare_artifacts",
            metavar="DIR",
            help="write arrays and plots of failing outputs here, written "
            "--trt-artifacts-dir=DIR (ini: trtcompare_artifacts)",
        ),
    )
    add(
        "--trt-artifacts",
        dest="trt_artifacts",
        type=_artifacts_mode,
        metavar="{none,failed,all}",
        help="which outputs get arrays and pictures written (the folder: --trt-artifacts-dir):"
        " none, failed (the default) or all, passing ones too (ini: trtcompare_artifacts_mode)",
    )
    add(
        "--trt-engine-cache",
        dest="trt_engine_cache",
        metavar="DIR",
        help="where built TensorRT engines are cached",
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
    renamed(
        "--trt-isolate",
        names.flag(
            dest="trtcompare_isolate",
            help="run every compare_frameworks runner in a worker process, so a crash fails "
            "one test, not the session (TensorRT always is, unless isolate=False)",
        ),
    )
    add(
        "--trt-shape-check",
        dest="trt_shape_check",
        choices=SHAPE_CHECKS,
        help="'relaxed': outputs whose shapes differ only by dimensions of size 1 are "
        "compared after squeezing them, with a note (Polygraphy's --no-shape-check); "
        "default strict (overrides ini trtcompare_shape_check)",
    )

    def ini(name: str, description: str, **kwargs: Any) -> None:
        default = INI_DEFAULTS[name]  # a copy of a list: addinivalue_line appends to it
        parser.addini(
            name,
            description,
            default=list(default) if isinstance(default, list) else default,
            **kwargs,
        )

    ini("trtcompare_precisions", "default for --trt-precision")
    ini(
        "trtcompare_tolerances",
        "per-precision tolerances, one 'PRECISION: atol=.. rtol=.. [check=..]' per line, "
        "metric checks after ';' ('fp16: atol=1e-2 rtol=1e-2; cosine>=0.999')",
        type="linelist",
    )
    ini("trtcompare_goldens_dir", "where goldens live")
    ini("trtcompare_layers", "default of layers= (gate or report)")
    ini("trtcompare_shape_check", "default of --trt-shape-check (strict or relaxed)")
    ini("trtcompare_artifacts", "where failure artifacts go")
    ini("trtcompare_artifacts_mode", "default for --trt-artifacts (none, failed, all)")
    ini("trtcompare_strict_goldens", "unused goldens fail the session", type="bool")


def default_goldens_folder(module_path: Path) -> Path:
    """Where a test module's goldens live without --trt-goldens-dir (and its ini key):
    `<module dir>/goldens/<module name>`."""
    return module_path.parent / "goldens" / module_path.stem
