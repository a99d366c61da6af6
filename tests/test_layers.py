"""Per-layer comparison people can act on (issue 13, part 2): the first divergence by node and
op type, integer / bool tensors left out, only failing layers and a few around the first
divergence listed, layers='report', and the marker path's memory bound. Through pytester,
with and without -n 2, with a real onnxruntime and the reference evaluator at fp16."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare import compare_outputs, runners
from pytest_trtcompare.engine.layers import LayerView, listed
from pytest_trtcompare.session import cases, layer_runs
from pytest_trtcompare.session.expand import Case
from pytest_trtcompare.session.settings import ToleranceSettings
from pytest_trtcompare.session.spec import compare_spec

from .pytester_helpers import XDIST, XDIST_SLOW, run


def block_model() -> onnx.ModelProto:
    """x*1000 + 3000 diverges at fp16 (rel 5e-4), tanh squashes it to exactly 1; the output is
    reshaped through int64 shape plumbing (Shape), as exporters do."""
    consts = [
        numpy_helper.from_array(np.array(1000, np.float32), "k"),
        numpy_helper.from_array(np.array(3000, np.float32), "c"),
    ]
    nodes = [
        helper.make_node("Mul", ["x", "k"], ["/block/scale/Mul_output_0"], name="/block/scale/Mul"),
        helper.make_node(
            "Add", ["/block/scale/Mul_output_0", "c"], ["/block/Add_output_0"], name="/block/Add"
        ),
        helper.make_node("Tanh", ["/block/Add_output_0"], ["t"], name="/block/act/Tanh"),
        helper.make_node("Shape", ["x"], ["/block/Shape_output_0"], name="/block/Shape"),
        helper.make_node("Reshape", ["t", "/block/Shape_output_0"], ["y"], name="/block/Reshape"),
    ]
    graph = helper.make_graph(
        nodes,
        "block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        consts,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


CONFTEST = """
import onnx
from tests_layers_model import MODEL

def pytest_configure(config):
    onnx.save(MODEL, str(config.rootpath / "block.onnx"))
"""

TEST = """
import pytest

@pytest.mark.compare_frameworks(
    model="block.onnx", frameworks=["onnxrt", "onnxref"], outputs="all",
    tolerance={{"atol": 1e-4, "rtol": 1e-4}}{extra}
)
@pytest.mark.shapes({{"x": (2, 3)}})
def test_block(comparison):
    pass
