"""Drift before failure (issue 37, item 3): --trt-baseline lists the outputs whose margin
grew toward failing since an earlier run's report, warns (pytest's last line) or fails the
session with --trt-drift=fail; `trtcompare drift OLD NEW` prints the same and exits 1; the
misuses are usage errors naming the option."""

from __future__ import annotations

import contextlib
import io
import json
import math

import pytest

from pytest_trtcompare.cli import main as cli
from pytest_trtcompare.reports.drift import drift
from pytest_trtcompare.reports.summary import Record

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run

SUITE = """
import os
import numpy as np

SCALE = float(os.environ.get("SCALE", "1"))

def test_a(compare):
    compare({"y": np.ones(4)}, {"y": np.ones(4) + 1e-6 * SCALE}, atol=1e-5, rtol=1e-5)

def test_b(compare):
    compare({"z": np.ones(4)}, {"z": np.ones(4) + 1e-7}, atol=1e-5, rtol=1e-5)

def test_c(compare):
    if os.environ.get("WITH_C"):
        compare({"w": np.ones(4)}, {"w": np.ones(4)})
"""


def _record(test: str, output: str, margin: float) -> Record:
    return Record(
        test=test,
        output=output,
        passed=margin <= 1,
        margin=margin,
        check="elemwise",
        atol=1e-5,
        rtol=1e-5,
        source="compare",
        nodeid=f"t.py::{test}",
    )


@pytest.mark.parametrize(
    ("before", "now", "why"),
    [
        (0.1, 0.6, "crossed 0.5"),
        (0.1, 0.25, "grew 2.5x"),
        (0.4, 1.5, "now fails"),
        (0.2, math.inf, "now fails"),
        (0.1, 0.19, ""),  # 1.9x: under the ratio
        (0.0, 0.01, ""),  # an exact output that gains a rounding error under 2 x the floor
        (0.0, 0.019, ""),
        (0.0, 0.02, "grew from 0"),  # 2 x the floor 0.01: the ratio from the floor
        (0.0, 0.408, "grew from 0"),  # a golden of y = x * a, then a = 2.000008 (issue 45)
        (0.004, 0.03, "grew from under 0.01"),
        (0.004, 0.015, ""),
        (0.0, 0.7, "crossed 0.5"),
        (0.6, 0.9, ""),  # above the limit already, not twice
        (0.3, 0.1, ""),
        (math.nan, 0.9, ""),
        (1.5, 3.0, "grew 2x"),  # failing before and now, twice as far
    ],
)
def test_the_drift_rule(before, now, why):
    found = drift({("t.py::test_x", "y"): before}, [_record("test_x", "y", now)])
    assert [d.why for d in found.drifted] == ([why] if why else [])
    assert (found.compared, found.new, found.gone) == (1, [], [])


def test_new_and_gone_outputs_are_listed_apart():
    baseline = {("t.py::test_x", "y"): 0.1, ("t.py::test_old", "y"): 0.1}
    found = drift(baseline, [_record("test_x", "y", 0.1), _record("test_new", "y", 0.9)])
    assert found.new == [("t.py::test_new", "y")] and found.gone == [("t.py::test_old", "y")]
    assert not found


@pytest.mark.parametrize("xdist", XDIST)
def test_a_baseline_shows_drift_and_fails_the_session_only_when_asked(pytester, xdist, monkeypatch):
    pytester.makepyfile(test_d=SUITE)
    run(pytester, "--trt-report=old.json", *xdist).assert_outcomes(passed=3)
    monkeypatch.setenv("SCALE", "6")
    monkeypatch.setenv("WITH_C", "1")
    result = run(pytester, "-v", "--trt-baseline=old.json", "--trt-report=new.json", *xdist)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*= drift =*",
            "against old.json: 1 of 2 outputs drifted, 1 new",
            "before  now  why          test :: output",
            "0.1     0.6  crossed 0.5  test_d.py::test_a :: y",
            "  new: test_d.py::test_c :: w",
            "*3 passed, 1 drifted (--trt-baseline)*",
        ]
    )
    records = json.loads((pytester.path / "new.json").read_text())["outputs"]
    margins = {r["output"]: (r["margin"], r["baseline_margin"]) for r in records}
    assert margins["y"][1] == pytest.approx(0.1, rel=1e-5) and margins["w"][1] is None
    result = run(pytester, "--trt-baseline=old.json", "--trt-drift=fail", *xdist)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["drift fails the session (--trt-drift=fail): exit status 1"])
    looser = ("--trt-drift-margin=0.7", "--trt-drift-ratio=10")  # 0.1 -> 0.6: 6x, under 0.7
    result = run(pytester, "--trt-baseline=old.json", *looser, *xdist)
    assert result.ret == 0 and "0 of 2 outputs drifted" in result.stdout.str()


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (
            ["--trt-baseline=nowhere.json"],
            "",
            "--trt-baseline=nowhere.json: *nowhere.json: cannot read (No such file or directory)",
        ),
        (
            ["--trt-baseline=notes.txt"],
            "",
            "--trt-baseline=notes.txt: *notes.txt: not a JSON report of pytest-trtcompare (*)",
        ),
        (
            ["--trt-baseline=old_format.json"],
            "",
            "--trt-baseline=old_format.json: *: report format 1 (pytest-trtcompare 0.1.0); *",
        ),
        (
            ["--trt-baseline=old.json", "--trt-drift-ratio=fast"],
            "",
            "--trt-drift-ratio=fast: takes a number above 1, not 'fast'",
        ),
        (
            ["--trt-baseline=old.json", "--trt-drift-margin=-1"],
            "",
            "--trt-drift-margin=-1: takes a number above 0, not '-1'",
        ),
        (
            ["--trt-baseline=old.json"],
            "trtcompare_drift = maybe",
            "ini trtcompare_drift = 'maybe': takes warn or fail",
        ),
        (
            ["--trt-drift=fail"],
            "",
            "--trt-drift: needs --trt-baseline=REPORT.json (or ini trtcompare_baseline), the "
            "report to compare with",
        ),
        (
            ["--trt-drift-margin=abc"],
            "",
            "--trt-drift-margin=abc: takes a number above 0, not 'abc'",
        ),
        (
            [],
            "trtcompare_baseline = gone.json",
            "ini trtcompare_baseline: *gone.json: cannot read (No such file or directory)",
        ),
    ],
)
def test_a_baseline_that_cannot_be_read_is_a_usage_error(pytester, args, ini, message):
    pytester.makepyfile(test_d=SUITE)
    run(pytester, "--trt-report=old.json").assert_outcomes(passed=3)
    (pytester.path / "notes.txt").write_text("not a report")
    old = json.loads((pytester.path / "old.json").read_text())
    old.pop("report_format")
    (pytester.path / "old_format.json").write_text(json.dumps({**old, "plugin_version": "0.1.0"}))
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stderr.str()


