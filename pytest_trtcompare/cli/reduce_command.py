"""`trtcompare reduce MODEL`: the smallest subgraph that still fails at fp16/bf16, from the
shell (session/reduce.py), with debug-precision's flags.

-o OUT.onnx writes the reduced model, its inputs beside it (OUT.inputs.safetensors, a golden
holding the inputs and the fp32 reference outputs of every feed, and OUT.inputs.json for
`trtcompare run --load-inputs`), and prints the command that reproduces the failure. Exit 0
when the model passes (nothing to reduce), 1 when a failing subgraph is reported, 2 on a bad
argument, model or runner (one line on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .. import runners
from ..inputs import DEFAULT_SEED
from .debug_precision import parse_shapes, tolerances
from .run import at_least


def run(args: argparse.Namespace) -> int:
    from ..session.reduce import reduce_model

    shapes = parse_shapes(args.shapes)
    tolerance = tolerances(args)
    log = None if args.json else (lambda line: print(line, file=sys.stderr))
    result = reduce_model(
        args.model,
        args.precision,
        args.runner,
        tolerance,
        shapes or None,
        args.load_inputs,
        seed=args.seed,
        iterations=args.iterations,
        log=log,
    )
    command = result.save(args.output) if args.output and not result.passed else None
    if args.json:
        report = result.to_json()
        if command is not None:
            report["command"] = command
        print(json.dumps(report))
    else:
        print(result.describe())
        if command is not None:
            print(f"wrote {args.output} and its inputs; reproduce with:\n  {command}")
    return 0 if result.passed else 1


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "reduce",
        help="find the smallest subgraph that still fails at fp16/bf16; exit 1 if one fails",
    )
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
        default=1,
        metavar="N",
        help="judge every candidate on N seeded synthetic draws (default 1)",
    )
    parser.add_argument(
        "--seed", type=at_least(0), default=DEFAULT_SEED, help="of the first synthetic draw"
    )
    parser.add_argument(
        "--load-inputs",
        metavar="FILE",
        help="judge on these feeds instead: Polygraphy --save-inputs JSON, a golden, .npz",
    )
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        help="write the reduced model here, its inputs beside it (OUT.inputs.safetensors, "
        "OUT.inputs.json)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"nodes": [...], "op_types": [...], "passed": ..., "runs": N, '
        '"node_count": N, "unrunnable": N, "command": ...}',
    )
    parser.set_defaults(run=run)
