"""The fp64 check (issue 37, item 1): Tolerance(check="fp64") in compare_frameworks bounds the
target's RMSE against a float64 run of the reference by `threshold` (the multiplier) times
the reference framework's own RMSE at the same precision, plus `atol` (the floor).

The rule on arrays, the float64 conversion of ONNX models, and the plugin's outcomes as a
user meets them (pass, fail, the reference at fp32, an ONNX reference, and the misuses: a
golden, the compare fixture, a reference without float64, a bad multiplier), with and
without -n 2. Real architectures: tests/zoo/test_zoo_fp64.py."""

from __future__ import annotations

import math
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare import Tolerance, compare_outputs
from pytest_trtcompare.engine.anchored import Anchor, rmse
from pytest_trtcompare.engine.compare import compare_with_table
from pytest_trtcompare.engine.tolerance_table import ToleranceTable
from pytest_trtcompare.errors import ToleranceError
from pytest_trtcompare.runners import create
from pytest_trtcompare.runners.precision import to_float64
from pytest_trtcompare.session.settings import ToleranceSettings

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import glob_escape, run

torch = pytest.importorskip("torch")


def _anchored(actual, float64, reduced, tolerance=None):
    table = ToleranceTable(tolerance or Tolerance(check="fp64"))
    anchor = Anchor({"y": float64}, {"y": reduced}, "torch fp16")
    return compare_with_table({"y": actual}, {"y": reduced}, table, anchor=anchor).outputs["y"]


def test_the_rule_multiplier_times_the_references_error_plus_the_floor():
    float64 = np.linspace(-1, 1, 1000)
    reduced = float64 + 1e-3  # the reference at the precision: rmse 1e-3
    inside = _anchored(float64 + 1.9e-3, float64, reduced)
    outside = _anchored(float64 + 2.2e-3, float64, reduced)
    fp64 = inside.metric("fp64")
    assert inside.passed and math.isclose(fp64.value, 1.9e-3) and math.isclose(fp64.ratio, 1.9)
    assert math.isclose(fp64.reference_error, 1e-3) and fp64.floor == 1e-5
    assert math.isclose(inside.margin, 1.9e-3 / 2.01e-3)
    assert not outside.passed and outside.margin > 1
    assert outside.metric("fp64").describe() == (
        "fp64: rmse against float64 0.0022 > 2 x 0.001 (torch fp16's) + 1e-05 = 0.00201 "
        "(ratio 2.2; call; margin 1.09)"
    )
    # threshold is the multiplier, atol the floor
    loose = Tolerance(check="fp64", threshold=3.0, atol=0.0)
    assert _anchored(float64 + 2.9e-3, float64, reduced, loose).passed
    floored = Tolerance(check="fp64", atol=1e-2)
    assert _anchored(float64 + 1.1e-2, float64, reduced, floored).passed


def test_a_reference_without_error_is_bounded_by_the_floor_and_nan_fails():
    values = np.arange(8, dtype=np.float64)
    exact = _anchored(values, values, values)
    assert exact.passed and exact.margin == 0.0 and exact.metric("fp64").ratio == 0.0
    assert _anchored(values + 5e-6, values, values).passed  # within the floor 1e-5
    off = _anchored(values + 1e-3, values, values)
    assert not off.passed and off.metric("fp64").ratio == math.inf
    nan = values.copy()
    nan[3] = np.nan
    assert not _anchored(nan, values, values).passed
    assert not _anchored(values, values, nan).passed  # NaN in the reference: never within
    assert rmse(np.zeros(0), np.zeros(0)) == 0.0
    assert _anchored(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3))).passed


