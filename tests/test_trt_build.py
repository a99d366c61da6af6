"""The TensorRT runner's building and loading, checked against the TEST DOUBLE on CPU:
layer-wise marking, parse errors, external weights, plugins, timing cache, build and
deserialize failures, and the CUDA probe's reasons."""

from __future__ import annotations

import functools
import logging
import re
import sys
import types
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare import compare_outputs, runners
from pytest_trtcompare.errors import FrameworkUnavailable, ModelLoadError
from pytest_trtcompare.runners import cuda as cuda_runner

from .doubles import fake_cuda, fake_tensorrt
from .doubles.trt_fixture import install_doubles
from .onnx_models import layer_chain, make
from .toml import loads as toml_loads

SHAPES = [{"x": (1, 16)}, {"x": (8, 16)}]


@pytest.fixture
def fake(monkeypatch):
    return functools.partial(install_doubles, monkeypatch)


def _with_conditional() -> onnx.ModelProto:
    """x -> Shape (shp), Add constant (a), If flag: Relu(a) / Neg(a) (branch), Mul 2 (y)."""
    then_branch = helper.make_graph(
        [helper.make_node("Relu", ["a"], ["then_out"], name="relu")],
        "then",
        [],
        [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, ["n", 4])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["a"], ["else_out"], name="neg")],
        "else",
        [],
        [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, ["n", 4])],
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"], name="shape"),
        helper.make_node("Add", ["x", "c"], ["a"], name="add"),
        helper.make_node(
            "If", ["flag"], ["branch"], then_branch=then_branch, else_branch=else_branch, name="if"
        ),
        helper.make_node("Mul", ["branch", "two"], ["y"], name="mul"),
    ]
    weights = [
        numpy_helper.from_array(np.full(4, -0.5, dtype=np.float32), "c"),
        numpy_helper.from_array(np.array(2.0, dtype=np.float32), "two"),
    ]
    graph = helper.make_graph(
        nodes,
        "conditional",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4]),
            helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        weights,
    )
    return make(graph)


@pytest.mark.parametrize("version", fake_tensorrt.VERSIONS)
def test_layerwise_marking_leaves_out_shape_constant_and_conditional_layers(fake, version):
    fake(version=version)
    model = _with_conditional()
    shapes = [{"x": (1, 4)}, {"x": (4, 4)}]
    runner = runners.create("trt", model, shapes=shapes, outputs="all", isolate=False)
    # the double refuses to build where a tensor inside the If was marked: it built
    assert runner.layer_order == ["a", "branch", "y"]
    feed = {"x": np.arange(8, dtype=np.float32).reshape(2, 4), "flag": np.array(False)}
    reference = runners.create("onnxrt", model, outputs="all").infer(feed)
    out = runner.infer(feed)
    assert set(out) == {"a", "branch", "y"}
    for name, value in out.items():
        np.testing.assert_allclose(value, reference[name])


def test_parse_errors_name_the_node(fake):
    fake()
    graph = helper.make_graph(
        [helper.make_node("MyOp", ["x"], ["y"], domain="my.ops", name="custom")],
        "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.ops", 1)]
    )
    with pytest.raises(
        ModelLoadError,
        match=r"cannot parse model .*No importer registered for op: MyOp \(node 0 'custom', MyOp\)",
    ):
        runners.create("trt", model, isolate=False)


def test_model_with_external_weights_is_parsed_from_its_path(fake, tmp_path):
    fake()
    path = tmp_path / "chain.onnx"
    onnx.save_model(
        layer_chain(), path, save_as_external_data=True, location="w.bin", size_threshold=0
    )
    runner = runners.create("trt", path, shapes=SHAPES, isolate=False)
    assert "trt.OnnxParser.parse_from_file" in fake_tensorrt.CALLS
    feed = {"x": np.ones((3, 16), dtype=np.float32)}
    reference = runners.create("onnxrt", layer_chain()).infer(feed)
    assert compare_outputs(runner.infer(feed), reference, atol=1e-6, rtol=1e-6).passed


def test_converted_model_is_parsed_with_its_path(fake, tmp_path):
    fake(version="11.4.0.106")
    path = tmp_path / "chain.onnx"
    onnx.save_model(layer_chain(), path)
    runners.create("trt", path, "fp16", shapes=SHAPES, isolate=False)
    assert "trt.OnnxParser.parse" in fake_tensorrt.CALLS  # bytes of the fp16 model, and the path


def test_plugins_are_registered_after_the_probe_and_before_any_engine(fake):
    fake()
    runners.create("trt", layer_chain(), shapes=SHAPES, isolate=False)
    calls = fake_tensorrt.CALLS
    plugins = calls.index("trt.init_libnvinfer_plugins")
    assert calls.index("cuda.device_count") < plugins < calls.index("trt.Builder")
    assert plugins < calls.index("trt.deserialize_cuda_engine")


