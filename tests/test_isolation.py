"""Crash-isolated runners: a crash or a hang fails one comparison, never the session."""

from __future__ import annotations

import logging
import os
import re

import numpy as np
import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.errors import ModelLoadError
from pytest_trtcompare.runners import isolated
from pytest_trtcompare.runners.isolated import RunnerCrashed

from .onnx_models import layer_chain

SPECS = {"x": ("float32", (3,))}
FEED = {"x": np.array([1.0, 2.0, 3.0], np.float32)}


def _isolated(target: str, specs=SPECS, **options):
    return runners.create(
        f"callable:tests.crashers:{target}", isolate=True, input_specs=specs, **options
    )


def test_isolated_runner_gives_the_same_outputs(tmp_path):
    model = layer_chain()
    inside = runners.create("onnxrt", model)
    outside = runners.create("onnxrt", model, isolate=True)
    feed = {"x": np.random.default_rng(0).random((4, 16), dtype=np.float32)}
    np.testing.assert_array_equal(outside.infer(feed)["y"], inside.infer(feed)["y"])
    assert outside.describe()["isolated"] is True and outside.name == "onnxrt-fp32"
    assert outside.input_specs() == inside.input_specs()
    outside.close()


def test_large_arrays_cross_through_files():
    runner = _isolated("double", specs={"x": ("float32", (None,))})
    big = {"x": np.ones((5 << 20,), np.float32)}  # 20 MiB: above the in-pipe limit
    assert runner.infer(big)["y"].sum() == 2 * big["x"].size
    runner.close()


@pytest.mark.parametrize(
    ("target", "signal_name", "stderr"),
    [
        ("segfault", "SIGSEGV", "about to read address 0"),
        ("abort", "SIGABRT", "assertion failed in a custom plugin"),
    ],
)
def test_a_crash_fails_the_call_with_signal_and_stderr(target, signal_name, stderr):
    runner = _isolated(target)
    with pytest.raises(RunnerCrashed) as info:
        runner.infer(FEED)
    text = str(info.value)
    assert f"runner callable:tests.crashers:{target}-fp32 crashed with {signal_name}" in text
    assert stderr in text
    runner.close()


def test_a_hang_is_cut_off_by_the_timeout():
    runner = _isolated("hang", timeout=2)
    with pytest.raises(RunnerCrashed, match=r"timed out after 2 s while running"):
        runner.infer(FEED)
    runner.close()


def test_a_hang_names_what_the_worker_wrote_to_stderr():
    runner = _isolated("hang_after_a_word", timeout=2)
    with pytest.raises(RunnerCrashed) as info:
        runner.infer(FEED)
    assert "timed out after 2 s while running; the end of its stderr:\n" in str(info.value)
    assert str(info.value).endswith("stuck in a custom kernel")
    runner.close()


def test_the_next_call_gets_a_fresh_worker():
    runner = _isolated("crash_on_negative")
    with pytest.raises(RunnerCrashed, match="SIGSEGV"):
        runner.infer({"x": np.array([-1.0, 0.0, 1.0], np.float32)})
    assert runner.infer(FEED)["y"].tolist() == [2.0, 3.0, 4.0]
    runner.close()


