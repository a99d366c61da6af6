"""Installing the TensorRT and CUDA doubles into runners.trt, for the `fake` fixtures."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_trtcompare.errors import FrameworkUnavailable
from pytest_trtcompare.runners import trt as trt_runner

from . import fake_cuda, fake_tensorrt


def install_doubles(
    monkeypatch: pytest.MonkeyPatch,
    devices: int = 1,
    version: str = "10.16.1.11",
    torch_outputs: bool = False,
) -> tuple[Any, fake_cuda.FakeCuda]:
    """Returns (the fake tensorrt module of `version`, the FakeCuda the runner will use);
    `torch_outputs`: as where torch sees CUDA, the runner hands out torch tensors."""
    fake_tensorrt.reset()
    cuda = fake_cuda.FakeCuda(devices, calls=fake_tensorrt.CALLS, torch_outputs=torch_outputs)
    module = fake_tensorrt.module(version)

    def load_cuda_api() -> fake_cuda.FakeCuda:
        if cuda.device_count() < 1:
            raise FrameworkUnavailable("no CUDA device visible: TensorRT needs a GPU")
        return cuda

    monkeypatch.setattr(trt_runner, "tensorrt_installed", lambda: True)
    monkeypatch.setattr(trt_runner, "load_cuda_api", load_cuda_api)
    monkeypatch.setattr(trt_runner, "import_tensorrt", lambda: module)
    return module, cuda
