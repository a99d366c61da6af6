"""Building damaged and old-format goldens byte by byte, for the integrity tests."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from pytest_trtcompare.goldens import legacy
from pytest_trtcompare.goldens.format import HEADER_SUM, OURS, canonical
from pytest_trtcompare.goldens.store import read_golden


def split(data: bytes) -> tuple[dict[str, Any], bytes]:
    """(header document, the tensors' data) of a safetensors golden."""
    (length,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + length]), data[8 + length :]


def join(document: dict[str, Any], body: bytes, fix: bool = True) -> bytes:
    """A golden with this header and body; `fix` gives it a valid header checksum, as a tool
    that rewrote the header would leave it."""
    if fix:
        metadata = document["__metadata__"]
        metadata.pop(HEADER_SUM, None)
        metadata[HEADER_SUM] = xxhash.xxh3_64_hexdigest(canonical(document))
    header = canonical(document)
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + body


def rewrite(path: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    """Apply `change` to the header document of the golden at `path`, keeping its body."""
    document, body = split(path.read_bytes())
    change(document)
    path.write_bytes(join(document, body))


def ours(change: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], None]:
    """A header change that applies `change` to our JSON entry ({"format", "meta", ...})."""

    def apply(document: dict[str, Any]) -> None:
        entry = json.loads(document["__metadata__"][OURS])
        change(entry)
        document["__metadata__"][OURS] = canonical(entry).decode()

    return apply


def legacy_bytes(outputs: dict[str, Any], inputs: dict[str, Any], meta: dict[str, Any]) -> bytes:
    """A format-2 `.golden` as every version from 0.1.1 to the safetensors goldens wrote it."""
    entries = [
        (group, name, np.ascontiguousarray(array))
        for group, arrays in (("outputs", outputs), ("inputs", inputs))
        for name, array in arrays.items()
    ]
    data = legacy.encode_header(entries, meta)
    for _, _, array in entries:
        data += array.tobytes() + b"\0" * (-array.nbytes % legacy.ALIGN)
    return data


def as_format_2(path: Path) -> Path:
    """Turn a `.safetensors` golden into the `.golden` of format 2 beside it, same data; the
    `.safetensors` file is removed. Returns the `.golden` path."""
    golden = read_golden(path)
    old = path.with_name(path.name.removesuffix(".safetensors") + ".golden")
    old.write_bytes(legacy_bytes(golden.outputs, golden.inputs, golden.meta))
    path.unlink()
    return old


def legacy_split(data: bytes) -> tuple[dict[str, Any], bytes]:
    """(header document, body from the first tensor on) of a format-2 golden."""
    length = int(data[len(legacy.MAGIC) : len(legacy.MAGIC) + 16])
    start = len(legacy.MAGIC) + 34
    document = json.loads(data[start : start + length])
    return document, data[legacy.aligned(start + length) :]


def legacy_join(document: dict[str, Any], body: bytes, version: int = 2) -> bytes:
    """A format-2 (or 1) golden with this header (a valid checksum) and body; the offsets are
    re-laid for the new header length."""
    magic = legacy.MAGIC if version == 2 else legacy.MAGIC_V1
    prefix_size = len(magic) + (34 if version == 2 else 17)
    header = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    for _ in range(3):
        offset = legacy.aligned(prefix_size + len(header))
        for tensor in document["tensors"]:
            if isinstance(tensor, dict) and isinstance(tensor.get("nbytes"), int):
                tensor["offset"] = offset
                offset += legacy.aligned(tensor["nbytes"])
        header = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    if version == 2:
        line = b"%016d %s\n" % (len(header), xxhash.xxh3_64_hexdigest(header).encode())
    else:
        line = b"%016d\n" % len(header)
    used = len(magic) + len(line) + len(header)
    return magic + line + header + b"\0" * (-used % legacy.ALIGN) + body


def rewrite_legacy(path: Path, change: Callable[[dict[str, Any]], Any], version: int = 2) -> None:
    """Apply `change` to the header of a format-2 `.golden`, keeping its body; version=1
    makes it a 0.1.0 golden (no checksums)."""
    document, body = legacy_split(path.read_bytes())
    change(document)
    if version == 1:
        document["format"] = 1
        for tensor in document["tensors"]:
            if isinstance(tensor, dict):
                tensor.pop("xxh3", None)
    path.write_bytes(legacy_join(document, body, version))


def as_format_1(path: Path) -> Path:
    """Turn a golden (.safetensors or format-2 .golden) into the 0.1.0 format (no checksums)
    at the `.golden` path, same data. Returns that path."""
    if path.name.endswith(".safetensors"):
        path = as_format_2(path)
    rewrite_legacy(path, lambda document: None, version=1)
    return path


DEEP = 100_000  # levels of nesting: past json's recursion limit on every Python we support


def deep_json(levels: int = DEEP) -> str:
    return "[" * levels + "]" * levels


def with_deep_header(data: bytes) -> bytes:
    """A safetensors golden whose header nests a value DEEP levels down (no checksum is
    reached: the JSON itself is what a reader must survive)."""
    (length,) = struct.unpack("<Q", data[:8])
    header = ('{"__metadata__":{"a":' + deep_json() + "}}").encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data[8 + length :]


def legacy_with_deep_header(data: bytes) -> bytes:
    """A format-2 golden whose header (with a valid checksum) nests DEEP levels down."""
    _, body = legacy_split(data)
    header = ('{"format":2,"meta":' + deep_json() + ',"tensors":[]}').encode()
    line = b"%016d %s\n" % (len(header), xxhash.xxh3_64_hexdigest(header).encode())
    used = len(legacy.MAGIC) + len(line) + len(header)
    return legacy.MAGIC + line + header + b"\0" * (-used % legacy.ALIGN) + body
