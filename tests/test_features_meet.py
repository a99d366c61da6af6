"""Where two features meet (issue 45): each fault a new user found where two features that work
alone combine, as the failing scenario a user met, now fixed. The pairs of every mode a
compare_frameworks item combines are tested by construction in tests/test_combinations.py."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare.cli import main
from pytest_trtcompare.goldens import read_golden, write_polygraphy_inputs, write_polygraphy_outputs

from .onnx_models import make, where_scaled
from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run


def where_model(a: float) -> onnx.ModelProto:
    """y = where(x < 0.4, x * a, x) on one element: a change of `a` shows only on draws below
    0.4."""
    return where_scaled(a, [1])


GOLDEN_ITERATIONS = """
import pytest

@pytest.mark.compare_frameworks(model="m.onnx", frameworks=["onnxrt"], golden=True, iterations=8)
@pytest.mark.shapes({"x": (1,)})
def test_g(comparison):
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_a_golden_of_several_iterations_stores_and_checks_every_one(pytester, xdist):
    """Fault 1: golden=True with iterations=8 stored and checked only the first draw (x =
    0.92, above the threshold), so a change of `a` that only draws below 0.4 see passed."""
    onnx.save(where_model(2.0), pytester.path / "m.onnx")
    pytester.makepyfile(test_m=GOLDEN_ITERATIONS)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    path = pytester.path / "goldens" / "test_m" / "test_g[onnxrt-fp32-bs1].safetensors"
    golden = read_golden(path)
    assert len(golden.iterations) == 8
    draws = [float(iteration.inputs["x"][0]) for iteration in golden.iterations]
    assert len(set(draws)) == 8 and min(draws) < 0.4 < max(draws)
    for iteration in golden.iterations:  # each iteration's outputs are its own inputs' outputs
        x = iteration.inputs["x"]
        np.testing.assert_array_equal(iteration.outputs["y"], np.where(x < 0.4, x * 2, x))
    run(pytester, *xdist).assert_outcomes(passed=1)

    onnx.save(where_model(2.2), pytester.path / "m.onnx")
    changed = run(pytester, *xdist)
    changed.assert_outcomes(failed=1)
    first_low = next(k for k, x in enumerate(draws) if x < 0.4)
    changed.stdout.fnmatch_lines(
        [
            "*model changed since the golden was recorded*",
            f"*iteration {first_low} of 8: 1 of 1 outputs out of tolerance: y*",
        ]
    )
    # the iteration count is part of what the golden holds: another count is never silently
    # a part of it
    onnx.save(where_model(2.0), pytester.path / "m.onnx")
    pytester.makepyfile(test_m=GOLDEN_ITERATIONS.replace("iterations=8", "iterations=3"))
    fewer = run(pytester, *xdist)
    fewer.assert_outcomes(failed=1)
    fewer.stdout.fnmatch_lines(
        [
            "*golden goldens/test_m/test_g*.safetensors: it holds 8 input iterations, this "
            "test makes 3; refresh it with:*",
            "*pytest --trt-update-goldens 'test_m.py::test_g[[]onnxrt-fp32-bs1[]]'*",
        ]
    )
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    assert len(read_golden(path).iterations) == 3


