"""Golden outputs on disk: one file per (test, name), binary, uncompressed, deterministic.

File layout (`.golden`), readable with numpy alone:

    b"PYTEST-TRTCOMPARE-GOLDEN\\n"     magic (25 bytes)
    b"%016d\\n"                        length of the JSON header (17 bytes)
    JSON header (sorted keys): {"format": 1, "meta": {...},
        "tensors": [{"group": "outputs" | "inputs", "name", "dtype", "shape", "offset",
                     "nbytes"}, ...]}
    zero padding, then each tensor's C-order little-endian bytes at its 64-byte aligned offset

No pickle, no timestamps, no compression: the same data gives the same bytes. Writes go to
a temp file in the same folder, are fsynced and renamed over the old file, under a lock, so
a reader sees the old golden or the new one, never a part of either.
"""

from __future__ import annotations

import hashlib
import json
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..engine.arrays import as_output_mapping, dtype_from_name
from ..errors import TrtCompareError
from .atomic import atomic_write, remove_stale_temps, start_writeback

MAGIC = b"PYTEST-TRTCOMPARE-GOLDEN\n"
FORMAT_VERSION = 1
SUFFIX = ".golden"
_ALIGN = 64
_LENGTH_DIGITS = 16
_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
_COMPARE_CHUNK = 16 << 20  # bytes compared at a time when checking "unchanged"
_WRITE_CHUNK = 4 << 20  # bytes written (and handed to writeback) at a time
_SAFE = re.compile(r"[^A-Za-z0-9._\[\]-]")


class GoldenError(TrtCompareError, ValueError):
    """A golden file is missing, truncated, corrupt, or would hold something it must not."""


@dataclass(frozen=True)
class Golden:
    outputs: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray]
    meta: dict[str, Any]
    path: Path | None = None


# -- naming ------------------------------------------------------------------------------------
def safe_file_stem(text: str) -> str:
    """A file name for any text; texts differing only in unsafe characters or case stay apart.

    Safe characters are kept; anything else becomes "_". When that changed the text, or it has
    upper case (case-insensitive file systems), a short hash of the exact text is appended.
    """
    stem = _SAFE.sub("_", text).strip(".") or "_"
    if stem != text or text.lower() != text:
        stem = f"{stem[:120]}~{hashlib.sha1(text.encode()).hexdigest()[:8]}"
    return stem


def golden_path(folder: Path, test_id: str, name: str | None = None) -> Path:
    """The file of one golden: folder / safe(test_id[.name]).golden, never outside `folder`."""
    stem = safe_file_stem(test_id if name is None else f"{test_id}.{name}")
    path = folder / f"{stem}{SUFFIX}"
    if path.resolve().parent != folder.resolve():
        raise GoldenError(f"golden name {name!r} of {test_id!r} would leave {folder}")
    return path


# -- encoding ----------------------------------------------------------------------------------
def _dtype_text(array: np.ndarray, where: str) -> str:
    dtype = array.dtype
    if dtype.name in _ML_DTYPES:
        return dtype.name
    if dtype.kind not in "biuf":
        raise GoldenError(f"{where} has dtype {dtype}; goldens hold bool, integer and float arrays")
    return dtype.newbyteorder("<").str if dtype.itemsize > 1 else dtype.str


def _dtype_from_text(text: str, source: str) -> np.dtype:
    try:
        dtype = dtype_from_name(text)
    except ValueError as exc:
        raise GoldenError(f"{source}: {exc}") from None
    if dtype.name not in _ML_DTYPES and (dtype.kind not in "biuf" or dtype.hasobject):
        raise GoldenError(f"{source}: refuses dtype {text!r} (only bool, integer and float)")
    return dtype


def _entries(
    outputs: Mapping[str, np.ndarray], inputs: Mapping[str, np.ndarray]
) -> list[tuple[str, str, np.ndarray]]:
    entries = []
    for group, arrays in (("outputs", outputs), ("inputs", inputs)):
        for name, value in arrays.items():
            array = np.asarray(value)
            if array.dtype.byteorder == ">":
                array = array.astype(array.dtype.newbyteorder("<"))
            if not array.flags.c_contiguous:  # (np.ascontiguousarray makes 0-d arrays 1-d)
                array = array.copy(order="C")
            entries.append((group, str(name), array))
    return entries


