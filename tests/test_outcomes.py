"""Every outcome a user meets, as the user sees it (issue 10's matrix): each numbered case of
docs/RELIABILITY.md "Outcomes of the pytest layer", run in-process and under `-n 2`."""

from __future__ import annotations

import os
import re
import shlex

import pytest

from .pytester_helpers import KNOWN_RUNNERS, run
from .pytester_helpers import XDIST_SLOW as XDIST
from .test_compare_frameworks import CONFTEST

COMPARE = 'model="model.onnx", frameworks=["onnxref", "onnxrt"]'
#: The same model with a static batch, for tests without a shapes marker.
STATIC = CONFTEST.replace('["batch", 8]', "[2, 8]").replace('["batch", 4]', "[2, 4]")


def _summary(result: pytest.RunResult) -> str:
    return result.stdout.str()


def _no_plugin_frames(result: pytest.RunResult) -> None:
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out
    assert "pytest_trtcompare/" not in out, "a traceback line points into the plugin"


# 1. a compare_frameworks test that expands to no item ---------------------------------------
NO_ITEMS = f"""
import pytest

@pytest.mark.compare_frameworks({COMPARE})
@pytest.mark.precisions("fp16")
def test_fp16_only():
    pass

@pytest.mark.compare_frameworks({COMPARE})
def test_any_precision():
    pass

def test_unrelated():
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_1_no_items_skips_with_the_reason_and_the_session_goes_on(pytester, xdist):
    pytester.makeconftest(STATIC)
    pytester.makepyfile(test_no_items=NO_ITEMS)
    result = run(pytester, "-rs", *xdist)
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED*compare_frameworks: no precision selected (@pytest.mark.precisions and "
            "--trt-precision share none)"
        ]
    )
    assert result.ret == 0
    result = run(pytester, "-rs", "--trt-precision=int8", *xdist)
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED*compare_frameworks: no target runs at int8 (targets support onnxref: fp32, "
            "fp16, bf16)"
        ]
    )
    result = run(pytester, "-rs", "--trt-frameworks=trt", *xdist)
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED*compare_frameworks: --trt-frameworks trt selects none of this test's targets "
            "(onnxref)"
        ]
    )
    _no_plugin_frames(result)


# 2. crashes and missing goldens fail; only a real write passes ------------------------------
CRASHER = """
import ctypes, os, sys

def double(feed):
    return {"y": feed["x"] * 2}

def segfault(feed):
    sys.stderr.write("about to read address 0\\n"); sys.stderr.flush()
    ctypes.string_at(0)

def abort(feed):
    sys.stderr.write("assertion failed in a custom plugin\\n"); sys.stderr.flush()
    os.abort()
"""

CRASHES = """
import pytest

SPECS = {"options": {"callable": {"input_specs": {"x": ("float32", (3,))}}}, "isolate": True}

@pytest.mark.compare_frameworks(
    frameworks=["callable:crasher:double", "callable:crasher:segfault"], **SPECS)
def test_segfault(comparison):
    pass

@pytest.mark.compare_frameworks(
    frameworks=["callable:crasher:double", "callable:crasher:abort"], **SPECS)
