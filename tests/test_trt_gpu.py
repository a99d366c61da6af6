"""End to end on a real GPU with real TensorRT: skipped where either is missing.

Run where both exist with `pytest -m tensorrt`.
"""

from __future__ import annotations

import importlib.util

import pytest

from pytest_trtcompare import compare_outputs, runners
from pytest_trtcompare.errors import FrameworkUnavailable
from pytest_trtcompare.inputs import synthetic_feed

from .onnx_models import layer_chain


def _gpu_and_tensorrt() -> str | None:
    if importlib.util.find_spec("tensorrt") is None:
        return "tensorrt is not installed"
    from pytest_trtcompare.runners.cuda import load_cuda_api

    try:
        load_cuda_api()
    except FrameworkUnavailable as exc:
        return str(exc)
    return None


_MISSING = _gpu_and_tensorrt()
pytestmark = [
    pytest.mark.tensorrt,
    pytest.mark.skipif(_MISSING is not None, reason=f"needs a GPU and TensorRT: {_MISSING}"),
]


@pytest.mark.parametrize(("precision", "tol"), [("fp32", 1e-4), ("fp16", 1e-2), ("bf16", 5e-2)])
def test_tensorrt_agrees_with_onnxruntime(tmp_path, precision, tol):
    model = layer_chain()
    reference = runners.create("onnxrt", model)
    feed = synthetic_feed(reference.input_specs(), shapes={"x": (8, 16)})
    shapes = [{"x": (1, 16)}, {"x": (8, 16)}]
    with runners.create("trt", model, precision, shapes=shapes, engine_cache=tmp_path) as engine:
        result = compare_outputs(engine.infer(feed), reference.infer(feed), atol=tol, rtol=tol)
        assert result.passed, result.report()
        assert engine.describe()["device"]


def test_tensorrt_per_layer_finds_the_perturbed_layer(tmp_path):
    from pytest_trtcompare.session.runs import compare_layers

    reference = runners.create("onnxrt", layer_chain(), outputs="all")
    feed = synthetic_feed(reference.input_specs(), shapes={"x": (4, 16)})
    target = runners.create(
        "trt", layer_chain(perturb_layer=2), shapes=[{"x": (4, 16)}], outputs="all"
    )
    result = compare_layers(target, reference, feed, atol=1e-3, rtol=1e-3)
    assert result.first_divergence in {"mm2", "add2"}  # TensorRT may fuse MatMul and Add


@pytest.mark.parametrize(("precision", "dtype"), [("fp32", "float32"), ("fp16", "float16")])
def test_the_engine_inspector_says_what_each_layer_computed(tmp_path, precision, dtype):
    """What ran (runners/computed.py) on a real engine: its inspector's JSON read, the layers
    of a fp16 engine counted in float16 (TensorRT may keep some, or fuse them)."""
    shapes = [{"x": (2, 16)}]
    with runners.create("trt", layer_chain(), precision, shapes=shapes) as engine:
        found = runners.Computed.of(engine.describe())
    assert found is not None and found.total > 0, found
    assert found.at_precision > 0 and not found.none_at_precision, found.text()
    assert dtype in found.counts, found.text()
