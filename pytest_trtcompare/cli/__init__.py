"""The `trtcompare` console script: inspect, diff and convert saved outputs from the shell,
check saved outputs against a golden as the pytest entry points do (`check`,
session/golden_check.py), and find the nodes a fp16/bf16 model must keep in fp32
(`debug-precision`, cli/debug_precision.py).

Every command reads any saved outputs: goldens (.safetensors, old .golden), Polygraphy JSON
(file or per-iteration directory), ONNX test-data directories, .npz and .npy.
"""

from __future__ import annotations

import argparse
import functools
import importlib.metadata
import json
import os
import platform
import shlex
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..engine import PRECISIONS, RULES, STAT_CHECKS, ToleranceTable, compare_outputs, num, shortest
from ..errors import TrtCompareError
from ..goldens import (
    Golden,
    GoldenError,
    GoldenMeta,
    Iteration,
    current_path,
    iterate_json,
    load_reference,
    polygraphy_runs,
    write_golden,
    write_polygraphy_inputs,
    write_polygraphy_outputs,
)
from ..session import option_table
from ..session.golden_check import check_golden
from ..session.layout import counted
from ..session.option_table import comparison_options
from ..session.outcome import Kind, compared
from ..session.settings import ToleranceSettings
from .debug_precision import add_parser as add_debug_precision
from .drift_command import add_parser as add_drift
from .merge import add_parser as add_merge
from .reduce_command import add_parser as add_reduce
from .run import add_parser as add_run
from .tolerances import add_parser as add_tolerances


def _show(args: argparse.Namespace) -> int:
    try:
        golden = load_reference(Path(args.file), runner=args.runner)
    except GoldenError:
        inputs = _saved_inputs(Path(args.file))
        if inputs is None:
            raise
        golden = inputs
    iterations = golden.iterations
    for index, iteration in enumerate(iterations):
        indent = ""
        if len(iterations) > 1:
            print(f"iteration {index} of {len(iterations)}:")
            indent = "  "
        for group, arrays in (("output", iteration.outputs), ("input", iteration.inputs)):
            for name, array in arrays.items():
                line = f"{indent}{group} {name}: {array.dtype} {tuple(array.shape)}"
                if array.size and array.dtype.kind in "biufV":
                    line += _value_range(array)
                print(line)
    if golden.meta and args.meta:
        print(json.dumps(golden.meta, indent=2, sort_keys=True))
    elif golden.meta:
        print(f"meta: {', '.join(sorted(golden.meta))} (all of it with --meta)")
    return 0


def _saved_inputs(path: Path) -> Golden | None:
    """A Polygraphy `--save-inputs` file (a list of feeds) as a golden of inputs only, for
    `show`; None for anything else."""
    if path.suffix != ".json" or not path.is_file():
        return None
    try:
        feeds = [dict(feed) for feed in iterate_json(path)]
    except (TrtCompareError, TypeError, ValueError):
        return None
    if not feeds or not all(isinstance(v, np.ndarray) for feed in feeds for v in feed.values()):
        return None
    later = tuple(Iteration({}, feed) for feed in feeds[1:])
    return Golden({}, feeds[0], {"source": "polygraphy --save-inputs"}, path, later=later)


#: The tolerance options of diff and check: argument -> the Tolerance field it sets, and its
#: argparse attributes.
_TOLERANCE_OPTIONS: dict[str, tuple[str, dict[str, Any]]] = {
    "atol": ("atol", {"type": float}),
    "rtol": ("rtol", {"type": float}),
    "check_error_stat": ("check", {"choices": STAT_CHECKS}),
    "rule": ("rule", {"choices": RULES}),
}


def _offered(command: str) -> list[Any]:
    return [declared for declared in option_table.OPTIONS if command in declared.cli]


