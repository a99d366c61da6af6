"""Run a runner in a worker process, so a crash (signal, abort, OOM kill) or a hang fails one
comparison instead of the whole pytest session.

Workers are started with the "spawn" method, and kept warm: one worker serves every runner of
one (framework, precision, options) alive in this process, each model's runner built in it
once (runners/isolated_serve.py), so a session of many models pays one worker start (a
Python importing numpy, onnx, the framework) per kind of runner, not per model. The worker's
stderr goes to a file, whose tail is quoted when it dies. A worker that dies or hangs fails
the call that was running; the runners it held are built again in a fresh worker at their
next call. The last runner of a worker to close stops it.

The worker's log records under `pytest_trtcompare` (at the level the parent's logger had when
it started it) come back over the pipe and are handled by the parent's loggers, so pytest's
logging (`--log-cli-level`, caplog) shows them, marked with the worker's pid.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import multiprocessing
import pickle
import shutil
import signal
import tempfile
import time
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import progress
from ..errors import ModelLoadError, RunnerOptionError, TrtCompareError
from .base import Layer, Runner, TensorSpec
from .computed import Computed
from .isolated_serve import ROOT_LOGGER, export_to_file, needs_export, pack, serve, shape_of, unpack
from .labels import model_label
from .registry import framework_of

_STDERR_TAIL = 2000
_log = logging.getLogger(__name__)
_handles = itertools.count(1)


class RunnerCrashed(TrtCompareError):
    """The isolated runner's process died or hung; the message says how, with its stderr."""


class _Worker:
    """One worker process and the runners (handles) it holds."""

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.users: set[int] = set()
        self.folder = Path(tempfile.mkdtemp(prefix="trtcompare-worker-"))
        self.stderr = self.folder / "stderr.txt"
        self.stderr.write_bytes(b"")
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        level = logging.getLogger(ROOT_LOGGER).getEffectiveLevel()
        self.process: Any = context.Process(
            target=serve, args=(child, str(self.stderr), str(self.folder), level), daemon=True
        )
        self.process.start()
        child.close()
        self.connection = parent
        self.pid: int = self.process.pid or 0  # set once started

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def kill(self) -> None:
        if self.alive:
            self.process.kill()
            self.process.join(5)

    def forget(self) -> None:
        """Out of the pool, its files gone (after a crash is told, or when it stopped)."""
        if _WORKERS.get(self.key) is self:
            del _WORKERS[self.key]
        self.process = None
        with contextlib.suppress(OSError):
            self.connection.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def stop(self) -> None:
        if self.alive:
            with contextlib.suppress(OSError, BrokenPipeError):
                self.connection.send(("close",))
                self.process.join(5)
        self.kill()
        self.forget()
        while not _WORKERS and _spare:  # no runner left in any worker: nor is a spare wanted
            spare = _spare.pop()
            spare.stop()
            _log.debug("stopped the spare isolated worker pid %s", spare.pid)

    def crash_text(self, runner: str, what: str) -> str:
        code = self.process.exitcode if self.process is not None else None
        if code is not None and code < 0:
            how = f"crashed with {signal.Signals(-code).name}"
        elif code is not None:
            how = f"exited with status {code}"
        else:
            how = what
        tail = self.stderr.read_bytes()[-_STDERR_TAIL:].decode(errors="replace").strip()
        text = f"runner {runner} {how}"
        return f"{text}; the end of its stderr:\n{tail}" if tail else text

    def _next_message(self, wait: float) -> Any:
        """The worker's next reply within `wait` s (its log records handled on the way);
        None when there is none yet; EOFError / OSError when the pipe is closed."""
        while self.connection.poll(wait):
            message = self.connection.recv()
            if message[0] != "log":
                return message
            record = logging.makeLogRecord(message[1])
            logger = logging.getLogger(record.name)
            if logger.isEnabledFor(record.levelno):
                logger.handle(record)
        return None

    def request(
        self,
        message: tuple[Any, ...],
        runner: str,
        doing: str,
        timeout: float | None,
        waiting: progress.Step | None = None,
    ) -> Any:
        """Send `message` and wait for the reply; RunnerCrashed when the worker dies or
        `timeout` passes (the worker is then out of the pool: its runners start again)."""
        with contextlib.suppress(OSError, BrokenPipeError):  # it died: told below
            self.connection.send(message)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                reply = self._next_message(0.05)
            except (EOFError, OSError):
                break
            if reply is not None:
                return reply
            if not self.process.is_alive():
                time.sleep(0.05)  # let a last message or stderr line land
                with contextlib.suppress(EOFError, OSError):
                    reply = self._next_message(0)
                if reply is not None:
                    return reply
                break
            if deadline is not None and time.monotonic() > deadline:
                self.kill()
                text = self.crash_text(runner, "")
                _log.info("isolated worker pid %s timed out while %s: killed", self.pid, doing)
                self.forget()
                raise RunnerCrashed(
                    f"runner {runner} timed out after {timeout:g} s while {doing}"
                    + "".join(text.partition(";")[1:])  # its stderr's end, if it wrote some
                )
            if waiting is not None:
                waiting.poll()
        self.process.join(5)
        text = self.crash_text(runner, "died")
        _log.info(
            "isolated worker pid %s died while %s (%s); the next call starts a fresh one",
            self.pid,
            doing,
            text.split(";", 1)[0],
        )
        self.forget()
        raise RunnerCrashed(text)


