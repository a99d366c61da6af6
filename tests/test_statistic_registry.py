"""A statistic of one's own, defined in a test module and registered there, reaches the
result, the failure report, the pass line, the JSON report and the JUnit properties without
another file changed (ARCHITECTURE.md "A statistic": its module, its test, a README line)."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest

from pytest_trtcompare import Statistic, compare_outputs, register_statistic
from pytest_trtcompare.engine import statistic

from .pytester_helpers import XDIST, run

#: The test module a user writes: the statistic, registered at import, and two tests.
USER_MODULE = """
import math

import numpy as np
from pytest_trtcompare import Statistic, register_statistic


@register_statistic
class RmsError(Statistic):
    figures = ("rms_error",)

    def __init__(self, tolerance):
        super().__init__(tolerance)
        self.squares, self.count = 0.0, 0

    def update(self, chunk):
        errors = chunk.whole_chunk().abs_err
        self.squares += float(chunk.xp.sum(errors * errors))
        self.count += chunk.compared

    def merge(self, other):
        self.squares += other.squares
        self.count += other.count

    def compute(self):
        return {"rms_error": math.sqrt(self.squares / self.count) if self.count else 0.0}


EXPECTED = np.linspace(-1, 1, 1000, dtype=np.float32)


def test_passes(compare):
    result = compare({"y": EXPECTED + 0.001}, {"y": EXPECTED}, atol=1e-2)
    assert abs(result.outputs["y"].rms_error - 0.001) < 1e-6


def test_fails(compare):
    actual = EXPECTED.copy()
    actual[:10] += 0.5
    compare({"y": actual}, {"y": EXPECTED}, atol=1e-2, rtol=1e-2)
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_a_statistic_defined_in_a_test_module_is_everywhere(pytester, xdist, registered):
    pytester.makepyfile(test_user=USER_MODULE)
    result = run(pytester, "--trt-report=report.json", "--junitxml=junit.xml", "-rA", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    rms = math.sqrt(10 * 0.5**2 / 1000)  # the failing test's: ten errors of 0.5
    result.stdout.fnmatch_lines(
        [
            "*y (float32 vs float32, shape (1000,)): 10 / 1000 elements (1%) exceed*",
            f"*  rms_error {rms:.4g}",
        ]
    )
    outputs = json.loads((pytester.path / "report.json").read_text())["outputs"]
    by_test = {record["test"]: record for record in outputs}
    assert by_test["test_fails"]["statistics"]["rms_error"] == pytest.approx(rms, rel=1e-6)
    assert by_test["test_passes"]["statistics"]["rms_error"] == pytest.approx(1e-3, rel=1e-3)
    junit = ElementTree.parse(pytester.path / "junit.xml")
    properties = {
        (case.get("name"), prop.get("name")): prop.get("value")
        for case in junit.iter("testcase")
        for prop in case.iter("property")
    }
    assert float(properties["test_fails", "trtcompare.y.rms_error"]) == pytest.approx(rms)


@pytest.fixture
def registered():
    """The registry, as it was again after the test (a pytester run in this process
    registers its module's statistic here too)."""
    before = list(statistic.STATISTICS)
    yield statistic.STATISTICS
    statistic.STATISTICS[:] = before


class Largest(Statistic):
    figures = ("largest_error",)

    def __init__(self, tolerance):
        super().__init__(tolerance)
        self.value = 0.0

    def update(self, chunk):
        errors = chunk.whole_chunk().abs_err
        if errors.shape[0]:
            self.value = max(self.value, float(chunk.xp.max(errors)))

    def merge(self, other):
        self.value = max(self.value, other.value)

    def compute(self):
        return {"largest_error": self.value}


def test_figures_are_result_attributes_and_on_the_pass_line(registered):
    register_statistic(Largest)
    register_statistic(Largest)  # again: once
    assert registered.count(Largest) == 1
    result = compare_outputs(np.array([1.0, 2.0]), np.array([1.0, 2.5]), atol=1)
    out = result.outputs["output"]
    assert out.largest_error == 0.5 == out.max_abs_error
    assert result.report().endswith("largest_error 0.5, margin 0.5")


def test_an_unknown_attribute_is_still_an_attribute_error(registered):
    out = compare_outputs(np.zeros(2), np.zeros(2)).outputs["output"]
    with pytest.raises(AttributeError, match="has no attribute 'largest_eror'"):
        _ = out.largest_eror


@pytest.mark.parametrize(
    ("figures", "message"),
    [
        ((), "Bad.figures must name its figures"),
        (("not a name",), "Bad.figures must name its figures"),
        (("margin",), "Bad.figures: margin already taken"),
        (("cosine",), "Bad.figures: cosine already taken"),
    ],
)
def test_mistakes_in_a_statistic_are_named(registered, figures, message):
    bad = type("Bad", (Largest,), {"figures": figures})
    with pytest.raises(TypeError, match=message):
        register_statistic(bad)
    with pytest.raises(TypeError, match="takes a Statistic subclass"):
        register_statistic(Largest(None))


def test_compute_that_gives_other_figures_is_named(registered):
    class Wrong(Largest):
        figures = ("wrong_name",)

    register_statistic(Wrong)
    with pytest.raises(TypeError, match=r"Wrong.compute\(\) gave \['largest_error'\]"):
        compare_outputs(np.zeros(3), np.ones(3))
