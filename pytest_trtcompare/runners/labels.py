"""How log records and progress lines name a runner's model: a file by its name, an ONNX
model held in memory by its graph's name, a module by its class."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # onnx_model's dataclasses cost a torch runner's first use milliseconds
    from .onnx_model import LoadedModel


def model_label(name: str, model: Any) -> str:
    """The model given to runner `name` ('callable:mod:fn' names its function)."""
    if name.startswith("callable:"):
        return name.removeprefix("callable:")
    if isinstance(model, (str, os.PathLike)):
        return Path(model).name
    if isinstance(model, (bytes, bytearray)):
        return "<model bytes>"
    if type(model).__name__ == "ModelProto":
        graph = getattr(getattr(model, "graph", None), "name", "")
        return f"<ModelProto {graph}>" if graph else "<ModelProto>"
    return type(model).__name__ if model is not None else "<no model>"


def loaded_label(loaded: LoadedModel) -> str:
    """A loaded ONNX model: its file's name, else its graph's."""
    return loaded.path.name if loaded.path is not None else model_label("", loaded.proto)