#: The warm workers of this process, one per (framework, precision, options).
_WORKERS: dict[Hashable, _Worker] = {}
#: A worker started beside a fresh one, for the next kind of runner: a comparison has two (its
#: target and reference), so the second one's start overlaps the first one's.
_spare: list[_Worker] = []


def _fresh_worker(key: Hashable) -> _Worker:
    """A worker for a kind of runner that has none: the spare, else one started now (and a
    spare beside it)."""
    while _spare:
        spare = _spare.pop()
        if spare.alive:
            spare.key = key
            _WORKERS[key] = spare
            return spare
        spare.stop()
    worker = _WORKERS[key] = _Worker(key)
    spare = _Worker(None)
    _spare.append(spare)
    _log.debug("isolated worker pid %s started as a spare", spare.pid)
    return worker


def live_workers() -> list[int]:
    """The pids of this process's isolated workers that are running."""
    return [worker.pid for worker in [*_WORKERS.values(), *_spare] if worker.alive]


class IsolatedRunner(Runner):
    """The runner `name` built in a worker process (see the module docstring)."""

    framework = "isolated"
    precisions = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")  # the inner runner decides
    float64 = True  # so does it for fp64 (the torch runner runs it; others refuse in the worker)

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
        # an option the worker cannot receive (pickle refuses it, as it refuses an
        # onnxruntime.SessionOptions): a RunnerOptionError naming it, not a TypeError at the
        # first send
        for key, value in options.items():
            try:
                pickle.dumps(value)
            except Exception as exc:  # pickle raises TypeError, PicklingError, AttributeError ...
                instead = (
                    "give session_options as a dict of its settings, e.g. "
                    "{'intra_op_num_threads': 1}, which can be sent"
                    if key == "session_options"
                    else "give the option as values pickle can send"
                )
                raise RunnerOptionError(
                    f"runner {name!r}: option {key}={value!r} cannot be sent to an isolated "
                    f"worker ({type(exc).__name__}: {exc}); {instead}, or run this runner with "
                    "isolate=False (or without --trt-isolate)"
                ) from None
        import onnx

        self.inner = name
        self.timeout = timeout
        self._spec = {
            "name": name,
            # a ModelProto as bytes (cheaper and version-proof); the rest is sent as it is
            "model": model.SerializeToString() if isinstance(model, onnx.ModelProto) else model,
            "precision": precision,
            "options": options,
        }
        # which runners share a worker: only a grouping (each runner is built from its own
        # spec), so options that read alike may share one
        self._key: Hashable = (name, precision, repr(sorted(options.items())))
        self._label = model_label(name, model)
        self._handle = next(_handles)
        self._lost = False  # its worker died: the next one is a replacement
        self._folder = Path(tempfile.mkdtemp(prefix="trtcompare-isolated-"))
        self._worker: _Worker | None = None
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
            self._take(shape_of(self._local))
            return
        self._attach()

    # -- its worker --------------------------------------------------------------------------
    def _attach(self) -> _Worker:
        """Its worker, with its runner built there: the one it has, else the warm worker of
        its kind (building it there), else a fresh one."""
        worker = self._worker
        if worker is not None and worker.alive and _WORKERS.get(self._key) is worker:
            _log.debug("isolated worker pid %s reused for %s", worker.pid, self.name)
            return worker
        if worker is not None:  # lost: out of the pool already, or to be taken out
            self._lost = True
            worker.users.discard(self._handle)
        framework = framework_of(self.inner)
        what = f"{framework} runner of {self._label} at {self.precision}"
        worker = _WORKERS.get(self._key)
        if worker is not None and worker.alive:
            _log.info("isolated worker pid %s, warm, builds the %s", worker.pid, what)
        else:
            if worker is not None:  # died between calls
                worker.kill()
                worker.forget()
            worker = _fresh_worker(self._key)
            _log.info(
                "%s isolated worker pid %s for the %s",
                "replacing the lost worker: started" if self._lost else "started",
                worker.pid,
                what,
            )
        self._worker = worker
        where = f"building {framework} runner {self._label} {self.precision} in worker pid "
        with progress.step(f"{where}{worker.pid}") as waiting:
            reply = worker.request(
                ("build", self._handle, self._spec), self.name, "starting", self.timeout, waiting
            )
        if reply[0] == "error":
            _log.info(
                "isolated worker pid %s could not build the %s: %s", worker.pid, what, reply[1]
            )
            self._worker = None
            if not worker.users:
                worker.stop()
            raise _rebuild(reply[1], reply[2])
        worker.users.add(self._handle)
        _log.info("isolated worker pid %s ready in %.2f s", worker.pid, waiting.elapsed)
        self._take(reply[1:])
        return worker

    def _take(self, shape: Any) -> None:
        specs, self._outputs, self._describe, self._layers, self.checks_feed = shape[:5]
        self.signature, self.dtypes_guessed = shape[5:]
        self._specs = list(specs)

    def _ask(self, message: tuple[Any, ...], doing: str) -> Any:
        worker = self._attach()
        reply = worker.request(message, self.name, doing, self.timeout)
        if reply[0] == "error":
            raise _rebuild(reply[1], reply[2])
        return reply

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
        message = ("infer", self._handle, pack(feed, self._folder, "in"), self._selection)
        _, packed, self._outputs, self._layers, self._worker_seconds = self._ask(message, "running")
        return unpack(packed)

    _worker_seconds: float | None = None

    def _timed(self, seconds: float) -> None:
        """The inference time the worker measured: a test of isolated runners reports what
        the framework took, as in-process (the pipe's cost is the isolation's)."""
        super()._timed(self._worker_seconds if self._worker_seconds is not None else seconds)

    def specs_for(self, names: list[str]) -> list[TensorSpec]:
        """The inner runner's specs for optional inputs a test gives shapes for (torch)."""
        if self._local is not None:
            return self._local.specs_for(names)  # type: ignore[attr-defined, no-any-return]
        if not self.dtypes_guessed:
            return []
        reply = self._ask(("specs_for", self._handle, list(names)), "reading its inputs")
        return list(reply[1])

    def layer_bytes(self, shapes: Mapping[str, Sequence[int]]) -> dict[str, int]:
        if self._local is not None:
            return self._local.layer_bytes(shapes)
        if self._layers is None:
            return {}
        shapes = {name: tuple(int(d) for d in shape) for name, shape in shapes.items()}
        return dict(self._ask(("layer_bytes", self._handle, shapes), "sizing its layers")[1])

    def discover_layers(self, feed: dict[str, Any]) -> None:
        """outputs="all" of a runner that learns its layers by running (torch): a run that
        records them, not their values."""
        if self._layers is not None or self._describe.get("framework") != "torch":
            return
        with self.select_outputs([]):
            self.infer(feed)

    def _what_computed(self) -> Computed | None:
        """What the runner in the worker counted, as its description brought it."""
        return Computed.of(self._describe)

    def describe(self) -> dict[str, Any]:
        return {**self._describe, "isolated": True}

    def close(self) -> None:
        if self._local is not None:
            self._local.close()
            self._local = None
        worker, self._worker = self._worker, None
        if worker is not None and self._handle in worker.users:
            worker.users.discard(self._handle)
            if worker.alive and worker.users:
                with contextlib.suppress(OSError, BrokenPipeError):
                    worker.connection.send(("drop", self._handle))
                _log.debug("isolated worker pid %s let go of %s", worker.pid, self.name)
            elif worker.alive:  # the last of its runners: the worker stops
                worker.stop()
                _log.info("stopped isolated worker pid %s of %s", worker.pid, self.name)
        shutil.rmtree(self._folder, ignore_errors=True)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _rebuild(type_name: str, text: str) -> Exception:
    """The worker's exception, as the same pytest-trtcompare error type where there is one."""
    from .. import errors

    error_type = getattr(errors, type_name, None)
    if isinstance(error_type, type) and issubclass(error_type, Exception):
        return error_type(text)
    return TrtCompareError(f"{type_name} in the isolated runner: {text}")
