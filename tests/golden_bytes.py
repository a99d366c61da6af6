"""Building damaged and old-format goldens byte by byte, for the integrity tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import xxhash

from pytest_trtcompare.goldens.format import ALIGN, MAGIC, MAGIC_V1


def split(data: bytes) -> tuple[dict[str, Any], bytes]:
    """(header document, body from the first tensor on) of a format-2 golden."""
    length = int(data[len(MAGIC) : len(MAGIC) + 16])
    start = len(MAGIC) + 34
    document = json.loads(data[start : start + length])
    body_start = -(-(start + length) // ALIGN) * ALIGN
    return document, data[body_start:]


def join(document: dict[str, Any], body: bytes, version: int = 2, fix: bool = True) -> bytes:
    """A golden with this header (a valid checksum, as a tool that rewrote it would leave) and
    body; `fix` re-lays the offsets for the new header length."""
    magic = MAGIC if version == 2 else MAGIC_V1
    prefix_size = len(magic) + (34 if version == 2 else 17)
    header = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    if fix:
        for _ in range(3):
            offset = -(-(prefix_size + len(header)) // ALIGN) * ALIGN
            for tensor in document["tensors"]:
                if isinstance(tensor, dict) and isinstance(tensor.get("nbytes"), int):
                    tensor["offset"] = offset
                    offset += -(-tensor["nbytes"] // ALIGN) * ALIGN
            header = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    if version == 2:
        line = b"%016d %s\n" % (len(header), xxhash.xxh3_64_hexdigest(header).encode())
    else:
        line = b"%016d\n" % len(header)
    used = len(magic) + len(line) + len(header)
    return magic + line + header + b"\0" * (-used % ALIGN) + body


def rewrite(path: Path, change: Callable[[dict[str, Any]], Any], version: int = 2) -> None:
    """Apply `change` to the header document of the golden at `path`, keeping its body."""
    document, body = split(path.read_bytes())
    change(document)
    if version == 1:
        document["format"] = 1
        for tensor in document["tensors"]:
            tensor.pop("xxh3", None)
    path.write_bytes(join(document, body, version))


def as_format_1(path: Path) -> None:
    """Turn a golden into the 0.1.0 format (no checksums), same data."""
    rewrite(path, lambda document: None, version=1)
