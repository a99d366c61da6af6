"""Running a TensorRT engine: numpy types, bindings, data-dependent outputs, copies.

- Every set_input_shape / set_tensor_address result is checked; a refusal names the tensor,
  the shape and the optimization profile.
- An output whose shape the context reports with -1 (data-dependent, e.g. NonZero) gets its
  memory from an IOutputAllocator, which also learns its shape (as Polygraphy's TrtRunner does).
- Shape tensors live in host memory (TensorLocation.HOST): their address is a numpy array's.
- Only the outputs asked for are handed out; the rest stay on the device (a per-layer
  comparison asks for a group of tensors at a time). Where torch sees CUDA (`torch_outputs`)
  they are handed out as torch tensors over their own device memory, which each tensor then
  owns (an allocator's buffer too: the allocator makes a new one for the next run), so they
  are compared on the GPU; else they are copied to host arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import FeedError, FrameworkUnavailable, PrecisionUnsupported
from .cuda import CudaApi

TRT_TO_NUMPY = {
    "FLOAT": np.float32,
    "HALF": np.float16,
    "INT8": np.int8,
    "INT32": np.int32,
    "INT64": np.int64,
    "BOOL": np.bool_,
    "UINT8": np.uint8,
}
TRT_TO_ML_DTYPES = {"BF16": "bfloat16", "FP8": "float8_e4m3fn"}  # TensorRT's FP8 is E4M3
TRT_REFUSED = {
    "INT4": "4-bit integers, packed two per byte",
    "FP4": "4-bit floats (E2M1), packed two per byte",
    "E8M0": "8-bit power-of-two scales",
}


def numpy_dtype(trt_dtype: Any, tensor: str) -> np.dtype:
    """The numpy dtype of a TensorRT I/O tensor; PrecisionUnsupported where none can hold it."""
    name = str(getattr(trt_dtype, "name", trt_dtype))
    if name in TRT_TO_NUMPY:
        return np.dtype(TRT_TO_NUMPY[name])
    if name in TRT_TO_ML_DTYPES:
        try:
            import ml_dtypes
        except ImportError:
            raise FrameworkUnavailable(
                f"TensorRT tensor {tensor!r} is DataType.{name}: pip install ml_dtypes"
            ) from None
        dtype: np.dtype = np.dtype(getattr(ml_dtypes, TRT_TO_ML_DTYPES[name]))
        return dtype
    what = TRT_REFUSED.get(name, "no numpy equivalent")
    raise PrecisionUnsupported(
        f"TensorRT tensor {tensor!r} is DataType.{name} ({what}), which pytest-trtcompare "
        f"cannot exchange as a numpy array: keep {name} inside the network (Q/DQ) and give "
        "it float inputs and outputs"
    )


def make_output_allocator(trt: Any, cuda: CudaApi) -> Any:
    """An IOutputAllocator subclass instance that keeps one growing device buffer per output."""

    class OutputAllocator(trt.IOutputAllocator):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.IOutputAllocator.__init__(self)
            self.buffers: dict[str, tuple[int, int]] = {}  # name -> (pointer, size)
            self.shapes: dict[str, tuple[int, ...]] = {}

        def reallocate_output(
            self, tensor_name: str, memory: int, size: int, alignment: int
        ) -> int:
            pointer, capacity = self.buffers.get(tensor_name, (0, -1))
            if size <= capacity:
                return pointer
            try:  # TensorRT calls this from C++: return nullptr rather than raise
                if pointer:
                    cuda.free(pointer)
                    del self.buffers[tensor_name]
                pointer = cuda.malloc(max(1, size))
            except RuntimeError:
                return 0
            self.buffers[tensor_name] = (pointer, max(1, size))
            return pointer

        def reallocate_output_async(
            self, tensor_name: str, memory: int, size: int, alignment: int, stream: int
        ) -> int:
            return self.reallocate_output(tensor_name, memory, size, alignment)

        def notify_shape(self, tensor_name: str, shape: Any) -> None:
            self.shapes[tensor_name] = _dims(shape)

        def free(self) -> None:
            for pointer, _ in self.buffers.values():
                cuda.free(pointer)
            self.buffers.clear()

    return OutputAllocator()


def _dims(dims: Any) -> tuple[int, ...]:
    """A tuple from trt.Dims (which has __len__ and __getitem__, but no __eq__)."""
    return tuple(int(dims[i]) for i in range(len(dims)))


class EngineIO:
    """The bindings of one execution context, refusing unsupported I/O types up front."""

    def __init__(self, trt: Any, cuda: CudaApi, engine: Any, context: Any, stream: int) -> None:
        self.cuda, self.engine, self.context, self.stream = cuda, engine, context, stream
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        is_input = {n: engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT for n in names}
        self.inputs = [n for n in names if is_input[n]]
        self.outputs = [n for n in names if not is_input[n]]
        self.dtypes = {n: numpy_dtype(engine.get_tensor_dtype(n), n) for n in names}
        host = trt.TensorLocation.HOST
        self.on_host = {n: engine.get_tensor_location(n) == host for n in names}
        self.allocator = make_output_allocator(trt, cuda)
        self.allocated: set[str] = set()  # outputs whose memory the allocator provides
        self.torch_outputs = cuda.torch_tensors()

    def run(self, feed: Mapping[str, Any], wanted: Sequence[str]) -> dict[str, Any]:
        cuda, context, stream = self.cuda, self.context, self.stream
        pointers: list[int] = []
        host_arrays: list[np.ndarray] = []  # host memory TensorRT reads: kept alive until done
        try:
            for name in self.inputs:
                # astype, not ascontiguousarray: that makes scalars 1-d
                array = np.asarray(feed[name]).astype(self.dtypes[name], order="C")
                if not context.set_input_shape(name, array.shape):
                    raise FeedError(self._shape_refused(name, array.shape))
                if self.on_host[name]:
                    host_arrays.append(array)
                    pointer = array.ctypes.data
                else:
                    pointer = cuda.malloc(array.nbytes)
                    pointers.append(pointer)
                    cuda.copy_to_device(pointer, array, stream)
                self._set_address(name, pointer, array.shape)
            hosts: dict[str, np.ndarray] = {}  # outputs TensorRT writes to host memory
            devices: dict[str, tuple[int, tuple[int, ...]]] = {}  # asked for, on the device
            asked = set(wanted)
            for name in self.outputs:
                shape = _dims(context.get_tensor_shape(name))
                if name in self.allocated or any(d < 0 for d in shape):
                    self._use_allocator(name)
                    continue
                dtype = self.dtypes[name]
                if self.on_host[name]:
                    hosts[name] = np.empty(shape, dtype=dtype)
                    pointer = hosts[name].ctypes.data
                else:  # every output needs device memory
                    pointer = cuda.malloc(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
                    pointers.append(pointer)
                    if name in asked:
                        devices[name] = (pointer, shape)
                self._set_address(name, pointer, shape)
            if not context.execute_async_v3(stream):
                raise RuntimeError("TensorRT execute_async_v3 failed (see the TensorRT log above)")
            for name in self.allocated.intersection(wanted):
                devices[name] = (self.allocator.buffers[name][0], self.allocator.shapes[name])
            if self.torch_outputs:
                cuda.synchronize(stream)
                return {
                    name: hosts[name] if name in hosts else self._adopt(name, pointers, devices)
                    for name in wanted
                }
            for name, (pointer, shape) in devices.items():
                hosts[name] = np.empty(shape, self.dtypes[name])
                cuda.copy_to_host(hosts[name], pointer, stream)
            cuda.synchronize(stream)
            return {name: hosts[name] for name in wanted}
        finally:
            for pointer in pointers:
                cuda.free(pointer)

    def _adopt(
        self, name: str, pointers: list[int], devices: dict[str, tuple[int, tuple[int, ...]]]
    ) -> Any:
        """Output `name` as a torch tensor that owns its device memory, which is no longer
        the run's to free (nor the allocator's: it makes a new buffer for the next run)."""
        pointer, shape = devices[name]
        if name in self.allocated:
            del self.allocator.buffers[name]
        else:
            pointers.remove(pointer)
        return self.cuda.as_torch(pointer, shape, self.dtypes[name])

    def _use_allocator(self, name: str) -> None:
        if name not in self.allocated:
            if not self.context.set_output_allocator(name, self.allocator):
                raise RuntimeError(f"TensorRT refuses an output allocator for output {name!r}")
            self.allocated.add(name)

    def _set_address(self, name: str, pointer: int, shape: Sequence[int]) -> None:
        if not self.context.set_tensor_address(name, pointer):
            raise RuntimeError(
                f"TensorRT refuses the address of tensor {name!r} (shape {tuple(shape)}, "
                "optimization profile 0; see the TensorRT log above)"
            )

    def _shape_refused(self, name: str, shape: Sequence[int]) -> str:
        bounds = [_dims(d) for d in self.engine.get_tensor_profile_shape(name, 0)]
        allowed = (
            f"optimization profile 0 allows {bounds[0]} to {bounds[-1]}"
            if bounds
            else f"the engine's shape is {_dims(self.engine.get_tensor_shape(name))}"
        )
        return f"TensorRT rejects shape {tuple(shape)} for input {name!r}: {allowed}"

    def close(self) -> None:
        self.allocator.free()
