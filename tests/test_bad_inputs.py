"""The bad-input catalogue (docs/RELIABILITY.md): each mistake gives a clear message naming
the thing, no INTERNALERROR, and the rest of the session goes on."""

from __future__ import annotations

import pytest

from .golden_bytes import rewrite
from .pytester_helpers import KNOWN_RUNNERS

CATALOGUE = """
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from pytest_trtcompare import runners

def good_model():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)

def test_malformed_model_bytes():
    runners.create("onnxrt", b"\\x08\\x01not a model")

def test_model_the_checker_rejects():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["undefined_input"], ["y"])], "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    runners.create("onnxrt", model)

def test_unknown_framework():
    runners.create("tensorflw", good_model())

@pytest.mark.compare_frameworks(model=good_model(), frameworks=["onnxrt", "onnxref"])
@pytest.mark.shapes({"nope": (2,)})
def test_shapes_name_a_missing_input():
    pass

def test_feed_with_the_wrong_dtype():
    runners.create("onnxrt", good_model()).infer({"x": np.zeros(2, np.float64)})

def test_nan_and_inf_outputs(compare):
    compare({"y": np.array([np.nan, np.inf, 1.0])}, {"y": np.array([0.0, 1.0, 1.0])})

def test_zero_d_and_empty_outputs(compare):
    same = {"s": np.float32(1), "e": np.zeros((0, 3))}
    compare(same, dict(same))

def test_golden_names_cannot_escape(golden):
    golden.check({"../../evil": np.ones(2)}, name="../../escape")

def test_a_normal_test():
    runner = runners.create("onnxrt", good_model())
    assert runner.infer({"x": np.ones(2, np.float32)})["y"].sum() == 2
"""


def test_bad_inputs_inside_one_session(pytester):
    pytester.makepyfile(test_catalogue=CATALOGUE)
    pytester.runpytest("--trt-update-goldens", "-k", "escape").assert_outcomes(passed=1)
    result = pytester.runpytest("-rs")
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    # a framework typo is a mistake (a failure), never a skip; shapes: a setup error
    result.assert_outcomes(passed=3, failed=5, errors=1)
    result.stdout.fnmatch_lines_random(
        [
            "*ModelLoadError: <model bytes> is not a valid ONNX model*",
            "*ModelLoadError: onnxruntime cannot load model <ModelProto>*undefined_input*",
            "*UnknownFrameworkError: unknown framework 'tensorflw'; known frameworks: callable, "
            f"{KNOWN_RUNNERS.removeprefix('callable, ')}*",
            "*shapes name input(s) [[]'nope'[]] that the model does not have*",
            "*FeedError: onnxrt-fp32: input 'x' is float64, the model expects float32*",
            "*NaN: actual 1, expected 0 (positions differ)*",
        ]
    )
    folders = {p.parent for p in pytester.path.rglob("*.safetensors")}
    assert folders == {pytester.path / "goldens" / "test_catalogue"}


def test_a_golden_holding_a_pickled_object_array_is_refused(pytester):
    pytester.makepyfile(
        test_g="""
        import numpy as np

        def test_g(golden):
            golden.check({"y": np.ones(2)})
        """
    )
    pytester.runpytest("--trt-update-goldens").assert_outcomes(passed=1)
    (path,) = list(pytester.path.rglob("*.safetensors"))
    # as a tool that rewrote the header (valid checksum) would leave it
    rewrite(path, lambda document: document["outputs/y"].update(dtype="|O8"))
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_g.safetensors: corrupt golden (header field 'dtype' of tensor 'outputs/y': "
            "'|O8' is not*"
        ]
    )


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (["--trt-precision", "fp64"], "", "*unknown precision fp64; valid precisions: fp32, tf32*"),
        (
            [],
            "[pytest]\ntrtcompare_tolerances =\n    fp16: atol=1e-2 rtl=1e-2\n",
            "*trtcompare_tolerances line 'fp16: atol=1e-2 rtl=1e-2': "
            "'rtl=1e-2' is not FIELD=VALUE*(did you mean 'rtol'?)",
        ),
        (
            ["--trt-atol", "-1"],
            "",
            "ERROR: --trt-atol=-1.0: atol must be finite and >= 0, got -1.0",
        ),
        (["--trt-rtol=nan"], "", "ERROR: --trt-rtol=nan: rtol must be finite and >= 0, got nan"),
        (["--trt-frameworks="], "", "ERROR: --trt-frameworks is empty: give one or more names *"),
        (
            ["--trt-artifacts=out/pictures"],
            "",
            "*argument --trt-artifacts: invalid choice: 'out/pictures' (choose from 'none', "
            "'failed', 'all'); the folder is --trt-artifacts-dir=out/pictures",
        ),
    ],
)
def test_session_level_mistakes_are_usage_errors(pytester, args, ini, message):
    if ini:
        pytester.makeini(ini)
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_summary_and_report_handle_non_finite_errors(pytester):
    pytester.makepyfile(
        test_nan="""
        import numpy as np

        def test_nan(compare):
            compare({"y": np.array([np.inf, 1.0])}, {"y": np.array([1.0, 1.0])})
        """
    )
    result = pytester.runpytest("--trt-report", "r.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*inf*FAIL*test_nan :: y*Inf in actual at 1 position, first mismatch (0,)*"]
    )
    assert "INTERNALERROR" not in result.stdout.str()