"""


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(
        tests_layers_model="import onnx\nMODEL = onnx.load_from_string("
        f"{block_model().SerializeToString()!r})\n"
    )
    pytester.makeconftest(CONFTEST)
    pytester.syspathinsert()

    def write(extra: str = "") -> None:
        pytester.makepyfile(test_block=TEST.format(extra=extra))

    return write


@pytest.mark.parametrize("xdist", XDIST)
def test_failure_names_the_node_and_lists_only_what_matters(pytester, suite, xdist):
    suite()
    result = run(
        pytester,
        "--trt-precision=fp16",
        "--junitxml=junit.xml",
        "--trt-report=r.json",
        *xdist,
    )
    result.assert_outcomes(failed=1)
    assert result.ret == 1
    text = result.stdout.str()
    assert (
        "onnxref-fp16 vs onnxrt-fp32: 2 of 4 layers out of tolerance (1 integer/bool tensors "
        "not compared; layer_dtypes='all' compares them); the model outputs pass" in text
    )
    assert "first divergence (topological order): /block/scale/Mul (Mul), layer 1 of 4" in text
    assert "/block/scale/Mul (Mul) (float16 vs float32, shape (2, 3)):" in text  # in detail
    assert "FAILED: /block/Add (Add) (float16 vs float32" in text  # one line
    assert "passed: /block/Reshape (Reshape) -> y (float32 vs float32" in text
    assert "Shape" not in text.split("accuracy summary")[0].replace("/block/Shape", "")
    assert "more passing layers not listed" in text  # /block/act/Tanh -> t
    assert "INTERNALERROR" not in text and "Traceback" not in text
    properties = ET.parse(pytester.path / "junit.xml").getroot().iter("property")
    names = [p.get("name") for p in properties]
    records = [name for name in names if name.endswith(".record")]
    assert len(records) == len(set(records)) == 3 and names.count("trtcompare.layers") == 1
    document = json.loads((pytester.path / "r.json").read_text())
    (summary,) = document["layers"]
    assert summary["first_divergence_node"] == "/block/scale/Mul (Mul)"
    assert (summary["compared"], summary["listed"], summary["not_listed"]) == (4, 3, 1)
    assert summary["left_out"] == 1 and summary["passed"] is False
    assert len(document["outputs"]) == 3


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_report_mode_passes_on_the_outputs_and_warns_with_the_divergence(pytester, suite, xdist):
    suite(', layers="report"')
    result = run(pytester, "--trt-precision=fp16", "--trt-report=r.json", *xdist)
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*LayerDivergenceWarning: test_block[[]onnxref-fp16-bs2[]]: first divergence "
            "/block/scale/Mul (Mul) (*x its tolerance); the model outputs pass and decide "
            "the verdict (layers='report')"
        ]
    )
    result.stdout.fnmatch_lines(["*over  test_block*/block/scale/Mul (Mul)*"])  # not deciding
    (summary,) = json.loads((pytester.path / "r.json").read_text())["layers"]
    assert summary["passed"] is True and summary["layers"] == "report"


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_command_line_gates_over_the_marker(pytester, suite, xdist):
    suite(', layers="report"')
    result = run(pytester, "--trt-precision=fp16", "--trt-layers=gate", *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*first divergence (topological order): /block/scale/Mul (Mul)*"])


def test_ini_report_mode(pytester, suite):
    suite()
    pytester.makeini("[pytest]\ntrtcompare_layers = report\n")
    result = run(pytester, "--trt-precision=fp16")
    result.assert_outcomes(passed=1)


def test_integer_tensors_are_compared_when_asked(pytester, suite):
    suite(', layer_dtypes="all"')
    result = run(pytester, "--trt-precision=fp16", "-vv")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "2 of 5 layers out of tolerance; the model outputs pass" in text
    assert "passed: /block/Shape (Shape) (int64 vs int64, shape (2,))" in text  # -vv: all


MARKER_MISTAKES = [
    (
        ', layers="repor"',
        "test_block.py::test_block: @pytest.mark.compare_frameworks(layers=...) got "
        "'repor' (str); it takes 'gate' or 'report'",
    ),
    (", layers=True", "*(layers=...) got True (bool); it takes 'gate' or 'report'"),
    (', layer_dtypes="ints"', "*(layer_dtypes=...) got 'ints' (str); it takes 'float' or 'all'"),
]


@pytest.mark.parametrize(
    ("extra", "message", "xdist"),
    [  # under xdist the first in the test command, the others with -m slow
        pytest.param(
            *mistake,
            xdist.values[0],
            id=f"{mistake[0]}-{xdist.id}",
            marks=pytest.mark.slow if i and xdist.values[0] else (),
        )
        for i, mistake in enumerate(MARKER_MISTAKES)
        for xdist in XDIST
    ],
)
def test_marker_mistakes_name_the_argument(pytester, suite, xdist, extra, message):
    suite(extra)
    result = run(pytester, *xdist)
    assert result.ret == 1  # the test's error at setup, as every marker mistake
    result.stdout.fnmatch_lines([f"*{message}*"])
    assert "INTERNALERROR" not in result.stdout.str()
    assert "Traceback" not in result.stdout.str()


def test_layers_without_outputs_all_is_named(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compare_frameworks(model="m.onnx", frameworks=["onnxrt"], layers="report")
        def test_x():
            pass
        """
    )
    result = run(pytester)
    result.stdout.fnmatch_lines(
        ["*(layers=...) got 'report' (str); it takes a per-layer comparison: add outputs='all'*"]
    )
    assert "INTERNALERROR" not in result.stdout.str()


