"""Goldens to and from other tools: Polygraphy JSON, ONNX test data, .npz / .npy.

Polygraphy's `--save-outputs` writes a RunResults: {"lst": [[runner, [IterationResult...]]]},
each IterationResult holding {"outputs": {name: LazyArray{"values": ndarray}}}; 0.53 can also
write a directory of per-iteration `<index>.json` files. We read all of these without
Polygraphy, and write JSON that `polygraphy run --load-outputs` / `--load-inputs` accept.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import atomic_write_bytes
from ..errors import InputDataError
from .legacy import ForeignSafetensorsError
from .onnx_test_data import load_onnx_test_data
from .polygraphy_json import TYPE_MARKER, iterate_json
from .store import LEGACY_SUFFIX, SUFFIX, Golden, GoldenError, Iteration, read_golden

DEFAULT_RUNNER_NAME = "pytest-trtcompare"


def polygraphy_runs(path: Path) -> list[tuple[str, list[dict[str, np.ndarray]]]]:
    """[(runner name, [outputs per iteration])] from a RunResults file or iteration directory."""
    runs: dict[str, list[dict[str, np.ndarray]]] = {}
    for item in iterate_json(Path(path)):
        entries = item.get("lst") if isinstance(item, Mapping) else None
        if not isinstance(entries, list):
            raise GoldenError(f"{path}: not Polygraphy RunResults JSON (no 'lst')")
        for runner, iterations in entries:
            for iteration in iterations:
                raw = iteration.get("outputs", iteration) if isinstance(iteration, Mapping) else {}
                # each decoded ndarray, or LazyArray's {"values": ndarray}; others left out
                arrays = {
                    str(n): v.get("values") if isinstance(v, Mapping) else v for n, v in raw.items()
                }
                outputs = {name: a for name, a in arrays.items() if isinstance(a, np.ndarray)}
                runs.setdefault(str(runner), []).append(outputs)
    if not runs:
        raise GoldenError(f"{path}: no runner results in this Polygraphy JSON")
    return list(runs.items())


def _runner_iterations(
    path: Path, runner: str | None = None
) -> tuple[str, list[dict[str, np.ndarray]]]:
    """One runner's name and outputs of every iteration (default: the first runner)."""
    runs = dict(polygraphy_runs(path))
    name = runner if runner is not None else next(iter(runs))
    if name not in runs:
        raise GoldenError(f"{path}: no runner {name!r}; it has {sorted(runs)}")
    return name, runs[name]


def read_polygraphy_outputs(
    path: Path, runner: str | None = None, iteration: int = 0
) -> dict[str, np.ndarray]:
    """One runner's outputs of one iteration (default: the first runner, iteration 0)."""
    name, iterations = _runner_iterations(path, runner)
    if iteration >= len(iterations):
        raise GoldenError(f"{path}: runner {name!r} has {len(iterations)} iteration(s)")
    return iterations[iteration]


def _with_iterations(
    outputs: Sequence[dict[str, np.ndarray]],
    inputs: Sequence[dict[str, np.ndarray]],
    meta: dict[str, Any],
    path: Path,
) -> Golden:
    """A Golden of saved iterations (outputs and their inputs, one each per iteration)."""
    later = tuple(Iteration(o, i) for o, i in zip(outputs[1:], inputs[1:], strict=True))
    return Golden(outputs[0], inputs[0], meta, path, later=later)


def _encode(array: np.ndarray) -> dict[str, Any]:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    return {"array": base64.b64encode(buffer.getvalue()).decode(), TYPE_MARKER: "ndarray"}


def write_polygraphy_outputs(
    path: Path, iterations: Sequence[Mapping[str, np.ndarray]], runner: str = DEFAULT_RUNNER_NAME
) -> None:
    """Outputs as `polygraphy run --load-outputs` reads them."""
    results = [
        {
            "outputs": {
                name: {"values": _encode(value), TYPE_MARKER: "LazyArray"}
                for name, value in outputs.items()
            },
            "runtime": None,
            "runner_name": runner,
            TYPE_MARKER: "IterationResult",
        }
        for outputs in iterations
    ]
    document = {"lst": [[runner, results]], TYPE_MARKER: "RunResults"}
    atomic_write_bytes(Path(path), json.dumps(document, indent=4).encode())


def write_polygraphy_inputs(path: Path, feeds: Sequence[Mapping[str, np.ndarray]]) -> None:
    """Inputs as `polygraphy run --load-inputs` reads them: a list of feed dicts."""
    document = [{name: _encode(value) for name, value in feed.items()} for feed in feeds]
    atomic_write_bytes(Path(path), json.dumps(document, indent=4).encode())


#: What `load_reference` reads, for messages.
READABLE = (
    ".safetensors and .golden goldens, Polygraphy JSON .json, .npz, .npy, or a folder of "
    "ONNX test data"
)


def _plain_safetensors(path: Path) -> Golden:
    """A safetensors file of another tool: every tensor an output, its metadata the meta."""
    import safetensors
    import safetensors.numpy

    try:
        with safetensors.safe_open(path, framework="np") as handle:
            meta = dict(handle.metadata() or {})
        outputs = safetensors.numpy.load_file(path)
    except (OSError, ValueError, AttributeError, safetensors.SafetensorError) as exc:
        raise GoldenError(f"{path}: not readable outputs ({exc})") from None
    return Golden(outputs, {}, {"source": "safetensors", **meta}, path)


def load_reference(
    path: Path, names: Sequence[str] | None = None, runner: str | None = None
) -> Golden:
    """Any saved outputs as a Golden: goldens (.safetensors, .golden), Polygraphy JSON, ONNX
    test data, .npz, .npy."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise GoldenError(f"{path} does not exist")
    if path.suffix in (SUFFIX, LEGACY_SUFFIX):
        try:
            return read_golden(path)
        except ForeignSafetensorsError:
            return _plain_safetensors(path)
    if not path.is_dir() and path.suffix not in (".json", ".npz", ".npy"):
        raise GoldenError(
            f"{path}: not a format of saved outputs that trtcompare reads ({READABLE})"
        )
    if path.suffix == ".json" or (path.is_dir() and any(path.glob("*.json"))):
        _, iterations = _runner_iterations(path, runner)
        return _with_iterations(iterations, [{}] * len(iterations), {"source": "polygraphy"}, path)
    if path.is_dir():
        try:
            outputs = load_onnx_test_data(path, names, prefix="output")
            inputs = (
                load_onnx_test_data(path, None, prefix="input")
                if any(path.rglob("input_*.pb"))
                else [{}] * len(outputs)
            )
        except InputDataError as exc:
            raise GoldenError(str(exc)) from None
        if len(inputs) != len(outputs):
            raise GoldenError(
                f"{path}: {len(inputs)} data sets of inputs, {len(outputs)} of outputs"
            )
        return _with_iterations(outputs, inputs, {"source": "onnx test data"}, path)
    try:
        if path.suffix == ".npy":
            return Golden({"output": np.load(path, allow_pickle=False)}, {}, {}, path)
        with np.load(path, allow_pickle=False) as archive:
            return Golden({k: archive[k] for k in archive.files}, {}, {}, path)
    except (OSError, ValueError, EOFError) as exc:
        raise GoldenError(f"{path}: not readable outputs ({exc})") from None
