"""The few CUDA runtime calls the TensorRT runner needs, over cuda-bindings (or pycuda).

`load_cuda_api()` finds a binding and probes for a device; the TensorRT runner calls it
before it creates any TensorRT object (without a GPU TensorRT raises or crashes). Where torch
is installed with CUDA, `as_torch` hands a device allocation to torch: the tensor owns it.
"""

from __future__ import annotations

import ctypes
import weakref
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from ..errors import FrameworkUnavailable


class CudaApi(Protocol):
    binding: str

    def device_count(self) -> int: ...
    def device_name(self, index: int) -> str: ...
    def set_device(self, index: int) -> None: ...
    def malloc(self, nbytes: int) -> int: ...
    def free(self, pointer: int) -> None: ...
    def create_stream(self) -> int: ...
    def destroy_stream(self, stream: int) -> None: ...
    def synchronize(self, stream: int) -> None: ...
    def copy_to_device(self, pointer: int, array: np.ndarray, stream: int) -> None: ...
    def copy_to_host(self, array: np.ndarray, pointer: int, stream: int) -> None: ...
    def torch_tensors(self) -> bool: ...
    def as_torch(self, pointer: int, shape: tuple[int, ...], dtype: np.dtype) -> Any: ...


class DeviceMemory:
    """An allocation handed to torch. `torch.as_tensor` reads `__cuda_array_interface__` and
    keeps this object alive as long as the tensor's storage (views included); `free` runs
    when it is collected."""

    def __init__(self, free: Callable[[int], None], pointer: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (pointer, False),
            "version": 2,
        }
        # not at exit: the process's end frees device memory, and CUDA may be gone by then
        weakref.finalize(self, free, pointer).atexit = False


def torch_over(
    free: Callable[[int], None],
    pointer: int,
    shape: tuple[int, ...],
    dtype: np.dtype,
    device: int,
) -> Any:
    """The device memory at `pointer` as a torch tensor of `shape` and `dtype` (bfloat16 and
    float8 by name) on cuda:`device`, which owns it: `free(pointer)` once no tensor uses it."""
    import torch

    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = torch.as_tensor(DeviceMemory(free, pointer, nbytes), device=f"cuda:{device}")
    return raw.view(getattr(torch, dtype.name)).reshape(shape)