def test_bad_command_line_and_ini_values_are_usage_errors(pytester, suite):
    suite()
    result = run(pytester, "--trt-layers=gates")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*argument --trt-layers: invalid choice: 'gates'*"])
    pytester.makeini("[pytest]\ntrtcompare_layers = strict\n")
    result = run(pytester)
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*ini trtcompare_layers = 'strict': takes gate or report*"])


# -- compare_layers ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def block_runners():
    reference = runners.create("onnxrt", block_model(), outputs="all")
    target = runners.create("onnxref", block_model(), "fp16", outputs="all")
    feed = {"x": np.random.default_rng(1).random((2, 3), dtype=np.float32)}
    return target, reference, feed


def test_compare_layers_leaves_out_integer_tensors_and_names_nodes(block_runners):
    target, reference, feed = block_runners
    result = layer_runs.compare_layers(target, reference, feed, atol=1e-4, rtol=1e-4)
    assert list(result.outputs) == [
        "/block/scale/Mul_output_0",
        "/block/Add_output_0",
        "t",
        "y",
    ]
    assert result.layers is not None and result.layers.left_out == 1
    assert result.layers.model_outputs == ("y",)
    assert result.first_divergence_node == "/block/scale/Mul (Mul)"
    assert not result.passed
    everything = layer_runs.compare_layers(
        target, reference, feed, atol=1e-4, rtol=1e-4, layer_dtypes="all"
    )
    assert "/block/Shape_output_0" in everything.outputs
    assert everything.outputs["/block/Shape_output_0"].passed


