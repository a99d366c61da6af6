"""`reduce_model` on planted models: the reduced graph's size and the time it takes, as a
multiple of one fp32 run of the whole model.

Run: python bench/bench_reduce.py [--model resnet18 --model gpt2] [--runner onnxref ...]

Each model is the zoo's (tests/zoo/models.py: seeded random weights, exported by
torch.onnx.export) with one Conv (resnet18) or MatMul (gpt2) planted to overflow fp16
(tests/planted_models.py `plant_overflow`), reduced at fp16 under its default tolerance on
the seeded synthetic feed of the zoo's shapes. "one run": the median of 3 warm fp32 runs
of the whole model on the same runner; the reduction's time includes its own fp32 reference
run with every tensor exposed and every candidate's conversion and session.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_trtcompare import runners
from pytest_trtcompare.inputs import synthetic_feed
from pytest_trtcompare.runners import graph_input_specs
from pytest_trtcompare.session.reduce import reduce_model
from tests.planted_models import plant_overflow
from tests.zoo.models import build, export

#: model -> the op type whose weight is scaled
PLANTS = {"resnet18": "Conv", "gpt2": "MatMul"}


def measure(name: str, runner: str, folder: Path) -> str:
    path = folder / f"{name}.onnx"
    if not path.exists():
        export(name, folder)
    model = onnx.load(str(path))
    feed = synthetic_feed(graph_input_specs(model), shapes=build(name).shapes, seed=0)
    model, planted = plant_overflow(model, PLANTS[name], feed)
    with runners.create(runner, model, "fp32") as whole:
        whole.infer(feed)
        times = []
        for _ in range(3):
            started = time.perf_counter()
            whole.infer(feed)
            times.append(time.perf_counter() - started)
    one = statistics.median(times)
    started = time.perf_counter()
    result = reduce_model(model, "fp16", runner, inputs=feed)
    seconds = time.perf_counter() - started
    kept = ", ".join(f"{n} ({t})" for n, t in zip(result.nodes, result.op_types, strict=True))
    return (
        f"| {name} | {runner} | {planted} | {len(result.nodes)} of {result.node_count}: "
        f"{kept or 'passes'} | {result.runs} | {seconds:.2f} | {one * 1000:.1f} | "
        f"{seconds / one:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", choices=sorted(PLANTS))
    parser.add_argument("--runner", action="append")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print("| model | runner | planted | reduced | runs | s | one run (ms) | x one run |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for name in args.model or sorted(PLANTS):
            for runner in args.runner or ["onnxref", "onnxrt"]:
                print(measure(name, runner, Path(folder)), flush=True)


if __name__ == "__main__":
    main()
