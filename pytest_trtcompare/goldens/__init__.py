"""The golden store: the file format and checksums, and interop with Polygraphy JSON and ONNX
test data. No pytest here; the `golden` fixture lives in `plugin/`.

These names are its surface: every module outside goldens/ imports them from here, never from
a submodule (ARCHITECTURE.md, enforced by tests/test_layout.py).
"""

from __future__ import annotations

from .interop import (
    load_reference,
    polygraphy_runs,
    write_polygraphy_inputs,
    write_polygraphy_outputs,
)
from .meta import UNSET, GoldenMeta
from .onnx_test_data import load_onnx_test_data
from .polygraphy_json import iterate_json
from .store import (
    FORMAT_VERSION,
    LEGACY_SUFFIX,
    SUFFIX,
    Golden,
    GoldenError,
    GoldenStats,
    Iteration,
    current_path,
    file_in_the_way,
    golden_file_problem,
    golden_path,
    iter_goldens,
    legacy_path,
    model_change_note,
    precision_note,
    read_golden,
    read_header,
    safe_file_stem,
    stored_file,
    write_golden,
)

__all__ = [
    "FORMAT_VERSION",
    "LEGACY_SUFFIX",
    "SUFFIX",
    "UNSET",
    "Golden",
    "GoldenError",
    "GoldenMeta",
    "GoldenStats",
    "Iteration",
    "current_path",
    "file_in_the_way",
    "golden_file_problem",
    "golden_path",
    "iter_goldens",
    "iterate_json",
    "legacy_path",
    "load_onnx_test_data",
    "load_reference",
    "model_change_note",
    "polygraphy_runs",
    "precision_note",
    "read_golden",
    "read_header",
    "safe_file_stem",
    "stored_file",
    "write_golden",
    "write_polygraphy_inputs",
    "write_polygraphy_outputs",
]
