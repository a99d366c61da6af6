"""shape_check="relaxed" (issue 26), Polygraphy's --no-shape-check: shapes equal once their
dimensions of size 1 are removed compare as the squeezed arrays, with a note; opt-in."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_trtcompare import OutputMismatchError, assert_outputs_close, compare_outputs
from pytest_trtcompare.errors import ToleranceError

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run

VALUES = np.arange(12, dtype=np.float32).reshape(3, 4)


def test_strict_by_default():
    result = compare_outputs({"y": VALUES[None]}, {"y": VALUES})
    assert not result.passed
    assert result.outputs["y"].problem == "shape (1, 3, 4) differs from expected shape (3, 4)"


def test_relaxed_compares_squeezed_shapes_with_a_note():
    result = compare_outputs({"y": VALUES[None]}, {"y": VALUES}, shape_check="relaxed")
    assert result.passed
    out = result.outputs["y"]
    assert out.shape_note == "compared after squeezing actual (1, 3, 4) to (3, 4)"
    assert out.count == 12 and out.shape == (1, 3, 4) and out.expected_shape == (3, 4)
    assert (
        "passed: y (float32 vs float32, shape (1, 3, 4), compared after squeezing actual "
        "(1, 3, 4) to (3, 4)): max abs 0" in result.report()
    )


def test_relaxed_names_each_side_it_squeezed_and_reports_indices_of_the_squeezed_shape():
    actual = VALUES[:, None, :].copy()
    actual[2, 0, 3] += 1
    with pytest.raises(OutputMismatchError) as caught:
        assert_outputs_close({"y": actual}, {"y": VALUES[None]}, shape_check="relaxed")
    text = str(caught.value)
    assert "compared after squeezing actual (3, 1, 4) and expected (1, 3, 4) to (3, 4)" in text
    assert "greatest abs error 1 at (2, 3)" in text


@pytest.mark.parametrize(
    ("actual", "expected"), [((3, 4), (4, 3)), ((1, 12), (3, 4)), ((3, 4), (3, 4, 2))]
)
def test_relaxed_still_fails_shapes_that_differ_after_squeezing(actual, expected):
    a, e = np.zeros(actual, np.float32), np.zeros(expected, np.float32)
    result = compare_outputs({"y": a}, {"y": e}, shape_check="relaxed")
    assert not result.passed
    assert result.outputs["y"].problem == f"shape {actual} differs from expected shape {expected}"


@pytest.mark.parametrize("value", ["loose", None, True])
def test_a_bad_value_names_the_argument(value):
    with pytest.raises(ToleranceError, match=r"shape_check=.*: takes 'strict' or 'relaxed'"):
        compare_outputs({"y": VALUES}, {"y": VALUES}, shape_check=value)


FIXTURE_TESTS = """
import numpy as np

VALUES = np.arange(12, dtype=np.float32).reshape(3, 4)

def test_fixture_relaxed(compare):
    compare({"y": VALUES[None]}, {"y": VALUES}, shape_check="relaxed")

def test_fixture_default(compare):
    compare({"y": VALUES[None]}, {"y": VALUES})

def test_fixture_relaxed_values_differ(compare):
    compare({"y": VALUES[None] + 1}, {"y": VALUES}, shape_check="relaxed")

def test_fixture_bad_value(compare):
    compare({"y": VALUES}, {"y": VALUES}, shape_check="loose")

def test_golden_relaxed(golden):
    golden.check({"y": VALUES[None]}, shape_check="relaxed")
