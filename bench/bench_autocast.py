"""ModelOpt AutoCast against onnxruntime's float16 converter on the example models (issue 14).

Runs where nvidia-modelopt is installed (it needs its own environment: see
docs/BENCHMARKS.md). Each converted model runs in onnx.reference (every op rounded in the low
precision) on the same seeded input; the figure is the max abs error against fp32.

    PYTHONPATH=. python bench/bench_autocast.py
"""

from __future__ import annotations

import importlib.util
import sys
import time

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from conftest_examples.models import (
    attention_model,
    attention_weights,
    cnn_model,
    cnn_weights,
    mlp_model,
    mlp_weights,
)
from pytest_trtcompare.runners.onnx_model import load_model
from pytest_trtcompare.runners.precision import _modelopt_autocast, repair

MODELS = {
    "mlp 64-128-10": (mlp_model(mlp_weights(0)), {"x": (4, 64)}),
    "small cnn": (cnn_model(cnn_weights(0)), None),
    "attention block": (attention_model(attention_weights()), None),
}


def _feed(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]] | None) -> dict:
    rng = np.random.default_rng(1)
    feed = {}
    for value in model.graph.input:
        dims = [d.dim_value or 4 for d in value.type.tensor_type.shape.dim]
        shape = (shapes or {}).get(value.name, tuple(dims))
        feed[value.name] = rng.random(shape, dtype=np.float32)
    return feed


def _ort_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    from onnxruntime.transformers.float16 import convert_float_to_float16

    converted = convert_float_to_float16(
        onnx.ModelProto.FromString(model.SerializeToString()), keep_io_types=True
    )
    repair(converted)
    return converted


def _error(model: onnx.ModelProto, feed: dict, want: list[np.ndarray]) -> str:
    try:
        got = ReferenceEvaluator(model).run(None, feed)
    except Exception as exc:  # onnx.reference lacks some bf16 kernels (MatMul); ORT CPU all
        return f"not run on CPU ({type(exc).__name__})"
    pairs = zip(got, want, strict=True)
    return f"{max(float(np.max(np.abs(g.astype(np.float64) - w))) for g, w in pairs):.3g}"


def _low_nodes(model: onnx.ModelProto, dtype: int) -> str:
    """How many Cast nodes convert to the low precision: AutoCast keeps some ops in fp32."""
    casts = [n for n in model.graph.node if n.op_type == "Cast"]
    to_low = sum(1 for n in casts if any(a.name == "to" and a.i == dtype for a in n.attribute))
    return f"{len(model.graph.node)} nodes, {len(casts)} Casts ({to_low} to low)"


def main() -> int:
    if importlib.util.find_spec("modelopt") is None:
        print("nvidia-modelopt is not installed here (see docs/BENCHMARKS.md)", file=sys.stderr)
        return 2
    import modelopt

    print(f"modelopt {modelopt.__version__}, onnx {onnx.__version__}")
    print("| model | precision | converter | max abs error vs fp32 | graph | convert (s) |")
    print("|---|---|---|---:|---|---:|")
    for name, (model, shapes) in MODELS.items():
        feed = _feed(model, shapes)
        want = [w.astype(np.float64) for w in ReferenceEvaluator(model).run(None, feed)]
        for precision, dtype in (
            ("fp16", onnx.TensorProto.FLOAT16),
            ("bf16", onnx.TensorProto.BFLOAT16),
        ):
            rows = []
            start = time.perf_counter()
            autocast = _modelopt_autocast(load_model(model).proto, precision)
            rows.append(("ModelOpt AutoCast", autocast, time.perf_counter() - start))
            if precision == "fp16":
                start = time.perf_counter()
                rows.append(
                    ("onnxruntime float16", _ort_float16(model), time.perf_counter() - start)
                )
            if len(rows) == 2 and rows[0][1] is not None:
                pair = [ReferenceEvaluator(r[1]).run(None, feed) for r in rows]
                apart = max(float(np.max(np.abs(a - b))) for a, b in zip(*pair, strict=True))
                print(
                    f"| {name} | {precision} | AutoCast vs onnxruntime float16 outputs | "
                    f"max difference {apart:.3g} | | |"
                )
            for converter, converted, seconds in rows:
                if converted is None:
                    print(f"| {name} | {precision} | {converter} | (conversion failed) | | |")
                    continue
                error = _error(converted, feed, want)
                print(
                    f"| {name} | {precision} | {converter} | {error} | "
                    f"{_low_nodes(converted, dtype)} | {seconds:.2f} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
