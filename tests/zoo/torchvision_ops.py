"""Make `import torchvision` work where its compiled ops cannot load, and give the detection
models the two ops they run, in pure torch.

The torchvision wheel on the package index is a CUDA build; beside the CPU build of torch
2.13.0 that the dev extra pins, its `_C` library does not load, and `import torchvision` then
fails in `torchvision/_meta_registrations.py` with `operator torchvision::nms does not exist`
(transformers and timm import torchvision too). The classifiers and text models need none of
those ops, so where the library does not load we declare the op schemas that module
registers fake kernels for; calling them still fails ("Couldn't load custom C++ ops").

Faster R-CNN runs `nms` and `roi_align`: `detection_ops()` gives those two CPU kernels of
pure torch (torchvision's own reference `_roi_align`, transcribed from its CUDA kernel, and
a greedy NMS checked against the definition in tests/zoo/test_detection.py) and lets
torchvision call them, so the model runs and exports (the legacy exporter's symbolics turn
them into ONNX NonMaxSuppression and RoiAlign) as it would with the compiled library. Where
torchvision's library loads (a matching torch, a GPU machine), all of this does nothing.

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
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
    "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
)
_LIBRARY: list[Any] = []  # kept alive: the schemas live as long as the Library object
_KERNELS: list[Any] = []  # the same for detection_ops' kernels


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


def nms(dets: Any, scores: Any, iou_threshold: float) -> Any:
    """Greedy non-maximum suppression, as torchvision's CPU kernel: boxes by falling score
    (ties in index order), each kept unless a kept box overlaps it by IoU > threshold."""
    import torch

    order = torch.argsort(scores, descending=True, stable=True)
    x1, y1, x2, y2 = dets[order].unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    suppressed = torch.zeros(len(order), dtype=torch.bool)
    keep = []
    for i in range(len(order)):
        if suppressed[i]:
            continue
        keep.append(i)
        width = (torch.minimum(x2[i], x2) - torch.maximum(x1[i], x1)).clamp(min=0)
        height = (torch.minimum(y2[i], y2) - torch.maximum(y1[i], y1)).clamp(min=0)
        overlap = width * height
        suppressed |= overlap / (areas[i] + areas - overlap) > iou_threshold
    return order[torch.tensor(keep, dtype=torch.int64)]


def _ops_loaded() -> None:
    """torchvision's `_assert_has_ops`, once our kernels stand in (scriptable: a def)."""
    return None


def detection_ops() -> None:
    """Where torchvision's compiled ops are missing: CPU kernels of pure torch for `nms` and
    `roi_align`, and torchvision's ops modules told they may call them. Idempotent."""
    import importlib

    import torch
    import torchvision.extension

    if torchvision.extension._has_ops() or _KERNELS:
        return
    boxes = importlib.import_module("torchvision.ops.boxes")
    align = importlib.import_module("torchvision.ops.roi_align")  # the package's name is a function
    kernels = torch.library.Library("torchvision", "IMPL")
    kernels.impl("nms", nms, "CPU")
    kernels.impl("roi_align", align._roi_align.__wrapped__, "CPU")
    _KERNELS.append(kernels)
    boxes._assert_has_ops = _ops_loaded
    align._assert_has_ops = _ops_loaded
    align._has_ops = lambda: True
