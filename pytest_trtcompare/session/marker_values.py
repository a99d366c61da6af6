"""Checking single marker values: one message per mistake, naming the test, the argument, what
it got and what it takes. numpy numbers are numbers; booleans must be booleans."""

from __future__ import annotations

import difflib
import numbers
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..engine import LAYER_DTYPES, LAYER_MODES, PRECISIONS, ToleranceTable
from ..errors import MarkerError, ToleranceError, UnknownFrameworkError
from ..runners import canonical_framework, check_framework_name

Shapes = Mapping[str, tuple[int, ...]]


class Checker:
    """Raises MarkerError in one format: '<test>: @pytest.mark.<marker>(<arg>=...): ...'."""

    def __init__(self, where: str, marker: str) -> None:
        self.where = where
        self.marker = marker

    def fail(self, argument: str | None, got: Any, takes: str) -> MarkerError:
        what = f"@pytest.mark.{self.marker}" + (f"({argument}=...)" if argument else "")
        return MarkerError(f"{self.where}: {what} got {show(got)}; it takes {takes}")


def show(value: Any) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(value).__name__})"


def is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def model_path(model: str | os.PathLike[str], base: Path | None) -> str:
    """Relative model paths resolve against the test file's folder (the same from any cwd)."""
    path = Path(model)
    if not path.is_absolute() and base is not None:
        path = base / path
    return str(path)


def is_model(value: Any) -> bool:
    if isinstance(value, (str, os.PathLike, bytes, bytearray)) or callable(value):
        return True
    return hasattr(value, "SerializeToString") or hasattr(value, "forward")


def framework_list(value: Any, check: Checker) -> tuple[str, ...]:
    if isinstance(value, str):  # one name alone would be compared with itself
        listed = [part.strip() for part in value.split(",")]
        raise check.fail("frameworks", value, f"a list: frameworks={listed!r}")
    names = value
    if not isinstance(names, (list, tuple)) or not names:
        raise check.fail("frameworks", value, "a list of framework names, e.g. ['trt', 'onnxrt']")
    for name in names:
        if not isinstance(name, str):
            raise check.fail("frameworks", value, "a list of framework names (str)")
        if "," in name:
            listed = [part.strip() for part in name.split(",")]
            raise check.fail("frameworks", value, f"one name per item: frameworks={listed!r}")
        try:
            check_framework_name(name)
        except UnknownFrameworkError as exc:
            raise MarkerError(f"{check.where}: @pytest.mark.compare_frameworks: {exc}") from None
    names = [canonical_framework(name) for name in names]  # 'tensorrt' is 'trt'
    if len(set(names)) != len(names):
        raise check.fail("frameworks", value, "each framework once")
    return tuple(names)


def val_range(value: Any, check: Checker) -> Any:
    takes = "(low, high) with low <= high, or a dict of input name or dtype to (low, high)"

    def pair(item: Any) -> tuple[float, float]:
        if (
            not isinstance(item, (list, tuple))
            or len(item) != 2
            or not all(is_real(v) and np.isfinite(float(v)) for v in item)
            or float(item[0]) > float(item[1])
        ):
            raise check.fail("val_range", value, takes)
        return float(item[0]), float(item[1])

    if value is None:
        return None
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise check.fail("val_range", value, takes)
        return {k: pair(v) for k, v in value.items()}
    return pair(value)


def outputs(value: Any, check: Checker) -> str | tuple[str, ...] | None:
    if value is None or value == "all":
        return value  # type: ignore[no-any-return]
    if isinstance(value, str) and difflib.get_close_matches(value.lower(), ["all"], cutoff=0.8):
        raise check.fail("outputs", value, "'all' (every tensor: did you mean it?) or output names")
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise check.fail("outputs", value, "'all' or a list of output names")


def layer_options(kwargs: Mapping[str, Any], check: Checker) -> dict[str, str]:
    """layers= ("gate" | "report") and layer_dtypes= ("float" | "all"), with outputs="all"."""
    found = {}
    for argument, choices in (("layers", LAYER_MODES), ("layer_dtypes", LAYER_DTYPES)):
        value = kwargs.get(argument)
        if value is None:
            continue
        if not isinstance(value, str) or value not in choices:
            raise check.fail(argument, value, " or ".join(repr(c) for c in choices))
        if kwargs.get("outputs") != "all":
            raise check.fail(
                argument, value, "a per-layer comparison: add outputs='all' to the marker"
            )
        found[argument] = value
    return found


def tolerance(value: Any, check: Checker) -> Any:
    try:
        ToleranceTable(value)
    except ToleranceError as exc:
        raise MarkerError(
            f"{check.where}: @pytest.mark.compare_frameworks(tolerance=...): {exc}"
        ) from None
    return value


def mapping_of(value: Any, argument: str, check: Checker, takes: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise check.fail(argument, value, takes)
    return dict(value)


def precisions_marker(args: Sequence[Any], where: str) -> tuple[str, ...]:
    """@pytest.mark.precisions('fp16', 'bf16') -> ('fp16', 'bf16')."""
    check = Checker(where, "precisions")
    if not args:
        raise check.fail(None, (), f"one or more of {', '.join(PRECISIONS)}")
    names = []
    for value in args:
        if not isinstance(value, str) or value.strip().lower() not in PRECISIONS:
            raise check.fail(None, value, f"precision names from {', '.join(PRECISIONS)}")
        names.append(value.strip().lower())
    return tuple(dict.fromkeys(names))


def shapes_marker(
    args: Sequence[Any], kwargs: Mapping[str, Any], where: str
) -> tuple[tuple[Shapes, ...], tuple[str, ...] | None]:
    """@pytest.mark.shapes({"x": (1, 3)}, {"x": (8, 3)}, ids=[...]) -> shape sets and ids."""
    check = Checker(where, "shapes")
    takes = "shape sets: dicts of input name to a shape of ints >= 0, e.g. {'x': (1, 3, 224, 224)}"
    unknown = sorted(set(kwargs) - {"ids"})
    if unknown:
        raise MarkerError(f"{where}: @pytest.mark.shapes got unknown argument(s) {unknown}")
    if not args:
        raise check.fail(None, (), takes)
    sets = []
    for value in args:
        if not isinstance(value, Mapping) or not value:
            raise check.fail(None, value, takes)
        shapes = {}
        for name, shape in value.items():
            if (
                not isinstance(name, str)
                or not isinstance(shape, (list, tuple))
                or not all(is_int(d) and d >= 0 for d in shape)
            ):
                raise check.fail(None, value, takes)
            shapes[name] = tuple(int(d) for d in shape)
        sets.append(shapes)
    ids = kwargs.get("ids")
    if ids is not None:
        if (
            not isinstance(ids, (list, tuple))
            or len(ids) != len(sets)
            or not all(isinstance(i, str) and i for i in ids)
            or len(set(ids)) != len(ids)
        ):
            raise check.fail("ids", ids, f"{len(sets)} distinct non-empty strings, one per set")
        ids = tuple(ids)
    return tuple(sets), ids
