"""The openvino runner: ONNX models and OpenVINO IR on the CPU at OpenVINO's own inference
precision, against onnxrt; per layer by ONNX tensor name; and the scenarios a user meets
(compare_frameworks with a perturbed model, goldens, isolation, per layer, the fp64 check,
fp16 / bf16)."""

from __future__ import annotations

import json
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

ov = pytest.importorskip("openvino")
pytest.importorskip("openvino.properties.hint")  # imported here, not first inside a pytester run

from pytest_trtcompare import runners  # noqa: E402
from pytest_trtcompare.compare import compare_outputs  # noqa: E402
from pytest_trtcompare.errors import (  # noqa: E402
    FrameworkUnavailable,
    InferenceError,
    ModelLoadError,
    PrecisionUnsupported,
    RunnerOptionError,
)
from pytest_trtcompare.runners.openvino import missing_capability  # noqa: E402
from pytest_trtcompare.session import compare_layers  # noqa: E402
from pytest_trtcompare.session.runs import make_feeds  # noqa: E402

from .onnx_models import layer_chain, make, multi_input  # noqa: E402
from .pytester_helpers import XDIST_SLOW, run  # noqa: E402

CAPABILITIES = [str(c) for c in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")]
REDUCED = {"fp16": "FP16", "bf16": "BF16"}


def _feed(runner, batch=3, seed=1):
    return make_feeds(runner, shapes={"x": (batch, 16)}, seed=seed)[0]


def _reduced(precision, model=None, **options):
    """The openvino runner at fp16 / bf16, or a skip with its reason where this CPU lacks the
    capability (the reason names it: tested below)."""
    try:
        return runners.create("openvino", model or layer_chain(), precision, **options)
    except PrecisionUnsupported as exc:
        assert REDUCED[precision] not in CAPABILITIES
        assert f"lacks OpenVINO's {REDUCED[precision]} capability" in str(exc)
        pytest.skip(str(exc))


def test_fp32_is_float32_and_matches_onnxrt():
    model = layer_chain()
    target, reference = runners.create("openvino", model), runners.create("onnxrt", model)
    feed = _feed(target)
    result = compare_outputs(target.infer(feed), reference.infer(feed), atol=1e-6, rtol=1e-6)
    assert result.passed, result.report
    described = target.describe()
    # left to itself the CPU plugin would pick bf16 or f16 on a CPU that has them
    assert (described["inference_precision"], described["execution_mode"]) == ("f32", "ACCURACY")
    assert set(described["runtime_precisions"]) == {"f32"}


def test_describe_records_what_ran():
    runner = runners.create("openvino", layer_chain(), config={"INFERENCE_NUM_THREADS": 1})
    described = runner.describe()
    assert json.loads(json.dumps(described)) == described  # goldens and reports store it
    assert described["runner"] == "openvino-fp32"
    assert described["version"] == ov.__version__
    assert described["device"] == "cpu"
    assert described["capabilities"] == CAPABILITIES
    assert described["config"] == {"INFERENCE_NUM_THREADS": "1"}
    assert described["precision_route"] == (
        "OpenVINO CPU plugin, inference precision f32 on the model as given"
    )
    assert len(described["model_digest"]) == 64


def test_one_compiled_model_takes_every_batch():
    model = layer_chain()
    target, reference = runners.create("openvino", model), runners.create("onnxrt", model)
    assert target.input_specs()[0].shape == ("batch", 16)
    compiled = target.compiled
    for batch in (1, 5, 2):
        feed = _feed(target, batch)
        outputs = target.infer(feed)
        assert outputs["y"].shape == (batch, 8)
        assert compare_outputs(outputs, reference.infer(feed), atol=1e-6, rtol=1e-6).passed
    assert target.compiled is compiled


def test_outputs_are_the_callers_own():
    runner = runners.create("openvino", layer_chain())
    first = runner.infer(_feed(runner, seed=1))["y"]
    kept = first.copy()
    runner.infer(_feed(runner, seed=2))
    np.testing.assert_array_equal(first, kept)  # not a view of the request's reused tensor


def test_integer_and_bool_inputs():
    model = multi_input()
    target, reference = runners.create("openvino", model), runners.create("onnxrt", model)
    assert [(s.name, s.dtype) for s in target.input_specs()] == [
        ("x", "float32"),
        ("ids", "int64"),
        ("mask", "bool"),
    ]
    feed = make_feeds(reference, seed=3)[0]
    assert compare_outputs(target.infer(feed), reference.infer(feed), atol=1e-6, rtol=1e-6).passed


def _with_unused_input() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "unused",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3]),
            helper.make_tensor_value_info("unused", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
    )
    return make(graph)


