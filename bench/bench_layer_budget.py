"""Peak memory of a per-layer comparison (outputs="all") under --trt-layer-budget, against the
code before it (fixed groups of 64 tensors), on a model whose intermediate tensors are several
times the budget.

Run: python bench/bench_layer_budget.py [--depth 32] [--rows 512] [--width 1024]
     [--budgets unlimited,64MiB,16MiB] [--baseline REV] [--pairs onnxrt,onnxref] [--json FILE]

The model is `depth` blocks of MatMul (one shared width x width weight), Add, Tanh on a
rows x width float32 input: 3 * depth intermediate tensors of rows * width * 4 bytes (fp32).
Each row is one child process (a fresh interpreter: its ru_maxrss is its own peak) that
builds the target (fp16) and the reference (onnxrt fp32) with outputs="all" and runs
compare_layers once; "before" runs the package as it was at --baseline (default a1fdd44,
through `git archive`, the repository left as it is) with its default grouping. Reported:
peak RSS, what the process held before the comparison (imports, runners, weights), the
difference, the time, and the first divergence (it must be the same in every row).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "a1fdd44"

CHILD = r"""
import json, resource, sys, time
import numpy as np
from onnx import TensorProto, helper, numpy_helper
from pytest_trtcompare import runners
from pytest_trtcompare.session import layer_runs

depth, rows, width, target, budget = sys.argv[1:6]
depth, rows, width = int(depth), int(rows), int(width)
rng = np.random.default_rng(0)
weight = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
inits = [numpy_helper.from_array(weight, "w"),
         numpy_helper.from_array(np.full(width, 0.01, np.float32), "b")]
nodes, current = [], "x"
for i in range(depth):
    nodes += [helper.make_node("MatMul", [current, "w"], [f"m{i}"], name=f"/l{i}/MatMul"),
              helper.make_node("Add", [f"m{i}", "b"], [f"a{i}"], name=f"/l{i}/Add"),
              helper.make_node("Tanh", [f"a{i}"], [f"t{i}"], name=f"/l{i}/Tanh")]
    current = f"t{i}"
nodes.append(helper.make_node("Identity", [current], ["y"], name="/out"))
graph = helper.make_graph(
    nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, width])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, width])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
feed = {"x": rng.standard_normal((rows, width)).astype(np.float32)}
actual = runners.create(target, model, "fp16", outputs="all")
expected = runners.create("onnxrt", model, outputs="all")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
kwargs = {} if budget == "default" else {"budget": 10**15 if budget == "unlimited" else budget}
if budget not in ("default", "unlimited"):
    from pytest_trtcompare.session.layer_budget import parse_layer_budget
    kwargs["budget"] = parse_layer_budget(budget)
result = layer_runs.compare_layers(actual, expected, feed, atol=1e-3, rtol=1e-3, **kwargs)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_mib": before / 1024, "peak_mib": peak / 1024, "seconds": seconds,
                  "first": result.first_divergence_node, "layers": len(result.outputs),
                  "failing": sum(not o.passed for o in result.outputs.values())}))
"""


def baseline_tree(rev: str, folder: Path) -> Path:
    """The package as it was at `rev`, unpacked under `folder` (git archive: no worktree)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "pytest_trtcompare"],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def measure(source: Path, args: argparse.Namespace, target: str, budget: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(source)}
    sizes = (str(args.depth), str(args.rows), str(args.width))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *sizes, target, budget],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{target} {budget}: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=32)
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--budgets", default="unlimited,64MiB,16MiB")
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--pairs", default="onnxrt,onnxref", help="target frameworks (fp16)")
    parser.add_argument("--json")
    args = parser.parse_args()
    tensor = args.rows * args.width * 4
    print(
        f"model: {args.depth} x (MatMul, Add, Tanh) on [{args.rows}, {args.width}] float32: "
        f"{3 * args.depth} intermediate tensors of {tensor / 2**20:.1f} MiB "
        f"({3 * args.depth * tensor / 2**20:.0f} MiB in fp32, half that in fp16)"
    )
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        before = baseline_tree(args.baseline, Path(folder))
        for target in args.pairs.split(","):
            runs = [("before", before, "default")]
            runs += [("budget", ROOT, budget) for budget in args.budgets.split(",")]
            for label, source, budget in runs:
                got = measure(source, args, target, budget)
                row = {"target": f"{target}-fp16", "code": label, "budget": budget, **got}
                rows.append(row)
                base = next(r for r in rows if r["target"] == row["target"])
                print(
                    f"{row['target']:12} {label:7} {budget:10} peak {got['peak_mib']:7.0f} MiB "
                    f"(held before {got['before_mib']:5.0f}; comparison "
                    f"{got['peak_mib'] - got['before_mib']:6.0f} MiB, "
                    f"{got['peak_mib'] / base['peak_mib']:.2f}x before's peak) "
                    f"{got['seconds']:6.1f} s  first divergence {got['first']} "
                    f"({got['failing']} of {got['layers']} failing)",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
