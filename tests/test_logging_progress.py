"""Logging and progress (issue 26): records under `pytest_trtcompare` at INFO for runner
builds, conversions, golden writes and isolated workers; progress lines of long work on a TTY,
none under -q, without a TTY or on xdist workers."""

from __future__ import annotations

import logging
import os
import pty
import re
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from pytest_trtcompare import progress, runners
from pytest_trtcompare.runners.isolated import RunnerCrashed

from .onnx_models import layer_chain
from .pytester_helpers import XDIST, run

ROOT = Path(__file__).resolve().parents[1]
SECONDS = r"\d+\.\d\d s"


def _records(caplog, name):
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == name]


# -- records, in-process ------------------------------------------------------------------------
def test_a_runner_build_is_recorded_with_framework_model_precision_device_and_time(caplog):
    caplog.set_level(logging.INFO, logger="pytest_trtcompare")
    runner = runners.create("onnxrt", layer_chain(seed=2602), "fp32")
    runner.close()
    ((level, message),) = _records(caplog, "pytest_trtcompare.runners.registry")
    assert level == "INFO"
    assert message.startswith("built onnxrt runner of <ModelProto chain> at fp32 (device cpu) in ")
    assert message.endswith(" s")


def test_an_fp16_conversion_is_recorded_once_with_its_route_and_kept_nodes(caplog):
    caplog.set_level(logging.DEBUG, logger="pytest_trtcompare")
    model = layer_chain(seed=2601)  # a model no other test converts (conversions are cached)
    runners.create("onnxref", model, "fp16").close()
    runners.create("onnxrt", model, "fp16").close()
    records = _records(caplog, "pytest_trtcompare.runners.precision")
    converted = [m for level, m in records if level == "INFO"]
    assert len(converted) == 1, records  # the second runner reuses the conversion
    assert converted[0].startswith("converted <ModelProto chain> to fp16 in ")
    assert converted[0].endswith(
        " s (fp16 by onnxruntime.transformers.float16 (keep_io_types=True, float32 I/O); "
        "0 nodes kept in fp32)"
    )
    assert ("DEBUG", "<ModelProto chain> at fp16: converted earlier in this process") in records


def test_isolated_workers_are_recorded_start_build_crash_replacement_and_stop(caplog):
    caplog.set_level(logging.INFO, logger="pytest_trtcompare")
    specs = {"x": ("float32", (3,))}
    runner = runners.create(
        "callable:tests.crashers:crash_on_negative", isolate=True, input_specs=specs
    )
    with pytest.raises(RunnerCrashed):
        runner.infer({"x": np.array([-1.0, 0.0, 1.0], np.float32)})
    runner.infer({"x": np.ones(3, np.float32)})  # a fresh worker
    runner.close()
    messages = [m for _, m in _records(caplog, "pytest_trtcompare.runners.isolated")]
    what = "callable runner of tests.crashers:crash_on_negative at fp32"
    first, second = re.findall(r"started isolated worker pid (\d+)", "\n".join(messages))
    assert messages[0] == f"started isolated worker pid {first} for the {what}", messages
    assert messages[1].startswith(f"isolated worker pid {first} ready in ")
    assert messages[2].startswith(f"isolated worker pid {first} died while running (runner ")
    assert messages[2].endswith("crashed with SIGSEGV); the next call starts a fresh one")
    assert messages[3] == (
        f"replacing the lost worker: started isolated worker pid {second} for the {what}"
    )
    assert messages[5] == f"stopped isolated worker pid {second} of {runner.name}"
    # the worker's own records come back through the pipe, marked with its pid
    built = [r for r in caplog.records if r.name == "pytest_trtcompare.runners.registry"]
    assert [r.getMessage().rsplit(" [", 1)[1] for r in built] == [
        f"worker pid {first}]",
        f"worker pid {second}]",
    ]


def test_nothing_is_recorded_below_the_level_pytest_sets(caplog):
    caplog.set_level(logging.WARNING, logger="pytest_trtcompare")
    runners.create("onnxrt", layer_chain(seed=2603), isolate=True).close()
    assert not [r for r in caplog.records if r.name.startswith("pytest_trtcompare")]


