"""Calibrated tolerances (issue 37, item 2): --trt-calibrate=N runs every compare_frameworks
case on N input draws, writes the suggestions to the tolerance file and prints the session-end
table; later runs read the file as the tolerance source `calibrated`; the misuses are usage
errors or warnings naming the option, the file, the test or the output."""

from __future__ import annotations

import contextlib
import datetime
import io
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from pytest_trtcompare import compare_outputs
from pytest_trtcompare.cli import main as cli
from pytest_trtcompare.errors import ToleranceError
from pytest_trtcompare.reports.calibration import (
    Calibration,
    Entry,
    Observed,
    observed_of_results,
    read_calibration,
    round_up,
    suggest,
    to_toml,
)

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import glob_escape, run
from .test_compare_frameworks import CONFTEST

TODAY = datetime.date.today().isoformat()

SUITE = """
import numpy as np
import pytest

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt", "onnxref"])
@pytest.mark.shapes({"x": (4, 8)})
def test_model():
    pass

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt", "onnxref"],
                            tolerance={"atol": 0.5, "rtol": 0.0})
@pytest.mark.shapes({"x": (2, 8)})
def test_marked():
    pass

def test_by_hand(compare):
    compare({"z": np.ones(3)}, {"z": np.ones(3) + 1e-7})
"""

MODEL_ID = "test_cal.py::test_model[onnxref-fp16-bs4]"
MARKED_ID = "test_cal.py::test_marked[onnxref-fp16-bs2]"


@pytest.mark.parametrize(
    ("value", "rounded"),
    [
        (0.00246, 0.0025),
        (0.0025, 0.0025),
        (0.002501, 0.0026),
        (1.0, 1.0),
        (123.4, 130.0),
        (9.91, 10.0),
        (0.0, 0.0),
        (3e-9, 3e-9),
        (2 * 0.0003, 0.0006),  # 0.0006000000000000001: binary's rounding is not a step up
    ],
)
def test_round_up_to_two_significant_digits(value, rounded):
    assert round_up(value) == rounded


def test_the_suggestion_is_twice_the_worst_abs_error_rounded_up_and_no_rtol():
    worst = Observed()
    worst.add(0.0004, 0.3)
    worst.add(0.00123, 18.0)  # a near-zero element's relative error: shown, not suggested
    made = suggest({("t.py::test_x", "y"): worst}, "2 seeds")
    assert made.entries[("t.py::test_x", "y")].bounds() == {"atol": 0.0025, "rtol": 0.0}
    assert worst.draws == 2 and worst.rel_error == 18.0


def test_the_worst_error_is_the_checked_statistics():
    expected = {"y": np.zeros(100, dtype=np.float32)}
    actual = {"y": np.r_[np.full(99, 0.001), 0.5].astype(np.float32)}
    elementwise = compare_outputs(actual, expected, atol=1, rtol=1)
    mean = compare_outputs(actual, expected, atol=1, rtol=1, check="mean")
    assert observed_of_results([elementwise])["y"].abs_error == pytest.approx(0.5)
    assert observed_of_results([mean])["y"].abs_error == pytest.approx(0.00599, rel=1e-3)
    both = observed_of_results([mean, mean])["y"]
    assert both.draws == 2 and both.margin == pytest.approx(0.00599, rel=1e-3)


def test_an_output_with_nan_or_missing_is_not_calibrated():
    nan = compare_outputs({"y": np.array([np.nan, 1.0])}, {"y": np.array([0.0, 1.0])})
    assert observed_of_results([nan])["y"].problem == "NaN in actual at 1 position, first (0,)"
    missing = compare_outputs({}, {"y": np.ones(2)})
    assert observed_of_results([missing])["y"].problem == "output 'y' missing"
    observed = {("t.py::x", name): worst for name, worst in observed_of_results([nan]).items()}
    assert suggest(observed, "1 seed").entries == {}


