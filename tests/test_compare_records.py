"""Where the `compare` fixture's records land: the accuracy summary, the JSON report and
JUnit, each record once and on its own test, however the test makes it."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from .pytester_helpers import XDIST, XDIST_SLOW, run


def _report(pytester: pytest.Pytester) -> list[tuple[str, str, bool]]:
    data = json.loads((pytester.path / "report.json").read_text())
    return sorted((r["test"], r["output"], r["passed"]) for r in data["outputs"])


@pytest.mark.parametrize("xdist", XDIST)
def test_each_record_once_from_teardown_and_a_second_call(pytester, xdist):
    """A compare in a fixture's teardown reaches the summary and the JSON report (the test
    errors at teardown); a second call of the same output is `<output>#2` everywhere, as in
    JUnit."""
    pytester.makepyfile(
        """
        import numpy as np
        import pytest

        @pytest.fixture
        def checked_after(compare):
            yield
            compare({"after": np.ones(4)}, {"after": np.full(4, 2.0)})

        def test_teardown(checked_after):
            pass

        def test_twice(compare):
            compare({"y": np.ones(4)}, {"y": np.ones(4)})
            compare({"y": np.ones(4)}, {"y": np.full(4, 1.5)})
        """
    )
    result = run(pytester, "--trt-report=report.json", "--junitxml=out.xml", *xdist)
    outcomes = result.parseoutcomes()
    assert (outcomes["passed"], outcomes["failed"], outcomes["errors"]) == (1, 1, 1)
    result.stdout.fnmatch_lines(
        [
            "*accuracy summary*",
            "*FAIL*test_teardown :: after*",
            "*FAIL*test_twice :: y#2*",
        ]
    )
    rows = [line for line in result.stdout.lines if " :: " in line and "test_" in line]
    assert len(rows) == 3, rows
    assert _report(pytester) == [
        ("test_teardown", "after", False),
        ("test_twice", "y", True),
        ("test_twice", "y#2", False),
    ]
    xml = (pytester.path / "out.xml").read_text()
    teardown = xml.split('name="test_teardown"', 1)[1].split("</testcase>", 1)[0]
    assert 'name="trtcompare.after.passed" value="false"' in teardown
    twice = xml.split('name="test_twice"', 1)[1].split("</testcase>", 1)[0]
    assert 'name="trtcompare.y#2.passed" value="false"' in twice


@pytest.mark.skipif(
    int(pytest.__version__.split(".")[0]) < 9, reason="pytest's own subtests came in pytest 9.0"
)
@pytest.mark.parametrize("xdist", XDIST)
def test_each_record_once_from_subtests(pytester, xdist):
    """The reports of pytest's subtests do not repeat the records before them."""
    pytester.makepyfile(
        """
        import numpy as np

        def test_subtests(compare, subtests):
            for i in range(3):
                with subtests.test(i=i):
                    compare({f"s{i}": np.ones(4)}, {f"s{i}": np.ones(4)})
        """
    )
    result = run(pytester, "--trt-report=report.json", *xdist)
    assert result.parseoutcomes()["passed"] == 1
    rows = [line for line in result.stdout.lines if " :: " in line and "test_" in line]
    assert len(rows) == 3, rows
    assert _report(pytester) == [
        ("test_subtests", "s0", True),
        ("test_subtests", "s1", True),
        ("test_subtests", "s2", True),
    ]


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_a_compare_kept_from_an_ended_test_is_refused(pytester, xdist):
    """A `compare` fixture kept past its test's teardown would record on no test: calling
    it fails the test that does, with one message naming the test it belonged to."""
    pytester.makepyfile(
        """
        import numpy as np

        KEPT = {}

        def test_keeps(compare):
            KEPT["compare"] = compare

        def test_uses_the_kept_one():
            KEPT["compare"]({"y": np.ones(3)}, {"y": np.ones(3)})
        """
    )
    result = run(pytester, "-p", "no:randomly", *xdist, *(["--dist", "loadfile"] if xdist else []))
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*TrtCompareError: compare: this fixture belongs to*",
            "*at test_a_compare_kept_from_an_ended_test_is_refused.py:9 in test_uses_the_kept_one*",
        ]
    )
    text = " ".join(result.stdout.str().split())
    assert "test_keeps, which has ended; ask for `compare` in the test that calls it" in text
    assert "pytest_trtcompare/" not in result.stdout.str()


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_records_of_tests_of_the_same_name_in_two_files_carry_their_node_ids(pytester, xdist):
    """The JSON report's `test` is the test's name within its file (the summary's); its
    `nodeid` tells two files' tests of the same name apart."""
    same = textwrap.dedent(
        """
        import numpy as np

        def test_same(compare):
            compare({"o": np.ones(2)}, {"o": EXPECTED})
        """
    )
    (pytester.path / "test_one.py").write_text(same.replace("EXPECTED", "np.ones(2)"))
    (pytester.path / "sub").mkdir()
    (pytester.path / "sub" / "test_two.py").write_text(same.replace("EXPECTED", "np.zeros(2)"))
    result = run(pytester, "--trt-report=report.json", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    data = json.loads((pytester.path / "report.json").read_text())
    found = sorted((r["nodeid"], r["test"], r["passed"]) for r in data["outputs"])
    assert found == [
        ("sub/test_two.py::test_same", "test_same", False),
        ("test_one.py::test_same", "test_same", True),
    ]


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_failing_outputs_of_an_xfailed_test_count_apart(pytester, xdist):
    """An expected failure (xfail) that failed shows its failing outputs as `xfail`, not
    `FAIL`, and the totals count them apart; an xpassed test's outputs are `ok`; the JSON
    report says `xfailed`."""
    pytester.makepyfile(
        """
        import numpy as np
        import pytest

        @pytest.mark.xfail(reason="expected drift")
        def test_expected(compare):
            compare({"drift": np.ones(2)}, {"drift": np.full(2, 2.0)})

        @pytest.mark.xfail(reason="fixed since")
        def test_fixed(compare):
            compare({"fine": np.ones(2)}, {"fine": np.ones(2)})

        def test_real(compare):
            compare({"real": np.ones(2)}, {"real": np.full(2, 3.0)})
        """
    )
    quiet = run(pytester, "-q", "--trt-report=report.json", *xdist)
    quiet.assert_outcomes(failed=1, xfailed=1, xpassed=1)
    quiet.stdout.fnmatch_lines(
        [
            "*FAIL  test_real :: real*",
            "3 outputs: 1 failing, 1 within tolerance, 1 failing in xfailed tests",
        ]
    )
    data = json.loads((pytester.path / "report.json").read_text())
    assert sorted((r["output"], r["passed"], r["xfailed"]) for r in data["outputs"]) == [
        ("drift", False, True),
        ("fine", True, False),
        ("real", False, False),
    ]
    rows = run(pytester, *xdist).stdout.lines
    assert any(re.match(r"\S+ +xfail +test_expected :: drift", line) for line in rows), rows
    assert any(re.match(r"\S+ +ok +test_fixed :: fine", line) for line in rows), rows
