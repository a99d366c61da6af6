"""A torch runner's outputs stay where it made them (issue 36 item 4): on a GPU it returns its
tensors, which are compared there. `TUNING.torch` makes a CPU runner do the same, so CI runs
every consumer of such outputs: the comparison, goldens written and checked, the fp64
check's runs, the failure artifacts, and (`pack`, unit-tested: a worker process does not
read the conftest that sets the switch) an isolated worker's pipe."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_trtcompare import compare_outputs, runners
from pytest_trtcompare.engine import TUNING

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run

torch = pytest.importorskip("torch")


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))


FEED = {"input": np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)}


def test_the_fp64_checks_runs_are_read_on_the_host():
    """The fp64 check's two extra runs (engine/anchored.py Anchor), tensors from a torch
    runner kept on its device, are read as numpy arrays."""
    from pytest_trtcompare.engine import Anchor

    values = torch.linspace(0, 1, 6, dtype=torch.float64)
    anchor = Anchor({"y": values}, {"y": values.to(torch.bfloat16)}, "torch bf16")
    float64, reduced = anchor.arrays("y", (2, 3))
    assert type(float64) is np.ndarray and float64.shape == (2, 3)
    assert str(reduced.dtype) == "bfloat16" and reduced.shape == (2, 3)


def test_a_cpu_runner_returns_numpy_and_under_the_switch_its_tensors(monkeypatch):
    runner = runners.create("torch", _model())
    host = runner.infer(FEED)
    assert all(type(value) is np.ndarray for value in host.values())
    monkeypatch.setattr(TUNING, "torch", True)
    first, again = runner.infer(FEED), runner.infer(FEED)
    assert all(isinstance(value, torch.Tensor) for value in first.values())
    name = next(iter(first))
    assert first[name].device.type == "cpu" and not first[name].requires_grad
    first[name].add_(1.0)  # the caller's own: the next call's are not touched
    assert torch.equal(again[name], torch.from_numpy(host[name]))
    assert compare_outputs(again, host, atol=0, rtol=0).passed


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")
def test_a_cuda_runner_returns_its_tensors_on_the_device():
    runner = runners.create("torch", _model(), device="cuda")
    outputs = runner.infer(FEED)
    assert all(value.device.type == "cuda" for value in outputs.values())
    reference = runners.create("torch", _model()).infer(FEED)  # on the CPU: numpy
    result = compare_outputs(outputs, reference, atol=1e-5, rtol=1e-5)
    assert result.passed, result.report()


SUITE = """
import pytest
import torch


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))


SHAPES = pytest.mark.shapes({"input": (2, 8)})


@pytest.mark.compare_frameworks(model=model(), frameworks=["torch"], golden=True)
@SHAPES
def test_golden(comparison):
    pass


@pytest.mark.compare_frameworks(
    model=model(), frameworks=["torch"], tolerance={"atol": 0, "rtol": 0}
)
@SHAPES
def test_fails(comparison):
    pass
"""


def _outcome(pytester, xdist: list[str], switch: bool) -> tuple[list[str], list[str]]:
    pytester.makeconftest(f"from pytest_trtcompare.engine import TUNING\nTUNING.torch = {switch}")
    pytester.makepyfile(test_device=SUITE)
    written = run(pytester, "--trt-precision=fp16", "--trt-update-goldens", *xdist)
    written.assert_outcomes(passed=1, failed=1)
    checked = run(pytester, "--trt-precision=fp16", "--trt-artifacts-dir=arts", *xdist)
    checked.assert_outcomes(passed=1, failed=1)
    lines = checked.stdout.lines
    start = next(i for i, line in enumerate(lines) if "outputs out of tolerance" in line)
    end = next(i for i in range(start, len(lines)) if "artifacts:" in lines[i])
    return lines[start:end], sorted(p.name for p in (pytester.path / "arts").rglob("*.npy"))


@pytest.mark.parametrize("xdist", XDIST)
def test_outputs_kept_as_tensors_reach_every_consumer(pytester, xdist):
    """Under the switch the torch runner hands out tensors: a golden is written from them and
    checked against them, a failure writes their artifacts; the outcomes and the failure
    report are the host's."""
    kept = _outcome(pytester, xdist, switch=True)
    assert kept == _outcome(pytester, xdist, switch=False)
    report, artifacts = kept
    assert any("worst elements" in line for line in report)
    assert any(name.endswith(".actual.npy") for name in artifacts), artifacts


