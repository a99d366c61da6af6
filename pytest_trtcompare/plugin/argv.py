"""The options and ini keys this plugin adds. Their names and deprecated aliases: names.py;
the guard against a path option written with a space: split_paths.py.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from ..vocabulary import METRICS, PRECISIONS, SHAPE_CHECKS, STAT_CHECKS, parse_precisions
from . import calibration, device_option, drift, names, report_options


def _artifacts_mode(text: str) -> str:
    """--trt-artifacts takes a mode; a folder given to it (the old --trtcompare-artifacts
    took one) is pointed to --trt-artifacts-dir."""
    if text in ("none", "failed", "all"):
        return text
    hint = f"; the folder is --trt-artifacts-dir={text}" if ("/" in text or "." in text) else ""
    raise argparse.ArgumentTypeError(
        f"invalid choice: {text!r} (choose from 'none', 'failed', 'all'){hint}"
    )


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
    **report_options.INI_DEFAULTS,
    **drift.INI_DEFAULTS,
    **calibration.INI_DEFAULTS,
    **device_option.INI_DEFAULTS,
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
    report_options.add_options(group, parser)
    drift.add_options(group, parser)
    calibration.add_options(group, parser)
    device_option.add_options(group, parser)


def default_goldens_folder(module_path: Path) -> Path:
    """Where a test module's goldens live without --trt-goldens-dir (and its ini key):
    `<module dir>/goldens/<module name>`."""
    return module_path.parent / "goldens" / module_path.stem
