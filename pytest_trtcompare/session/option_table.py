"""Every option of the plugin, declared once: its flag, ini key, marker argument and call
keyword, `trtcompare` flag, choices, default, precedence and help.

plugin/argv.py registers the flags and ini keys from it, plugin/options.py reads the session's
values through `session_values`, session/spec.py takes the marker arguments and the fixtures
the call keywords it declares, cli/__init__.py adds the `trtcompare` flags, and
tests/test_option_table.py checks the manual's option notes against it, and
docs/gen_reference.py makes docs/reference/options.md from it. A comparison
option (`compare=True`) reaches engine/compare.py `compare_with_table` as the keyword of its
name (ARCHITECTURE.md "An option").

Precedence: the test's own value (a marker argument, a call keyword) > the flag > the ini key >
the default; an option that `overrides` puts its flag first (--trt-atol, --trt-layers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ToleranceError
from ..vocabulary import (
    LAYER_MODES,
    METRICS,
    PRECISIONS,
    SHAPE_CHECKS,
    STAT_CHECKS,
    parse_precisions,
)
from .layer_budget import DEFAULT_FRACTION, TAKES, parse_layer_budget

#: What --trt-artifacts takes.
ARTIFACT_MODES = ("none", "failed", "all")
#: What --trt-drift takes.
DRIFT_MODES = ("warn", "fail")


@dataclass(frozen=True)
class Option:
    """One option. Text values (a flag's, an ini key's) are checked against `choices`; a
    marker argument or call keyword is checked the same way."""

    name: str  # the setting's name, and the marker argument / call keyword where it is one
    help: str
    flag: str | None = None  # "--trt-shape-check"
    ini: str | None = None  # "trtcompare_shape_check"
    choices: tuple[str, ...] | None = None
    default: Any = None  # what applies when nothing gives a value
    dest: str | None = None  # its attribute on config.option, where not the default below
    metavar: str | None = None
    kind: str = "value"  # "value", "flag" (store true), "append", "int", "float"
    ini_type: str | None = None  # pytest's: "bool", "linelist"
    marker: bool = False  # a compare_frameworks argument of its name
    call: bool = False  # a keyword of the compare fixture and golden.check of its name
    compare: bool = False  # a keyword of engine compare_with_table of its name
    cli: tuple[str, ...] = ()  # the `trtcompare` commands that take it as --NAME
    parse: Callable[[str], Any] | None = None  # a flag's text -> value; ValueError says why
    overrides: bool = False  # its flag wins over the test's own value
    renamed: bool = False  # it has a deprecated alias (plugin/names.py ALIASES)
    takes: str | None = None  # what a `parse` option's marker argument takes, when refused

    @property
    def attribute(self) -> str:
        """Its attribute on pytest's config.option: trtcompare_NAME for a renamed option (the
        old names' attribute), else from the flag (--trt-seed: trt_seed)."""
        assert self.flag is not None
        if self.dest or self.renamed:
            return self.dest or f"trtcompare_{self.name}"
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def ini_help(self) -> str:
        """The ini key's line in --help: the flag it is the default of, else the help."""
        if self.flag is None:
            return self.help
        choices = f" ({', '.join(self.choices)})" if self.choices else ""
        return f"default of {self.flag}{choices}"

    @property
    def ini_default(self) -> Any:
        return {"bool": False, "linelist": []}.get(self.ini_type or "", "")


def _artifacts_mode(text: str) -> str:
    """--trt-artifacts takes a mode; a folder given to it (the old --trtcompare-artifacts
    took one) is pointed to --trt-artifacts-dir."""
    if text in ARTIFACT_MODES:
        return text
    hint = f"; the folder is --trt-artifacts-dir={text}" if ("/" in text or "." in text) else ""
    raise ValueError(f"invalid choice: {text!r} (choose from 'none', 'failed', 'all'){hint}")


