"""Loading ONNX models from a path, bytes or a ModelProto, with a digest and clear errors."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from ..errors import ModelLoadError

ModelSource = str | os.PathLike[str] | bytes | onnx.ModelProto


@dataclass(frozen=True)
class LoadedModel:
    """A model, where it came from (for messages) and a digest of its bytes (for caches)."""

    proto: onnx.ModelProto
    source: str
    digest: str
    path: Path | None  # set when loaded from a file (external data lives beside it)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path, data: bytes | None = None) -> str:
    """sha256 of a model file and of the external data files it names (the weights that
    torch.onnx.export writes beside `model.onnx`): a re-export with new weights and the same
    graph is another model."""
    data = path.read_bytes() if data is None else data
    digest = hashlib.sha256(data)
    for name in external_files(data):
        digest.update(b"\0" + name.encode())
        weights = path.parent / name
        digest.update(weights.read_bytes() if weights.is_file() else b"\0missing")
    return digest.hexdigest()


def external_files(data: bytes) -> list[str]:
    """The `location`s of a serialized model's externally stored tensors, sorted."""
    if b"location" not in data:  # a model with every tensor inline: no parse needed
        return []
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception:
        return []  # load_model names the unreadable file
    found: set[str] = set()
    graphs = [proto.graph]
    while graphs:
        graph = graphs.pop()
        tensors = list(graph.initializer)
        for node in graph.node:
            for attribute in node.attribute:
                tensors.extend([attribute.t] if attribute.HasField("t") else attribute.tensors)
                graphs.extend([attribute.g] if attribute.HasField("g") else attribute.graphs)
        for tensor in tensors:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                found.update(e.value for e in tensor.external_data if e.key == "location")
    return sorted(found)


def load_model(model: Any) -> LoadedModel:
    """Accept a path, serialized bytes or an onnx.ModelProto; errors name the file."""
    if isinstance(model, onnx.ModelProto):
        return LoadedModel(model, "<ModelProto>", _digest(model.SerializeToString()), None)
    if isinstance(model, (bytes, bytearray)):
        return LoadedModel(
            _parse(bytes(model), "<model bytes>"), "<model bytes>", _digest(bytes(model)), None
        )
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        if not path.is_file():
            shown = str(path) if path.is_absolute() else f"{path} (from {Path.cwd()})"
            raise ModelLoadError(f"model file {shown!r} does not exist")
        data = path.read_bytes()
        try:
            proto = onnx.load_model(str(path))  # resolves external data beside the file
        except Exception as exc:  # onnx raises DecodeError, OSError, ValueError ...
            raise ModelLoadError(
                f"model file {str(path)!r} is not a readable ONNX model "
                f"({type(exc).__name__}: {exc})"
            ) from None
        if not proto.graph.node and not proto.graph.output:
            raise ModelLoadError(f"model file {str(path)!r} holds no ONNX graph")
        return LoadedModel(proto, str(path), file_digest(path, data), path)
    raise ModelLoadError(
        f"model must be a path, bytes or onnx.ModelProto, got {type(model).__name__} (a "
        "framework's own model, such as a torch twin, goes in models={'torch': module})"
    )


def _parse(data: bytes, source: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:
        raise ModelLoadError(f"{source} is not a valid ONNX model ({exc})") from None
    if not proto.graph.node and not proto.graph.output:
        raise ModelLoadError(f"{source} holds no ONNX graph")
    return proto


def check_model(loaded: LoadedModel) -> None:
    """onnx.checker with the error naming the model."""
    try:
        onnx.checker.check_model(loaded.proto)
    except onnx.checker.ValidationError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(f"model {loaded.source} fails onnx.checker: {first}") from None
