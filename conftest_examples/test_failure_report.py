"""Example 5: what a failure looks like. This test expects the mismatch, so it passes.

Shows: `OutputMismatchError` (an AssertionError) carrying `.result`, and the report: where
the numbers moved, by how much, and the tolerance that would have passed.
"""

from __future__ import annotations

import pytest

from pytest_trtcompare import OutputMismatchError, assert_outputs_close

from .conftest import run


def test_a_corrupted_weight_is_caught_and_located(mlp_session, batch):
    good = run(mlp_session, batch)
    bad = {name: value.copy() for name, value in good.items()}
    bad["logits"][5, 3] += 0.25  # what a broken kernel or a bad cast does to one element
    with pytest.raises(OutputMismatchError) as info:
        assert_outputs_close(bad, good, atol=1e-3, rtol=1e-3)
    report = str(info.value)
    assert "greatest abs error 0.25 at (5, 3)" in report
    assert info.value.result.outputs["logits"].mismatches == 1
