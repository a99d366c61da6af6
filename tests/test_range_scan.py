"""The range scan (session/range_scan.py): the nodes whose fp32 values leave fp16's / bf16's
range or lose an addition's meaning, on small onnx.helper models with one of each."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare import debug
from pytest_trtcompare.compare import Tolerance
from pytest_trtcompare.errors import TrtCompareError
from pytest_trtcompare.session.range_scan import LIMITS, RangeFinding, scan_ranges

from .onnx_models import layer_chain, make
from .planted_models import planted


def _chain(*steps: tuple[str, np.ndarray | float], width: int = 8) -> object:
    """x[1, width] -> each (op, constant) in turn, nodes n0, n1, ... -> y."""
    nodes, weights, current = [], [], "x"
    for i, (op, value) in enumerate(steps):
        out = "y" if i == len(steps) - 1 else f"t{i}"
        array = np.asarray(value, np.float32)
        weights.append(numpy_helper.from_array(array, f"c{i}"))
        nodes.append(helper.make_node(op, [current, f"c{i}"], [out], name=f"n{i}"))
        current = out
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])],
        weights,
    )
    return make(graph)


def _feed(width: int = 8) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).uniform(0.5, 1.0, (1, width)).astype(np.float32)}


def test_an_overflow_past_65504_is_named_with_its_largest_value():
    model = _chain(("Mul", 2.0e5), ("Mul", 1.0e-4))  # n0 reaches up to 2e5, n1 comes back
    scan = scan_ranges(model, "fp16", [_feed()])
    # its constant 2e5 is past the range too: the conversion clamps it, named first
    assert [(f.node, f.kind) for f in scan.findings] == [("n0", "weight"), ("n0", "overflow")]
    assert scan.findings[0].text() == (
        "probable cause: n0 (Mul) has weight c0 up to 2e+05, past float16's 65504: the "
        "conversion clamps 100% of it"
    )
    assert scan.nodes == ("n0",)
    finding = scan.findings[1]
    assert finding.op_type == "Mul" and finding.tensor == "t0"
    assert finding.magnitude == pytest.approx(float(_feed()["x"].max()) * 2.0e5, rel=1e-6)
    assert finding.text() == (
        f"probable cause: n0 (Mul) reaches {finding.magnitude:.3g}, past float16's 65504"
    )
    assert scan_ranges(model, "bf16", [_feed()]).findings == ()  # bf16 reaches 3.4e38


def test_a_node_that_moves_an_overflowing_tensor_is_not_named_again():
    """n0 overflows; a Reshape and a Transpose pass its values on (no cause of their own);
    n3, a Mul that keeps them past the range, is named (it computes them anew)."""
    nodes = [
        helper.make_node("Mul", ["x", "big"], ["t0"], name="n0"),
        helper.make_node("Reshape", ["t0", "shape"], ["t1"], name="reshape"),
        helper.make_node("Transpose", ["t1"], ["t2"], name="transpose", perm=[1, 0]),
        helper.make_node("Mul", ["t2", "two"], ["y"], name="n3"),
    ]
    weights = [
        numpy_helper.from_array(np.float32(2.0e5), "big"),
        numpy_helper.from_array(np.array([8, 1], np.int64), "shape"),
        numpy_helper.from_array(np.float32(2.0), "two"),
    ]
    graph = helper.make_graph(
        nodes,
        "moved",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        weights,
    )
    scan = scan_ranges(make(graph), "fp16", [_feed()])
    assert [(f.node, f.kind) for f in scan.findings] == [
        ("n0", "weight"),
        ("n0", "overflow"),
        ("n3", "overflow"),
    ]


def test_values_below_the_smallest_normal_are_an_underflow():
    model = _chain(("Mul", 1.0e-6), ("Mul", 1.0e6))  # n0: all of it below 6.1e-05
    scan = scan_ranges(model, "fp16", [_feed()])  # n1's constant 1e6 is past the range
    assert [(f.node, f.kind) for f in scan.findings] == [("n0", "underflow"), ("n1", "weight")]
    finding = scan.findings[0]
    smallest = float(_feed()["x"].min()) * 1e-6
    assert finding.share == 1.0 and finding.smallest == pytest.approx(smallest, rel=1e-6)
    assert "of its significant values are below float16's smallest normal 6.1e-05" in (
        finding.text()
    )
    assert LIMITS["fp16"].smallest_normal == float(np.finfo(np.float16).tiny)


def test_a_few_tiny_values_beside_large_ones_are_no_underflow():
    """Values below the tensor's own digits do not count: 1e-7 beside 1 is lost anyway."""
    weights = np.ones(8, np.float32)
    weights[:3] = 1e-7
    assert scan_ranges(_chain(("Mul", weights)), "fp16", [_feed()]).findings == ()


def test_a_swamped_addition_and_the_cancellation_that_needs_it():
    model = _chain(("Add", 3000.0), ("Sub", 3000.0))
    scan = scan_ranges(model, "fp16", [_feed()])
    assert [(f.node, f.kind) for f in scan.findings] == [
        ("n0", "swamping"),
        ("n1", "cancellation"),
    ]
    assert scan.nodes == ("n0", "n1")
    assert scan.findings[1].text() == (
        "probable cause: n1 (Sub) cancels operands up to 3e+03 to a result that keeps fewer "
        "than 5 of float16's 11 bits in 100% of its elements: their rounding is most of it"
    )
    assert "to others that keep fewer than 4 of bfloat16's 8 bits" in (
        scan_ranges(model, "bf16", [_feed()]).findings[0].text()
    )


