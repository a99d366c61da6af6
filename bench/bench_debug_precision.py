"""Precision debugging on ResNet-50: which nodes keep it within tolerance at fp16 / bf16.

Run: python bench/bench_debug_precision.py [--case fp16-onnxrt] [--json FILE]

The model is onnx's `light_resnet50.onnx` (site-packages, no download) with seeded random
weights (conftest_examples/zoo.py), input 1x3x224x224 from the seeded synthetic feed. The
tolerances are tighter than the precision defaults (ResNet-50 with these weights passes
those at full fp16 / bf16), so that some nodes have to stay in fp32. Each case prints the
nodes kept, the verdict, the number of candidate runs and the wall time.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import onnxruntime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conftest_examples.zoo import light_model
from pytest_trtcompare import debug
from pytest_trtcompare.compare import Tolerance

#: name -> (precision, runner, atol = rtol)
CASES = {
    "fp16-onnxrt": ("fp16", "onnxrt", 2.5e-4),
    "bf16-onnxref": ("bf16", "onnxref", 1.2e-2),
}


def run_case(name: str) -> dict:
    level, runner, tol = CASES[name]
    model = light_model("resnet50", seed=0)
    started = time.perf_counter()
    result = debug.find_fp32_nodes(
        model, level, runner, Tolerance(atol=tol, rtol=tol), log=lambda line: print("  " + line)
    )
    seconds = time.perf_counter() - started
    row = {
        "case": name,
        "precision": level,
        "runner": runner,
        "atol=rtol": tol,
        "candidates": result.node_count,
        **result.to_json(),
        "seconds": round(seconds, 1),
    }
    print(result.describe())
    print(json.dumps(row))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), action="append")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    print(f"python {platform.python_version()}, onnxruntime {onnxruntime.__version__}")
    rows = [run_case(name) for name in args.case or CASES]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
