"""The golden user flow through pytester, each scenario with and without -n 2."""

from __future__ import annotations

import pytest

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run

GOLDEN_TESTS = """
import os
import numpy as np
import pytest
from pytest_trtcompare.runners.base import TensorSpec

SPECS = [TensorSpec("x", "float32", (4, 8))]
DRIFT = float(os.environ.get("DRIFT", "0"))

def model(feed):
    y = np.tanh(feed["x"] @ np.linspace(-1, 1, 24, dtype=np.float32).reshape(8, 3))
    y[1, 2] += DRIFT
    return {"y": y, "ids": np.argsort(y, axis=1)}

@pytest.mark.parametrize("bs", ["bs=1", "bs-1", "bs_1"])
def test_model(golden, bs):
    feed = golden.inputs(SPECS)
    golden.check(model(feed), atol=1e-4, rtol=1e-4)

def test_two_goldens(golden):
    golden.check({"a": np.arange(3.0)}, name="first")
    golden.check({"b": np.ones(2)}, name="second")
"""


def _goldens(pytester):
    folder = pytester.path / "goldens" / "test_golden_flow"
    return sorted(p.name for p in folder.glob("*.safetensors")) if folder.is_dir() else []


def _snapshot(pytester):
    folder = pytester.path / "goldens" / "test_golden_flow"
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.mark.parametrize("xdist", XDIST)
def test_missing_update_rerun_regenerate_drift(pytester, monkeypatch, xdist):
    pytester.makepyfile(test_golden_flow=GOLDEN_TESTS)
    missing = run(pytester, *xdist)
    missing.assert_outcomes(failed=4)
    missing.stdout.fnmatch_lines(
        [
            "*golden goldens/test_golden_flow/test_model*.safetensors does not exist "
            "(nothing was written)*",
            "*pytest --trt-update-goldens 'test_golden_flow.py::test_model[[]bs=1[]]'*",
        ]
    )
    assert _goldens(pytester) == []  # a missing golden writes nothing

    created = run(pytester, "--trt-update-goldens", *xdist)
    created.assert_outcomes(passed=4)
    created.stdout.fnmatch_lines(["*goldens*", "created 5, updated 0, unchanged 0, unused 0"])
    names = _goldens(pytester)
    assert len(names) == 5  # bs=1 / bs-1 / bs_1 each get their own file
    assert "test_model[bs-1].safetensors" in names and "test_model[bs_1].safetensors" in names
    assert any(name.startswith("test_model[bs_1]~") for name in names)  # bs=1, sanitised
    before = _snapshot(pytester)
    assert not [n for n in before if n.endswith(".tmp") or n.startswith(".")]

    run(pytester, *xdist).assert_outcomes(passed=4)
    again = run(pytester, "--trt-update-goldens", *xdist)
    again.stdout.fnmatch_lines(["created 0, updated 0, unchanged 5, unused 0"])
    assert _snapshot(pytester) == before  # byte-identical on regeneration

    monkeypatch.setenv("DRIFT", "0.01")
    drift = run(pytester, *xdist)
    drift.assert_outcomes(passed=1, failed=3)
    drift.stdout.fnmatch_lines(
        [
            "*1 of 2 outputs out of tolerance: y*",
            "*greatest abs error 0.01 at (1, 2)*",
            "*golden: goldens/test_golden_flow/test_model*.safetensors*",
        ]
    )
    assert _snapshot(pytester) == before  # a failing comparison never touches the golden
    refreshed = run(pytester, "--trt-update-goldens", *xdist)
    refreshed.stdout.fnmatch_lines(["created 0, updated 3, unchanged 2, unused 0"])