def test_a_swamped_addition_that_nothing_cancels_is_not_named():
    """x + 3000 loses x's digits, but the result keeps 11 bits of itself: no cause."""
    assert scan_ranges(_chain(("Add", 3000.0), ("Mul", 0.5)), "fp16", [_feed()]).findings == ()


def test_a_model_with_nothing_to_name():
    scan = scan_ranges(layer_chain(), "fp16", [{"x": np.ones((2, 16), np.float32)}])
    assert scan.findings == () and scan.tensors == 12 and scan.runs == 1
    assert scan.describe() == (
        "range scan (onnxrt fp32, 12 tensors, 1 runs): no tensor leaves float16's range"
    )


def test_groups_bound_the_tensors_per_run_and_feeds_merge():
    model = planted(10, 10)
    feeds = [_feed(64), {"x": np.full((1, 64), 0.25, np.float32)}]
    grouped = scan_ranges(model, "fp16", feeds, group=5)
    whole = scan_ranges(model, "fp16", feeds)
    assert grouped.findings == whole.findings and grouped.nodes == ("plant_add", "plant_sub")
    assert grouped.runs == 2 * -(-grouped.tensors // 5) and whole.runs == 2


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # onnx.reference's fp16 inf
def test_the_search_keeps_an_overflowing_node_and_what_reads_it():
    """n11 passes 65504 at fp16 (inf): n11 and its reader n12 must run in fp32; the scan
    names n11, the first trial keeps it and its reader, and passes: 4 runs, not 10."""
    benign = [("Mul", 1.0625), ("Add", 0.0625)] * 5
    model = _chain(*benign, ("Mul", 1.5), ("Mul", 3.0e5), ("Mul", 1.0e-5), *benign)
    tolerance = Tolerance(atol=1e-2, rtol=1e-2)
    result = debug.find_fp32_nodes(model, "fp16", tolerance=tolerance, inputs=_feed())
    before = debug.find_fp32_nodes(
        model, "fp16", tolerance=tolerance, inputs=_feed(), range_scan=False
    )
    assert result.scan is not None
    assert [(f.node, f.kind) for f in result.scan.findings] == [
        ("n11", "weight"),  # its constant 3e5, which the conversion clamps
        ("n11", "overflow"),
    ]
    assert result.passed and before.passed
    assert result.keep_fp32 == before.keep_fp32 == ("n11", "n12")
    assert (result.runs, before.runs) == (4, 10)
    assert result.describe().splitlines()[1].startswith("probable cause: n11 (Mul) reaches")
    assert isinstance(result.scan.findings[0], RangeFinding)


def test_a_report_shows_the_first_three_findings_and_counts_the_rest():
    model = _chain(*[("Mul", 0.01)] * 6)  # from n2 on, every tensor is below 6.1e-05
    scan = scan_ranges(model, "fp16", [_feed()])
    assert scan.nodes == ("n2", "n3", "n4", "n5")
    lines = scan.lines()
    assert [line.split(" (")[0] for line in lines[:3]] == [
        "probable cause: n2",
        "probable cause: n3",
        "probable cause: n4",
    ]
    assert lines[3] == (
        "... and 1 more (trtcompare debug-precision --json lists them all; the first in graph "
        "order is where it starts)"
    )
    assert len(scan.to_json()) == 4


def test_a_model_that_underflows_throughout_starts_from_all_its_nodes():
    """From n2 on every tensor is below fp16's smallest normal, and all 22 nodes must stay in
    fp32: the first trial passes, and shrinking tries each (44 runs; the bisection 51)."""
    model = _chain(*[("Mul", 0.01)] * 3, *[("Mul", 1.0)] * 20, ("Mul", 1e12))
    tolerance = Tolerance(atol=1e-3, rtol=1e-3)
    result = debug.find_fp32_nodes(model, "fp16", tolerance=tolerance, inputs=_feed())
    before = debug.find_fp32_nodes(
        model, "fp16", tolerance=tolerance, inputs=_feed(), range_scan=False
    )
    assert result.scan is not None and len(result.scan.nodes) == 22
    assert result.keep_fp32 == before.keep_fp32 == result.scan.nodes
    assert (result.runs, before.runs) == (44, 51)


def test_explain_range_is_the_report_text_and_never_raises():
    text = debug.explain_range(planted(4, 4), "fp16", [_feed(64)])
    assert [line.split(" (")[0] for line in text.splitlines()] == [
        "probable cause: plant_add",
        "probable cause: plant_sub",
    ]
    assert debug.explain_range(layer_chain(), "fp16", [{"x": np.ones((2, 16), np.float32)}]) == ""
    assert debug.explain_range("missing.onnx", "fp16", [_feed()]) == ""
    assert debug.explain_range(planted(4, 4), "fp16", [{"x": np.ones(3, np.float32)}]) == ""


def test_a_precision_it_does_not_know_is_one_error():
    with pytest.raises(TrtCompareError, match="range scan takes precision fp16 or bf16, not 'fp8'"):
        scan_ranges(planted(2, 2), "fp8", [_feed(64)])