def test_an_input_nothing_reads_is_still_fed():
    """OpenVINO drops it from its model; the runner takes the feed onnxrt takes."""
    model = _with_unused_input()
    target, reference = runners.create("openvino", model), runners.create("onnxrt", model)
    assert [spec.name for spec in target.input_specs()] == ["x", "unused"]
    feed = make_feeds(reference, shapes={"x": (2, 3)})[0]
    np.testing.assert_array_equal(target.infer(feed)["y"], reference.infer(feed)["y"])


def test_reduced_precision_runs_in_it():
    model = layer_chain()
    reference = runners.create("onnxrt", model)
    feed = _feed(reference, batch=16)
    expected = reference.infer(feed)
    for precision, bound in (("fp16", 1e-2), ("bf16", 5e-2)):
        runner = _reduced(precision, model)
        described = runner.describe()
        assert described["inference_precision"] == precision.replace("fp", "f")
        assert described["execution_mode"] == "PERFORMANCE"
        assert described["runtime_precisions"].get(described["inference_precision"], 0) > 0
        actual = runner.infer(feed)
        assert not compare_outputs(actual, expected, atol=1e-5, rtol=1e-5).passed
        assert compare_outputs(actual, expected, atol=bound, rtol=bound).passed


def test_a_missing_capability_names_the_cpu_features():
    text = missing_capability("bf16", "Intel(R) Core(TM) i5-8250U", ["FP32", "INT8", "BIN"])
    assert text == (
        "openvino bf16: this CPU (Intel(R) Core(TM) i5-8250U) lacks OpenVINO's BF16 capability, "
        "which takes AVX-512 (avx512f, avx512bw, avx512dq, avx512vl) or AVX2-VNNI-2 "
        "(avx_vnni_int8, avx_ne_convert) on x86; it has FP32, INT8, BIN"
    )
    assert "avx512_fp16" in missing_capability("fp16", "cpu", ["FP32"])


def test_precisions_it_does_not_run_are_unsupported():
    with pytest.raises(PrecisionUnsupported, match="openvino runs fp32, fp16, bf16, not tf32"):
        runners.create("openvino", layer_chain(), "tf32")
    with pytest.raises(PrecisionUnsupported, match="not fp64"):
        runners.create("openvino", layer_chain(), "fp64")


def test_per_layer_tensors_pair_with_onnxrt_by_onnx_name():
    target = runners.create("openvino", layer_chain(), outputs="all")
    reference = runners.create("onnxrt", layer_chain(), outputs="all")
    assert target.layer_order == reference.layer_order
    assert target.layer_order[:3] == ["mm0", "add0", "act0"]
    feed = _feed(reference)
    assert compare_layers(target, reference, feed).passed
    planted = runners.create("openvino", layer_chain(perturb_layer=2), outputs="all")
    result = compare_layers(planted, reference, feed)
    assert not result.passed
    assert result.first_divergence == "add2"


def test_outputs_restricted_by_name():
    runner = runners.create("openvino", multi_input(), outputs=["out"])
    assert runner.output_names() == ["out"]
    with pytest.raises(ModelLoadError, match=r"has no output\(s\) \['uot'\] \(did you mean 'out'"):
        runners.create("openvino", multi_input(), outputs=["uot"])