def test_a_baseline_merged_from_shards_reads_as_the_unsharded_run(pytester, monkeypatch):
    """Shards of pytest-split, merged by `trtcompare merge`, are one baseline; a report of
    a sharded run judged against the whole run's is one too."""
    pytester.makepyfile(test_d=SUITE)
    for group in (1, 2, 3):
        shard = ("--splits", "3", "--group", str(group), f"--trt-report=s{group}.json")
        run(pytester, *shard).assert_outcomes(passed=1)
    monkeypatch.chdir(pytester.path)
    assert _cli("merge", "s1.json", "s2.json", "s3.json", "-o", "old.json")[0] == 0
    monkeypatch.setenv("SCALE", "6")
    result = run(pytester, "--trt-baseline=old.json", "-n", "2")
    result.stdout.fnmatch_lines(
        [
            "against old.json: 1 of 2 outputs drifted",
            "0.1     0.6  crossed 0.5  test_d.py::test_a :: y",
        ]
    )
    for group in (1, 2, 3):
        shard = ("--splits", "3", "--group", str(group), f"--trt-report=n{group}.json")
        run(pytester, *shard).assert_outcomes(passed=1)
    assert _cli("merge", "n1.json", "n2.json", "n3.json", "-o", "new.json")[0] == 0
    code, out, _ = _cli("drift", "old.json", "new.json")
    assert code == 1 and "0.1     0.6  crossed 0.5  test_d.py::test_a :: y" in out


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(list(args))
    return code, out.getvalue(), err.getvalue()


def test_trtcompare_drift_prints_the_table_and_exits_1_on_drift(pytester, monkeypatch):
    pytester.makepyfile(test_d=SUITE)
    run(pytester, "--trt-report=old.json").assert_outcomes(passed=3)
    run(pytester, "--trt-report=same.json").assert_outcomes(passed=3)
    monkeypatch.setenv("SCALE", "6")
    run(pytester, "--trt-report=new.json").assert_outcomes(passed=3)
    monkeypatch.chdir(pytester.path)
    code, out, _ = _cli("drift", "old.json", "new.json")
    assert code == 1
    assert out.splitlines() == [
        "against old.json: 1 of 2 outputs drifted",
        "before  now  why          test :: output",
        "0.1     0.6  crossed 0.5  test_d.py::test_a :: y",
    ]
    assert _cli("drift", "old.json", "same.json")[:2] == (
        0,
        "against old.json: 0 of 2 outputs drifted\n",
    )
    assert _cli("drift", "old.json", "new.json", "--margin", "0.7", "--ratio", "10")[0] == 0
    code, _, err = _cli("drift", "old.json", "missing.json")
    assert code == 2 and err.startswith("trtcompare: missing.json: cannot read")


def test_a_narrow_terminal_puts_each_name_whole_on_its_line():
    from pytest_trtcompare.reports.drift import Drift, Drifted, drift_lines

    key = ("test_calib.py::test_resnet_calib[onnxrt-fp16-bs2]", "logits")
    found = Drift(drifted=[Drifted(key, 0.451, 0.89, "crossed 0.5")], compared=4)
    lines = drift_lines(found, "base.json", width=50)
    assert lines == [
        "against base.json: 1 of 4 outputs drifted",
        "test :: output",
        "    before  now   why",
        "test_calib.py::test_resnet_calib[onnxrt-fp16-bs2] :: logits",
        "    0.451   0.89  crossed 0.5",
    ]
