"""`trtcompare debug-precision`: the nodes to keep in fp32, from the shell.

Exit status: 0 when the mixed model passes, 1 when no set of fp32 nodes passes, 2 on a bad
argument, model or runner (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import onnx

from .. import runners
from ..engine import FIELD_NAMES, METRICS, Tolerance
from ..errors import InputDataError, ToleranceError
from ..inputs import DEFAULT_SEED
from ..session.settings import (
    is_metric_spec,
    parse_input_shapes,
    parse_metric,
    parse_tolerance_fields,
)
from .run import at_least


def parse_shapes(values: list[str]) -> dict[str, tuple[int, ...]]:
    """--shapes as `trtcompare run --input-shapes` takes them: 'x:1x3x224x224,y:2x5' or
    Polygraphy's 'x:[1,3,224,224] y:[2,5]'."""
    if not values:
        return {}
    text = " ".join(values)
    try:
        return parse_input_shapes(text)
    except ValueError as exc:
        raise InputDataError(f"--shapes {text}: {exc}") from None


def parse_check(text: str) -> Tolerance:
    """One --check: a metric check 'NAME=VALUE' or 'NAME>=VALUE' (cosine=0.999, snr>=25,
    l2<=1e-3), or tolerance fields 'check=mean atol=1e-3 ...'."""
    if is_metric_spec(text):
        return parse_metric(text, "--check")
    name, sep, _ = text.strip().partition("=")
    if sep and name not in FIELD_NAMES and " " not in text.strip():
        raise ToleranceError(
            f"--check {text!r}: {name!r} is not a check ({', '.join(METRICS)}) "
            f"nor a tolerance field ({', '.join(sorted(FIELD_NAMES))})"
        )
    return Tolerance(**parse_tolerance_fields(text, f"--check {text!r}"))


def tolerances(args: argparse.Namespace) -> list[Tolerance]:
    """--atol/--rtol make the elementwise tolerance (the precision's default without
    --check); each --check adds one more that must pass too."""
    checks = [parse_check(text) for text in args.check]
    fields = {k: v for k, v in (("atol", args.atol), ("rtol", args.rtol)) if v is not None}
    if fields or not checks:
        try:
            checks.insert(0, Tolerance.for_precision(args.precision, **fields))
        except ToleranceError as exc:
            raise ToleranceError(f"--atol/--rtol: {exc}") from None
    return checks


def searched(function: Any, args: argparse.Namespace, **keywords: Any) -> Any:
    """`function` (find_fp32_nodes, reduce_model) called with the flags of
    `add_search_arguments`; the progress log on stderr unless --json; a dynamic input's
    missing shape said as --shapes takes it."""
    runners.check_framework_name(args.runner)
    if (
        args.precision
        not in runners.capabilities(runners.canonical_framework(args.runner)).converted
    ):
        converting = runners.runners_that(lambda runner: args.precision in runner.converted)
        raise InputDataError(
            f"--runner {args.runner}: it does not run an ONNX model converted to "
            f"{args.precision}, which the search varies; take one of {', '.join(converting)}"
        )
    if args.load_inputs is not None:
        given = [
            flag
            for flag, value, default in (
                ("--iterations", args.iterations, None),
                ("--seed", args.seed, None),
                ("--shapes", args.shapes, []),
            )
            if value != default
        ]
        if given:
            raise InputDataError(
                f"--load-inputs {args.load_inputs} gives the feeds: {' / '.join(given)} "
                "apply to synthetic draws only; leave them out"
            )
    try:
        return function(
            args.model,
            args.precision,
            args.runner,
            tolerances(args),
            parse_shapes(args.shapes) or None,
            args.load_inputs,
            seed=DEFAULT_SEED if args.seed is None else args.seed,
            iterations=args.iterations or 1,
            log=None if args.json else (lambda line: print(line, file=sys.stderr)),
            **keywords,
        )
    except InputDataError as exc:
        if exc.shape_needed is None:
            raise
        raise exc.with_shape_flag("--shapes") from None


def run(args: argparse.Namespace) -> int:
    from ..session import precision_debug

    started = time.perf_counter()
    result = searched(precision_debug.find_fp32_nodes, args, range_scan=not args.no_range_scan)
    seconds = time.perf_counter() - started
    if args.output:
        onnx.save_model(result.model, args.output)
    if args.json:
        report: dict[str, Any] = result.to_json()
        print(json.dumps(report))
    else:
        print(result.describe())
        if args.output:
            print(f"wrote {args.output} ({seconds:.1f} s)")
    return 0 if result.passed else 1


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """The model and the flags of both searches (debug-precision, reduce): the precision,
    the runner, the tolerance, the shapes, and the draws judged."""
    parser.add_argument("model", type=Path, help="the fp32 ONNX model")
    parser.add_argument("--precision", choices=("fp16", "bf16"), default="fp16")
    parser.add_argument(
        "--runner",
        default=runners.DEBUG_PRECISION_RUNNER,
        help=f"a runner of ONNX models (default {runners.DEBUG_PRECISION_RUNNER})",
    )
    parser.add_argument("--atol", type=float, help="default: the precision's built-in tolerance")
    parser.add_argument("--rtol", type=float)
    parser.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="SPEC",
        help="another tolerance that must pass: NAME=VALUE for a metric check, or "
        "'check=mean atol=1e-3' (repeatable)",
    )
    parser.add_argument(
        "--shapes",
        "--input-shapes",
        dest="shapes",
        action="append",
        default=[],
        metavar="NAME:1x3x224x224",
        help="input shapes (NAME:[1,3,224,224] too, as trtcompare run takes them)",
    )
    parser.add_argument(
        "--iterations",
        "--iters",
        type=at_least(1),
        metavar="N",
        help="judge every candidate on N seeded synthetic draws (default 1)",
    )
    parser.add_argument(
        "--seed", type=at_least(0), help=f"of the first synthetic draw (default {DEFAULT_SEED})"
    )
    parser.add_argument(
        "--load-inputs",
        metavar="FILE",
        help="judge on these feeds instead: Polygraphy --save-inputs JSON, a golden, .npz",
    )


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "debug-precision",
        help="find the nodes to keep in fp32 for a fp16/bf16 model to pass; exit 1 if none",
    )
    add_search_arguments(parser)
    parser.add_argument("-o", "--output", type=Path, help="write the mixed-precision model here")
    parser.add_argument(
        "--no-range-scan",
        action="store_true",
        help="search by bisection alone, not from the nodes the range scan names (one fp32 "
        "run per 64 tensors that names the probable causes)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"keep_fp32": [...], "passed": ..., "runs": N, "probable_causes": [...], '
        '"scan_runs": N}',
    )
    parser.set_defaults(run=run)
