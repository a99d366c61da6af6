"""The legacy `.golden` byte formats 1 and 2 (0.1.0 up to the safetensors goldens): still
read (format.read_tensors reads their tensors), and written only by the benchmark and the
tests that prove they are read. No pytest, no paths.

Format 2:

    b"PYTEST-TRTCOMPARE-GOLDEN-2\\n"          magic (27 bytes)
    b"%016d %016x\\n"                          header length, xxh3-64 of the header bytes
    JSON header, sorted keys, no spaces: {"format": 2, "meta": {...}, "tensors": [
        {"group": "outputs" | "inputs", "name", "dtype", "shape", "offset", "nbytes",
         "xxh3": 16 hex digits of the tensor's bytes}, ...]}
    zero padding, then each tensor's C-order little-endian bytes at its 64-byte aligned
    offset, zero padding after each; the file ends with the last tensor's padding.

Every byte is covered: the magic and prefix by their syntax, the header by its checksum, each
tensor by its own, every padding byte by being zero, the end by the size. Format 1 (0.1.0:
magic `PYTEST-TRTCOMPARE-GOLDEN\\n`, prefix `%016d\\n`, no checksums) still loads.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xxhash

from ..engine import dtype_from_name
from ..errors import TrtCompareError

MAGIC = b"PYTEST-TRTCOMPARE-GOLDEN-2\n"
MAGIC_V1 = b"PYTEST-TRTCOMPARE-GOLDEN\n"
FORMAT_VERSION = 2
ALIGN = 64
GROUPS = ("outputs", "inputs")
ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
_PREFIX = re.compile(rb"^(\d{16}) ([0-9a-f]{16})\n$")
_PREFIX_V1 = re.compile(rb"^(\d{16})\n$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_TENSOR_KEYS = {"group", "name", "dtype", "shape", "offset", "nbytes"}
_MAX_RANK = 64
HASH_CHUNK = 16 << 20  # bytes hashed (and compared) at a time


#: How deep a golden's JSON may nest: what we write nests a few levels (meta's runner
#: descriptions); deeper JSON is not ours, and Python's json would hit its recursion limit.
MAX_DEPTH = 32


def parse_json(data: bytes | str) -> Any:
    """A header's JSON document; ValueError saying what is wrong with it: 'is not JSON' or
    'nests deeper than 32 levels' (json.loads raises RecursionError on deep enough text)."""
    try:
        document = json.loads(data)
    except ValueError:  # UnicodeDecodeError included
        raise ValueError("is not JSON") from None
    except RecursionError:
        document = None
    else:
        if nesting(document) <= MAX_DEPTH:
            return document
    raise ValueError(f"nests deeper than {MAX_DEPTH} levels")


def nesting(document: Any) -> int:
    """How many levels of lists and objects `document` has (0 for a scalar), without
    recursion."""
    deepest, pending = 0, [(document, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, depth + 1)
            pending.extend((child, depth + 1) for child in value)
    return deepest


class GoldenError(TrtCompareError, ValueError):
    """A golden file is missing, truncated, corrupt, or would hold something it must not."""


class ForeignSafetensorsError(GoldenError):
    """A safetensors file that is not a golden (no metadata of ours): saved outputs to read
    with safetensors itself, not a damaged golden."""


@dataclass(frozen=True)
class Header:
    """A golden's header, checked (any format): meta, the tensor table in golden order, where
    the body starts, how many input iterations it holds (formats 1 and 2: one).

    Each tensor: {"group", "name", "dtype" (numpy name), "shape", "offset" (in the file),
    "nbytes", "xxh3"}."""

    version: int
    meta: dict[str, Any]
    tensors: list[dict[str, Any]]
    body_start: int
    dtypes: list[np.dtype]
    iterations: int = 1


def checksum(array: np.ndarray) -> str:
    hasher = xxhash.xxh3_64()
    raw = raw_bytes(array)
    for start in range(0, len(raw), HASH_CHUNK):
        hasher.update(raw[start : start + HASH_CHUNK])
    return hasher.hexdigest()


def raw_bytes(array: np.ndarray) -> memoryview:
    """The array's bytes without a copy (a uint8 view: ml_dtypes arrays have no buffer)."""
    return array.reshape(-1).view(np.uint8).data


def aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def canonical(document: Any) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def dtype_text(array: np.ndarray, where: str) -> str:
    dtype = array.dtype
    if dtype.name in ML_DTYPES:
        return str(dtype.name)
    if dtype.kind not in "biuf":
        raise GoldenError(f"{where} has dtype {dtype}; goldens hold bool, integer and float arrays")
    return str(dtype.newbyteorder("<").str if dtype.itemsize > 1 else dtype.str)


def encode_header(entries: list[tuple[str, str, np.ndarray]], meta: Mapping[str, Any]) -> bytes:
    """Magic, prefix, JSON header and padding, with offsets and checksums filled in."""
    tensors: list[dict[str, Any]] = [
        {
            "group": group,
            "name": name,
            "dtype": dtype_text(a, f"{group} {name!r}"),
            "shape": list(a.shape),
            "nbytes": int(a.nbytes),
            "offset": 0,
            "xxh3": checksum(a),
        }
        for group, name, a in entries
    ]
    prefix_size = len(MAGIC) + 34
    header = b""
    for _ in range(4):  # offsets depend on the header's size, which depends on their digits
        offset = aligned(prefix_size + len(header))
        for tensor in tensors:
            tensor["offset"] = offset
            offset += aligned(int(tensor["nbytes"]))
        new_header = canonical({"format": FORMAT_VERSION, "meta": dict(meta), "tensors": tensors})
        if new_header == header:
            break
        header = new_header
    prefix = MAGIC + b"%016d %s\n" % (len(header), xxhash.xxh3_64_hexdigest(header).encode())
    return (
        prefix + header + b"\0" * (aligned(len(prefix) + len(header)) - len(prefix) - len(header))
    )


def read_header(handle: io.BufferedReader, size: int, source: str) -> Header:
    """Read and check the header of an open golden of `size` bytes; GoldenError otherwise."""
    magic = handle.read(len(MAGIC))
    if magic == MAGIC:
        version, match = 2, _PREFIX.match(handle.read(34))
    elif magic[: len(MAGIC_V1)] == MAGIC_V1:
        handle.seek(len(MAGIC_V1))
        version, match = 1, _PREFIX_V1.match(handle.read(17))
    else:
        raise GoldenError(f"{source}: {foreign(magic, size)}")
    if match is None:
        if handle.tell() == size:
            raise GoldenError(f"{source}: truncated golden ({size} bytes, cut in its first line)")
        raise GoldenError(f"{source}: corrupt golden (the header length line is damaged)")
    start = handle.tell()
    length = int(match.group(1))
    if length > size - start:
        raise GoldenError(
            f"{source}: truncated or corrupt golden (header of {length} bytes in a file of {size})"
        )
    header_bytes = handle.read(length)
    if version == 2 and xxhash.xxh3_64_hexdigest(header_bytes).encode() != match.group(2):
        raise GoldenError(f"{source}: corrupt golden (the header's checksum does not match)")
    try:
        document = parse_json(header_bytes)
    except ValueError as exc:
        raise GoldenError(f"{source}: corrupt golden (the header {exc})") from None
    meta, tensors, dtypes = _check_document(document, version, source)
    body_start = aligned(start + length)
    _check_layout(tensors, dtypes, body_start, size, source)
    padding = handle.read(body_start - start - length)
    if padding.strip(b"\0"):
        raise GoldenError(f"{source}: corrupt golden (non-zero bytes after the header)")
    return Header(version, meta, tensors, body_start, dtypes)


def foreign(start: bytes, size: int) -> str:
    """What a file without the golden magic is, where it is recognisable."""
    if size == 0:
        return "an empty file, not a golden"
    if start.startswith(b"version https://git-lfs"):
        return "a git-lfs pointer, not the golden itself (run: git lfs pull)"
    if start.startswith(b"<<<<<<<"):
        return "holds git merge-conflict markers, not a golden"
    return "not a pytest-trtcompare golden, or a corrupt one (bad magic bytes)"


def corrupt(source: str, where: str, name: str, problem: str) -> GoldenError:
    return GoldenError(f"{source}: corrupt golden (header field {name!r}{where}: {problem})")


def check_shape(shape: Any, source: str, where: str) -> None:
    rank_ok = isinstance(shape, list) and len(shape) <= _MAX_RANK
    if not rank_ok or not all(type(d) is int and d >= 0 for d in shape):
        raise corrupt(source, where, "shape", f"{shape!r} is not a list of integers >= 0")


