"""Sessions built by the onnxrt runner do not spin-wait unless the user's session_options
say so; the user's session_options are used as given (issue 25: spinning threads burned
as much CPU as the inference, taken from the other xdist workers)."""

from __future__ import annotations

import json

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


def _as_object(settings):
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = settings["intra_op_num_threads"]
    options.use_deterministic_compute = True
    for key, value in settings["config"].items():
        options.add_session_config_entry(key, value)
    return options


SETTINGS = {
    "graph_optimization_level": "ORT_DISABLE_ALL",
    "intra_op_num_threads": 1,
    "use_deterministic_compute": True,
    "config": {"session.intra_op.allow_spinning": "0"},
}


@pytest.mark.parametrize(
    ("given", "isolate"),
    [("object", False), ("dict", False), ("dict", True)],
)
def test_describe_says_which_session_options_ran(model_file, given, isolate):
    """The user's options as the session took them, an object or a dict of settings (enums
    by name; a dict crosses to an isolated worker): what can change the numbers (graph
    optimizations) or the speed (threads), recorded in reports and goldens."""
    options = _as_object(SETTINGS) if given == "object" else SETTINGS
    with runners.create("onnxrt", model_file, session_options=options, isolate=isolate) as r:
        info = r.describe()
    assert info["session_options"] == {
        "given": True,
        "graph_optimization_level": "ORT_DISABLE_ALL",
        "execution_mode": "ORT_SEQUENTIAL",
        "intra_op_num_threads": 1,
        "inter_op_num_threads": 0,
        "use_deterministic_compute": True,
        "allow_spinning": False,
    }
    assert json.loads(json.dumps(info)) == info


def test_describe_says_where_the_options_do_not(model_file):
    options = onnxruntime.SessionOptions()  # onnxruntime's own spinning default
    info = runners.create("onnxrt", model_file, session_options=options).describe()
    assert info["session_options"]["allow_spinning"] is True


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (
            "threads=1",
            "onnxrt option session_options='threads=1' (str) takes an "
            "onnxruntime.SessionOptions or a dict of its settings, e.g. "
            "{'graph_optimization_level': 'ORT_DISABLE_ALL', 'intra_op_num_threads': 1}",
        ),
        (
            3,
            "onnxrt option session_options=3 (int) takes an onnxruntime.SessionOptions or a "
            "dict of its settings, e.g. {'graph_optimization_level': 'ORT_DISABLE_ALL', "
            "'intra_op_num_threads': 1}",
        ),
        (
            {"intra_threads": 1},
            "onnxrt option session_options['intra_threads']: unknown setting; the settings "
            "are graph_optimization_level, execution_mode, execution_order, "
            "intra_op_num_threads, inter_op_num_threads, use_deterministic_compute, "
            "enable_cpu_mem_arena, enable_mem_pattern, enable_mem_reuse, log_severity_level, "
            "optimized_model_filepath, config",
        ),
        (
            {"config": ["session.intra_op.allow_spinning"]},
            "onnxrt option session_options['config']=['session.intra_op.allow_spinning']: "
            "takes a dict of config entries, e.g. {'session.intra_op.allow_spinning': '0'}",
        ),
        (
            {"intra_op_num_threads": "one"},
            "onnxrt option session_options['intra_op_num_threads']='one': takes an int",
        ),
        (
            {"use_deterministic_compute": 1},
            "onnxrt option session_options['use_deterministic_compute']=1: takes a bool",
        ),
    ],
)
def test_session_options_of_another_kind_is_an_error_naming_the_option(model_file, wrong, message):
    with pytest.raises(RunnerOptionError) as caught:
        runners.create("onnxrt", model_file, session_options=wrong)
    assert str(caught.value) == message


def test_an_enum_setting_by_an_unknown_name_lists_the_names(model_file):
    with pytest.raises(RunnerOptionError) as caught:
        runners.create(
            "onnxrt", model_file, session_options={"graph_optimization_level": "ORT_DISABLE"}
        )
    names = ", ".join(onnxruntime.GraphOptimizationLevel.__members__)
    assert str(caught.value) == (
        "onnxrt option session_options['graph_optimization_level']='ORT_DISABLE': takes one "
        f"of {names}"
    )


MARKED = """
import onnxruntime
import pytest

OPTIONS = onnxruntime.SessionOptions()
OPTIONS.intra_op_num_threads = 1

@pytest.mark.compare_frameworks(
    model="chain.onnx",
    frameworks=["onnxrt", "onnxref"],
    options={"onnxrt": {"session_options": {"intra_op_num_threads": 1}}},
)
@pytest.mark.shapes({"x": (2, 16)})
def test_settings():
    pass

@pytest.mark.compare_frameworks(
    model="chain.onnx",
    frameworks=["onnxrt", "onnxref"],
    options={"onnxrt": {"session_options": OPTIONS}},
)
@pytest.mark.shapes({"x": (2, 16)})
def test_object():
    pass
"""


@pytest.mark.parametrize("isolate", [[], ["--trt-isolate"]], ids=["in-process", "isolated"])
def test_session_options_on_a_marker_in_process_and_isolated(pytester, isolate):
    """A dict of settings runs in process and isolated; an onnxruntime.SessionOptions runs
    in process, and isolated is one error at setup naming the option (pickle cannot send
    it), never a traceback through the plugin."""
    onnx.save_model(layer_chain(), str(pytester.path / "chain.onnx"))
    pytester.makepyfile(test_marked=MARKED)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA", *isolate)
    if not isolate:
        result.assert_outcomes(passed=2)
        return
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_object[[]onnxref-fp32-bs2[]]*"])
    said = " ".join(result.stdout.str().split())  # the message wraps at any space
    assert "RunnerOptionError: runner 'onnxrt': option session_options=<onnxruntime." in said
    assert (
        "cannot be sent to an isolated worker (TypeError: " in said
        and "give session_options as a dict of its settings, e.g. {'intra_op_num_threads': "
        "1}, which can be sent, or run this runner with isolate=False (or without "
        "--trt-isolate)"
        in said
    )
    assert "pytest_trtcompare/" not in result.stdout.str()


SHARED_OPTIONS = """
import onnxruntime
import pytest

SHARED = onnxruntime.SessionOptions()
BUILT = {"object": [], "settings": []}

@pytest.mark.parametrize("threads", [1, 2, 1])
def test_changed_between_tests(runners, threads):
    SHARED.intra_op_num_threads = threads
    runner = runners.onnxrt("chain.onnx", session_options=SHARED)
    assert runner.describe()["session_options"]["intra_op_num_threads"] == threads
    BUILT["object"].append(runner)

@pytest.mark.parametrize("threads", [1, 1])
def test_as_settings(runners, threads):
    runner = runners.onnxrt("chain.onnx", session_options={"intra_op_num_threads": threads})
    BUILT["settings"].append(runner)

def test_which_were_reused():
    first, second, third = BUILT["object"]
    assert first is third and first is not second
    assert BUILT["settings"][0] is BUILT["settings"][1]
"""


def test_a_shared_session_options_changed_between_tests_builds_another_session(pytester):
    """The runners fixture keeps one runner per model and options: a SessionOptions object
    by identity and its settings (changed between tests: another session; changed back:
    the first one again), a dict of settings by its values (the same: the same session)."""
    onnx.save_model(layer_chain(), str(pytester.path / "chain.onnx"))
    pytester.makepyfile(test_shared=SHARED_OPTIONS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=6)
