"""The `.safetensors` golden (format 3): layout, strict header schema, checksums. No pytest,
no paths. docs/GOLDEN_FORMAT.md describes it; legacy.py reads formats 1 and 2 (`.golden`).

A safetensors file (https://github.com/huggingface/safetensors), written byte for byte by us:

    8 bytes: N, the header's length, little-endian u64
    N bytes: the JSON header, keys sorted, no spaces, ASCII, then spaces up to a multiple of 8:
      {"__metadata__": {"pytest_trtcompare": JSON of {"format": 3, "meta": {...},
                                                      "outputs": [names], "inputs": [names],
                                                      "stored_as_u8": {tensor: dtype name},
                                                      "iterations": N (only where N > 1)},
                        "xxh3:header": xxh3-64 of this header without this entry,
                        "xxh3:outputs/<name>": xxh3-64 of the tensor's bytes, ...},
       "outputs/<name>": {"data_offsets": [begin, end], "dtype": "F32", "shape": [...]}, ...}
    the tensors' C-order little-endian bytes, one after another (widest item size first, so
    each is aligned to its item size), offsets relative to the end of the header.

A golden of several input iterations (compare_frameworks(iterations=N, golden=True)) names the
later iterations' tensors `outputs.1/<name>`, `inputs.1/<name>` ..., each iteration with the
names of the first.

Every byte is covered: the length by the file size, the header by being exactly what we write
(canonical JSON, space padding) and by its checksum, each tensor by its own, the end by the
size. Our own reader reads each tensor straight into its array (no copy, no mmap kept open);
safetensors' own loaders read the same files (tests/test_goldens_safetensors.py).
"""

from __future__ import annotations

import io
import math
import re
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
import xxhash

from .legacy import (
    GROUPS,
    MAX_DEPTH,
    ML_DTYPES,
    ForeignSafetensorsError,
    GoldenError,
    Header,
    canonical,
    check_end,
    check_shape,
    checksum,
    corrupt,
    nesting,
    parse_json,
    raw_bytes,
)

FORMAT_VERSION = 3
ALIGN = 8  # the header's padding; safetensors pads with spaces to a multiple of 8
OURS = "pytest_trtcompare"  # the __metadata__ entry holding our JSON
HEADER_SUM = "xxh3:header"
SUM_PREFIX = "xxh3:"
#: numpy dtype name -> safetensors dtype code
CODES = {
    "float64": "F64",
    "float32": "F32",
    "float16": "F16",
    "bfloat16": "BF16",
    "float8_e4m3fn": "F8_E4M3",
    "float8_e5m2": "F8_E5M2",
    "int64": "I64",
    "int32": "I32",
    "int16": "I16",
    "int8": "I8",
    "uint64": "U64",
    "uint32": "U32",
    "uint16": "U16",
    "uint8": "U8",
    "bool": "BOOL",
}
NUMPY_NAMES = {code: name for name, code in CODES.items()}
#: dtypes safetensors has no code for: stored as U8 bytes, their dtype in our metadata
AS_U8 = ("float8_e4m3fnuz", "float8_e5m2fnuz")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
_OUR_KEYS = {"format", "meta", "outputs", "inputs", "stored_as_u8"}
ITERATIONS = "iterations"  # in our metadata where a golden holds more than one
_TENSOR_KEYS = {"data_offsets", "dtype", "shape"}
_FOREIGN_HEADER_LIMIT = 100 << 20  # safetensors' own limit on a header's size
START = b'{"__metadata__":{'  # every golden's header starts so (sorted keys)


def iteration_group(group: str, iteration: int) -> str:
    """Where an iteration's tensors are: 'outputs' for the first, 'outputs.1' for the next."""
    return group if iteration == 0 else f"{group}.{iteration}"


def _tensor_label(group: str, name: str) -> str:
    """ "output 'y'", "input 'x' of iteration 2" (a group 'inputs.2')."""
    kind, _, iteration = group.partition(".")
    return f"{kind[:-1]} {name!r}" + (f" of iteration {iteration}" if iteration else "")


def _numpy_dtype(name: str) -> np.dtype:
    if name in ML_DTYPES:
        import ml_dtypes

        low_precision: np.dtype = np.dtype(getattr(ml_dtypes, name))
        return low_precision
    return np.dtype(name)