def test_the_file_reads_back_what_it_wrote_and_keeps_earlier_entries_with_their_dates(tmp_path):
    earlier = Calibration(
        {
            ('t.py::test_a[x"y]', "out.0"): Entry(0.001, 0.0, "5 seeds", "2026-01-02"),
            ("t.py::test_b", "y"): Entry(0.25, 0.01, "5 seeds", "2026-01-02"),
        },
        made_from="5 seeds",
        date="2026-01-02",
    )
    worst = Observed()
    worst.add(0.01, 0.1)
    made = suggest({("t.py::test_b", "z"): worst}, "3 seeds", earlier=earlier)
    path = tmp_path / "t.toml"
    path.write_text(to_toml(made, "pytest --trt-calibrate=3"))
    again = read_calibration(path)
    assert again.entries == {
        ('t.py::test_a[x"y]', "out.0"): Entry(0.001, 0.0, "5 seeds", "2026-01-02"),
        ("t.py::test_b", "z"): Entry(0.02, 0.0, "3 seeds", TODAY),  # test_b's y: gone
    }
    assert again.entries[("t.py::test_b", "z")].source == f"calibrated (3 seeds, {TODAY})"
    text = path.read_text()
    assert 'made_from = "5 seeds"\ndate = "2026-01-02"' in text  # the kept entry's own
    assert text.index("test_a") < text.index("test_b")  # sorted: a change reads as a diff


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[calibration\n", "not TOML ("),
        (
            '["t.py::x".y]\natol = 1\nrtol = 0\n',
            "no [calibration] table with made_from, date, factor",
        ),
        (
            '[calibration]\nmade_from = "1 seed"\n["t.py::x".y]\natol = 1\n',
            '["t.py::x"."y"] needs atol and rtol',
        ),
        (
            '[calibration]\nmade_from = "1 seed"\n["t.py::x".y]\natol = 1\nrtol = 0\natl = 2\n',
            '["t.py::x"."y"] has [\'atl\'] (it takes atol, rtol)',
        ),
        (
            '[calibration]\nmade_from = "1 seed"\n["t.py::x".y]\natol = -1\nrtol = 0\n',
            '["t.py::x"."y"] atol = -1 is not a number >= 0',
        ),
        (
            '[calibration]\nmade_from = "1 seed"\n["t.py::x".y]\natol = "big"\nrtol = 0\n',
            '["t.py::x"."y"] atol = \'big\' is not a number >= 0',
        ),
        (
            '"t.py::x" = 3\n[calibration]\nmade_from = "1 seed"\n',
            "'t.py::x' is not a table of outputs",
        ),
    ],
)
def test_a_damaged_file_is_named_with_what_is_wrong(tmp_path, text, message):
    path = tmp_path / "t.toml"
    path.write_text(text)
    with pytest.raises(ToleranceError) as info:
        read_calibration(path)
    assert str(info.value).startswith(f"{path}: {message}")


def _file(pytester: pytest.Pytester) -> dict[str, dict[str, float]]:
    entries = read_calibration(pytester.path / "trtcompare-tolerances.toml").entries
    return {f"{test} :: {output}": entry.bounds() for (test, output), entry in entries.items()}


@pytest.mark.parametrize("xdist", XDIST)
def test_calibrate_writes_the_file_and_later_runs_read_it(pytester, xdist):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cal=SUITE)
    args = ("--trt-precision=fp16", "-p", "no:randomly", *xdist)
    result = run(pytester, "--trt-calibrate=4", "--junitxml=cal.xml", *args)
    assert result.ret == 0
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "*= calibration =*",
            "written trtcompare-tolerances.toml: 2 outputs of 2 tests; atol = 2x the worst abs "
            "error, rounded up to 2 digits; rtol 0",
            "worst abs / rel*suggested atol*current atol / rtol*headroom*",
            "*0.01 / 0.01 (default)*test_model*",
            "*0.5 / 0 (marker)*test_marked*",
            "1 output keeps a tolerance given above the file (marker, call, command line, golden):"
            " their suggestion is written, not applied",
        ]
    )
    written = _file(pytester)
    assert sorted(written) == [f"{MARKED_ID} :: y", f"{MODEL_ID} :: y"]  # not the compare test
    atol = written[f"{MODEL_ID} :: y"]["atol"]
    assert 0 < atol < 0.01 and written[f"{MODEL_ID} :: y"]["rtol"] == 0
    properties = {
        case.get("name"): json.loads(prop.get("value"))
        for case in ET.parse(pytester.path / "cal.xml").iter("testcase")
        for prop in case.iter("property")
        if prop.get("name") == "trtcompare-calibration"
    }
    assert properties["test_model[onnxref-fp16-bs4]"]["y"]["draws"] == 4  # 4 input draws
    result = run(pytester, "-v", "--trt-report=r.json", *args)
    assert result.ret == 0
    result.stdout.fnmatch_lines([f"*(calibrated (4 seeds, {TODAY}))*"])
    records = {
        r["nodeid"]: r for r in json.loads((pytester.path / "r.json").read_text())["outputs"]
    }
    model = records[MODEL_ID]
    assert (model["atol"], model["rtol"]) == (atol, 0.0)
    assert model["tolerance_sources"]["atol"] == f"calibrated (4 seeds, {TODAY})"
    assert records[MARKED_ID]["tolerance_sources"]["atol"] == "marker"  # above the file
    assert records["test_cal.py::test_by_hand"]["tolerance_sources"]["atol"] == "default"