def test_abort(comparison):
    pass

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxref"], golden=True)
def test_golden(comparison):
    assert comparison.outputs["y"].max_abs_error == 0
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_2_crashes_and_missing_goldens_fail_and_a_write_passes(pytester, xdist):
    pytester.makeconftest(STATIC)
    pytester.makepyfile(crasher=CRASHER, test_crashes=CRASHES)
    pytester.syspathinsert()
    result = run(pytester, "-rA", *xdist)
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines_random(
        [
            "FAILED test_crashes.py::test_segfault[[]segfault-fp32[]] - *runner "
            "callable:crasher:segfault-fp32 crashed with SIGSEGV; the end of its stderr:",
            "FAILED test_crashes.py::test_abort[[]abort-fp32[]] - *crashed with SIGABRT*",
            "*about to read address 0*",
            "*assertion failed in a custom plugin*",
            "FAILED test_crashes.py::test_golden[[]onnxref-fp32[]] - *golden goldens/test_crashes/"
            "test_golden[[]onnxref-fp32[]].safetensors does not exist (nothing was written)*",
            "  pytest --trt-update-goldens 'test_crashes.py::test_golden[[]onnxref-fp32[]]'",
        ]
    )
    assert "nothing was compared" not in result.stdout.str()
    assert not list(pytester.path.rglob("*.safetensors")), "a missing golden must write nothing"
    golden_test = "test_crashes.py::test_golden"
    result = run(pytester, "-rA", "--trt-update-goldens", golden_test, *xdist)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*created 1, updated 0, unchanged 0*"])
    run(pytester, golden_test, *xdist).assert_outcomes(passed=1)
    _no_plugin_frames(result)


# 3. a framework typo is an error of its test; an uninstalled framework skips ----------------
@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize("typo", ["onnxruntim", "onxref", "pytoch"])
def test_3_framework_typo_is_an_error_of_its_test(pytester, xdist, typo):
    pytester.makeconftest(STATIC)
    pytester.makepyfile(
        test_typo=f"""
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["{typo}", "onnxrt"])
        def test_model():
            pass

        def test_unrelated():
            pass
        """
    )
    result = run(pytester, *xdist)
    result.assert_outcomes(passed=1, errors=1)  # the module's other test runs
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "test_typo.py::test_model: @pytest.mark.compare_frameworks: unknown framework "
            f"'{typo}'; "
            f"known frameworks: {KNOWN_RUNNERS}*"
        ]
    )
    _no_plugin_frames(result)