def test_per_output_tolerances_are_checked_once_against_every_layer(block_runners, recwarn):
    """Groups that lack a named output say nothing; a name no layer has warns once."""
    import warnings

    from pytest_trtcompare.errors import ToleranceWarning

    target, reference, feed = block_runners
    tolerance = {"": {"atol": 1e-4, "rtol": 1e-4}, "y": {"atol": 1e-1, "rtol": 1e-1}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = layer_runs.compare_layers(target, reference, feed, tolerance, group=1)
    assert not [w for w in caught if issubclass(w.category, ToleranceWarning)]
    assert result.outputs["y"].tolerance.atol == 1e-1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layer_runs.compare_layers(target, reference, feed, {**tolerance, "why": {}}, group=1)
    found = [str(w.message) for w in caught if issubclass(w.category, ToleranceWarning)]
    assert len(found) == 1 and "['why']" in found[0]
    assert "outputs are ['/block/Add_output_0'," in found[0]


def test_a_misspelt_output_name_gets_the_closest_names():
    import warnings

    from pytest_trtcompare.errors import ToleranceWarning

    outputs = {f"/encoder/layer.{i}/MatMul_output_0": np.ones(3) for i in range(200)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compare_outputs(outputs, outputs, {"": {}, "/encoder/layer.7/Matmul_output_0": {}})
    (message,) = [str(w.message) for w in caught if issubclass(w.category, ToleranceWarning)]
    assert "did you mean '/encoder/layer.7/MatMul_output_0'" in message
    assert "(200 outputs)" in message and len(message) < 400


def test_report_mode_decides_on_the_model_outputs(block_runners):
    target, reference, feed = block_runners
    result = layer_runs.compare_layers(
        target, reference, feed, atol=1e-4, rtol=1e-4, layers="report"
    )
    assert result.passed and result.first_divergence == "/block/scale/Mul_output_0"
    text = result.report()
    assert "2 of 4 layers out of tolerance" in text
    assert "the model outputs pass (layers='report': only they decide the verdict)" in text


def test_compare_layers_refuses_unknown_modes(block_runners):
    target, reference, feed = block_runners
    with pytest.raises(ValueError, match="layers='gates': takes one of gate, report"):
        layer_runs.compare_layers(target, reference, feed, layers="gates")
    with pytest.raises(ValueError, match="layer_dtypes='int': takes one of float, all"):
        layer_runs.compare_layers(target, reference, feed, layer_dtypes="int")


def test_listing_counts_the_rest():

    names = [f"t{i}" for i in range(10)]
    actual = {n: np.full(3, 1.0 if n != "t5" else 2.0, np.float32) for n in names}
    expected = {n: np.ones(3, np.float32) for n in names}
    result = compare_outputs(actual, expected)
    result = dataclasses.replace(result, per_layer=True, layers=LayerView(model_outputs=("t9",)))
    listing = listed(result)
    assert listing.names == ("t3", "t4", "t5", "t9") and listing.detailed == ("t5",)
    assert listing.not_shown == 6
    assert listed(result, verbosity=2).names == tuple(names)


# -- the marker path's memory bound -------------------------------------------------------------
def test_marker_path_fetches_groups_within_the_budget_and_caches_no_layers(monkeypatch):
    """layer_budget="1KiB": tensors of 2x32 float32 (256 B a side, 512 B both) two a group,
    the last ones of 2x8 with them."""
    from pytest_trtcompare.runners.onnxrt import OnnxRuntimeRunner

    asked: list[int] = []
    held: list[int] = []

    class RecordingRunner(OnnxRuntimeRunner):
        def _infer(self, feed):
            asked.append(len(self.wanted_outputs()))
            outputs = super()._infer(feed)
            held.append(sum(value.nbytes for value in outputs.values()))
            return outputs

    real_create = runners.create
    monkeypatch.setattr(
        runners,
        "create",
        lambda name, model, precision="fp32", **options: (
            RecordingRunner(model, precision, **options)
            if name == "onnxrt"
            else real_create(name, model, precision, **options)
        ),
    )
    from .onnx_models import layer_chain

    arguments = {"frameworks": ["onnxrt", "onnxref"], "outputs": "all", "layer_budget": "1KiB"}
    spec = compare_spec((), {"model": layer_chain(), **arguments}, "t")
    runner = cases.CaseRunner(ToleranceSettings())
    outcome = runner.run(spec, Case("onnxref", "fp32", {"x": (2, 16)}, "bs2", ({"x": (2, 16)},)))
    assert outcome.kind.value == "passed", outcome.message
    assert len(outcome.results[0].outputs) == 12
    assert asked == [2, 2, 2, 2, 4]  # never all layers at once
    assert max(held) * 2 <= 1024  # both sides' tensors of a group within the budget
    assert not runner._expected  # the reference's all-layer outputs are not cached


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_a_per_layer_golden_reports_as_a_per_layer_comparison(pytester, xdist, monkeypatch):
    """golden=True with outputs="all": the target's layers against the golden's, in order,
    float tensors only, with the first divergence, not a flat list of every tensor."""
    changed = block_model()
    changed.graph.initializer[1].CopyFrom(numpy_helper.from_array(np.array(3001, np.float32), "c"))
    pytester.makepyfile(
        tests_layers_model="import os, onnx\n"
        f"MODEL = onnx.load_from_string({block_model().SerializeToString()!r}\n"
        f"    if not os.environ.get('CHANGED') else {changed.SerializeToString()!r})\n"
    )
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_golden="""
        import pytest

        @pytest.mark.compare_frameworks(model="block.onnx", frameworks=["onnxref"], golden=True,
                                        outputs="all")
        @pytest.mark.shapes({"x": (2, 3)})
        def test_block(comparison):
            pass
        """
    )
    pytester.syspathinsert()
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    run(pytester, *xdist).assert_outcomes(passed=1)
    monkeypatch.setenv("CHANGED", "1")  # c = 3001: the Add moves by 1, tanh hides it
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*1 of 4 layers out of tolerance (1 integer/bool tensors not compared; "
            "layer_dtypes='all' compares them); the model outputs pass",
            "first divergence (topological order): /block/Add (Add), layer 2 of 4",
        ]
    )


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_outputs_all_misspelt_is_refused_not_taken_for_an_output_name(pytester, xdist):
    """outputs="al" is a typo of "all", not an output called 'al' (a new-user trial got
    'model has no output(s) ['al']' at setup)."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compare_frameworks(model="m.onnx", frameworks=["onnxrt"], outputs="al")
        def test_typo():
            pass
        """
    )
    result = run(pytester, *xdist)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_typo: @pytest.mark.compare_frameworks(outputs=...) got 'al' (str); it takes "
            "'all' (every tensor: did you mean it?) or output names*"
        ]
    )
