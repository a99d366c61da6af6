"""Fault injection against the real code: SIGKILL during --trt-update-goldens, concurrent
workers, a full disk. (Crashing runners: tests/test_isolation.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from pytest_trtcompare.goldens.store import read_golden, write_golden

from .golden_bytes import as_format_2

BIG_GOLDEN_TEST = """
import os
import numpy as np

def test_big(golden):
    value = float(os.environ.get("GOLDEN_VALUE", "1"))
    golden.check({"y": np.full(8 << 20, value, np.float32)})  # 32 MiB
"""


def _pytest(folder, *args, env=None):
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.Popen(
        command,
        cwd=folder,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def _stray_temps(folder):
    return [p for p in folder.rglob(".*.tmp")]


@pytest.mark.slow  # kills pytest at many points of an update
def test_sigkill_during_update_leaves_old_or_new_golden(pytester):
    pytester.makepyfile(test_big=BIG_GOLDEN_TEST)
    assert _pytest(pytester.path, "--trt-update-goldens").wait(120) == 0
    (golden,) = list((pytester.path / "goldens").rglob("*.safetensors"))
    previous = 1.0
    for attempt, delay in enumerate(np.linspace(0.3, 2.5, 12)):
        new = float(2 + attempt)
        process = _pytest(pytester.path, "--trt-update-goldens", env={"GOLDEN_VALUE": str(new)})
        time.sleep(float(delay))  # kill at a different point of the run each time
        process.send_signal(signal.SIGKILL)
        process.wait(60)
        stored = float(read_golden(golden).outputs["y"][0])  # it loads: intact, never half
        assert stored in (previous, new)
        if stored != new:  # killed before the rename: now update it for real
            done = _pytest(pytester.path, "--trt-update-goldens", env={"GOLDEN_VALUE": str(new)})
            assert done.wait(120) == 0
        previous = new
    # a later run sweeps temp files that killed writers left behind
    assert _pytest(pytester.path).wait(120) in (0, 1)
    assert _stray_temps(pytester.path) == []


def test_two_workers_updating_one_module_corrupt_nothing(pytester):
    pytester.makepyfile(
        test_many="""
        import numpy as np
        import pytest

        @pytest.mark.parametrize("i", range(24))
        def test_write(golden, i):
            golden.check({"y": np.full(1 << 16, i, np.float32)})
        """
    )
    result = pytester.runpytest_subprocess("-n", "2", "--trt-update-goldens")
    result.assert_outcomes(passed=24)
    goldens = sorted((pytester.path / "goldens" / "test_many").glob("*.safetensors"))
    assert len(goldens) == 24
    values = sorted(float(read_golden(p).outputs["y"][0]) for p in goldens)
    assert values == [float(i) for i in range(24)]
    pytester.runpytest_subprocess("-n", "2").assert_outcomes(passed=24)
    assert _stray_temps(pytester.path) == []


def test_a_full_disk_fails_the_test_clearly_and_keeps_the_old_golden(pytester):
    pytester.makepyfile(test_big=BIG_GOLDEN_TEST)
    assert _pytest(pytester.path, "--trt-update-goldens").wait(120) == 0
    (golden,) = list((pytester.path / "goldens").rglob("*.safetensors"))
    before = golden.read_bytes()
    pytester.makeconftest(
        """
        import resource, signal

        def pytest_configure(config):
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit: EFBIG
            resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))  # "disk" of 1 MiB
        """
    )
    process = _pytest(pytester.path, "--trt-update-goldens", env={"GOLDEN_VALUE": "5"})
    output = process.communicate(timeout=120)[0].decode()
    assert process.returncode == 1
    assert "cannot write golden" in output and "File too large" in output
    assert "(the old golden is kept)" in output and "INTERNALERROR" not in output
    assert golden.read_bytes() == before
    assert _stray_temps(pytester.path) == []
    golden.unlink()  # no golden before: the message does not claim an old one
    process = _pytest(pytester.path, "--trt-update-goldens", env={"GOLDEN_VALUE": "5"})
    output = process.communicate(timeout=120)[0].decode()
    assert process.returncode == 1
    assert "File too large (nothing was written)" in " ".join(output.split())
    assert not golden.exists() and _stray_temps(pytester.path) == []
    write_golden(golden, {"y": np.zeros(3, np.float32)})
    old = as_format_2(golden)  # an old .golden, which the update would replace: it is kept
    process = _pytest(pytester.path, "--trt-update-goldens", env={"GOLDEN_VALUE": "5"})
    output = " ".join(process.communicate(timeout=120)[0].decode().split())
    assert process.returncode == 1
    shown = old.relative_to(pytester.path)
    assert f"File too large (the old golden {shown} is kept)" in output
    assert old.is_file() and not golden.exists() and _stray_temps(pytester.path) == []