BROKEN_ENTRY_POINT = """
[pytest_trtcompare.runners]
brokenrt = broken_runner:Runner
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_3_a_runner_package_that_fails_to_import_skips(pytester, xdist, monkeypatch):
    pytester.makeconftest(STATIC)
    info = pytester.mkdir("broken_runner-0.1.dist-info")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-runner\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(BROKEN_ENTRY_POINT)
    pytester.makepyfile(broken_runner="raise ImportError('libbroken.so: cannot open')")
    pytester.makepyfile(
        test_broken="""
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["brokenrt", "onnxrt"])
        def test_model():
            pass
        """
    )
    env_path = os.pathsep.join([str(pytester.path), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", env_path)  # xdist workers import from here too
    pytester.syspathinsert()
    result = run(pytester, "-rs", *xdist)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED*runner 'brokenrt' (broken_runner:Runner) failed to import: ImportError: "
            "libbroken.so: cannot open"
        ]
    )


# 4. every marker mistake is one error of its test, at setup, naming the test and the argument
MARKER_MISTAKES = {
    "frameworks_int": (
        "compare_frameworks(model='model.onnx', frameworks=123)",
        "(frameworks=...) got 123 (int); it takes a list of framework names",
    ),
    "shapes_tuple": (
        "shapes((2, 4))",
        "@pytest.mark.shapes got (2, 4) (tuple); it takes shape sets",
    ),
    "shapes_str_dim": ("shapes({'x': ('a', 4)})", "@pytest.mark.shapes got {'x': ('a', 4)} (dict)"),
    "shapes_negative": ("shapes({'x': (-1, 8)})", "@pytest.mark.shapes got {'x': (-1, 8)} (dict)"),
    "precisions_int": (
        "precisions(16)",
        "@pytest.mark.precisions got 16 (int); it takes precision",
    ),
    "seed_negative": (
        f"compare_frameworks({COMPARE}, seed=-1)",
        "(seed=...) got -1 (int); it takes an int >= 0",
    ),
    "iterations_zero": (
        f"compare_frameworks({COMPARE}, iterations=0)",
        "(iterations=...) got 0 (int); it takes an int >= 1",
    ),
    "iterations_str": (
        f"compare_frameworks({COMPARE}, iterations='2')",
        "(iterations=...) got '2' (str)",
    ),
    "val_range_reversed": (
        f"compare_frameworks({COMPARE}, val_range=(1, 0))",
        "(val_range=...) got (1, 0) (tuple); it takes (low, high) with low <= high",
    ),
    "tolerance_str": (
        f"compare_frameworks({COMPARE}, tolerance='1e-3')",
        "(tolerance=...): tolerance must be a Tolerance, a dict of its fields",
    ),
    "tolerance_float": (f"compare_frameworks({COMPARE}, tolerance=1e-3)", "got 0.001 (float)"),
    "nan_equal_str": (
        f"compare_frameworks({COMPARE}, tolerance={{'nan_equal': 'false'}})",
        "nan_equal must be True or False, got 'false' (str)",
    ),
    "quantile_none": (
        f"compare_frameworks({COMPARE}, tolerance={{'quantile': None}})",
        "quantile must be a number, got None (NoneType)",
    ),
    "golden_str": (
        f"compare_frameworks({COMPARE}, golden='yes')",
        "(golden=...) got 'yes' (str); it takes True or False",
    ),
    "model_int": (
        "compare_frameworks(model=123, frameworks=['onnxref', 'onnxrt'])",
        "(model=...) got 123 (int); it takes a model",
    ),
    "options_key_typo": (
        f"compare_frameworks({COMPARE}, options={{'onnxruntim': {{'providers': []}}}})",
        "(options=...) names 'onnxruntim', which is not one of frameworks=['onnxref', 'onnxrt']",
    ),
    "models_key_typo": (
        f"compare_frameworks({COMPARE}, models={{'pytorch': 'model.onnx'}})",
        "(models=...) names 'pytorch', which is not one of frameworks=",
    ),
    "unknown_runner_option": (
        f"compare_frameworks({COMPARE}, options={{'onnxrt': {{'bogus': 1}}}})",
        "(options=...): runner 'onnxrt' has no option(s) bogus; it takes isolate, outputs, "
        "providers, session_options, timeout",
    ),
    "frameworks_joined": (
        "compare_frameworks(model='model.onnx', frameworks='onnxrt,onnxref')",
        "it takes a list: frameworks=['onnxrt', 'onnxref']",
    ),
    "frameworks_one_str": (
        "compare_frameworks(model='model.onnx', frameworks='onnxrt')",
        "(frameworks=...) got 'onnxrt' (str); it takes a list: frameworks=['onnxrt']",
    ),
    "frameworks_joined_item": (
        "compare_frameworks(model='model.onnx', frameworks=['onnxrt,onnxref'])",
        "it takes one name per item: frameworks=['onnxrt', 'onnxref']",
    ),
    "internal_field": (
        f"compare_frameworks({COMPARE}, reference_path='out.json')",
        "got unknown argument(s) reference_path; it takes allow_fp32_fallback, frameworks, golden,",
    ),
    "positional": (
        "compare_frameworks('model.onnx', frameworks=['onnxref', 'onnxrt'])",
        "got ('model.onnx',) (tuple); it takes keyword arguments only",
    ),
}


@pytest.mark.parametrize("xdist", XDIST)
def test_4_marker_mistakes_are_clear_errors_of_their_test(pytester, xdist):
    pytester.makeconftest(STATIC)
    for name, (marker, _) in MARKER_MISTAKES.items():
        pytester.makepyfile(
            **{
                f"test_{name}": f"import pytest\n\n@pytest.mark.{marker}\n"
                "def test_it():\n    pass\n"
            }
        )
    result = run(pytester, *xdist)
    result.assert_outcomes(errors=len(MARKER_MISTAKES))
    out = result.stdout.str().replace("\n  ", " ")  # a long message wraps, indented
    for name, (_, message) in MARKER_MISTAKES.items():
        line = next((x for x in out.splitlines() if x.startswith(f"test_{name}.py::test_it: ")), "")
        assert message in line, (name, line)
    _no_plugin_frames(result)


BAD_MARKER_BESIDE_GOOD = f"""
import pytest