def _code(array: np.ndarray, where: str) -> str:
    name = array.dtype.name
    if name in AS_U8:
        return "U8"
    if name not in CODES:
        raise GoldenError(
            f"{where} has dtype {array.dtype}; goldens hold bool, integer and float arrays"
        )
    return CODES[name]


def data_order(entries: list[tuple[str, str, np.ndarray]]) -> list[int]:
    """The order tensors are stored in: widest item first (each then aligned to its item
    size, as safetensors writes them), else as given."""
    return sorted(range(len(entries)), key=lambda i: -entries[i][2].dtype.itemsize)


def encode_header(entries: list[tuple[str, str, np.ndarray]], meta: Mapping[str, Any]) -> bytes:
    """The 8-byte length and the padded JSON header; the data follows in data_order()."""
    tensors: dict[str, Any] = {}
    sums = {}
    offset = 0
    for index in data_order(entries):
        group, name, array = entries[index]
        key = f"{group}/{name}"
        tensors[key] = {
            "data_offsets": [offset, offset + array.nbytes],
            "dtype": _code(array, _tensor_label(group, name)),
            "shape": list(array.shape),
        }
        sums[SUM_PREFIX + key] = checksum(array)
        offset += array.nbytes
    if nesting(meta) >= MAX_DEPTH:  # what a reader would refuse is never written
        raise GoldenError(f"a golden's meta nests deeper than {MAX_DEPTH - 1} levels")
    ours = {
        "format": FORMAT_VERSION,
        "meta": dict(meta),
        **{group: [n for g, n, _ in entries if g == group] for group in GROUPS},
        "stored_as_u8": {f"{g}/{n}": a.dtype.name for g, n, a in entries if a.dtype.name in AS_U8},
    }
    iterations = 1 + max((int(g.partition(".")[2] or 0) for g, _, _ in entries), default=0)
    if iterations > 1:
        ours[ITERATIONS] = iterations
    metadata = {OURS: canonical(ours).decode(), **sums}
    unsummed = canonical({"__metadata__": metadata, **tensors})
    metadata[HEADER_SUM] = xxhash.xxh3_64_hexdigest(unsummed)
    header = canonical({"__metadata__": metadata, **tensors})
    header += b" " * (-len(header) % ALIGN)
    return struct.pack("<Q", len(header)) + header


def starts_like_a_golden(start: bytes) -> bool:
    """Whether a file's first bytes (8 + 17 of them, fewer in a short file) can begin a
    format-3 golden."""
    known = max(len(start) - 8, 0)
    return start[8 : 8 + known] == START[:known]


def is_foreign_safetensors(handle: io.BufferedReader, size: int) -> bool:
    """Whether a file that does not start like a golden is a safetensors file of another
    tool: a JSON header of tensor entries, with or without `__metadata__`, none of ours (a
    golden damaged where its metadata begins is no such file)."""
    handle.seek(0)
    start = handle.read(9)
    if len(start) < 9 or start[8:9] != b"{":
        return False
    (length,) = struct.unpack("<Q", start[:8])
    if length > min(size - 8, _FOREIGN_HEADER_LIMIT):
        return False
    handle.seek(8)
    try:
        document = parse_json(handle.read(length))
    except ValueError:
        return False
    metadata = document.get("__metadata__", {}) if isinstance(document, dict) else None
    if not isinstance(metadata, dict) or OURS in metadata or HEADER_SUM in metadata:
        return False  # a golden's metadata in bytes we never write: a damaged golden
    entries = [entry for key, entry in document.items() if key != "__metadata__"]
    return all(isinstance(entry, dict) and set(entry) == _TENSOR_KEYS for entry in entries)


def read_header(handle: io.BufferedReader, size: int, source: str) -> Header:
    """Read and check the header of an open golden of `size` bytes; GoldenError otherwise."""
    start = handle.read(8 + len(START))  # store.py read it: it starts like a golden
    if len(start) < 8 + len(START):
        raise GoldenError(f"{source}: truncated golden ({size} bytes, cut in its header)")
    (length,) = struct.unpack("<Q", start[:8])
    if length > size - 8:
        raise GoldenError(
            f"{source}: truncated or corrupt golden (header of {length} bytes in a file of {size})"
        )
    handle.seek(8)
    document = _parse(handle.read(length), source)
    metadata, ours = _check_metadata(document, source)
    tensors, dtypes = _check_tensors(document, metadata, ours, 8 + length, source)
    check_end(size, max((t["offset"] + t["nbytes"] for t in tensors), default=8 + length), source)
    iterations = ours.get(ITERATIONS, 1)
    return Header(FORMAT_VERSION, ours["meta"], tensors, 8 + length, dtypes, iterations)


