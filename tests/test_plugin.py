"""Plugin behaviour through pytester: fixture, options, ini, markers, header, xdist."""

from __future__ import annotations

import pytest

from .pytester_helpers import KNOWN_RUNNERS, XDIST, XDIST_SLOW, run

COMPARE_TESTS = """
import numpy as np

def test_close(compare):
    compare({"y": np.ones(4, np.float16)}, {"y": np.ones(4, np.float32)})

def test_drifted(compare):
    expected = np.linspace(0, 1, 1000, dtype=np.float32).reshape(10, 100)
    actual = expected.copy()
    actual[3, 17] += 0.05
    compare({"logits": actual}, {"logits": expected}, atol=1e-3, rtol=1e-3)
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_compare_fixture_reports_drift(pytester, xdist):
    pytester.makepyfile(COMPARE_TESTS)
    result = run(pytester, "--strict-markers", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*1 of 1 outputs out of tolerance: logits*",
            "*logits (float32 vs float32, shape (10, 100)): 1 / 1000 elements (0.1%) exceed*",
            "*greatest abs error 0.05 at (3, 17)*",
            "*would pass with atol ≥ 0.05*",
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str()


@pytest.mark.parametrize("xdist", XDIST)
def test_report_survives_assert_plain(pytester, xdist):
    pytester.makepyfile(COMPARE_TESTS)
    result = run(pytester, "--assert=plain", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*worst elements:*", "*error histogram*"])


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_verbose_flag_gives_the_fuller_report(pytester, xdist):
    pytester.makepyfile(COMPARE_TESTS)
    quiet = run(pytester, *xdist)
    assert "rel error: mean" not in quiet.stdout.str()
    verbose = run(pytester, "-v", *xdist)
    verbose.stdout.fnmatch_lines(["*rel error: mean*"])


@pytest.mark.parametrize("xdist", XDIST)
def test_command_line_tolerance_overrides_the_call(pytester, xdist):
    pytester.makepyfile(COMPARE_TESTS)
    result = run(pytester, "--trt-atol", "0.1", *xdist)
    result.assert_outcomes(passed=2)


def test_tolerance_precedence_builtin_ini_call_command_line(pytester):
    pytester.makeini(
        """
        [pytest]
        trtcompare_tolerances =
            fp16: atol=0.2 rtol=0
        """
    )
    pytester.makepyfile(
        """
        import numpy as np, pytest

        a, e = {"y": np.array([1.09])}, {"y": np.array([1.0])}

        def test_builtin_fp32_fails(compare):
            with pytest.raises(AssertionError):
                compare(a, e)

        def test_builtin_int8_passes(compare):
            assert compare(a, e, precision="int8").outputs["y"].tolerance.atol == 0.1
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)
    pytester.makepyfile(
        """
        import numpy as np, pytest

        a, e = {"y": np.array([1.09])}, {"y": np.array([1.0])}

        def test_ini_fp16_passes(compare):
            out = compare(a, e, precision="fp16")
            assert out.outputs["y"].tolerance.atol == 0.2

        def test_call_beats_ini(compare):
            with pytest.raises(AssertionError):
                compare(a, e, precision="fp16", atol=0.01)
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)
    overridden = pytester.runpytest("--trt-atol", "0", "--trt-rtol", "0", "-k", "test_ini_fp16")
    overridden.assert_outcomes(failed=1)


def test_unknown_precision_is_a_usage_error_listing_valid_ones(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("--trt-precision", "fp16,fp64")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--trt-precision*unknown precision fp64; valid precisions: fp32, tf32, fp16, bf16*"]
    )


def test_bad_ini_tolerance_table_names_the_line(pytester):
    pytester.makeini(
        """
        [pytest]
        trtcompare_tolerances =
            fp16: atlo=1e-2
        """
    )
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*trtcompare_tolerances line 'fp16: atlo=1e-2'*'atlo=1e-2'*"])


def test_markers_are_registered(pytester):
    markers = pytester.runpytest("--markers")
    markers.stdout.fnmatch_lines(
        ["*@pytest.mark.compare_frameworks(model=*", "*@pytest.mark.precisions(*", "*shapes(*"]
    )


def test_report_header_lists_frameworks(pytester):
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["trtcompare frameworks: onnxruntime *, onnx *"])
    line = next(x for x in result.stdout.lines if x.startswith("trtcompare frameworks"))
    assert "tensorrt: not installed (pip install pytest-trtcompare[tensorrt])" in line


def test_help_lists_the_options(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "*accuracy comparison (pytest-trtcompare)*",
            "*--trt-precision*",
            "*--trt-update-goldens*",
            "*trtcompare_tolerances*",
        ]
    )


def test_update_goldens_owned_by_another_plugin_falls_back(pytester):
    pytester.makepyfile(
        other_plugin="""
        def pytest_addoption(parser):
            parser.addoption("--update-goldens", action="store_true")
        """
    )
    pytester.makepyfile(
        "def test_x(request):\n"
        "    assert request.config.getoption('update_goldens')\n"
        "    assert not request.config.getoption('trtcompare_update_goldens')\n"
    )
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "other_plugin", "--update-goldens")
    result.assert_outcomes(passed=1)
    fallback = pytester.runpytest("-p", "other_plugin", "--help")
    fallback.stdout.fnmatch_lines(["*--trt-update-goldens*"])


RUNNER_SKIPS = """
import numpy as np
from onnx import TensorProto, helper
from pytest_trtcompare import runners

def model():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

def test_tensorrt_missing():
    runners.create("trt", model())

def test_unknown_framework():
    runners.create("tensorflw", model())

def test_precision_unsupported():
    runners.create("onnxrt", model(), "bf16")

def test_runs():
    out = runners.create("onnxrt", model()).infer({"x": np.array([-1.0, 2.0], np.float32)})
    assert out["y"].tolist() == [0.0, 2.0]
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_runners_that_cannot_run_here_skip_with_the_reason(pytester, xdist):
    pytester.makepyfile(RUNNER_SKIPS)
    result = run(pytester, "-rsf", *xdist)
    result.assert_outcomes(passed=1, skipped=2, failed=1)  # a typo is a mistake, not a skip
    result.stdout.fnmatch_lines_random(
        [
            "*tensorrt is not installed: pip install pytest-trtcompare[[]tensorrt[]]*",
            "*onnxruntime CPU has no bfloat16 kernel for Relu (onnxrt bf16 of <ModelProto>*",
            "FAILED *test_unknown_framework - *UnknownFrameworkError: unknown framework "
            f"'tensorflw'; known frameworks: {KNOWN_RUNNERS}*",
        ]
    )
    assert "pytest_trtcompare/" not in result.stdout.str()


@pytest.mark.parametrize("xdist", XDIST)
def test_compare_fixture_records_on_its_test_and_a_constructed_one_says_what_to_use(
    pytester, xdist
):
    """The fixture takes its test from `request`: its record lands on its test when it is
    an argument, a method's argument, or reached through a suite's own fixture and called
    from another thread. A CompareFixture made by hand belongs to no test, and calling it
    fails that test with one message."""
    pytester.makepyfile(
        """
        from pytest_trtcompare.plugin import CompareFixture

        def test_constructed():
            CompareFixture()([1.0], [1.0])

        def test_fixture(compare):
            compare([1.0], [1.0])
        """
    )
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def wrapped_compare(compare):  # a suite's own fixture over ours
            return compare
        """
    )
    pytester.makepyfile(
        test_wrapped="""
        import threading

        def test_through_a_fixture_and_a_thread(wrapped_compare):
            worker = threading.Thread(target=wrapped_compare, args=([2.0], [2.0]))
            worker.start()
            worker.join()

        class TestGrouped:
            def test_method(self, compare):
                compare({"m": [1.0]}, {"m": [1.0]})
        """
    )
    plan = pytester.runpytest(
        "--setup-plan",
        "test_compare_fixture_records_on_its_test_and_a_constructed_one_says_what_to_use.py",
    )
    plan.stdout.fnmatch_lines(["*test_fixture (fixtures used: compare, request)*"])
    result = run(pytester, "--junitxml=out.xml", *xdist)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*TrtCompareError: compare: this CompareFixture belongs to no test; ask for the*",
            "FAILED *test_constructed - Failed: TrtCompareError: compare: this *",
        ]
    )
    assert "`compare` fixture instead of constructing one" in result.stdout.str()
    assert "pytest_trtcompare/" not in result.stdout.str()
    xml = (pytester.path / "out.xml").read_text()
    for test, output in (
        ("test_fixture", "output"),
        ("test_through_a_fixture_and_a_thread", "output"),
        ("test_method", "m"),
    ):
        case = xml.split(f'name="{test}"', 1)[1].split("</testcase>", 1)[0]
        assert f'name="trtcompare.{output}.passed" value="true"' in case


def test_compare_records_on_its_own_test_however_it_is_requested(pytester):
    """Each test's record lands on that test, whether the fixture is an argument, asked for
    in the body or used by another fixture, and after a pytest run nested inside the test."""
    pytester.makeconftest(
        """
        import numpy as np
        import pytest

        pytest_plugins = ["pytester"]

        @pytest.fixture
        def compared_in_setup(compare):
            compare({"setup": np.ones(2)}, {"setup": np.ones(2)})
        """
    )
    pytester.makepyfile(
        """
        import numpy as np

        def test_argument(compare):
            compare({"a": np.ones(2)}, {"a": np.ones(2)})

        def test_asked(request):
            request.getfixturevalue("compare")({"b": np.ones(2)}, {"b": np.ones(2)})

        def test_fixture(compared_in_setup):
            pass

        def test_nested(compare, pytester):
            pytester.makepyfile("def test_inner(compare):\\n    compare([1.0], [1.0])\\n")
            pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
            compare({"c": np.ones(2)}, {"c": np.ones(2)})
        """
    )
    result = pytester.runpytest("--junitxml=out.xml", "-p", "pytester")
    result.assert_outcomes(passed=4)
    xml = (pytester.path / "out.xml").read_text()
    for test, output in (
        ("test_argument", "a"),
        ("test_asked", "b"),
        ("test_fixture", "setup"),
        ("test_nested", "c"),
    ):
        case = xml.split(f'name="{test}"', 1)[1].split("</testcase>", 1)[0]
        assert f'name="trtcompare.{output}.passed" value="true"' in case
        assert case.count(".passed") == 1  # its own record only


OUTPUT_NAME_TYPO = """
import numpy as np

def test_typo(compare):
    result = compare({"logits": np.ones(3)}, {"logits": np.ones(3)})
    assert result.outputs["logit"].passed
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_an_output_name_typo_in_a_result_lists_the_outputs(pytester, xdist):
    """A result's outputs by a name it does not have: a KeyError that names the outputs
    there are, the closest first, not the bare name."""
    pytester.makepyfile(test_typo=OUTPUT_NAME_TYPO)
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=1)
    said = result.stdout.str()
    typo = "'logit': no output of that name; did you mean 'logits'? the outputs are 'logits'"
    assert f'FAILED test_typo.py::test_typo - KeyError: "{typo}"' in said
    assert "pytest_trtcompare/" not in said  # the user's line shows, not ours
