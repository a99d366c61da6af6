"""Input feeds: seeded synthetic data from input specs, and loaders for saved inputs.

Synthetic data is deterministic across platforms and independent per input: each input's
generator is seeded by (seed, iteration, crc32 of its name), so adding an input changes no
other. Default value range: [0, 1] for floats (Polygraphy's), [0, 10] for integers, 50/50
for bool; integer inputs that index an embedding table (token ids) draw from its rows when the
model says how many (`TensorSpec.value_range`). A dynamic dimension without a shape is an
error, never a silent 1.
"""

from __future__ import annotations

import importlib.util
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .engine import dtype_from_name
from .errors import InputDataError
from .goldens import iterate_json, load_onnx_test_data
from .runners import TensorSpec, shape_fits

Feed = dict[str, np.ndarray]
ValueRange = tuple[float, float]

DEFAULT_SEED = 1
_DEFAULT_RANGES: dict[str, ValueRange] = {"float": (0.0, 1.0), "int": (0, 10), "bool": (0, 1)}


def _kind(dtype: np.dtype) -> str:
    if dtype.kind == "b":
        return "bool"
    if dtype.kind in "iu":
        return "int"
    return "float"


def val_range_record(val_range: Any) -> list[float] | dict[str, list[float]] | None:
    """A val_range as a golden's metadata records it: [low, high], or {input or dtype name:
    [low, high]} (the "" key: every other input); None where none was given."""
    if val_range is None:
        return None
    if isinstance(val_range, Mapping):
        return {str(key): [float(v) for v in pair] for key, pair in val_range.items()}
    return [float(v) for v in val_range]


def _value_range(spec: TensorSpec, dtype: np.dtype, val_range: Any) -> ValueRange:
    """Per input name > per dtype name > "" default > the model's own range (the rows of an
    embedding table) > built-in per kind."""
    if val_range is not None and not isinstance(val_range, Mapping):
        low, high = val_range
        return float(low), float(high)
    for key in (spec.name, spec.dtype, ""):
        if val_range is not None and key in val_range:
            low, high = val_range[key]
            return float(low), float(high)
    if spec.value_range is not None and _kind(dtype) == "int":
        return spec.value_range
    return _DEFAULT_RANGES[_kind(dtype)]


def concrete_shape(spec: TensorSpec, shapes: Mapping[str, Sequence[int]] | None) -> tuple[int, ...]:
    """The input's shape: from `shapes` when given, else its static shape, else an error."""
    if shapes and spec.name in shapes:
        shape = tuple(int(d) for d in shapes[spec.name])
        if not shape_fits(spec, shape):
            raise InputDataError(
                f"shape {shape} given for input {spec.name!r} does not fit {spec.describe()}"
            )
        return shape
    if spec.shape is None:
        problem = f"input {spec.describe()} has no known rank"
        raise InputDataError(
            f"{problem}: give its whole shape in @pytest.mark.shapes or shapes=, e.g. "
            f"{{{spec.name!r}: (2, 3, 224, 224)}} for an image batch",
            (problem, spec.name, (2, 3, 224, 224)),
        )
    if spec.is_dynamic:
        example = tuple(d if isinstance(d, int) and d >= 0 else 1 for d in spec.shape)
        problem = f"input {spec.describe()} has dynamic dimensions"
        raise InputDataError(
            f"{problem}: give its shape in @pytest.mark.shapes or shapes=, e.g. "
            f"{{{spec.name!r}: {example}}}",
            (problem, spec.name, example),
        )
    assert spec.shape is not None
    return tuple(int(d) for d in spec.shape)  # type: ignore[arg-type]


def _numpy_dtype(name: str) -> np.dtype:
    try:
        return dtype_from_name(name)
    except ValueError as exc:
        raise InputDataError(f"cannot make synthetic data of dtype {name!r}: {exc}") from None


def synthetic_feed(
    specs: Sequence[TensorSpec],
    *,
    seed: int = DEFAULT_SEED,
    val_range: Any = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    iteration: int = 0,
) -> Feed:
    """One seeded feed for `specs`; inputs named in `shapes` get those shapes."""
    unknown = sorted(set(shapes or {}) - {spec.name for spec in specs})
    if unknown:
        raise InputDataError(
            f"shapes name input(s) {unknown} that the model does not have; its inputs are "
            f"{[spec.describe() for spec in specs]}"
        )
    _check_range_names(specs, val_range)
    feed: Feed = {}
    for spec in specs:
        if spec.kind != "tensor":
            raise InputDataError(
                f"input {spec.describe()} is a {spec.kind}: synthetic data makes tensors only; "
                "give its value with inputs= (a list of arrays, or None for an empty optional)"
            )
        dtype = _numpy_dtype(spec.dtype)
        shape = concrete_shape(spec, shapes)
        rng = np.random.default_rng([seed, iteration, zlib.crc32(spec.name.encode())])
        low, high = _value_range(spec, dtype, val_range)
        kind = _kind(dtype)
        if kind == "bool":
            feed[spec.name] = rng.random(shape) < 0.5
        elif kind == "int":
            info = np.iinfo(dtype)
            low_i, high_i = max(int(low), int(info.min)), min(int(high), int(info.max))
            feed[spec.name] = rng.integers(low_i, high_i, size=shape, endpoint=True).astype(dtype)
        else:
            feed[spec.name] = rng.uniform(low, high, size=shape).astype(dtype)
    return feed


