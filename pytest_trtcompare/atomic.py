"""Atomic file writes: a temp file in the same directory, fsync, rename. No half-written files."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Replace `path` with what `write` writes: readers see the old file or the new one, never
    a part; on any error (or interrupt) the temp file is removed and the old file stays."""
    path = Path(path)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    def write(handle: BinaryIO) -> None:
        handle.write(data)

    atomic_write(path, write)