OPTIONS: list[Option] = [
    Option(
        "precisions",
        f"precisions to run compare tests at, from {', '.join(PRECISIONS)}; repeatable "
        "(ini: trtcompare_precisions; default fp32)",
        flag="--trt-precision",
        ini="trtcompare_precisions",
        kind="append",
        metavar="P[,P...]",
        parse=parse_precisions,
        default="fp32",
    ),
    Option(
        "update_goldens",
        "write or refresh the golden outputs of the tests that run",
        flag="--trt-update-goldens",
        kind="flag",
        renamed=True,  # plugin/names.py registers it: its alias is claimed late
    ),
    Option(
        "update_goldens_missing",
        "write the goldens that do not exist yet; leave existing ones untouched",
        flag="--trt-update-goldens-missing",
        kind="flag",
        renamed=True,
    ),
    Option(
        "strict_goldens",
        "unused goldens fail the session (ini: trtcompare_strict_goldens)",
        flag="--trt-strict-goldens",
        ini="trtcompare_strict_goldens",
        kind="flag",
        ini_type="bool",
        renamed=True,
    ),
    Option(
        "prune_goldens",
        "delete goldens of tests that ran in full but no longer use them",
        flag="--trt-prune-goldens",
        kind="flag",
        renamed=True,
    ),
    Option(
        "goldens_dir",
        "where goldens live, written --trt-goldens-dir=DIR (ini: trtcompare_goldens_dir; "
        "default: beside each test module)",
        flag="--trt-goldens-dir",
        ini="trtcompare_goldens_dir",
        metavar="DIR",
        renamed=True,
    ),
    Option(
        "frameworks",
        "only run compare tests of these target frameworks (trt, onnxrt, torch ...; "
        "tensorrt, onnxruntime, pytorch work too)",
        flag="--trt-frameworks",
        metavar="NAME[,NAME...]",
        renamed=True,
    ),
    Option(
        "atol",
        "absolute tolerance for every comparison (overrides markers and ini)",
        flag="--trt-atol",
        kind="float",
        metavar="ATOL",
        overrides=True,
    ),
    Option(
        "rtol",
        "relative tolerance for every comparison (overrides markers and ini)",
        flag="--trt-rtol",
        kind="float",
        metavar="RTOL",
        overrides=True,
    ),
    Option(
        "check_error_stat",
        "error statistic checked by every comparison",
        flag="--trt-check-error-stat",
        choices=STAT_CHECKS,
        overrides=True,
    ),
    Option(
        "check",
        f"a metric check every comparison must pass too, from {', '.join(METRICS)} "
        "(cosine=0.999, snr>=25, l2<=1e-3; repeatable or comma-separated; overrides markers "
        "and ini)",
        flag="--trt-check",
        kind="append",
        metavar="METRIC=T",
        overrides=True,
    ),
    Option(
        "tolerances",
        "per-precision tolerances, one 'PRECISION: atol=.. rtol=.. [check=..]' per line, "
        "metric checks after ';' ('fp16: atol=1e-2 rtol=1e-2; cosine>=0.999')",
        ini="trtcompare_tolerances",
        ini_type="linelist",
    ),
    Option(
        "report",
        "write the accuracy summary as JSON, written --trt-report=PATH",
        flag="--trt-report",
        metavar="PATH.json",
        renamed=True,
    ),
    Option(
        "suite",
        "the suite's name in --trt-report files, which `trtcompare merge` checks (default: "
        "the rootdir's folder name)",
        ini="trtcompare_suite",
    ),
    Option(
        "artifacts_dir",
        "write arrays and plots of failing outputs here, written --trt-artifacts-dir=DIR "
        "(ini: trtcompare_artifacts)",
        flag="--trt-artifacts-dir",
        ini="trtcompare_artifacts",
        dest="trtcompare_artifacts",
        metavar="DIR",
        renamed=True,
    ),
    Option(
        "artifacts",
        "which outputs get arrays and pictures written (the folder: --trt-artifacts-dir): "
        "none, failed (the default) or all, passing ones too (ini: trtcompare_artifacts_mode)",
        flag="--trt-artifacts",
        ini="trtcompare_artifacts_mode",
        choices=ARTIFACT_MODES,
        parse=_artifacts_mode,
        default="failed",
        metavar="{none,failed,all}",
    ),
    Option(
        "engine_cache",
        "where built TensorRT engines are cached",
        flag="--trt-engine-cache",
        metavar="DIR",
    ),
    Option(
        "input_shapes",
        "input shapes of every compare test, replacing its @pytest.mark.shapes sets "
        "(Polygraphy's --input-shapes; NAME:[1,3,224,224] works too)",
        flag="--trt-input-shapes",
        metavar="NAME:1x3x224x224,...",
    ),
    Option(
        "seed",
        "seed of the synthetic inputs of every compare test and golden (overrides markers)",
        flag="--trt-seed",
        kind="int",
        metavar="SEED",
        overrides=True,
    ),
    Option(
        "val_range",
        "value range of synthetic inputs: LOW,HIGH for all, or NAME:[LOW,HIGH] ... per input",
        flag="--trt-val-range",
        metavar="LOW,HIGH",
        overrides=True,
    ),
    Option(
        "debug_precision",
        "when a reduced-precision compare_frameworks item fails, search the nodes to keep "
        "in fp32 (onnxref, onnxrt and trt targets of ONNX models) and add them to its report",
        flag="--trt-debug-precision",
        kind="flag",
    ),
    Option(
        "reduce",
        "when a reduced-precision compare_frameworks item fails, find the smallest subgraph "
        "of its ONNX model that still fails at its tolerance on every draw; its report names "
        "it, its artifacts hold reduced.onnx, its inputs and the command that reproduces it "
        "(onnxref, onnxrt and trt targets; a torch twin's ONNX model on onnxref)",
        flag="--trt-reduce",
        kind="flag",
        default=False,
        marker=True,
    ),
    Option(
        "layers",
        "per-layer tests (outputs='all'): 'gate' fails on any layer out of tolerance; "
        "'report' fails only on the model outputs and reports the first divergence "
        "(overrides the layers= marker argument; ini: trtcompare_layers)",
        flag="--trt-layers",
        ini="trtcompare_layers",
        choices=LAYER_MODES,
        default="gate",
        overrides=True,
    ),
    Option(
        "layer_budget",
        "per-layer tests (outputs='all'): the memory the compared tensors of both sides may "
        "hold at once, as 2GB, 512MiB, 1048576 (bytes) or a fraction of the free memory "
        f"(0.25); layers are fetched and compared in groups that fit it (default "
        f"{DEFAULT_FRACTION:g} of the free host memory, or of a CUDA device's where a torch "
        "runner holds its tensors; ini: trtcompare_layer_budget)",
        flag="--trt-layer-budget",
        ini="trtcompare_layer_budget",
        metavar="SIZE",
        parse=parse_layer_budget,
        takes=TAKES,
        marker=True,
    ),
    Option(
        "isolate",
        "run every compare_frameworks runner in a worker process, so a crash fails one "
        "test, not the session (TensorRT always is, unless isolate=False)",
        flag="--trt-isolate",
        kind="flag",
        renamed=True,
    ),
    Option(
        "shape_check",
        "'relaxed': outputs whose shapes differ only by dimensions of size 1 are compared "
        "after squeezing them, with a note (Polygraphy's --no-shape-check); default strict",
        flag="--trt-shape-check",
        ini="trtcompare_shape_check",
        choices=SHAPE_CHECKS,
        default="strict",
        marker=True,
        call=True,
        compare=True,
        cli=("diff", "check"),
    ),
    Option(
        "validate",
        "fail a comparison whose outputs hold NaN or Inf, on either side, whatever the "
        "tolerance (Polygraphy's --validate; ini: trtcompare_validate)",
        flag="--trt-validate",
        ini="trtcompare_validate",
        kind="flag",
        ini_type="bool",
        default=False,
        marker=True,
        call=True,
        compare=True,
        cli=("diff", "check"),
    ),
    Option(
        "allow_fp32_fallback",
        "let a fp16 / bf16 compare_frameworks case run whose target computed no node in that "
        "precision (a TensorRT engine built in float32): by default it fails, naming what ran "
        "(ini: trtcompare_allow_fp32_fallback)",
        flag="--trt-allow-fp32-fallback",
        ini="trtcompare_allow_fp32_fallback",
        kind="flag",
        ini_type="bool",
        default=False,
        marker=True,
    ),
    Option(
        "baseline",
        "an earlier run's --trt-report: list the outputs whose margin drifted toward failing "
        "(ini: trtcompare_baseline)",
        flag="--trt-baseline",
        ini="trtcompare_baseline",
        metavar="REPORT.json",
    ),
    Option(
        "drift",
        "with --trt-baseline: 'warn' shows drift (the default), 'fail' fails the session on "
        "it (ini: trtcompare_drift)",
        flag="--trt-drift",
        ini="trtcompare_drift",
        choices=DRIFT_MODES,
        default="warn",
    ),
    Option(
        "drift_ratio",
        "drift: a margin R times the baseline's or more (default 2; ini: trtcompare_drift_ratio)",
        flag="--trt-drift-ratio",
        ini="trtcompare_drift_ratio",
        metavar="R",
    ),
    Option(
        "drift_margin",
        "drift: a margin that crosses M from below (default 0.5; ini: trtcompare_drift_margin)",
        flag="--trt-drift-margin",
        ini="trtcompare_drift_margin",
        metavar="M",
    ),
    Option(
        "calibrate",
        "run every compare_frameworks case on N input draws and write the tolerances their "
        "worst errors suggest to the tolerance file (the manual: Choosing tolerances)",
        flag="--trt-calibrate",
        kind="int",
        metavar="N",
    ),
    Option(
        "tolerances_file",
        "the calibrated tolerance file (default: trtcompare-tolerances.toml in the rootdir; "
        "ini: trtcompare_tolerances_file)",
        flag="--trt-tolerances-file",
        ini="trtcompare_tolerances_file",
        metavar="PATH.toml",
    ),
    Option(
        "device",
        "device of the torch and TensorRT runners: auto (a CUDA device where one is visible, "
        "else the CPU), cpu, cuda or cuda:N; auto and cuda give xdist worker gwK the visible "
        "GPU K mod count (ini: trtcompare_device)",
        flag="--trt-device",
        ini="trtcompare_device",
        metavar="auto|cpu|cuda|cuda:N",
    ),
]


