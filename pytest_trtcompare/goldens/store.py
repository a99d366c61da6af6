"""Golden outputs on disk: one `.safetensors` file per (test, name), deterministic.

The byte format (checksums, strict header) lives in format.py, the old `.golden` formats that
are still read in legacy.py. A golden is looked for at its `.safetensors` path first, then at
the old `.golden` beside it (stored_file); writing it removes that old file once the new one
is in place. No pickle, no timestamps, no compression: the same data gives the same bytes.
Writes go to a temp file in the same folder, are fsynced and renamed over the old file (or
over a symlink to it), under a lock, so a reader sees the old golden or the new one, never a
part of either.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import io
import os
import re
import stat
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..atomic import atomic_write, remove_stale_temps, start_writeback
from ..engine import as_output_mapping
from . import format as safetensors_format
from . import legacy
from .format import FORMAT_VERSION as FORMAT_VERSION
from .format import data_order, encode_header, iteration_group, read_tensors
from .legacy import GoldenError as GoldenError
from .legacy import raw_bytes
from .meta import GoldenMeta

SUFFIX = ".safetensors"
LEGACY_SUFFIX = ".golden"  # formats 1 and 2, still read
_COMPARE_CHUNK = 16 << 20  # bytes compared at a time when checking "unchanged"
_WRITE_CHUNK = 4 << 20  # bytes written (and handed to writeback) at a time
_SAFE = re.compile(r"[^A-Za-z0-9._\[\]-]")


@dataclass(frozen=True)
class Iteration:
    """One input iteration of a golden: its inputs and the outputs made from them."""

    outputs: dict[str, np.ndarray]
    inputs: dict[str, np.ndarray]


@dataclass(frozen=True)
class Golden:
    outputs: dict[str, np.ndarray]  # the first iteration's
    inputs: dict[str, np.ndarray]
    meta: dict[str, Any]
    path: Path | None = None
    version: int = FORMAT_VERSION  # the format it was read from (1 and 2: an old .golden)
    later: tuple[Iteration, ...] = ()  # the iterations after the first (iterations=N)

    @property
    def iterations(self) -> tuple[Iteration, ...]:
        """Every iteration, the first one's outputs and inputs first."""
        return (Iteration(self.outputs, self.inputs), *self.later)


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
    """The file of one golden: folder / safe(test_id[.name]).safetensors, never outside
    `folder`."""
    stem = safe_file_stem(test_id if name is None else f"{test_id}.{name}")
    path = folder / f"{stem}{SUFFIX}"
    if path.parent.resolve() != folder.resolve():  # the file itself may be a symlink (DVC)
        raise GoldenError(f"golden name {name!r} of {test_id!r} would leave {folder}")
    return path


def current_path(path: Path) -> Path:
    """Where a golden is written: its `.safetensors` path (for an old `.golden` path too)."""
    path = Path(path)
    if path.name.endswith(LEGACY_SUFFIX):
        return path.with_name(path.name[: -len(LEGACY_SUFFIX)] + SUFFIX)
    return path


def legacy_path(path: Path) -> Path | None:
    """The old `.golden` file a `.safetensors` golden replaces (None for other names)."""
    path = Path(path)
    if not path.name.endswith(SUFFIX):
        return None
    return path.with_name(path.name[: -len(SUFFIX)] + LEGACY_SUFFIX)


def _something_at(path: Path) -> bool:
    return path.exists() or path.is_symlink()


def stored_file(path: Path) -> Path:
    """The file that holds the golden of `path`: the `.safetensors` file when anything stands
    there, else an old `.golden` beside it when one does, else `path` (absent)."""
    path = current_path(path)
    old = legacy_path(path)
    if not _something_at(path) and old is not None and _something_at(old):
        return old
    return path


# -- encoding ----------------------------------------------------------------------------------
def _entries(iterations: list[Iteration]) -> list[tuple[str, str, np.ndarray]]:
    """(group, name, array) of every tensor: each iteration's outputs, then its inputs, under
    the names of the first iteration (a golden names its tensors once)."""
    first = iterations[0]
    entries = []
    for index, iteration in enumerate(iterations):
        for group, arrays, names in (
            ("outputs", iteration.outputs, first.outputs),
            ("inputs", iteration.inputs, first.inputs),
        ):
            if list(arrays) != list(names):
                raise GoldenError(
                    f"iteration {index} has {group} {list(arrays)}, iteration 0 has "
                    f"{list(names)}: a golden's iterations hold the same tensors"
                )
            for name, value in arrays.items():
                array = np.asarray(value)
                if array.dtype.byteorder == ">":
                    array = array.astype(array.dtype.newbyteorder("<"))
                if not array.flags.c_contiguous:  # (np.ascontiguousarray makes 0-d arrays 1-d)
                    array = array.copy(order="C")
                entries.append((iteration_group(group, index), str(name), array))
    return entries


