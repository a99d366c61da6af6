"""The precision that really ran (runners/computed.py): each runner's count of its computing
nodes by float type, the failure of a fp16 / bf16 case whose target computed none in that
type (and `allow_fp32_fallback`, which allows it), the golden precision note, and where
what ran shows: the failure report, the JSON record and the accuracy summary."""

from __future__ import annotations

import functools
import json

import pytest
from onnx import TensorProto, helper

from pytest_trtcompare import runners
from pytest_trtcompare.reports.summary import Record, computed_lines, record_of
from pytest_trtcompare.runners import computed, onnxrt
from pytest_trtcompare.runners.onnx_model import load_model

from .doubles import fake_tensorrt
from .doubles.trt_fixture import install_doubles
from .onnx_models import layer_chain
from .pytester_helpers import XDIST, run


def _model(*nodes: tuple[str, str]) -> object:
    """x -> node 1 -> node 2 ... -> y, each node `(op type, name)`, float32 [2, 4]."""
    made, last = [], "x"
    for index, (op, name) in enumerate(nodes):
        out = "y" if index == len(nodes) - 1 else f"t{index}"
        inputs = [last] if op in ("Tanh", "Softmax", "Relu") else [last, "x"]
        made.append(helper.make_node(op, inputs, [out], name=name))
        last = out
    graph = helper.make_graph(
        made,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)


#: every node of it is on the float16 converter's block list: fp16 computes nothing in float16
MIN_MAX = (("Max", "max"), ("Min", "min"))
MIXED = (("Add", "add"), ("Softmax", "soft"), ("Mul", "mul"))


def described(runner: object) -> computed.Computed:
    found = runners.Computed.of(runner.describe())  # type: ignore[attr-defined]
    assert found is not None
    return found


# -- ONNX ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("framework", ["onnxref", "onnxrt"])
def test_an_onnx_runner_counts_the_nodes_of_the_model_it_executes(framework):
    fp32 = described(runners.create(framework, _model(*MIXED)))
    assert fp32.text().startswith("fp32: 3 of 3 nodes in float32")
    fp16 = described(runners.create(framework, _model(*MIXED), "fp16"))
    assert fp16.counts == {"float16": 3} and not fp16.kept and not fp16.none_at_precision


def test_nodes_kept_in_float32_are_named_by_op_type():
    mixed = runners.convert_mixed(load_model(_model(*MIXED)), "fp16", ["soft"])
    found = described(runners.create("onnxref", mixed, "fp16"))
    assert found.text() == "fp16: 2 of 3 nodes in float16, 1 kept in float32 (Softmax)"
    assert found.as_dict()["kept_fp32"] == {"Softmax": 1}


def test_a_model_the_converter_keeps_whole_in_float32_computes_nothing_in_float16():
    found = described(runners.create("onnxref", _model(*MIN_MAX), "fp16"))
    assert found.none_at_precision
    assert found.text() == "fp16: 0 of 2 nodes in float16, 2 kept in float32 (Max, Min)"
    assert computed.no_low_precision("onnxref", found, "allow_fp32_fallback=True") == (
        "onnxref fp16: no node computed in float16 (all 2: 2 in float32): the comparison "
        "would be float32 against float32, not a fp16 check; allow_fp32_fallback=True allows "
        "it on purpose"
    )


def test_onnxruntime_cpu_says_which_float16_nodes_it_computes_in_float32():
    runner = runners.create("onnxrt", layer_chain((4, 4)), "fp16")
    found = described(runner)
    assert found.counts == {"float16": 3}  # the model holds them: not a fp32 run
    has = onnxrt.kernel_ops(runner.proto, "fp16", "CPUExecutionProvider")
    assert has is not None
    cast = sorted({"MatMul", "Add", "Tanh"} - has)
    if not cast:
        pytest.skip("this onnxruntime has a CPU float16 kernel for each op")
    assert found.note.startswith(f"onnxruntime CPU computes {len(cast)} of the 3 float16 nodes")
    assert found.note.endswith(f"(no float16 kernel: {', '.join(cast)})")
    assert found.note in runner.describe()["computed"]["text"]


def test_counting_is_once_per_build():
    runner = runners.create("onnxref", _model(*MIXED), "fp16")
    assert runner.computed() is runner.computed()


# -- torch --------------------------------------------------------------------------------------
def test_torch_counts_its_parameters_cast_without_autocast():
    torch = pytest.importorskip("torch")
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    found = described(runners.create("torch", module, "bf16"))
    assert found.counts == {"bfloat16": 4} and found.unit == "parameters"
    assert found.text() == "bf16: 4 of 4 parameters in bfloat16; cast by the runner, no autocast"
    assert described(runners.create("torch", module)).counts == {"float32": 4}


def test_a_torch_function_has_no_count():
    runner = runners.create("torch", lambda x: x, "fp16", input_specs={"x": ("float32", (2,))})
    assert runner.computed() is None and "computed" not in runner.describe()


# -- TensorRT through its double ----------------------------------------------------------------
@pytest.fixture
def fake(monkeypatch):
    return functools.partial(install_doubles, monkeypatch)


