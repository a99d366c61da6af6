"""What `--trt-isolate` costs: 4 small ONNX models, one compare_frameworks item each.

Run: python bench/bench_isolation.py [--rounds 5] [--baseline DIR]
    [--json bench/results/isolation.json]

Each item compares onnxrt against the onnx reference evaluator on its own model (4 MLPs of
different widths), in one pytest process: in-process, and with `--trt-isolate` (every runner
in a worker process). The items phase is pytest's run loop, timed by a conftest hook; whole
processes are timed too. `--baseline DIR` runs the same with the package found in DIR (a
checkout of the code before a change, `git worktree add DIR COMMIT`) in the same rounds. The
runs interleave (one of each per round, in turn); every figure is the median over the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bytecode import compile_packages

MODELS = """
import numpy as np
from onnx import TensorProto, helper, numpy_helper

def mlp(width):
    rng = np.random.default_rng(width)
    w1 = numpy_helper.from_array((rng.standard_normal((32, width)) / 6).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((width, 8)) / 8).astype(np.float32), "w2")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])],
        f"mlp{width}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])], [w1, w2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
"""

TIMING_CONFTEST = """
import time
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        print(f"ITEMS_PHASE {time.perf_counter() - start:.6f}")
"""


def _run(folder: Path, command: list[str], package: str | None) -> tuple[float, float]:
    paths = [str(folder), *([package] if package else [])]
    if os.environ.get("PYTHONPATH") and not package:
        paths.append(os.environ["PYTHONPATH"])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0 or "4 passed" not in done.stdout:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    line = next(line for line in done.stdout.splitlines() if "ITEMS_PHASE" in line)
    return seconds, float(line.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path, default=None, help="the code before, to compare")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    compile_packages(args.baseline)  # the .pyc an installed package has (bytecode.py)
    base = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"]
    base += ["-p", "no:randomly", "-p", "no:xdist", "test_models.py"]
    codes = {"ours": None}
    if args.baseline:
        codes["before"] = str(args.baseline.resolve())
    kinds = {"in-process": [], "--trt-isolate": ["--trt-isolate"]}
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "benchmodels.py").write_text(textwrap.dedent(MODELS))
        (folder / "conftest.py").write_text(textwrap.dedent(TIMING_CONFTEST))
        (folder / "test_models.py").write_text(
            "import pytest\nfrom benchmodels import mlp\n\n"
            + "".join(
                f"\n@pytest.mark.compare_frameworks(model=mlp({w}), "
                f'frameworks=["onnxrt", "onnxref"])\n'
                f'@pytest.mark.shapes({{"x": (4, 32)}})\ndef test_mlp{w}():\n    pass\n'
                for w in (16, 32, 64, 128)
            )
        )
        for _ in range(args.rounds):
            for code, package in codes.items():
                for kind, flags in kinds.items():
                    times.setdefault((code, kind), []).append(
                        _run(folder, [*base, *flags], package)
                    )
    rows = []
    print("| code | run | items phase (s) | per item (s) | ratio | whole process (s) | ratio |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for code in codes:
        inside = times[(code, "in-process")]
        inside_items = statistics.median(t[1] for t in inside)
        inside_whole = statistics.median(t[0] for t in inside)
        for kind in kinds:
            runs = times[(code, kind)]
            items = statistics.median(t[1] for t in runs)
            whole = statistics.median(t[0] for t in runs)
            rows.append(
                {
                    "code": code,
                    "run": kind,
                    "items_s": items,
                    "per_item_s": items / 4,
                    "items_ratio": items / inside_items,
                    "process_s": whole,
                    "process_ratio": whole / inside_whole,
                }
            )
            print(
                f"| {code} | {kind} | {items:.2f} | {items / 4:.3f} | {items / inside_items:.2f}x "
                f"| {whole:.2f} | {whole / inside_whole:.2f}x |"
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
