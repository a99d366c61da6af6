"""One suite in pieces (issue 38): pytest-split shards, each with and without -n 2, give
--trt-report files that `trtcompare merge` joins into the unsharded run's report; goldens
are judged over all shards, never in one; reports of another format or suite, or damaged,
are refused with exit 2."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from pytest_trtcompare.cli import main as cli

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run

pytest.importorskip("pytest_split")

SUITE = {
    "test_a": """
import numpy as np
import pytest

@pytest.mark.parametrize("i", range(4))
def test_g(golden, i):
    golden.check({"y": np.full(3, i, np.float32)})

def test_c(compare):
    compare({"y": np.ones(3)}, {"y": np.ones(3) + 1e-7})
""",
    "test_b": """
import numpy as np
import pytest

@pytest.mark.parametrize("i", range(3))
def test_h(golden, i):
    golden.check({"z": np.full(2, i * 2, np.float32)})
""",
}


def _merge(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(["merge", *args])
    return code, out.getvalue(), err.getvalue()


def _records(path: Path) -> list[dict]:
    """The report's records, timings aside, in a fixed order."""
    outputs = json.loads(path.read_text())["outputs"]
    kept = [{k: v for k, v in r.items() if not k.endswith("_ms")} for r in outputs]
    return sorted(kept, key=lambda r: (r["nodeid"], r["output"]))


def _shards(pytester: pytest.Pytester, xdist: list[str], *options: str) -> list[str]:
    reports = []
    for group in (1, 2, 3):
        report = f"shard{group}.json"
        shard = ("--splits", "3", "--group", str(group), f"--trt-report={report}")
        result = run(pytester, *shard, *options, *xdist)
        assert result.ret == 0, result.stdout.str()
        reports.append(report)
    return reports


@pytest.mark.parametrize("xdist", XDIST)
def test_three_shards_merge_into_the_unsharded_report(pytester, xdist, monkeypatch):
    pytester.makepyfile(**SUITE)
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=8)
    run(pytester, "--trt-report=full.json", *xdist).assert_outcomes(passed=8)
    reports = _shards(pytester, xdist)
    monkeypatch.chdir(pytester.path)  # where the suite's goldens are
    code, out, err = _merge(*reports, "-o", "all.json")
    assert (code, err) == (0, "")
    assert out.startswith("accuracy summary (3 reports)\n")
    assert "test_c :: y" in out and "test_h[2] :: z" in out
    assert _records(pytester.path / "all.json") == _records(pytester.path / "full.json")
    merged = json.loads((pytester.path / "all.json").read_text())
    assert merged["report_format"] == 2 and merged["suite"] == pytester.path.name
    assert set(merged["goldens"]["passed"]) >= {"test_b.py::test_h[0]", "test_a.py::test_c"}
    code, out, _ = _merge(*reports, "-q")
    assert code == 0 and out.splitlines()[-1] == "8 outputs: 0 failing, 8 within tolerance"


@pytest.mark.parametrize("xdist", XDIST)
def test_goldens_are_judged_over_all_shards_never_in_one(pytester, xdist, monkeypatch):
    """test_h renamed: its three goldens are stale. A shard that runs part of test_b (with
    --trt-prune-goldens, --trt-strict-goldens) neither calls them unused nor prunes them;
    the merge names exactly those three, --strict exits 1, --prune deletes them."""
    pytester.makepyfile(**SUITE)
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=8)
    pytester.makepyfile(test_b=SUITE["test_b"].replace("def test_h", "def test_k"))
    run(pytester, "--trt-update-goldens", "-k", "test_k").assert_outcomes(passed=3)
    folder = pytester.path / "goldens" / "test_b"
    before = sorted(p.name for p in folder.iterdir())
    strict = ("--trt-prune-goldens", "--trt-strict-goldens")
    reports = _shards(pytester, xdist, *strict)
    assert sorted(p.name for p in folder.iterdir()) == before  # no shard pruned a thing
    monkeypatch.chdir(pytester.path)
    code, out, _ = _merge(*reports, "-q", "--goldens-dir", "goldens", "--strict")
    stale = [f"goldens/test_b/test_h[{i}].safetensors" for i in range(3)]
    assert code == 1
    assert "goldens under goldens: 2 modules judged, unused 3" in out
    assert [line.split(": ")[1] for line in out.splitlines() if "unused: " in line] == stale
    assert "(exit status 1 (--strict))" in out
    code, out, _ = _merge(*reports, "-q", "--goldens-dir", "goldens", "--prune")
    assert code == 0
    assert sorted(p.name for p in folder.iterdir()) == [
        f"test_k[{i}].safetensors" for i in range(3)
    ]
    code, out, _ = _merge(*reports, "-q", "--goldens-dir", "goldens", "--strict")
    assert code == 0 and "unused 0" in out


