"""validate=True (Polygraphy's --validate): a NaN or Inf in either side's outputs fails the
comparison whatever the tolerance; a framework listed alone is checked with no reference.
The engine keyword, the marker argument, the fixtures' keyword, --trt-validate and ini
trtcompare_validate, per layer, goldens, `trtcompare diff --validate` and `trtcompare run
--validate`."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare import OutputMismatchError, assert_outputs_close, compare_outputs
from pytest_trtcompare.cli import main
from pytest_trtcompare.errors import ToleranceError
from tests.pytester_helpers import XDIST, run

FINITE = np.arange(12, dtype=np.float32).reshape(3, 4)
WITH_INF = FINITE.copy()
WITH_INF[1, 2] = np.inf
WITH_INF[2, 0] = np.nan


def test_outputs_within_tolerance_that_hold_nan_or_inf_fail_only_under_validate():
    assert compare_outputs({"y": WITH_INF}, {"y": WITH_INF}, nan_equal=True).passed
    result = compare_outputs({"y": WITH_INF}, {"y": WITH_INF}, nan_equal=True, validate=True)
    out = result.outputs["y"]
    assert not result.passed and out.values_passed and out.margin == math.inf
    assert out.invalid == "actual and expected hold 1 NaN and 1 Inf each, first at (1, 2)"
    assert result.report().splitlines()[:3] == [
        "1 of 1 outputs hold NaN or Inf: y",
        "",
        "y (float32 vs float32, shape (3, 4)): validate: actual and expected hold 1 NaN and 1 "
        "Inf each, first at (1, 2)",
    ]


def test_validate_names_each_side_and_joins_a_values_failure():
    result = compare_outputs({"y": WITH_INF}, {"y": FINITE}, validate=True)
    out = result.outputs["y"]
    assert out.invalid == "actual holds 1 NaN and 1 Inf, first at (1, 2)"
    assert not out.values_passed  # NaN and Inf against finite values fail anyway
    report = result.report()
    assert report.startswith("1 of 1 outputs out of tolerance: y")
    assert "  validate: actual holds 1 NaN and 1 Inf, first at (1, 2)" in report
    swapped = compare_outputs({"y": FINITE}, {"y": WITH_INF}, validate=True).outputs["y"]
    assert swapped.invalid == "expected holds 1 NaN and 1 Inf, first at (1, 2)"


def test_integers_and_finite_floats_pass_validate():
    ints = np.arange(6).reshape(2, 3)
    assert compare_outputs({"i": ints, "f": FINITE}, {"i": ints, "f": FINITE}, validate=True).passed


def test_validate_on_torch_tensors_and_bfloat16():
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for actual in (
        torch.from_numpy(WITH_INF),
        torch.from_numpy(WITH_INF).bfloat16(),
        WITH_INF.astype(ml_dtypes.bfloat16),
    ):
        out = compare_outputs({"y": actual}, {"y": FINITE}, validate=True).outputs["y"]
        assert out.invalid == "actual holds 1 NaN and 1 Inf, first at (1, 2)"


def test_assert_outputs_close_raises_with_what_validate_found():
    with pytest.raises(OutputMismatchError, match=r"validate: actual and expected hold 1 Inf"):
        assert_outputs_close({"y": np.array([np.inf])}, {"y": np.array([np.inf])}, validate=True)


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_validate_takes_true_or_false(value):
    with pytest.raises(ToleranceError, match=r"validate=.*: takes True or False"):
        compare_outputs({"y": FINITE}, {"y": FINITE}, validate=value)


SPECIAL = st.sampled_from([0.0, 1.0, -2.5, np.inf, -np.inf, np.nan])


@given(
    hnp.arrays(np.float32, st.integers(1, 12), elements=SPECIAL),
    hnp.arrays(np.float32, st.integers(1, 12), elements=SPECIAL),
)
def test_validate_fails_exactly_when_a_side_is_not_all_finite(a, e):
    e = np.resize(e, a.shape)
    out = compare_outputs({"y": a}, {"y": e}, nan_equal=True, validate=True).outputs["y"]
    finite = bool(np.isfinite(a).all() and np.isfinite(e).all())
    assert (out.invalid is None) == finite
    plain = compare_outputs({"y": a}, {"y": e}, nan_equal=True).outputs["y"]
    assert out.passed == (plain.passed and finite)
    if not finite:
        side = a if not np.isfinite(a).all() else e
        first = np.unravel_index(np.flatnonzero(~np.isfinite(side))[0], side.shape)
        assert f"first at {tuple(int(i) for i in first)}" in out.invalid


HELPERS = """
import numpy as np

