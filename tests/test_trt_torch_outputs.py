"""The TensorRT runner hands its outputs out as torch tensors where torch sees CUDA (issue 36
item 4): each tensor owns the device memory TensorRT wrote (runners/cuda.py `torch_over`),
nothing is copied to the host, and TensorRT against PyTorch is compared on the GPU. Checked
against the TEST DOUBLE (tests/doubles/), whose `torch_outputs` stands for torch with CUDA:
its "device memory" is host memory, handed out as CPU tensors with the same ownership."""

from __future__ import annotations

import functools
import gc

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare import runners

from .doubles.trt_fixture import install_doubles
from .onnx_models import layer_chain, make
from .pytester_helpers import run
from .test_trt_runner_io import _nonzero

torch = pytest.importorskip("torch")

SHAPES = [{"x": (1, 16)}, {"x": (8, 16)}]
FEED = {"x": np.linspace(-2, 2, 32, dtype=np.float32).reshape(2, 16)}


@pytest.fixture
def fake(monkeypatch):
    return functools.partial(install_doubles, monkeypatch)


def test_outputs_are_tensors_that_own_the_memory_tensorrt_wrote(fake):
    fake()
    with runners.create("trt", layer_chain(), shapes=SHAPES, isolate=False) as host_runner:
        on_host = host_runner.infer(FEED)
    _, cuda = fake(torch_outputs=True)
    runner = runners.create("trt", layer_chain(), shapes=SHAPES, outputs="all", isolate=False)
    first = runner.infer(FEED)
    assert set(first) == set(runner.output_names())
    assert all(isinstance(value, torch.Tensor) for value in first.values())
    assert cuda.host_copies == []  # nothing copied to the host
    assert len(cuda.adopted) == len(first)  # each output over its own device allocation
    for name, array in on_host.items():
        assert first[name].dtype == torch.float32 and first[name].shape == array.shape
        np.testing.assert_array_equal(first[name].numpy(), array)
    kept = {name: value.clone() for name, value in first.items()}
    again = runner.infer({"x": -FEED["x"]})  # new memory: the first outputs are untouched
    assert all(torch.equal(first[name], kept[name]) for name in first)
    assert not torch.equal(again[name], first[name])
    runner.close()
    assert set(cuda.memory) == set(cuda.adopted)  # the tensors' memory outlives the runner
    view = first[name][0]  # a view keeps its tensor's memory
    del first, again
    gc.collect()
    assert len(cuda.memory) == 1
    del view
    gc.collect()
    assert cuda.memory == {}


def test_selected_outputs_only_are_handed_out(fake):
    _, cuda = fake(torch_outputs=True)
    runner = runners.create("trt", layer_chain(), shapes=SHAPES, outputs="all", isolate=False)
    with runner.select_outputs(["add1"]):
        out = runner.infer(FEED)
    assert list(out) == ["add1"] and len(cuda.adopted) == 1
    assert set(cuda.memory) == set(cuda.adopted)  # the others' memory freed after the run
    runner.close()


@pytest.mark.parametrize("version", ["10.16.1.11", "11.4.0.106"])
def test_a_data_dependent_output_takes_over_the_allocators_buffer(fake, version):
    _, cuda = fake(version=version, torch_outputs=True)
    x = np.array([[0, 1, 0, 2], [3, 0, 0, 0], [0, 0, 0, 4]], dtype=np.float32)
    shapes = [{"x": (1, 4)}, {"x": (4, 4)}]
    with runners.create("trt", _nonzero(), shapes=shapes, isolate=False) as rt:
        first = rt.infer({"x": x})
        assert first["nz"].dtype == torch.int64
        np.testing.assert_array_equal(first["nz"].numpy(), np.stack(np.nonzero(x)))
        np.testing.assert_array_equal(first["r"].numpy(), np.maximum(x, 0))
        assert rt.io.allocator.buffers == {}  # the tensor's now
        second = rt.infer({"x": x[:1]})  # the allocator makes a new buffer
        assert second["nz"].shape == (2, 2)
        np.testing.assert_array_equal(first["nz"].numpy(), np.stack(np.nonzero(x)))
    assert cuda.host_copies == []
    del first, second
    gc.collect()
    assert cuda.memory == {} and not cuda.streams


def _cast_model(to: int) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=to, name="cast")],
        "cast",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", to, [4])],
    )
    return make(graph)


@pytest.mark.parametrize(
    ("onnx_type", "dtype"),
    [
        (TensorProto.FLOAT16, "float16"),
        (TensorProto.INT32, "int32"),
        (TensorProto.BOOL, "bool"),
        (TensorProto.UINT8, "uint8"),
    ],
)
def test_outputs_keep_their_dtype(fake, onnx_type, dtype):
    """(bfloat16 and float8 take the same view by name; onnxruntime, the double's engine,
    cannot return them.)"""
    fake()
    feed = {"x": np.array([0.1, 0.0, 3.0, 1e2], dtype=np.float32)}
    with runners.create("trt", _cast_model(onnx_type), isolate=False) as rt:
        on_host = rt.infer(feed)["y"]
    fake(torch_outputs=True)
    with runners.create("trt", _cast_model(onnx_type), isolate=False) as rt:
        tensor = rt.infer(feed)["y"]
    assert tensor.dtype == getattr(torch, dtype)
    np.testing.assert_array_equal(tensor.numpy(), on_host)