def _parse(header: bytes, source: str) -> dict[str, Any]:
    """The header document, when its bytes are exactly what we write and its checksum holds."""
    text = header.rstrip(b" ")
    if len(header) % ALIGN or len(header) - len(text) >= ALIGN:
        raise GoldenError(f"{source}: corrupt golden (the header's padding is damaged)")
    try:
        document = parse_json(text)
    except ValueError as exc:
        raise GoldenError(f"{source}: corrupt golden (the header {exc})") from None
    if not isinstance(document, dict) or not isinstance(document.get("__metadata__"), dict):
        raise GoldenError(f"{source}: corrupt golden (the header has no __metadata__ object)")
    metadata = document["__metadata__"]
    if HEADER_SUM not in metadata and OURS not in metadata:
        raise ForeignSafetensorsError(
            f"{source}: a safetensors file, not a pytest-trtcompare golden (no {OURS!r} metadata)"
        )
    if canonical(document) != text:  # any byte outside the JSON's meaning changed
        raise GoldenError(f"{source}: corrupt golden (the header is not as it was written)")
    if HEADER_SUM not in metadata:
        raise GoldenError(f"{source}: corrupt golden (the header's checksum is missing)")
    expected = metadata.pop(HEADER_SUM)
    if not isinstance(expected, str) or xxhash.xxh3_64_hexdigest(canonical(document)) != expected:
        raise GoldenError(f"{source}: corrupt golden (the header's checksum does not match)")
    return document


def _check_metadata(document: dict[str, Any], source: str) -> tuple[dict[str, str], Any]:
    metadata = document["__metadata__"]
    if OURS not in metadata:
        raise corrupt(source, "", "__metadata__", f"no {OURS!r} entry")
    for key, value in metadata.items():
        if not isinstance(value, str):
            raise corrupt(source, "", "__metadata__", f"{key!r} is not a string")
    try:
        ours = parse_json(metadata[OURS])
    except ValueError as exc:
        raise corrupt(source, "", OURS, str(exc).removeprefix("is ")) from None
    if not isinstance(ours, dict) or set(ours) - {ITERATIONS} != _OUR_KEYS:
        found = sorted(ours) if isinstance(ours, dict) else type(ours).__name__
        raise corrupt(source, "", OURS, f"keys {found}")
    iterations = ours.get(ITERATIONS, 2)
    if type(iterations) is not int or iterations < 2:
        raise corrupt(source, "", ITERATIONS, f"{iterations!r} is not a count of iterations > 1")
    if ours["format"] != FORMAT_VERSION or isinstance(ours["format"], bool):
        raise corrupt(source, "", "format", f"{ours['format']!r} in a format 3 file")
    for key in ("meta", "stored_as_u8"):
        if not isinstance(ours[key], dict):
            raise corrupt(source, "", key, f"a {type(ours[key]).__name__}, not an object")
    for group in GROUPS:
        names = ours[group]
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise corrupt(source, "", group, f"{names!r} is not a list of names")
        if len(set(names)) != len(names):
            twice = next(n for n in names if names.count(n) > 1)
            raise corrupt(source, "", group, f"{twice!r} appears twice")
    return metadata, ours


