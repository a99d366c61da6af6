"""The TensorRT runner's bindings, checked against the TEST DOUBLE (tests/doubles/) on CPU:
checked set_input_shape / set_tensor_address, data-dependent outputs through an output
allocator, shape tensors in host memory, I/O types, copies of only the outputs asked for."""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pytest_trtcompare import runners
from pytest_trtcompare.errors import FeedError, PrecisionUnsupported
from pytest_trtcompare.runners.trt_io import numpy_dtype

from .doubles import fake_trt_context
from .doubles.trt_fixture import install_doubles
from .onnx_models import layer_chain, make

SHAPES = [{"x": (1, 16)}, {"x": (8, 16)}]


@pytest.fixture
def fake(monkeypatch):
    return functools.partial(install_doubles, monkeypatch)


def _nonzero() -> onnx.ModelProto:
    """x[n, 4] -> NonZero (data-dependent: [2, ?]) and Relu (shape known from x)."""
    graph = helper.make_graph(
        [
            helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
            helper.make_node("Relu", ["x"], ["r"], name="relu"),
        ],
        "dds",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [
            helper.make_tensor_value_info("nz", TensorProto.INT64, [2, "k"]),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, ["n", 4]),
        ],
    )
    return make(graph)


def _reshape_by_shape_tensor() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")],
        "shape_tensor",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 6]),
            helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])],
    )
    return make(graph)


@pytest.mark.parametrize("version", ["10.16.1.11", "11.4.0.106"])
def test_data_dependent_output_comes_through_the_output_allocator(fake, version):
    _, cuda = fake(version=version)
    model = _nonzero()
    x = np.array([[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 0, 4]], dtype=np.float32)
    with runners.create("trt", model, shapes=[{"x": (1, 4)}, {"x": (4, 4)}], isolate=False) as rt:
        assert tuple(rt.context.get_tensor_shape("nz")[i] for i in range(2)) == (2, -1)
        out = rt.infer({"x": x})
        np.testing.assert_array_equal(out["nz"], np.stack(np.nonzero(x)))
        np.testing.assert_array_equal(out["r"], np.maximum(x, 0))
        assert rt.io.allocated == {"nz"}  # r's shape was known: plain set_tensor_address
        assert rt.infer({"x": x[:1]})["nz"].shape == (2, 2)  # smaller: the buffer is reused
    assert cuda.memory == {} and not cuda.streams  # allocator buffers freed, stream destroyed


def test_shape_tensor_input_is_passed_in_host_memory(fake):
    trt, _ = fake()
    shapes = {"x": ((1, 6), (2, 6), (4, 6)), "s": ((1, 1), (3, 4), (24, 24))}
    with runners.create("trt", _reshape_by_shape_tensor(), shapes=shapes, isolate=False) as rt:
        assert rt.engine.get_tensor_location("s") == trt.TensorLocation.HOST
        x = np.arange(12, dtype=np.float32).reshape(2, 6)
        y = rt.infer({"x": x, "s": np.array([3, 4], dtype=np.int64)})["y"]
    np.testing.assert_array_equal(y, x.reshape(3, 4))


def test_shape_outside_the_profile_is_refused_naming_tensor_shape_and_profile(fake):
    fake()
    runner = runners.create("trt", layer_chain(), shapes=SHAPES, isolate=False)
    feed = {"x": np.zeros((9, 16), dtype=np.float32)}
    message = r"shape \(9, 16\) for input 'x': optimization profile 0 allows \(1, 16\) to \(8, 16\)"
    with pytest.raises(FeedError, match=message):
        runner.infer(feed)


def test_refused_tensor_address_names_tensor_shape_and_profile(fake, monkeypatch):
    _, cuda = fake()
    runner = runners.create("trt", layer_chain(), shapes=SHAPES, isolate=False)
    monkeypatch.setattr(
        fake_trt_context.IExecutionContext, "set_tensor_address", lambda self, n, p: False
    )
    message = r"address of tensor 'x' \(shape \(2, 16\), optimization profile 0"
    with pytest.raises(RuntimeError, match=message):
        runner.infer({"x": np.zeros((2, 16), dtype=np.float32)})
    assert cuda.memory == {}  # what was allocated before the refusal is freed


def test_failed_execution_is_an_error(fake, monkeypatch):
    fake()
    runner = runners.create("trt", layer_chain(), shapes=SHAPES, isolate=False)
    monkeypatch.setattr(fake_trt_context.IExecutionContext, "execute_async_v3", lambda s, h: False)
    with pytest.raises(RuntimeError, match="execute_async_v3 failed"):
        runner.infer({"x": np.zeros((2, 16), dtype=np.float32)})


def test_only_the_outputs_asked_for_are_copied_to_the_host(fake):
    _, cuda = fake()
    runner = runners.create("trt", layer_chain(), shapes=SHAPES, outputs="all", isolate=False)
    feed = {"x": np.ones((2, 16), dtype=np.float32)}
    assert len(runner.infer(feed)) == len(runner.output_names()) == len(cuda.host_copies)
    cuda.host_copies.clear()
    with runner.select_outputs(["add1"]):
        assert list(runner.infer(feed)) == ["add1"]
    assert len(cuda.host_copies) == 1


def test_close_destroys_the_stream_once(fake):
    _, cuda = fake()
    runner = runners.create("trt", layer_chain(), shapes=SHAPES, isolate=False)
    assert len(cuda.streams) == 1
    runner.close()
    runner.close()
    assert not cuda.streams
    with pytest.raises(RuntimeError, match="closed"):
        runner._infer({"x": np.zeros((1, 16), dtype=np.float32)})


@pytest.mark.parametrize("version", ["10.16.1.11", "11.4.0.106"])
def test_io_types_map_through_ml_dtypes_or_are_refused_by_name(fake, version):
    trt, _ = fake(version=version)
    assert numpy_dtype(trt.DataType.BF16, "t") == np.dtype(ml_dtypes.bfloat16)
    assert numpy_dtype(trt.DataType.FP8, "t") == np.dtype(ml_dtypes.float8_e4m3fn)
    assert numpy_dtype(trt.DataType.HALF, "t") == np.float16
    for name in ("INT4", "FP4", "E8M0"):
        with pytest.raises(PrecisionUnsupported, match=rf"tensor 'q' is DataType\.{name} \("):
            numpy_dtype(trt.DataType[name], "q")


def test_an_engine_with_int4_inputs_is_refused_by_tensor_name(fake):
    fake()
    graph = helper.make_graph(
        [helper.make_node("Cast", ["q"], ["y"], to=TensorProto.FLOAT, name="cast")],
        "int4_io",
        [helper.make_tensor_value_info("q", TensorProto.INT4, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    with pytest.raises(PrecisionUnsupported, match=r"tensor 'q' is DataType\.INT4 \(4-bit"):
        runners.create("trt", make(graph), isolate=False)