def test_trtcompare_show_lists_every_iteration_of_a_golden(pytester, capsys):
    onnx.save(where_model(2.0), pytester.path / "m.onnx")
    pytester.makepyfile(test_m=GOLDEN_ITERATIONS.replace("iterations=8", "iterations=2"))
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=1)
    path = pytester.path / "goldens" / "test_m" / "test_g[onnxrt-fp32-bs1].safetensors"
    capsys.readouterr()
    assert main(["show", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "iteration 0 of 2",
        "  output y",
        "  input x",
        "iteration 1 of 2",
        "  output y",
        "  input x",
        "meta",
    ]


SAVED_REFERENCE = """
import pytest

@pytest.mark.compare_frameworks(
    model="m.onnx", frameworks=["onnxrt"], reference="outputs.json", inputs="inputs.json"
)
def test_saved(comparison):
    pass


@pytest.mark.compare_frameworks(
    model="m.onnx", frameworks=["onnxrt"], reference="outputs.json", inputs="inputs.json",
    outputs="all",
)
def test_saved_layers(comparison):
    pass


@pytest.mark.compare_frameworks(
    model="m.onnx", frameworks=["onnxrt"], reference="outputs.json", inputs="inputs.json"
)
@pytest.mark.shapes({"x": (1,)}, {"x": (2,)})
def test_saved_shapes(comparison):
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_saved_outputs_of_several_iterations_are_each_compared(pytester, xdist):
    """reference= a Polygraphy JSON of 3 iterations (polygraphy run --iterations 3
    --save-inputs --save-outputs) compared its first iteration only."""
    onnx.save(where_model(2.0), pytester.path / "m.onnx")
    feeds = [{"x": np.array([value], np.float32)} for value in (0.9, 0.7, 0.2)]
    outputs = [{"y": np.where(f["x"] < 0.4, f["x"] * 2.2, f["x"])} for f in feeds]  # a=2.2
    write_polygraphy_inputs(pytester.path / "inputs.json", feeds)
    write_polygraphy_outputs(pytester.path / "outputs.json", outputs)
    pytester.makepyfile(test_s=SAVED_REFERENCE)
    result = run(pytester, "-k", "test_saved", "--trt-report=r.json", *xdist)
    result.assert_outcomes(failed=1, errors=2)
    result.stdout.fnmatch_lines(["*iteration 2 of 3: 1 of 1 outputs out of tolerance: y*"])
    (record,) = json.loads((pytester.path / "r.json").read_text())["outputs"]
    assert record["iterations"] == 3
    # per layer, saved outputs must hold the layers; the saved inputs decide the shapes
    result.stdout.fnmatch_lines(
        [
            "*InputDataError: reference='outputs.json' holds the model's outputs only (y); "
            "outputs='all' compares every layer: save every tensor (polygraphy run "
            "--onnx-outputs mark all --save-outputs)*",
        ]
    )
    result.stdout.fnmatch_lines(  # refused at collection: the saved inputs have one shape
        [
            "*test_s.py::test_saved_shapes: @pytest.mark.shapes gives 2 shape sets, and "
            "reference='outputs.json' compares on the inputs saved with its outputs, one set of "
            "shapes: give one shape set at most (the saved inputs' shapes)*",
        ]
    )
    # every tensor saved (--onnx-outputs mark all): compared layer by layer
    layers = [
        {"c": f["x"] < 0.4, "m": f["x"] * 2.2, "y": outputs[k]["y"]} for k, f in enumerate(feeds)
    ]
    write_polygraphy_outputs(pytester.path / "outputs.json", layers)
    per_layer = run(pytester, "-k", "test_saved_layers", *xdist)
    per_layer.assert_outcomes(failed=1)
    per_layer.stdout.fnmatch_lines(
        ["*first divergence (topological order): m (Mul), layer 1 of 2*"]
    )

    write_polygraphy_inputs(pytester.path / "inputs.json", feeds[:2])
    short = run(pytester, "-k", "test_saved and not layers and not shapes", *xdist)
    short.assert_outcomes(errors=1)
    short.stdout.fnmatch_lines(
        [
            "*InputDataError: reference='outputs.json' holds 3 iterations of outputs, "
            "inputs='inputs.json' 2 feeds: give the inputs the outputs were made from*"
        ]
    )


def trtcompare(capsys, *argv: str) -> tuple[int, str, str]:
    """The console script's exit code, stdout and stderr."""
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_trtcompare_polygraphy_round_trip_keeps_every_iteration(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    feeds = [{"x": np.array([value], np.float32)} for value in (0.9, 0.2)]
    outputs = [{"y": f["x"] * 2} for f in feeds]
    write_polygraphy_inputs(tmp_path / "in.json", feeds)
    write_polygraphy_outputs(tmp_path / "out.json", outputs)
    code, out, _ = trtcompare(
        capsys, "import-polygraphy", "out.json", "g.safetensors", "--inputs", "in.json"
    )
    assert code == 0
    assert out == "created: g.safetensors (1 outputs of pytest-trtcompare, 2 iterations)\n"
    golden = read_golden(tmp_path / "g.safetensors")
    assert [float(it.inputs["x"][0]) for it in golden.iterations] == pytest.approx([0.9, 0.2])
    code, _, _ = trtcompare(
        capsys, "import-polygraphy", "out.json", "one.safetensors", "--iteration", "1"
    )
    assert code == 0 and len(read_golden(tmp_path / "one.safetensors").iterations) == 1
    code, _, err = trtcompare(
        capsys, "import-polygraphy", "out.json", "x.safetensors", "--iteration", "5"
    )
    assert code == 2
    assert err == (
        "trtcompare: out.json: --iteration 5: runner 'pytest-trtcompare' has 2 iteration(s), "
        "0 to 1\n"
    )
    write_polygraphy_inputs(tmp_path / "one.json", feeds[:1])
    code, _, err = trtcompare(
        capsys, "import-polygraphy", "out.json", "x.safetensors", "--inputs", "one.json"
    )
    assert code == 2
    assert err == (
        "trtcompare: one.json holds 1 feed, out.json 2 iterations of pytest-trtcompare: give "
        "the inputs they were made from, or --iteration to take one\n"
    )
    assert not (tmp_path / "x.safetensors").exists()

    code, _, _ = trtcompare(
        capsys, "export-polygraphy", "g.safetensors", "o.json", "--inputs", "i.json"
    )
    assert code == 0 and len(json.loads((tmp_path / "i.json").read_text())) == 2
    assert trtcompare(capsys, "diff", "g.safetensors", "o.json")[0] == 0
    write_polygraphy_outputs(tmp_path / "other.json", [outputs[0], {"y": outputs[1]["y"] + 1}])
    code, out, _ = trtcompare(capsys, "diff", "other.json", "g.safetensors")
    assert code == 1
    assert "iteration 1 of 2: 1 of 1 outputs out of tolerance: y" in out
    write_polygraphy_outputs(tmp_path / "single.json", outputs[:1])
    code, _, err = trtcompare(capsys, "diff", "single.json", "g.safetensors")
    assert code == 2
    assert err == (
        "trtcompare: single.json holds 1 iteration, g.safetensors holds 2: diff compares "
        "them iteration by iteration\n"
    )
    # check: saved outputs of every iteration against the golden, as pytest checks it
    assert trtcompare(capsys, "check", "g.safetensors", "o.json")[0] == 0
    code, out, _ = trtcompare(capsys, "check", "g.safetensors", "other.json")
    assert code == 1 and "iteration 1 of 2: 1 of 1 outputs out of tolerance: y" in out


def scale_model(a: float) -> onnx.ModelProto:
    """y = x * a (float32)."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "a"], ["y"])],
        "scale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(np.array([a], np.float32), "a")],
    )
    return make(graph)


GOLDEN_SCALE = """
import pytest

@pytest.mark.compare_frameworks(model="m.onnx", frameworks=["onnxrt"], golden=True)
@pytest.mark.shapes({"x": (4,)})
def test_g(comparison):
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_drift_from_a_zero_margin_is_listed_and_fails_when_asked(pytester, xdist, capsys):
    """Fault 2: a golden checked on the machine that wrote it has margin 0; a model change
    to margin 0.4 was '0 of 1 outputs drifted'."""
    onnx.save(scale_model(2.0), pytester.path / "m.onnx")
    pytester.makepyfile(test_m=GOLDEN_SCALE)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    run(pytester, "--trt-report=main.json", *xdist).assert_outcomes(passed=1)
    quiet = run(pytester, "-q", "--trt-baseline=main.json", *xdist)
    assert quiet.ret == 0
    quiet.stdout.fnmatch_lines(["against main.json: 0 of 1 outputs drifted"])  # the gate ran

    onnx.save(scale_model(2.000008), pytester.path / "m.onnx")
    drifted = run(
        pytester, "--trt-baseline=main.json", "--trt-drift=fail", "--trt-report=pr.json", *xdist
    )
    assert drifted.ret == 1
    drifted.assert_outcomes(passed=1)
    drifted.stdout.fnmatch_lines(
        [
            "*= drift =*",
            "against main.json: 1 of 1 outputs drifted",
            "before  now    why          test :: output",
            "0       0.4*  grew from 0  test_m.py::test_g[[]onnxrt-fp32-bs4[]] :: y",
            "drift fails the session (--trt-drift=fail): exit status 1",
        ]
    )
    assert (
        trtcompare(
            capsys, "drift", str(pytester.path / "main.json"), str(pytester.path / "pr.json")
        )[0]
        == 1
    )


CALIBRATED_AND_FP64 = """
import pytest
from pytest_trtcompare import Tolerance

@pytest.mark.compare_frameworks(model="m.onnx", frameworks=["onnxrt", "onnxref"])
@pytest.mark.shapes({"x": (4,)})
def test_twin(comparison):
    pass

@pytest.mark.compare_frameworks(
    model="m.onnx", frameworks=["onnxrt", "onnxref"], tolerance=Tolerance(check="fp64")
)
@pytest.mark.shapes({"x": (4,)})
def test_fp64(comparison):
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_calibration_names_the_tests_under_the_fp64_check(pytester, xdist):
    """Fault 3: --trt-calibrate listed the twin and left the fp64 test out, unmentioned."""
    onnx.save(scale_model(1.5), pytester.path / "m.onnx")
    pytester.makepyfile(test_c=CALIBRATED_AND_FP64)
    result = run(pytester, "--trt-calibrate=3", *xdist)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*= calibration =*",
            "written trtcompare-tolerances.toml: 1 output of 1 test; *",
            "-  *-  *-  *-  *test_c.py::test_fp64[[]onnxref-fp32-bs4[]] :: y (not calibrated: "
            "its fp64 check has no atol to suggest)",  # the closest to failing first
            "0 / 0 *test_c.py::test_twin[[]onnxref-fp32-bs4[]] :: y",
        ]
    )
    written = (pytester.path / "trtcompare-tolerances.toml").read_text()
    assert "test_twin" in written and "test_fp64" not in written
    alone = run(pytester, "--trt-calibrate=3", "-k", "fp64", *xdist)
    alone.stdout.fnmatch_lines(
        [
            "trtcompare-tolerances.toml: nothing calibrated: 1 case ran, under metric checks "
            "alone (fp64, cosine, ...), which have no atol to suggest",
            "  test_c.py::test_fp64[[]onnxref-fp32-bs4[]] :: y",
        ]
    )


FP64_ISOLATED = """
import pytest
import torch
from pytest_trtcompare import Tolerance

torch.manual_seed(0)
NET = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).eval()
torch.onnx.export(NET, (torch.rand(2, 8),), "net.onnx", input_names=["x"], output_names=["y"],
                  dynamo=False)
MARKED = dict(
    model="net.onnx",
    frameworks=["onnxrt", "torch"],
    reference="torch",
    models={"torch": NET},
    tolerance=Tolerance(check="fp64"),
)


@pytest.mark.compare_frameworks(isolate=True, **MARKED)
@pytest.mark.shapes({"x": (2, 8)})
def test_isolated_marker(comparison):
    assert comparison.outputs["y"].metric("fp64").passed


@pytest.mark.compare_frameworks(**MARKED)
@pytest.mark.shapes({"x": (2, 8)})
def test_plain(comparison):
    assert comparison.outputs["y"].metric("fp64").passed


@pytest.mark.compare_frameworks(
    model="net.onnx", frameworks=["onnxrt", "callable:identity:identity"],
    reference="callable:identity:identity", tolerance=Tolerance(check="fp64"), isolate=True,
    options={"callable": {"input_specs": {"x": ("float32", (2, 8))}}},
)
def test_callable_reference(comparison):
    pass
"""
IDENTITY = """
def identity(feed):
    return {"y": feed["x"][:, :4]}
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_an_isolated_torch_reference_runs_the_fp64_check(pytester, xdist):
    """Fault 4: isolate=True (or --trt-isolate) refused the fp64 check of a torch reference
    ('the reference torch cannot run float64 (isolated runs fp32, ...)')."""
    pytest.importorskip("torch")
    pytester.makepyfile(test_i=FP64_ISOLATED, identity=IDENTITY)
    pytester.syspathinsert()
    result = run(pytester, "-rA", "-k", "not callable", *xdist)
    result.assert_outcomes(passed=2)
    everything = run(pytester, "-k", "plain", "--trt-isolate", *xdist)
    everything.assert_outcomes(passed=1)
    # a reference that cannot run float64 is still named, isolated or not
    refused = run(pytester, "-k", "callable", *xdist)
    refused.assert_outcomes(errors=1)
    refused.stdout.fnmatch_lines(
        [
            "*FP64Unavailable: fp64 check: the reference callable:identity:identity cannot run "
            "float64 (callable runs fp32, *, not fp64)*"
        ]
    )


SHARED_TWIN = """
import pytest
import torch

torch.manual_seed(0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(16, 8)
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, ids, mask):
        return {"logits": self.lin(self.emb(ids) * mask.unsqueeze(-1).to(torch.float32))}


NET = Net().eval()
FEED = (torch.zeros(2, 5, dtype=torch.int64), torch.ones(2, 5, dtype=torch.int64))
torch.onnx.export(NET, FEED, "net.onnx", input_names=["ids", "mask"], output_names=["logits"],
                  dynamo=False)
MARKED = dict(model="net.onnx", models={"torch": NET}, val_range={"ids": (0, 15), "mask": (1, 1)})
SHAPES = {"ids": (2, 5), "mask": (2, 5)}


@pytest.mark.compare_frameworks(frameworks=["onnxrt", "torch"], **MARKED)
@pytest.mark.shapes(SHAPES)
def test_a_twin(comparison):
    pass


@pytest.mark.compare_frameworks(frameworks=["onnxrt", "torch"], reference="torch", **MARKED)
@pytest.mark.shapes(SHAPES)
def test_b_torch_reference(comparison):
    pass


@pytest.mark.compare_frameworks(
    frameworks=["onnxrt", "torch"], reference="saved.json", inputs="feeds.json", **MARKED
)
def test_c_saved(comparison):
    pass
"""


def test_a_module_shared_by_tests_is_fed_as_the_export_in_each(pytester):
    """From the new-user trial: the torch runner of a module that one test ran as a twin
    (learning its output names) was taken by the next test as the export itself, fed with
    its own default float32 specs: `input 'mask' is float32, the model expects int64`, only
    in that order. Against saved outputs, the twin was not named as the export."""
    pytest.importorskip("torch")
    pytester.makepyfile(test_shared=SHARED_TWIN)
    feeds = [{"ids": np.arange(10).reshape(2, 5) % 16, "mask": np.ones((2, 5), np.int64)}]
    write_polygraphy_inputs(pytester.path / "feeds.json", feeds)
    write_polygraphy_outputs(pytester.path / "saved.json", [{"logits": np.zeros((2, 5, 4))}])
    result = run(pytester, "-rfE", "-W", "ignore::DeprecationWarning")
    result.assert_outcomes(passed=2, failed=2)  # the saved zeros are not the net's outputs
    result.stdout.fnmatch_lines(
        ["FAILED test_shared.py::test_c_saved[[]torch-fp32[]] - *1 of 1 outputs out of tol*"]
    )
    assert "missing in" not in result.stdout.str()  # the twin's output is named logits


CHAIN = """
import pytest

@pytest.mark.compare_frameworks(model="chain.onnx", frameworks=["onnxrt"], golden=True,
                                outputs="all")
@pytest.mark.shapes({"x": (4,)})
def test_layers(comparison):
    pass
"""


def _chain(a: float) -> onnx.ModelProto:
    """m = x * a, n = m + 1, y = n * 2: a change of `a` fails every layer."""
    nodes = [
        helper.make_node("Mul", ["x", "a"], ["m"], name="scale"),
        helper.make_node("Add", ["m", "one"], ["n"], name="shift"),
        helper.make_node("Mul", ["n", "two"], ["y"], name="double"),
    ]
    values = {"a": a, "one": 1.0, "two": 2.0}
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(np.array([v], np.float32), k) for k, v in values.items()],
    )
    return make(graph)


