"""Run a runner in a worker process, so a crash (signal, abort, OOM kill) or a hang fails one
comparison instead of the whole pytest session.

The worker is started with the "spawn" method and gets the runner's name, model, precision and
options once. Arrays cross as (dtype, shape, raw bytes), or, above 16 MiB, as raw files in a
private temp folder; ml_dtypes' dtypes (bfloat16, float8, int4), whose numpy string is only
'<V2', cross by name. Object arrays never cross and nothing is unpickled into an array. The
worker's stderr goes to a file, whose tail is quoted when it dies. After a crash the next
call starts a fresh worker.

The worker's log records under `pytest_trtcompare` (at the level the parent's logger had when
it started it) come back over the pipe and are handled by the parent's loggers, so pytest's
logging (`--log-cli-level`, caplog) shows them, marked with the worker's pid.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from .. import progress
from ..engine import dtype_from_name
from ..errors import ModelLoadError, RunnerOptionError, TrtCompareError
from .base import Layer, Runner, TensorSpec
from .isolated_torch import export_to_file, needs_export
from .labels import model_label

_FILE_THRESHOLD = 16 << 20
_STDERR_TAIL = 2000
_ROOT_LOGGER = "pytest_trtcompare"
_log = logging.getLogger(__name__)


class RunnerCrashed(TrtCompareError):
    """The isolated runner's process died or hung; the message says how, with its stderr."""


def _pack(arrays: dict[str, Any], folder: Path, prefix: str) -> dict[str, Any]:
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
    array = np.require(value, requirements="C")  # (np.ascontiguousarray makes 0-d 1-d)
    if array.dtype.hasobject:
        raise TrtCompareError(f"{name!r} is an object array; it cannot cross processes")
    if array.nbytes > _FILE_THRESHOLD:
        path = folder / f"{prefix}.bin"
        array.tofile(path)
        return ("file", _dtype_token(array.dtype), array.shape, str(path))
    return ("bytes", _dtype_token(array.dtype), array.shape, array.tobytes())


def _dtype_token(dtype: np.dtype) -> str:
    """numpy's own dtypes by their exact string ('<f4'); ml_dtypes' (bfloat16, float8, int4),
    whose string ('<V2', '<f1') numpy cannot read back, by name."""
    try:
        if np.dtype(dtype.str) == dtype:
            return dtype.str
    except TypeError:
        pass
    return dtype.name


def _unpack(packed: dict[str, Any]) -> dict[str, Any]:
    return {name: _unpack_value(item) for name, item in packed.items()}


def _unpack_value(item: Any) -> Any:
    if item[0] == "none":
        return None
    if item[0] == "seq":
        return [_unpack_value(v) for v in item[1]]
    kind, token, shape, data = item
    dtype = dtype_from_name(token)  # '<f4' and 'bfloat16' alike
    if kind == "file":
        return np.fromfile(data, dtype=dtype).reshape(shape)
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
    logger = logging.getLogger(_ROOT_LOGGER)
    logger.setLevel(level)
    logger.addHandler(_LogRelay(connection))
    logger.propagate = False  # the parent decides where records go


def _handle_worker_record(fields: dict[str, Any]) -> None:
    record = logging.makeLogRecord(fields)
    logger = logging.getLogger(record.name)
    if logger.isEnabledFor(record.levelno):
        logger.handle(record)


def _serve(connection: Any, spec: dict[str, Any], stderr_path: str, folder: str) -> None:
    """The worker: build the runner once, then answer infer requests until told to stop."""
    with open(stderr_path, "ab", buffering=0) as stderr:
        os.dup2(stderr.fileno(), 2)
    _relay_logs(connection, spec["log_level"])
    from .isolated_torch import load_exported
    from .registry import create_local as create

    try:
        model = load_exported(spec["model"])
        runner = create(spec["name"], model, spec["precision"], **spec["options"])
        connection.send(("ready", *_shape_of(runner)))
    except BaseException as exc:  # the parent re-raises it with its type name
        connection.send(("error", type(exc).__name__, str(exc)))
        return
    calls = 0
    while True:
        message = connection.recv()
        if message[0] == "close":
            runner.close()
            return
        try:
            if message[0] == "specs_for":  # a torch runner's optional forward parameters
                specs_for = getattr(runner, "specs_for", None)
                connection.send(("specs", specs_for(message[1]) if specs_for else []))
                continue
            if message[2] is None:
                outputs = runner.infer(_unpack(message[1]))
            else:
                with runner.select_outputs(message[2]):
                    outputs = runner.infer(_unpack(message[1]))
            calls += 1
            packed = _pack(outputs, Path(folder), f"out{calls}")
            connection.send(("outputs", packed, runner.output_names(), runner.layers))
        except BaseException as exc:
            connection.send(("error", type(exc).__name__, str(exc)))