def test_misuse_outside_compare_frameworks_and_bad_multipliers_are_named():
    with pytest.raises(ToleranceError, match=r"check='fp64' \(output 'y'\) compares against a"):
        compare_outputs({"y": np.ones(3)}, {"y": np.ones(3)}, Tolerance(check="fp64"))
    with pytest.raises(ToleranceError, match=r"threshold of check='fp64' must be finite"):
        Tolerance(check="fp64", threshold=-1)
    assert Tolerance(check="fp64").threshold == 2.0
    assert Tolerance(check="fp64").describe() == (
        "fp64 check: rmse against float64 <= 2 (default) x the reference's at this precision "
        "+ 1e-05 (default)"
    )
    # as fields: threshold= and atol= (the floor), its own floor, nothing else
    with pytest.raises(ToleranceError, match=r"rtol= does nothing for a metric check"):
        ToleranceTable({"check": "fp64", "rtol": 0.1})
    at_fp16 = ToleranceSettings().resolve("fp16", {"check": "fp64"}, source="marker").default
    assert (at_fp16.atol, at_fp16.threshold) == (1e-5, 2.0)  # not fp16's atol 0.01
    table = ToleranceTable(Tolerance(check="fp64"))
    short = Anchor({"y": np.ones(2)}, {"y": np.ones(3)}, "torch fp16")
    with pytest.raises(Exception, match=r"output 'y' has shape \(2,\) in the float64 run"):
        compare_with_table({"y": np.ones(3)}, {"y": np.ones(3)}, table, anchor=short)
    gone = Anchor({}, {"y": np.ones(3)}, "torch fp16")
    with pytest.raises(Exception, match=r"output 'y' is missing from the float64 run"):
        compare_with_table({"y": np.ones(3)}, {"y": np.ones(3)}, table, anchor=gone)


def _subgraph_model() -> onnx.ModelProto:
    """x (float32) -> x * c + Constant, a Cast to float, an If whose branches use a float
    initializer of the outer graph, and x itself also an output."""
    c = numpy_helper.from_array(np.array([1 / 3], np.float32), "c")
    branch = helper.make_graph(
        [helper.make_node("Mul", ["scaled", "c"], ["branch_out"])],
        "then",
        [],
        [helper.make_tensor_value_info("branch_out", TensorProto.FLOAT, None)],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["scaled"], ["other_out"])],
        "else",
        [],
        [helper.make_tensor_value_info("other_out", TensorProto.FLOAT, None)],
    )
    nodes = [
        helper.make_node("Constant", [], ["k"], value_float=0.1),
        helper.make_node("Mul", ["x", "c"], ["m"]),
        helper.make_node("Add", ["m", "k"], ["added"]),
        helper.make_node("Cast", ["added"], ["scaled"], to=TensorProto.FLOAT),
        helper.make_node("Constant", [], ["flag"], value_int=1),
        helper.make_node("Cast", ["flag"], ["cond"], to=TensorProto.BOOL),
        helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=other),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [4]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
        ],
        [c],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_the_float64_conversion_computes_in_float64_and_keeps_float32_inputs():
    model = to_float64(_subgraph_model())
    onnx.checker.check_model(model, full_check=True)
    assert model.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    x = np.array([0.1, 1.0, -7.0, 3.0], np.float32)
    runner = create("onnxref", _subgraph_model(), "fp64")  # converts it as above
    outputs = runner.infer({"x": x})
    assert outputs["y"].dtype == np.float64
    # c was float32 1/3 and k float32 0.1: exact values, float64 arithmetic
    c, k = float(np.float32(1 / 3)), float(np.float32(0.1))
    np.testing.assert_array_equal(outputs["y"], (x.astype(np.float64) * c + k) * c)
    np.testing.assert_array_equal(outputs["x"], x)  # an input passed through stays float32


MODULE = """
import torch


class Mlp(torch.nn.Module):
    def __init__(self, noise=0.0):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = torch.nn.Linear(64, 256)
        self.fc2 = torch.nn.Linear(256, 32)
        if noise:
            with torch.no_grad():
                self.fc1.weight.mul_(1 + noise * torch.randn(self.fc1.weight.shape))

    def forward(self, x):
        return {"logits": self.fc2(torch.tanh(self.fc1(x)))}


def identity(feed):
    return {"logits": feed["x"][:, :32] * 1.0}
"""


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    """The Mlp exported, and its export with fc1's weight perturbed by 10% (one bad layer)."""
    namespace: dict = {}
    exec(MODULE, namespace)
    folder = tmp_path_factory.mktemp("fp64")
    paths = {}
    for name, noise in (("mlp", 0.0), ("mlp_perturbed", 0.1)):
        paths[name] = folder / f"{name}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                namespace["Mlp"](noise).eval(),
                (torch.rand(4, 64),),
                str(paths[name]),
                input_names=["x"],
                output_names=["logits"],
                dynamo=False,
            )
    return paths