@pytest.mark.compare_frameworks({COMPARE}, seed=-1)
def test_bad():
    pass

@pytest.mark.compare_frameworks({COMPARE}, seed=-1)
@pytest.mark.parametrize("n", [1, 2])
def test_bad_parametrized(n):
    pass

@pytest.mark.compare_frameworks({COMPARE})
def test_good(comparison):
    assert comparison.passed

class TestGroup:
    @pytest.mark.shapes((2, 4))
    def test_bad_shapes(self):
        pass

    def test_plain(self):
        pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_4_a_bad_marker_errors_its_test_and_the_module_runs(pytester, xdist):
    pytester.makeconftest(STATIC)
    pytester.makepyfile(test_m=BAD_MARKER_BESIDE_GOOD)
    result = run(pytester, "-rA", *xdist)
    result.assert_outcomes(passed=2, errors=4)
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # not an interrupted collection
    seed = "@pytest.mark.compare_frameworks(seed=...) got -1 (int); it takes an int >= 0"
    result.stdout.fnmatch_lines_random(
        [
            f"ERROR*test_m.py::test_bad - Failed: test_m.py::test_bad: {seed}",
            f"ERROR*test_m.py::test_bad_parametrized[[]1[]] - Failed: "
            f"test_m.py::test_bad_parametrized: {seed}",
            "ERROR*test_m.py::test_bad_parametrized[[]2[]]*",
            "ERROR*test_m.py::TestGroup::test_bad_shapes - Failed: "
            "test_m.py::TestGroup::test_bad_shapes: @pytest.mark.shapes got (2, 4) (tuple)*",
            "PASSED*test_m.py::test_good[[]onnxref-fp32[]]",
            "PASSED*test_m.py::TestGroup::test_plain",
        ]
    )
    _no_plugin_frames(result)


def test_4_numpy_numbers_are_numbers(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_np="""
        import numpy as np
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxref", "onnxrt"],
            seed=np.int64(3), iterations=np.int32(2), val_range=(np.float32(-1), np.float64(1)),
            tolerance={"atol": np.float32(1e-4), "rtol": np.float64(1e-4)})
        @pytest.mark.shapes({"x": (np.int64(2), 8)})
        def test_it(comparison):
            assert comparison.outputs["y"].tolerance.atol == pytest.approx(1e-4)
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


# 5. our own errors: the message alone; the user's tracebacks stay ---------------------------
OWN_ERRORS = """
import numpy as np
import pytest

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxref", "onnxrt"])
@pytest.mark.shapes({"nope": (1, 8)})
def test_wrong_input_name():
    pass

@pytest.mark.compare_frameworks(model="missing.onnx", frameworks=["onnxref", "onnxrt"])
def test_missing_model():
    pass

def complex_out(feed):
    return {"y": np.ones(4, np.complex64)}

def broken_user_code(feed):
    raise ValueError("the user's model code broke")

SPECS = {"x": ("float32", (4,))}
DYNAMIC = ("float32", (None, 8))

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxref", "callable"],
                                reference="onnxref", models={"callable": complex_out},
                                options={"callable": {"input_specs": {"x": DYNAMIC}}})
@pytest.mark.shapes({"x": (1, 8)})
def test_complex_output():
    pass

def test_user_code_keeps_its_traceback(runners):
    runner = runners.callable(broken_user_code, input_specs=SPECS)
    runner.infer({"x": np.ones(4, np.float32)})

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxref", "callable"],
                                reference="onnxref", models={"callable": broken_user_code},
                                options={"callable": {"input_specs": {"x": DYNAMIC}}})