SHAPES = [{"x": (2, 16)}]


@pytest.mark.parametrize("version", fake_tensorrt.VERSIONS)
def test_tensorrt_counts_the_layers_its_inspector_says(fake, version):
    fake(version=version)
    runner = runners.create("trt", layer_chain(), "fp16", shapes=SHAPES, isolate=False)
    assert "trt.create_engine_inspector" in fake_tensorrt.CALLS
    found = described(runner)
    nodes = len(layer_chain().graph.node)  # MatMul, Add, Tanh of each layer: one layer each
    assert found.unit == "layers" and found.counts == {"float16": nodes}
    fp32 = runners.create("trt", layer_chain(), shapes=SHAPES, isolate=False)
    assert described(fp32).counts == {"float32": nodes}


def test_tensorrt_11_building_a_float32_engine_from_fp16_is_seen(fake):
    fake(version="11.4.0.106")
    fake_tensorrt.SILENT_FP32 = True
    runner = runners.create("trt", layer_chain(), "fp16", shapes=SHAPES, isolate=False)
    found = described(runner)
    assert found.none_at_precision
    nodes = len(layer_chain().graph.node)
    assert found.text().startswith(f"fp16: 0 of {nodes} layers in float16, {nodes} kept in float32")


def test_an_engine_built_without_detailed_verbosity_says_its_layers_are_not_known():
    names_only = json.dumps({"Layers": ["a", "b"], "Bindings": ["x", "y"]})
    found = computed.trt_computed(names_only, "fp16")
    assert found.total == 0 and not found.none_at_precision
    assert found.text() == f"fp16: no layers counted; {computed.NAMES_ONLY}"


def test_the_inspector_json_is_read_as_tensorrt_writes_it():
    layers = [
        {"Name": "conv", "LayerType": "CaskConvolution", "Outputs": [
            {"Name": "c", "Format/Datatype": "Channel major FP16 format where channel % 8 == 0"}
        ]},
        {"Name": "r", "LayerType": "Reformat", "Outputs": [
            {"Name": "r", "Format/Datatype": "Row major linear FP32"}
        ]},
        {"Name": "soft", "LayerType": "CaskSoftMax", "Outputs": [
            {"Name": "s", "Format/Datatype": "Row major linear FP32"}
        ]},
        {"Name": "ids", "LayerType": "Gather", "Outputs": [
            {"Name": "i", "Format/Datatype": "Row major linear Int32"}
        ]},
    ]  # fmt: skip
    found = computed.trt_computed(json.dumps({"Layers": layers}), "fp16")
    # the Reformat is plumbing, the Gather computes no float: neither counted
    assert found.counts == {"float16": 1, "float32": 1}
    assert found.kept == {"CaskSoftMax": 1}


# -- records and the summary ----------------------------------------------------------------------
def test_a_record_without_computed_reads_back_as_before():
    fields = {
        "test": "t",
        "output": "y",
        "passed": True,
        "margin": 0.1,
        "check": "elemwise",
        "atol": 1e-3,
        "rtol": 1e-3,
        "source": "compare_frameworks",
        "max_abs_error": 0.0,
        "max_rel_error": 0.0,
    }
    assert record_of(fields).computed is None
    assert record_of({**fields, "computed": "fp16: 3 of 3 nodes in float16"}).computed


def test_the_summary_says_what_reduced_precision_targets_ran():
    base = Record("t", "y", True, 0.1, "elemwise", 1e-3, 1e-3, "compare_frameworks")
    fp16, fp32 = "fp16: 3 of 3 layers in float16", "fp32: 3 of 3 layers in float32"
    items = [
        Record(**{**base.__dict__, "target": "trt-fp16", "computed": fp16}),
        Record(**{**base.__dict__, "target": "trt-fp32", "computed": fp32}),
    ]
    assert computed_lines(items, 200) == ["what ran: trt-fp16 (fp16: 3 of 3 layers in float16)"]


# -- pytester: the failure, the option that allows it, the golden note -----------------------------
TESTS = """
import pytest

LOOSE = {"atol": 1, "rtol": 1}

@pytest.mark.compare_frameworks(model="minmax.onnx", frameworks=["onnxref"], tolerance=LOOSE)
def test_fallback():
    pass

@pytest.mark.compare_frameworks(
    model="minmax.onnx", frameworks=["onnxref"], tolerance=LOOSE, allow_fp32_fallback=True
)
def test_allowed():
    pass

@pytest.mark.compare_frameworks(model="mixed.onnx", frameworks=["onnxref"], tolerance=LOOSE)
def test_real_fp16():
    pass

@pytest.mark.compare_frameworks(
    model="minmax.onnx", frameworks=["onnxref"], allow_fp32_fallback="yes"
)
def test_misused():
    pass
"""
FAILED_LINE = (
    "*onnxref fp16: no node computed in float16 (all 2: 2 in float32): the comparison would be "
    "float32 against float32, not a fp16 check; allow_fp32_fallback=True (or "
    "--trt-allow-fp32-fallback) allows it on purpose*"
)


