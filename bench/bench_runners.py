"""Runner overhead: `infer` through our onnxrt runner vs a bare InferenceSession.run.

Run: python bench/bench_runners.py [--calls 3000] [--json bench/results/runners.json]

Both use the same model bytes, session options (the runner's: threads that do not spin-wait)
and feed dict, alternate in one process, and report the best of 7 rounds of `--calls` calls
each (per-call microseconds); a third, bare session with onnxruntime's default options
(spin-waiting threads) shows what the runner's options cost per call. Models are built in code:
a tiny 4-layer chain (batch 1), an MLP (batch 8), and a small CNN (batch 8, 3x32x32).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare import runners
from pytest_trtcompare.runners.onnxrt import default_session_options

ROUNDS = 7


def _model(nodes: list, inputs: list, outputs: list, weights: list) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "bench", inputs, outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _dense(
    rng: np.random.Generator, sizes: tuple[int, ...], batch: int
) -> tuple[onnx.ModelProto, dict]:
    nodes, weights, current = [], [], "x"
    for i in range(len(sizes) - 1):
        w = rng.standard_normal((sizes[i], sizes[i + 1])).astype(np.float32) / 8
        weights += [
            numpy_helper.from_array(w, f"W{i}"),
            numpy_helper.from_array(np.zeros(sizes[i + 1], np.float32), f"b{i}"),
        ]
        out = "y" if i == len(sizes) - 2 else f"h{i}"
        nodes += [
            helper.make_node("MatMul", [current, f"W{i}"], [f"m{i}"]),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
            helper.make_node("Relu", [f"a{i}"], [out]),
        ]
        current = out
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", sizes[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", sizes[-1]])],
        weights,
    )
    return model, {"x": rng.random((batch, sizes[0]), dtype=np.float32)}


def _cnn(rng: np.random.Generator, batch: int) -> tuple[onnx.ModelProto, dict]:
    w1 = numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32) / 5, "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 16, 3, 3)).astype(np.float32) / 12, "w2")
    fc = numpy_helper.from_array(rng.standard_normal((32, 10)).astype(np.float32) / 6, "fc")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "fc"], ["y"]),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 32, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 10])],
        [w1, w2, fc],
    )
    return model, {"x": rng.random((batch, 3, 32, 32), dtype=np.float32)}


def _best(call: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls


def measure(model: onnx.ModelProto, feed: dict, calls: int) -> tuple[float, float, float]:
    """(bare session as the runner builds it, the runner, bare with onnxruntime's default
    spin-waiting threads), best per call."""
    data = model.SerializeToString()
    cpu = ["CPUExecutionProvider"]
    session = ort.InferenceSession(data, default_session_options(ort), providers=cpu)
    spinning = ort.InferenceSession(data, providers=cpu)
    names = [o.name for o in session.get_outputs()]
    runner = runners.create("onnxrt", data)
    for _ in range(100):  # warm all three
        session.run(names, feed)
        spinning.run(names, feed)
        runner.infer(feed)
    bare, ours, spun = [], [], []
    for _ in range(ROUNDS):
        bare.append(_best(lambda: session.run(names, feed), calls))
        ours.append(_best(lambda: runner.infer(feed), calls))
        spun.append(_best(lambda: spinning.run(names, feed), calls))
    return min(bare), min(ours), min(spun)


def isolation(model: onnx.ModelProto, feed: dict, calls: int) -> tuple[float, float]:
    """Per call: in-process runner vs the same runner in a worker process (isolate=True)."""
    inside = runners.create("onnxrt", model)
    outside = runners.create("onnxrt", model, isolate=True)
    for _ in range(50):
        inside.infer(feed)
        outside.infer(feed)
    local, isolated = [], []
    for _ in range(ROUNDS):
        local.append(_best(lambda: inside.infer(feed), calls))
        isolated.append(_best(lambda: outside.infer(feed), calls))
    outside.close()
    return min(local), min(isolated)


def worker_starts(model: onnx.ModelProto, feed: dict, starts: int = 5) -> dict[str, float]:
    """Seconds from `create(..., isolate=True)` to the first result: an onnxrt worker, and a
    torch twin of a local class (exported with torch.export at the first feed)."""
    timings: dict[str, float] = {}

    def first_result(make: Callable[[], runners.Runner], run_feed: dict) -> float:
        best = float("inf")
        for _ in range(starts):
            start = time.perf_counter()
            runner = make()
            runner.infer(run_feed)
            best = min(best, time.perf_counter() - start)
            runner.close()
        return best

    timings["onnxrt"] = first_result(lambda: runners.create("onnxrt", model, isolate=True), feed)
    try:
        import torch
    except ImportError:
        return timings

    def twin() -> runners.Runner:
        class Twin(torch.nn.Module):  # local: pickle cannot send it
            def __init__(self) -> None:
                super().__init__()
                self.body = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU())

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.body(x)

        return runners.create("torch", Twin(), isolate=True)

    timings["torch (exported)"] = first_result(twin, {"x": np.ones((2, 16), np.float32)})
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    cases = {
        "tiny chain 16-32-32-32-8, batch 1": _dense(rng, (16, 32, 32, 32, 8), 1),
        "MLP 256-512-512-10, batch 8": _dense(rng, (256, 512, 512, 10), 8),
        "small CNN 3x32x32 (2 conv), batch 8": _cnn(rng, 8),
    }
    rows = []
    print(
        "| model | bare session.run (µs) | runner.infer (µs) | overhead "
        "| bare, spin-waiting threads (µs) |"
    )
    print("|---|---:|---:|---:|---:|")
    for label, (model, feed) in cases.items():
        calls = args.calls if "CNN" not in label else args.calls // 10
        bare, ours, spun = measure(model, feed, calls)
        rows.append(
            {
                "model": label,
                "bare_us": bare * 1e6,
                "runner_us": ours * 1e6,
                "bare_spinning_us": spun * 1e6,
            }
        )
        print(
            f"| {label} | {bare * 1e6:.1f} | {ours * 1e6:.1f} | {100 * (ours / bare - 1):+.1f}% "
            f"| {spun * 1e6:.1f} |"
        )
    print("\n| model | runner.infer (µs) | isolate=True (µs) | added per call (µs) |")
    print("|---|---:|---:|---:|")
    for label, (model, feed) in cases.items():
        local, isolated = isolation(model, feed, max(100, args.calls // 10))
        rows.append({"model": label, "isolated_us": isolated * 1e6, "local_us": local * 1e6})
        print(
            f"| {label} | {local * 1e6:.1f} | {isolated * 1e6:.1f} | "
            f"{(isolated - local) * 1e6:.1f} |"
        )
    model, feed = cases["tiny chain 16-32-32-32-8, batch 1"]
    for label, seconds in worker_starts(model, feed).items():
        rows.append({"worker_start": label, "seconds": seconds})
        print(f"worker start to first result, {label}: {seconds:.2f} s (best of 5)")
    print(f"\nmachine: {platform.machine()}, onnxruntime {ort.__version__}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
