"""The TensorRT runner's glue, checked against a TEST DOUBLE of tensorrt and CUDA
(tests/doubles/fake_tensorrt.py) on CPU. The real end-to-end tests are in test_trt_gpu.py."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from pytest_trtcompare import compare_outputs, runners
from pytest_trtcompare.errors import FrameworkUnavailable, ModelLoadError, PrecisionUnsupported
from pytest_trtcompare.inputs import synthetic_feed
from pytest_trtcompare.runners import trt as trt_runner

from .doubles import fake_tensorrt
from .onnx_models import layer_chain


@pytest.fixture
def fake(monkeypatch):
    """Install the doubles: returns a function (devices, weak_typing) -> (module, FakeCuda)."""

    def install(devices: int = 1, weak_typing: bool = True):
        fake_tensorrt.CALLS.clear()
        fake_tensorrt.Builder.instances.clear()
        cuda = fake_tensorrt.FakeCuda(devices)
        fake_tensorrt.Context.cuda = cuda
        module = fake_tensorrt.module(weak_typing=weak_typing)

        def load_cuda_api():
            if cuda.device_count() < 1:
                raise FrameworkUnavailable("no CUDA device visible: TensorRT needs a GPU")
            return cuda

        monkeypatch.setattr(trt_runner, "tensorrt_installed", lambda: True)
        monkeypatch.setattr(trt_runner, "load_cuda_api", load_cuda_api)
        monkeypatch.setattr(trt_runner, "import_tensorrt", lambda: module)
        return module, cuda

    return install


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
    _, cuda = fake()
    runner = runners.create("trt", chain, shapes=SHAPES, isolate=False)
    out = runner.infer(feed)
    config = fake_tensorrt.Builder.instances[0].config
    assert "TF32" in config.cleared and not config.flags
    assert config.profiles[0].shapes == {"x": ((1, 16), (8, 16), (8, 16))}
    assert fake_tensorrt.CALLS.index("cuda.device_count") < fake_tensorrt.CALLS.index("trt.Logger")
    reference = runners.create("onnxrt", chain).infer(feed)
    assert compare_outputs(out, reference, atol=0, rtol=0).passed
    assert cuda.memory == {}  # every device buffer freed
    info = runner.describe()
    assert info["device"] == "Fake GPU 80GB" and info["cuda_binding"] == "fake-cuda"
    assert info["precision_route"] == "fp32 model, TF32 off"


def test_tensorrt_10_fp16_uses_the_builder_flag(fake, chain, feed):
    fake(weak_typing=True)
    runner = runners.create("trt", chain, "fp16", shapes=SHAPES, isolate=False)
    builder = fake_tensorrt.Builder.instances[0]
    assert builder.config.flags == {"FP16"} and not builder.network.strongly_typed
    assert runner.describe()["precision_route"] == "fp32 model with BuilderFlag.FP16"


def test_tensorrt_11_fp16_converts_the_model_and_builds_strongly_typed(fake, chain, feed):
    fake(weak_typing=False)
    runner = runners.create("trt", chain, "fp16", shapes=SHAPES, isolate=False)
    builder = fake_tensorrt.Builder.instances[0]
    assert builder.network.strongly_typed and not builder.config.flags
    types = {t.data_type for t in builder.network.model.graph.initializer}
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
    assert len(list(cache.glob("*.engine"))) == 1 and timing.read_bytes() == b"fake timing cache"
    builds = len(fake_tensorrt.Builder.instances)
    second = runners.create("trt", chain, shapes=SHAPES, engine_cache=cache, isolate=False)
    assert len(fake_tensorrt.Builder.instances) == builds  # loaded, not rebuilt
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
