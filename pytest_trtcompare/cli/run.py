"""`trtcompare run MODEL`: `polygraphy run`'s comparison from the shell, made as a
compare_frameworks test makes it, and `--gen-test FILE` to write that test.

The flags become the marker's arguments (`marker_arguments`): the first framework flag is the
reference (Polygraphy compares every runner with the first), the others the targets, each
at every precision flag given (fp32 without one); `--load-outputs` makes saved outputs the
reference. Each case then runs through session/cases.py `CaseRunner`, as a test item does,
and prints what pytest prints for it. Exit 0 when every case agrees, 1 when one does not, 2
on a usage or model error.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .. import runners
from ..engine import STAT_CHECKS, Tolerance
from ..errors import ToleranceError, TrtCompareError
from ..session.settings import parse_input_shapes, parse_val_range
from .polygraphy_flags import not_offered, spellings

#: Precision flags (TensorRT's builder flags in Polygraphy; here every target's precision).
PRECISIONS = ("tf32", "fp16", "bf16")
#: The files --torch FILE takes: TorchScript (torch.jit.save) and torch.export.save's.
MODULE_FILES = (".pt", ".pt2", ".pth", ".ts")
#: polygraphy run's metric thresholds and the metric check each adds (at least the value;
#: an l2 norm at most).
METRIC_FLAGS = {
    "--cosine-similarity-threshold": "cosine",
    "--l2-threshold": "l2",
    "--snr-threshold": "snr",
    "--psnr-threshold": "psnr",
}


class _Framework(argparse.Action):
    """A framework flag: appended in the order given (the first is the reference); a module
    runner's as 'NAME=MODULE:FACTORY'."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        name = str(option).removeprefix("--")
        chosen = list(getattr(namespace, "frameworks", None) or [])
        chosen.append(name if values is None else f"{name}={values}")
        namespace.frameworks = chosen


def add_parser(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="compare frameworks on a model from the shell, as polygraphy run does: exit 0 "
        "when the outputs agree, 1 when they do not, 2 on a usage or model error",
    )
    run.add_argument("model", help="the ONNX model (or OpenVINO IR .xml for --openvino)")
    for name in runners.known_runners():  # polygraphy run's --onnxrt, --trt; ours beside them
        _add(
            run,
            f"--{name}",
            nargs="?",
            metavar="MODULE:FACTORY",
            action=_Framework,
            help=f"run {name}: MODULE:FACTORY or a TorchScript / .pt2 FILE beside the model"
            if runners.capabilities(name).layer_names == "modules"
            else f"run {name} on the model",
        )
    for precision in PRECISIONS:
        _add(run, f"--{precision}", action="store_true", help=f"targets at {precision}")
    for field in ("atol", "rtol"):
        _add(
            run,
            f"--{field}",
            nargs="+",
            metavar="[NAME:]VALUE",
            help=f"{field}; NAME:VALUE per output",
        )
    _add(run, "--check-error-stat", nargs="+", metavar="[NAME:]STAT")
    _add(run, "--error-quantile", nargs="+", metavar="[NAME:]Q", help="0 to 1")
    _add(
        run,
        "--infinities-compare-equal",
        action="store_true",
        help="matching infinities compare equal (the default here)",
    )
    for flag, check in METRIC_FLAGS.items():
        _add(run, flag, nargs="+", metavar="[NAME:]VALUE", help=f"the {check} check")
    _add(run, "--compare", choices=("simple", "indices"), default="simple")
    _add(run, "--index-tolerance", nargs="+", metavar="[NAME:]N")
    _add(run, "--postprocess", nargs="+", metavar="[NAME:]top-K")
    _add(run, "--fail-fast", action="store_true", help="stop at the first case that disagrees")
    _add(run, "--input-shapes", nargs="+", metavar="NAME:[D,...]")
    _add(run, "--val-range", nargs="+", metavar="[NAME:][LOW,HIGH]")
    _add(run, "--seed", type=at_least(0))
    _add(run, "--iterations", type=at_least(1), default=1)
    inputs = run.add_mutually_exclusive_group()
    _add(inputs, "--load-inputs", help="Polygraphy --save-inputs JSON to feed")
    _add(
        inputs, "--data-loader-script", metavar="PATH.py[:FUNCTION]", help="feeds from load_data()"
    )
    _add(
        run,
        "--load-outputs",
        help="saved outputs as the reference (Polygraphy JSON, a golden, .npz)",
    )
    _add(run, "--save-inputs", help="write the inputs fed as Polygraphy JSON")
    _add(
        run,
        "--save-outputs",
        help="write the first (reference) runner's outputs as Polygraphy JSON",
    )
    _add(run, "--onnx-outputs", nargs="+", help="'mark all': per layer; else the names")
    _add(run, "--no-shape-check", action="store_true", help="shape_check='relaxed'")
    _add(
        run,
        "--validate",
        action="store_true",
        help="a NaN or Inf in any runner's outputs fails, whatever the tolerance",
    )
    _add(
        run,
        "--save-heatmaps",
        metavar="DIR",
        help="write each case's arrays, heatmaps and histograms of its errors here",
    )
    _add(run, "--use-subprocess", action="store_true", help="run each runner in a worker process")
    _add(run, "--gen-test", metavar="FILE", help="write the pytest test, do not run")
    _add(run, "-v", "--verbose", action="count", default=0, help="print each case's report")
    _add(run, "-q", action="store_true", help="print only what fails and the summary")
    for flags, why in not_offered().items():
        run.add_argument(*flags, nargs="*", action=_NotOffered, help=argparse.SUPPRESS, why=why)
    run.set_defaults(run=_run, frameworks=[])