def specs_of(runner_or_specs: Any, shapes: Mapping[str, Any] | None = None) -> list[TensorSpec]:
    """A runner's input specs (or the specs given), with those of the optional inputs that
    `shapes` names where the runner has them (a torch forward's parameters with defaults)."""
    if not hasattr(runner_or_specs, "input_specs"):
        return list(runner_or_specs)
    specs: list[TensorSpec] = runner_or_specs.input_specs()
    reason = getattr(runner_or_specs, "no_specs_reason", None)
    problem = reason() if reason is not None and not specs else None
    if problem:
        raise InputDataError(problem)
    optional = getattr(runner_or_specs, "specs_for", None)
    if optional is not None and shapes:
        specs = [*specs, *optional(list(shapes))]
    return specs


def _check_range_names(specs: Sequence[TensorSpec], val_range: Any) -> None:
    """A val_range key must name an input or a dtype: a typo must not pass unnoticed."""
    if not isinstance(val_range, Mapping):
        return
    names = {spec.name for spec in specs}
    unknown = []
    for key in val_range:
        if key == "" or key in names:
            continue
        try:
            dtype_from_name(str(key))
        except ValueError:
            unknown.append(key)
    if unknown:
        raise InputDataError(
            f"val_range names {unknown}, which is neither an input of the model nor a dtype; "
            f"its inputs are {[spec.describe() for spec in specs]}"
        )


def synthetic_feeds(specs: Sequence[TensorSpec], iterations: int = 1, **options: Any) -> list[Feed]:
    return [synthetic_feed(specs, iteration=i, **options) for i in range(iterations)]


# -- loaders ----------------------------------------------------------------------------------
def _load_npz(path: Path) -> list[Feed]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return [{name: archive[name] for name in archive.files}]
    except (OSError, ValueError, EOFError) as exc:
        raise InputDataError(f"{path}: not a readable .npz of inputs ({exc})") from None


def _load_polygraphy(path: Path) -> list[Feed]:
    feeds = []
    for index, item in enumerate(iterate_json(path)):
        if not isinstance(item, Mapping) or not all(
            isinstance(v, np.ndarray) for v in item.values()
        ):
            raise InputDataError(f"{path}: iteration {index} is not a mapping of name to array")
        feeds.append(dict(item))
    return feeds


def _load_script(spec: str) -> list[Feed]:
    path_text, _, function_name = spec.rpartition(":") if spec.count(":") else (spec, "", "")
    path = Path(path_text or spec)
    function_name = function_name or "load_data"
    if not path.is_file():
        raise InputDataError(f"data loader script {str(path)!r} does not exist")
    module_spec = importlib.util.spec_from_file_location(f"_trtcompare_loader_{path.stem}", path)
    if module_spec is None or module_spec.loader is None:
        raise InputDataError(f"cannot import data loader script {str(path)!r}")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    function = getattr(module, function_name, None)
    if not callable(function):
        raise InputDataError(f"data loader script {str(path)!r} has no function {function_name!r}")
    return _from_iterable(function(), f"{path}:{function_name}")


def _from_iterable(items: Any, source: str) -> list[Feed]:
    if isinstance(items, Mapping):
        items = [items]
    feeds = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InputDataError(
                f"{source}: item {index} is {type(item).__name__}, not a feed dict"
            )
        feeds.append({str(name): np.asarray(value) for name, value in item.items()})
    if not feeds:
        raise InputDataError(f"{source}: yielded no feeds")
    return feeds


def load_feeds(
    source: str | os.PathLike[str] | Callable[[], Iterable[Mapping[str, Any]]] | Iterable[Any],
    names: Sequence[str] | None = None,
) -> list[Feed]:
    """Feeds (one per iteration) from a .npz, Polygraphy JSON (file or per-iteration directory),
    an ONNX test-data directory, a 'script.py[:function]' data loader, or a generator."""
    if callable(source):
        return _from_iterable(source(), getattr(source, "__qualname__", "data loader"))
    if isinstance(source, (str, os.PathLike)):
        text = os.fspath(source)
        if ".py" in text and (text.endswith(".py") or ".py:" in text):
            return _load_script(text)
        path = Path(text)
        if not path.exists():
            raise InputDataError(f"input data {text!r} does not exist")
        if path.suffix == ".npz":
            return _load_npz(path)
        if path.suffix == ".json" or (path.is_dir() and any(path.glob("*.json"))):
            return _load_polygraphy(path)
        if path.is_dir():
            return load_onnx_test_data(path, names)
        raise InputDataError(
            f"input data {text!r}: expected .npz, Polygraphy .json, an ONNX test-data directory "
            "or a data loader script"
        )
    return _from_iterable(source, "input iterable")


def iterate(feeds: Iterable[Feed]) -> Iterator[Feed]:
    """Fresh copies, so a runner that writes into its feed cannot change the next one's."""
    for feed in feeds:
        yield {name: np.array(value, copy=True) for name, value in feed.items()}