def test_a_new_calibration_replaces_the_tests_it_runs_and_keeps_the_others(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cal=SUITE)
    run(pytester, "--trt-precision=fp16", "--trt-calibrate=2").assert_outcomes(passed=3)
    path = pytester.path / "trtcompare-tolerances.toml"
    path.write_text(path.read_text().replace(TODAY, "2026-01-02"))
    result = run(pytester, "--trt-precision=fp16", "--trt-calibrate=3", "-k", "test_model")
    result.assert_outcomes(passed=1, deselected=2)
    again = read_calibration(path)
    assert again.made_from == "3 seeds" and again.date == TODAY
    assert again.entries[(MODEL_ID, "y")].source == f"calibrated (3 seeds, {TODAY})"
    assert again.entries[(MARKED_ID, "y")].source == "calibrated (2 seeds, 2026-01-02)"


def test_a_run_that_calibrates_nothing_says_so_and_writes_nothing(pytester):
    pytester.makepyfile(test_cal=SUITE)
    result = run(pytester, "--trt-calibrate=3", "-k", "by_hand")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "trtcompare-tolerances.toml: nothing calibrated (no compare_frameworks case ran; "
            "`trtcompare tolerances REPORT.json` learns from the reports of other tests)"
        ]
    )
    assert not (pytester.path / "trtcompare-tolerances.toml").exists()


def test_a_golden_case_is_calibrated_on_its_stored_inputs(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_gold="""
        import pytest

        @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxref"], golden=True)
        @pytest.mark.shapes({"x": (2, 8)})
        def test_gold():
            pass
        """
    )
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=1)
    result = run(pytester, "--trt-calibrate=5", "--junitxml=cal.xml")
    result.assert_outcomes(passed=1)
    (case,) = ET.parse(pytester.path / "cal.xml").iter("testcase")
    (value,) = [
        p.get("value") for p in case.iter("property") if p.get("name") == "trtcompare-calibration"
    ]
    assert json.loads(value)["y"]["draws"] == 1  # a golden holds the outputs of its inputs only
    assert _file(pytester) == {
        "test_gold.py::test_gold[onnxref-fp32-bs2] :: y": {"atol": 0.0, "rtol": 0.0}
    }


@pytest.mark.parametrize("xdist", XDIST)
def test_entries_naming_no_test_or_no_output_are_warned_about(pytester, xdist):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_cal=SUITE, test_other="def test_x():\n    pass\n")
    (pytester.path / "trtcompare-tolerances.toml").write_text(
        '[calibration]\nmade_from = "3 seeds"\ndate = "2026-01-02"\nfactor = 2.0\n\n'
        f'["{MODEL_ID}".yy]\natol = 0.001\nrtol = 0.0\n\n'
        '["test_cal.py::test_modle[onnxref-fp16-bs4]".y]\natol = 0.001\nrtol = 0.0\n\n'
        '["test_cal.py::test_model[onnxref-bf16-bs4]".y]\natol = 0.001\nrtol = 0.0\n\n'
        '["test_clal.py::test_model[onnxref-fp16-bs4]".y]\natol = 0.001\nrtol = 0.0\n\n'
        '["test_other.py::test_x".y]\natol = 0.001\nrtol = 0.0\n'
    )
    result = run(pytester, "test_cal.py", "--trt-precision=fp16", "-W", "always", *xdist)
    result.assert_outcomes(passed=3)
    text = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*trtcompare-tolerances.toml:10: ToleranceWarning: "
            + glob_escape(
                "trtcompare-tolerances.toml: tolerances for tests that do not exist: "
                "test_cal.py::test_modle[onnxref-fp16-bs4], "
                "test_clal.py::test_model[onnxref-fp16-bs4] (renamed? --trt-calibrate writes "
                "them anew)"
            ),
        ]
    )
    result.stdout.fnmatch_lines(  # at the entry with the typo
        [
            "*trtcompare-tolerances.toml:6: ToleranceWarning: "
            + glob_escape(
                f"trtcompare-tolerances.toml: a tolerance of {MODEL_ID} for output(s) ['yy'] "
                "that the comparison does not have; did you mean 'y'? (1 output)"
            ),
        ]
    )
    assert text.count("do not exist: test_cal.py::test_modle") == 1  # not once per worker
    # bf16 is not selected this run, test_other.py not collected: no news
    assert "bf16-bs4]" not in text and "test_other" not in text
    # warnings made errors: a usage error naming the file, never an INTERNALERROR (xdist's
    # workers collect outside pytest's warning filters: there it stays a warning)
    strict = pytester.runpytest_subprocess(
        "test_cal.py", "--trt-precision=fp16", "-W", "error", *xdist
    )
    assert "INTERNALERROR" not in strict.stdout.str() + strict.stderr.str()
    if not xdist:
        assert strict.ret == pytest.ExitCode.USAGE_ERROR
        strict.stderr.fnmatch_lines(
            ["ERROR: */trtcompare-tolerances.toml: tolerances for tests that do not exist: *"]
        )


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (["--trt-calibrate=0"], "", "--trt-calibrate=0: takes a number of input draws, >= 1"),
        (["--trt-calibrate=-2"], "", "--trt-calibrate=-2: takes a number of input draws, >= 1"),
        (
            ["--trt-tolerances-file=tols.toml"],
            "",
            "--trt-tolerances-file=tols.toml: */tols.toml does not exist (--trt-calibrate "
            "writes it)",
        ),
        (
            [],
            "trtcompare_tolerances_file = ci/tols.toml",
            "ini trtcompare_tolerances_file: */ci/tols.toml does not exist (--trt-calibrate "
            "writes it)",
        ),
        (
            ["--trt-calibrate=2", "--trt-tolerances-file=nodir/x.toml"],
            "",
            "--trt-tolerances-file=nodir/x.toml: */nodir does not exist (--trt-calibrate writes "
            "the file there)",
        ),
        (
            ["--trt-tolerances-file=bad.toml"],
            "",
            '*/bad.toml: [[]"test_cal.py::test_model"."y"] atol = \'x\' is not a number >= 0',
        ),
    ],
)
def test_misuse_is_a_usage_error_naming_the_option_or_file(pytester, args, ini, message):
    pytester.makepyfile(test_cal=SUITE)
    (pytester.path / "bad.toml").write_text(
        '[calibration]\nmade_from = "1 seed"\n["test_cal.py::test_model".y]\natol = "x"\nrtol = 0\n'
    )
    if ini:
        pytester.makeini(f"[pytest]\n{ini}\n")
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert "Traceback" not in result.stderr.str()