# -- records, as a pytest user sees them --------------------------------------------------------
GOLDEN_AND_ISOLATED = """
import numpy as np
import pytest
from tests.onnx_models import layer_chain

@pytest.mark.compare_frameworks(
    model=layer_chain(seed=7), frameworks=["onnxrt", "onnxref"], isolate=True,
)
@pytest.mark.shapes({"x": (2, 16)})
def test_isolated():
    pass

def test_golden(golden):
    golden.check({"y": np.arange(4, dtype=np.float32)})
"""


def _scenario(pytester):
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n")
    pytester.makepyfile(test_records=GOLDEN_AND_ISOLATED)


def test_log_cli_level_info_shows_the_records_live(pytester):
    _scenario(pytester)
    result = pytester.runpytest("--log-cli-level=INFO", "--trt-update-goldens")
    result.assert_outcomes(passed=2)
    result.stdout.re_match_lines(
        [
            r"-+ live log setup -+",
            r"INFO +pytest_trtcompare\.runners\.isolated:isolated\.py:\d+ started isolated worker "
            r"pid (\d+) for the onnxref runner of <ModelProto chain> at fp32",
            r"INFO +pytest_trtcompare\.runners\.registry:registry\.py:\d+ built onnxref runner of "
            rf"<model bytes> at fp32 \(device cpu\) in {SECONDS} \[worker pid \d+\]",
            rf"INFO +pytest_trtcompare\.runners\.isolated:isolated\.py:\d+ isolated worker pid \d+ "
            rf"ready in {SECONDS}",
            r"-+ live log call -+",
            r"INFO +pytest_trtcompare\.session\.golden_check:golden_check\.py:\d+ golden goldens/"
            rf"test_records/test_golden\.safetensors created: outputs y, \d+ bytes, in {SECONDS}",
            r".*-+ live log sessionfinish -+",
            r"INFO +pytest_trtcompare\.runners\.isolated:isolated\.py:\d+ stopped isolated worker "
            r"pid \d+ of onnxref-fp32",
        ]
    )


@pytest.mark.parametrize("xdist", XDIST)
def test_records_are_in_the_captured_log_with_and_without_xdist(pytester, xdist):
    """Under -n 2 live logging cannot reach the terminal (pytest-xdist); each test's captured
    log carries the records, shown here by -rP."""
    _scenario(pytester)
    result = run(pytester, "--log-level=INFO", "-rP", "--trt-update-goldens", *xdist)
    result.assert_outcomes(passed=2)
    for section in (  # the two tests' sections come in any order under xdist
        [
            r"-+ Captured log setup -+",
            r"INFO +pytest_trtcompare\.runners\.isolated:isolated\.py:\d+ started isolated "
            r"worker pid \d+ for the onnxrt runner of <ModelProto chain> at fp32",
        ],
        [
            r"-+ Captured log call -+",
            r"INFO +pytest_trtcompare\.session\.golden_check:golden_check\.py:\d+ golden goldens/"
            r"test_records/test_golden\.safetensors created: outputs y, .*",
        ],
    ):
        result.stdout.re_match_lines(section, consecutive=True)


@pytest.mark.parametrize("xdist", XDIST)
def test_nothing_is_printed_by_default(pytester, xdist):
    _scenario(pytester)
    result = run(pytester, "--trt-update-goldens", "-rA", *xdist)
    result.assert_outcomes(passed=2)
    assert "pytest_trtcompare." not in result.stdout.str()
    assert "trtcompare: " not in result.stdout.str()


def test_a_pruned_golden_is_recorded(pytester):
    _scenario(pytester)
    pytester.runpytest("--trt-update-goldens").assert_outcomes(passed=2)
    stale = pytester.path / "goldens" / "test_records" / "test_golden_old.safetensors"
    (pytester.path / "goldens" / "test_records" / "test_golden.safetensors").rename(stale)
    pytester.runpytest("--trt-update-goldens").assert_outcomes(passed=2)
    result = pytester.runpytest("--trt-prune-goldens", "--log-cli-level=INFO")
    result.assert_outcomes(passed=2)
    result.stdout.re_match_lines(
        [
            r".*-+ live log sessionfinish -+",
            r"INFO +pytest_trtcompare\.plugin\.goldens:goldens\.py:\d+ pruned unused golden "
            r"goldens/test_records/test_golden_old\.safetensors",
        ]
    )


# -- progress lines -----------------------------------------------------------------------------
@pytest.fixture
def lines(monkeypatch):
    written: list[str] = []
    monkeypatch.setattr(progress, "THRESHOLD_S", 0.05)
    previous = progress.set_writer(written.append)
    yield written
    progress.set_writer(previous)


