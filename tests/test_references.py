"""What a Polygraphy user says, said in pytest (issue 14, items 2 and 7): torch twins named
unlike their export, saved outputs as the reference (--load-outputs), a framework against
itself at fp32, and --trt-input-shapes / --trt-seed / --trt-val-range."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_trtcompare.goldens.interop import write_polygraphy_inputs, write_polygraphy_outputs

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run
from .test_compare_frameworks import CONFTEST

TWIN = """
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):  # the export calls it "input"
        return torch.tanh(self.fc(x))
"""


@pytest.fixture(scope="module")
def exported_twin(tmp_path_factory):
    """Net exported the usual way: input_names=["input"], output_names=["logits"]."""
    torch = pytest.importorskip("torch")
    namespace: dict = {}
    exec(TWIN, namespace)
    path = tmp_path_factory.mktemp("twin") / "twin.onnx"
    torch.onnx.export(
        namespace["Net"]().eval(),
        (torch.randn(2, 8),),
        str(path),
        input_names=["input"],
        output_names=["logits"],
        dynamic_shapes=({0: torch.export.Dim("batch")},),
    )
    return path.read_bytes()


@pytest.mark.parametrize("xdist", XDIST)
def test_a_torch_twin_takes_the_export_names_by_position(pytester, xdist, exported_twin):
    (pytester.path / "twin.onnx").write_bytes(exported_twin)
    pytester.makepyfile(
        net=TWIN,
        test_twin="""
        import pytest
        from net import Net

        @pytest.mark.compare_frameworks(model="twin.onnx", frameworks=["onnxrt", "torch"],
                                        models={"torch": Net().eval()})
        @pytest.mark.shapes({"input": (3, 8)})
        def test_twin(comparison):
            assert list(comparison.outputs) == ["logits"]
        """,
    )
    pytester.syspathinsert()
    result = run(pytester, "--trt-report=report.json", *xdist)
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "report.json").read_text())
    (record,) = report["outputs"]
    names = report["runners"][record["target_runner"]]["twin_names"]
    assert names == {
        "inputs": {"input": "x (by position)"},
        "outputs": {"logits": "output (by position)"},
    }


MODEL_TESTS = """
import pytest

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt", "onnxref"],
                                reference="{reference}", inputs="inputs.json")
def test_saved(comparison):
    pass
"""


def _saved_outputs(pytester, scale: float = 1.0) -> None:
    """outputs.json / inputs.json as `polygraphy run --save-outputs --save-inputs` writes."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    model = onnx.load(str(pytester.path / "model.onnx"))
    feed = {"x": np.random.default_rng(3).random((2, 8), dtype=np.float32)}
    (y,) = ReferenceEvaluator(model).run(None, feed)
    write_polygraphy_inputs(pytester.path / "inputs.json", [feed])
    write_polygraphy_outputs(pytester.path / "outputs.json", [{"y": y * scale}], "onnxrt-runner")


def _passed(result: pytest.RunResult, item: str) -> bool:
    """Whether `-v` reported the item PASSED (xdist prints the outcome first)."""
    return any(item in line and "PASSED" in line for line in result.stdout.lines)


STATIC = CONFTEST.replace('["batch", 8]', "[2, 8]").replace('["batch", 4]', "[2, 4]")


@pytest.mark.parametrize("xdist", XDIST)
def test_saved_outputs_are_the_reference_of_every_listed_framework(pytester, xdist):
    pytester.makeconftest(STATIC)
    pytester.makepyfile(test_saved=MODEL_TESTS.format(reference="outputs.json"))
    run(pytester, "--collect-only", "-q")  # conftest writes model.onnx
    _saved_outputs(pytester)
    result = run(pytester, "-v", "--trt-precision=fp32,fp16", *xdist)
    result.assert_outcomes(passed=4)  # onnxrt and onnxref, each at fp32 and fp16
    assert _passed(result, "test_saved[onnxrt-fp32]")
    _saved_outputs(pytester, scale=1.5)
    result = run(pytester, "-rf", *xdist)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*onnx*-fp32 vs saved outputs.json: 1 of 1 outputs out of tolerance*"]
    )