def test_openvino_ir_with_a_dynamic_batch(tmp_path):
    model = layer_chain()
    onnx.save(model, tmp_path / "chain.onnx")
    read = ov.Core().read_model(str(tmp_path / "chain.onnx"))
    # save_model stores float16 weights unless told not to: another model (errors ~1e-4)
    ov.save_model(read, str(tmp_path / "chain.xml"), compress_to_fp16=False)
    target = runners.create("openvino", tmp_path / "chain.xml")
    assert [(s.name, s.dtype, s.shape) for s in target.input_specs()] == [
        ("x", "float32", (None, 16))
    ]
    assert target.output_names() == ["y"]
    reference = runners.create("onnxrt", model)
    feed = _feed(reference, batch=4)
    assert compare_outputs(target.infer(feed), reference.infer(feed), atol=1e-6, rtol=1e-6).passed
    with pytest.raises(RunnerOptionError, match="pairs tensors by their ONNX names"):
        runners.create("openvino", tmp_path / "chain.xml", outputs="all")


def test_models_it_cannot_read_are_named(tmp_path):
    with pytest.raises(ModelLoadError) as missing:
        runners.create("openvino", tmp_path / "nope.onnx")
    assert str(missing.value) == f"model file '{tmp_path / 'nope.onnx'}' does not exist"
    with pytest.raises(ModelLoadError) as missing_ir:
        runners.create("openvino", tmp_path / "nope.xml")
    assert str(missing_ir.value) == f"model file '{tmp_path / 'nope.xml'}' does not exist"
    graph = helper.make_graph(
        [helper.make_node("Frobnicate", ["x"], ["y"], domain="acme")],
        "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("acme", 1)]
    custom = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    with pytest.raises(ModelLoadError) as unread:
        runners.create("openvino", custom)
    text = str(unread.value)
    assert text.startswith("openvino cannot read model <ModelProto>: ")
    assert "No conversion rule found for operations: acme.Frobnicate" in text
    assert text.endswith(f"(openvino {ov.__version__})")
    assert "\n" not in text and "Exception from" not in text  # no C++ locations


def test_an_inference_error_is_one_message():
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        "reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor("shape", TensorProto.INT64, [2], [2, 3])],
    )
    runner = runners.create("openvino", make(graph))
    with pytest.raises(InferenceError) as info:
        runner.infer({"x": np.zeros(5, np.float32)})
    text = str(info.value)
    assert text.startswith(
        "openvino-fp32 failed running the model on x: float32[5]: RuntimeError: "
    )
    assert "Exception from" not in text


def test_config_is_checked():
    with pytest.raises(RunnerOptionError, match=r"config\['INFERENCE_PRECISION_HINT'\]: set by"):
        runners.create("openvino", layer_chain(), config={"INFERENCE_PRECISION_HINT": "bf16"})
    with pytest.raises(RunnerOptionError, match="Unsupported property NUM_STREAMZ by CPU plugin"):
        runners.create("openvino", layer_chain(), config={"NUM_STREAMZ": 1})
    with pytest.raises(RunnerOptionError, match="takes a dict of CPU plugin properties"):
        runners.create("openvino", layer_chain(), config=[("NUM_STREAMS", 1)])


def test_missing_openvino_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "openvino", None)  # what `import openvino` meets without it
    with pytest.raises(FrameworkUnavailable) as info:
        runners.create("openvino", layer_chain())
    assert str(info.value) == "openvino is not installed: pip install pytest-trtcompare[openvino]"


def test_isolated_runner_gives_the_same_outputs():
    model = layer_chain()
    inside = runners.create("openvino", model)
    with runners.create("openvino", model, isolate=True) as outside:
        feed = _feed(inside)
        np.testing.assert_array_equal(outside.infer(feed)["y"], inside.infer(feed)["y"])
        assert outside.describe()["isolated"] is True
        assert outside.describe()["inference_precision"] == "f32"