def _tests(paths) -> str:
    good, bad = str(paths["mlp"]), str(paths["mlp_perturbed"])
    return f"""
import pytest
from pytest_trtcompare import Tolerance
from fp64mods import Mlp

FP64 = Tolerance(check="fp64")


@pytest.mark.compare_frameworks(
    model={good!r}, frameworks=["onnxrt", "torch"], reference="torch",
    models={{"torch": Mlp()}}, tolerance=FP64, iterations=5,
)
@pytest.mark.shapes({{"x": (4, 64)}})
def test_exported(comparison):
    pass


@pytest.mark.compare_frameworks(
    model={bad!r}, frameworks=["onnxrt", "torch"], reference="torch",
    models={{"torch": Mlp()}}, tolerance=FP64, iterations=5,
)
@pytest.mark.shapes({{"x": (4, 64)}})
def test_perturbed(comparison):
    pass


@pytest.mark.compare_frameworks(
    model={good!r}, frameworks=["onnxref", "onnxrt"], reference="onnxrt", tolerance=FP64,
)
@pytest.mark.shapes({{"x": (4, 64)}})
def test_onnx_reference(comparison):
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_the_export_passes_the_perturbed_layer_fails_at_every_precision(pytester, exports, xdist):
    pytester.makepyfile(fp64mods=MODULE, test_fp64=_tests(exports))
    pytester.syspathinsert()
    result = run(pytester, "-rA", "--trt-precision=fp32,fp16,bf16", *xdist)
    outcomes = {
        line.split()[1]: line.split()[0]
        for line in result.stdout.lines
        if line.startswith(("PASSED ", "FAILED ", "SKIPPED ", "ERROR ")) and "::" in line
    }
    assert outcomes == {
        "test_fp64.py::test_exported[onnxrt-fp32-bs4]": "PASSED",
        "test_fp64.py::test_exported[onnxrt-fp16-bs4]": "PASSED",
        "test_fp64.py::test_perturbed[onnxrt-fp32-bs4]": "FAILED",
        "test_fp64.py::test_perturbed[onnxrt-fp16-bs4]": "FAILED",
        "test_fp64.py::test_onnx_reference[onnxref-fp32-bs4]": "PASSED",
        "test_fp64.py::test_onnx_reference[onnxref-fp16-bs4]": "PASSED",
    }, result.stdout.str()
    # bf16: onnxrt cannot run it on CPU, as a target, or as the reference at bf16
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]1[]] test_fp64.py:8: onnxruntime CPU has no bfloat16 kernel for Gemm*"]
    )
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1[]] test_fp64.py:26: fp64 check: the reference at bf16: onnxruntime CPU "
            "has no bfloat16 kernel*"
        ]
    )
    result.assert_outcomes(passed=4, failed=2, skipped=3)
    result.stdout.fnmatch_lines(
        [
            "*test_perturbed*onnxrt-fp16*",
            "*onnxrt-fp16 vs torch-fp32: iteration 0 of 5 (* of 5 fail): 1 of 1 outputs out of "
            "tolerance*",
            "*logits (float32 vs float32, shape (4, 32)): 1 of 1 metric checks fail",
            "*FAILED fp64: rmse against float64 * > 2 x * (torch fp16's) + 1e-05 = * "
            "(ratio *; marker; margin *)",
            "*greatest abs error * at *",
        ]
    )
    assert result.ret == 1
    # --trt-debug-precision searches under elementwise tolerances: said, not run
    debug = run(pytester, "--trt-precision=fp16", "-k", "perturbed", "--trt-debug-precision")
    debug.assert_outcomes(failed=1)
    debug.stdout.fnmatch_lines(["--trt-debug-precision: not run; its search compares *"])
    # --trt-calibrate: the fp64 check has no atol to suggest, and says so
    calibrated = run(pytester, "--trt-precision=fp16", "-k", "exported", "--trt-calibrate=2")
    calibrated.assert_outcomes(passed=1)
    calibrated.stdout.fnmatch_lines(
        ["trtcompare-tolerances.toml: nothing calibrated: 1 case ran, under metric checks alone*"]
    )
    assert not (pytester.path / "trtcompare-tolerances.toml").exists()


MISUSE = """
import numpy as np
import pytest
from pytest_trtcompare import Tolerance

FP64 = Tolerance(check="fp64")