@pytest.mark.parametrize("xdist", XDIST)
def test_strict_goldens_in_a_shard_points_at_the_merge(pytester, xdist):
    pytester.makepyfile(**SUITE)
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=8)
    result = run(pytester, "-q", "--splits", "3", "--group", "1", "--trt-strict-goldens", *xdist)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "  not judged (*: a test of theirs failed, skipped, xfailed, was deselected or not "
            "collected): test_*.py*",
            "  (the goldens of tests this run deselected, as a shard does, are judged over all "
            "shards: trtcompare merge REPORT.json... --goldens-dir DIR --strict)",
        ]
    )
    result = run(pytester, "-q", "-k", "test_g", "--trt-prune-goldens", *xdist)
    result.stdout.fnmatch_lines(["*are judged over all shards: trtcompare merge*"])
    result = run(pytester, "-q", "--trt-strict-goldens", *xdist)  # the whole suite: judged
    assert result.ret == 0 and "not judged" not in result.stdout.str()


def test_a_rerun_keeps_the_newest_reports_outcome_and_names_the_tests(pytester, monkeypatch):
    """A failing test run again (a rerun job): the newest report's records and outcome are
    kept whatever the order the reports are given in (a glob sorts shard3-rerun.json before
    shard3.json), and the tests run again are named once per pair of reports."""
    pytester.makepyfile(**{**SUITE, "test_c": TEST_C})
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=9)
    monkeypatch.setenv("OFF", "0.5")
    run(pytester, "--trt-report=shard3.json").assert_outcomes(passed=8, failed=1)
    monkeypatch.delenv("OFF")
    run(pytester, "-k", "test_off", "--trt-report=shard3-rerun.json").assert_outcomes(passed=1)
    monkeypatch.chdir(pytester.path)
    code, out, _ = _merge("shard3-rerun.json", "shard3.json", "-o", "all.json", "-q")
    assert code == 0
    assert out.splitlines()[1] == "9 outputs: 0 failing, 9 within tolerance"
    assert (
        "run in several reports: 1 test of shard3.json run again in shard3-rerun.json (kept: "
        "the newer): test_c.py::test_off" in " ".join(out.split())
    )
    merged = json.loads(Path("all.json").read_text())
    assert "test_c.py::test_off" in merged["goldens"]["passed"]
    code, out, _ = _merge("shard3.json", "shard3.json")
    assert code == 2


TEST_C = """
import os
import numpy as np

def test_off(compare):
    off = float(os.environ.get("OFF", "0"))
    compare({"y": np.ones(3)}, {"y": np.ones(3) + off})
"""


