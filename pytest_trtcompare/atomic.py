"""Atomic file writes: a temp file in the same directory, fsync, rename. No half-written files."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Replace `path` with what `write` writes: readers see the old file or the new one, never
    a part; on any error (or interrupt) the temp file is removed and the old file stays."""
    path = Path(path)
    mode = _mode_for(path)
    # the writer's pid in the name: a temp file left by a killed process can be recognised
    fd, temp = tempfile.mkstemp(
        prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent
    )
    try:
        with contextlib.suppress(OSError, AttributeError):  # mkstemp makes 0600 files
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable where supported
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def _mode_for(path: Path) -> int:
    """The replaced file's permissions, or what a new file would get (0666 less the umask)."""
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


_WRITEBACK: Any = None  # libc sync_file_range, False where unavailable
_SYNC_FILE_RANGE_WRITE = 2


def start_writeback(handle: BinaryIO, start: int, length: int) -> None:
    """Ask the kernel to start writing this range to disk now (Linux sync_file_range), so the
    final fsync has less left to wait for; the page cache keeps the data. No-op elsewhere."""
    global _WRITEBACK
    if _WRITEBACK is None:
        _WRITEBACK = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                function = ctypes.CDLL(None, use_errno=True).sync_file_range
                function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
                _WRITEBACK = function
    if _WRITEBACK:
        handle.flush()
        _WRITEBACK(handle.fileno(), start, length, _SYNC_FILE_RANGE_WRITE)


def remove_stale_temps(folder: Path) -> list[Path]:
    """Delete temp files of writers that no longer run (a SIGKILL leaves them behind)."""
    removed = []
    for temp in Path(folder).glob(".*.tmp"):
        try:
            pid = int(temp.name[: -len(".tmp")].rsplit(".", 2)[-2])
        except (ValueError, IndexError):
            continue
        if _alive(pid):
            continue  # another process (an xdist worker) is writing it right now
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
            removed.append(temp)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def atomic_write_bytes(path: Path, data: bytes) -> None:
    def write(handle: BinaryIO) -> None:
        handle.write(data)

    atomic_write(path, write)
