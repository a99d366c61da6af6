"""--trt-device (issue 36, item 5): the device of the torch and TensorRT runners, one GPU per
pytest-xdist worker. The mapping is tested with given device counts (these machines have no
GPU); the option as a user meets it runs on the CPU, with and without -n 2."""

from __future__ import annotations

import functools
import json
import sys
import types

import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.errors import FrameworkUnavailable, RunnerOptionError
from pytest_trtcompare.session.devices import device_for, parse_device
from pytest_trtcompare.session.runs import RunnerCache

from .doubles import fake_cuda, fake_tensorrt
from .doubles.trt_fixture import install_doubles
from .onnx_models import layer_chain
from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run


@pytest.mark.parametrize(
    ("choice", "worker", "count", "device"),
    [
        ("auto", None, 0, "cpu"),  # no GPU: the CPU
        ("auto", "gw3", 0, "cpu"),
        ("cuda", None, 0, "cuda:0"),  # asked for: the runner then says there is none
        ("auto", None, 4, "cuda:0"),  # without xdist: the first visible GPU
        ("auto", "gw0", 4, "cuda:0"),
        ("auto", "gw1", 4, "cuda:1"),
        ("auto", "gw5", 4, "cuda:1"),  # more workers than GPUs: worker K gets K mod count
        ("cuda", "gw2", 2, "cuda:0"),
        ("cuda", "gw1", 1, "cuda:0"),
        ("cuda:3", "gw1", 4, "cuda:3"),  # one device for every worker
        ("cpu", "gw1", 4, "cpu"),
    ],
)
def test_each_worker_gets_its_device(choice, worker, count, device):
    assert device_for(choice, worker, count) == device


def test_choices_are_checked():
    assert [parse_device(t, "x") for t in ("Auto", " cpu ", "cuda", "CUDA:12")] == [
        "auto",
        "cpu",
        "cuda",
        "cuda:12",
    ]
    # torch refuses 'cuda:01'; \d would take other scripts' digits ('cuda:٣')
    for bad in (
        "gpu",
        "cuda:",
        "cuda:-1",
        "cuda:a",
        "0",
        "",
        "cuda:01",
        "cuda:\u0663",
        "cuda:99999",
    ):
        with pytest.raises(RunnerOptionError, match="is not a device; takes auto"):
            parse_device(bad, "--trt-device")


def _bindings(monkeypatch, devices):
    """cuda.bindings.runtime seeing `devices` GPUs (the double of tests/doubles)."""
    rt = fake_cuda.runtime_module(devices=devices)
    bindings = types.ModuleType("cuda.bindings")
    bindings.runtime = rt  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda", types.ModuleType("cuda"))
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.runtime", rt)


def test_visible_devices_come_from_cuda_bindings_else_torch(monkeypatch):
    torch = pytest.importorskip("torch")
    _bindings(monkeypatch, devices=3)  # what the runtime counts after CUDA_VISIBLE_DEVICES
    assert runners.visible_device_count("trt") == 3
    # the torch runner can use what torch sees: none for this CPU build, GPUs or not
    assert runners.visible_device_count("torch") == torch.cuda.device_count() == 0
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)  # not installed
    monkeypatch.setitem(sys.modules, "cuda", None)
    assert runners.visible_device_count("trt") == 0


def test_the_cache_places_torch_and_trt_runners_and_the_caller_wins(monkeypatch):
    torch = pytest.importorskip("torch")
    counts = {"torch": 2, "trt": 2}
    monkeypatch.setattr(runners, "visible_device_count", lambda framework: counts[framework])
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")  # left over: the cache's worker counts
    cache = RunnerCache("auto", worker="gw3")
    assert (cache.device("torch"), cache.device("trt")) == ("cuda:1", "cuda:1")
    with pytest.raises(
        FrameworkUnavailable, match=r"no CUDA device for 'cuda:1'.* \(--trt-device=auto\)$"
    ):
        cache.get("torch", torch.nn.Identity(), input_names=["x"])
    placed = cache.get("torch", torch.nn.Identity(), input_names=["x"], device="cpu")
    assert placed.describe()["device"] == "cpu"
    assert cache.get("onnxrt", layer_chain()).describe()["device"] == "cpu"  # not placed
    assert RunnerCache().get("torch", torch.nn.Identity()).describe()["device"] == "cpu"
    # GPUs that a CPU build of torch cannot use: auto keeps torch on the CPU; with no GPU
    # at all, TensorRT gets no device from auto (its own probe says why it cannot run)
    counts.update(torch=0, trt=2)
    assert RunnerCache("auto", worker="gw1").device("torch") == "cpu"
    counts.update(trt=0)
    assert RunnerCache("auto", worker="gw1").device("trt") is None
    assert RunnerCache("cuda", worker="gw1").device("trt") == "cuda:0"