def test_a_per_layer_golden_writes_the_artifacts_a_per_layer_twin_writes(pytester):
    """From the new-user trial: a failing per-layer golden drew pictures of every failing
    layer (87 layers: 349 files, 54 s), a per-layer twin of its first divergence and model
    outputs only."""
    onnx.save(_chain(2.0), pytester.path / "chain.onnx")
    pytester.makepyfile(test_chain=CHAIN)
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=1)
    onnx.save(_chain(2.5), pytester.path / "chain.onnx")
    result = run(pytester, "--trt-artifacts-dir=art")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*first divergence (topological order): scale (Mul) -> m*"])
    (folder,) = (pytester.path / "art").iterdir()
    stems = {path.name.split(".")[0] for path in folder.iterdir()}
    assert stems == {"m", "y", "layers"}, stems  # not n, which diverges after m


ITERATIONS_AND_INPUTS = """
import pytest

@pytest.mark.compare_frameworks(
    model="m.onnx", frameworks=["onnxrt", "onnxref"], inputs="inputs.json", iterations=2
)
def test_two_of_three(comparison):
    pass


@pytest.mark.compare_frameworks(
    model="m.onnx", frameworks=["onnxrt"], reference="nope.json", inputs="inputs.json"
)
def test_missing_reference(comparison):
    pass
"""


def test_iterations_beside_inputs_of_another_count_and_a_missing_reference_are_named(
    pytester, capsys
):
    """From the new-user trial: iterations=2 beside inputs= of 3 feeds compared 3, silently;
    a missing reference= file was named as a golden."""
    onnx.save(where_model(2.0), pytester.path / "m.onnx")
    feeds = [{"x": np.array([value], np.float32)} for value in (0.9, 0.7, 0.2)]
    write_polygraphy_inputs(pytester.path / "inputs.json", feeds)
    pytester.makepyfile(test_i=ITERATIONS_AND_INPUTS)
    result = run(pytester, "-rE")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*InputDataError: inputs='inputs.json' holds 3 feeds and iterations=2: iterations= "
            "draws synthetic inputs; with inputs= every feed it holds is an iteration (leave "
            "iterations= out)*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*InputDataError: reference='nope.json': *nope.json does not exist*"]
    )
    # trtcompare show reads a --save-inputs file too
    capsys.readouterr()
    assert main(["show", str(pytester.path / "inputs.json")]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        "iteration 0 of 3:",
        "  input x: float32 (1,)  min 0.9  max 0.9  mean 0.9",
    ]
