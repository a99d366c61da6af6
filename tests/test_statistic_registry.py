"""A statistic of one's own, defined in a test module and registered there, reaches the
result, the failure report, the pass line, the JSON report and the JUnit properties without
another file changed (ARCHITECTURE.md "A statistic": its module, its test, a line of the manual)."""

from __future__ import annotations

import json
import math
import pickle
import xml.etree.ElementTree as ElementTree

import numpy as np
import pytest

from pytest_trtcompare import Statistic, compare_outputs, register_statistic
from pytest_trtcompare.engine import statistic
from pytest_trtcompare.engine.accumulators import Verdict
from pytest_trtcompare.errors import StatisticError
from pytest_trtcompare.reports import summary

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import glob_escape, run

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
    before = list(statistic.STATISTICS), dict(statistic.DEFAULTS), dict(statistic.RECORD_KEYS)
    yield statistic.STATISTICS
    statistic.STATISTICS[:] = before[0]
    for now, then in zip((statistic.DEFAULTS, statistic.RECORD_KEYS), before[1:], strict=True):
        now.clear()
        now.update(then)


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


def test_the_engines_statistics_are_registered_as_a_users(registered):
    """One registry, built in or not; a result and its record, with every figure, survive
    pickling (xdist workers, isolated processes) and read the same."""
    assert registered[0] is Verdict and {s.when for s in registered} == {"scanned", "reported"}
    assert register_statistic(Verdict) is Verdict and registered.count(Verdict) == 1
    register_statistic(Largest)
    result = compare_outputs(np.array([1.0, 2.0]), np.array([1.0, 2.5]))
    out = pickle.loads(pickle.dumps(result.outputs["output"]))
    assert out == result.outputs["output"] and out.largest_error == 0.5 == out.max_abs_error
    (record,) = summary.records(result, "test", "compare", None, None)
    again = pickle.loads(pickle.dumps(record))
    assert again == record and again.largest_error == 0.5 == again.max_abs_error


def test_an_unknown_attribute_is_still_an_attribute_error(registered):
    out = compare_outputs(np.zeros(2), np.zeros(2)).outputs["output"]
    with pytest.raises(AttributeError, match="has no attribute 'largest_eror'"):
        _ = out.largest_eror


@pytest.mark.parametrize(
    ("figures", "message"),
    [
        ((), "Bad.figures must be a tuple of distinct names"),
        (("not a name",), "Bad.figures must be a tuple of distinct names"),
        ("rms_error", r"Bad.figures must be a tuple .* got 'rms_error'"),  # ("rms_error")
        (("a", "a"), "Bad.figures must be a tuple of distinct names"),
        (("margin",), "Bad.figures: margin already taken"),
        (("cosine",), "Bad.figures: cosine already taken"),
    ],
)
def test_mistakes_in_a_statistic_are_named(registered, figures, message):
    bad = type("Bad", (Largest,), {"figures": figures})
    with pytest.raises(StatisticError, match=message):
        register_statistic(bad)
    with pytest.raises(StatisticError, match="takes a Statistic subclass"):
        register_statistic(Largest(None))


def test_compute_that_gives_other_figures_is_named(registered):
    class Wrong(Largest):
        figures = ("wrong_name",)

    register_statistic(Wrong)
    with pytest.raises(StatisticError) as raised:
        compare_outputs({"y": np.zeros(3)}, {"y": np.ones(3)})
    assert str(raised.value) == (
        "output 'y': statistic Wrong.compute(): gave ['largest_error'], "
        "its figures are ['wrong_name']"
    )


def test_a_statistic_that_raises_is_named_with_the_output(registered):
    class Broken(Largest):
        figures = ("broken",)

        def update(self, chunk):
            raise ZeroDivisionError("division by zero")

    register_statistic(Broken)
    with pytest.raises(StatisticError) as raised:
        compare_outputs({"logits": np.zeros(3)}, {"logits": np.ones(3)})
    message = "output 'logits': statistic Broken.update(): ZeroDivisionError: division by zero"
    assert str(raised.value) == message
    assert isinstance(raised.value.__cause__, ZeroDivisionError)


@pytest.mark.parametrize("torch_path", [False, True])
def test_bit_equal_sides_feed_empty_arrays_of_the_chunks_namespace(registered, torch_path):
    """The example of docs/how-to/statistic.md sums `chunk.xp` arrays: a bit-equal chunk's
    empty arrays are of that namespace too (torch's on the torch path)."""
    torch = pytest.importorskip("torch")
    from pytest_trtcompare.engine.tuning import TUNING

    register_statistic(Largest)
    namespaces = []
    update = Largest.update

    def noted(self, chunk):
        namespaces.append((type(chunk.whole_chunk().abs_err).__module__, chunk.xp.__name__))
        update(self, chunk)

    values = torch.linspace(-1, 1, 1000)
    before = TUNING.torch
    TUNING.torch = torch_path
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Largest, "update", noted)
            result = compare_outputs(values, values.clone())
    finally:
        TUNING.torch = before
    assert result.outputs["output"].largest_error == 0.0
    library = "torch" if torch_path else "numpy"
    assert namespaces and all(
        module.split(".")[0] == library and library in name for module, name in namespaces
    )


MISTAKES = """
import numpy as np
from pytest_trtcompare import Statistic, register_statistic


@register_statistic
class SignFlips(Statistic):
    figures = ("sign_flips",)

    def update(self, chunk):
        pass

    def merge(self, other):
        pass

    def compute(self):
        return {"signflips": 0.0}


def test_compare(compare):
    compare({"y": np.zeros(4)}, {"y": np.zeros(4)})
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_a_statistic_mistake_fails_the_test_with_one_line(pytester, xdist, registered):
    pytester.makepyfile(test_mistake=MISTAKES)
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=1)
    message = (
        "StatisticError: output 'y': statistic SignFlips.compute(): gave ['signflips'], "
        "its figures are ['sign_flips']"
    )
    result.stdout.fnmatch_lines(
        [glob_escape(message), "  at test_mistake.py:20 in test_compare: *"]
    )
    assert "statistic.py" not in result.stdout.str() and "INTERNALERROR" not in result.stdout.str()
