"""Suite overhead and xdist scaling of compare_frameworks tests.

Run: python bench/bench_suite.py [--json bench/results/suite.json]

1. Overhead: 200 compare_frameworks items (the reference evaluator against onnxruntime on a
   small CNN, 100 shape sets x fp32/fp16) run by pytest, against a plain Python loop doing the
   same inferences (the fp32 reference once per shape set, the target once per item) and one
   np.testing.assert_allclose per item. Compared: the items phase (pytest's run loop, timed
   by a conftest hook) against the loop itself; whole processes are reported too.
2. Scaling: a CPU-bound suite (the same, 4x3x64x64 inputs, 144 items), -n 0 and -n 2. BLAS
   and OpenMP are held to one thread in every run, so the speed-up comes from the processes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bytecode import compile_packages

MODEL = """
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

def mlp():
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array((rng.standard_normal((64, 128)) / 8).astype(np.float32), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((128, 10)) / 11).astype(np.float32), "w2")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 10])], [w1, w2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

def cnn():
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array((rng.standard_normal((16, 3, 3, 3)) * 0.3).astype("f4"), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((16, 16, 3, 3)) * 0.1).astype("f4"), "w2")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
         helper.make_node("GlobalAveragePool", ["c2"], ["y"])],
        "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 16, 1, 1])], [w1, w2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
"""

SUITE = """
import pytest
from benchmodels import cnn

SETS = [{"x": (1 + i % 2, 3, 16, 16)} for i in range(100)]

@pytest.mark.compare_frameworks(model=cnn(), frameworks=["onnxrt", "onnxref"])
@pytest.mark.shapes(*SETS, ids=[f"s{i}" for i in range(100)])
def test_cnn():
    pass
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
        print(f"ITEMS_PHASE {time.perf_counter() - start:.4f}")
"""

PLAIN_LOOP = """
import time
import numpy as np
from benchmodels import cnn
from pytest_trtcompare import runners
from pytest_trtcompare.session.runs import make_feeds

model = cnn()
reference = runners.create("onnxrt", model)
targets = {p: runners.create("onnxref", model, p) for p in ("fp32", "fp16")}
tolerance = {"fp32": 1e-5, "fp16": 1e-2}
start = time.perf_counter()
for i in range(100):
    (feed,) = make_feeds(reference, shapes={"x": (1 + i % 2, 3, 16, 16)})
    expected = reference.infer(feed)["y"]
    for precision, target in targets.items():
        actual = target.infer(feed)["y"]
        np.testing.assert_allclose(
            actual, expected, rtol=tolerance[precision], atol=tolerance[precision]
        )
print(f"LOOP {time.perf_counter() - start:.4f}")
"""

CPU_SUITE = """
import pytest
from benchmodels import cnn

SETS = [{"x": (4, 3, 64, 64)} for _ in range(72)]

@pytest.mark.compare_frameworks(model=cnn(), frameworks=["onnxrt", "onnxref"], seed=1)
@pytest.mark.shapes(*SETS, ids=[f"s{i}" for i in range(72)])
def test_cnn():
    pass
"""


def _run(folder: Path, command: list[str]) -> tuple[float, str]:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONPATH": str(folder),
    }
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return seconds, done.stdout


def _marked(output: str, marker: str) -> float:
    return float(next(line for line in output.splitlines() if line.startswith(marker)).split()[1])


def _best(folder: Path, command: list[str], repeats: int = 3) -> tuple[float, str]:
    runs = [_run(folder, command) for _ in range(repeats)]
    return min(runs, key=lambda run: run[0])


def _marked(output: str, marker: str) -> float:
    return float(next(line for line in output.splitlines() if marker in line).split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    compile_packages()  # the .pyc an installed package has (bytecode.py)
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "benchmodels.py").write_text(textwrap.dedent(MODEL))
        (folder / "conftest.py").write_text(textwrap.dedent(TIMING_CONFTEST))
        (folder / "test_suite.py").write_text(textwrap.dedent(SUITE))
        (folder / "plain_loop.py").write_text(textwrap.dedent(PLAIN_LOOP))
        suite_s, suite_out = _best(
            folder, [*pytest_cmd, "test_suite.py", "--trt-precision", "fp32,fp16"]
        )
        loop_s, loop_out = _best(folder, [sys.executable, "plain_loop.py"])
        items_s, loop_only_s = _marked(suite_out, "ITEMS_PHASE"), _marked(loop_out, "LOOP")
        builds = [line for line in suite_out.splitlines() if line.startswith("runners built")]
        (folder / "test_suite.py").unlink()
        (folder / "test_cpu.py").write_text(textwrap.dedent(CPU_SUITE))
        cpu = [*pytest_cmd, "test_cpu.py", "--trt-precision", "fp32,fp16"]
        serial_s, _ = _best(folder, cpu, repeats=2)
        parallel_s, parallel_out = _best(folder, [*cpu, "-n", "2"], repeats=2)
        parallel_builds = [
            line for line in parallel_out.splitlines() if line.startswith("runners built")
        ]
    rows = {
        "items_phase_s": items_s,
        "loop_only_s": loop_only_s,
        "items_over_loop": items_s / loop_only_s,
        "suite_process_s": suite_s,
        "loop_process_s": loop_s,
        "cpu_suite_n0_s": serial_s,
        "cpu_suite_n2_s": parallel_s,
        "n2_speedup": serial_s / parallel_s,
        "builds": builds,
        "builds_n2": parallel_builds,
    }
    print("| measurement | value |\n|---|---:|")
    print(f"| 200 items, pytest's items phase (s) | {items_s:.2f} |")
    print(f"| same inferences + assert_allclose, the loop itself (s) | {loop_only_s:.2f} |")
    print(f"| items phase ÷ loop | {items_s / loop_only_s:.2f}x |")
    print(f"| whole processes: pytest / plain loop (s) | {suite_s:.2f} / {loop_s:.2f} |")
    print(f"| CPU-bound suite, 144 items, -n 0 (s) | {serial_s:.2f} |")
    print(f"| same with -n 2 (s) | {parallel_s:.2f} |")
    print(f"| speed-up of -n 2 | {serial_s / parallel_s:.2f}x |")
    for line in builds + parallel_builds:
        print(line)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