def test_reports_that_cannot_be_merged_exit_2_naming_the_file(pytester, monkeypatch, tmp_path):
    pytester.makepyfile(**SUITE)
    run(pytester, "--trt-update-goldens", "--trt-report=good.json").assert_outcomes(passed=8)
    monkeypatch.chdir(pytester.path)
    good = json.loads(Path("good.json").read_text())
    old = {k: v for k, v in good.items() if k != "report_format"}
    Path("old.json").write_text(json.dumps({**old, "plugin_version": "0.1.0"}))
    Path("other.json").write_text(json.dumps({**good, "suite": "another-project"}))
    Path("cut.json").write_text(Path("good.json").read_text()[:200])
    Path("junit.json").write_text("[1, 2]")
    broken = {**good, "outputs": [{"test": "t"}]}
    Path("broken.json").write_text(json.dumps(broken))
    cases = {
        "old.json": "old.json: report format 1 (pytest-trtcompare 0.1.0); this version reads "
        "format 2: rerun the run that wrote it with this version",
        "other.json": "reports of different suites (a suite is named by ini trtcompare_suite, "
        f"else its rootdir's folder): good.json ({pytester.path.name}), other.json "
        "(another-project)",
        "cut.json": "cut.json: not a JSON report of pytest-trtcompare (not JSON)",
        "junit.json": "junit.json: not a JSON report of pytest-trtcompare (--trt-report)",
        "broken.json": "broken.json: a damaged JSON report (KeyError: ",
        "missing.json": "missing.json: cannot read (No such file or directory)",
    }
    for name, message in cases.items():
        code, out, err = _merge("good.json", name)
        assert code == 2 and out == "", name
        assert err.startswith(f"trtcompare: {message}"), (name, err)
        assert "Traceback" not in err
    code, _, err = _merge("good.json", "--goldens-dir", str(tmp_path / "nowhere"))
    assert code == 2 and "no such folder here" in err


def test_merge_misuses_and_what_the_reports_leave_out(pytester, monkeypatch):
    """From a new-user trial of the sharded flow: --strict/--prune without --goldens-dir,
    a --goldens-dir that holds no module's goldens (the merge run from another folder), a
    damaged goldens section, -o onto a report or a folder are exit 2 with one line; a shard
    left out is named; goldens of a module no report knows (renamed) are named, not pruned."""
    pytester.makepyfile(**SUITE)
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=8)
    reports = _shards(pytester, [])
    monkeypatch.chdir(pytester.path)
    (pytester.path / "goldens" / "test_gone").mkdir()
    (pytester.path / "goldens" / "test_a" / "test_g[0].safetensors").rename(
        pytester.path / "goldens" / "test_gone" / "test_g[0].safetensors"
    )
    (pytester.path / "elsewhere").mkdir()
    damaged = json.loads(Path(reports[0]).read_text())
    damaged["goldens"]["modules"]["test_a.py"]["selected"] = 5
    Path("damaged.json").write_text(json.dumps(damaged))
    cases = {
        ("--strict",): "--strict judges goldens: give --goldens-dir DIR too",
        ("--prune",): "--prune judges goldens: give --goldens-dir DIR too",
        ("--goldens-dir", "elsewhere"): "--goldens-dir elsewhere: holds no module's goldens "
        "folder (",
        ("-o", reports[0]): f"-o {reports[0]}: that is a report to merge; write elsewhere",
        ("-o", "elsewhere"): "-o elsewhere: a folder; give a file path",
    }
    for args, message in cases.items():
        code, out, err = _merge(*reports, *args)
        assert (code, out) == (2, ""), args
        assert err.startswith(f"trtcompare: {message}"), (args, err)
    code, _, err = _merge(*reports[1:], "damaged.json")
    assert code == 2 and "damaged.json: a damaged JSON report (TypeError: 5 is not a list" in err
    assert "goldens folders, relative to their rootdir: goldens/test_a, goldens/test_b" in " ".join(
        _merge(*reports, "--goldens-dir", "elsewhere")[2].split()
    )
    code, out, _ = _merge(reports[0], reports[2], "-q", "--goldens-dir", "goldens", "--strict")
    text = " ".join(out.split())
    assert "ran in no report (a missing shard?): " in text
    assert "not judged (" in text  # the modules of the missing shard's tests
    assert (
        "goldens of no module in the reports (a renamed or deleted module?): goldens/test_gone"
        in text
    )
    assert (pytester.path / "goldens" / "test_gone" / "test_g[0].safetensors").exists()
