"""Precision debugging: the search for the nodes that must stay in fp32
(session/precision_debug.py, through its documented path pytest_trtcompare.debug)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import numpy_helper

from pytest_trtcompare import debug
from pytest_trtcompare.compare import Tolerance, compare_outputs
from pytest_trtcompare.errors import TrtCompareError

from .planted_models import WIDTH, check_written, constant_model, feed, planted, run


@pytest.mark.parametrize("level", ["fp16", "bf16"])
def test_search_returns_exactly_the_planted_pair_in_logarithmic_runs(level):
    model = planted()
    result = debug.find_fp32_nodes(model, level, "onnxref")
    assert result.keep_fp32 == ("plant_add", "plant_sub")
    assert result.passed and result.node_count == 63
    # everything at low precision, then two bisections of about log2(N) runs each
    assert result.runs <= 1 + 2 * math.ceil(math.log2(result.node_count + 1)) + 1
    check_written(result.model)
    assert compare_outputs(run(result.model), run(model), Tolerance.for_precision(level)).passed
    assert "keep these 2 nodes in fp32: plant_add (Add), plant_sub (Sub)" in result.describe()
    report = result.to_json()
    assert {k: report[k] for k in ("keep_fp32", "passed", "runs")} == {
        "keep_fp32": ["plant_add", "plant_sub"],
        "passed": True,
        "runs": result.runs,
    }
    assert [cause["node"] for cause in report["probable_causes"]] == ["plant_add", "plant_sub"]
    assert report["scan_runs"] == 1


def test_runs_grow_logarithmically_with_the_node_count():
    runs = [
        debug.find_fp32_nodes(planted(n, n), "fp16", range_scan=False).runs for n in (4, 16, 64)
    ]
    assert runs[2] <= runs[0] + 2 * 4 + 2  # 16 times the nodes: about 2 * log2(16) more runs


def test_the_range_scan_makes_the_runs_independent_of_the_node_count():
    """The scan names the planted pair: all at fp16 (fail), the pair in fp32 (pass), each
    of the two alone (fail): 4 runs whatever the length of the chain."""
    for n in (4, 16, 64):
        result = debug.find_fp32_nodes(planted(n, n), "fp16")
        assert result.keep_fp32 == ("plant_add", "plant_sub") and result.runs == 4
        assert result.scan is not None  # one fp32 run per SCAN_GROUP (64) float tensors
        assert result.scan.runs == math.ceil(result.scan.tensors / 64)


def test_a_set_spread_over_the_graph_is_shrunk_to_the_needed_nodes():
    model = planted(6, 6)
    for node in model.graph.node:  # a second unsafe pair: pre1 (* 1.0625) becomes * 4096
        if node.name == "pre1":
            weight = next(t for t in model.graph.initializer if t.name == "pre1_c")
            weight.CopyFrom(numpy_helper.from_array(np.full(WIDTH, 4096.0, np.float32), "pre1_c"))
    for node in model.graph.node:
        if node.name == "pre3":  # ... and pre3 divides it back: Mul by 1/4096 exactly
            weight = next(t for t in model.graph.initializer if t.name == "pre3_c")
            weight.CopyFrom(numpy_helper.from_array(np.full(WIDTH, 2.0**-12, np.float32), "pre3_c"))
    tolerance = Tolerance(atol=1e-2, rtol=1e-2)
    result = debug.find_fp32_nodes(model, "fp16", "onnxref", tolerance, inputs=feed())
    assert result.passed
    assert {"plant_add", "plant_sub"} <= set(result.keep_fp32)
    assert len(result.keep_fp32) <= 5
    assert compare_outputs(run(result.model), run(model), tolerance).passed


def test_a_model_that_passes_needs_no_fp32_node_and_onerun():
    result = debug.find_fp32_nodes(planted(3, 3), "fp16", tolerance=Tolerance(atol=1e4))
    assert result.keep_fp32 == () and result.passed and result.runs == 1
    assert "passes with no node in fp32" in result.describe()


def test_a_sequence_of_tolerances_must_all_pass():
    tolerances = [Tolerance(atol=1e-2, rtol=1e-2), Tolerance(check="max", atol=1e-2, rtol=0)]
    result = debug.find_fp32_nodes(planted(8, 8), "fp16", tolerance=tolerances, inputs=[feed()])
    assert result.keep_fp32 == ("plant_add", "plant_sub") and result.passed


def test_no_passing_set_says_so():
    """A Constant is not a candidate (no arithmetic), so its fp16 rounding stays."""
    result = debug.find_fp32_nodes(constant_model(), "fp16", tolerance=Tolerance(atol=0, rtol=0))
    assert not result.passed and result.keep_fp32 == ("add",) and result.runs == 2
    assert "no set of fp32 nodes passes, not even all of them (2 runs)" in result.describe()


def test_unnamed_nodes_get_names_and_bad_precision_is_an_error():
    model = planted(2, 2)
    for node in model.graph.node:
        if not node.name.startswith("plant"):
            node.name = ""
    result = debug.find_fp32_nodes(model, "fp16")
    assert result.keep_fp32 == ("plant_add", "plant_sub")
    assert all(node.name for node in result.model.graph.node)
    with pytest.raises(TrtCompareError, match="fp16 or bf16, not 'int8'"):
        debug.find_fp32_nodes(model, "int8")


def test_explain_failure_is_the_text_for_a_report():
    text = debug.explain_failure(planted(), "fp16", "onnxref", Tolerance(atol=1e-2, rtol=1e-2))
    causes, search = text.splitlines()[:2], text.splitlines()[2]
    assert [line.split(" (")[0] for line in causes] == [
        "probable cause: plant_add",
        "probable cause: plant_sub",
    ]
    assert search.startswith("precision debugging (onnxref fp16, 63 candidate nodes): keep these 2")
    assert search.endswith("(4 runs; the mixed model passes)")
    assert debug.explain_failure("missing.onnx", "fp16", "onnxref").startswith(
        "precision debugging could not run: model file"
    )