def check_end(size: int, end: int, source: str) -> None:
    """The file exactly as long as its header says."""
    if size != end:
        raise GoldenError(
            f"{source}: {'truncated' if size < end else 'corrupt'} golden ({size} bytes, its "
            f"header describes {end})"
        )


def _check_document(
    document: Any, version: int, source: str
) -> tuple[dict[str, Any], list[dict[str, Any]], list[np.dtype]]:
    if not isinstance(document, dict) or set(document) != {"format", "meta", "tensors"}:
        found = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise GoldenError(f"{source}: corrupt golden (header keys {found})")
    if document["format"] != version or isinstance(document["format"], bool):
        raise corrupt(source, "", "format", f"{document['format']!r} in a format {version} file")
    if not isinstance(document["meta"], dict):
        raise corrupt(source, "", "meta", f"a {type(document['meta']).__name__}, not an object")
    tensors = document["tensors"]
    if not isinstance(tensors, list):
        raise corrupt(source, "", "tensors", f"a {type(tensors).__name__}, not a list")
    keys = _TENSOR_KEYS | ({"xxh3"} if version == 2 else set())
    seen: set[tuple[str, str]] = set()
    dtypes = []
    for index, tensor in enumerate(tensors):
        where = f" of tensor {index}"
        if not isinstance(tensor, dict) or set(tensor) != keys:
            got = sorted(tensor) if isinstance(tensor, dict) else type(tensor).__name__
            raise GoldenError(f"{source}: corrupt golden (tensor {index} has keys {got})")
        group, name = tensor["group"], tensor["name"]
        if group not in GROUPS:
            raise corrupt(source, where, "group", f"{group!r} is not one of {', '.join(GROUPS)}")
        if not isinstance(name, str) or not name:
            raise corrupt(source, where, "name", f"{name!r} is not a non-empty string")
        where = f" of tensor {name!r}"
        if (group, name) in seen:
            raise corrupt(source, where, "name", f"{group} {name!r} appears twice")
        seen.add((group, name))
        check_shape(tensor["shape"], source, where)
        for key in ("offset", "nbytes"):
            if type(tensor[key]) is not int or tensor[key] < 0:
                raise corrupt(source, where, key, f"{tensor[key]!r} is not an integer >= 0")
        if version == 2 and not (isinstance(tensor["xxh3"], str) and _HEX16.match(tensor["xxh3"])):
            raise corrupt(source, where, "xxh3", f"{tensor['xxh3']!r} is not 16 hex digits")
        dtype_name = tensor["dtype"]
        try:
            dtype = dtype_from_name(dtype_name) if isinstance(dtype_name, str) else None
        except ValueError:
            dtype = None
        if dtype is None or (dtype.name not in ML_DTYPES and dtype.kind not in "biuf"):
            raise corrupt(
                source, where, "dtype", f"{dtype_name!r} is not a bool, int or float type"
            )
        if dtype.byteorder == ">":
            problem = f"{dtype_name!r} is big-endian; goldens are little-endian"
            raise corrupt(source, where, "dtype", problem)
        dtypes.append(dtype)
    return document["meta"], tensors, dtypes


def _check_layout(
    tensors: list[dict[str, Any]], dtypes: list[np.dtype], body_start: int, size: int, source: str
) -> None:
    """Sizes from shapes in Python ints (no overflow), tensors in order, aligned, no overlap,
    and the file exactly as long as the header says."""
    end = body_start
    for tensor, dtype in zip(tensors, dtypes, strict=True):
        where = f" of tensor {tensor['name']!r}"
        if math.prod(tensor["shape"]) * dtype.itemsize != tensor["nbytes"]:  # Python ints
            problem = f"{tensor['nbytes']} for shape {tensor['shape']} of {dtype}"
            raise corrupt(source, where, "nbytes", problem)
        if tensor["offset"] != end:
            raise corrupt(source, where, "offset", f"{tensor['offset']}, expected {end}")
        end += aligned(tensor["nbytes"])
        if end > size:
            raise GoldenError(
                f"{source}: truncated golden (tensor {tensor['name']!r} runs past the end of the "
                f"file: {size} bytes)"
            )
    check_end(size, end, source)
