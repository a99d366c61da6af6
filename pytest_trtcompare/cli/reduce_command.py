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
from pathlib import Path
from typing import Any

from .debug_precision import add_search_arguments, searched


def run(args: argparse.Namespace) -> int:
    from ..session.reduce import reduce_model

    result = searched(reduce_model, args)
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
    add_search_arguments(parser)
    parser.add_argument(
        "-o",
        "--output",
        type=Path,
        help="write the reduced model here, its inputs beside it (OUT.inputs.safetensors, "
        "OUT.inputs.json), and print the command that reproduces the failure",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"nodes": [...], "op_types": [...], "passed": ..., "runs": N, '
        '"node_count": N, "unrunnable": N}, with -o "command" too',
    )
    parser.set_defaults(run=run)
