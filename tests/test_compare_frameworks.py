"""compare_frameworks, precision / shape parametrization, the accuracy summary, the JSON
report, JUnit properties and xdist: through pytester, with and without -n 2."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from .pytester_helpers import XDIST, XDIST_SLOW, run

CONFTEST = """
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

def pytest_configure(config):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((8, 4)) / 3).astype(np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Tanh", ["h"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(config.rootpath / "model.onnx"))
"""

NEW_USER_TEST = """
import pytest

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxref", "onnxrt"])
@pytest.mark.shapes({"x": (1, 8)}, {"x": (4, 8)})
def test_model(comparison):
    assert comparison.outputs["y"].max_abs_error < 0.05
"""


def _outcome(result, nodeid):
    """PASSED / SKIPPED / FAILED of an item in -v output (xdist puts the outcome first)."""
    for line in result.stdout.lines:
        if nodeid in line:
            for word in ("PASSED", "SKIPPED", "FAILED", "ERROR"):
                if word in line:
                    return word
    return None


@pytest.mark.parametrize("xdist", XDIST)
def test_new_user_project_four_items_summary_and_report(pytester, xdist):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_model=NEW_USER_TEST)
    result = run(
        pytester,
        "--trt-precision",
        "fp32,fp16",
        "--strict-markers",
        "-v",
        "--trt-report",
        "report.json",
        *xdist,
    )
    result.assert_outcomes(passed=4)
    for precision in ("fp32", "fp16"):
        for batch in (1, 4):
            assert _outcome(result, f"test_model.py::test_model[onnxref-{precision}-bs{batch}]")
    result.stdout.fnmatch_lines(
        [
            "*accuracy summary*",
            "margin*test :: output*worst error*tolerance*",
            "*ok*test_model[[]onnxref-fp16-bs*[]] :: y*elemwise atol=0.01 rtol=0.01*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "runners built (*): onnxref-fp16 x1, onnxref-fp32 x1, onnxrt-fp32 x1"
            if not xdist
            else "runners built (gw*): *"
        ]
    )
    report = json.loads((pytester.path / "report.json").read_text())
    tests = sorted(entry["test"] for entry in report["outputs"])
    assert tests == sorted(
        f"test_model[onnxref-{p}-bs{b}]" for p in ("fp32", "fp16") for b in (1, 4)
    )
    assert all(entry["passed"] and entry["margin"] < 1 for entry in report["outputs"])
    described = {key: d["runner"] for key, d in report["runners"].items()}
    assert sorted(described.values()) == ["onnxref-fp16", "onnxref-fp32", "onnxrt-fp32"]
    for entry in report["outputs"]:  # each record names its runners' descriptions
        target, reference = entry["target_runner"], entry["reference_runner"]
        assert (described[target], described[reference]) == (entry["target"], entry["reference"])
    (fp16,) = (d for d in report["runners"].values() if d["runner"] == "onnxref-fp16")
    assert fp16["precision_route"].startswith("fp16")
    margins = [entry["margin"] for entry in report["outputs"]]
    assert margins == sorted(margins, reverse=True)  # closest to failing first


@pytest.mark.parametrize("xdist", XDIST)
def test_failing_target_reports_and_leads_the_summary(pytester, xdist):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxref", "onnxrt"],
                                        tolerance={"atol": 1e-6, "rtol": 1e-6})
        @pytest.mark.shapes({"x": (4, 8)})
        def test_model(comparison):
            pass
        """
    )
    result = run(pytester, "--trt-precision", "fp32,bf16", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*onnxref-bf16 vs onnxrt-fp32: 1 of 1 outputs out of tolerance: y*",
            "*greatest abs error*",
            "*accuracy summary*",
        ]
    )
    lines = result.stdout.lines
    first_row = lines[next(i for i, line in enumerate(lines) if line.startswith("margin")) + 1]
    assert "FAIL" in first_row and "onnxref-bf16" in first_row


