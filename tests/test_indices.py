"""check="indices" and postprocess="top-K", with Polygraphy's IndicesCompareFunc as the peer."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from pytest_trtcompare import Tolerance, assert_outputs_close, compare_outputs
from pytest_trtcompare.engine.indices import top_k_indices

comparator = pytest.importorskip("polygraphy.comparator")


def _polygraphy_indices(actual, expected, index_tolerance):
    from polygraphy.logger import G_LOGGER

    G_LOGGER.module_severity = G_LOGGER.CRITICAL
    func_class = getattr(comparator, "IndicesCompareFunc", None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        func = (
            func_class(index_tolerance=index_tolerance)
            if func_class
            else comparator.CompareFunc.indices(index_tolerance=index_tolerance)
        )
        result = func(
            comparator.IterationResult({"out": actual}, runner_name="a"),
            comparator.IterationResult({"out": expected}, runner_name="e"),
        )
    return bool(result["out"])


def test_docstring_examples_of_polygraphy():
    check = Tolerance(check="indices")
    assert not compare_outputs([0, 1, 2], [1, 0, 2], check).passed
    assert compare_outputs([0, 1, 2], [1, 0, 2], check.replace(index_tolerance=1)).passed
    out = compare_outputs([0, 1, 2], [1, 2, 0], check.replace(index_tolerance=1))
    assert not out.passed
    assert out.outputs["output"].indices.required_index_tolerance == 2


def test_same_verdicts_as_polygraphy_on_random_permutations():
    rng = np.random.default_rng(7)
    disagreements = []
    for _ in range(300):
        rows, k = int(rng.integers(1, 4)), int(rng.integers(1, 8))
        expected = np.stack([rng.permutation(20)[:k] for _ in range(rows)])
        actual = expected.copy()
        for row in actual:
            for _ in range(int(rng.integers(0, 3))):
                i, j = rng.integers(0, k, size=2)
                row[i], row[j] = row[j], row[i]
            if rng.random() < 0.2:
                row[int(rng.integers(k))] = 99  # a value the expected row lacks
        tolerance = int(rng.integers(0, 3))
        ours = compare_outputs(actual, expected, check="indices", index_tolerance=tolerance)
        theirs = _polygraphy_indices(actual, expected, tolerance)
        if ours.passed != theirs:
            disagreements.append((actual.tolist(), expected.tolist(), tolerance))
    assert disagreements == []


def test_required_index_tolerance_is_the_smallest_that_passes():
    rng = np.random.default_rng(3)
    for _ in range(100):
        expected = rng.permutation(8)[None, :]
        actual = expected.copy()
        i, j = rng.integers(0, 8, size=2)
        actual[0, i], actual[0, j] = actual[0, j], actual[0, i]
        need = compare_outputs(actual, expected, check="indices").outputs["output"]
        required = need.indices.required_index_tolerance
        assert compare_outputs(actual, expected, check="indices", index_tolerance=required).passed
        if required:
            assert not compare_outputs(
                actual, expected, check="indices", index_tolerance=required - 1
            ).passed


def test_top_k_postprocess_matches_polygraphy():
    from polygraphy.comparator import IterationResult

    topk_class = getattr(comparator, "TopKPostprocessFunc", None)
    rng = np.random.default_rng(11)
    scores = rng.standard_normal((4, 10)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        func = topk_class(k=5) if topk_class else comparator.PostprocessFunc.top_k(k=5)
        theirs = func(IterationResult({"s": scores.copy()}, runner_name="x"))["s"]
    np.testing.assert_array_equal(top_k_indices(scores, 5), theirs)
    np.testing.assert_array_equal(top_k_indices(scores, 2, axis=0), np.argsort(-scores, 0)[:2])


def test_top_k_scores_compare_as_indices_and_report_rows():
    expected = np.array([[0.9, 0.5, 0.1, 0.3], [0.1, 0.2, 0.3, 0.4]], dtype=np.float32)
    actual = expected.copy()
    actual[1, 2] = 0.5  # row 1 top-2 becomes [2, 3] instead of [3, 2]
    tol = Tolerance(check="indices", postprocess="top-2")
    with pytest.raises(AssertionError) as info:
        assert_outputs_close({"scores": actual}, {"scores": expected}, tol)
    text = str(info.value)
    assert "1 / 2 rows have indices out of place" in text
    assert "row (1,): actual [2, 3] expected [3, 2]" in text
    assert "after top-2" in text
    assert compare_outputs(actual, expected, tol.replace(index_tolerance=1)).passed


def test_top_k_with_a_missing_axis_names_the_output():
    with pytest.raises(Exception, match="output 'scores': postprocess='top-2,axis=3'"):
        compare_outputs(
            {"scores": np.zeros((2, 3))}, {"scores": np.zeros((2, 3))}, postprocess="top-2,axis=3"
        )