# --- as a user meets it -------------------------------------------------------------------


@pytest.fixture
def project(pytester):
    """model.onnx, and perturbed.onnx: one bias moved by 0.05, as a broken kernel would."""
    onnx.save(layer_chain(), pytester.path / "model.onnx")
    onnx.save(layer_chain(perturb_layer=2), pytester.path / "perturbed.onnx")
    return pytester


AGAINST_ONNXRT = """
import pytest

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt", "openvino"])
@pytest.mark.shapes({"x": (4, 16)}, {"x": (1, 16)})
def test_unchanged(comparison):
    pass

@pytest.mark.compare_frameworks(
    model="model.onnx", models={"openvino": "perturbed.onnx"}, frameworks=["onnxrt", "openvino"]
)
@pytest.mark.shapes({"x": (4, 16)})
def test_perturbed(comparison):
    pass
"""


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_against_onnxrt_a_perturbed_model_fails(project, xdist):
    project.makepyfile(test_model=AGAINST_ONNXRT)
    result = run(project, "-rA", "--trt-report", "r.json", *xdist)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines_random(
        [
            "*PASSED test_model.py::test_unchanged[[]openvino-fp32-bs4[]]*",
            "*PASSED test_model.py::test_unchanged[[]openvino-fp32-bs1[]]*",
            "*openvino-fp32 vs onnxrt-fp32: 1 of 1 outputs out of tolerance: y*",
        ]
    )
    report = json.loads((project.path / "r.json").read_text())
    described = [report["runners"][entry["target_runner"]] for entry in report["outputs"]]
    assert {(d["runner"], d["inference_precision"]) for d in described} == {
        ("openvino-fp32", "f32")
    }


def test_reduced_precisions_at_their_default_tolerances(project):
    project.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt", "openvino"])
        @pytest.mark.shapes({"x": (16, 16)})
        def test_model(comparison):
            pass
        """
    )
    result = run(project, "-rA", "--trt-precision=fp16,bf16")
    runs = [p for p in ("fp16", "bf16") if REDUCED[p] in CAPABILITIES]
    result.assert_outcomes(passed=len(runs), skipped=2 - len(runs))
    result.stdout.fnmatch_lines_random(
        [f"*PASSED test_model.py::test_model[[]openvino-{p}-bs16[]]*" for p in runs]
        + [f"SKIPPED*lacks OpenVINO's {REDUCED[p]} capability*" for p in REDUCED if p not in runs]
    )


def test_golden_written_then_checked(project):
    project.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["openvino"], golden=True)
        @pytest.mark.shapes({"x": (2, 16)})
        def test_model():
            pass
        """
    )
    run(project).assert_outcomes(failed=1)  # no golden yet: a failure, nothing written
    created = run(project, "--trt-update-goldens")
    created.assert_outcomes(passed=1)
    created.stdout.fnmatch_lines(["*created 1*"])
    run(project).assert_outcomes(passed=1)
    (project.path / "model.onnx").write_bytes((project.path / "perturbed.onnx").read_bytes())
    changed = run(project)
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(
        ["model changed since the golden was recorded *", "1 of 1 outputs out of tolerance: y"]
    )