@pytest.mark.shapes({"x": (1, 8)})
def test_marker_user_code(comparison):
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_5_own_errors_show_the_message_alone(pytester, xdist):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_errors=OWN_ERRORS)
    result = run(pytester, "-rA", *xdist)
    result.assert_outcomes(errors=4, failed=1)
    result.stdout.fnmatch_lines_random(
        [
            "ERROR test_errors.py::test_wrong_input_name[[]onnxref-fp32-bs1[]] - *shapes name "
            "input(s) [[]'nope'[]] that the model does not have*",
            "ERROR test_errors.py::test_missing_model[[]onnxref-fp32[]] - *ModelLoadError: model "
            f"file '{pytester.path}/missing.onnx' does not exist*",
            "ERROR test_errors.py::test_complex_output[[]callable-fp32-bs1[]] - "
            "*InvalidOutputError:"
            " output 'y' (test_errors:complex_out) is a complex tensor*",
            "FAILED test_errors.py::test_user_code_keeps_its_traceback - ValueError: the user's "
            "model code broke",
            "ERROR test_errors.py::test_marker_user_code[[]callable-fp32-bs1[]] - ValueError: "
            "the user's model code broke",
            "*raise ValueError*",  # the user's own line is shown
        ]
    )
    out = result.stdout.str()
    # the user's frames alone: none of ours between the test and the user's function
    assert [line for line in out.splitlines() if "pytest_trtcompare/" in line] == []


ERRORS_IN_A_BODY = """
import numpy as np
from pytest_trtcompare import assert_outputs_close

def close(a):
    return assert_outputs_close(a, a, atol=-1)

def test_compare(compare):
    compare(np.ones(3), np.ones(3), atol=-1)

def test_helper():
    close(np.ones(3))

def test_golden(golden):
    golden.check({"y": np.ones(3)}, rtol=float("nan"))

def test_infer(runners):
    runners.callable(lambda feed: feed).infer(np.ones(3))
"""


def test_5_an_error_of_ours_in_a_body_names_the_line_that_called(pytester):
    pytester.makepyfile(test_body=ERRORS_IN_A_BODY)
    result = pytester.runpytest()
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(
        [
            "ToleranceError: atol must be finite and >= 0, got -1.0",
            "  at test_body.py:8 in test_compare: compare(np.ones(3), np.ones(3), atol=-1)",
            "ToleranceError: atol must be finite and >= 0, got -1.0",
            "  at test_body.py:5 in close: return assert_outputs_close(a, a, atol=-1)",
            "ToleranceError: rtol must be finite and >= 0, got nan",
            '  at test_body.py:14 in test_golden: golden.check({"y": np.ones(3)}, '
            'rtol=float("nan"))',
            "FeedError: callable-fp32.infer() takes a dict of input name to array, got ndarray; "
            "pass {input_name: array}",
            "  at test_body.py:17 in test_infer: runners.callable(lambda feed: feed)"
            ".infer(np.ones(3))",
        ]
    )
    _no_plugin_frames(result)


# 6. path options written with a space ---------------------------------------------------------
@pytest.mark.parametrize("xdist", XDIST)
def test_6_path_option_with_a_space_that_moves_the_rootdir_is_a_usage_error(pytester, xdist):
    project = pytester.mkdir("project")
    shared = pytester.mkdir("shared_goldens")
    (project / "conftest.py").write_text(STATIC)
    (project / "pytest.ini").write_text(
        "[pytest]\ntrtcompare_tolerances =\n    fp32: atol=0.5 rtol=0.5\n"
    )
    (project / "test_model.py").write_text(
        "import pytest\n\n"
        f"@pytest.mark.compare_frameworks({COMPARE})\n"
        "def test_model(comparison):\n"
        "    assert comparison.outputs['y'].tolerance.atol == 0.5\n"
    )
    os.chdir(project)
    result = run(pytester, "--trt-goldens-dir", "../shared_goldens", *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*--trt-goldens-dir ../shared_goldens: pytest took '../shared_goldens' for a test path "
            "while it chose the rootdir*; write --trt-goldens-dir=../shared_goldens"
        ]
    )
    run(pytester, f"--trt-goldens-dir={shared}", *xdist).assert_outcomes(passed=1)
    (project / "goldens").mkdir()
    run(pytester, "--trt-goldens-dir", "goldens", *xdist).assert_outcomes(passed=1)  # same rootdir


