"""Long work, told on the terminal: `trtcompare: building TensorRT engine m.onnx fp16 ... 12.3 s`.

`step(what)` times a piece of work (a runner build, a precision conversion, a golden write).
When it ends after `THRESHOLD_S` or more, one line goes to the writer the plugin installed
(`set_writer`); with no writer (the default, the library used outside pytest, `-q`, a
terminal that is not a TTY, an xdist worker) nothing is written. Lines are written only from
the main thread, after the work, never by a timer thread into pytest's output. Work that waits
on another process (an isolated runner's worker) calls `Step.poll` while it waits: once past
the threshold, a line says what is running, and the completion line follows it.

A step nested in another (a conversion inside a runner build) that wrote its line is taken
off its parent's time: the parent writes a line only when its own share passed the threshold.
The callers log their records themselves (they know the device, the sizes); this module only
measures and writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: Seconds after which work counts as long (tests lower it instead of sleeping).
THRESHOLD_S = 2.0
PREFIX = "trtcompare: "

Writer = Callable[[str], None]
_writer: Writer | None = None
_local = threading.local()


def set_writer(writer: Writer | None) -> Writer | None:
    """Where progress lines go (None: nowhere); returns the writer it replaces."""
    global _writer
    previous, _writer = _writer, writer
    return previous


def _write(line: str) -> None:
    writer = _writer
    if writer is not None and threading.current_thread() is threading.main_thread():
        writer(PREFIX + line)


class Step:
    """One timed piece of work; `elapsed` is its time so far (or in all, once ended)."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.started = time.perf_counter()
        self.ended: float | None = None
        self.announced = False  # the "... still running" line was written
        self.told_by_children = 0.0  # seconds of nested steps that wrote their own line

    @property
    def elapsed(self) -> float:
        return (self.ended if self.ended is not None else time.perf_counter()) - self.started

    def poll(self) -> None:
        """While waiting on work elsewhere: say once what is running, past the threshold."""
        if not self.announced and self.elapsed >= THRESHOLD_S:
            self.announced = True
            _write(f"{self.what} ...")

    def _end(self, failed: bool) -> bool:
        """Stop the clock; write the completion line when due. Whether it was written."""
        self.ended = time.perf_counter()
        if not self.announced and self.elapsed - self.told_by_children < THRESHOLD_S:
            return False
        _write(f"{self.what} ... {'failed after ' if failed else ''}{self.elapsed:.1f} s")
        return True


def _stack() -> list[Step]:
    stack: list[Step] | None = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


@contextmanager
def step(what: str) -> Iterator[Step]:
    """Time the work in the `with` block (see the module doc); the Step gives `elapsed`."""
    current = Step(what)
    stack = _stack()
    stack.append(current)
    failed = True
    try:
        yield current
        failed = False
    finally:
        stack.pop()
        if current._end(failed) and stack:
            stack[-1].told_by_children += current.elapsed
