"""Records reach the summary of their own process without a JSON round trip only where the
round trip gives them back the same: every kind of record, read back both ways."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from pytest_trtcompare import Tolerance, compare_outputs
from pytest_trtcompare.reports import properties, summary


def _records() -> list[summary.Record]:
    rng = np.random.default_rng(0)
    expected = rng.standard_normal(40).astype(np.float32)
    nan = expected.copy()
    nan[3] = np.nan
    results = [
        compare_outputs(expected + np.float32(1e-6), expected, atol=1e-5, rtol=1e-5),  # passes
        compare_outputs(expected + np.float32(0.1), expected, atol=1e-5, rtol=1e-5),  # fails
        compare_outputs(nan, expected),  # a NaN error: the margin is inf
        compare_outputs({"a": expected}, {"a": expected, "b": expected}),  # missing output
        compare_outputs(  # a metric check beside the elementwise tolerance
            expected, expected, [Tolerance(atol=1e-3, rtol=1e-3), Tolerance(check="cosine")]
        ),
        compare_outputs(expected, expected, check="mean"),
    ]
    found = []
    for i, result in enumerate(results):
        found += summary.records(result, f"test_{i}", "compare", None, None)
    found += summary.records(results[0], "test_timed", "compare", "a", "b", 0, (1.5, 2.25))
    found += [  # a test of several input iterations (issue 45): the count, an int, reads back
        dataclasses.replace(record, test="test_iterations", iterations=3)
        for record in summary.records(results[0], "t", "compare", None, None)
    ]
    margin = np.float64(0.5)  # numpy's float: JSON gives back Python's
    found.append(
        summary.Record("test_np", "o", True, margin, "elemwise", 1.0, 1.0, "x", figures=FIGURES)
    )
    zeros = {"max_abs_error": 0.0, "max_rel_error": 0.0}
    found.append(summary.Record("test_int", "o", True, 0, "elemwise", 1, 1, "x", figures=zeros))
    found.append(_with_statistics())
    found.append(_with_statistics(worst_ratio=2.0))  # all finite: kept
    return found


#: A record's figures of fields of its own (Extremes.record)
FIGURES = {"max_abs_error": 0.1, "max_rel_error": 0.1}


def _with_statistics(worst_ratio: float = math.inf) -> summary.Record:
    """A record with a registered statistic's figures (engine/statistic.py), one infinite."""
    figures = {**FIGURES, "rms_error": 0.25, "worst_ratio": worst_ratio}
    test = "test_stats" if math.isinf(worst_ratio) else "test_finite_stats"
    return summary.Record(test, "o", True, 0.5, "elemwise", 1.0, 1.0, "x", figures=figures)


def test_registered_statistics_travel_in_the_record():
    """As JUnit properties of their own, and in the record's JSON (what xdist, the summary,
    --trt-report and `trtcompare merge` read): its `statistics`, beside the fields."""
    props = properties.to_properties([_with_statistics()])
    assert ("trtcompare.o.rms_error", 0.25) in props
    assert ("trtcompare.o.worst_ratio", "inf") in props
    (read,) = _parsed(props)
    assert read.figures == {**FIGURES, "rms_error": 0.25, "worst_ratio": math.inf}
    assert read.rms_error == 0.25 and read.max_abs_error == 0.1
    fields = json.loads(dict(props)["trtcompare.o.record"])
    assert fields["statistics"] == {"rms_error": 0.25, "worst_ratio": "inf"}
    assert (fields["max_abs_error"], fields["max_rel_error"]) == (0.1, 0.1)


def _parsed(props: list[tuple[str, object]]) -> list[summary.Record]:
    """What summary.from_properties reads from the JSON alone (another process: xdist)."""
    copied = [(key, json.loads(json.dumps(value))) for key, value in props]
    return summary.from_properties(copied)


@pytest.mark.parametrize("record", _records(), ids=lambda r: r.test + "-" + r.output)
def test_a_record_taken_back_is_the_one_its_json_gives(record):
    props = properties.to_properties([record])
    read = summary.from_properties(props)
    assert repr(read) == repr(_parsed(props))
    assert summary.from_properties(props) == read  # a second reading parses: the same


def test_records_kept_are_those_that_read_back_the_same():
    kept = {(r.test, r.output) for r in _records() if properties.reads_back_the_same(vars(r))}
    assert {test for test, _ in kept} == {
        "test_0",
        "test_1",
        "test_3",
        "test_5",
        "test_finite_stats",
        "test_timed",
        "test_iterations",
    }
    # parsed: Inf margins (test_2, test_3's missing b), metrics (test_4), numpy's float, ints
    assert ("test_3", "a") in kept and ("test_3", "b") not in kept


def test_the_json_property_is_json_dumps_sorted():
    for record in _records():
        props = dict(properties.to_properties([record]))
        text = props[f"trtcompare.{record.output}.record"]
        assert text == json.dumps(properties.record_fields(record), sort_keys=True)


def test_a_runner_built_bare_on_one_worker_and_described_as_a_twin_on_another_is_one_entry():
    """xdist: worker 1 described the torch runner bare (built for a `runners` fixture test,
    no record names it), worker 2 as a twin with how it was bound (its records name it).
    The report holds the twin's only, as one process would; a bare description that a
    record names stays."""
    from pytest_trtcompare.reports.document import report_json

    bare = {"runner": "torch-fp32", "framework": "torch", "device": "cpu"}
    twin = {**bare, "twin_names": {"inputs": {"x": "x (by name)"}}}
    other = {"runner": "onnxrt-fp32", "framework": "onnxrt"}
    record = summary.Record(
        "test_twin", "y", True, 0.5, "elemwise", 1.0, 1.0, "x", figures=FIGURES,
        target_runner="torch-fp32@2", reference_runner="onnxrt-fp32@3",
    )  # fmt: skip
    runners = {"torch-fp32@1": bare, "torch-fp32@2": twin, "onnxrt-fp32@3": other}
    written = json.loads(report_json([record], runners, {}, "0"))["runners"]
    assert written == {"onnxrt-fp32@3": other, "torch-fp32@2": twin}
    named_bare = summary.Record(
        "test_bare", "y", True, 0.5, "elemwise", 1.0, 1.0, "x", figures=FIGURES,
        target_runner="torch-fp32@1",
    )  # fmt: skip
    written = json.loads(report_json([record, named_bare], runners, {}, "0"))["runners"]
    assert set(written) == set(runners)