@pytest.mark.parametrize("xdist", XDIST)
def test_unused_goldens_reported_and_pruned_only_after_full_runs(pytester, xdist):
    pytester.makepyfile(test_golden_flow=GOLDEN_TESTS)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=4)
    folder = pytester.path / "goldens" / "test_golden_flow"
    (folder / "test_removed_long_ago.safetensors").write_bytes(
        (folder / "test_two_goldens.first.safetensors").read_bytes()
    )
    partial = run(pytester, "-k", "two_goldens", *xdist)  # -k: nothing can be called unused
    partial.stdout.fnmatch_lines(["checked 2, unused 0"])
    # nor a test named on the command line, which narrows its module without deselecting:
    # the other tests' goldens stay, even under --trt-prune-goldens and --trt-strict-goldens
    node = "test_golden_flow.py::test_two_goldens"
    named = run(pytester, node, "--trt-prune-goldens", "--trt-strict-goldens", *xdist)
    named.stdout.fnmatch_lines(["checked 2, unused 0 (pruned 0)"])
    assert named.ret == 0 and len(_goldens(pytester)) == 6
    full = run(pytester, *xdist)
    full.stdout.fnmatch_lines(
        [
            "*unused 1*",
            "*unused: goldens/test_golden_flow/test_removed_long_ago.safetensors*",
            "*--trt-prune-goldens*",
        ]
    )
    pruned = run(pytester, "--trt-prune-goldens", *xdist)
    pruned.stdout.fnmatch_lines(["*unused 1 (pruned 1)*"])
    assert not (folder / "test_removed_long_ago.safetensors").exists()
    assert len(_goldens(pytester)) == 5


@pytest.mark.parametrize("xdist", XDIST)
def test_stored_inputs_are_reused(pytester, xdist):
    pytester.makepyfile(
        test_golden_flow="""
        import numpy as np
        from pytest_trtcompare.runners.base import TensorSpec

        def test_inputs_come_back(golden):
            feed = golden.inputs([TensorSpec("x", "float32", (3,))], seed=7)
            golden.check({"y": feed["x"] * 2})
        """
    )
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    test = pytester.path / "test_golden_flow.py"
    test.write_text(test.read_text().replace("seed=7", "seed=8"))  # stored inputs win
    run(pytester, *xdist).assert_outcomes(passed=1)


def test_goldens_dir_option_and_ini(pytester):
    pytester.makepyfile(test_golden_flow=GOLDEN_TESTS)
    pytester.runpytest("--trt-update-goldens", "--trt-goldens-dir", "store").assert_outcomes(
        passed=4
    )
    assert len(list((pytester.path / "store" / "test_golden_flow").glob("*.safetensors"))) == 5
    pytester.makeini("[pytest]\ntrtcompare_goldens_dir = ini_store\n")
    pytester.runpytest("--trt-update-goldens").assert_outcomes(passed=4)
    assert len(list((pytester.path / "ini_store" / "test_golden_flow").glob("*.safetensors"))) == 5


@pytest.mark.parametrize("xdist", XDIST)
def test_a_corrupt_golden_fails_only_its_test_naming_the_file(pytester, xdist):
    pytester.makepyfile(test_golden_flow=GOLDEN_TESTS)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=4)
    broken = pytester.path / "goldens" / "test_golden_flow" / "test_two_goldens.first.safetensors"
    broken.write_bytes(broken.read_bytes()[:-8])
    result = run(pytester, *xdist)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            # shown from the rootdir, as a missing or mismatched golden is
            "goldens/test_golden_flow/test_two_goldens.first.safetensors: truncated golden (*); "
            "regenerate it with:",
            "  pytest --trt-update-goldens test_golden_flow.py::test_two_goldens",
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str()


def test_update_regenerates_an_unreadable_golden(pytester):
    pytester.makepyfile(test_golden_flow=GOLDEN_TESTS)
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=4)
    broken = pytester.path / "goldens" / "test_golden_flow" / "test_model[bs-1].safetensors"
    good = broken.read_bytes()
    broken.write_bytes(good[: len(good) // 2])
    run(pytester).assert_outcomes(passed=3, failed=1)  # names the file and the command
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=4)  # and the command works
    assert broken.read_bytes() == good


TWICE = """
import numpy as np

def test_twice_unnamed(golden):
    golden.check({"y": np.zeros(3)})
    golden.check({"y": np.ones(3)})

def test_twice_named(golden):
    golden.check({"y": np.zeros(3)}, name="step")
    golden.check({"y": np.ones(3)}, name="step")

def test_loop_with_names(golden):
    for step in range(2):
        golden.check({"y": np.full(3, step)}, name=f"step{step}")
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_a_second_check_under_one_name_fails_and_writes_nothing_over_the_first(pytester, xdist):
    """Two checks under one name would write one golden twice (the second over the first)
    and fail every later run: the second call is an error naming what to pass."""
    pytester.makepyfile(test_twice=TWICE)
    result = run(pytester, "--trt-update-goldens", "-rf", *xdist)
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines_random(
        [
            "FAILED test_twice.py::test_twice_unnamed - Failed: golden.check() was already "
            "called in this test: each check of a test has its own golden, so give each one "
            "a name= (golden.check(outputs, name='step2'))",
            "FAILED test_twice.py::test_twice_named - Failed: golden.check(name='step') was "
            "already called in this test*",
        ]
    )
    rerun = run(pytester, *xdist)  # the first checks' goldens are intact
    rerun.assert_outcomes(failed=2, passed=1)
    assert "exceed" not in rerun.stdout.str()


MISMATCH = """
import numpy as np

def test_drifted(golden):
    golden.check({"y": np.arange(4.0) + float(__import__("os").environ.get("DRIFT", "0"))})
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_a_golden_mismatch_says_how_to_accept_the_new_outputs(pytester, monkeypatch, xdist):
    pytester.makepyfile(test_drift=MISMATCH)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    monkeypatch.setenv("DRIFT", "0.5")
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E       if the new outputs are right, update the golden with:",
            "E         pytest --trt-update-goldens test_drift.py::test_drifted",
        ]
    )


