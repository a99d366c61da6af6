"""--trt-reduce and the marker's reduce=True: a failing fp16 compare_frameworks item's report
names the smallest subgraph that still fails; its artifacts hold reduced.onnx, its inputs
(every draw) and the command that reproduces the failure. With and without -n 2; the TensorRT
runner through its double; a torch twin's ONNX model; misuse."""

from __future__ import annotations

import functools
import json
import shlex
from pathlib import Path
from xml.etree import ElementTree

import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare.cli import main
from pytest_trtcompare.goldens import load_reference
from pytest_trtcompare.session.reduce import reduce_model

from .doubles.trt_fixture import install_doubles
from .onnx_models import make
from .planted_models import WIDTH, planted, scaled
from .pytester_helpers import XDIST, XDIST_SLOW, run

pytestmark = pytest.mark.scenario

MARKED = """
import pytest

@pytest.mark.compare_frameworks(
    model="planted.onnx", frameworks=["onnxref", "onnxrt"], iterations=2{extra}
)
def test_planted():
    pass
"""
HEAD = "reduce (onnxref fp16): 1 of 15 nodes still fail: plant_sub (Sub) (7 runs)"


def _scenario(pytester: pytest.Pytester, extra: str = "") -> None:
    onnx.save(planted(before=6, after=6), str(pytester.path / "planted.onnx"))
    pytester.makepyfile(test_p=MARKED.format(extra=extra))


def _reproduce(text: str) -> list[str]:
    """The command after 'reproduce with:', split as a shell splits it."""
    after = text.split("reproduce with:", 1)[1]
    return shlex.split(next(line for line in after.splitlines() if line.strip()))


@pytest.mark.parametrize("xdist", XDIST)
def test_the_report_names_the_reduced_graph_and_its_files_reproduce_it(pytester, xdist, capsys):
    _scenario(pytester)
    args = ["--trt-precision=fp16", "--trt-artifacts-dir=art", *xdist]
    result = run(pytester, *args)
    result.assert_outcomes(failed=1)
    assert "reduce (" not in result.stdout.str()  # only when asked
    assert not list((pytester.path / "art").rglob("reduced.onnx"))
    result = run(pytester, "--trt-reduce", *args)
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert HEAD in text
    assert "  plant_sub_out: 64 of 64 elements out of tolerance, greatest abs error" in text
    (folder,) = (pytester.path / "art").iterdir()
    assert (
        f"reduced graph in {folder}:\n  reduced.onnx, reduced.inputs.safetensors, "
        "reduced.inputs.json\nreproduce with:\n  trtcompare run "
    ) in text
    reduced = onnx.load(str(folder / "reduced.onnx"))
    assert [node.name for node in reduced.graph.node] == ["plant_sub"]
    golden = load_reference(folder / "reduced.inputs.safetensors")
    assert len(golden.iterations) == 2  # every draw of the test, not one
    command = _reproduce(text)
    assert command[:5] == ["trtcompare", "run", str(folder / "reduced.onnx"), "--onnxref", "--fp16"]
    assert main(command[1:]) == 1  # the command fails as the item did
    capsys.readouterr()
    assert "INTERNALERROR" not in text and "Traceback" not in text


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_the_marker_asks_for_it_and_misuse_is_an_error_naming_it(pytester, xdist):
    _scenario(pytester, ", reduce=True")
    result = run(pytester, "--trt-precision=fp16", *xdist)
    result.assert_outcomes(failed=1)
    assert HEAD in result.stdout.str()
    _scenario(pytester, ", reduce='yes'")
    result = run(pytester, "--trt-precision=fp16", *xdist)
    result.assert_outcomes(errors=1)
    assert "reduce=...) got 'yes' (str); it takes True or False" in result.stdout.str()


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_a_passing_item_is_not_reduced(pytester, xdist):
    _scenario(pytester, ", tolerance={'atol': 10, 'rtol': 1}")
    result = run(
        pytester, "--trt-precision=fp16", "--trt-reduce", "--trt-artifacts-dir=art", *xdist
    )
    result.assert_outcomes(passed=1)
    assert not (pytester.path / "art").exists()


