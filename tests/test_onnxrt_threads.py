"""Sessions built by the onnxrt runner do not spin-wait unless the user's session_options
say so; the user's session_options are used as given (issue 25: spinning threads burned
as much CPU as the inference, taken from the other xdist workers)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.errors import RunnerOptionError
from pytest_trtcompare.runners.onnxrt import QUIET_THREADS

from .onnx_models import layer_chain


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "chain.onnx"
    onnx.save_model(layer_chain(), str(path))
    return path


def _entry(session: onnxruntime.InferenceSession, key: str) -> str | None:
    return _entry_of(session.get_session_options(), key)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_sessions_of_the_runner_do_not_spin(model_file, precision):
    runner = runners.create("onnxrt", model_file, precision)
    assert {key: _entry(runner.session, key) for key in QUIET_THREADS} == QUIET_THREADS


def test_the_users_session_options_are_used_as_given(model_file):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    runner = runners.create("onnxrt", model_file, session_options=options)
    assert runner.session.get_session_options().intra_op_num_threads == 1
    assert all(_entry(runner.session, key) is None for key in QUIET_THREADS)
    assert all(_entry_of(options, key) is None for key in QUIET_THREADS)  # not changed


def _entry_of(options: onnxruntime.SessionOptions, key: str) -> str | None:
    try:
        return str(options.get_session_config_entry(key))
    except RuntimeError:  # onnxruntime: no such entry
        return None


def test_results_do_not_depend_on_spinning(model_file):
    spinning = onnxruntime.SessionOptions()
    for key in QUIET_THREADS:
        spinning.add_session_config_entry(key, "1")
    x = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    quiet = runners.create("onnxrt", model_file).infer({"x": x})
    busy = runners.create("onnxrt", model_file, session_options=spinning).infer({"x": x})
    assert quiet.keys() == busy.keys()
    for name in quiet:
        np.testing.assert_array_equal(quiet[name], busy[name])


@pytest.mark.parametrize("wrong", [{"intra_op_num_threads": 1}, "threads=1", 3])
def test_session_options_of_another_kind_is_an_error_naming_the_option(model_file, wrong):
    with pytest.raises(RunnerOptionError) as caught:
        runners.create("onnxrt", model_file, session_options=wrong)
    assert str(caught.value) == (
        f"onnxrt option session_options={wrong!r} ({type(wrong).__name__}) takes an "
        "onnxruntime.SessionOptions, e.g. options = onnxruntime.SessionOptions(); "
        "options.intra_op_num_threads = 1"
    )


def test_session_options_of_another_kind_on_a_marker_is_one_error_at_setup(pytester):
    onnx.save_model(layer_chain(), str(pytester.path / "chain.onnx"))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compare_frameworks(
            model="chain.onnx",
            frameworks=["onnxrt", "onnxref"],
            options={"onnxrt": {"session_options": {"intra_op_num_threads": 1}}},
        )
        def test_chain():
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_chain[[]onnxref-fp32[]]*",
            "RunnerOptionError: onnxrt option session_options={'intra_op_num_threads': 1}"
            " (dict) takes an onnxruntime.SessionOptions, e.g. *",
        ]
    )
    assert "pytest_trtcompare/" not in result.stdout.str()