def declare(new: Option) -> None:
    """Declare one more option (or replace the one of its name): from a plugin module that
    pytest imports before this plugin registers its options (`-p module`, or an entry point
    that sorts earlier)."""
    OPTIONS[:] = [*(declared for declared in OPTIONS if declared.name != new.name), new]


def option(name: str) -> Option:
    """The declaration of option `name`; KeyError when none is."""
    for declared in OPTIONS:
        if declared.name == name:
            return declared
    raise KeyError(name)


def marker_options() -> list[Option]:
    return [declared for declared in OPTIONS if declared.marker]


def ini_defaults() -> dict[str, Any]:
    """ini key -> its default: a run that sets one to another value uses the plugin from
    pytest_configure on (plugin/__init__.py)."""
    defaults = {o.ini: o.ini_default for o in OPTIONS if o.ini is not None}
    defaults[option("precisions").ini or ""] = option("precisions").default
    return defaults


def session_values(
    flag_value: Callable[[Option], Any], ini_text: Callable[[Option], str]
) -> dict[str, tuple[Any, Any]]:
    """Each option with choices, and each on/off one, that the test can also give: (its flag's
    value, its ini key's value), the ini's checked (the flag's argparse checked; ValueError
    naming the ini key and what it takes); None where unset. The test's own value goes
    between them or before them (`resolve`)."""
    found: dict[str, tuple[Any, Any]] = {}
    for declared in OPTIONS:
        if declared.flag is None:
            continue
        if _on_off(declared) and (declared.marker or declared.call):
            on = ini_text(declared) == "True" if declared.ini else False
            found[declared.name] = (flag_value(declared) or None, on or None)
        if declared.parse is not None and declared.choices is None and declared.marker:
            found[declared.name] = (flag_value(declared), _parsed_ini(declared, ini_text))
        if declared.choices is None:
            continue
        ini = (ini_text(declared).strip() or None) if declared.ini else None
        if ini is not None and ini not in declared.choices:
            takes = (", " if len(declared.choices) > 2 else " or ").join(declared.choices)
            raise ValueError(f"ini {declared.ini} = {ini!r}: takes {takes}")
        found[declared.name] = (flag_value(declared), ini)
    return found


