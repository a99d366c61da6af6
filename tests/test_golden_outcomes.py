"""Golden outcomes that were silent (issue 27): NaN outputs under --trt-update-goldens, an
output whose dtype is not the golden's, golden.inputs() without a golden.check()."""

from __future__ import annotations

import pytest

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run

NAN_TESTS = """
import numpy as np

def test_nan(golden):
    golden.check({"y": np.array([1.0, np.nan]), "z": np.ones(2)})

def test_nan_expected(golden):
    golden.check({"y": np.array([1.0, np.nan])}, nan_equal=True)
"""


def _folder(pytester: pytest.Pytester, module: str):
    return pytester.path / "goldens" / module


@pytest.mark.parametrize("xdist", XDIST)
def test_nan_outputs_are_not_written_unless_nan_equal(pytester, xdist):
    pytester.makepyfile(test_m=NAN_TESTS)
    result = run(pytester, "--trt-update-goldens", "-rA", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    assert (
        "golden goldens/test_m/test_nan.golden not written: y has NaN at 1 position, and NaN "
        "fail every comparison unless nan_equal=True, so the next check would fail against this "
        "golden; pass nan_equal=True if the NaN are expected, else fix what makes them"
    ) in result.stdout.str().replace("\n  ", " ")  # a long message wraps, indented
    assert sorted(p.name for p in _folder(pytester, "test_m").iterdir()) == [
        "test_nan_expected.golden"
    ]
    again = run(pytester, "test_m.py::test_nan_expected", *xdist)  # it matches its next run
    again.assert_outcomes(passed=1)


DTYPE_TEST = """
import numpy as np
import os

def test_ids(golden):
    golden.check({"ids": np.arange(4, dtype=os.environ.get("IDS_DTYPE", "int32"))})
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_an_output_whose_dtype_changed_fails_naming_both(pytester, monkeypatch, xdist):
    pytester.makepyfile(test_m=DTYPE_TEST)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    run(pytester, *xdist).assert_outcomes(passed=1)
    monkeypatch.setenv("IDS_DTYPE", "int64")  # same values, another dtype
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*dtype changed since the golden was recorded: ids is int64, the golden has int32",
            "*ids: int64, the golden has int32 (the values match)",
            "*ids (int64 vs int32): int64, the golden has int32 (the values match)",
            "*if the new outputs are right, update the golden with:",
            "*  pytest --trt-update-goldens test_m.py::test_ids",
        ]
    )
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    run(pytester, *xdist).assert_outcomes(passed=1)


INPUTS_TESTS = """
import numpy as np
from pytest_trtcompare.runners.base import TensorSpec

SPECS = [TensorSpec("x", "float32", (2, 3))]

def test_forgot_check(golden):
    feed = golden.inputs(SPECS)
    assert feed["x"].shape == (2, 3)

def test_forgot_named_check(golden):
    feed = golden.inputs(SPECS, name="step2")
    golden.check({"y": feed["x"] * 2})  # the unnamed golden, not 'step2'

def test_checked(golden):
    feed = golden.inputs(SPECS)
    golden.check({"y": feed["x"] * 2})

def test_failing_body_says_its_own_failure(golden):
    golden.inputs(SPECS)
    raise ValueError("the model crashed")
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_golden_inputs_without_a_check_fails_saying_so(pytester, xdist):
    pytester.makepyfile(test_m=INPUTS_TESTS)
    for args in (["--trt-update-goldens"], []):  # writing, then checking
        result = run(pytester, "-rA", *args, *xdist)
        result.assert_outcomes(passed=1, failed=3)
        result.stdout.fnmatch_lines_random(
            [
                "FAILED*test_m.py::test_forgot_check - Failed: golden.inputs(...) without a "
                "golden.check(outputs) after it: nothing was compared or stored; check the "
                "outputs made from those inputs with golden.check*",
                "FAILED*test_m.py::test_forgot_named_check - Failed: "
                "golden.inputs(..., name='step2') without a golden.check(outputs, name=...) "
                "after it*",
                "FAILED*test_failing_body_says_its_own_failure - ValueError: the model crashed",
            ]
        )
    written = sorted(p.name for p in _folder(pytester, "test_m").iterdir())
    assert written == ["test_checked.golden", "test_forgot_named_check.golden"]