def test_corrupt_timing_cache_is_rebuilt(fake, tmp_path, caplog):
    fake()
    timing = tmp_path / "timing.cache"
    timing.write_bytes(b"\x00garbage from a crashed run")
    with caplog.at_level(logging.WARNING):
        runners.create("trt", layer_chain(), shapes=SHAPES, timing_cache=timing, isolate=False)
    assert any("corrupted" in line for line in fake_tensorrt.LOG)  # TensorRT said so ...
    assert "unreadable by this TensorRT: rebuilding it" in caplog.text  # ... and we went on
    assert timing.read_bytes().startswith(b"FAKE-TRT-TIMING-CACHE:")


def test_failed_build_is_a_model_load_error(fake):
    fake()
    model = layer_chain()
    del model.graph.output[:]  # nothing to build
    with pytest.raises(ModelLoadError, match=r"TensorRT failed to build an engine .* at fp32"):
        runners.create("trt", model, shapes=SHAPES, isolate=False)
    assert any("network has no outputs" in line for line in fake_tensorrt.LOG)


def test_engine_of_another_version_is_refused(fake, monkeypatch, tmp_path):
    fake(version="10.16.1.11")
    runners.create("trt", layer_chain(), shapes=SHAPES, engine_cache=tmp_path, isolate=False)
    plan = tmp_path / "old.engine"
    plan.write_bytes(next(tmp_path.glob("*.engine")).read_bytes())
    fake(version="11.4.0.106")
    with pytest.raises(ModelLoadError, match=r"TensorRT 11\.4\.0\.106 cannot deserialize"):
        runners.create("trt", plan, isolate=False)
    assert "expecting library version 11.4.0.106 got 10.16.1.11" in fake_tensorrt.LOG[-1]


def test_shape_tensor_input_needs_values(fake):
    fake()
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")],
        "shape_tensor",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
    )
    with pytest.raises(ModelLoadError, match=r"values for shape-tensor input\(s\) \['s'\]"):
        runners.create("trt", make(graph), isolate=False)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        ("cudaErrorInsufficientDriver", "CUDA driver version is insufficient"),
        ("cudaErrorNoDevice", "no CUDA-capable device is detected"),
    ],
)
def test_failed_gpu_probe_says_why(monkeypatch, error, reason):
    rt = fake_cuda.runtime_module(error)
    bindings = types.ModuleType("cuda.bindings")
    bindings.runtime = rt  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.runtime", rt)
    with pytest.raises(FrameworkUnavailable) as caught:
        cuda_runner.load_cuda_api()
    message = str(caught.value)
    assert f"cudaGetDeviceCount failed: {error} ({reason}" in message
    assert message.endswith("TensorRT needs a GPU")


def test_tensorrt_extra_pins_cuda_bindings_to_tensorrts_cuda_major():
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    extra = toml_loads(pyproject.read_text())["project"]["optional-dependencies"]["tensorrt"]
    (cuda_major,) = {m for r in extra for m in re.findall(r"^tensorrt-cu(\d+)", r)}
    assert f"cuda-bindings>={cuda_major},<{int(cuda_major) + 1}" in extra


def test_engine_builds_and_cache_hits_are_logged_and_a_long_build_told(
    fake, tmp_path, caplog, monkeypatch
):
    from pytest_trtcompare import progress

    fake()
    caplog.set_level(logging.INFO, logger="pytest_trtcompare")
    lines: list[str] = []
    monkeypatch.setattr(progress, "THRESHOLD_S", 0.0)  # every piece of work counts as long
    model = tmp_path / "model.onnx"
    onnx.save(layer_chain(), model)
    previous = progress.set_writer(lines.append)
    try:
        for _ in range(2):
            runners.create(
                "trt", model, "fp16", shapes=SHAPES, engine_cache=tmp_path, isolate=False
            )
    finally:
        progress.set_writer(previous)
    messages = [r.getMessage() for r in caplog.records if r.name == "pytest_trtcompare.runners.trt"]
    assert messages[0].startswith("engine cache miss: model.onnx at fp16, building ")
    assert re.fullmatch(
        r"built TensorRT \S+ engine of model\.onnx at fp16 on \S.* in \d+\.\d\d s "
        r"\(\d+ bytes; fp32 model with BuilderFlag\.FP16\)",
        messages[1],
    ), messages[1]
    assert messages[2].startswith("engine cache hit: model.onnx at fp16, ")
    assert [line.split(" ... ")[0] for line in lines] == [
        "trtcompare: building TensorRT engine model.onnx fp16",
        "trtcompare: building trt runner model.onnx fp16",
        "trtcompare: building trt runner model.onnx fp16",
    ]
