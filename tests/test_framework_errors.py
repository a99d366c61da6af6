"""A framework's failure, and a model's odd output, as a user sees them (issue 22, items 5 and
11): one message naming the runner, the feed, the node and the library's last line; the
library's traceback only with --tb=long or -vv, never a frame of ours by default."""

from __future__ import annotations

import pytest

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import glob_escape, library_says, run

pytest.importorskip("torch")

MODELS = """
import torch


class Broken(torch.nn.Module):
    def forward(self, x):
        return x.reshape(7, 7)  # the user's model cannot take this feed


class Talks(torch.nn.Module):
    def forward(self, x):
        return {"y": x, "caption": "a cat"}


class NeedsTwo(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class ThirdFeedBreaks(torch.nn.Module):
    calls = 0

    def forward(self, x):
        ThirdFeedBreaks.calls += 1
        if ThirdFeedBreaks.calls == 3:
            raise ValueError("the third feed broke it")
        return x
"""

TESTS = """
import pytest
from models import Broken, NeedsTwo, Talks, ThirdFeedBreaks


@pytest.mark.compare_frameworks(model=Broken(), frameworks=["torch"])
@pytest.mark.shapes({"x": (2, 3)})
def test_marked():
    pass


@pytest.mark.compare_frameworks(model=Talks(), frameworks=["torch"])
@pytest.mark.shapes({"x": (2, 3)})
def test_string_output():
    pass


def test_in_the_body(runners):
    import numpy as np
    runners.torch(Broken()).infer({"x": np.ones((2, 3), np.float32)})


@pytest.mark.compare_frameworks(model=ThirdFeedBreaks(), frameworks=["torch"], iterations=3)
@pytest.mark.shapes({"x": (2, 3)})
def test_one_iteration_breaks():
    pass


def test_missing_parameter(runners):
    import numpy as np
    runners.torch(NeedsTwo()).infer({"x": np.ones(2, np.float32)})
"""


@pytest.fixture
def project(pytester):
    pytester.makepyfile(models=MODELS, test_models=TESTS)
    pytester.syspathinsert()
    return pytester


@pytest.mark.parametrize("xdist", XDIST)
def test_framework_errors_are_one_message(project, xdist):
    import torch

    torch_says = library_says(lambda: torch.ones(2, 3).reshape(7, 7))
    result = run(project, "-rfE", *xdist)
    result.assert_outcomes(failed=2, errors=3)
    result.stdout.fnmatch_lines_random(
        [
            "InferenceError: torch-fp32 failed running the model on x: float32[[]2, 3[]]: "
            f"{glob_escape(torch_says)} (at models.py:6 in forward)",
            "InvalidOutputError: output 'caption' is str ('a cat'), not a tensor: the torch "
            "runner compares tensors, numbers, and tuples, lists, dicts or dataclasses of them; "
            "outputs=[[]...[]] selects the ones to compare",
            "FeedError: torch-fp32: feed lacks required input(s) [[]'y'[]] of forward(x, y); it "
            "has [[]'x'[]]",
            "InferenceError: iteration 2 of 3: torch-fp32 failed running the model on x: "
            "float32[[]2, 3[]]: ValueError: the third feed broke it (at models.py:* in forward)",
        ]
    )
    out = result.stdout.str()
    assert "Traceback" not in out and "pytest_trtcompare/" not in out
    # marker setup and test body, each in its section and in the short summary
    assert out.count("InferenceError: torch-fp32 failed") == 4


@pytest.mark.parametrize("on_ci", [False, True], ids=["terminal", "CI"])
@pytest.mark.parametrize("xdist", XDIST)
def test_long_tracebacks_show_the_library_frames_and_none_of_ours(
    project, monkeypatch, on_ci, xdist
):
    # on CI (and with -vv) pytest repeats a failure's message whole in the short summary: the
    # traceback is a section of the report, under the failure only, never in the message
    for variable in ("CI", "BUILD_NUMBER"):
        monkeypatch.delenv(variable, raising=False)
    if on_ci:
        monkeypatch.setenv("CI", "true")
    result = run(project, "--tb=long", "-rfE", "-k", "test_marked or body", *xdist)
    result.assert_outcomes(failed=1, errors=1)
    out = result.stdout.str()
    heading = "the library's traceback (--tb=long / -vv; frames of pytest-trtcompare left out)"
    result.stdout.fnmatch_lines([f"*- {heading} -*", "Traceback (most recent call last):"])
    assert out.count(heading) == 2
    assert out.count("return x.reshape(7, 7)") == 2
    assert "pytest_trtcompare/" not in out
    summary = out[out.index("short test summary info") :]
    assert "Traceback" not in summary
    assert summary.count("InferenceError: torch-fp32 failed running the model on x") == 2


def test_an_onnxruntime_failure_names_the_node_and_op():
    import numpy as np
    from onnx import TensorProto, helper

    from pytest_trtcompare import runners
    from pytest_trtcompare.errors import InferenceError

    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="bad_reshape")],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    runner = runners.create("onnxrt", model)
    with pytest.raises(InferenceError) as info:
        runner.infer({"x": np.ones((2, 3), np.float32), "shape": np.array([7, 7])})
    text = str(info.value)
    assert text.startswith(
        "onnxrt-fp32 failed running the model on x: float32[2, 3], shape: int64[2]: node "
        "'bad_reshape' (Reshape): "
    )
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ort_says = library_says(
        lambda: session.run(None, {"x": np.ones((2, 3), np.float32), "shape": np.array([7, 7])})
    )
    assert ort_says.split(": ", 1)[0] in text  # onnxruntime's exception type
    assert ort_says[-60:] in text and "\n" not in text  # and its last words


def test_a_failure_raised_while_handling_another_names_both():
    """A library whose fallback fails too (onnx.reference's GatherElements): its last line,
    then the one it was handling, which often names the cause; `from None` and an explicit
    cause leave it out."""
    from pytest_trtcompare.runners.failures import library_line

    def suppressed() -> None:
        try:
            raise IndexError("need at most 64 arrays\nmore detail")
        except IndexError:
            raise ValueError("cannot reshape array of size 1") from None

    def fallback() -> None:
        try:
            raise IndexError("need at most 64 arrays\nmore detail")
        except IndexError:
            raise ValueError("cannot reshape array of size 1")  # noqa: B904 (the library's way)

    for action, expected in (
        (
            fallback,
            "ValueError: cannot reshape array of size 1 "
            "(raised while handling IndexError: need at most 64 arrays)",
        ),
        (suppressed, "ValueError: cannot reshape array of size 1"),
    ):
        with pytest.raises(ValueError) as info:
            action()
        assert library_line(info.value) == expected


def test_a_torchscript_error_is_said_by_its_last_line():
    from pytest_trtcompare.runners.failures import library_line

    text = (
        "The following operation failed in the TorchScript interpreter.\n"
        "Traceback of TorchScript, serialized code (most recent call last):\n"
        '  File "code/__torch__.py", line 10, in forward\n'
        "    return (c).forward(x, )\n\n"
        "RuntimeError: Input type (torch.FloatTensor) and weight type (torch.HalfTensor) "
        "should be the same\n"
    )
    assert library_line(RuntimeError(text)) == (
        "RuntimeError: Input type (torch.FloatTensor) and weight type "
        "(torch.HalfTensor) should be the same"
    )