@pytest.mark.compare_frameworks(model={good!r}, frameworks=["onnxrt"], golden=True, tolerance=FP64)
@pytest.mark.shapes({{"x": (4, 64)}})
def test_golden(comparison):
    pass


@pytest.mark.compare_frameworks(model={good!r}, frameworks=["onnxrt"], tolerance=FP64)
@pytest.mark.shapes({{"x": (4, 64)}})
def test_alone(comparison):
    pass


@pytest.mark.compare_frameworks(
    model={good!r}, frameworks=["onnxrt", "onnxref"], outputs="all", tolerance=FP64
)
@pytest.mark.shapes({{"x": (4, 64)}})
def test_layers(comparison):
    pass


@pytest.mark.compare_frameworks(
    model={good!r}, frameworks=["onnxrt", "callable:fp64mods:identity"],
    reference="callable:fp64mods:identity", tolerance=FP64,
    options={{"callable": {{"input_specs": {{"x": ("float32", (4, 64))}}}}}},
)
def test_callable_reference(comparison):
    pass


def test_compare_fixture(compare):
    compare({{"y": np.ones(3)}}, {{"y": np.ones(3)}}, check="fp64")


def test_golden_fixture(golden):
    golden.check({{"y": np.ones(3)}}, tolerance=FP64)


@pytest.mark.compare_frameworks(
    model={good!r}, frameworks=["onnxrt"], tolerance={{"check": "fp64", "threshold": -2}},
)
def test_negative_multiplier(comparison):
    pass


def _contrib_op():  # onnxruntime runs com.microsoft's Gelu; onnx.reference knows no such op
    from onnx import TensorProto, helper

    spec = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4]) for n in ("x", "y")]
    graph = helper.make_graph(
        [helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")], "g", spec[:1], spec[1:]
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8)


@pytest.mark.compare_frameworks(
    model=_contrib_op(), frameworks=["callable:fp64mods:identity", "onnxrt"], reference="onnxrt",
    tolerance=FP64, options={{"callable": {{"input_specs": {{"x": ("float32", (2, 4))}}}}}},
)
def test_no_float64_model(comparison):
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_misuse_is_an_error_naming_why(pytester, exports, xdist):
    pytester.makepyfile(fp64mods=MODULE, test_misuse=MISUSE.format(good=str(exports["mlp"])))
    pytester.syspathinsert()
    result = run(pytester, "-rA", "--trt-precision=fp32", "--trt-update-goldens", *xdist)
    text = result.stdout.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text, text
    runs = "*check='fp64' runs the reference framework at float64 and at the target's "
    for test, why in (
        ("test_golden", "golden=True (a golden is no framework to run)"),
        ("test_alone", "frameworks=['onnxrt'] alone (the target would be its own reference: "),
        ("test_layers", 'outputs="all" (it compares model outputs, not each layer)'),
    ):  # the short summary cuts the line: the whole message heads the test's section
        result.stdout.fnmatch_lines([f"ERROR test_misuse.py::{test} - {runs}*"])
        result.stdout.fnmatch_lines([f"{runs}precision; not with {glob_escape(why)}*"])
    result.stdout.fnmatch_lines(
        [
            "ERROR test_misuse.py::test_callable_reference* - *fp64 check: the reference "
            "callable:fp64mods:identity cannot run float64 (callable runs fp32, *, not fp64)*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["FAILED test_misuse.py::test_compare_fixture - *check='fp64' (output 'y') compares*"]
    )
    result.stdout.fnmatch_lines(
        [
            "FAILED test_misuse.py::test_golden_fixture - *check='fp64' (every output) "
            "compares against a float64 run of a reference framework; a golden has none*"
        ]
    )
    result.stdout.fnmatch_lines(
        ["ERROR test_misuse.py::test_negative_multiplier* - *threshold of check='fp64' must be*"]
    )
    words = " ".join(text.split())  # the float64 conversion's run fails: said as the check's
    assert (
        "ModelLoadError: fp64 check: the float64 run of the reference's model failed: "
        "onnx.reference cannot load model <ModelProto>: Node type 'Gelu' from domain "
        "'com.microsoft' is unknown, known functions: []; a reference that runs float64 itself "
        "needs no float64 ONNX model: torch (e.g. reference='torch', models={'torch': module})"
    ) in words
    assert not list(pytester.path.rglob("*.safetensors"))  # no golden written by the misuse