"""


def _outcomes(result: pytest.RunResult) -> dict[str, str]:
    found = {}
    for line in result.outlines:
        for word in ("PASSED", "FAILED", "ERROR"):
            if f" {word}" in line or line.startswith(word):
                name = next((p for p in line.split() if "::" in p), "")
                found[name.split("::")[-1]] = word
    return found


@pytest.mark.parametrize("xdist", XDIST)
def test_the_fixtures_take_shape_check(pytester, xdist):
    pytester.makepyfile(test_shapes=FIXTURE_TESTS)
    pytester.makepyfile(
        make_golden="import numpy as np\n\ndef test_golden_relaxed(golden):\n"
        "    golden.check({'y': np.arange(12, dtype=np.float32).reshape(3, 4)})\n"
    )
    written = run(pytester, "make_golden.py", "--trt-goldens-dir=g", "--trt-update-goldens")
    written.assert_outcomes(passed=1)
    (pytester.path / "g" / "make_golden").rename(pytester.path / "g" / "test_shapes")
    result = run(pytester, "test_shapes.py", "--trt-goldens-dir=g", "-rA", *xdist)
    result.assert_outcomes(passed=2, failed=3)
    assert _outcomes(result) == {
        "test_fixture_relaxed": "PASSED",
        "test_fixture_default": "FAILED",
        "test_fixture_relaxed_values_differ": "FAILED",
        "test_fixture_bad_value": "FAILED",
        "test_golden_relaxed": "PASSED",
    }
    text = result.stdout.str()
    assert "y (float32 vs float32): shape (1, 3, 4) differs from expected shape (3, 4)" in text
    assert (
        "y (float32 vs float32, shape (1, 3, 4), compared after squeezing actual (1, 3, 4) to "
        "(3, 4)): 12 / 12 elements (100%) exceed" in text
    )
    assert "shape_check='loose': takes 'strict' or 'relaxed'" in text
    assert "INTERNALERROR" not in text and "Traceback" not in text


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize(
    "how", [["--trt-shape-check=relaxed"], ["-o", "trtcompare_shape_check=relaxed"]]
)
def test_option_and_ini_relax_every_comparison(pytester, xdist, how):
    pytester.makepyfile(test_shapes=FIXTURE_TESTS)
    result = run(pytester, "-k", "default", *how, *xdist)
    result.assert_outcomes(passed=1)


@pytest.mark.parametrize("xdist", XDIST)
def test_a_call_wins_over_the_option(pytester, xdist):
    pytester.makepyfile(
        "import numpy as np\n\ndef test_strict(compare):\n"
        "    compare({'y': np.ones((1, 3))}, {'y': np.ones(3)}, shape_check='strict')\n"
    )
    result = run(pytester, "--trt-shape-check=relaxed", *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*y (float64 vs float64): shape (1, 3) differs*"])


@pytest.mark.parametrize(
    ("how", "message"),
    [
        (
            ["--trt-shape-check=loose"],
            "*argument --trt-shape-check: invalid choice: 'loose' (choose from *strict*relaxed*)",
        ),
        (
            ["-o", "trtcompare_shape_check=loose"],
            "ERROR: ini trtcompare_shape_check = 'loose': takes strict or relaxed",
        ),
    ],
)
def test_a_bad_option_or_ini_value_is_a_usage_error(pytester, how, message):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest(*how)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


MARKER_TESTS = """
import pytest

SPECS = {"callable": {"input_specs": {"x": ("float32", (3,))}}}

@pytest.mark.compare_frameworks(
    frameworks=["callable:helpers:batched", "callable:helpers:flat"],
    reference="callable:helpers:flat", options=SPECS, shape_check="relaxed")
def test_relaxed(comparison):
    assert comparison.outputs["y"].shape_note == "compared after squeezing actual (1, 3) to (3,)"

@pytest.mark.compare_frameworks(
    frameworks=["callable:helpers:batched", "callable:helpers:flat"],
    reference="callable:helpers:flat", options=SPECS)
def test_strict(comparison):
    pass
"""

BAD_MARKER = """
import pytest

@pytest.mark.compare_frameworks(frameworks=["callable:helpers:flat"], shape_check="squeeze")
def test_bad(comparison):
    pass
"""

HELPERS = """
def flat(feed, precision="fp32"):
    return {"y": feed["x"] * 2}

def batched(feed, precision="fp32"):
    return {"y": (feed["x"] * 2)[None]}
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_the_marker_takes_shape_check(pytester, xdist):
    pytester.makepyfile(helpers=HELPERS, test_marker=MARKER_TESTS, test_bad=BAD_MARKER)
    pytester.syspathinsert()
    result = run(pytester, "test_marker.py", "-rA", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*y (float32 vs float32): shape (1, 3) differs from*"])
    bad = run(pytester, "test_bad.py", *xdist)
    bad.assert_outcomes(errors=1)  # the test's error at setup
    bad.stdout.fnmatch_lines(
        [
            "*test_bad*@pytest.mark.compare_frameworks(shape_check=...) got 'squeeze' (str); "
            "it takes 'strict' or 'relaxed'*",
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str() + bad.stdout.str()
