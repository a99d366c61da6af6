"""Crash-isolated runners: a crash or a hang fails one comparison, never the session."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.errors import ModelLoadError
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