def _options(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """The comparison options of session/option_table.py as the command gives them (each
    default where not given): keywords of compare_outputs."""
    given = {declared.name: getattr(args, declared.name) for declared in _offered(command)}
    return comparison_options(given, {})


def _value_range(array: np.ndarray) -> str:
    """'  min -1.5  max 2.25  mean 0.5': min and max in the fewest digits that read back in
    the array's dtype, the mean compact, over the finite values; NaN and Inf counted."""
    flat = array.reshape(-1)
    wide = flat.astype(np.float64)
    finite = flat[np.isfinite(wide)]
    text = ""
    if finite.size:
        low, high = (
            float(v) if flat.dtype.kind in "fV" else v.item() for v in (finite.min(), finite.max())
        )
        text += f"  min {shortest(low, flat.dtype)}  max {shortest(high, flat.dtype)}"
        text += f"  mean {num(float(wide[np.isfinite(wide)].mean()))}"
    for label, count in (("NaN", np.isnan(wide).sum()), ("Inf", np.isinf(wide).sum())):
        if count:
            text += f"  {label} at {count} of {flat.size}"
    return text


def _tolerance_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The tolerance options given (--atol, --rtol, --check-error-stat, --rule)."""
    given = ((key, getattr(args, name)) for name, (key, _) in _TOLERANCE_OPTIONS.items())
    return {key: value for key, value in given if value is not None}


def _plots(result: Any, actual: Any, expected: Any, folder: str | None) -> None:
    """--plots DIR: a mismatch's arrays and pictures."""
    if not folder or result.passed:
        return
    from ..session import artifacts

    made = artifacts.write(result, actual, expected, Path(folder))
    if made is not None:
        print()
        print(made.describe())


def _stored_tolerance(sides: Sequence[tuple[str, Any]]) -> tuple[Any, str | None]:
    """The tolerance a golden stored when it was written (B's first, the reference), and
    which file it came from; (None, None) when neither side stores one."""
    for path, saved in sides:
        stored = saved.meta.get("tolerance")
        if isinstance(stored, (dict, list)) and stored:
            return stored, path
    return None, None


def _diff(args: argparse.Namespace) -> int:
    a = load_reference(Path(args.a), runner=args.runner)
    b = load_reference(Path(args.b), runner=args.runner)
    stored, source = _stored_tolerance([(args.b, b), (args.a, a)])
    fields = _tolerance_fields(args)
    named = (name for name in _TOLERANCE_OPTIONS if getattr(args, name) is not None)
    given = ", ".join(f"--{name.replace('_', '-')}" for name in named)
    table = ToleranceTable(stored, "golden")
    if fields:
        table.override(fields, strict=True, source="option")
    if len(a.iterations) != len(b.iterations):
        raise TrtCompareError(
            f"{args.a} holds {counted(len(a.iterations), 'iteration')}, {args.b} holds "
            f"{len(b.iterations)}: diff compares them iteration by iteration"
        )
    results = [
        compare_outputs(
            x.outputs, y.outputs, {"": table.default, **table.per_output}, **_options(args, "diff")
        )
        for x, y in zip(a.iterations, b.iterations, strict=True)
    ]
    outcome = compared(results, source="diff")
    if source is not None:
        print(f"tolerance: stored in {source}" + (f", overridden by {given}" if given else ""))
    else:
        print(f"tolerance: {given} given" if given else "tolerance: the default")
    print(outcome.report_text(args.verbose))
    worst = next(i for i, result in enumerate(results) if result is outcome.worst)
    _plots(outcome.worst, a.iterations[worst].outputs, b.iterations[worst].outputs, args.plots)
    return 0 if outcome.kind is Kind.PASSED else 1


class _CommandGoldens:
    """The golden store as `trtcompare check` runs it (session/golden_check.GoldenAccess):
    the path as given, --update / --update-missing, this command as the one that writes it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.update_all = bool(args.update)
        self.update_missing = bool(args.update_missing)
        given = (
            ("precision", None if args.precision == "fp32" else args.precision),
            *((name, getattr(args, name)) for name in (*_TOLERANCE_OPTIONS, "runner")),
            *((o.name, getattr(args, o.name)) for o in _offered("check")),
        )
        options = [
            f"--{k.replace('_', '-')}" + ("" if value is True else f"={value}")
            for k, value in given
            if value is not None and value is not False  # an on/off option's off: not given
        ]
        words = ["trtcompare", "check", args.golden, args.outputs, *options, "--update"]
        self.hint = shlex.join(words)

    def show(self, path: Path) -> str:
        return str(path)

    def regenerate_hint(self) -> str:
        return self.hint

    def write(self, path: Path, iterations: Any, meta: GoldenMeta) -> str:
        (outputs, inputs), *later = iterations
        return write_golden(path, outputs, inputs, meta, later=later)

    def compared(self, path: Path) -> None:
        """Nothing to count: one golden per command."""

    def old_format(self, path: Path, version: int) -> None:
        print(
            f"trtcompare: {path} is a golden of the old format {version}; rewrite it as "
            f"{current_path(path)} with:\n  {self.hint}",
            file=sys.stderr,
        )


def _golden_path(text: str, instead: str) -> Path:
    """A golden to write is a .safetensors file (an old .golden's name stands for one): any
    other file there is someone's saved outputs, never written over."""
    path = Path(text)
    if path.suffix.lower() not in (".safetensors", ".golden"):
        raise TrtCompareError(
            f"{path}: a golden is a .safetensors file, and this command writes one there; "
            f"{path.suffix or 'a file without a suffix'} is no golden (instead: {instead})"
        )
    return path


def _check(args: argparse.Namespace) -> int:
    """The golden check of the `golden` fixture and compare_frameworks(golden=True) on saved
    outputs: the same outcome and message; 0 passed or written, 1 mismatch, 2 otherwise."""
    golden = _golden_path(args.golden, f"trtcompare diff {args.outputs} {args.golden}")
    saved = load_reference(Path(args.outputs), runner=args.runner)
    fields = _tolerance_fields(args)
    table = ToleranceSettings().resolve(args.precision, None, source="option", **fields)
    outcome = check_golden(
        _CommandGoldens(args),
        golden,
        [iteration.outputs for iteration in saved.iterations],
        {"": table.default, **table.per_output},
        inputs=[iteration.inputs for iteration in saved.iterations],
        meta=GoldenMeta.kept_from(saved.meta, "seed", "shapes", "val_range").but(
            precision=args.precision
        ),
        target=saved.meta.get("runner"),  # a golden's runner: a changed model is named
        compare=functools.partial(compare_outputs, **_options(args, "check")),
    )
    if outcome.kind is Kind.GOLDEN_WRITTEN:
        print(outcome.message)
        return 0
    if outcome.kind not in (Kind.PASSED, Kind.MISMATCH):
        print(f"trtcompare: {outcome.message}", file=sys.stderr)
        return 2
    print(outcome.report_text(args.verbose))
    if outcome.arrays is not None:
        _plots(outcome.worst, *outcome.arrays, args.plots)
    return 0 if outcome.kind is Kind.PASSED else 1


def _import_polygraphy(args: argparse.Namespace) -> int:
    golden = _golden_path(args.golden, "a .safetensors path to write")
    runs = dict(polygraphy_runs(Path(args.outputs)))
    runner = args.runner or next(iter(runs))
    if runner not in runs:
        raise TrtCompareError(f"{args.outputs}: no runner {runner!r}; it has {sorted(runs)}")
    outputs = runs[runner]
    feeds = list(iterate_json(Path(args.inputs))) if args.inputs else [{}] * len(outputs)
    if args.iteration is not None:
        if not 0 <= args.iteration < len(outputs):
            raise TrtCompareError(
                f"{args.outputs}: --iteration {args.iteration}: runner {runner!r} has "
                f"{len(outputs)} iteration(s), 0 to {len(outputs) - 1}"
            )
        outputs = [outputs[args.iteration]]
        feeds = [feeds[args.iteration] if args.iteration < len(feeds) else {}]
    elif len(feeds) != len(outputs):
        raise TrtCompareError(
            f"{args.inputs} holds {counted(len(feeds), 'feed')}, {args.outputs} "
            f"{counted(len(outputs), 'iteration')} "
            f"of {runner}: give the inputs they were made from, or --iteration to take one"
        )
    meta = GoldenMeta(source="polygraphy", runner=runner)
    if args.iteration is not None:
        meta = meta.but(iteration=args.iteration)
    iterations = [(out, dict(feed)) for out, feed in zip(outputs, feeds, strict=True)]
    (first, inputs), *later = iterations
    outcome = write_golden(golden, first, inputs, meta, later=later)
    written = current_path(Path(args.golden))  # an old .golden name: its .safetensors
    taken = f", {len(iterations)} iterations" if len(iterations) > 1 else ""
    print(f"{outcome}: {written} ({len(first)} outputs of {runner}{taken})")
    return 0


def _export_polygraphy(args: argparse.Namespace) -> int:
    golden = load_reference(Path(args.golden))
    iterations = golden.iterations
    write_polygraphy_outputs(
        Path(args.outputs), [it.outputs for it in iterations], args.runner_name
    )
    print(f"wrote {args.outputs} (polygraphy run --load-outputs {args.outputs})")
    if args.inputs:
        if not golden.inputs:
            raise TrtCompareError(f"{args.golden} holds no inputs to export")
        write_polygraphy_inputs(Path(args.inputs), [it.inputs for it in iterations])
        print(f"wrote {args.inputs} (polygraphy run --load-inputs {args.inputs})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trtcompare",
        description="Inspect, compare and convert saved model outputs (goldens: .safetensors, "
        "old .golden; Polygraphy JSON, ONNX test data, .npz, .npy).",
    )
    parser.add_argument(
        "--version",
        action=_Version,
        help="print the version of pytest-trtcompare and of the libraries it uses, and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="list the outputs (and inputs) of saved outputs")
    show.add_argument("file")
    show.add_argument("--meta", action="store_true", help="print the golden's metadata")
    show.add_argument("--runner", help="Polygraphy JSON: which runner (default: the first)")
    show.set_defaults(run=_show)

    diff = commands.add_parser(
        "diff",
        help="compare outputs A (actual) with B (expected); exit 1 on mismatch. The tolerance "
        "is the one a golden B (else A) stored when written, else the default; --atol, "
        "--rtol, --check-error-stat, --rule override it",
    )
    diff.add_argument("a", help="actual outputs")
    diff.add_argument("b", help="expected outputs, the reference")
    _comparison_options(diff, "diff")
    diff.set_defaults(run=_diff)

    check = commands.add_parser(
        "check",
        help="check saved outputs against a golden as the golden fixture does: exit 0 passed "
        "or written, 1 on mismatch, 2 missing or damaged",
    )
    check.add_argument(
        "golden", help="the golden (.safetensors; an old .golden is read, rewritten as one)"
    )
    check.add_argument("outputs", help="the outputs to check (a golden, Polygraphy JSON, .npz ...)")
    check.add_argument(
        "--precision",
        default="fp32",
        choices=PRECISIONS,
        help="the built-in default tolerance of this precision (default fp32), as "
        "golden.check(precision=...)",
    )
    _comparison_options(check, "check")
    update = check.add_mutually_exclusive_group()
    update.add_argument(
        "--update", action="store_true", help="write or refresh the golden (--trt-update-goldens)"
    )
    update.add_argument(
        "--update-missing",
        action="store_true",
        help="write the golden only if it does not exist (--trt-update-goldens-missing)",
    )
    check.set_defaults(run=_check)

    imp = commands.add_parser(
        "import-polygraphy",
        help="make a golden (.safetensors) from polygraphy run --save-outputs/--save-inputs",
    )
    imp.add_argument("outputs", help="Polygraphy --save-outputs JSON (file or directory)")
    imp.add_argument("golden", help="the golden to write (.safetensors)")
    imp.add_argument("--inputs", help="Polygraphy --save-inputs JSON to store with it")
    imp.add_argument("--runner", help="which runner's outputs (default: the first)")
    imp.add_argument(
        "--iteration",
        type=int,
        help="take this iteration only (default: every iteration, each with its inputs)",
    )
    imp.set_defaults(run=_import_polygraphy)

    exp = commands.add_parser(
        "export-polygraphy", help="write saved outputs as JSON polygraphy run --load-outputs reads"
    )
    exp.add_argument("golden", help="saved outputs (a golden, .npz, ...)")
    exp.add_argument("outputs", help="the outputs JSON to write")
    exp.add_argument("--inputs", help="also write the golden's inputs as --load-inputs JSON")
    exp.add_argument("--runner-name", default="pytest-trtcompare")
    exp.set_defaults(run=_export_polygraphy)

    add_run(commands)
    add_debug_precision(commands)
    add_reduce(commands)
    add_merge(commands)
    add_drift(commands)
    add_tolerances(commands)
    for command in commands.choices.values():  # its own usage on an unknown option
        command.set_defaults(command_parser=command)
    return parser


def _comparison_options(parser: argparse.ArgumentParser, command: str) -> None:
    for declared in _offered(command):  # session/option_table.py's comparison options
        kind = (
            {"action": "store_true"} if declared.kind == "flag" else {"choices": declared.choices}
        )
        parser.add_argument(
            f"--{declared.name.replace('_', '-')}",
            help=f"{declared.help} (pytest: {declared.flag})",
            **kind,
        )
    for name, (_, attributes) in _TOLERANCE_OPTIONS.items():
        parser.add_argument(f"--{name.replace('_', '-')}", **attributes)
    parser.add_argument("--runner", help="Polygraphy JSON: which runner (default: the first)")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    parser.add_argument(
        "--plots", metavar="DIR", help="on a mismatch, write arrays and pictures of it here"
    )


class _Version(argparse.Action):
    """--version: the versions are looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        print(versions())
        parser.exit()


def versions() -> str:
    """'trtcompare (pytest-trtcompare) 0.1.0' and the versions of python and the libraries."""
    from ..runners import libraries

    found = [f"python {platform.python_version()}"]
    named = [("numpy",), *(library.distributions for library in libraries()), ("pytest",)]
    for distributions in named:
        name = distributions[0]
        for distribution in distributions:
            try:
                found.append(f"{name} {importlib.metadata.version(distribution)}")
                break
            except importlib.metadata.PackageNotFoundError:
                continue
        else:
            found.append(f"{name} not installed")
    version = importlib.metadata.version("pytest-trtcompare")
    return f"trtcompare (pytest-trtcompare) {version}\n{', '.join(found)}"


def _show_warning(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
    """A warning as one line of the command's ('trtcompare: warning: ...'), not Python's
    with the source line that raised it."""
    print(f"trtcompare: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args, unknown = build_parser().parse_known_args(argv)
    if unknown:  # argparse reports these with the top-level usage: show the command's
        args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return int(args.run(args))
    except BrokenPipeError:  # `trtcompare show G | head`: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that Python's exit flush fails silently
        return 0
    except (TrtCompareError, OSError) as exc:
        print(f"trtcompare: {exc}", file=sys.stderr)
        return 2
