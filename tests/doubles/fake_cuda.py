"""TEST DOUBLE — not CUDA. Host memory posing as device memory, for the TensorRT double.

`FakeCuda` implements pytest_trtcompare.runners.cuda.CudaApi. Device pointers are keys of
`memory` (never real addresses: the TensorRT double refuses them where TensorRT wants host
memory, and host pointers where it wants device memory). `runtime_module()` imitates
`cuda.bindings.runtime` for the probe: calls return tuples, error first, like the real binding.
"""

from __future__ import annotations

import enum
import itertools
import types
import weakref
from typing import Any

import numpy as np

CURRENT: FakeCuda | None = None  # the FakeCuda that the TensorRT double reads and writes


class FakeCuda:
    """Host-memory stand-in for the CUDA API (pytest_trtcompare.runners.cuda.CudaApi)."""

    binding = "fake-cuda"

    def __init__(
        self, devices: int = 1, calls: list[str] | None = None, torch_outputs: bool = False
    ) -> None:
        global CURRENT
        CURRENT = self
        self.devices = devices
        self.torch_outputs = torch_outputs  # as torch installed with CUDA: outputs as tensors
        self.adopted: list[int] = []  # device pointers handed to torch tensors, in order
        self.calls = calls if calls is not None else []
        self.memory: dict[int, np.ndarray] = {}
        self.streams: set[int] = set()
        self.host_copies: list[int] = []  # device pointers copied to the host, in order
        self._next = itertools.count(0x1000, 0x1000)

    def device_count(self) -> int:
        self.calls.append("cuda.device_count")
        return self.devices

    def device_name(self, index: int) -> str:
        return "Fake GPU 80GB"

    def set_device(self, index: int) -> None:
        assert 0 <= index < self.devices, index  # cudaSetDevice fails otherwise
        self.calls.append(f"cuda.set_device({index})")

    def malloc(self, nbytes: int) -> int:
        pointer = next(self._next)
        self.memory[pointer] = np.zeros(max(1, nbytes), dtype=np.uint8)
        return pointer

    def free(self, pointer: int) -> None:
        del self.memory[pointer]

    def create_stream(self) -> int:
        stream = 7 + len(self.streams)
        self.streams.add(stream)
        return stream

    def destroy_stream(self, stream: int) -> None:
        self.streams.remove(stream)

    def synchronize(self, stream: int) -> None:
        assert stream in self.streams
        self.calls.append("cuda.synchronize")

    def copy_to_device(self, pointer: int, array: np.ndarray, stream: int) -> None:
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        self.memory[pointer][: data.size] = data

    def copy_to_host(self, array: np.ndarray, pointer: int, stream: int) -> None:
        self.host_copies.append(pointer)
        array.reshape(-1).view(np.uint8)[:] = self.memory[pointer][: array.nbytes]

    def torch_tensors(self) -> bool:
        return self.torch_outputs

    def as_torch(self, pointer: int, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        """A CPU tensor over the fake device memory, owning it as `runners.cuda.torch_over`
        makes a CUDA tensor own real memory: freed once no tensor (or view) uses it."""
        import torch

        self.adopted.append(pointer)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        raw = self.memory[pointer][:nbytes]  # a view that the tensor's storage keeps alive
        weakref.finalize(raw, self.free, pointer)
        return torch.from_numpy(raw).view(getattr(torch, dtype.name)).reshape(shape)


class cudaError_t(enum.IntEnum):
    cudaSuccess = 0
    cudaErrorInsufficientDriver = 35
    cudaErrorNoDevice = 100


_STRINGS = {
    cudaError_t.cudaSuccess: b"no error",
    cudaError_t.cudaErrorInsufficientDriver: (
        b"CUDA driver version is insufficient for CUDA runtime version"
    ),
    cudaError_t.cudaErrorNoDevice: b"no CUDA-capable device is detected",
}


def runtime_module(error: str = "cudaSuccess", devices: int = 1) -> types.ModuleType:
    """A `cuda.bindings.runtime` whose cudaGetDeviceCount fails with `error` (or finds devices)."""
    rt = types.ModuleType("cuda.bindings.runtime")
    code = cudaError_t[error]

    def cudaGetDeviceCount() -> tuple[cudaError_t, int]:
        return code, devices if code == cudaError_t.cudaSuccess else 0

    def cudaGetErrorName(err: cudaError_t) -> tuple[cudaError_t, bytes]:
        return cudaError_t.cudaSuccess, cudaError_t(err).name.encode()

    def cudaGetErrorString(err: cudaError_t) -> tuple[cudaError_t, bytes]:
        return cudaError_t.cudaSuccess, _STRINGS[cudaError_t(err)]

    rt.cudaError_t = cudaError_t  # type: ignore[attr-defined]
    rt.cudaGetDeviceCount = cudaGetDeviceCount  # type: ignore[attr-defined]
    rt.cudaGetErrorName = cudaGetErrorName  # type: ignore[attr-defined]
    rt.cudaGetErrorString = cudaGetErrorString  # type: ignore[attr-defined]
    return rt