def test_a_calibrate_value_that_is_not_a_number_is_argparse_s_error(pytester):
    result = run(pytester, "--trt-calibrate=five")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --trt-calibrate: invalid int value: 'five'"])


def test_a_folder_in_place_of_the_file_stops_the_run_naming_it(pytester):
    pytester.makepyfile(test_cal=SUITE)
    (pytester.path / "trtcompare-tolerances.toml").mkdir()
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: trtcompare-tolerances.toml in the rootdir: */trtcompare-tolerances.toml is a "
            "folder; the tolerance file is TOML"
        ]
    )
    assert "Traceback" not in result.stderr.str()


def test_a_damaged_file_in_the_rootdir_stops_the_run_naming_it(pytester):
    pytester.makepyfile(test_cal=SUITE)
    (pytester.path / "trtcompare-tolerances.toml").write_text("[calibration\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: */trtcompare-tolerances.toml: not TOML (*)"])


def test_headroom_reads_as_times_the_worst_error():
    from pytest_trtcompare.reports.calibration import calibration_lines

    worst = Observed(0.001, 0.5, 3, 0.1, (0.01, 0.01), "default")
    exact = Observed(0.0, 0.0, 3, 0.0, (0.01, 0.01), "ini")
    observed = {("t.py::a", "y"): worst, ("t.py::b", "y"): exact}
    made = suggest(observed, "3 seeds")
    lines = calibration_lines(observed, made, "written t.toml", 200)
    assert lines[2].split() == [
        "0.001",
        "/",
        "0.5",
        "0.002",
        "0.01",
        "/",
        "0.01",
        "(default)",
        "10x",
        "t.py::a",
        "::",
        "y",
    ]
    assert lines[3].split()[-4:] == ["exact", "t.py::b", "::", "y"]
    narrow = calibration_lines(observed, made, "written t.toml", 30)
    at = narrow.index("t.py::a :: y")
    assert narrow[at + 1].startswith("    0.001 / 0.5")
    assert all(len(line) <= 30 for line in narrow)