def test_the_fp64_check_is_not_a_tolerance_it_can_judge(pytester):
    _scenario(pytester, ", tolerance={'check': 'fp64'}")
    result = run(pytester, "--trt-precision=fp16", "--trt-reduce")
    result.assert_outcomes(failed=1)
    assert (
        "--trt-reduce: not run; its search compares each candidate model under an elementwise "
        "or statistic tolerance, and this test's is the fp64 check"
    ) in " ".join(result.stdout.str().split())


# -- the TensorRT runner, through its double ---------------------------------------------------
@pytest.fixture
def fake(monkeypatch):
    return functools.partial(install_doubles, monkeypatch)


@pytest.mark.parametrize("runner", ["onnxrt", "onnxref", "trt"])
def test_every_converting_runner_reduces_to_the_scaled_weight(fake, runner):
    """A weight past fp16's range (clamped to 65504 by the conversion): onnxruntime on CPU,
    which computes float16 nodes in float32, and TensorRT 11 (its double: the converted model
    built strongly typed, run in-process) get it wrong too; every candidate runs on `runner`."""
    fake(version="11.4.0.106")
    options = {"isolate": False} if runner == "trt" else None
    result = reduce_model(scaled(), "fp16", runner, runner_options=options)
    assert result.nodes == ("plant_scale",) and result.runner == runner
    assert result.describe().startswith(
        f"reduce ({runner} fp16): 1 of 11 nodes still fail: plant_scale (Mul) ("
    )


def test_a_tensorrt_item_is_reduced_on_tensorrt(fake, pytester):
    fake(version="11.4.0.106")
    onnx.save(scaled(), str(pytester.path / "scaled.onnx"))
    pytester.makepyfile(
        test_t="import pytest\n\n"
        "@pytest.mark.compare_frameworks(model='scaled.onnx', frameworks=['trt', 'onnxrt'], "
        "options={'trt': {'isolate': False}})\n"
        "def test_scaled():\n    pass\n"
    )
    result = pytester.runpytest("--trt-precision=fp16", "--trt-reduce")
    result.assert_outcomes(failed=1)
    assert "reduce (trt fp16): 1 of 11 nodes still fail: plant_scale (Mul)" in result.stdout.str()


# -- a torch twin: its ONNX model is reduced ------------------------------------------------------
def _pair() -> onnx.ModelProto:
    weights = [numpy_helper.from_array(onnx.numpy_helper.np.full(WIDTH, 3000.0, "float32"), "c")]
    nodes = [
        helper.make_node("Add", ["x", "c"], ["big"], name="plant_add"),
        helper.make_node("Sub", ["big", "c"], ["back"], name="plant_sub"),
        helper.make_node("Relu", ["back"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "pair",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])],
        weights,
    )
    return make(graph)


TWIN = """
import pytest
import torch


class Pair(torch.nn.Module):
    def forward(self, x):
        return torch.relu((x + 3000.0) - 3000.0)


@pytest.mark.compare_frameworks(
    model="pair.onnx", frameworks=["torch", "onnxrt"], models={"torch": Pair()}
)
def test_twin():
    pass


@pytest.mark.compare_frameworks(
    model=Pair(),
    frameworks=["torch"],
    options={"torch": {"input_specs": {"x": ("float32", (1, 64))}}},
)
def test_module_alone():
    pass
"""


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_a_torch_twin_has_its_onnx_model_reduced(pytester, xdist):
    pytest.importorskip("torch")
    onnx.save(_pair(), str(pytester.path / "pair.onnx"))
    pytester.makepyfile(test_twin=TWIN)
    result = run(pytester, "--trt-precision=fp16", "--trt-reduce", *xdist)
    result.assert_outcomes(failed=2)
    text = " ".join(result.stdout.str().split())
    assert (
        "torch runs its own model: its ONNX model is reduced on onnxref fp16 instead "
        "reduce (onnxref fp16): 1 of 3 nodes still fail: plant_sub (Sub)"
    ) in text
    assert (
        "--trt-reduce: not run; torch runs fp16 by its own means, not on an ONNX model "
        "converted to it, which the search varies, and no ONNX model"
    ) in text
    assert "INTERNALERROR" not in text