def test_work_past_the_threshold_writes_one_line_when_it_ends(lines):
    with progress.step("quick"):
        pass
    with progress.step("building TensorRT engine model.onnx fp16") as timing:
        time.sleep(0.1)
    assert lines == [
        f"trtcompare: building TensorRT engine model.onnx fp16 ... {timing.elapsed:.1f} s"
    ]


def test_a_nested_step_that_told_its_time_is_not_told_again(lines):
    with progress.step("building onnxrt runner m.onnx fp16"), progress.step("converting"):
        time.sleep(0.1)
    assert [line.split(" ...")[0] for line in lines] == ["trtcompare: converting"]
    with progress.step("building onnxrt runner m.onnx fp16"):
        with progress.step("converting m.onnx to fp16"):
            time.sleep(0.1)
        time.sleep(0.1)  # its own share is long too
    assert [line.split(" ...")[0] for line in lines[1:]] == [
        "trtcompare: converting m.onnx to fp16",
        "trtcompare: building onnxrt runner m.onnx fp16",
    ]


def test_waiting_work_says_what_runs_then_how_long_and_failures_say_so(lines):
    with pytest.raises(RuntimeError), progress.step("building trt runner m.onnx fp16") as waiting:
        waiting.poll()  # before the threshold: nothing
        time.sleep(0.1)
        waiting.poll()
        waiting.poll()  # once only
        raise RuntimeError("no GPU")
    assert lines == [
        "trtcompare: building trt runner m.onnx fp16 ...",
        f"trtcompare: building trt runner m.onnx fp16 ... failed after {waiting.elapsed:.1f} s",
    ]


def test_only_the_main_thread_writes(lines):
    def work() -> None:
        with progress.step("in a thread"):
            time.sleep(0.1)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert lines == []


SLOW_GOLDEN = """
import numpy as np
import pytest_trtcompare.progress

pytest_trtcompare.progress.THRESHOLD_S = 0.0  # every piece of work counts as long

def test_golden(golden):
    golden.check({"y": np.arange(4, dtype=np.float32)})

def test_other():
    pass
"""


def _in_terminal(pytester, *args: str) -> str:
    """pytest run with its output on a pseudo-terminal, as a user at a shell sees it."""
    primary, secondary = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=pytester.path,
        stdin=subprocess.DEVNULL,
        stdout=secondary,
        stderr=secondary,
        env=env,
    )
    os.close(secondary)
    output, deadline = b"", time.monotonic() + 240
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 1.0)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the terminal closed: pytest exited
            break
        if not chunk:
            break
        output += chunk
    process.wait(timeout=30)
    os.close(primary)
    return output.decode(errors="replace").replace("\r\n", "\n")


WRITTEN = r"trtcompare: writing golden goldens/test_slow/test_golden\.safetensors \.\.\. \d+\.\d s"


def test_a_terminal_shows_progress_between_the_results(pytester):
    pytester.makepyfile(test_slow=SLOW_GOLDEN)
    text = _in_terminal(pytester, "--trt-update-goldens")
    lines = text.splitlines()
    assert "2 passed" in lines[-1], text
    start = next(i for i, line in enumerate(lines) if line.startswith("test_slow.py"))
    assert lines[start] == "test_slow.py "
    assert re.fullmatch(WRITTEN, lines[start + 1]), text
    assert lines[start + 2].startswith(".")  # the result, then pytest goes on
    assert len([line for line in lines if line.startswith("trtcompare: ")]) == 1


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["-q"], id="quiet"),
        pytest.param(["-n", "2"], id="xdist-n2"),
    ],
)
def test_no_progress_under_quiet_or_on_xdist_workers(pytester, args):
    pytester.makepyfile(test_slow=SLOW_GOLDEN)
    text = _in_terminal(pytester, "--trt-update-goldens", *args)
    assert "2 passed" in text and "trtcompare: " not in text, text


def test_no_progress_when_the_output_is_not_a_terminal(pytester):
    pytester.makepyfile(test_slow=SLOW_GOLDEN)
    result = pytester.runpytest_subprocess("--trt-update-goldens")  # a pipe, as on CI
    result.assert_outcomes(passed=2)
    assert "trtcompare: " not in result.stdout.str()
