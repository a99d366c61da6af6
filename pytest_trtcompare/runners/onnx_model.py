"""Loading ONNX models from a path, bytes or a ModelProto, with a digest and clear errors.

A model file is read, parsed and hashed once per process for each (path, size, mtime) of it
and of the external data files beside it: the runners of one session share the parsed model
(`load_model`) and the session's runner cache its digest (`file_digest`). Nothing here
changes a loaded model: every runner that needs another copies it first.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ModelLoadError

if TYPE_CHECKING:  # onnx is imported on first use: the plugin's import stays light
    import onnx


@dataclass(frozen=True)
class LoadedModel:
    """A model, where it came from (for messages) and a digest of its bytes (for caches)."""

    proto: onnx.ModelProto
    source: str
    digest: str
    path: Path | None  # set when loaded from a file (external data lives beside it)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


#: A file's identity: resolved path, size and modification time in nanoseconds.
FileKey = tuple[str, int, int]


@dataclass
class _KnownFile:
    digest: str
    external: tuple[tuple[str, FileKey | None], ...]  # the weights beside it, as last seen
    loaded: LoadedModel | None = None  # the parsed model, while PARSED_BYTES allow
    problem: str | None = None  # why the bytes are no ONNX model


#: Files read in this process, the most recently used last (see _remember).
_FILES: OrderedDict[FileKey, _KnownFile] = OrderedDict()
#: Parsed models stay held, newest first, up to this many bytes of model files (the newest
#: always); digests are all kept.
PARSED_BYTES = 1 << 30


def _file_key(path: Path) -> FileKey | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return (str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def _remember(key: FileKey, known: _KnownFile) -> _KnownFile:
    _FILES[key] = known
    _FILES.move_to_end(key)
    held = 0
    for entry_key, entry in reversed(_FILES.items()):
        if entry.loaded is not None:
            held += entry_key[1]
            if held > PARSED_BYTES and entry is not known:
                entry.loaded = None
    return known


def _file(path: Path, key: FileKey) -> _KnownFile:
    """A model file, read once: parsed, hashed with the weights files it names."""
    known = _FILES.get(key)  # unless new weights beside an unchanged graph make another model
    if known is not None and all(_file_key(path.parent / n) == s for n, s in known.external):
        _FILES.move_to_end(key)
        return known
    import onnx

    data = path.read_bytes()
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError and others
        return _remember(key, _KnownFile(_digest(data), (), problem=f"{type(exc).__name__}: {exc}"))
    digest = hashlib.sha256(data)
    external = []
    for name in external_files(proto):
        digest.update(b"\0" + name.encode())
        weights = path.parent / name
        digest.update(weights.read_bytes() if weights.is_file() else b"\0missing")
        external.append((name, _file_key(weights)))
    known = _KnownFile(digest.hexdigest(), tuple(external))
    if not external:  # external weights are read into the model by onnx.load_model
        known.loaded = LoadedModel(proto, str(path), known.digest, path)
    return _remember(key, known)


def file_digest(path: Path) -> str:
    """sha256 of a model file and of the external data files it names (the weights that
    torch.onnx.export writes beside `model.onnx`): a re-export with new weights and the same
    graph is another model. Read once per (path, size, mtime) in a process."""
    key = _file_key(path)
    if key is None:
        raise ModelLoadError(f"model file {str(path)!r} does not exist")
    return _file(path, key).digest


def external_files(proto: onnx.ModelProto) -> list[str]:
    """The `location`s of a model's externally stored tensors, sorted."""
    import onnx

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
    import onnx

    if isinstance(model, onnx.ModelProto):
        return LoadedModel(model, "<ModelProto>", _digest(model.SerializeToString()), None)
    if isinstance(model, (bytes, bytearray)):
        proto = onnx.ModelProto()
        try:
            proto.ParseFromString(bytes(model))
        except Exception as exc:
            raise ModelLoadError(f"<model bytes> is not a valid ONNX model ({exc})") from None
        if not proto.graph.node and not proto.graph.output:
            raise ModelLoadError("<model bytes> holds no ONNX graph")
        return LoadedModel(proto, "<model bytes>", _digest(bytes(model)), None)
    if isinstance(model, (str, os.PathLike)):
        return _load_file(Path(model))
    raise ModelLoadError(
        f"model must be a path, bytes or onnx.ModelProto, got {type(model).__name__} (a "
        "framework's own model, such as a torch twin, goes in models={'torch': module})"
    )


def _load_file(path: Path) -> LoadedModel:
    """The file's model, read once per (path, size, mtime) while PARSED_BYTES allow."""
    import onnx

    key = _file_key(path) if path.is_file() else None
    if key is None:
        where = "" if path.is_absolute() else f" (relative to the working directory {Path.cwd()})"
        raise ModelLoadError(f"model file {str(path)!r} does not exist{where}")
    known = _file(path, key)
    if known.problem is not None:
        raise ModelLoadError(
            f"model file {str(path)!r} is not a readable ONNX model ({known.problem})"
        )
    if known.loaded is None:
        try:
            proto = onnx.load_model(str(path))  # resolves external data beside the file
        except Exception as exc:  # onnx raises DecodeError, OSError, ValueError ...
            raise ModelLoadError(
                f"model file {str(path)!r} is not a readable ONNX model "
                f"({type(exc).__name__}: {exc})"
            ) from None
        known.loaded = LoadedModel(proto, str(path), known.digest, path)
        _remember(key, known)
    loaded = known.loaded
    if not loaded.proto.graph.node and not loaded.proto.graph.output:
        raise ModelLoadError(f"model file {str(path)!r} holds no ONNX graph")
    return (
        loaded
        if loaded.source == str(path)
        else dataclasses.replace(loaded, source=str(path), path=path)
    )
