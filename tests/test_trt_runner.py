"""The TensorRT runner's glue, checked against a TEST DOUBLE of tensorrt and CUDA
(tests/doubles/fake_tensorrt.py) on CPU. The real end-to-end tests are in test_trt_gpu.py."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest

from pytest_trtcompare import compare_outputs, runners
from pytest_trtcompare.errors import FrameworkUnavailable, ModelLoadError, PrecisionUnsupported
from pytest_trtcompare.inputs import synthetic_feed

from .doubles import fake_tensorrt
from .doubles.trt_fixture import install_doubles
from .onnx_models import layer_chain


@pytest.fixture
def fake(monkeypatch):
    """(devices=1, version="10.16.1.11") -> (fake tensorrt module, FakeCuda), installed."""
    return functools.partial(install_doubles, monkeypatch)


def builder():
    return fake_tensorrt.BUILDERS[0]


@pytest.fixture(scope="module")
def chain():
    return layer_chain()


@pytest.fixture(scope="module")
def feed():
    return synthetic_feed(
        runners.create("onnxrt", layer_chain()).input_specs(), shapes={"x": (4, 16)}
    )


SHAPES = [{"x": (1, 16)}, {"x": (8, 16)}]


def test_no_gpu_means_no_tensorrt_object_at_all(fake, chain):
    fake(devices=0)
    with pytest.raises(FrameworkUnavailable, match="TensorRT needs a GPU"):
        runners.create("trt", chain, shapes=SHAPES, isolate=False)
    assert fake_tensorrt.CALLS == ["cuda.device_count"]  # probed, and nothing else happened


def test_fp32_engine_clears_tf32_and_matches_onnxruntime(fake, chain, feed):
    trt, cuda = fake()
    runner = runners.create("trt", chain, shapes=SHAPES, isolate=False)
    out = runner.infer(feed)
    config = builder()._configs[0]
    assert not config.get_flag(trt.BuilderFlag.TF32) and config.flags == 0
    assert config._profiles[0]._shapes == {"x": [(1, 16), (8, 16), (8, 16)]}
    assert fake_tensorrt.CALLS.index("cuda.device_count") < fake_tensorrt.CALLS.index("trt.Logger")
    reference = runners.create("onnxrt", chain).infer(feed)
    assert compare_outputs(out, reference, atol=0, rtol=0).passed
    assert cuda.memory == {}  # every device buffer freed
    runner.close()
    assert not cuda.streams  # and the stream destroyed
    info = runner.describe()
    assert info["device"] == "Fake GPU 80GB" and info["cuda_binding"] == "fake-cuda"
    assert info["precision_route"] == "fp32 model, TF32 off"


def test_tensorrt_10_fp16_uses_the_builder_flag(fake, chain, feed):
    trt, _ = fake(version="10.16.1.11")
    runner = runners.create("trt", chain, "fp16", shapes=SHAPES, isolate=False)
    config, network = builder()._configs[0], builder()._networks[0]
    assert config.flags == 1 << int(trt.BuilderFlag.FP16)
    assert not network.get_flag(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    assert runner.describe()["precision_route"] == "fp32 model with BuilderFlag.FP16"


def test_tensorrt_11_fp16_converts_the_model_and_builds_strongly_typed(fake, chain, feed):
    trt, _ = fake(version="11.4.0.106")
    runner = runners.create("trt", chain, "fp16", shapes=SHAPES, isolate=False)
    config, network = builder()._configs[0], builder()._networks[0]
    assert network.get_flag(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    assert network.flags == 1  # STRONGLY_TYPED is bit 0 in TensorRT 11
    assert config.flags == 0
    types = {t.data_type for t in network._model.graph.initializer}
    assert types == {onnx.TensorProto.FLOAT16}
    route = runner.describe()["precision_route"]
    assert route.startswith("strongly typed; fp16 by onnxruntime.transformers.float16")
    out = runner.infer(feed)
    reference = runners.create("onnxrt", chain).infer(feed)
    result = compare_outputs(out, reference, atol=1e-2, rtol=1e-2)
    assert result.passed and result.outputs["y"].max_abs_error > 0


def test_dynamic_inputs_need_shapes(fake, chain):
    fake()
    with pytest.raises(
        ModelLoadError, match=r"TensorRT needs shapes for dynamic input\(s\) \['x'\]"
    ):
        runners.create("trt", chain, isolate=False)


def test_engine_cache_and_timing_cache(fake, chain, tmp_path, feed):
    fake()
    cache, timing = tmp_path / "engines", tmp_path / "timing.cache"
    first = runners.create(
        "trt", chain, shapes=SHAPES, engine_cache=cache, timing_cache=timing, isolate=False
    )
    assert len(list(cache.glob("*.engine"))) == 1
    assert timing.read_bytes().startswith(b"FAKE-TRT-TIMING-CACHE:")
    builds = len(fake_tensorrt.BUILDERS)
    second = runners.create("trt", chain, shapes=SHAPES, engine_cache=cache, isolate=False)
    assert len(fake_tensorrt.BUILDERS) == builds  # loaded, not rebuilt
    assert second.describe()["precision_route"].startswith("cached engine")
    np.testing.assert_array_equal(first.infer(feed)["y"], second.infer(feed)["y"])
    runners.create("trt", chain, "fp16", shapes=SHAPES, engine_cache=cache, isolate=False)
    assert len(list(cache.glob("*.engine"))) == 2  # precision is part of the key
    assert not list(cache.glob(".*.tmp"))


def test_prebuilt_engine_file(fake, chain, tmp_path, feed):
    fake()
    plan = tmp_path / "model.engine"
    built = runners.create("trt", chain, shapes=SHAPES, engine_cache=tmp_path / "c", isolate=False)
    plan.write_bytes(next((tmp_path / "c").glob("*.engine")).read_bytes())
    loaded = runners.create("trt", plan, isolate=False)
    assert loaded.describe()["precision_route"] == "prebuilt engine"
    assert [spec.name for spec in loaded.input_specs()] == ["x"]
    np.testing.assert_array_equal(loaded.infer(feed)["y"], built.infer(feed)["y"])
    with pytest.raises(ModelLoadError, match=r"engine file '.*missing\.plan' does not exist"):
        runners.create("trt", tmp_path / "missing.plan", isolate=False)


def test_mark_all_layer_outputs(fake, chain, feed):
    fake()
    runner = runners.create("trt", chain, shapes=SHAPES, outputs="all", isolate=False)
    assert runner.layer_order[:3] == ["mm0", "add0", "act0"] and runner.layer_order[-1] == "y"
    assert set(runner.output_names()) == set(runner.layer_order)
    with runner.select_outputs(["add1"]):
        assert list(runner.infer(feed)) == ["add1"]


def test_int8_needs_a_qdq_model(fake, chain):
    fake()
    with pytest.raises(PrecisionUnsupported, match="TensorRT int8 needs a Q/DQ model"):
        runners.create("trt", chain, "int8", shapes=SHAPES, isolate=False)


def test_per_layer_comparison_through_tensorrt(fake, feed):
    fake()
    from pytest_trtcompare.session.runs import compare_layers

    target = runners.create(
        "trt", layer_chain(perturb_layer=1), shapes=SHAPES, outputs="all", isolate=False
    )
    reference = runners.create("onnxrt", layer_chain(), outputs="all")
    result = compare_layers(target, reference, feed, atol=1e-4, rtol=1e-4)
    assert result.first_divergence == "add1"
    assert result.first_divergence_node == "bias1 (Add) -> add1"  # from the ONNX reference
    marked = {layer.tensor: layer for layer in target.layers}
    assert marked["y"].model_output and not marked["add1"].model_output
    assert marked["add1"].dtype == "float32"