def test_an_isolated_workers_pipe_takes_tensors_through_the_buffer(monkeypatch, tmp_path):
    """runners/isolated_serve.py `pack`: a worker's tensors cross as host arrays, copied
    through `STAGING` (a CUDA tensor's through the pinned buffer; here, under the switch, a
    CPU tensor's through the unpinned one), bfloat16 and large ones (a file) too."""
    from pytest_trtcompare.engine import STAGING
    from pytest_trtcompare.runners.isolated_serve import pack, unpack

    monkeypatch.setattr(TUNING, "torch", True)
    monkeypatch.setattr(STAGING, "buffer", None)
    outputs = {
        "y": torch.linspace(-1, 1, 12).reshape(3, 4).t(),
        "half": torch.linspace(-1, 1, 6, dtype=torch.bfloat16),
        "big": torch.arange(1 << 20, dtype=torch.int64),
    }
    crossed = unpack(pack(outputs, tmp_path, "p"))
    assert STAGING.buffer is not None and not STAGING.buffer.is_pinned()
    assert all(type(value) is np.ndarray for value in crossed.values())
    np.testing.assert_array_equal(crossed["y"], outputs["y"].numpy())
    assert str(crossed["half"].dtype) == "bfloat16"
    np.testing.assert_array_equal(crossed["half"].astype(np.float32), outputs["half"].float())
    np.testing.assert_array_equal(crossed["big"], outputs["big"].numpy())


def _staging_cases():
    values = torch.linspace(-3, 3, 42)
    yield "empty", torch.zeros(0, 5, dtype=torch.int32)  # first: no buffer made yet
    yield "float32", values.reshape(6, 7)
    yield "transposed", values.reshape(6, 7).t()
    yield "bfloat16", values.to(torch.bfloat16)
    yield "float8", values.to(torch.float8_e4m3fn)
    yield "bool", values > 0
    yield "int64 0-d", torch.tensor(-(2**62))


def test_host_copies_go_through_one_bounded_reused_buffer(monkeypatch):
    """engine/tensors.py `STAGING`: every copy of a device tensor to the host (here CPU tensors
    under the switch) passes through one buffer of at most `TUNING.staging_bytes`, in as
    many steps as it takes, and gives the values as they are."""
    from pytest_trtcompare.engine.arrays import host_array
    from pytest_trtcompare.engine.staging import STAGING

    monkeypatch.setattr(TUNING, "torch", True)
    monkeypatch.setattr(TUNING, "staging_bytes", 40)  # the float32 case takes 5 steps
    monkeypatch.setattr(STAGING, "buffer", None)
    pointers = set()
    for label, tensor in _staging_cases():
        copied = host_array(tensor)
        if label == "float8":
            expected = tensor.float().numpy()
        elif label == "bfloat16":
            expected = tensor.float().numpy().astype(copied.dtype)
        else:
            expected = tensor.numpy()
        assert copied.shape == tuple(tensor.shape), label
        np.testing.assert_array_equal(copied, expected, err_msg=label)
        if STAGING.buffer is not None:
            pointers.add(STAGING.buffer.data_ptr())
            assert STAGING.buffer.numel() <= 40 and not STAGING.buffer.is_pinned()
    assert len(pointers) == 1  # allocated once, then reused


def test_an_empty_tensor_against_a_numpy_golden_under_the_switch(monkeypatch):
    """The first staged copy of a process may be of nothing (an empty golden going to the
    device, an empty output to the host)."""
    from pytest_trtcompare.engine.staging import STAGING

    monkeypatch.setattr(TUNING, "torch", True)
    monkeypatch.setattr(STAGING, "buffer", None)
    empty = torch.zeros(0, dtype=torch.int32)
    assert compare_outputs({"y": empty}, {"y": np.zeros(0, np.uint16)}).passed
    assert compare_outputs({"y": empty}, {"y": empty}, atol=0, rtol=0).passed


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")
def test_a_golden_goes_to_the_device_and_outputs_come_back_through_pinned_memory(monkeypatch):
    from pytest_trtcompare.engine.arrays import host_array
    from pytest_trtcompare.engine.staging import STAGING

    monkeypatch.setattr(TUNING, "staging_bytes", 1 << 20)
    values = torch.randn(3 << 20, generator=torch.Generator().manual_seed(0))  # 12 MiB
    on_device = values.to("cuda")
    np.testing.assert_array_equal(host_array(on_device), values.numpy())
    assert STAGING.buffer.is_pinned() and STAGING.buffer.numel() == 1 << 20
    result = compare_outputs({"y": on_device}, {"y": values.numpy()}, atol=0, rtol=0)
    assert result.passed and STAGING.buffer.numel() == 1 << 20
