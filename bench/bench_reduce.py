"""`reduce_model` on faults planted in real architectures: whether the reduced graph holds the
planted node, its size, and the time it takes as a multiple of one run of the test.

Run: python bench/bench_reduce.py [--model swin ...] [--plant weight ...] [--runner onnxref ...]
(PYTHONPATH: the repository and tests/zoo/site, for torchvision's ops)

Each model is the zoo's (tests/zoo/models.py: seeded random weights, exported by
torch.onnx.export as a user would; Faster R-CNN by the legacy exporter, NMS inside If
subgraphs) with one fault planted in the middle node of an op type among those with a weight
of their own (tests/planted_models.py; Faster R-CNN's first Conv too; DETR's middle MatMul
and its middle Conv, one at a time): `weight`
(`plant_scaled_weight`: the weight times a power of two that puts its largest values 4-8x
past 65504, which the fp16 conversion clamps) or `overflow` (`plant_overflow`: the weight
times a power of two that takes the node's output about 4x past 65504 on the feed), each
followed by a Mul by the inverse that gives the rest of the model its fp32 values back. The
model is reduced at fp16 under the default tolerance on the seeded synthetic feed of the
zoo's shapes.

"one test run": what one compare_frameworks fp16 item costs: the fp16 target runner built
(its conversion included: the conversion cache is emptied first) and run once on the feed,
and the fp32 reference runner built and run once; the median of 3. The reduction's time
includes its fp32 reference run with every tensor exposed and each candidate's conversion
and session.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import onnxruntime

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_trtcompare import runners
from pytest_trtcompare.inputs import synthetic_feed
from pytest_trtcompare.runners import graph_input_specs
from pytest_trtcompare.runners.precision import CONVERTED
from pytest_trtcompare.session.reduce import reduce_model
from tests.planted_models import plant_overflow, plant_scaled_weight
from tests.zoo.models import build, export

#: model -> the nodes planted: (op type, name); None: the middle one of the op type with a
#: weight of its own
PLANTS: dict[str, tuple[tuple[str, str | None], ...]] = {
    "resnet18": (("Conv", None),),
    "gpt2": (("MatMul", None),),
    "swin": (("MatMul", None),),
    # the middle Conv is in a squeeze-excitation block where the random-weight backbone's
    # values are about 1e-5; the first Conv is the one whose output is about 1 (3.6)
    "fasterrcnn": (("Conv", None), ("Conv", "/backbone/body/body.0/body.0.0/Conv")),
    # the middle MatMul: the decoder's first cross-attention's value projection (of the
    # encoder's output); the middle Conv: the backbone's stages.2 first Conv (to 64 channels)
    "detr": (("MatMul", None), ("Conv", None)),
}
Plant = Callable[[onnx.ModelProto, str, dict[str, Any], str | None], tuple[onnx.ModelProto, str]]
KINDS: dict[str, Plant] = {
    "weight": lambda model, op_type, feed, name: plant_scaled_weight(model, op_type, name),
    "overflow": plant_overflow,
}
HEADER = (
    "| model | plant | planted node | runner | reduced | holds planted | runs | s "
    "| one test run (ms) | x one test run |"
)


def one_test_run(model: onnx.ModelProto, runner: str, feed: dict[str, Any]) -> float:
    """Seconds of one compare_frameworks fp16 item: target and reference built and run (an
    fp16 run that raises counts up to the raise, as the item's error would)."""
    times = []
    for _ in range(3):
        CONVERTED.clear()
        started = time.perf_counter()
        for precision in ("fp16", "fp32"):
            try:
                with runners.create(runner, model, precision) as made:
                    made.infer(feed)
            except Exception:
                break
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(name: str, plant: tuple[str, str | None], kind: str, runner: str, folder: Path) -> str:
    path = folder / f"{name}.onnx"
    if not path.exists():
        export(name, folder)
    model = onnx.load(str(path))
    feed = synthetic_feed(graph_input_specs(model), shapes=build(name).shapes, seed=0)
    model, planted = KINDS[kind](model, plant[0], feed, plant[1])
    one = one_test_run(model, runner, feed)
    CONVERTED.clear()
    started = time.perf_counter()
    try:
        result = reduce_model(model, "fp16", runner, inputs=feed)
    except Exception as exc:  # a crash is a figure too: its type and where the runner stopped
        text = str(exc).splitlines()[0]
        where = text[text.find("node '") :] if "node '" in text else text
        reduced, holds, runs = f"raised {type(exc).__name__}: {where}", "no", "-"
    else:
        kept = ", ".join(f"{n} ({t})" for n, t in zip(result.nodes, result.op_types, strict=True))
        reduced = f"{len(result.nodes)} of {result.node_count}: {kept or 'the model passes'}"
        holds, runs = ("yes" if planted in result.nodes else "no"), str(result.runs)
    seconds = time.perf_counter() - started
    return (
        f"| {name} | {kind} | {planted} | {runner} | {reduced} | {holds} | {runs} | "
        f"{seconds:.2f} | {one * 1000:.0f} | {seconds / one:.1f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", choices=list(PLANTS))
    parser.add_argument("--plant", action="append", choices=list(KINDS))
    parser.add_argument("--runner", action="append")
    parser.add_argument("--exports", type=Path, help="a folder to keep the exports in")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    onnxruntime.set_default_logger_severity(3)  # its constant folding's warnings
    print(HEADER)
    print("|---|---|---|---|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.exports or Path(temporary)
        folder.mkdir(parents=True, exist_ok=True)
        for name in args.model or list(PLANTS):
            for plant in PLANTS[name]:
                for kind in args.plant or list(KINDS):
                    for runner in args.runner or ["onnxref", "onnxrt"]:
                        print(measure(name, plant, kind, runner, folder), flush=True)


if __name__ == "__main__":
    main()