def _write_body(handle: BinaryIO, entries: list[tuple[str, str, np.ndarray]]) -> None:
    """Tensor bytes in chunks, starting their writeback as we go (see atomic.start_writeback)."""
    for index in data_order(entries):
        raw = raw_bytes(entries[index][2])
        for start in range(0, len(raw), _WRITE_CHUNK):
            position = handle.tell()
            part = raw[start : start + _WRITE_CHUNK]
            handle.write(part)
            start_writeback(handle, position, len(part))


# -- reading -----------------------------------------------------------------------------------
def _open_checked(path: Path) -> tuple[io.BufferedReader, int]:
    problem = golden_file_problem(path)
    if problem:
        raise GoldenError(problem)  # never open a FIFO: it would block
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed by the callers' with)
        return handle, os.fstat(handle.fileno()).st_size
    except FileNotFoundError:
        raise GoldenError(f"golden {path} does not exist") from None
    except OSError as exc:
        raise GoldenError(f"{path}: cannot read golden ({exc})") from None


def _read_format_header(handle: io.BufferedReader, size: int, source: str) -> Any:
    """The checked header of a golden of any format (told by its first bytes)."""
    start = handle.read(8 + 17)
    handle.seek(0)
    if start and any(
        size < len(m) and m.startswith(start) for m in (legacy.MAGIC, legacy.MAGIC_V1)
    ):
        raise GoldenError(f"{source}: truncated golden ({size} bytes, cut in its magic)")
    if start.startswith(legacy.MAGIC_V1[:-1]):  # formats 1 and 2
        return legacy.read_header(handle, size, source)
    if size == 0 or start.startswith((b"version https://git-lfs", b"<<<<<<<")):
        raise GoldenError(f"{source}: {legacy.foreign(start, size)}")
    if _cut_in_length(start):
        raise GoldenError(f"{source}: truncated golden ({size} bytes, cut in its 8 length bytes)")
    text = _text_start(start)
    if text is not None:  # before the length check: 'TODO\n' is no golden cut short
        raise GoldenError(f"{source}: a text file, not a golden (it starts with {text!r})")
    if safetensors_format.starts_like_a_golden(start):
        return safetensors_format.read_header(handle, size, source)
    if safetensors_format.is_foreign_safetensors(handle, size):
        raise legacy.ForeignSafetensorsError(
            f"{source}: a safetensors file, not a pytest-trtcompare golden (no metadata)"
        )
    raise GoldenError(
        f"{source}: not a pytest-trtcompare golden, or a corrupt one (it starts with "
        f"{start[8:].decode('ascii', 'backslashreplace')!r} after its 8 length bytes where a "
        f"golden has {safetensors_format.START.decode()!r})"
    )


def _cut_in_length(start: bytes) -> bool:
    """Whether a file too short for a golden's 8 length bytes holds the start of them: a
    header's length is a multiple of 8 below 16 MiB (a 1-byte cut of a golden can read as
    text: 'h' is 0x68)."""
    return (
        len(start) < 8 and start[0] % 8 == 0 and b"\n" not in start and not start[3:].strip(b"\0")
    )


def _text_start(start: bytes) -> str | None:
    """The first bytes as text where they are printable UTF-8 (a golden's 8 length bytes
    never are: they hold zeros), else None."""
    text = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(start)
    printable = all(char.isprintable() or char in "\t\n\r" for char in text)
    return text if text and printable and "\ufffd" not in text else None


def read_header(path: Path) -> dict[str, Any]:
    """The golden's header ({"format", "meta", "tensors"}), checked (schema, header checksum,
    sizes against the file); the tensors' bytes are not read. Each tensor: {"group", "name",
    "dtype", "shape", "offset" (in the file), "nbytes", "xxh3" (none in format 1)}."""
    handle, size = _open_checked(Path(path))
    with handle:
        header = _read_format_header(handle, size, str(path))
    return {"format": header.version, "meta": header.meta, "tensors": header.tensors}


