"""What one comparison does, without pytest: specs -> inputs -> runners -> outputs -> compare.

`RunnerCache` builds each (model, framework, precision, shapes, options) runner once per
session and counts the builds. `compare_runners` runs a target and a reference on the same
feeds; `compare_layers` (layer_runs.py) compares every intermediate tensor in topological order.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import runners
from ..engine import ComparisonResult, ToleranceSpec, compare_outputs
from ..errors import InferenceError, RunnerSkip, user_code_raised
from ..inputs import Feed, load_feeds, specs_of, synthetic_feeds
from ..runners import Runner, file_digest, session_options_key
from .layer_runs import compare_layers

_log = logging.getLogger(__name__)

__all__ = ["RunnerCache", "compare_layers", "compare_runners", "make_feeds"]


def _freeze(value: Any) -> Hashable:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, (str, int, float, bool, type(None), bytes)):
        return value
    if type(value).__name__ == "SessionOptions" and type(value).__module__.startswith(
        "onnxruntime"
    ):  # by identity and settings: an object changed between tests builds a new session
        return ("id", id(value), session_options_key(value))
    return ("id", id(value))  # modules, callables: by identity


class RunnerCache:
    """One runner per (model digest, framework, precision, options) for a whole session."""

    def __init__(self, device: str | None = None, worker: str | None = None) -> None:
        #: --trt-device: 'auto', 'cpu', 'cuda', 'cuda:N' (session/devices.py); None: each
        #: runner's own default (torch: cpu, trt: cuda:0)
        self.device_choice = device
        self.worker = worker  # this process's pytest-xdist worker id ('gw3'), else None
        self._devices: dict[str, str | None] = {}
        self._runners: dict[Hashable, Runner] = {}
        self._proto_digests: dict[int, tuple[Any, str]] = {}  # id -> (ModelProto, digest)
        self.builds: Counter[tuple[str, str]] = Counter()
        self.models: dict[tuple[str, str], set[Hashable]] = {}  # distinct models per runner kind

    def model_key(self, model: Any) -> Hashable:
        if isinstance(model, (str, os.PathLike)):
            path = Path(model)
            if not path.is_file():
                return ("path", str(path))  # the runner reports the missing file
            # hashed once per (path, size, mtime), the weights beside it included
            return ("onnx", file_digest(path))
        if type(model).__name__ == "ModelProto" and hasattr(model, "SerializeToString"):
            # hashing a big model costs; do it once per object (kept alive, so ids stay unique)
            known = self._proto_digests.get(id(model))
            if known is None or known[0] is not model:
                known = (model, hashlib.sha256(model.SerializeToString()).hexdigest())
                self._proto_digests[id(model)] = known
            return ("onnx", known[1])
        if isinstance(model, (bytes, bytearray)):
            return ("onnx", hashlib.sha256(bytes(model)).hexdigest())
        return ("object", id(model))

    def device(self, framework: str) -> str | None:
        """This process's device for `framework` under --trt-device (an xdist worker's own
        GPU), found once; None: the runner's own default (TensorRT under `auto` on a machine
        without a GPU, whose own probe then says why it cannot run)."""
        if self.device_choice is None:
            return None
        if framework not in self._devices:
            from .devices import device_for

            fixed = self.device_choice == "cpu" or self.device_choice.startswith("cuda:")
            count = 0 if fixed else runners.visible_device_count(framework)
            found: str | None = device_for(self.device_choice, self.worker, count)
            needs_gpu = "cpu" not in runners.capabilities(framework).devices
            if needs_gpu and self.device_choice == "auto" and count == 0:
                found = None
            self._devices[framework] = found
        return self._devices[framework]

    def get(self, name: str, model: Any, precision: str = "fp32", **options: Any) -> Runner:
        placed = None
        if "cuda" in runners.capabilities(name).devices and "device" not in options:
            placed = self.device(name)  # the marker's or call's device wins
            if placed is not None:
                options["device"] = placed
        model_key = self.model_key(model)
        key = (model_key, name, precision, _freeze(options))
        runner = self._runners.get(key)
        if runner is None:
            try:
                runner = runners.create(name, model, precision, **options)
            except RunnerSkip as exc:
                if placed is None:
                    raise
                raise type(exc)(f"{exc} (--trt-device={self.device_choice})") from None
            self._runners[key] = runner
            self.builds[(name, precision)] += 1
            self.models.setdefault((name, precision), set()).add(model_key)
        else:
            _log.debug("reusing the %s runner built earlier in this session", runner.name)
        return runner

    def built(self) -> list[Runner]:
        """Every runner this cache built, in the order it built them."""
        return list(self._runners.values())

    def close(self) -> None:
        for runner in self._runners.values():
            runner.close()
        self._runners.clear()


def make_feeds(
    runner: Runner,
    *,
    inputs: Any = None,
    seed: int = 1,
    val_range: Any = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    iterations: int = 1,
) -> list[Feed]:
    """Explicit inputs (a feed, a list of feeds, a file or loader) or synthetic ones."""
    if inputs is None:
        specs = specs_of(runner, shapes)
        return synthetic_feeds(specs, iterations, seed=seed, val_range=val_range, shapes=shapes)
    if isinstance(inputs, Mapping):
        return [{str(k): np.asarray(v) for k, v in inputs.items()}]
    names = [spec.name for spec in runner.input_specs()]
    return load_feeds(inputs, names)


def compare_runners(
    target: Runner,
    reference: Runner,
    feeds: Iterable[Feed],
    tolerance: ToleranceSpec = None,
    **tolerance_fields: Any,
) -> list[ComparisonResult]:
    """Run both on every feed (the reference is `expected`); one result per iteration."""
    results = []
    for feed in feeds:
        expected = reference.infer(feed)
        actual = target.infer(feed)
        results.append(compare_outputs(actual, expected, tolerance, **tolerance_fields))
    return results


def numbered(infer: Any, feed: Feed, index: int, total: int) -> dict[str, np.ndarray]:
    """infer(feed); a framework's error says which iteration's feed it failed on."""
    __tracebackhide__ = user_code_raised
    try:
        outputs: dict[str, np.ndarray] = infer(feed)
    except InferenceError as exc:
        if total < 2:
            raise
        failure = InferenceError(f"iteration {index} of {total}: {exc}")
        failure.details = exc.details
        raise failure from exc.__cause__
    return outputs