def _parsed_ini(declared: Option, ini_text: Callable[[Option], str]) -> Any:
    """A `parse` option's ini value through its parser (None where unset); ValueError naming
    the ini key."""
    text = ini_text(declared).strip() if declared.ini else ""
    if not text or declared.parse is None:
        return None
    try:
        return declared.parse(text)
    except ValueError as exc:
        raise ValueError(f"ini {declared.ini} = {text!r}: {exc}") from None


def resolve(name: str, given: Any, session: Mapping[str, tuple[Any, Any]]) -> Any:
    """Option `name`'s value for one test: its own value `given` (None: none), the session's
    flag and ini values, in the option's precedence, else the default."""
    declared = option(name)
    flag, ini = session.get(name, (None, None))
    order = (flag, given, ini) if declared.overrides else (given, flag, ini)
    return next((value for value in order if value is not None), declared.default)


def _on_off(declared: Option) -> bool:
    return declared.kind == "flag"


def check_value(declared: Option, value: Any) -> str | None:
    """What a test's value of `declared` (a marker argument, a call keyword) should be, or
    None when it is one: one of its choices, or True / False for an on/off option."""
    if _on_off(declared):
        on_off = isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy's too
        return None if on_off else "True or False"
    if declared.parse is not None and declared.choices is None:
        try:
            declared.parse(value)
        except ValueError:
            return declared.takes or "what its flag takes"
        return None
    if declared.choices is not None and not (isinstance(value, str) and value in declared.choices):
        return " or ".join(map(repr, declared.choices))
    return None


def call_values(keywords: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A fixture call's keywords split into the table's call options, checked against their
    choices (ToleranceError naming the keyword), and the rest (tolerance fields)."""
    given, rest = {}, {}
    for key, value in keywords.items():
        declared = next((o for o in OPTIONS if o.call and o.name == key), None)
        if declared is None:
            rest[key] = value
            continue
        takes = None if value is None else check_value(declared, value)
        if takes is not None:
            raise ToleranceError(f"{key}={value!r}: takes {takes}")
        if value is not None:
            given[key] = value
    return given, rest


def comparison_options(
    given: Mapping[str, Any], session: Mapping[str, tuple[Any, Any]]
) -> dict[str, Any]:
    """The keywords of engine compare_with_table for one test: every `compare=True` option,
    resolved."""
    return {o.name: resolve(o.name, given.get(o.name), session) for o in OPTIONS if o.compare}