def test_isolated(project):
    project.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(
            model="model.onnx", frameworks=["onnxrt", "openvino"], isolate=True
        )
        @pytest.mark.shapes({"x": (4, 16)})
        def test_model(comparison):
            pass
        """
    )
    result = run(project, "--trt-report", "r.json")
    result.assert_outcomes(passed=1)
    report = json.loads((project.path / "r.json").read_text())
    (entry,) = report["outputs"]
    described = report["runners"][entry["target_runner"]]
    assert (described["runner"], described["isolated"]) == ("openvino-fp32", True)


def test_per_layer_names_the_first_divergence(project):
    project.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(
            model="model.onnx", frameworks=["onnxrt", "openvino"], outputs="all"
        )
        @pytest.mark.shapes({"x": (4, 16)})
        def test_unchanged(comparison):
            pass

        @pytest.mark.compare_frameworks(
            model="model.onnx", models={"openvino": "perturbed.onnx"},
            frameworks=["onnxrt", "openvino"], outputs="all",
        )
        @pytest.mark.shapes({"x": (4, 16)})
        def test_perturbed(comparison):
            pass
        """
    )
    result = run(project, "-rA")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines_random(
        [
            "*PASSED test_model.py::test_unchanged[[]openvino-fp32-bs4[]]*",
            "*first divergence (topological order): *add2*",
        ]
    )


def test_fp64_check_with_openvino_as_target(project):
    """onnxref rounds every op in the precision: openvino's own fp16 / bf16 kernels are held
    to twice its error against float64."""
    project.makepyfile(
        test_model="""
        import pytest
        from pytest_trtcompare import Tolerance

        MARKED = dict(
            frameworks=["onnxref", "openvino"], reference="onnxref",
            tolerance=Tolerance(check="fp64"),
        )

        @pytest.mark.compare_frameworks(model="model.onnx", **MARKED)
        @pytest.mark.shapes({"x": (16, 16)})
        def test_unchanged(comparison):
            pass

        @pytest.mark.compare_frameworks(
            model="model.onnx", models={"openvino": "perturbed.onnx"}, **MARKED
        )
        @pytest.mark.shapes({"x": (16, 16)})
        def test_perturbed(comparison):
            pass
        """
    )
    result = run(project, "-rA", "--trt-precision=fp32,fp16,bf16")
    runs = ["fp32", *(p for p in ("fp16", "bf16") if REDUCED[p] in CAPABILITIES)]
    skipped = 2 * (3 - len(runs))
    result.assert_outcomes(passed=len(runs), failed=len(runs), skipped=skipped)
    result.stdout.fnmatch_lines_random(
        [f"*PASSED test_model.py::test_unchanged[[]openvino-{p}-bs16[]]*" for p in runs]
        + [f"*FAILED fp64: rmse against float64 * (onnxref {p}'s)*" for p in runs]
    )


def test_fp64_check_with_openvino_as_reference(project):
    """An ONNX runner as the reference: the float64 anchor is onnxref on the model's float64
    conversion, as for onnxrt (the class declares it takes ONNX models)."""
    project.makepyfile(
        test_model="""
        import pytest
        from pytest_trtcompare import Tolerance

        @pytest.mark.compare_frameworks(
            model="model.onnx", frameworks=["openvino", "onnxref"], reference="openvino",
            tolerance=Tolerance(check="fp64"),
        )
        @pytest.mark.shapes({"x": (16, 16)})
        def test_onnxref_against_openvino(comparison):
            pass
        """
    )
    result = run(project, "-rA", "--trt-precision=fp16")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*PASSED test_model.py::test_onnxref_against_openvino*"])


TORCH_TWIN = """
import pytest
import torch

torch.manual_seed(0)
NET = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
BROKEN = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
BROKEN.load_state_dict(NET.state_dict())
with torch.no_grad():
    BROKEN[0].bias += 0.5

@pytest.mark.compare_frameworks(model="net.onnx", frameworks=["openvino", "torch"],
                                models={"torch": NET}, outputs="all")
@pytest.mark.shapes({"x": (2, 8)})
def test_twin(comparison):
    pass

@pytest.mark.compare_frameworks(model="net.onnx", frameworks=["openvino", "torch"],
                                models={"torch": BROKEN}, outputs="all")
@pytest.mark.shapes({"x": (2, 8)})
def test_broken_twin(comparison):
    pass
"""


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the legacy exporter's notice
def test_a_torch_twin_pairs_its_modules_with_openvino_per_layer(pytester):
    torch = pytest.importorskip("torch")
    pytester.makepyfile(test_twin=TORCH_TWIN)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    torch.onnx.export(
        net.eval(),
        (torch.zeros(2, 8),),
        str(pytester.path / "net.onnx"),
        input_names=["x"],
        output_names=["y"],
        dynamo=False,
    )
    result = run(pytester, "-rA")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines_random(
        [
            "*PASSED test_twin.py::test_twin[[]torch-fp32-bs2[]]*",
            "*first divergence (topological order): */0/Gemm*",
        ]
    )