def test_precisions_marker_frameworks_option_and_unsupported(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt", "onnxref", "trt"])
        @pytest.mark.precisions("fp16", "tf32")
        @pytest.mark.shapes({"x": (2, 8)})
        def test_model():
            pass
        """
    )
    result = pytester.runpytest("--trt-precision", "fp32,fp16,tf32", "-v", "-rs")
    # onnxref: fp16 only (no tf32); trt: fp16 and tf32, skipped here without tensorrt
    result.assert_outcomes(passed=1, skipped=2)
    assert _outcome(result, "test_model[onnxref-fp16-bs2]") == "PASSED"
    assert _outcome(result, "test_model[trt-tf32-bs2]") == "SKIPPED"
    result.stdout.fnmatch_lines(
        ["*tensorrt is not installed: pip install pytest-trtcompare[[]tensorrt[]]*"]
    )
    only = pytester.runpytest("--trt-precision", "fp16", "--trt-frameworks", "trt", "-v")
    only.assert_outcomes(skipped=1)


def test_bad_marker_arguments_are_clear_errors_of_their_test(pytester):
    pytester.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(model="m.onnx", frameworks=["onnxrt", "onnxref"], atol=1)
        def test_a():
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*compare_frameworks got unknown argument(s) atol; it takes*"])
    assert "Traceback" not in result.stdout.str() and "During handling" not in result.stdout.str()
    pytester.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(model="m.onnx", frameworks=["onnxrt", "onnxref"])
        @pytest.mark.precisions("fp64")
        def test_a():
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*@pytest.mark.precisions got 'fp64' (str); it takes precision names from fp32*"]
    )


def test_missing_model_fails_its_items_clearly(pytester):
    pytester.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(model="nope.onnx", frameworks=["onnxrt", "onnxref"])
        def test_a():
            pass

        def test_other():
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ModelLoadError: model file '*/nope.onnx' does not exist*"])
    assert "INTERNALERROR" not in result.stdout.str()


@pytest.mark.parametrize("xdist", XDIST_SLOW)  # golden with -n 2: tests/test_combinations.py
def test_golden_mode(pytester, xdist):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt", "onnxref"],
                                        golden=True)
        @pytest.mark.shapes({"x": (2, 8)})
        def test_model():
            pass
        """
    )
    run(pytester, *xdist).assert_outcomes(failed=2)
    created = run(pytester, "--trt-update-goldens", *xdist)
    created.assert_outcomes(passed=2)
    created.stdout.fnmatch_lines(["*created 2*"])
    again = run(pytester, "--trt-report", "r.json", *xdist)
    again.assert_outcomes(passed=2)
    report = json.loads((pytester.path / "r.json").read_text())
    assert {entry["reference"] for entry in report["outputs"]} == {
        "golden test_model[onnxrt-fp32-bs2].safetensors",
        "golden test_model[onnxref-fp32-bs2].safetensors",
    }


def test_plain_tests_get_precisions_shapes_and_runners(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.shapes({"x": (1, 8)}, {"x": (3, 8)})
        def test_runner_factory(runners, trt_precision, input_shapes, compare):
            from pytest_trtcompare.session.runs import make_feeds
            reference = runners.onnxrt("model.onnx")
            target = runners.create("onnxref", "model.onnx", trt_precision)
            assert runners.onnxrt("model.onnx") is reference  # built once per session
            (feed,) = make_feeds(reference, shapes=input_shapes)
            compare(target.infer(feed), reference.infer(feed), precision=trt_precision)
        """
    )
    result = pytester.runpytest("--trt-precision", "fp32,fp16", "-v", "--junitxml", "junit.xml")
    result.assert_outcomes(passed=4)
    assert _outcome(result, "test_runner_factory[fp16-bs3]") == "PASSED"
    assert _outcome(result, "test_runner_factory[fp32-bs1]") == "PASSED"
    tree = ET.parse(pytester.path / "junit.xml")
    names = {p.get("name") for p in tree.iter("property")}
    assert {"trtcompare.y.margin", "trtcompare.y.max_abs", "trtcompare.y.record"} <= names


def test_callable_only_comparison(pytester):
    pytester.makepyfile(
        helpers="""
        import numpy as np

        def reference(feed):
            return {"y": np.sin(feed["x"])}

        def approximation(feed, precision):
            x = feed["x"].astype(np.float16 if precision == "fp16" else np.float32)
            return {"y": (x - x ** 3 / 6 + x ** 5 / 120).astype(np.float32)}
        """,
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(
            frameworks=["callable:helpers:approximation", "callable:helpers:reference"],
            reference="callable:helpers:reference",
            options={"callable": {"input_specs": {"x": ("float32", (16,))}}},
            tolerance={"atol": 1e-3, "rtol": 1e-3},
        )
        def test_series(comparison):
            assert comparison.outputs["y"].max_abs_error < 1e-3
        """,
    )
    pytester.syspathinsert()
    result = pytester.runpytest("--trt-precision", "fp32", "-v")
    result.assert_outcomes(passed=1)
    assert _outcome(result, "test_series[approximation-fp32]") == "PASSED"


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_ini_tolerances_and_command_line_precedence(pytester, xdist):
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\ntrtcompare_tolerances =\n    bf16: atol=1e-7 rtol=1e-7\n")
    pytester.makepyfile(test_model=NEW_USER_TEST)
    strict = run(pytester, "--trt-precision", "bf16", *xdist)
    strict.assert_outcomes(failed=2)  # the ini's bf16 tolerance is far too tight
    loose = run(pytester, "--trt-precision", "bf16", "--trt-atol", "0.1", *xdist)
    loose.assert_outcomes(passed=2)  # the command line wins