def overflowing(feed, precision="fp32"):
    y = np.exp(feed["x"] * 100).astype(np.float32)  # x > 0.89 overflows float32
    return {"y": y, "z": np.minimum(y, 1)}
"""

MARKER_TESTS = """
import pytest

SPECS = {"callable": {"input_specs": {"x": ("float32", (64,))}}}
MARK = dict(frameworks=["callable:helpers:overflowing"], options=SPECS)

@pytest.mark.compare_frameworks(**MARK, validate=True)
def test_validated(comparison):
    pass

@pytest.mark.compare_frameworks(**MARK)
def test_plain(comparison):
    pass

@pytest.mark.compare_frameworks(**MARK, validate=False)
def test_not_validated(comparison):
    pass

@pytest.mark.compare_frameworks(**MARK, validate="yes")
def test_bad(comparison):
    pass
"""


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    """Test name (its parameters left out) -> outcome, from the -rA summary."""
    found = {}
    for line in result.outlines:
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR") and "::" in rest:
            found[rest.split()[0].split("::")[-1].split("[")[0]] = word
    return found


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize(
    ("how", "validated"),
    [
        ([], {"test_validated"}),
        (["--trt-validate"], {"test_validated", "test_plain"}),
        (["-o", "trtcompare_validate=true"], {"test_validated", "test_plain"}),
    ],
    ids=["marker", "flag", "ini"],
)
def test_the_marker_flag_and_ini_validate_a_framework_listed_alone(pytester, xdist, how, validated):
    pytester.makepyfile(helpers=HELPERS, test_marker=MARKER_TESTS)
    pytester.syspathinsert()
    result = run(pytester, "-rA", "-p", "no:randomly", *how, *xdist)
    expected = {
        name: "FAILED" if name in validated else "PASSED"
        for name in ("test_validated", "test_plain", "test_not_validated")
    }
    assert _outcomes(result) == {**expected, "test_bad": "ERROR"}
    text = result.stdout.str()
    assert "callable-fp32 vs callable-fp32: 1 of 2 outputs hold NaN or Inf: y" in text
    assert "y (float32 vs float32, shape (64,)): validate: actual and expected hold" in text
    assert (
        "@pytest.mark.compare_frameworks(validate=...) got 'yes' (str); it takes True or False"
        in text
    )
    assert "INTERNALERROR" not in text and "Traceback" not in text


FIXTURE_TESTS = """
import numpy as np

INF = np.array([1.0, np.inf], dtype=np.float32)

def test_compare_validated(compare):
    compare({"y": INF}, {"y": INF}, validate=True)

def test_compare_plain(compare):
    compare({"y": INF}, {"y": INF})

def test_golden_validated(golden):
    golden.check({"y": INF}, validate=True)

def test_compare_bad(compare):
    compare({"y": INF}, {"y": INF}, validate="on")
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_the_fixtures_take_validate_beside_goldens(pytester, xdist):
    pytester.makepyfile(test_fixtures=FIXTURE_TESTS)
    refused = run(pytester, "-k", "golden", "--trt-update-goldens", *xdist)
    refused.assert_outcomes(failed=1)  # a golden that validate fails is never written
    refused.stdout.fnmatch_lines(
        [
            "*golden goldens/test_fixtures/test_golden_validated.safetensors not written: the "
            "outputs fail against themselves under the test's tolerance (y: validate: actual "
            "and expected hold 1 Inf each, first at (1,)), so the next check would fail*"
        ]
    )
    assert not (pytester.path / "goldens").exists() or not any(
        (pytester.path / "goldens").rglob("*.safetensors")
    )
    pytester.makepyfile(  # the same outputs stored without validate
        make_golden="import numpy as np\n\ndef test_golden_validated(golden):\n"
        "    golden.check({'y': np.array([1.0, np.inf], dtype=np.float32)})\n"
    )
    run(pytester, "make_golden.py", "--trt-update-goldens").assert_outcomes(passed=1)
    (pytester.path / "goldens" / "make_golden").rename(pytester.path / "goldens" / "test_fixtures")
    result = run(pytester, "test_fixtures.py", "-rA", *xdist)
    assert _outcomes(result) == {
        "test_compare_validated": "FAILED",
        "test_compare_plain": "PASSED",
        "test_golden_validated": "FAILED",
        "test_compare_bad": "FAILED",
    }
    text = result.stdout.str()
    assert "y (float32 vs float32, shape (2,)): validate: actual and expected hold 1 Inf" in text
    assert "validate='on': takes True or False" in text
    assert "INTERNALERROR" not in text


