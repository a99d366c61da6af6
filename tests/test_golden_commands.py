"""Every golden failure names the exact command that regenerates it (issue 26): the command
repeats the options its item id and golden path depend on, names the test as the directory
pytest was started in sees it, and run as printed it fixes the golden. With and without
pytest-xdist."""

from __future__ import annotations

import re
import shlex

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare.goldens.store import read_golden

from .pytester_helpers import run

TESTS = """
import os
import pytest

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt"], golden=True)
@pytest.mark.shapes({"x": (3, 4)})
def test_marker():
    pass
"""
ID = "test_marker[onnxrt-fp16-bs3]"


def _model(path, scale: float) -> None:
    weights = numpy_helper.from_array(np.full((4, 2), scale, np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 2])],
        [weights],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))


def _command(result: pytest.RunResult, after: str) -> list[str]:
    """The command on the line after the one ending in `after`, as a shell would split it."""
    lines = result.stdout.lines
    index = next(i for i, line in enumerate(lines) if line.rstrip().endswith(after))
    text = re.sub(r"^E\s+", "", lines[index + 1]).strip()
    return shlex.split(text)


@pytest.mark.parametrize(
    ("options", "xdist"),
    [
        pytest.param(["--trt-precision=fp16"], [], id="option-no-xdist"),
        pytest.param(["-o", "trtcompare_precisions=fp16"], [], id="ini-override-no-xdist"),
        pytest.param(["--trt-precision=fp16"], ["-n", "2"], id="option-xdist-n2"),
        pytest.param(  # the test command's time: the same command under xdist as above
            ["-o", "trtcompare_precisions=fp16"],
            ["-n", "2"],
            id="ini-override-xdist-n2",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_the_printed_command_regenerates_the_golden(pytester, monkeypatch, xdist, options):
    """Started in a sub-folder of the rootdir, with the precision (it is in the item id) and
    --trt-goldens-dir=DIR (where the golden lives): missing, damaged and mismatched goldens each
    print a command that, run as printed, writes the golden; the next run passes."""
    pytester.makeini("[pytest]\n")
    suite = pytester.mkdir("suite")
    (suite / "test_cmd.py").write_text(TESTS)
    _model(suite / "model.onnx", 1.0)
    monkeypatch.chdir(suite)
    given = [*options, "--trt-goldens-dir=../stored", *xdist]
    golden = pytester.path / "stored" / "suite" / "test_cmd" / f"{ID}.safetensors"
    expected = [
        "pytest",
        "--trt-update-goldens",
        *(["--trt-precision=fp16"] if options[0] != "-o" else []),
        f"--trt-goldens-dir={pytester.path / 'stored'}",
        *(options if options[0] == "-o" else []),
        f"test_cmd.py::{ID}",  # as seen from suite/, where pytest started
    ]

    result = run(pytester, *given)  # missing
    result.assert_outcomes(failed=1)
    command = _command(result, "create it with:")
    assert command == expected, command
    run(pytester, *command[1:], *xdist).assert_outcomes(passed=1)
    assert golden.is_file()
    if xdist:  # the commands below are the same function's; in-process runs cost less
        return

    golden.write_bytes(b"")  # damaged: an empty file
    result = run(pytester, *given)
    result.assert_outcomes(failed=1)
    assert _command(result, "an empty file, not a golden; regenerate it with:") == expected
    run(pytester, *command[1:], *xdist).assert_outcomes(passed=1)

    golden.write_text("not a golden\n")  # a text file where the golden was
    result = run(pytester, *given)
    result.assert_outcomes(failed=1)
    said = " ".join(result.stdout.str().split())  # the message may wrap at any space
    assert "safetensors: a text file, not a golden (it starts with 'not a golden\\n');" in said
    assert _command(result, "regenerate it with:") == expected
    run(pytester, *command[1:], *xdist).assert_outcomes(passed=1)

    _model(suite / "model.onnx", 1.5)  # a mismatch: the model changed
    result = run(pytester, *given)
    result.assert_outcomes(failed=1)
    assert _command(result, "if the new outputs are right, update the golden with:") == expected
    run(pytester, *command[1:], *xdist).assert_outcomes(passed=1)
    run(pytester, *given).assert_outcomes(passed=1)
    assert read_golden(golden).meta["precision"] == "fp16"