def read_golden(path: Path) -> Golden:
    """Load a golden, every byte checked; every array is read straight into its own buffer."""
    path = Path(path)
    handle, size = _open_checked(path)
    with handle:
        header = _read_format_header(handle, size, str(path))
        try:
            groups = read_tensors(handle, header, str(path))
        except OSError as exc:
            raise GoldenError(f"{path}: cannot read golden ({exc})") from None
    later = tuple(
        Iteration(groups[iteration_group("outputs", k)], groups[iteration_group("inputs", k)])
        for k in range(1, header.iterations)
    )
    return Golden(groups["outputs"], groups["inputs"], header.meta, path, header.version, later)


def same_content(path: Path, entries: list[tuple[str, str, np.ndarray]], head: bytes) -> bool:
    """Whether `path` already holds exactly these bytes (regeneration would change nothing)."""
    try:
        if path.stat().st_size < len(head):
            return False
        with open(path, "rb") as handle:
            if handle.read(len(head)) != head:
                return False
            buffer = np.empty(_COMPARE_CHUNK, dtype=np.uint8)
            for index in data_order(entries):
                raw = entries[index][2].reshape(-1).view(np.uint8)
                for start in range(0, raw.size, _COMPARE_CHUNK):
                    part = raw[start : start + _COMPARE_CHUNK]
                    got = handle.readinto(buffer[: part.size].data)
                    if got != part.size or not np.array_equal(buffer[: part.size], part):
                        return False
            return handle.read(1) == b""  # "unchanged" means every byte
    except OSError:
        return False


# -- writing -----------------------------------------------------------------------------------
def write_golden(
    path: Path,
    outputs: Mapping[str, Any],
    inputs: Mapping[str, Any] | None = None,
    meta: GoldenMeta | Mapping[str, Any] | None = None,
    *,
    later: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]] = (),
) -> str:
    """Write atomically to current_path(path); returns "created", "updated" or "unchanged"
    (then nothing is written). `later`: the (outputs, inputs) of the iterations after the
    first. An old `.golden` beside it is removed once the new file is in place (a rewrite of
    it counts as "updated")."""
    path = current_path(path)
    old = legacy_path(path)
    replaced = old is not None and (old.is_file() or old.is_symlink())  # a dangling link too
    entries = _entries(
        [_iteration(outputs, inputs), *(_iteration(out, feed) for out, feed in later)]
    )
    head = encode_header(
        entries, meta.record() if isinstance(meta, GoldenMeta) else dict(meta or {})
    )
    existed = path.exists()
    if existed and same_content(path, entries, head):
        outcome = "unchanged"
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path.parent)
        with _lock(path):

            def write(handle: BinaryIO) -> None:
                handle.write(head)
                _write_body(handle, entries)

            atomic_write(path, write)
        outcome = "updated" if existed else "created"
    if replaced and old is not None:
        old.unlink(missing_ok=True)  # after the new golden is durable: none is ever lost
        return "updated"
    return outcome


def _iteration(outputs: Mapping[str, Any], inputs: Mapping[str, Any] | None) -> Iteration:
    arrays = {name: item.array for name, item in as_output_mapping(outputs, "golden").items()}
    return Iteration(arrays, dict(inputs or {}))


def _lock(path: Path) -> Any:
    """A lock per golden, outside the goldens folder (so no lock files are left there)."""
    import tempfile

    from filelock import FileLock

    folder = Path(tempfile.gettempdir()) / "pytest-trtcompare-locks"
    folder.mkdir(exist_ok=True)
    key = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()  # (resolve() fails on a loop)
    return FileLock(str(folder / f"{key[:20]}.lock"))


def iter_goldens(folder: Path) -> Iterator[Path]:
    """The golden files of a folder, new and old (.safetensors, .golden): regular files (or
    links to them) only, so a FIFO or a directory named like a golden never blocks or breaks
    a scan."""
    if folder.is_dir():
        paths = [*folder.glob(f"*{SUFFIX}"), *folder.glob(f"*{LEGACY_SUFFIX}")]
        for path in sorted(paths):
            if _file_kind(path) == "file":
                yield path