class TorchHandout:
    """What both bindings share: handing their allocations on `device` to torch."""

    device = 0  # the device `set_device` made current

    def free(self, pointer: int) -> None:
        raise NotImplementedError

    def torch_tensors(self) -> bool:  # torch installed and seeing a device: `as_torch`
        return visible_device_count("torch") > 0

    def as_torch(self, pointer: int, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return torch_over(self.free, pointer, shape, dtype, self.device)


class CudaBindingsApi(TorchHandout):
    """cuda-bindings (NVIDIA's cuda-python): `cuda.bindings.runtime`, or `cuda.cudart` (<12.6)."""

    binding = "cuda-bindings"

    def __init__(self) -> None:
        try:
            from cuda.bindings import runtime
        except ImportError:
            from cuda import cudart as runtime
        self.rt = runtime

    def _error(self, error: Any) -> str:
        """`cudaErrorInsufficientDriver (CUDA driver version is insufficient ...)`."""
        name, text = self.rt.cudaGetErrorName(error)[1], self.rt.cudaGetErrorString(error)[1]
        name, text = (v.decode() if isinstance(v, bytes) else str(v) for v in (name, text))
        return f"{name} ({text})"

    def _check(self, result: Any) -> Any:
        error, *values = result if isinstance(result, tuple) else (result,)
        if int(error) != 0:
            raise RuntimeError(f"CUDA error {self._error(error)}")
        return values[0] if len(values) == 1 else values

    def device_count(self) -> int:
        error, count = self.rt.cudaGetDeviceCount()
        if int(error) != 0:
            raise RuntimeError(f"cudaGetDeviceCount failed: {self._error(error)}")
        return int(count)

    def device_name(self, index: int) -> str:
        name = self._check(self.rt.cudaGetDeviceProperties(index)).name
        name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
        return name.rstrip("\x00")

    def set_device(self, index: int) -> None:
        self._check(self.rt.cudaSetDevice(index))
        self.device = index

    def malloc(self, nbytes: int) -> int:
        return int(self._check(self.rt.cudaMalloc(max(1, nbytes))))

    def free(self, pointer: int) -> None:
        self._check(self.rt.cudaFree(pointer))

    def create_stream(self) -> int:
        return int(self._check(self.rt.cudaStreamCreate()))

    def destroy_stream(self, stream: int) -> None:
        self._check(self.rt.cudaStreamDestroy(stream))

    def synchronize(self, stream: int) -> None:
        self._check(self.rt.cudaStreamSynchronize(stream))

    def copy_to_device(self, pointer: int, array: np.ndarray, stream: int) -> None:
        kind = self.rt.cudaMemcpyKind.cudaMemcpyHostToDevice
        self._check(self.rt.cudaMemcpyAsync(pointer, array.ctypes.data, array.nbytes, kind, stream))

    def copy_to_host(self, array: np.ndarray, pointer: int, stream: int) -> None:
        kind = self.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
        self._check(self.rt.cudaMemcpyAsync(array.ctypes.data, pointer, array.nbytes, kind, stream))


class PyCudaApi(TorchHandout):
    """pycuda, accepted where it is what the user has installed."""

    binding = "pycuda"

    def __init__(self) -> None:
        import pycuda.driver as driver

        driver.init()
        self.driver = driver
        self._context: Any = None
        self._allocations: dict[int, Any] = {}
        self._streams: dict[int, Any] = {}

    def device_count(self) -> int:
        return int(self.driver.Device.count())

    def device_name(self, index: int) -> str:
        return str(self.driver.Device(index).name())

    def set_device(self, index: int) -> None:
        self.device = index  # before the first allocation: its context is that device's

    def _ensure_context(self) -> None:
        if self._context is None:
            self._context = self.driver.Device(self.device).retain_primary_context()
            self._context.push()

    def malloc(self, nbytes: int) -> int:
        self._ensure_context()
        allocation = self.driver.mem_alloc(max(1, nbytes))
        self._allocations[int(allocation)] = allocation
        return int(allocation)

    def free(self, pointer: int) -> None:
        self._allocations.pop(pointer).free()

    def create_stream(self) -> int:
        self._ensure_context()
        stream = self.driver.Stream()
        self._streams[stream.handle] = stream
        return int(stream.handle)

    def destroy_stream(self, stream: int) -> None:
        self._streams.pop(stream)  # pycuda destroys a stream when it is collected

    def synchronize(self, stream: int) -> None:
        self._streams[stream].synchronize()

    def copy_to_device(self, pointer: int, array: np.ndarray, stream: int) -> None:
        self.driver.memcpy_htod_async(pointer, array, self._streams[stream])

    def copy_to_host(self, array: np.ndarray, pointer: int, stream: int) -> None:
        self.driver.memcpy_dtoh_async(array, pointer, self._streams[stream])


def load_cuda_api() -> CudaApi:
    """A CUDA binding with at least one device, or FrameworkUnavailable saying what is missing."""
    api: CudaApi | None = None
    errors = []
    for factory in (CudaBindingsApi, PyCudaApi):
        try:
            api = factory()
            break
        except Exception as exc:  # ImportError, OSError, pycuda's driver errors ...
            errors.append(f"{factory.binding}: {exc}")
    if api is None:
        raise FrameworkUnavailable(
            "no CUDA Python binding: pip install pytest-trtcompare[tensorrt] "
            f"(cuda-bindings) [{'; '.join(errors)}]"
        )
    try:
        count = api.device_count()
    except RuntimeError as exc:  # the binding's own reason, e.g. cudaErrorInsufficientDriver
        raise FrameworkUnavailable(f"no usable CUDA device ({exc}): TensorRT needs a GPU") from None
    if count < 1:
        for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
            try:
                ctypes.CDLL(name)
            except OSError:
                continue
            raise FrameworkUnavailable("no CUDA device visible: TensorRT needs a GPU")
        raise FrameworkUnavailable("no CUDA driver (libcuda) on this machine: TensorRT needs a GPU")
    return api


def visible_device_count(framework: str = "trt") -> int:
    """The CUDA devices this process sees (after CUDA_VISIBLE_DEVICES) for `framework`:
    torch's count for "torch" (0 for a CPU build), else cuda-bindings' count, else torch's.
    Never raises: no binding, no driver, no device is 0."""
    if framework != "torch":
        try:
            return CudaBindingsApi().device_count()
        except Exception:  # not installed, no driver: ask torch
            pass
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return 0
    import torch

    return int(torch.cuda.device_count())