REPORTED = """
import os
import numpy as np

SCALE = float(os.environ.get("SCALE", "1"))

def test_by_hand(compare):
    compare({"z": np.ones(3)}, {"z": np.ones(3) + 1e-7 * SCALE})

def test_mean(compare):
    got = np.r_[np.zeros(9), 1e-3]
    compare({"m": got * SCALE}, {"m": np.zeros(10)}, check="mean", atol=1, rtol=1)

def test_top1(compare):
    compare({"t": np.eye(3)}, {"t": np.eye(3)}, check="top1")
"""


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("xdist", XDIST)
def test_trtcompare_tolerances_learns_from_reports_of_ordinary_runs(pytester, monkeypatch, xdist):
    pytester.makepyfile(test_hand=REPORTED)
    run(pytester, "--trt-report=one.json", *xdist).assert_outcomes(passed=3)
    monkeypatch.setenv("SCALE", "3")
    run(pytester, "--trt-report=two.json", *xdist).assert_outcomes(passed=3)
    monkeypatch.chdir(pytester.path)
    code, out, _ = _cli("tolerances", "one.json", "two.json")
    assert code == 0
    assert out.splitlines()[0] == (
        "written trtcompare-tolerances.toml: 2 outputs of 2 tests; atol = 2x the worst abs "
        "error, rounded up to 2 digits; rtol 0"
    )
    assert _file(pytester) == {  # the worst of both runs, x2; the mean's, not the largest's
        "test_hand.py::test_by_hand :: z": {"atol": 6e-7, "rtol": 0.0},
        "test_hand.py::test_mean :: m": {"atol": 0.0006, "rtol": 0.0},
    }
    assert read_calibration(pytester.path / "trtcompare-tolerances.toml").made_from == "2 reports"
    monkeypatch.delenv("SCALE")
    result = run(pytester, "-v", "--trt-report=three.json", *xdist)
    result.assert_outcomes(passed=3)
    records = {
        r["output"]: r for r in json.loads((pytester.path / "three.json").read_text())["outputs"]
    }
    assert records["z"]["atol"] == 6e-7
    assert records["z"]["tolerance_sources"]["atol"] == f"calibrated (2 reports, {TODAY})"
    assert records["m"]["tolerance_sources"]["atol"] == "call"  # the call's atol is above


def test_trtcompare_tolerances_prints_with_dash_and_keeps_other_entries(pytester, monkeypatch):
    pytester.makepyfile(test_hand=REPORTED)
    run(pytester, "--trt-report=one.json").assert_outcomes(passed=3)
    monkeypatch.chdir(pytester.path)
    code, out, err = _cli("tolerances", "one.json", "-o", "-", "--factor", "3")
    assert code == 0 and "factor = 3.0" in out
    assert 'made_from = "1 report"' in out and err.startswith("suggested: 2 outputs of 2 tests")
    assert not (pytester.path / "trtcompare-tolerances.toml").exists()
    kept = '["test_other.py::test_x".y]\natol = 0.5\nrtol = 0.0\n'
    (pytester.path / "t.toml").write_text(
        '[calibration]\nmade_from = "5 seeds"\ndate = "2026-01-02"\nfactor = 2.0\n' + kept
    )
    assert _cli("tolerances", "one.json", "-o", "t.toml")[0] == 0
    again = read_calibration(pytester.path / "t.toml")
    assert (
        again.entries[("test_other.py::test_x", "y")].source == "calibrated (5 seeds, 2026-01-02)"
    )
    assert len(again.entries) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.json"], "trtcompare: missing.json: cannot read*"),
        (["notes.txt"], "trtcompare: notes.txt: not a JSON report of pytest-trtcompare*"),
        (["one.json", "--factor", "0.5"], "trtcompare: --factor 0.5: takes a number >= 1"),
        (["one.json", "-o", "bad.toml"], "trtcompare: *bad.toml: not TOML (*"),
    ],
)
def test_trtcompare_tolerances_misuse_exits_2_naming_the_file(pytester, monkeypatch, args, message):
    pytester.makepyfile(test_hand=REPORTED)
    run(pytester, "--trt-report=one.json").assert_outcomes(passed=3)
    (pytester.path / "notes.txt").write_text("not a report")
    (pytester.path / "bad.toml").write_text("[calibration\n")
    monkeypatch.chdir(pytester.path)
    code, _, err = _cli("tolerances", *args)
    from fnmatch import fnmatch

    assert code == 2 and fnmatch(err.strip(), message), err


def test_trtcompare_tolerances_says_when_nothing_can_be_calibrated(pytester, monkeypatch):
    pytester.makepyfile(test_hand=REPORTED)
    run(pytester, "--trt-report=one.json", "-k", "top1").assert_outcomes(passed=1, deselected=2)
    monkeypatch.chdir(pytester.path)
    code, out, _ = _cli("tolerances", "one.json")
    assert code == 0 and out.startswith("no output to calibrate in 1 report")
    assert not (pytester.path / "trtcompare-tolerances.toml").exists()