def test_items_of_one_model_share_one_xdist_group(pytester):
    pytester.makeconftest(
        CONFTEST
        + """
def pytest_collection_finish(session):
    for item in session.items:
        marks = [m.kwargs.get("name") for m in item.iter_markers("xdist_group")]
        print("GROUP", item.name, marks)
"""
    )
    pytester.makepyfile(test_model=NEW_USER_TEST)
    result = pytester.runpytest("--trt-precision", "fp32,fp16", "--collect-only", "-s")
    groups = {line.split(" ", 2)[2] for line in result.stdout.lines if line.startswith("GROUP")}
    assert len(groups) == 1 and groups.pop().startswith("['trtcompare-")


def test_one_worker_runs_a_model_builds_each_runner_once(pytester):
    # --dist loadscope keeps a module on one worker. (--dist loadgroup would use our
    # xdist_group marks, but pytest-xdist <= 3.8 ignores them on pytest >= 9.2:
    # pytest-dev/pytest-xdist#1386.)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_model=NEW_USER_TEST)
    result = pytester.runpytest_subprocess(
        "-n", "2", "--dist", "loadscope", "--trt-precision", "fp32,fp16"
    )
    result.assert_outcomes(passed=4)
    builds = [line for line in result.stdout.lines if line.startswith("runners built")]
    assert len(builds) == 1  # one worker ran the whole module
    assert builds[0].endswith("onnxref-fp16 x1, onnxref-fp32 x1, onnxrt-fp32 x1")


def test_explicit_inputs_from_a_file(pytester):
    pytester.makeconftest(CONFTEST)
    import numpy as np

    np.savez(pytester.path / "feed.npz", x=np.full((3, 8), 0.5, np.float32))
    pytester.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt", "onnxref"],
                                        inputs="feed.npz")
        def test_model(comparison):
            assert comparison.outputs["y"].shape == (3, 4)  # the file's batch of 3
        """
    )
    pytester.runpytest().assert_outcomes(passed=1)


@pytest.mark.parametrize("xdist", XDIST)
def test_goldens_of_unselected_precisions_are_never_unused(pytester, xdist):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt"], golden=True)
        @pytest.mark.shapes({"x": (2, 8)})
        def test_model():
            pass
        """
    )
    run(pytester, "--trt-update-goldens", "--trt-precision", "fp32,fp16", *xdist).assert_outcomes(
        passed=2
    )
    pruned = run(pytester, "--trt-prune-goldens", "--trt-precision", "fp32", *xdist)
    pruned.stdout.fnmatch_lines(["checked 1, unused 0 (pruned 0)"])
    assert len(list((pytester.path / "goldens" / "test_model").glob("*.safetensors"))) == 2


def test_worker_output_survives_torch_descriptions(pytester):
    pytest.importorskip("torch")
    pytester.makepyfile(
        helpers="""
        def identity(feed):
            return {"output": feed["x"]}
        """,
        test_model="""
        import pytest
        import torch

        @pytest.mark.compare_frameworks(
            frameworks=["torch", "callable:helpers:identity"], reference="torch",
            model=torch.nn.Identity(), options={"torch": {"input_names": ["x"]}},
        )
        @pytest.mark.shapes({"x": (3,)})
        def test_identity():
            pass
        """,
    )
    pytester.syspathinsert()
    result = pytester.runpytest_subprocess("-n", "2", "--trt-report", "r.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["runners built (gw*): *torch-fp32 x1*"])
    assert "torch-fp32" in (pytester.path / "r.json").read_text()


def test_golden_mode_metadata_and_a_full_disk(pytester):
    from pytest_trtcompare.goldens.store import read_header

    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt"], golden=True)
        @pytest.mark.shapes({"x": (20000, 8)})
        def test_model():
            pass
        """
    )
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=1)
    (path,) = list(pytester.path.rglob("*.safetensors"))
    meta = read_header(path)["meta"]
    assert meta["plugin_version"] and meta["tolerance"]["atol"] == 1e-5
    assert meta["test"] == "test_model.py::test_model[onnxrt-fp32-bs20000]"
    before = path.read_bytes()
    path.write_bytes(before[:-64])  # truncated: the error says to regenerate it, so that works
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=1)
    assert path.read_bytes() == before
    pytester.makeconftest(
        CONFTEST
        + """
import resource, signal
import onnx
from onnx import numpy_helper

def pytest_sessionstart(session):
    model = onnx.load("model.onnx")  # new weights: the update has something to write
    weight = model.graph.initializer[0]
    weight.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(weight) * 2, "W"))
    onnx.save(model, "model.onnx")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))  # a full disk
"""
    )
    result = pytester.runpytest_subprocess("--trt-update-goldens")  # the rlimit must not reach us
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cannot write golden*File too large (the old golden is kept)*"])
    assert path.read_bytes() == before and "INTERNALERROR" not in result.stdout.str()
    assert "During handling" not in result.stdout.str()  # one message, no chained traceback