# 7. smaller ones --------------------------------------------------------------------------
@pytest.mark.parametrize("xdist", XDIST)
def test_7_repeated_precision_options_merge(pytester, xdist):
    pytester.makeconftest(STATIC)
    pytester.makepyfile(
        test_m=f"import pytest\n\n@pytest.mark.compare_frameworks({COMPARE})\n"
        "def test_it():\n    pass\n"
    )
    result = run(pytester, "-v", "--trt-precision", "fp16", "--trt-precision", "bf16", *xdist)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines_random(
        ["*test_it[[]onnxref-fp16[]]*", "*test_it[[]onnxref-bf16[]]*"]
    )


@pytest.mark.parametrize(
    ("ini", "args", "message"),
    [
        (
            'trtcompare_tolerances =\n    fp16: atol="1e-2 rtol=1e-2\n',
            [],
            "*trtcompare_tolerances line 'fp16: atol=\"1e-2 rtol=1e-2': No closing quotation*",
        ),
        (
            "",
            ["--trt-report=reports"],
            "*--trt-report=*reports is a directory; give a file name*",
        ),
        (
            "",
            ["--trt-report=test_m.py/report.json"],
            "*--trt-report=*test_m.py/report.json: *test_m.py is a file, not a folder*",
        ),
        (
            "",
            ["--trt-report=/proc/report.json"],
            "*--trt-report=/proc/report.json: cannot write in /proc (*)*",
        ),
        (
            "trtcompare_strict_goldens = yes please\n",
            [],
            "*ini trtcompare_strict_goldens: invalid truth value 'yes please'; give true or false*",
        ),
        (
            "",
            ["--trt-frameworks=onnxruntim"],
            "*--trt-frameworks: unknown framework 'onnxruntim'; known*",
        ),
    ],
)
def test_7_bad_settings_are_usage_errors(pytester, ini, args, message):
    pytester.makeini(f"[pytest]\n{ini}")
    pytester.mkdir("reports")
    pytester.makepyfile(test_m="def test_it():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("xdist", XDIST)
def test_7_a_conftest_that_owns_update_goldens(pytester, xdist):
    pytester.makeconftest(
        STATIC + "\n\ndef pytest_addoption(parser):\n"
        "    parser.addoption('--update-goldens', action='store_true', dest='mine')\n"
    )
    pytester.makepyfile(
        test_m="import numpy as np\n\ndef test_it(golden, request):\n"
        "    assert request.config.getoption('mine')\n"
        "    golden.check({'y': np.ones(3)})\n"
    )
    result = run(pytester, "--update-goldens", *xdist)
    result.assert_outcomes(failed=1)  # --update-goldens is the conftest's: nothing written
    result.stdout.fnmatch_lines(
        ["*create it with:", "  pytest --trt-update-goldens test_m.py::test_it"]
    )
    result.stdout.no_fnmatch_line("*OptionDeprecationWarning*")  # not ours: no warning
    result = run(pytester, "--update-goldens", "--trt-update-goldens", *xdist)
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("xdist", XDIST)
def test_7_a_fifo_named_golden_does_not_hang_the_scan(pytester, xdist):
    pytester.makepyfile(
        test_m="import numpy as np\n\ndef test_it(golden):\n    golden.check({'y': np.ones(3)})\n"
    )
    pytester.runpytest("--trt-update-goldens").assert_outcomes(passed=1)
    os.mkfifo(pytester.path / "goldens" / "test_m" / "stray.safetensors")
    args = ["-p", "no:cacheprovider", *xdist]
    result = pytester.runpytest_subprocess(*args, timeout=120)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*checked 1, unused 0*"])


@pytest.mark.parametrize("xdist", XDIST)
def test_7_assert_outputs_close_in_a_test_gets_artifacts_and_a_record(pytester, xdist):
    pytester.makepyfile(
        test_m="""
        import numpy as np
        from pytest_trtcompare import assert_outputs_close

        def test_direct():
            expected = np.linspace(0, 1, 100, dtype=np.float32)
            actual = expected.copy()
            actual[7] += 0.5
            assert_outputs_close({"y": actual}, {"y": expected}, atol=1e-3, rtol=1e-3)
        """
    )
    result = run(pytester, "-v", *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            '*assert_outputs_close({"y": actual}*',
            "*rel error: mean*",
            "*artifacts: *",
            "*y.actual.npy*",
            "*accuracy summary*",
            "*FAIL*test_direct :: y*",
        ]
    )