@pytest.mark.parametrize("xdist", XDIST)
def test_goldens_of_a_module_that_no_longer_uses_the_plugin_are_unused(pytester, xdist):
    """No option of ours and no test asking for the plugin: the goldens folder beside the
    module puts it to work, in the workers and (through their payload) the controller."""
    pytester.makepyfile(test_golden_flow=GOLDEN_TESTS)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=4)
    pytester.makepyfile(test_golden_flow="def test_plain():\n    assert True\n")
    plain = run(pytester, *xdist)
    plain.assert_outcomes(passed=1)
    plain.stdout.fnmatch_lines(
        ["*unused 5*", "*unused: goldens/test_golden_flow/test_*.safetensors*"]
    )


@pytest.mark.parametrize("xdist", XDIST)
def test_a_last_failed_rerun_judges_no_golden(pytester, xdist, monkeypatch):
    """--lf collects only the tests that failed last time, deselecting nothing: the goldens
    of the tests it left out are neither unused nor pruned (a new-user trial lost them)."""
    pytester.makepyfile(
        test_m="""
        import os
        import numpy as np

        def test_a(golden):
            golden.check({"y": np.full(3, float(os.environ.get("A", "1")), np.float32)})

        def test_b(golden):
            golden.check({"y": np.full(3, 2.0, np.float32)})
        """
    )
    run(pytester, "-p", "cacheprovider", "--trt-update-goldens", *xdist).assert_outcomes(passed=2)
    monkeypatch.setenv("A", "5")
    run(pytester, "-p", "cacheprovider", *xdist).assert_outcomes(passed=1, failed=1)
    monkeypatch.delenv("A")
    result = run(
        pytester,
        "-p",
        "cacheprovider",
        "--lf",
        "--trt-prune-goldens",
        "--trt-strict-goldens",
        *xdist,
    )
    result.assert_outcomes(passed=1)
    assert result.ret == 0 and "pruned:" not in result.stdout.str()
    assert (pytester.path / "goldens" / "test_m" / "test_b.safetensors").exists()


@pytest.mark.parametrize("xdist", XDIST)
def test_another_rootdir_prunes_no_golden_of_other_precisions(pytester, xdist):
    """A golden records its test's node id relative to the rootdir it was written under:
    tests are told by their id within their module, so a run from another rootdir (a
    monorepo's CI) judges them the same."""
    pytester.makeini("[pytest]\n")
    tests = pytester.mkdir("tests")
    (tests / "test_m.py").write_text(
        "import numpy as np\n\n"
        "def test_p(golden, trt_precision):\n"
        "    golden.check({'y': np.ones(3, np.float32)}, precision=trt_precision)\n"
    )
    run(pytester, "--trt-precision=fp32,fp16", "--trt-update-goldens", *xdist).assert_outcomes(
        passed=2
    )
    result = run(pytester, "--trt-precision=fp32", "--rootdir=tests", "--trt-prune-goldens", *xdist)
    result.assert_outcomes(passed=1)
    assert "pruned:" not in result.stdout.str()
    assert (tests / "goldens" / "test_m" / "test_p[fp16].safetensors").exists()