def _layout(entries: list[tuple[str, str, np.ndarray]], meta: Mapping[str, Any]) -> bytes:
    """The header bytes (magic, length, JSON, padding) with offsets filled in."""
    tensors: list[dict[str, Any]] = [
        {
            "group": group,
            "name": name,
            "dtype": _dtype_text(a, f"{group} {name!r}"),
            "shape": list(a.shape),
            "nbytes": int(a.nbytes),
            "offset": 0,
        }
        for group, name, a in entries
    ]
    # Offsets depend on the header size, which depends on the offsets' digits: iterate.
    header = b""
    for _ in range(4):
        prefix = len(MAGIC) + _LENGTH_DIGITS + 1 + len(header)
        offset = -(-prefix // _ALIGN) * _ALIGN
        for tensor in tensors:
            tensor["offset"] = offset
            offset += -(-int(tensor["nbytes"]) // _ALIGN) * _ALIGN
        body = {"format": FORMAT_VERSION, "meta": dict(meta), "tensors": tensors}
        new_header = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        if new_header == header:
            break
        header = new_header
    prefix = len(MAGIC) + _LENGTH_DIGITS + 1 + len(header)
    padding = -(-prefix // _ALIGN) * _ALIGN - prefix
    return MAGIC + b"%016d\n" % len(header) + header + b"\0" * padding


def _raw(array: np.ndarray) -> memoryview:
    """The array's bytes without a copy (a uint8 view: ml_dtypes arrays have no buffer)."""
    return array.reshape(-1).view(np.uint8).data


def _write_body(handle: BinaryIO, entries: list[tuple[str, str, np.ndarray]]) -> None:
    """Tensor bytes in chunks, starting their writeback as we go (see atomic.start_writeback)."""
    for _, _, array in entries:
        raw = _raw(array)
        for start in range(0, len(raw), _WRITE_CHUNK):
            position = handle.tell()
            part = raw[start : start + _WRITE_CHUNK]
            handle.write(part)
            start_writeback(handle, position, len(part))
        padding = -array.nbytes % _ALIGN
        if padding:
            handle.write(b"\0" * padding)


# -- reading -----------------------------------------------------------------------------------
def read_header(path: Path) -> dict[str, Any]:
    """The golden's JSON header (meta and tensor table), checked against the file size."""
    source = str(path)
    problem = golden_file_problem(path)
    if problem:
        raise GoldenError(problem)  # never open a FIFO: it would block
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            magic = handle.read(len(MAGIC))
            if magic != MAGIC:
                raise GoldenError(f"{source}: not a pytest-trtcompare golden (bad magic bytes)")
            length_text = handle.read(_LENGTH_DIGITS + 1)
            if len(length_text) != _LENGTH_DIGITS + 1 or not length_text[:-1].isdigit():
                raise GoldenError(f"{source}: truncated or corrupt golden (header length)")
            header_bytes = handle.read(int(length_text[:-1]))
    except OSError as exc:
        raise GoldenError(f"{source}: cannot read golden ({exc})") from None
    try:
        header = json.loads(header_bytes)
        tensors = header["tensors"]
        if header.get("format") != FORMAT_VERSION or not isinstance(tensors, list):
            raise ValueError("unknown format")
        prefix = len(MAGIC) + _LENGTH_DIGITS + 1 + len(header_bytes)
        end = -(-prefix // _ALIGN) * _ALIGN
        for tensor in tensors:
            dtype = _dtype_from_text(str(tensor["dtype"]), source)
            count = int(np.prod(tensor["shape"], dtype=np.int64))
            if count * dtype.itemsize != int(tensor["nbytes"]):
                raise ValueError(f"tensor {tensor['name']!r} size does not match its shape")
            if int(tensor["offset"]) + int(tensor["nbytes"]) > size:
                raise GoldenError(
                    f"{source}: truncated golden (tensor {tensor['name']!r} runs past the end "
                    f"of the file: {size} bytes)"
                )
            end = max(end, int(tensor["offset"]) + -(-int(tensor["nbytes"]) // _ALIGN) * _ALIGN)
        if size != end:
            raise GoldenError(
                f"{source}: {'truncated' if size < end else 'corrupt'} golden "
                f"({size} bytes, its header describes {end})"
            )
    except GoldenError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise GoldenError(f"{source}: corrupt golden header ({exc})") from None
    return dict(header)


def read_golden(path: Path) -> Golden:
    """Load a golden; every array is read straight into its own buffer (no extra copy)."""
    path = Path(path)
    if _file_kind(path) == "missing":
        raise GoldenError(f"golden {path} does not exist")
    header = read_header(path)
    groups: dict[str, dict[str, np.ndarray]] = {"outputs": {}, "inputs": {}}
    with open(path, "rb") as handle:
        for tensor in header["tensors"]:
            dtype = _dtype_from_text(str(tensor["dtype"]), str(path))
            array = np.empty(tuple(tensor["shape"]), dtype=dtype)
            handle.seek(int(tensor["offset"]))
            if array.nbytes and handle.readinto(_raw(array)) != array.nbytes:
                raise GoldenError(f"{path}: truncated golden (tensor {tensor['name']!r})")
            groups.setdefault(str(tensor["group"]), {})[str(tensor["name"])] = array
    return Golden(groups["outputs"], groups["inputs"], dict(header.get("meta", {})), path)


def same_content(path: Path, entries: list[tuple[str, str, np.ndarray]], head: bytes) -> bool:
    """Whether `path` already holds exactly these bytes (regeneration would change nothing)."""
    try:
        if path.stat().st_size < len(head):
            return False
        with open(path, "rb") as handle:
            if handle.read(len(head)) != head:
                return False
            buffer = np.empty(_COMPARE_CHUNK, dtype=np.uint8)
            for _, _, array in entries:
                raw = array.reshape(-1).view(np.uint8)
                for start in range(0, raw.size, _COMPARE_CHUNK):
                    part = raw[start : start + _COMPARE_CHUNK]
                    got = handle.readinto(buffer[: part.size].data)
                    if got != part.size or not np.array_equal(buffer[: part.size], part):
                        return False
                handle.seek(-array.nbytes % _ALIGN, 1)
            return handle.read(1) == b""
    except OSError:
        return False


# -- writing -----------------------------------------------------------------------------------
def write_golden(
    path: Path,
    outputs: Mapping[str, Any],
    inputs: Mapping[str, Any] | None = None,
    meta: Mapping[str, Any] | None = None,
) -> str:
    """Write atomically; returns "created", "updated" or "unchanged" (then nothing is written)."""
    path = Path(path)
    arrays = {name: item.array for name, item in as_output_mapping(outputs, "golden").items()}
    entries = _entries(arrays, dict(inputs or {}))
    head = _layout(entries, dict(meta or {}))
    if path.exists() and same_content(path, entries, head):
        return "unchanged"
    existed = path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path.parent)
    with _lock(path):

        def write(handle: BinaryIO) -> None:
            handle.write(head)
            _write_body(handle, entries)

        atomic_write(path, write)
    return "updated" if existed else "created"


def _lock(path: Path) -> Any:
    """A lock per golden, outside the goldens folder (so no lock files are left there)."""
    import tempfile

    from filelock import FileLock

    folder = Path(tempfile.gettempdir()) / "pytest-trtcompare-locks"
    folder.mkdir(exist_ok=True)
    key = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:20]
    return FileLock(str(folder / f"{key}.lock"))


def iter_goldens(folder: Path) -> Iterator[Path]:
    """The golden files of a folder: regular files (or links to them) only, so a FIFO or a
    directory named *.golden never blocks or breaks a scan."""
    if folder.is_dir():
        for path in sorted(folder.glob(f"*{SUFFIX}")):
            if _file_kind(path) == "file":
                yield path


def _file_kind(path: Path) -> str:
    """'file', 'missing', or what else stands at the path ('a directory', 'a FIFO' ...)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "missing" if not path.is_symlink() else "a broken symlink"
    except OSError as exc:  # a symlink loop, a permission problem
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "not a regular file"


def golden_file_problem(path: Path) -> str | None:
    """None when `path` is a regular file (or a link to one) or nothing; else what it is."""
    kind = _file_kind(path)
    if kind in ("file", "missing"):
        return None
    return f"{path}: is {kind}, not a golden file" if kind.startswith("a ") else f"{path}: {kind}"


@dataclass
class GoldenStats:
    """What a session did with goldens; merged across xdist workers."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    def record(self, outcome: str, path: Path) -> None:
        getattr(self, outcome).append(str(path))

    def to_json(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "used": sorted(self.used),
        }

    def merge(self, data: Mapping[str, Any]) -> None:
        self.created += data.get("created", [])
        self.updated += data.get("updated", [])
        self.unchanged += data.get("unchanged", [])
        self.used.update(data.get("used", []))