def test_7_missing_goldens_are_not_counted_as_checked(pytester):
    pytester.makepyfile(
        test_m="import numpy as np\n\ndef test_it(golden):\n    golden.check({'y': np.ones(3)})\n"
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    assert not re.search(r"checked \d", result.stdout.str())


@pytest.mark.parametrize("xdist", XDIST)
def test_the_printed_command_creates_the_missing_golden(pytester, xdist):
    """The create command repeats what shapes the item id and the golden's place."""
    pytester.makeconftest(STATIC)
    pytester.makepyfile(
        test_g=f"import pytest\n\n@pytest.mark.compare_frameworks({COMPARE}, golden=True)\n"
        "def test_it(comparison):\n    pass\n"
    )
    pytester.mkdir("gd")
    args = ["--trt-precision=fp16", "--trt-goldens-dir=gd"]
    result = run(pytester, *args, *xdist)
    result.assert_outcomes(failed=2)
    command = next(
        line.strip() for line in result.stdout.lines if line.strip().startswith("pytest ")
    )
    assert command.startswith("pytest --trt-update-goldens --trt-precision=fp16 --trt-goldens-dir=")
    words = shlex.split(command)
    run(pytester, *words[1:], *xdist).assert_outcomes(passed=1)
    run(pytester, *args, words[-1], *xdist).assert_outcomes(passed=1)  # the item it named


@pytest.mark.parametrize("xdist", XDIST)
def test_a_damaged_golden_is_reported_once(pytester, xdist):
    pytester.makepyfile(
        test_d="import numpy as np\nfrom pytest_trtcompare.runners import TensorSpec\n\n"
        "def test_it(golden):\n"
        "    feed = golden.inputs([TensorSpec('x', 'float32', (2,))])\n"
        "    golden.check({'y': feed['x']})\n"
    )
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    (pytester.path / "goldens" / "test_d" / "test_it.safetensors").write_bytes(b"garbage\n")
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    failures = out.split("short test summary info")[0]  # CI=true prints the summary in full
    assert failures.count("regenerate it with") == 1 and "During handling" not in out, out


@pytest.mark.parametrize("xdist", XDIST)
def test_debug_precision_names_the_nodes_to_keep_in_fp32(pytester, xdist):
    """--trt-debug-precision on a failing fp16 item: the planted fp16-unsafe pair."""
    import onnx

    from .planted_models import planted

    onnx.save(planted(before=6, after=6), str(pytester.path / "planted.onnx"))
    pytester.makepyfile(
        test_p="import pytest\n\n"
        "@pytest.mark.compare_frameworks(model='planted.onnx', frameworks=['onnxref', 'onnxrt'])\n"
        "def test_planted():\n    pass\n"
    )
    result = run(pytester, "--trt-precision=fp16", *xdist)
    result.assert_outcomes(failed=1)
    assert "keep these" not in result.stdout.str()  # only when asked
    result = run(pytester, "--trt-precision=fp16", "--trt-debug-precision", *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*onnxref-fp16 vs onnxrt-fp32: 1 of 1 outputs out of tolerance: y*",
            "precision debugging (onnxref fp16, * candidate nodes): keep these 2 nodes in fp32: "
            "plant_add (Add), plant_sub (Sub) (* runs; the mixed model passes)",
        ]
    )
