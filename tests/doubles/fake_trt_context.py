"""TEST DOUBLE — not TensorRT: IExecutionContext (see fake_trt_engine.py for the rules)."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from .fake_trt_engine import (
    CALLS,
    LOG,
    Dims,
    ICudaEngine,
    IOutputAllocator,
    TensorLocation,
    device_memory,
    storage_dtype,
)


class IExecutionContext:
    def __init__(self, engine: ICudaEngine) -> None:
        self._engine = engine
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._addresses: dict[str, int] = {}
        self._allocators: dict[str, IOutputAllocator] = {}

    @property
    def engine(self) -> ICudaEngine:
        return self._engine

    def _info(self, name: str) -> dict[str, Any] | None:
        return self._engine._tensors.get(name)

    def set_input_shape(self, name: str, shape: Any) -> bool:
        info, shape = self._info(name), tuple(int(d) for d in shape)
        if info is None or info["mode"] != "input":
            LOG.append(f"IExecutionContext::setInputShape: Error Code 3: {name} is not an input")
            return False
        low, _, high = self._engine._header["profile"].get(name, [info["shape"]] * 3)
        fits = len(shape) == len(info["shape"]) and all(
            lo <= d <= hi for d, lo, hi in zip(shape, low, high, strict=True)
        )
        if not fits:
            LOG.append(
                f"IExecutionContext::setInputShape: Error Code 3: shape {shape} of {name} is "
                f"outside the optimization profile [{low}, {high}]"
            )
            return False
        self._shapes[name] = shape
        return True

    def set_tensor_address(self, name: str, memory: int) -> bool:
        if self._info(name) is None:
            LOG.append(f"IExecutionContext::setTensorAddress: Error Code 3: no tensor {name}")
            return False
        self._addresses[name] = int(memory)
        return True

    def get_tensor_address(self, name: str) -> int:
        return self._addresses.get(name, 0)

    def set_output_allocator(self, name: str, output_allocator: IOutputAllocator) -> bool:
        info = self._info(name)
        if info is None or info["mode"] != "output":
            return False
        self._allocators[name] = output_allocator
        return True

    def get_output_allocator(self, name: str) -> IOutputAllocator | None:
        return self._allocators.get(name)

    def get_tensor_shape(self, name: str) -> Dims:
        info = self._info(name)
        if info is None:
            return Dims()
        if info["mode"] == "input":
            return Dims(self._shapes.get(name, info["shape"]))
        return Dims(self._output_shapes().get(name, info["shape"]))

    def _output_shapes(self) -> dict[str, tuple[int, ...]]:
        """Shapes known from the input shapes (and shape-tensor values): -1 where data decides."""
        model = onnx.load_model_from_string(self._engine._model)
        for vi in model.graph.input:
            if vi.name in self._shapes:
                dims = vi.type.tensor_type.shape.dim
                for dim, size in zip(dims, self._shapes[vi.name], strict=True):
                    dim.Clear()
                    dim.dim_value = size
        for name, value in self._shape_values().items():
            model.graph.initializer.append(onnx.numpy_helper.from_array(value, name))
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
        shapes = {}
        for vi in [*inferred.graph.value_info, *inferred.graph.output]:
            dims = vi.type.tensor_type.shape.dim
            shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
        return shapes

    def _shape_values(self) -> dict[str, np.ndarray]:
        values = {}
        for name, info in self._engine._tensors.items():
            if info["shape_io"] and info["mode"] == "input" and name in self._addresses:
                shape = self._shapes.get(name, tuple(info["shape"]))
                values[name] = self._read(name, shape, TensorLocation.HOST)
        return values

    def _read(self, name: str, shape: tuple[int, ...], where: TensorLocation) -> np.ndarray:
        dtype = storage_dtype(self._engine.get_tensor_dtype(name))
        nbytes, pointer = int(np.prod(shape)) * dtype.itemsize, self._addresses[name]
        if where == TensorLocation.HOST:
            raw = np.frombuffer(ctypes.string_at(pointer, nbytes), dtype=np.uint8)
        else:
            raw = device_memory().memory[pointer][:nbytes]
        return raw.view(dtype).reshape(shape).copy()

    def _unusable(self) -> str | None:
        cuda = device_memory()
        for name, info in self._engine._tensors.items():
            static = all(d >= 0 for d in info["shape"])
            if info["mode"] == "input" and name not in self._shapes and not static:
                return f"input shape of {name} not set"
            if name in self._allocators:
                continue
            pointer = self._addresses.get(name)
            if pointer is None:
                return f"address of {name} not set"
            host = self._engine.get_tensor_location(name) == TensorLocation.HOST
            if host == (pointer in cuda.memory):
                return f"address of {name} is not {'host' if host else 'device'} memory"
        return None

    def execute_async_v3(self, stream_handle: int) -> bool:
        CALLS.append("trt.execute_async_v3")
        problem = self._unusable()
        if problem:
            LOG.append(f"IExecutionContext::enqueueV3: Error Code 3: {problem}")
            return False
        feed = {}
        for name, info in self._engine._tensors.items():
            if info["mode"] == "input":
                shape = self._shapes.get(name, tuple(info["shape"]))
                feed[name] = self._read(name, shape, self._engine.get_tensor_location(name))
        if self._engine._session is None:
            self._engine._session = ort.InferenceSession(
                self._engine._model, providers=["CPUExecutionProvider"]
            )
        outputs = [n for n, i in self._engine._tensors.items() if i["mode"] == "output"]
        values = self._engine._session.run(outputs, feed)
        return all(self._write(n, v, stream_handle) for n, v in zip(outputs, values, strict=True))

    def _write(self, name: str, value: np.ndarray, stream: int) -> bool:
        cuda, data = device_memory(), np.ascontiguousarray(value)
        allocator = self._allocators.get(name)
        if allocator is None:
            buffer = cuda.memory[self._addresses[name]]
            assert buffer.size >= data.nbytes, f"the runner's buffer for {name} is too small"
            cuda.copy_to_device(self._addresses[name], data, stream)
            return True
        current = self._addresses.get(name, 0)
        if "reallocate_output_async" in type(allocator).__dict__:
            args = (name, current, data.nbytes, 256, stream)
            pointer = allocator.reallocate_output_async(*args)  # type: ignore[attr-defined]
        else:
            pointer = allocator.reallocate_output(name, current, data.nbytes, 256)  # type: ignore[attr-defined]
        if not pointer:
            LOG.append(f"IExecutionContext::enqueueV3: Error Code 2: no memory for {name}")
            return False
        assert cuda.memory[pointer].size >= data.nbytes, f"allocator gave {name} too little"
        self._addresses[name] = int(pointer)
        cuda.copy_to_device(pointer, data, stream)
        allocator.notify_shape(name, Dims(data.shape))  # type: ignore[attr-defined]
        return True