@pytest.mark.parametrize("xdist", XDIST)
def test_a_safetensors_file_without_metadata_is_saved_outputs(pytester, xdist):
    """safetensors.numpy.save_file with no metadata, as most tools write it: read as the
    reference, as a file with other metadata is (issue 35, item 6)."""
    import safetensors.numpy

    from pytest_trtcompare.goldens.interop import read_polygraphy_outputs

    pytester.makeconftest(STATIC)
    pytester.makepyfile(test_saved=MODEL_TESTS.format(reference="plain.safetensors"))
    run(pytester, "--collect-only", "-q")  # conftest writes model.onnx
    _saved_outputs(pytester)
    outputs = read_polygraphy_outputs(pytester.path / "outputs.json")
    safetensors.numpy.save_file(dict(outputs), str(pytester.path / "plain.safetensors"))
    result = run(pytester, "-v", *xdist)
    result.assert_outcomes(passed=2)
    assert _passed(result, "test_saved[onnxref-fp32]")
    safetensors.numpy.save_file({"y": outputs["y"] * 1.5}, str(pytester.path / "plain.safetensors"))
    result = run(pytester, "-rf", *xdist)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*onnx*-fp32 vs saved plain.safetensors: 1 of 1 outputs out of tolerance*"]
    )


@pytest.mark.parametrize("xdist", XDIST)
def test_saved_outputs_without_inputs_or_missing_say_so(pytester, xdist):
    pytester.makeconftest(STATIC)
    pytester.makepyfile(
        test_saved=MODEL_TESTS.format(reference="outputs.json").replace(
            ', inputs="inputs.json"', ""
        )
        + MODEL_TESTS.format(reference="nope/outputs.json").replace("test_saved", "test_nope")
    )
    run(pytester, "--collect-only", "-q")
    _saved_outputs(pytester)
    result = run(pytester, "-rE", *xdist)
    result.assert_outcomes(errors=4)
    result.stdout.fnmatch_lines_random(
        [
            "ERROR*test_saved*reference='outputs.json' holds no inputs: give the inputs its "
            "outputs were made from*",
            f"ERROR*test_nope*{pytester.path}/nope/outputs.json does not exist*",
        ]
    )


def test_a_reference_that_is_neither_a_framework_nor_saved_outputs(pytester):
    pytester.makeconftest(STATIC)
    pytester.makepyfile(test_ref=MODEL_TESTS.format(reference="onnxruntim"))
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*(reference=...) got 'onnxruntim' (str); it takes one of frameworks=[[]'onnxrt', "
            "'onnxref'[]], or saved outputs*"
        ]
    )


@pytest.mark.parametrize("xdist", XDIST)
def test_a_framework_listed_alone_runs_against_itself_at_fp32(pytester, xdist):
    pytester.makeconftest(STATIC)
    pytester.makepyfile(
        test_alone="""
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxref"],
                                        tolerance={"atol": 1e-9, "rtol": 1e-9})
        def test_alone(comparison):
            pass
        """
    )
    result = run(pytester, "-v", "-rf", "--trt-precision=fp32,fp16", *xdist)
    result.assert_outcomes(passed=1, failed=1)  # fp32 equals itself; fp16 drifts past 1e-9
    assert _passed(result, "test_alone[onnxref-fp32]")
    result.stdout.fnmatch_lines(["*onnxref-fp16 vs onnxref-fp32: *"])


OVERRIDES = """
import numpy as np
import pytest
from pytest_trtcompare.inputs import synthetic_feed
from pytest_trtcompare.runners import TensorSpec

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxref", "onnxrt"])
@pytest.mark.shapes({"x": (1, 8)}, {"x": (4, 8)})
def test_marked(comparison):
    assert comparison.outputs["y"].shape == (3, 4)

def test_golden_inputs(golden):
    specs = [TensorSpec("x", "float32", (2,))]
    feed = golden.inputs(specs)
    want = synthetic_feed(specs, seed=5, val_range=(5.0, 6.0))
    np.testing.assert_array_equal(feed["x"], want["x"])
    golden.check({"y": feed["x"]})
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_input_shapes_seed_and_val_range_from_the_command_line(pytester, xdist):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_over=OVERRIDES)
    args = ["-v", "--trt-input-shapes=x:[3,8]", "--trt-seed=5", "--trt-val-range=[5,6]"]
    result = run(pytester, *args, "--trt-update-goldens", *xdist)
    result.assert_outcomes(passed=2)
    assert _passed(result, "test_marked[onnxref-fp32-cli]")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--trt-input-shapes=x:1xa", "*--trt-input-shapes=x:1xa: cannot read 'x:1xa'*"),
        ("--trt-val-range=2,1", "*--trt-val-range=2,1: '2,1': LOW must not exceed HIGH*"),
        ("--trt-seed=-1", "*--trt-seed=-1: the seed must be >= 0*"),
    ],
)
def test_bad_overrides_are_usage_errors(pytester, option, message):
    pytester.makepyfile(test_m="def test_it():\n    pass\n")
    result = pytester.runpytest(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