def _file_kind(path: Path) -> str:
    """'file', 'missing', or what else stands at the path ('a directory', 'a FIFO' ...)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "missing" if not path.is_symlink() else "a broken symlink"
    except OSError as exc:  # a symlink loop, a permission problem
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        if exc.errno == errno.ENOTDIR:
            return _UNDER_A_FILE
        return f"unreadable ({exc.strerror or exc})"
    kinds = {
        stat.S_ISREG: "file",
        stat.S_ISDIR: "a directory",
        stat.S_ISFIFO: "a FIFO",
        stat.S_ISCHR: "a device file",  # a link to /dev/null, /dev/zero
        stat.S_ISBLK: "a device file",
        stat.S_ISSOCK: "a socket",
    }
    return next((kind for test, kind in kinds.items() if test(mode)), "not a regular file")


_UNDER_A_FILE = "under a file"


def file_in_the_way(path: Path) -> Path:
    """What must go for a golden to be written at `path`: the file standing where a folder
    above it should be (a goldens folder that is a file), else `path` itself."""
    return next((p for p in reversed(path.parents) if p.exists() and not p.is_dir()), path)


def golden_file_problem(path: Path) -> str | None:
    """None when `path` is a regular file (or a link to one) or nothing; else what it is."""
    kind = _file_kind(path)
    if kind in ("file", "missing"):
        return None
    if kind == _UNDER_A_FILE:
        return f"{path}: {file_in_the_way(path)} is a file, where a folder of goldens should be"
    return f"{path}: is {kind}, not a golden file" if kind.startswith("a ") else f"{path}: {kind}"


def model_change_note(stored_meta: dict[str, Any], runner: Any) -> str:
    """'model changed since the golden was recorded (sha256 ab12… → cd34…)' when it did."""
    recorded = stored_meta.get("runner")  # a describe() dict; imported goldens hold a name
    before = recorded.get("model_digest") if isinstance(recorded, dict) else None
    after = runner.get("model_digest") if isinstance(runner, dict) else None
    if not (isinstance(before, str) and isinstance(after, str)) or before == after:
        return ""
    return f"model changed since the golden was recorded (sha256 {before[:8]}… → {after[:8]}…)\n"


def precision_note(stored_meta: dict[str, Any], runner: Any, checked: Any = None) -> str:
    """'golden written at fp32 (fp32: 12 of 12 nodes in float32), checked at fp16 (fp16: ...)'
    when the golden's precision is not the checking runner's, or the same precision ran
    other float types (a TensorRT engine built in float32 then, in float16 now). `checked`:
    the check's precision, where the runner's describe() does not say it (golden.check)."""
    recorded = stored_meta.get("runner")
    recorded = recorded if isinstance(recorded, dict) else {}
    before = stored_meta.get("precision") or recorded.get("precision")
    after = runner.get("precision") if isinstance(runner, dict) else None
    after = checked if isinstance(checked, str) else after
    if not (isinstance(before, str) and isinstance(after, str)):
        return ""
    then, now = _computed(recorded), _computed(runner)
    if before == after:
        if then is None or now is None or then.get("counts") == now.get("counts"):
            return ""
        return f"golden written by a run in other types ({then['text']}), now {now['text']}\n"
    said = [f" ({c['text']})" if c else "" for c in (then, now)]
    return (
        f"golden written at {before}{said[0]}, checked at {after}{said[1]}: the errors "
        "include the change of precision\n"
    )


def _computed(description: Any) -> dict[str, Any] | None:
    """A describe()'s "computed" (runners/computed.py), where it holds one with a text."""
    computed = description.get("computed") if isinstance(description, dict) else None
    return computed if isinstance(computed, dict) and computed.get("text") else None


@dataclass
class GoldenStats:
    """What a session did with goldens; merged across xdist workers."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    old_format: set[str] = field(default_factory=set)  # old .golden files read

    def record(self, outcome: str, path: Path) -> None:
        getattr(self, outcome).append(str(path))

    def to_json(self) -> dict[str, Any]:
        return {k: sorted(v) if isinstance(v, set) else v for k, v in vars(self).items()}

    def merge(self, data: Mapping[str, Any]) -> None:
        for name, mine in vars(self).items():  # lists extended, sets updated, in place
            (mine.extend if isinstance(mine, list) else mine.update)(data.get(name, []))