def test_junit_xml_carries_the_reduced_graph(pytester):
    _scenario(pytester)
    result = run(pytester, "--trt-precision=fp16", "--trt-reduce", "--junitxml=j.xml")
    result.assert_outcomes(failed=1)
    tree = ElementTree.parse(pytester.path / "j.xml")
    (value,) = [
        p.get("value") for p in tree.iter("property") if p.get("name") == "trtcompare.reduced"
    ]
    reduced = json.loads(value)
    assert reduced["nodes"] == ["plant_sub"] and reduced["node_count"] == 15
    assert [Path(p).name for p in reduced["files"]] == [
        "reduced.onnx",
        "reduced.inputs.safetensors",
        "reduced.inputs.json",
    ]
    assert all(Path(p).is_file() for p in reduced["files"])
    assert reduced["command"].startswith("trtcompare run ")


def test_a_golden_item_says_why_it_is_not_reduced(pytester):
    """The golden was written from another model: the item fails against its golden, which
    no reduction judges (it runs the target's own fp32 run): the report says so."""
    onnx.save(planted(before=6, after=6), str(pytester.path / "planted.onnx"))
    pytester.makepyfile(
        test_g="import pytest\n\n"
        "@pytest.mark.compare_frameworks(model='planted.onnx', frameworks=['onnxref'], "
        "golden=True)\n"
        "def test_golden():\n    pass\n"
    )
    run(pytester, "--trt-precision=fp16", "--trt-update-goldens").assert_outcomes(passed=1)
    onnx.save(scaled(before=6, after=6), str(pytester.path / "planted.onnx"))
    result = run(pytester, "--trt-precision=fp16", "--trt-reduce")
    result.assert_outcomes(failed=1)
    assert (
        "--trt-reduce: not run; this item compares with its golden, and a reduction judges each "
        "subgraph against the target's own fp32 run: reduce the model from the shell "
        f"(trtcompare reduce {pytester.path / 'planted.onnx'} --precision fp16 --runner onnxref)"
    ) in " ".join(result.stdout.str().split())


def test_an_fp32_item_says_a_reduction_is_of_fp16_or_bf16(pytester):
    onnx.save(planted(before=4, after=4), str(pytester.path / "planted.onnx"))
    onnx.save(scaled(), str(pytester.path / "scaled.onnx"))
    pytester.makepyfile(
        test_f="import pytest\n\n"
        "@pytest.mark.compare_frameworks(model='planted.onnx', frameworks=['onnxref', "
        "'onnxrt'], models={'onnxref': 'scaled.onnx'})\n"
        "def test_other_model():\n    pass\n"
    )
    result = run(pytester, "--trt-reduce")
    result.assert_outcomes(failed=1)
    assert (
        "--trt-reduce: not run; the item runs at fp32, and a reduction converts the model to "
        "fp16 or bf16"
    ) in " ".join(result.stdout.str().split())


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_an_fp16_overflow_under_w_error_is_a_failure_with_its_report(pytester, xdist):
    """-W error (CI's setting): onnx.reference's numpy overflow warning is no error of the
    run; the item fails with its report, the probable cause and the reduced graph."""
    onnx.save(scaled(), str(pytester.path / "scaled.onnx"))
    pytester.makepyfile(
        test_w="import pytest\n\n"
        "@pytest.mark.compare_frameworks(model='scaled.onnx', frameworks=['onnxref', 'onnxrt'])\n"
        "def test_scaled():\n    pass\n"
    )
    # a subprocess: in-process, -W error would also raise pytest's warning that the plugin,
    # imported already by this session, cannot be assertion-rewritten
    args = ("-W", "error", "--trt-precision=fp16", "--trt-reduce", *xdist)
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "probable cause: plant_scale (Mul) reaches " in text
    assert "reduce (onnxref fp16): 1 of 11 nodes still fail: plant_scale (Mul)" in text
    assert "RuntimeWarning" not in text and "could not be written" not in text


def test_the_marker_keeps_a_test_out_of_the_flag(pytester):
    _scenario(pytester, ", reduce=False")
    result = run(pytester, "--trt-precision=fp16", "--trt-reduce")
    result.assert_outcomes(failed=1)
    assert "reduce (" not in result.stdout.str() and "--trt-reduce" not in result.stdout.str()
