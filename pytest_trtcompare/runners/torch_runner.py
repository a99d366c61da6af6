"""PyTorch runner: nn.Module, TorchScript, ExportedProgram or a plain function.

fp16 / bf16 are real: a copy of the module is cast with `.to(dtype)` and float inputs are
cast too (not autocast, which keeps many ops in float32). tf32 is CUDA only; fp32 on CUDA
runs with TF32 switched off for the call.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import FeedError, FrameworkUnavailable, PrecisionUnsupported
from .base import Runner, TensorSpec, specs_from

_DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise FrameworkUnavailable(
            "torch is not installed: pip install pytest-trtcompare[torch]"
        ) from None
    return torch


class TorchRunner(Runner):
    framework = "torch"
    precisions = ("fp32", "tf32", "fp16", "bf16")

    def __init__(
        self,
        model: Any,
        precision: str = "fp32",
        *,
        input_names: Sequence[str] | None = None,
        output_names: Sequence[str] | None = None,
        device: str = "cpu",
        input_specs: Any = None,
    ) -> None:
        super().__init__(precision)
        torch = import_torch()
        self.torch = torch
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise FrameworkUnavailable(
                f"torch {torch.__version__} sees no CUDA device for {device!r}"
            )
        if precision == "tf32" and not device.startswith("cuda"):
            raise PrecisionUnsupported("tf32 is a CUDA matmul mode; the torch runner is on CPU")
        self.device = torch.device(device)
        self.dtype = getattr(torch, _DTYPES[precision])
        self.module = self._prepare(model)
        self._input_names = list(input_names) if input_names else self._signature_names()
        self._output_names = list(output_names) if output_names else None
        given = specs_from(input_specs)
        self._specs = given or [TensorSpec(name, "float32", None) for name in self._input_names]
        self.checks_feed = True

    def _prepare(self, model: Any) -> Any:
        torch = self.torch
        exported_type: Any = getattr(getattr(torch, "export", None), "ExportedProgram", None)
        if exported_type is not None and isinstance(model, exported_type):
            model = model.module()
        if isinstance(model, torch.nn.Module):
            module = copy.deepcopy(model)  # never change the user's module
            module = module.to(device=self.device, dtype=self.dtype)
            module.eval()
            return module
        if callable(model):
            return model  # a function: its inputs are cast, its weights are its own business
        raise FeedError(
            "torch runner needs an nn.Module, ExportedProgram or callable, "
            f"got {type(model).__name__}"
        )

    def _signature_names(self) -> list[str]:
        target = (
            self.module.forward if isinstance(self.module, self.torch.nn.Module) else self.module
        )
        try:
            parameters = inspect.signature(target).parameters.values()
        except (TypeError, ValueError):
            return ["input"]
        names = [
            p.name
            for p in parameters
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"
        ]
        return names or ["input"]

    def input_specs(self) -> list[TensorSpec]:
        return list(self._specs)

    def output_names(self) -> list[str]:
        return list(self._output_names or [])

    @contextlib.contextmanager
    def _matmul_mode(self) -> Iterator[None]:
        backends = self.torch.backends
        if self.device.type != "cuda":
            yield
            return
        saved = (backends.cuda.matmul.allow_tf32, backends.cudnn.allow_tf32)
        tf32 = self.precision == "tf32"
        backends.cuda.matmul.allow_tf32 = backends.cudnn.allow_tf32 = tf32
        try:
            yield
        finally:
            backends.cuda.matmul.allow_tf32, backends.cudnn.allow_tf32 = saved

    def _to_tensor(self, array: np.ndarray) -> Any:
        if not array.flags.writeable or not array.flags.c_contiguous:
            array = np.array(array, copy=True, order="C")  # torch wants its own, writable memory
        tensor = self.torch.from_numpy(array).to(self.device)
        return tensor.to(self.dtype) if tensor.is_floating_point() else tensor

    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        args = [self._to_tensor(feed[name]) for name in self._input_names]
        with self.torch.inference_mode(), self._matmul_mode():
            result = self.module(*args)
        return self._name_outputs(result)

    def _name_outputs(self, result: Any) -> dict[str, np.ndarray]:
        if isinstance(result, Mapping):
            named = dict(result)
        else:
            values = list(result) if isinstance(result, (tuple, list)) else [result]
            names = self._output_names or (
                ["output"] if len(values) == 1 else [f"output_{i}" for i in range(len(values))]
            )
            if len(names) != len(values):
                raise FeedError(
                    f"torch runner: output_names={names}, but the module returned "
                    f"{len(values)} tensors"
                )
            named = dict(zip(names, values, strict=True))
        return {str(name): self._to_numpy(value) for name, value in named.items()}

    def _to_numpy(self, tensor: Any) -> np.ndarray:
        tensor = tensor.detach().cpu()
        if tensor.dtype == self.torch.bfloat16:
            try:
                import ml_dtypes

                bits = tensor.view(self.torch.int16).numpy().copy()
                return np.asarray(bits.view(ml_dtypes.bfloat16))
            except ImportError:
                return np.asarray(tensor.float().numpy())
        return np.array(tensor.numpy(), copy=True)

    def describe(self) -> dict[str, Any]:
        route = {
            "fp32": "float32 weights and inputs"
            + (", TF32 off" if self.device.type == "cuda" else ""),
            "tf32": "float32 weights and inputs, TF32 matmul on",
            "fp16": "module.to(float16), float inputs cast to float16",
            "bf16": "module.to(bfloat16), float inputs cast to bfloat16",
        }[self.precision]
        return {
            **super().describe(),
            "version": self.torch.__version__,
            "device": str(self.device),
            "precision_route": route,
        }
