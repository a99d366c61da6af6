"""Reading Polygraphy's JSON (`--save-inputs`, `--save-outputs`) without importing Polygraphy.

Polygraphy encodes an array as {"array": base64(np.save bytes), "polygraphy_class": "ndarray"}
(older files: the marker key "polygraphy_serialized_json_type", or latin-1 text). Arrays are
always loaded with allow_pickle=False.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputDataError

TYPE_MARKER = "polygraphy_class"
LEGACY_TYPE_MARKER = "polygraphy_serialized_json_type"
_LEGACY_ARRAY_KEYS = {"ndarray", "np.ndarray", "numpy.ndarray"}


def _decode_array(dct: dict[str, Any], source: str) -> np.ndarray:
    text = dct.get("array")
    if not isinstance(text, str):
        raise InputDataError(f"{source}: an ndarray entry has no 'array' data")
    try:
        data = base64.b64decode(text.encode(), validate=True)
    except (binascii.Error, ValueError):
        data = text.encode("latin-1")
    try:
        loaded = np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as exc:  # object arrays need pickle: refused
        raise InputDataError(
            f"{source}: an array cannot be loaded without pickle ({exc})"
        ) from None
    except (OSError, EOFError) as exc:
        raise InputDataError(f"{source}: corrupt array data ({exc})") from None
    if isinstance(loaded, np.ndarray):
        return loaded
    values = list(loaded.values())  # old files stored an .npz archive
    if len(values) != 1:
        raise InputDataError(f"{source}: an array entry holds {len(values)} arrays")
    return np.asarray(values[0])


def _object(pairs: list[tuple[str, Any]], source: str) -> Any:
    dct = dict(pairs)
    legacy = {k for k, v in dct.items() if isinstance(v, str) and v == LEGACY_TYPE_MARKER}
    if dct.get(TYPE_MARKER) == "ndarray" or legacy & _LEGACY_ARRAY_KEYS:
        return _decode_array(dct, source)
    return dct


def load_json(path: Path) -> Any:
    """Decode one Polygraphy JSON file; errors name the file."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputDataError(f"{source}: cannot read ({exc})") from None
    except UnicodeDecodeError:
        raise InputDataError(f"{source}: not JSON text (a binary file)") from None
    try:
        return json.loads(text, object_pairs_hook=lambda pairs: _object(pairs, source))
    except json.JSONDecodeError as exc:
        raise InputDataError(f"{source}: not valid JSON ({exc})") from None
    except RecursionError:
        raise InputDataError(f"{source}: JSON nested too deep for Python's json") from None


def iterate_json(path: Path) -> Iterator[Any]:
    """A file (a list of iterations, or one) or Polygraphy 0.53's directory of per-iteration
    `<index>.json` files, in index order."""
    path = Path(path)
    for file in sorted(path.glob("*.json")) if path.is_dir() else [path]:
        obj = load_json(file)
        yield from obj if isinstance(obj, list) else [obj]