SUITE = """
import numpy as np
import torch

from pytest_trtcompare import runners

FEED = {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}


def engine():
    return runners.create("trt", "model.onnx", shapes=[{"x": (1, 4)}, {"x": (3, 4)}], isolate=False)


def torch_outputs(shift=0.0):
    linear = torch.nn.Linear(4, 2, bias=False)
    torch.nn.init.constant_(linear.weight, 0.5)
    runner = runners.create("torch", linear, input_names=["x"], output_names=["y"])
    return {"y": runner.infer(FEED)["y"] + shift}


def test_against_torch(compare):
    with engine() as trt:
        outputs = trt.infer(FEED)
    assert isinstance(outputs["y"], torch.Tensor)
    compare(outputs, torch_outputs())


def test_drifted(compare):
    with engine() as trt:
        compare(trt.infer(FEED), torch_outputs(shift=0.25))


def test_golden(golden):
    with engine() as trt:
        golden.check(trt.infer(golden.inputs(trt, shapes={"x": (3, 4)})))
"""


def test_tensorrt_against_torch_and_a_golden_never_copy_outputs_to_the_host(pytester, monkeypatch):
    """TensorRT's tensors against a torch runner's, and against a golden written from them and
    read back, compared by the torch path (the switch: these are CPU tensors), with the
    outcomes and report of the host path. In-process only: the doubles are this process's."""
    weights = numpy_helper.from_array(np.full((4, 2), 0.5, np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="matmul")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])],
        [weights],
    )
    onnx.save(make(graph), str(pytester.path / "model.onnx"))
    pytester.makepyfile(test_engine=SUITE)
    outcomes = {}
    for switch in (True, False):
        pytester.makeconftest(f"from pytest_trtcompare.engine import TUNING\nTUNING.torch={switch}")
        _, cuda = install_doubles(monkeypatch, torch_outputs=True)
        written = run(pytester, "--trt-update-goldens")
        written.assert_outcomes(passed=2, failed=1)
        checked = run(pytester, "-rA")
        checked.assert_outcomes(passed=2, failed=1)
        assert cuda.host_copies == [] and len(cuda.adopted) == 6
        lines = checked.stdout.lines
        start = next(i for i, line in enumerate(lines) if "outputs out of tolerance" in line)
        outcomes[switch] = lines[start : start + 12]
        assert any("greatest abs error 0.25 at (0, 0)" in line for line in outcomes[switch])
    assert outcomes[True] == outcomes[False]


def test_device_memory_is_freed_once_when_torch_lets_it_go():
    """runners/cuda.py `DeviceMemory`: what torch.as_tensor reads, and one free when the last
    reference (torch's, on a GPU) goes; none at exit (CUDA may be gone by then)."""
    from pytest_trtcompare.runners.cuda import DeviceMemory

    freed: list[int] = []
    memory = DeviceMemory(freed.append, 0x7F00, 24)
    assert memory.__cuda_array_interface__ == {
        "shape": (24,),
        "typestr": "|u1",
        "data": (0x7F00, False),
        "version": 2,
    }
    del memory
    gc.collect()
    assert freed == [0x7F00]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64", "bool"])
def test_cuda_bindings_memory_becomes_a_cuda_tensor_that_frees_it(dtype):
    """On a GPU: cudaMalloc'd memory (cuda-bindings) as a torch CUDA tensor with the values
    copied there, freed by cudaFree once the tensor and its views are gone."""
    import ml_dtypes

    from pytest_trtcompare.runners.cuda import CudaBindingsApi

    api = CudaBindingsApi()
    api.set_device(0)
    freed: list[int] = []
    free = api.free
    api.free = lambda pointer: (freed.append(pointer), free(pointer))  # type: ignore[method-assign]
    numpy_dtype = np.dtype(getattr(ml_dtypes, dtype, dtype))
    values = np.linspace(-3, 3, 60).reshape(3, 4, 5).astype(numpy_dtype)
    pointer = api.malloc(values.nbytes)
    stream = api.create_stream()
    api.copy_to_device(pointer, values, stream)
    api.synchronize(stream)
    tensor = api.as_torch(pointer, values.shape, values.dtype)
    assert tensor.device == torch.device("cuda:0") and tensor.data_ptr() == pointer
    assert str(tensor.dtype) == f"torch.{dtype}" and tuple(tensor.shape) == values.shape
    expected = torch.from_numpy(values.view(np.int16) if dtype == "bfloat16" else values)
    got = tensor.view(torch.int16) if dtype == "bfloat16" else tensor
    assert torch.equal(got.cpu(), expected)
    view = tensor[1]
    del tensor
    gc.collect()
    assert freed == []
    del view, got
    gc.collect()
    torch.cuda.synchronize()
    assert freed == [pointer]
    api.destroy_stream(stream)
