"""Every submodule's output of a torch model (`outputs="all"`), through forward hooks.

A module's output is named by its qualified name (`layer1.0.conv1`); a module called more
than once in one forward gets `#2`, `#3` ... for its later calls (`layer1.0.relu#2`); a module
that returns several tensors gives `<name>:<leaf>` as torch_outputs.py names the leaves
(`backbone.body:0` for the dict {'0': ...} a detection backbone returns: a `.` would make it
the name of the submodule `backbone.body.0`); one tensor in a tuple or a `ModelOutput` is the
module's output. Hooks live
only while a forward runs, so the model is left as it was. Values are copied to the host the
moment the module returns, so an in-place op later in the forward cannot change them.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..errors import ModelLoadError
from .base import Layer
from .torch_outputs import flatten_outputs, to_numpy


class ModuleTaps:
    def __init__(self, module: Any) -> None:
        import torch

        if not isinstance(module, torch.nn.Module):
            raise ModelLoadError(
                "torch runner: outputs='all' needs an nn.Module (its submodules are the layers); "
                f"got {type(module).__name__}"
            )
        if isinstance(module, torch.jit.ScriptModule):
            raise ModelLoadError(
                "torch runner: outputs='all' reads each submodule's output through forward "
                f"hooks, which torch does not run on a TorchScript module ({type(module).__name__}"
                "); give the eager module, the one before torch.jit.script or torch.jit.trace"
            )
        self._modules = [(name, child) for name, child in module.named_modules() if name]
        self._taps: list[Layer] = []  # the recorded outputs, in call order
        self._taken: dict[str, np.ndarray] = {}

    @contextlib.contextmanager
    def recording(self, wanted: set[str] | None) -> Iterator[None]:
        """Within the block, a forward records every submodule's output: its Layer always
        (named by module path, '#k' for later calls, ':leaf' for tuples), its values when
        `wanted` is None or names it."""
        calls: Counter[str] = Counter()
        self._taps, self._taken = [], {}

        def hook(path: str, module: Any, output: Any) -> None:
            call = calls[path]
            calls[path] += 1
            base = path if call == 0 else f"{path}#{call + 1}"
            try:
                leaves = flatten_outputs(output, path)
            except Exception:  # a module returning something odd is simply not a layer
                return
            single = len(leaves) == 1  # a tensor, or a tuple or ModelOutput of one
            for leaf, value in leaves:
                name = base if single else f"{base}:{leaf.removeprefix('output_')}"
                if not hasattr(value, "dtype"):
                    continue
                dtype = str(value.dtype).removeprefix("torch.")
                shape = tuple(getattr(value, "shape", ()))
                self._taps.append(Layer(name, path, type(module).__name__, dtype, shape=shape))
                if wanted is None or name in wanted:
                    self._taken[name] = to_numpy(value)

        handles = [
            child.register_forward_hook(
                lambda module, _inputs, output, path=path: hook(path, module, output)
            )
            for path, child in self._modules
        ]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    def taken(self) -> dict[str, np.ndarray]:
        taken, self._taken = self._taken, {}
        return taken

    def layers(self, outputs: list[tuple[str, Any]], model_outputs: list[str]) -> list[Layer]:
        """The recorded outputs in call order, then the model's own outputs."""
        found = list(self._taps)
        for name, value in outputs:
            if name in model_outputs:
                dtype = str(getattr(value, "dtype", "float32")).removeprefix("torch.")
                shape = tuple(getattr(value, "shape", ()))
                found.append(Layer(name, name, "", dtype, model_output=True, shape=shape))
        return found