def _add(container: Any, *flags: str, **kwargs: Any) -> Any:
    """An argument under its flags and polygraphy run's other spellings of them."""
    return container.add_argument(*[n for flag in flags for n in spellings(flag)], **kwargs)


class _NotOffered(argparse.Action):
    """A polygraphy run flag this command does not offer: named with the reason."""

    def __init__(self, *args: Any, why: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.why = why

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        parser.error(f"{option} (polygraphy run) is not offered: {self.why}")


def at_least(minimum: int) -> Any:
    """An argparse type: an int >= `minimum` (argparse names the flag)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an int") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"takes an int >= {minimum}, got {value}")
        return value

    return parse


def _per_output(
    values: list[str] | None, parse: Any, flag: str, field: dict[str, Any]
) -> dict[str, Any]:
    """Polygraphy's '--atol 1e-5 logits:1e-3': {'': 1e-5, 'logits': 1e-3}, each value
    checked as the Tolerance field it sets (`field`: the field's name, or a metric check)."""
    found: dict[str, Any] = {}
    for value in values or ():
        name, _, text = value.rpartition(":")
        try:
            found[name] = parse(text)
            Tolerance(**{key: found[name] if at is None else at for key, at in field.items()})
        except ValueError as exc:
            why = (
                str(exc)
                if isinstance(exc, ToleranceError)
                else f"{text!r} is not a number; give VALUE, or NAME:VALUE for one output "
                "(logits:1e-3)"
            )
            raise TrtCompareError(f"{flag} {value}: {why}") from None
    return found


def _parsed(parse: Any, flag: str, values: list[str]) -> Any:
    text = " ".join(values)
    try:
        return parse(text)
    except ValueError as exc:
        raise TrtCompareError(f"{flag} {text}: {exc}") from None


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _stat(text: str) -> str:
    if text not in STAT_CHECKS:
        raise ToleranceError(f"{text!r} is not one of {', '.join(STAT_CHECKS)}")
    return text


def marker_arguments(args: argparse.Namespace) -> tuple[dict[str, Any], list[str], list[Any]]:
    """(the compare_frameworks arguments, the precisions, the shape sets) of the flags."""
    frameworks = list(args.frameworks)
    if not frameworks and not args.load_outputs:
        flags = [f"--{name}" for name in runners.known_runners()]
        raise TrtCompareError(
            f"no framework to run: give one or more of {', '.join(flags)} (the first is the "
            "reference)"
        )
    kwargs: dict[str, Any] = {"model": args.model}
    names, models = [], {}
    for name, _, value in (f.partition("=") for f in frameworks):
        if runners.capabilities(name).layer_names == "modules":  # --torch mod:make
            models[name] = value or _no_module(name, args.model)
        elif value:
            raise TrtCompareError(f"--{name} takes no value (got {value!r}): it runs the model")
        names.append(name)
    if models:
        kwargs["models"] = models
    if args.load_outputs:
        kwargs["reference"] = args.load_outputs
    elif len(names) > 1:
        kwargs["reference"] = names[0]
    kwargs["frameworks"] = names
    tolerance: dict[str, dict[str, Any]] = {}
    for flag, field, values, parse in (
        ("--atol", "atol", args.atol, float),
        ("--rtol", "rtol", args.rtol, float),
        ("--check-error-stat", "check", args.check_error_stat, _stat),
        ("--error-quantile", "quantile", args.error_quantile, float),
        ("--index-tolerance", "index_tolerance", args.index_tolerance, int),
        ("--postprocess", "postprocess", args.postprocess, str),
    ):
        for output, value in _per_output(values, parse, flag, {field: None}).items():
            tolerance.setdefault(output, {})[field] = value
    if args.compare == "indices":  # Polygraphy's index comparison, for every output
        for fields in [tolerance.setdefault("", {}), *tolerance.values()]:
            fields["check"] = "indices"
    metrics: dict[str, list[dict[str, Any]]] = {}
    for flag, check in METRIC_FLAGS.items():
        checked = {"check": check, "threshold": None}
        for output, value in _per_output(getattr(args, _dest(flag)), float, flag, checked).items():
            metrics.setdefault(output, []).append({"check": check, "threshold": value})
    entries: dict[str, Any] = {}
    for output in dict.fromkeys([*tolerance, *metrics]):  # each output's fields and metrics
        fields = {**tolerance.get("", {}), **tolerance.get(output, {})}
        checks = {m["check"]: m for m in [*metrics.get("", []), *metrics.get(output, [])]}
        entries[output] = [fields, *checks.values()] if checks else fields
    if entries:
        kwargs["tolerance"] = entries[""] if list(entries) == [""] else entries
    if args.seed is not None:
        kwargs["seed"] = args.seed
    if args.iterations != 1:
        kwargs["iterations"] = args.iterations
    if args.val_range:
        kwargs["val_range"] = _parsed(parse_val_range, "--val-range", args.val_range)
    if args.load_inputs or args.data_loader_script:
        kwargs["inputs"] = args.load_inputs or args.data_loader_script
    if args.onnx_outputs:
        marked = " ".join(args.onnx_outputs)  # Polygraphy's 'mark all', since 0.53 '*'
        kwargs["outputs"] = "all" if marked in ("mark all", "*") else list(args.onnx_outputs)
    if args.no_shape_check:
        kwargs["shape_check"] = "relaxed"
    if args.validate:
        kwargs["validate"] = True
    if args.use_subprocess:
        kwargs["isolate"] = True
    precisions = [p for p in PRECISIONS if getattr(args, p)] or ["fp32"]
    given = args.input_shapes
    shapes = [_parsed(parse_input_shapes, "--input-shapes", given)] if given else []
    return kwargs, precisions, shapes


def _is_file(text: str) -> bool:
    """--torch FILE rather than MODULE:FACTORY."""
    return Path(text).suffix.lower() in MODULE_FILES or Path(text).is_file()


def _no_module(name: str, model: str) -> str:
    """A module runner's flag without its MODULE:FACTORY: it cannot run the ONNX model."""
    if Path(model).suffix.lower() in (".onnx", ".xml"):
        raise TrtCompareError(
            f"--{name} needs the module to run beside {model}: --{name} MODULE:FACTORY (a "
            "function of an importable module that returns it, e.g. --torch "
            f"mymodels:make_resnet) or --{name} FILE (a TorchScript or torch.export file)"
        )
    return model


def _resolved(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The modules of --torch MODULE:FACTORY, made."""
    if "models" not in kwargs:
        return kwargs
    if str(Path.cwd()) not in sys.path:  # MODULE is importable from here, as python -m
        sys.path.insert(0, str(Path.cwd()))
    models = {}
    for name, text in kwargs["models"].items():
        if _is_file(text):  # a TorchScript or torch.export file: the runner loads it
            models[name] = text
            continue
        module_name, _, factory = text.partition(":")
        try:
            models[name] = getattr(importlib.import_module(module_name), factory)()
        except (ImportError, AttributeError) as exc:
            raise TrtCompareError(f"--{name} {text}: {exc}") from None
    return {**kwargs, "models": models}


def _run(args: argparse.Namespace) -> int:
    from ..reports.summary import format_summary, records
    from ..session import artifacts
    from ..session.brief import result_line
    from ..session.cases import CaseRunner
    from ..session.expand import expand
    from ..session.outcome import Kind, runner_name
    from ..session.settings import ToleranceSettings
    from ..session.spec import compare_spec

    kwargs, precisions, shapes = marker_arguments(args)
    if args.gen_test:
        path = Path(args.gen_test)
        path.parent.mkdir(parents=True, exist_ok=True)
        command = pytest_command(path, precisions, args.fail_fast, args.save_heatmaps)
        path.write_text(test_source(kwargs, precisions, shapes, path.resolve().parent, command))
        print(f"wrote {path} (run it: {command})")
        left = [f for f in ("--save-inputs", "--save-outputs") if getattr(args, _dest(f))]
        if left:  # files of a run, not a comparison: a test keeps a golden instead
            print(
                f"not in the test: {', '.join(left)} (a test stores its outputs and inputs "
                "as a golden: golden=True)"
            )
        return 0
    spec = compare_spec((), _resolved(kwargs), "trtcompare run", Path.cwd())
    cases, why = expand(spec, precisions, shapes)
    if not cases:
        raise TrtCompareError(why)
    runner = CaseRunner(ToleranceSettings())
    runner.tolerance_source = "option"  # the command's flags
    runner.flags = {
        "shapes": "--input-shapes",
        "reference": "--load-outputs",
        "inputs": "--load-inputs",
    }
    if args.save_inputs or args.save_outputs:
        _save(args, runner, spec, cases[0])
    failed = errors = 0
    kept: list[Any] = []
    for case in cases:
        outcome = runner.run(spec, case)
        if outcome.kind is Kind.PASSED:
            assert outcome.worst is not None
            shown = outcome.report_text(args.verbose) if args.verbose else ""
            if not args.quiet:
                print(f"PASSED {case.id}: {shown or result_line(outcome.worst)}")  # -v: report
        elif outcome.kind is Kind.MISMATCH:
            failed += 1
            assert outcome.worst is not None
            shown = result_line(outcome.worst) if args.quiet else outcome.report_text(args.verbose)
            print(f"FAILED {case.id}: {shown}")
        else:
            errors += 1
            print(f"{outcome.kind.value.upper()} {case.id}: {outcome.message}")
        if args.save_heatmaps and outcome.worst is not None and outcome.arrays is not None:
            folder = artifacts.folder_for(Path(args.save_heatmaps), case.id)
            made = artifacts.write(outcome.worst, *outcome.arrays, folder, every_output=True)
            if made is not None and not args.quiet:
                print(made.describe())
        if outcome.worst is not None:
            names = (runner_name(outcome.target), runner_name(outcome.reference))
            kept += records(outcome.worst, case.id, outcome.source, *names, args.verbose)
        if args.fail_fast and outcome.kind is not Kind.PASSED:
            break
    if kept:
        print("\naccuracy summary")
        print("\n".join(format_summary(kept, args.verbose, shutil.get_terminal_size().columns)))
    alone = len(spec.frameworks) == 1 and spec.reference_path is None
    if alone and kept and precisions == ["fp32"] and not args.validate and not args.quiet:
        print(
            f"\nnote: {spec.frameworks[0]} ran alone, so its outputs were compared with a second "
            "run of itself; give a second runner, --fp16/--bf16, --load-outputs or --validate"
        )
    return 2 if errors else 1 if failed else 0


def pytest_command(
    path: Path, precisions: list[str], fail_fast: bool = False, heatmaps: str | None = None
) -> str:
    """How the written test runs as the command did: a session selects the precisions its
    tests run at (a test's `precisions` marker only narrows them); --fail-fast is -x;
    --save-heatmaps DIR is the session's artifacts of every output."""
    selected = "" if precisions == ["fp32"] else f" --trt-precision {','.join(precisions)}"
    pictures = f" --trt-artifacts all --trt-artifacts-dir {heatmaps}" if heatmaps else ""
    return f"pytest{' -x' if fail_fast else ''}{selected}{pictures} {path}"


def _save(args: argparse.Namespace, cases: Any, spec: Any, case: Any) -> None:
    """--save-inputs, --save-outputs: the feeds, and the reference runner's outputs on them,
    as `polygraphy run --load-inputs / --load-outputs` reads them; --save-outputs to a
    .safetensors path writes a golden (with the inputs), to .npz one iteration's arrays."""
    from ..goldens import write_polygraphy_inputs, write_polygraphy_outputs

    if args.save_outputs and spec.reference_path is not None:
        raise TrtCompareError("--save-outputs with --load-outputs: the outputs are saved already")
    if spec.outputs == "all":
        raise TrtCompareError("--save-outputs/--save-inputs with --onnx-outputs mark all: not yet")
    reference, outputs, _ = cases.expected(spec, case)
    feeds = cases.feeds(spec, reference, case)
    if args.save_inputs:
        write_polygraphy_inputs(Path(args.save_inputs), feeds)
        print(f"wrote {args.save_inputs} (--load-inputs {args.save_inputs})")
    if not args.save_outputs:
        return
    path = Path(args.save_outputs)
    suffix = path.suffix.lower()
    if suffix in (".safetensors", ".golden"):
        _save_golden(path, reference, outputs, feeds, spec.seed)
    elif suffix == ".npz":
        if len(outputs) > 1:
            raise TrtCompareError(
                f"--save-outputs {path}: an .npz holds one iteration, this run made "
                f"{len(outputs)}: save them as Polygraphy JSON or a golden (.safetensors)"
            )
        np.savez(path, **outputs[0])
    else:
        write_polygraphy_outputs(path, outputs, reference.name)
    print(f"wrote {path} ({reference.name}; --load-outputs {path})")


def _save_golden(
    path: Path, reference: Any, outputs: list[Any], feeds: list[Any], seed: int
) -> None:
    """A golden of the reference's outputs and the feeds, as the golden fixture writes one."""
    from ..goldens import GoldenMeta, write_golden

    meta = GoldenMeta(
        precision="fp32",
        seed=seed,
        runner=reference.describe(),
        plugin_version=importlib.metadata.version("pytest-trtcompare"),
    )
    later = list(zip(outputs[1:], feeds[1:], strict=True))
    write_golden(path, outputs[0], feeds[0], meta, later=later)


def test_source(
    kwargs: dict[str, Any], precisions: list[str], shapes: list[Any], folder: Path, command: str
) -> str:
    """The pytest module that makes the comparison of these marker arguments, run by
    `command`: files named relative to `folder` (the test's), a module made by its factory."""
    arguments = dict(kwargs)
    head = ["import pytest"]
    for key in ("model", "reference", "inputs"):  # files (a reference may be a framework)
        value = arguments.get(key)
        if isinstance(value, str) and value not in arguments["frameworks"]:
            arguments[key] = os.path.relpath(Path(value).resolve(), folder)
    made = arguments.pop("models", {})
    files = {name: text for name, text in made.items() if _is_file(text)}
    made = {name: text for name, text in made.items() if name not in files}
    lines = [f"    {key}={_literal(value)}," for key, value in arguments.items()]
    calls = []
    here = os.path.relpath(Path.cwd(), folder)
    if made and here != ".":  # the factory's module is imported from where the command ran
        head[:0] = ["import sys", "from pathlib import Path", ""]
        head += ["", f"sys.path.insert(0, str(Path(__file__).parent / {_literal(here)}))"]
    for name, text in made.items():
        module, _, factory = text.partition(":")
        head.append(f"from {module} import {factory}  # noqa: E402")
        calls.append(f"{_literal(name)}: {factory}()")
    calls += [
        f"{_literal(name)}: {_literal(os.path.relpath(Path(text).resolve(), folder))}"
        for name, text in files.items()
    ]
    if calls:
        lines.append(f"    models={{{', '.join(calls)}}},")
    marks = ["@pytest.mark.compare_frameworks(", *lines, ")"]
    if precisions != ["fp32"]:
        marks.append(f"@pytest.mark.precisions({', '.join(map(_literal, precisions))})")
    if shapes:
        marks.append(f"@pytest.mark.shapes({', '.join(map(_literal, shapes))})")
    source = [
        '"""Written by `trtcompare run --gen-test`: the comparison that command made.',
        "",
        f"Run it: {command}",
        '"""',
        "",
        *head,
        "",
        "",
        *marks,
        f"def test_{_identifier(Path(str(kwargs['model'])).stem)}(comparison):",
        "    pass",
        "",
    ]
    return "\n".join(source)


def _literal(value: Any, indent: int = 4) -> str:
    """`value` as Python source in the style ruff and black write (double quotes; a dict
    that would pass 100 columns at `indent`, an entry a line)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        entries = [f"{_literal(k)}: {_literal(v, indent + 4)}" for k, v in value.items()]
        if indent + 20 + sum(len(e) + 2 for e in entries) <= 100:
            return "{" + ", ".join(entries) + "}"
        inner = " " * (indent + 4)
        return "{\n" + "".join(f"{inner}{e},\n" for e in entries) + " " * indent + "}"
    if isinstance(value, list):
        return "[" + ", ".join(map(_literal, value)) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(map(_literal, value)) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def _identifier(text: str) -> str:
    name = "".join(c if c.isalnum() else "_" for c in text).strip("_")
    return name if name and not name[0].isdigit() else f"model_{name}"