def _shape_of(runner: Runner) -> tuple[Any, ...]:
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


class IsolatedRunner(Runner):
    """The runner `name` built in a worker process (see the module docstring)."""

    framework = "isolated"
    precisions = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")  # the inner runner decides

    def __init__(
        self,
        name: str,
        model: Any,
        precision: str = "fp32",
        *,
        timeout: float | None = None,
        **options: Any,
    ) -> None:
        super().__init__(precision)
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
        ):
            raise RunnerOptionError(
                f"runner {name!r}: timeout={timeout!r}; it takes seconds > 0 (or None: no limit)"
            )
        self.inner = name
        self.timeout = timeout
        self._spec = {
            "name": name,
            "model": _sendable(model),
            "precision": precision,
            "options": options,
            "log_level": logging.WARNING,
        }
        self._label = model_label(name, model)
        self._workers = 0  # started so far: the second is a replacement
        self._folder = Path(tempfile.mkdtemp(prefix="trtcompare-isolated-"))
        self._stderr = self._folder / "stderr.txt"
        self._process: Any = None
        self._connection: Any = None
        self._local: Runner | None = None
        self._layers: list[Layer] | None = None
        if needs_export(name, model):
            if options.get("outputs") == "all":  # the exported program has no submodules
                raise ModelLoadError(
                    "torch runner: outputs='all' cannot run isolated for a module whose class "
                    "pickle cannot send (defined inside a function): its exported program "
                    "keeps no submodules to hook; define the class at module level, or run it "
                    "with isolate=False"
                )
            # a module pickle cannot send: built here for its specs, exported at the first feed
            from .registry import create_local

            self._local = create_local(name, model, precision, **options)
            self._spec["model"] = None
            self._take(_shape_of(self._local))
            return
        self._start()

    # -- process management ------------------------------------------------------------------
    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        self._stderr.write_bytes(b"")
        self._spec["log_level"] = logging.getLogger(_ROOT_LOGGER).getEffectiveLevel()
        self._process = context.Process(
            target=_serve,
            args=(child, self._spec, str(self._stderr), str(self._folder)),
            daemon=True,
        )
        self._process.start()
        child.close()
        self._connection = parent
        self._workers += 1
        framework = self.inner.partition(":")[0]
        what = f"{framework} runner of {self._label} at {self.precision}"
        pid = self._process.pid
        _log.info(
            "%s isolated worker pid %s for the %s",
            "started" if self._workers == 1 else "replacing the lost worker: started",
            pid,
            what,
        )
        where = f"building {framework} runner {self._label} {self.precision} in worker pid {pid}"
        with progress.step(where) as waiting:
            reply = self._receive("starting", waiting)
        if reply[0] == "error":
            _log.info("isolated worker pid %s could not build the %s: %s", pid, what, reply[1])
            self._stop()
            raise _rebuild(reply[1], reply[2])
        _log.info("isolated worker pid %s ready in %.2f s", pid, waiting.elapsed)
        self._take(reply[1:])

    def _take(self, shape: Any) -> None:
        specs, self._outputs, self._describe, self._layers, self.checks_feed = shape[:5]
        self.signature, self.dtypes_guessed = shape[5:]
        self._specs = list(specs)

    def _stop(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._process.kill()
            self._process.join(5)
        self._process = None

    def _crash_text(self, what: str) -> str:
        code = self._process.exitcode if self._process is not None else None
        if code is not None and code < 0:
            how = f"crashed with {signal.Signals(-code).name}"
        elif code is not None:
            how = f"exited with status {code}"
        else:
            how = what
        tail = self._stderr.read_bytes()[-_STDERR_TAIL:].decode(errors="replace").strip()
        text = f"runner {self.name} {how}"
        return f"{text}; the end of its stderr:\n{tail}" if tail else text

    def _next_message(self, wait: float) -> Any:
        """The worker's next reply within `wait` s (its log records handled on the way);
        None when there is none yet; EOFError / OSError when the pipe is closed."""
        while self._connection.poll(wait):
            message = self._connection.recv()
            if message[0] != "log":
                return message
            _handle_worker_record(message[1])
        return None

    def _receive(self, doing: str, waiting: progress.Step | None = None) -> Any:
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        pid = self._process.pid
        while True:
            try:
                message = self._next_message(0.05)
            except (EOFError, OSError):
                break
            if message is not None:
                return message
            if not self._process.is_alive():
                time.sleep(0.05)  # let a last message or stderr line land
                with contextlib.suppress(EOFError, OSError):
                    message = self._next_message(0)
                if message is not None:
                    return message
                break
            if deadline is not None and time.monotonic() > deadline:
                self._stop()
                text = self._crash_text("")
                _log.info("isolated worker pid %s timed out while %s: killed", pid, doing)
                raise RunnerCrashed(
                    f"runner {self.name} timed out after {self.timeout:g} s while {doing}"
                    + (text.split(";", 1)[1] if ";" in text else "")
                )
            if waiting is not None:
                waiting.poll()
        self._process.join(5)
        text = self._crash_text("died")
        self._process = None
        _log.info(
            "isolated worker pid %s died while %s (%s); the next call starts a fresh one",
            pid,
            doing,
            text.split(";", 1)[0],
        )
        raise RunnerCrashed(text)

    # -- runner protocol ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.inner}-{self.precision}"

    def input_specs(self) -> list[TensorSpec]:
        return list(self._specs)

    def output_names(self) -> list[str]:
        return list(self._outputs)

    def _infer(self, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self._local is not None:
            self._spec["model"] = export_to_file(self._local, feed, self._folder)
            positional = self._local.signature.positional_names  # type: ignore[attr-defined]
            if positional:  # the program takes them by position, as the module did
                self._spec["options"] = {**self._spec["options"], "input_names": positional}
            self._local.close()
            self._local = None
        if self._process is None or not self._process.is_alive():
            self._start()  # the first worker, or a fresh one after a crash
        else:
            _log.debug("isolated worker pid %s reused for %s", self._process.pid, self.name)
        self._connection.send(("infer", _pack(feed, self._folder, "in"), self._selection))
        reply = self._receive("running")
        if reply[0] == "error":
            raise _rebuild(reply[1], reply[2])
        _, packed, self._outputs, self._layers = reply
        return _unpack(packed)

    def specs_for(self, names: list[str]) -> list[TensorSpec]:
        """The inner runner's specs for optional inputs a test gives shapes for (torch)."""
        if self._local is not None:
            return self._local.specs_for(names)  # type: ignore[attr-defined, no-any-return]
        if not self.dtypes_guessed:
            return []
        if self._process is None or not self._process.is_alive():
            self._start()
        self._connection.send(("specs_for", list(names)))
        reply = self._receive("reading its inputs")
        if reply[0] == "error":
            raise _rebuild(reply[1], reply[2])
        return list(reply[1])

    def discover_layers(self, feed: dict[str, Any]) -> None:
        """outputs="all" of a runner that learns its layers by running (torch)."""
        if self._layers is not None or self._describe.get("framework") != "torch":
            return
        self.infer(feed)

    def describe(self) -> dict[str, Any]:
        return {**self._describe, "isolated": True}

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
            self._local = None
        if self._process is not None and self._process.is_alive():
            pid = self._process.pid
            try:
                self._connection.send(("close",))
                self._process.join(5)
            except (OSError, BrokenPipeError):
                pass
            _log.info("stopped isolated worker pid %s of %s", pid, self.name)
        self._stop()
        shutil.rmtree(self._folder, ignore_errors=True)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _sendable(model: Any) -> Any:
    """ModelProto as bytes (cheaper and version-proof); the rest is sent as it is."""
    import onnx

    return model.SerializeToString() if isinstance(model, onnx.ModelProto) else model


def _rebuild(type_name: str, text: str) -> Exception:
    """The worker's exception, as the same pytest-trtcompare error type where there is one."""
    from .. import errors

    error_type = getattr(errors, type_name, None)
    if isinstance(error_type, type) and issubclass(error_type, Exception):
        return error_type(text)
    return TrtCompareError(f"{type_name} in the isolated runner: {text}")