def test_errors_in_the_worker_keep_their_type(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        runners.create("onnxrt", tmp_path / "missing.onnx", isolate=True)


def test_session_goes_on_after_crashes(pytester):
    root = __import__("pathlib").Path(__file__).parents[1]
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(root)!r})\n")
    pytester.makepyfile(
        test_crashing="""
        import numpy as np
        import pytest

        SPECS = {"x": ("float32", (3,))}

        @pytest.mark.compare_frameworks(
            frameworks=["callable:tests.crashers:segfault", "callable:tests.crashers:double"],
            reference="callable:tests.crashers:double", isolate=True,
            options={"callable": {"input_specs": SPECS}},
        )
        def test_segfaults():
            pass

        def test_after():
            assert True
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(
        ["*runner callable:tests.crashers:segfault-fp32 crashed with SIGSEGV*"]
    )
    assert "INTERNALERROR" not in result.stdout.str()


def _every_dtype() -> dict[str, np.ndarray]:
    """One array of each dtype the engine compares: numpy's, and ml_dtypes' low precisions."""
    import ml_dtypes

    rng = np.random.default_rng(0)
    values = rng.standard_normal(64).astype(np.float32)
    arrays = {
        name: np.asarray(values, dtype=dtype)
        for name, dtype in (("float32", np.float32), ("float16", np.float16))
    }
    arrays["bool"] = values > 0
    arrays["int64"] = (values * 100).astype(np.int64)
    low = [
        "bfloat16",
        "float8_e4m3fn",
        "float8_e4m3fnuz",
        "float8_e5m2",
        "float8_e5m2fnuz",
        "float8_e4m3b11fnuz",
        "float8_e8m0fnu",
        "float4_e2m1fn",
        "int4",
        "uint4",
        "int2",
    ]
    for name in low:
        dtype = getattr(ml_dtypes, name, None)
        if dtype is not None:
            source = np.abs(values) if name.startswith(("uint", "float8_e8m0")) else values
            arrays[name] = np.asarray(np.clip(source, -1, 1), dtype=dtype)
    return arrays


@pytest.mark.parametrize("large", [False, True], ids=["bytes", "file"])
def test_every_dtype_crosses_both_ways_unchanged(large):
    """Issue 22 item 6: ml_dtypes' dtypes are named, not sent as '<V2'; in the feed and back,
    through the pipe and (above 16 MiB) through files."""
    pytest.importorskip("ml_dtypes")
    arrays = _every_dtype()
    if large:
        arrays = {name: np.tile(array, 300_000) for name, array in arrays.items()}
    runner = runners.create("callable:tests.crashers:echo", isolate=True)
    try:
        back = runner.infer(arrays)
    finally:
        runner.close()
    assert list(back) == list(arrays)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype, name
        assert back[name].tobytes() == array.tobytes(), name


def test_zero_dimensional_arrays_keep_their_shape_both_ways():
    """A 0-d input (a legacy export's `logits_to_keep`) or output (a per-layer dynamo export's
    `sym_size`) crosses as 0-d, not as shape (1,)."""
    runner = runners.create("callable:tests.crashers:echo", isolate=True)
    try:
        back = runner.infer({"s": np.float32(2.5), "n": np.array(3, np.int64)})
    finally:
        runner.close()
    assert back["s"].shape == () and back["n"].shape == () and back["s"] == 2.5


@pytest.mark.parametrize("timeout", [-5, 0, "10", True])
def test_a_timeout_that_is_not_positive_seconds_is_an_option_error(timeout):
    from pytest_trtcompare.errors import RunnerOptionError

    with pytest.raises(RunnerOptionError, match=r"timeout=.*; it takes seconds > 0"):
        runners.create("callable:tests.crashers:echo", isolate=True, timeout=timeout)


# -- warm workers (issue 25 item 5) ---------------------------------------------------------------
def test_runners_of_one_kind_share_one_warm_worker(caplog):
    """Two models' onnxrt runners: one worker start; the second model is built in it."""
    caplog.set_level(logging.INFO, logger="pytest_trtcompare.runners.isolated")
    first, second = layer_chain(seed=1), layer_chain(seed=2)
    feed = {"x": np.random.default_rng(0).random((2, 16), dtype=np.float32)}
    outside = [runners.create("onnxrt", model, isolate=True) for model in (first, second)]
    try:
        assert len(isolated.live_workers()) == 2  # and a spare, for another kind of runner
        for model, runner in zip((first, second), outside, strict=True):
            want = runners.create("onnxrt", model).infer(feed)["y"]
            np.testing.assert_array_equal(runner.infer(feed)["y"], want)
    finally:
        for runner in outside:
            runner.close()
    messages = [r.getMessage() for r in caplog.records]
    assert len([m for m in messages if m.startswith("started isolated worker")]) == 1
    (pid,) = {int(m.split()[4]) for m in messages if m.startswith("started isolated worker")}
    assert f"isolated worker pid {pid}, warm, builds the onnxrt runner of " in "\n".join(messages)
    assert messages[-1] == f"stopped isolated worker pid {pid} of onnxrt-fp32"  # the last one
    assert isolated.live_workers() == []


CRASH_ON_ITEM_TWO = """
import numpy as np
import pytest
from tests import crashers

SPECS = {"x": ("float32", (3,))}
FEED = {"x": np.array([1.0, 2.0, 3.0], np.float32)}

@pytest.mark.parametrize("function", ["double", "segfault", "echo"])
def test_item(runners, function):
    runner = runners.callable(getattr(crashers, function), isolate=True, input_specs=SPECS)
    assert runner.infer(FEED)
"""

LIVE_WORKERS_AT_THE_END = """
import sys
sys.path.insert(0, {root!r})

def pytest_unconfigure(config):
    from pytest_trtcompare.runners import isolated
    print("LIVE WORKERS AFTER THE SESSION", isolated.live_workers())
"""


def test_a_crash_on_item_two_of_three_fails_only_item_two(pytester):
    """The three runners share one worker; item 2 kills it; item 3 gets a fresh one and
    passes; no worker outlives the session."""
    root = __import__("pathlib").Path(__file__).parents[1]
    pytester.makeconftest(LIVE_WORKERS_AT_THE_END.format(root=str(root)))
    pytester.makepyfile(test_crash=CRASH_ON_ITEM_TWO)
    result = pytester.runpytest_inprocess("-s", "-p", "no:randomly", "--log-level=INFO", "-rA")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "PASSED test_crash.py::test_item[[]double[]]",
            "PASSED test_crash.py::test_item[[]echo[]]",
            "FAILED test_crash.py::test_item[[]segfault[]] - *RunnerCrashed: runner callable-fp32 "
            "crashed with SIGSEGV*",
        ]
    )
    output = result.stdout.str()
    assert len(re.findall(r"isolated worker pid \d+, warm, builds", output)) == 1  # item 2
    assert "replacing the lost worker: started isolated worker" not in output  # a new runner
    assert len(re.findall(r"started isolated worker pid \d+", output)) == 2
    assert "LIVE WORKERS AFTER THE SESSION []" in output
    assert "INTERNALERROR" not in output


def test_no_worker_outlives_the_pytest_process(pytester):
    root = __import__("pathlib").Path(__file__).parents[1]
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(root)!r})\n")
    pytester.makepyfile(
        test_isolated="""
        from tests.onnx_models import layer_chain
        import pytest

        @pytest.mark.compare_frameworks(
            model=layer_chain(seed=7), frameworks=["onnxrt", "onnxref"], isolate=True,
        )
        @pytest.mark.shapes({"x": (2, 16)}, {"x": (3, 16)})
        def test_isolated():
            pass
        """
    )
    result = pytester.runpytest_subprocess("--log-level=INFO", "-rP")
    result.assert_outcomes(passed=2)
    pids = {int(p) for p in re.findall(r"started isolated worker pid (\d+)", result.stdout.str())}
    assert len(pids) == 2  # onnxrt and onnxref, each once for both items
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