def _check_tensors(
    document: dict[str, Any], metadata: dict[str, str], ours: Any, body_start: int, source: str
) -> tuple[list[dict[str, Any]], list[np.dtype]]:
    """The tensor table in golden order (outputs, then inputs, as listed, iteration after
    iteration), every entry checked and the data laid out without gaps or overlaps."""
    listed = [
        f"{iteration_group(group, iteration)}/{name}"
        for iteration in range(ours.get(ITERATIONS, 1))
        for group in GROUPS
        for name in ours[group]
    ]
    for key in document:
        if key != "__metadata__" and key not in listed:
            raise GoldenError(
                f"{source}: corrupt golden (tensor {key!r} is not listed in the golden's "
                "outputs or inputs)"
            )
    for key in listed:
        if key not in document:
            raise GoldenError(f"{source}: corrupt golden (tensor {key!r} is missing)")
    sums = {SUM_PREFIX + key for key in listed}
    extra = sorted(set(metadata) - sums - {OURS})
    if extra:
        raise corrupt(source, "", "__metadata__", f"unexpected entry {extra[0]!r}")
    for key in ours["stored_as_u8"]:
        if key not in listed or ours["stored_as_u8"][key] not in AS_U8:
            raise corrupt(source, "", "stored_as_u8", f"{key!r}: {ours['stored_as_u8'][key]!r}")
    tensors, dtypes = [], []
    for key in listed:
        entry, where = document[key], f" of tensor {key!r}"
        if not isinstance(entry, dict) or set(entry) != _TENSOR_KEYS:
            got = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
            raise GoldenError(f"{source}: corrupt golden (tensor {key!r} has keys {got})")
        code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if not isinstance(code, str) or code not in NUMPY_NAMES:
            raise corrupt(source, where, "dtype", f"{code!r} is not a type goldens hold")
        dtype_name = ours["stored_as_u8"].get(key, NUMPY_NAMES[code])
        if dtype_name in AS_U8 and code != "U8":
            raise corrupt(source, where, "dtype", f"{code!r} for a tensor stored as U8")
        check_shape(shape, source, where)
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(type(o) is int and o >= 0 for o in offsets)
            and offsets[0] <= offsets[1]
        ):
            problem = f"{offsets!r} is not [begin, end] in integers >= 0"
            raise corrupt(source, where, "data_offsets", problem)
        dtype = _numpy_dtype(dtype_name)
        nbytes = offsets[1] - offsets[0]
        if math.prod(shape) * dtype.itemsize != nbytes:  # Python ints: no overflow
            problem = f"{offsets} ({nbytes} bytes) for shape {shape} of {code}"
            raise corrupt(source, where, "data_offsets", problem)
        digest = metadata.get(SUM_PREFIX + key)
        if digest is None:
            raise GoldenError(f"{source}: corrupt golden (tensor {key!r} has no checksum)")
        if not _HEX16.match(digest):
            raise corrupt(source, where, SUM_PREFIX + key, f"{digest!r} is not 16 hex digits")
        group, _, name = key.partition("/")
        tensors.append(
            {
                "group": group,
                "name": name,
                "dtype": dtype_name,
                "shape": shape,
                "offset": body_start + offsets[0],
                "nbytes": nbytes,
                "xxh3": digest,
            }
        )
        dtypes.append(dtype)
    _check_layout(tensors, body_start, source)
    return tensors, dtypes


def _check_layout(tensors: list[dict[str, Any]], body_start: int, source: str) -> None:
    """The tensors' data one after another from the header's end: no gap, no overlap."""
    end = body_start
    for tensor in sorted(tensors, key=lambda t: (t["offset"], t["nbytes"])):
        if tensor["offset"] != end:
            key = f"{tensor['group']}/{tensor['name']}"
            begin, expected = tensor["offset"] - body_start, end - body_start
            problem = (
                f"begins at {begin}, expected {expected} (the tensors' data must follow one "
                "another without gaps or overlaps)"
            )
            raise corrupt(source, f" of tensor {key!r}", "data_offsets", problem)
        end += tensor["nbytes"]


def read_tensors(
    handle: io.BufferedReader, header: Any, source: str
) -> dict[str, dict[str, np.ndarray]]:
    """Every tensor, read straight into its own array and checked against its checksum
    (format 1 has none; formats 1 and 2 pad each tensor with zeros to 64 bytes)."""
    groups: dict[str, dict[str, np.ndarray]] = {
        iteration_group(group, iteration): {}
        for iteration in range(header.iterations)
        for group in GROUPS
    }
    for tensor, dtype in zip(header.tensors, header.dtypes, strict=True):
        array = np.empty(tuple(tensor["shape"]), dtype=dtype)
        handle.seek(tensor["offset"])
        if array.nbytes and handle.readinto(raw_bytes(array)) != array.nbytes:
            raise GoldenError(f"{source}: truncated golden (tensor {tensor['name']!r})")
        if header.version >= 2 and checksum(array) != tensor["xxh3"]:
            raise GoldenError(
                f"{source}: corrupt golden (the checksum of "
                f"{_tensor_label(tensor['group'], tensor['name'])} does not match its bytes)"
            )
        if header.version < 3:
            padding = handle.read(-array.nbytes % 64)
            if padding.strip(b"\0"):
                raise GoldenError(
                    f"{source}: corrupt golden (non-zero padding after {tensor['name']!r})"
                )
        groups[tensor["group"]][tensor["name"]] = array
    return groups