SHAPES = [{"x": (1, 16)}, {"x": (8, 16)}]


@pytest.fixture
def fake(monkeypatch):
    return functools.partial(install_doubles, monkeypatch)


def test_tensorrt_sets_its_device_before_anything_else(fake):
    fake(devices=2)
    runner = runners.create("trt", layer_chain(), device="cuda:1", isolate=False, shapes=SHAPES)
    assert runner.describe()["cuda_device"] == "cuda:1"
    calls = fake_tensorrt.CALLS
    assert calls.index("cuda.set_device(1)") < calls.index("trt.Logger")
    runner.close()
    with pytest.raises(FrameworkUnavailable, match=r"cuda:2: this process sees 2 CUDA device"):
        runners.create("trt", layer_chain(), device="cuda:2", isolate=False)
    with pytest.raises(
        FrameworkUnavailable, match=r"^TensorRT runs on a CUDA device, not the CPU$"
    ):
        runners.create("trt", layer_chain(), device="cpu", isolate=False)
    with pytest.raises(RunnerOptionError, match=r"device='gpu' is not a CUDA device"):
        runners.create("trt", layer_chain(), device="gpu", isolate=False)


SUITE = """
import pytest
import torch


@pytest.mark.compare_frameworks(
    frameworks=["torch"], model=torch.nn.Identity(), options={"torch": {"input_names": ["x"]}},
)
@pytest.mark.shapes({"x": (3,)})
def test_placed():
    pass


@pytest.mark.compare_frameworks(
    frameworks=["torch"], model=torch.nn.Identity(),
    options={"torch": {"input_names": ["x"], "device": "cpu"}},
)
@pytest.mark.shapes({"x": (3,)})
def test_marker_device():
    pass


def test_fixture(runners):
    assert runners.torch(torch.nn.Identity(), input_names=["x"]).describe()["device"] == "cpu"
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_the_option_as_a_user_meets_it(pytester, xdist):
    pytest.importorskip("torch")
    pytester.makepyfile(test_device=SUITE)
    auto = run(pytester, "--trt-device=auto", "--trt-report=r.json", *xdist)
    auto.assert_outcomes(passed=3)  # no GPU here: auto is the CPU
    described = json.loads((pytester.path / "r.json").read_text())["runners"].values()
    assert {info["device"] for info in described} == {"cpu"}
    cuda = run(pytester, "--trt-device=cuda", "-rs", *xdist)
    cuda.assert_outcomes(passed=1, skipped=2)  # the marker's device="cpu" wins
    cuda.stdout.fnmatch_lines(["SKIPPED * sees no CUDA device for 'cuda:0'* (--trt-device=cuda)"])
    pytester.makeini("[pytest]\ntrtcompare_device = cpu\n")
    run(pytester, *xdist).assert_outcomes(passed=3)
    pytester.makeini("[pytest]\ntrtcompare_device = gpu0\n")
    bad = run(pytester, *xdist)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(
        ["ERROR: ini trtcompare_device: 'gpu0' is not a device; takes auto | cpu | cuda | cuda:N"]
    )
    typo = run(pytester, "--trt-device=gpu", *xdist)
    assert typo.ret == pytest.ExitCode.USAGE_ERROR
    typo.stderr.fnmatch_lines(["ERROR: --trt-device=gpu: 'gpu' is not a device; takes auto*"])
