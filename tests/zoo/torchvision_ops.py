"""Make `import torchvision` work where its compiled ops cannot load.

The torchvision wheel on the package index is a CUDA build; beside the CPU build of torch
2.13.0 that the dev extra pins, its `_C` library does not load, and `import torchvision` then
fails in `torchvision/_meta_registrations.py` with `operator torchvision::nms does not exist`
(transformers and timm import torchvision too). The model definitions we use (resnet18,
mobilenet_v3_small, timm's ViT, Hugging Face text models) need none of those ops, so where
the library does not load we declare the two op schemas that module registers fake kernels
for. Calling the ops still fails ("Couldn't load custom C++ ops"): nothing is faked that a
test could use. Where torchvision's library loads (a matching torch, a GPU machine), this
does nothing.

`install()` hooks the first `import torchvision` of this process; a process we spawn gets it
through `sitecustomize` (see `site/`), so an isolated runner's worker can unpickle a model.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from typing import Any

_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
_LIBRARY: list[Any] = []  # kept alive: the schemas live as long as the Library object


def _declare_missing_ops(location: str) -> None:
    import torch

    library = next(Path(location).glob("_C*.so"), None)
    try:
        if library is None:
            raise OSError("no torchvision/_C library")
        torch.ops.load_library(str(library))
        return  # the real ops load: nothing to do
    except (OSError, RuntimeError):
        pass
    declared = torch.library.Library("torchvision", "FRAGMENT")
    for schema in _SCHEMAS:
        with contextlib.suppress(RuntimeError):  # declared already (another copy did it)
            declared.define(schema)
    _LIBRARY.append(declared)


class _TorchvisionFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            _declare_missing_ops(next(iter(spec.submodule_search_locations)))
        return spec


def install() -> None:
    """Declare the ops before the first `import torchvision`, only if their library fails."""
    installed = any(type(f).__name__ == "_TorchvisionFinder" for f in sys.meta_path)
    if "torchvision" in sys.modules or installed:
        return
    sys.meta_path.insert(0, _TorchvisionFinder())