def _write_models(pytester: pytest.Pytester) -> None:
    (pytester.path / "minmax.onnx").write_bytes(_model(*MIN_MAX).SerializeToString())
    (pytester.path / "mixed.onnx").write_bytes(_model(*MIXED).SerializeToString())


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    found = {}
    for line in result.stdout.lines:
        for word in ("PASSED", "FAILED", "ERROR", "SKIPPED"):
            if line.startswith(word + " ") and "::" in line:
                found[line.split()[1].split("::")[-1].split(" ")[0]] = word
    return found


@pytest.mark.parametrize("xdist", XDIST)
def test_a_fp16_case_whose_target_computed_no_fp16_fails_unless_allowed(pytester, xdist):
    _write_models(pytester)
    pytester.makepyfile(test_ran=TESTS)
    result = run(pytester, "-rA", "--trt-precision=fp16", "--trt-report=report.json", *xdist)
    assert _outcomes(result) == {
        "test_fallback[onnxref-fp16]": "FAILED",
        "test_allowed[onnxref-fp16]": "PASSED",
        "test_real_fp16[onnxref-fp16]": "PASSED",
        "test_misused": "ERROR",
    }
    text = result.stdout.str()
    result.stdout.fnmatch_lines([FAILED_LINE])
    assert "allow_fp32_fallback=...) got 'yes' (str); it takes True or False" in text
    assert (  # the summary, once per runner and what it ran
        "what ran: onnxref-fp16 (fp16: 0 of 2 nodes in float16, 2 kept in float32 (Max, Min)); "
        "onnxref-fp16 (fp16: 3 of 3 nodes in float16)"
    ) in " ".join(text.split())
    assert "INTERNALERROR" not in text and "Traceback" not in text
    report = json.loads((pytester.path / "report.json").read_text())
    ran = {r["test"]: r.get("computed") for r in report["outputs"]}
    assert ran["test_real_fp16[onnxref-fp16]"] == "fp16: 3 of 3 nodes in float16"
    assert ran["test_allowed[onnxref-fp16]"] == (
        "fp16: 0 of 2 nodes in float16, 2 kept in float32 (Max, Min)"
    )


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize(
    "how", [["--trt-allow-fp32-fallback"], ["-o", "trtcompare_allow_fp32_fallback=true"]]
)
def test_the_flag_and_ini_allow_it_for_the_run(pytester, xdist, how):
    _write_models(pytester)
    pytester.makepyfile(test_ran=TESTS)
    result = run(pytester, "-k", "fallback", "--trt-precision=fp16", *how, *xdist)
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("xdist", XDIST)
def test_a_mismatch_report_ends_with_what_the_target_ran(pytester, xdist):
    _write_models(pytester)
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compare_frameworks(
            model="mixed.onnx", frameworks=["onnxref"], tolerance={"atol": 0, "rtol": 0}
        )
        def test_tight():
            pass
        """
    )
    result = run(pytester, "--trt-precision=fp16", *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["what ran: onnxref fp16: 3 of 3 nodes in float16"])


GOLDEN_TEST = """
import os

import numpy as np

def test_golden(golden):
    precision = os.environ["GOLDEN_PRECISION"]
    shift = 0.0 if precision == "fp32" else 1.0
    golden.check({"y": np.arange(4, dtype=np.float32) + shift}, precision=precision)
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_a_golden_checked_at_another_precision_says_so(pytester, xdist, monkeypatch):
    pytester.makepyfile(test_g=GOLDEN_TEST)
    monkeypatch.setenv("GOLDEN_PRECISION", "fp32")
    written = run(pytester, "--trt-update-goldens")
    written.assert_outcomes(passed=1)
    monkeypatch.setenv("GOLDEN_PRECISION", "fp16")
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*golden written at fp32, checked at fp16: the errors include the change of precision*"]
    )
    monkeypatch.setenv("GOLDEN_PRECISION", "fp32")
    same = run(pytester, *xdist)
    same.assert_outcomes(passed=1)


def test_the_golden_note_names_what_each_run_computed():
    then = {"precision": "fp16", "computed": {"counts": {"float32": 3}, "text": "fp16: 0 of 3"}}
    now = {"precision": "fp16", "computed": {"counts": {"float16": 3}, "text": "fp16: 3 of 3"}}
    from pytest_trtcompare.goldens import precision_note

    assert precision_note({"runner": then}, now) == (
        "golden written by a run in other types (fp16: 0 of 3), now fp16: 3 of 3\n"
    )
    assert precision_note({"runner": now}, now) == ""
    assert precision_note({"precision": "fp32", "runner": "onnxrt"}, None, "fp16") == (
        "golden written at fp32, checked at fp16: the errors include the change of precision\n"
    )


def test_an_isolated_runner_says_what_its_worker_counted():
    local = runners.create("onnxref", _model(*MIN_MAX), "fp16")
    with runners.create("onnxref", _model(*MIN_MAX), "fp16", isolate=True) as isolated:
        assert isolated.computed() == local.computed()
        assert isolated.describe()["computed"] == local.describe()["computed"]