def test_a_bad_ini_value_is_a_usage_error(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("-o", "trtcompare_validate=maybe")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def _overflowing_model() -> onnx.ModelProto:
    """y = min(exp(100 x), 1): the intermediate `e` overflows where x > 0.89, y never."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])
    scale = numpy_helper.from_array(np.full((1, 64), 100, np.float32), "scale")
    one = numpy_helper.from_array(np.ones((1, 64), np.float32), "one")
    nodes = [
        helper.make_node("Mul", ["x", "scale"], ["m"], name="mul"),
        helper.make_node("Exp", ["m"], ["e"], name="exp"),
        helper.make_node("Min", ["e", "one"], ["y"], name="min"),
    ]
    graph = helper.make_graph(nodes, "overflow", [x], [y], [scale, one])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("xdist", XDIST)
def test_per_layer_validate_fails_on_an_intermediate_tensor(pytester, xdist):
    onnx.save(_overflowing_model(), pytester.path / "overflow.onnx")
    pytester.makepyfile(
        """
        import pytest

        MARK = dict(model="overflow.onnx", frameworks=["onnxrt", "onnxref"], outputs="all")

        @pytest.mark.compare_frameworks(**MARK, validate=True)
        def test_validated(comparison):
            pass

        @pytest.mark.compare_frameworks(**MARK)
        def test_plain(comparison):
            pass
        """
    )
    result = run(pytester, "-rA", "-W", "ignore::RuntimeWarning", *xdist)
    assert _outcomes(result) == {"test_validated": "FAILED", "test_plain": "PASSED"}
    assert "e (float32 vs float32, shape (1, 64)): validate: actual and expected hold" in (
        result.stdout.str()
    )


def test_trtcompare_diff_validate(tmp_path, capsys):
    np.savez(tmp_path / "a.npz", y=WITH_INF)
    assert main(["diff", str(tmp_path / "a.npz"), str(tmp_path / "a.npz")]) == 1  # NaN errors
    np.savez(tmp_path / "b.npz", y=np.array([1.0, np.inf]))
    capsys.readouterr()
    assert main(["diff", str(tmp_path / "b.npz"), str(tmp_path / "b.npz")]) == 0
    assert main(["diff", str(tmp_path / "b.npz"), str(tmp_path / "b.npz"), "--validate"]) == 1
    assert "validate: actual and expected hold 1 Inf each, first at (1,)" in capsys.readouterr().out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_trtcompare_run_validate_quiet_and_heatmaps(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    model = _overflowing_model()
    model.graph.output[0].name = "e"  # the overflowing tensor is the output
    model.graph.node.pop()
    onnx.save(model, "overflow.onnx")
    assert main(["run", "overflow.onnx", "--onnxrt", "--onnxref"]) == 0
    capsys.readouterr()
    assert main(["run", "overflow.onnx", "--onnxrt", "--validate"]) == 1
    printed = capsys.readouterr().out
    assert printed.startswith(
        "FAILED onnxrt-fp32: onnxrt-fp32 vs onnxrt-fp32: 1 of 1 outputs hold NaN or Inf: e\n"
    )
    assert main(["run", "overflow.onnx", "--onnxrt", "--validate", "-q", "--save-heatmaps", "hm"])
    quiet = capsys.readouterr().out.splitlines()
    assert quiet[0].startswith("FAILED onnxrt-fp32: e: validate: actual and expected hold ")
    assert quiet[1:3] == ["", "accuracy summary"]
    assert sorted(p.name for p in (tmp_path / "hm" / "onnxrt-fp32").iterdir()) == [
        "e.actual.npy",
        "e.expected.npy",
        "e.heatmap.png",
        "e.histogram.png",
    ]
    assert main(["run", "overflow.onnx", "--onnxrt", "--onnxref", "-q"]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == ["", "accuracy summary"]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_the_test_gen_test_writes_validates_as_the_command_did(pytester, capsys):
    onnx.save(_overflowing_model(), pytester.path / "overflow.onnx")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(pytester.path)
        argv = ["run", "overflow.onnx", "--onnxrt", "--onnxref", "--onnx-outputs", "mark", "all"]
        assert main([*argv, "--validate"]) == 1
        assert main([*argv, "--validate", "--gen-test", "test_written.py"]) == 0
    assert "validate=True," in (pytester.path / "test_written.py").read_text()
    result = pytester.runpytest("test_written.py", "-W", "ignore::RuntimeWarning")
    result.assert_outcomes(failed=1)