def test_mistakes_with_openvino_say_what_is_true(project):
    """The fp64 check with openvino on an IR file (no float64 conversion of IR exists), per
    layer with torch as the reference (the ONNX runner must be it), --trt-debug-precision on
    openvino's own fp16 (no converted ONNX model to vary): each says so."""
    core = ov.Core()
    ov.save_model(core.read_model(str(project.path / "model.onnx")), str(project.path / "m.xml"))
    project.makepyfile(
        test_model="""
        import pytest
        from pytest_trtcompare import Tolerance

        @pytest.mark.compare_frameworks(
            model="m.xml", models={"onnxrt": "model.onnx"}, frameworks=["openvino", "onnxrt"],
            reference="openvino", tolerance=Tolerance(check="fp64"),
        )
        @pytest.mark.shapes({"x": (4, 16)})
        def test_ir_fp64(comparison):
            pass

        @pytest.mark.compare_frameworks(
            model="model.onnx", models={"openvino": "perturbed.onnx"},
            frameworks=["onnxrt", "openvino"],
        )
        @pytest.mark.shapes({"x": (4, 16)})
        def test_debug(comparison):
            pass

        @pytest.mark.compare_frameworks(
            model="model.onnx", frameworks=["onnxrt", "openvino"],
            tolerance={"atol": 0, "rtol": 0},
        )
        @pytest.mark.shapes({"x": (4, 16)})
        def test_own_fp16(comparison):
            pass
        """
    )
    result = run(project, "-rA", "--trt-precision=fp16", "--trt-debug-precision")
    result.stdout.fnmatch_lines_random(
        [
            "FP64Unavailable: fp64 check: the reference openvino cannot run float64 (openvino "
            "runs fp32, fp16, bf16, not fp64); the check needs a reference that can: torch, "
            "or onnxrt / onnxref / trt / openvino on an ONNX model*",
            "*--trt-debug-precision: not run; openvino runs its own model (models=), not the "
            "ONNX model it converts*",
            "*--trt-debug-precision: not run; openvino runs fp16 by its own means, not on an "
            "ONNX model converted to it, which the search varies*",
        ]
    )


def test_per_layer_with_torch_as_the_reference_names_the_sides(pytester):
    pytester.makepyfile(
        test_pair="""
        import pytest
        import torch

        @pytest.mark.compare_frameworks(
            model="m.onnx", frameworks=["openvino", "torch"], reference="torch",
            models={"torch": torch.nn.Identity()}, outputs="all",
        )
        def test_pair(comparison):
            pass
        """
    )
    pytest.importorskip("torch")
    result = run(pytester)
    result.assert_outcomes(errors=1)
    assert (
        "cannot match the layers of openvino with those of torch; per-layer comparison pairs "
        "onnxrt, onnxref, openvino and trt with each other (ONNX tensor names), a torch target "
        "against a reference onnxrt, onnxref or openvino"
    ) in " ".join(result.stdout.str().split())


def test_a_runner_name_typo_on_the_fixture_is_one_line(pytester):
    pytester.makepyfile(
        test_typo="""
        def test_typo(runners):
            runners.openvno("m.onnx")
        """
    )
    result = run(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["E * AttributeError: runners.openvno: unknown framework 'openvno'*"]
    )
    assert "fixtures.py" not in result.stdout.str()
