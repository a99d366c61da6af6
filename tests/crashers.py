"""Callables that crash their process, for the isolation tests (run only in worker processes)."""

from __future__ import annotations

import ctypes
import os
import sys
import time

import numpy as np


def double(feed):
    return {"y": feed["x"] * 2}


def segfault(feed):
    sys.stderr.write("about to read address 0\n")
    sys.stderr.flush()
    ctypes.string_at(0)  # SIGSEGV
    return {}


def abort(feed):
    sys.stderr.write("assertion failed in a custom plugin\n")
    sys.stderr.flush()
    os.abort()  # SIGABRT


def hang(feed):
    time.sleep(3600)
    return {}


def hang_after_a_word(feed):
    print("stuck in a custom kernel", file=sys.stderr, flush=True)
    time.sleep(3600)
    return {}


def crash_on_negative(feed):
    """Crashes only for negative inputs: the next item must get a fresh worker."""
    if float(np.asarray(feed["x"]).min()) < 0:
        ctypes.string_at(0)
    return {"y": feed["x"] + 1}


def killed(feed):
    """What the OOM killer does to a process."""
    import signal

    os.kill(os.getpid(), signal.SIGKILL)


def echo(feed):
    """Every input back as an output of the same name (the dtype crossing tests)."""
    return {name: value for name, value in feed.items()}
