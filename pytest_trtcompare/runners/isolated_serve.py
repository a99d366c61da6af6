"""The isolated worker's side (runners/isolated.py starts it) and how arrays cross the pipe.

One worker process serves every runner of one (framework, precision, options) in a session:
it builds a runner per model when asked ("build", handle, spec), answers "infer" and
"specs_for" for a handle, closes one on "drop", and everything on "close". Arrays cross as
(dtype, shape, raw bytes), or, above 16 MiB, as raw files in a private temp folder (each
read once and removed); ml_dtypes' dtypes (bfloat16, float8, int4), whose numpy string is
only '<V2', cross by name. Object arrays never cross and nothing is unpickled into an array.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from ..engine import dtype_from_name
from ..errors import TrtCompareError
from .base import Runner

FILE_THRESHOLD = 16 << 20
ROOT_LOGGER = "pytest_trtcompare"


def pack(arrays: dict[str, Any], folder: Path, prefix: str) -> dict[str, Any]:
    return {
        name: _pack_value(name, value, folder, f"{prefix}-{index}")
        for index, (name, value) in enumerate(arrays.items())
    }


def _pack_value(name: str, value: Any, folder: Path, prefix: str) -> Any:
    """An array as (dtype, shape, bytes) or a file; a sequence as a list; None as is."""
    if value is None:
        return ("none",)
    if isinstance(value, (list, tuple)):
        return ("seq", [_pack_value(name, v, folder, f"{prefix}-{i}") for i, v in enumerate(value)])
    if hasattr(value, "detach"):  # a torch runner's tensor on its device: the host's copy
        from .torch_outputs import to_numpy

        value = to_numpy(value)
    array = np.require(value, requirements="C")  # (np.ascontiguousarray makes 0-d 1-d)
    if array.dtype.hasobject:
        raise TrtCompareError(f"{name!r} is an object array; it cannot cross processes")
    if array.nbytes > FILE_THRESHOLD:
        path = folder / f"{prefix}.bin"
        array.tofile(path)
        return ("file", _dtype_token(array.dtype), array.shape, str(path))
    return ("bytes", _dtype_token(array.dtype), array.shape, array.tobytes())


def _dtype_token(dtype: np.dtype) -> str:
    """numpy's own dtypes by their exact string ('<f4'); ml_dtypes' (bfloat16, float8, int4),
    whose string ('<V2', '<f1') numpy cannot read back, by name."""
    try:
        if np.dtype(dtype.str) == dtype:
            return str(dtype.str)
    except TypeError:
        pass
    return str(dtype.name)


def unpack(packed: dict[str, Any]) -> dict[str, Any]:
    return {name: _unpack_value(item) for name, item in packed.items()}


def _unpack_value(item: Any) -> Any:
    if item[0] == "none":
        return None
    if item[0] == "seq":
        return [_unpack_value(v) for v in item[1]]
    kind, token, shape, data = item
    dtype = dtype_from_name(token)  # '<f4' and 'bfloat16' alike
    if kind == "file":
        array = np.fromfile(data, dtype=dtype).reshape(shape)
        Path(data).unlink(missing_ok=True)  # a long-lived worker would pile them up
        return array
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


class _LogRelay(logging.Handler):
    """In the worker: each record of the main thread goes to the parent as ("log", fields)."""

    def __init__(self, connection: Any) -> None:
        super().__init__()
        self.connection = connection

    def emit(self, record: logging.LogRecord) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # the pipe is the main thread's: a second sender would garble it
        try:
            fields = {
                key: value
                for key, value in vars(record).items()
                if isinstance(value, (str, int, float)) and key != "msg"
            }
            fields["msg"] = f"{record.getMessage()} [worker pid {os.getpid()}]"
            self.connection.send(("log", fields))
        except Exception:
            self.handleError(record)


def _relay_logs(connection: Any, level: int) -> None:
    logger = logging.getLogger(ROOT_LOGGER)
    logger.setLevel(level)
    logger.addHandler(_LogRelay(connection))
    logger.propagate = False  # the parent decides where records go


def serve(connection: Any, stderr_path: str, folder: str, log_level: int) -> None:
    """The worker: build runners when asked, answer their requests until told to stop."""
    with open(stderr_path, "ab", buffering=0) as stderr:
        os.dup2(stderr.fileno(), 2)
    _relay_logs(connection, log_level)
    built: dict[int, Runner] = {}
    calls = 0
    while True:
        message = connection.recv()
        kind = message[0]
        if kind == "close":
            for runner in built.values():
                runner.close()
            return
        handle: int = message[1]
        if kind == "drop":  # no reply: the parent does not wait for it
            dropped = built.pop(handle, None)
            if dropped is not None:
                dropped.close()
            continue
        try:
            if kind == "build":
                runner = _build(message[2])
                built[handle] = runner
                connection.send(("ready", *shape_of(runner)))
                continue
            runner = built[handle]
            if kind == "specs_for":  # a torch runner's optional forward parameters
                specs_for = getattr(runner, "specs_for", None)
                connection.send(("specs", specs_for(message[2]) if specs_for else []))
                continue
            if message[3] is None:
                outputs = runner.infer(unpack(message[2]))
            else:
                with runner.select_outputs(message[3]):
                    outputs = runner.infer(unpack(message[2]))
            calls += 1
            packed = pack(outputs, Path(folder), f"out{calls}")
            seconds = runner.inference_times[-1]  # the framework's time, not the pipe's
            connection.send(("outputs", packed, runner.output_names(), runner.layers, seconds))
        except BaseException as exc:  # the parent re-raises it with its type name
            connection.send(("error", type(exc).__name__, str(exc)))


def _build(spec: dict[str, Any]) -> Runner:
    from .isolated_torch import load_exported
    from .registry import create_local

    model = load_exported(spec["model"])
    return create_local(spec["name"], model, spec["precision"], **spec["options"])


def shape_of(runner: Runner) -> tuple[Any, ...]:
    """What the parent needs to answer for the runner without asking the worker."""
    return (
        runner.input_specs(),  # TensorSpec dataclasses pickle as they are
        runner.output_names(),
        runner.describe(),
        runner.layers,  # Layer dataclasses pickle as they are
        runner.checks_feed,
        getattr(runner, "signature", None),  # a torch runner's ForwardSignature
        getattr(runner, "dtypes_guessed", False),
    )
