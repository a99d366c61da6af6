"""The range scan on planted models: what it names, and the candidate runs of
`find_fp32_nodes` with it (the default) and without it (`range_scan=False`, the bisection).

Run: python bench/bench_range_scan.py [--model resnet18 --model gpt2 ...] [--json FILE]

Each model is the zoo's (tests/zoo/models.py: seeded random weights, exported by
torch.onnx.export as a user would) with one node planted to overflow fp16: the weight of a
Conv (resnet18) or MatMul (gpt2) in the middle of the graph is multiplied by a power
of two k that takes its output past 65504, and a node `plant_rescale` (Mul by 1/k, exact)
inserted after it gives the rest of the model its fp32 values back. The planted pair is
that node and `plant_rescale`, which must both run in fp32. Runner onnxref (RUNNER), the
precision's default tolerance, the seeded synthetic feed of the zoo's shapes.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import onnx
import onnxruntime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_trtcompare import debug
from pytest_trtcompare.inputs import synthetic_feed
from pytest_trtcompare.runners import graph_input_specs
from tests.planted_models import plant_overflow
from tests.zoo.models import build, export

#: the runner of the search: `trtcompare debug-precision`'s default (onnx.reference). onnxrt
#: would fold the planted Mul back into a Conv's weight (its ConvMulFusion): no overflow left.
RUNNER = "onnxref"
#: model -> the op type whose weight is scaled
PLANTS = {"resnet18": "Conv", "gpt2": "MatMul"}


def planted(name: str, folder: Path) -> tuple[onnx.ModelProto, str, dict]:
    """The zoo's export with its PLANTS node planted (tests/planted_models.py
    `plant_overflow`), the node's name and the feed."""
    model = onnx.load(str(export(name, folder)))
    feed = synthetic_feed(graph_input_specs(model), shapes=build(name).shapes, seed=0)
    model, node = plant_overflow(model, PLANTS[name], feed)
    return model, node, feed


def run_model(name: str, folder: Path) -> dict:
    model, node, feed = planted(name, folder)
    rows = {}
    for label, scan in (("bisection", False), ("range scan", True)):
        started = time.perf_counter()
        result = debug.find_fp32_nodes(model, "fp16", RUNNER, inputs=feed, range_scan=scan)
        rows[label] = (result, time.perf_counter() - started)
    after, before = rows["range scan"][0], rows["bisection"][0]
    assert after.scan is not None
    row = {
        "model": name,
        "planted": [node, "plant_rescale"],
        "candidates": after.node_count,
        "named": list(after.scan.nodes),
        "scan_runs": after.scan.runs,
        "scan_tensors": after.scan.tensors,
        "runs_before": before.runs,
        "keep_before": list(before.keep_fp32),
        "runs_after": after.runs,
        "keep_after": list(after.keep_fp32),
        "passed": [before.passed, after.passed],
        "seconds": [round(rows["bisection"][1], 1), round(rows["range scan"][1], 1)],
    }
    print("\n".join(after.probable_causes))
    print(json.dumps(row))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(PLANTS), action="append")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, onnxruntime {onnxruntime.__version__}")
    with tempfile.TemporaryDirectory() as folder:
        rows = [run_model(name, Path(folder)) for name in args.model or ("resnet18", "gpt2")]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
