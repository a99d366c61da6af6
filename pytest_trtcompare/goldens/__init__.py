"""The golden store: the file format, atomic writes, and interop with Polygraphy JSON and ONNX
test data. No pytest here; the `golden` fixture lives in `plugin/`."""

from __future__ import annotations

from .store import (
    SUFFIX,
    Golden,
    GoldenError,
    GoldenStats,
    golden_path,
    iter_goldens,
    read_golden,
    read_header,
    safe_file_stem,
    write_golden,
)

__all__ = [
    "SUFFIX",
    "Golden",
    "GoldenError",
    "GoldenStats",
    "golden_path",
    "iter_goldens",
    "read_golden",
    "read_header",
    "safe_file_stem",
    "write_golden",
]
