"""The golden check is written once (session/golden_check.py, issue 23): every situation gives
the same outcome and the same message through its three entry points, the `golden` fixture,
`compare_frameworks(golden=True)` and `trtcompare check`, with and without pytest-xdist.

Each scenario prepares the goldens of both pytest tests, runs pytest, then runs
`trtcompare check` on a copy of the fixture's golden as it was before the run, with the
outputs the fixture's test saved in that run. Messages are compared with the golden's path
and the command that regenerates it (which name the entry point) replaced.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass

import numpy as np
import onnx
import pytest

from pytest_trtcompare.cli import main as trtcompare
from pytest_trtcompare.goldens.store import read_golden, write_golden

from .onnx_models import layer_chain
from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run

TESTS = """
import pytest
from pytest_trtcompare.goldens.store import write_golden

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt"], golden=True)
@pytest.mark.shapes({"x": (2, 4)})
def test_marker():
    pass

def test_fixture(golden, runners, request):
    runner = runners.onnxrt("model.onnx")
    feed = golden.inputs(runner, shapes={"x": (2, 4)})
    outputs = runner.infer(feed)
    # the outputs as a file, with the runner's description, for `trtcompare check`
    meta = {"runner": runner.describe()}
    write_golden(request.config.rootpath / "outputs.safetensors", outputs, feed, meta)
    golden.check(outputs)
"""

#: Every failed report's exception text, as pytest shows it (xdist workers append too).
CONFTEST = """
import json
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call" or report.failed:
        message = str(call.excinfo.value) if report.failed and call.excinfo else ""
        line = {"test": item.name, "when": report.when, "outcome": report.outcome,
                "message": message}
        with open(item.config.rootpath / "reports.jsonl", "a") as out:
            out.write(json.dumps(line) + "\\n")
    return report
"""

MARKER, FIXTURE = "test_marker[onnxrt-fp32-bs2]", "test_fixture"


@dataclass(frozen=True)
class Scenario:
    prepare: str  # "none", or "record" (--trt-update-goldens) then "empty" / "truncate" / "keep"
    options: tuple[str, ...]  # of the pytest run
    changed: bool  # the run's model differs from the recorded one
    cli: tuple[str, ...]  # `trtcompare check` options for the same situation
    verdict: str  # "PASSED" or "FAILED", both pytest tests
    code: int  # trtcompare's exit status
    kind: str  # what the message must say


SCENARIOS = {
    "missing": Scenario("none", (), False, (), "FAILED", 2, "does not exist"),
    "damaged-empty": Scenario("empty", (), False, (), "FAILED", 2, "an empty file"),
    "damaged-truncated": Scenario("truncate", (), False, (), "FAILED", 2, "truncated golden"),
    "mismatch": Scenario("keep", (), True, (), "FAILED", 1, "model changed since the golden"),
    "pass": Scenario("keep", (), False, (), "PASSED", 0, ""),
    "update": Scenario(
        "keep", ("--trt-update-goldens",), True, ("--update",), "PASSED", 0, "updated: "
    ),
    "update-damaged": Scenario(
        "truncate", ("--trt-update-goldens",), False, ("--update",), "PASSED", 0, "updated: "
    ),
    "update-missing": Scenario(
        "none",
        ("--trt-update-goldens-missing",),
        False,
        ("--update-missing",),
        "PASSED",
        0,
        "created: ",
    ),
    "update-missing-existing": Scenario(
        "keep",
        ("--trt-update-goldens-missing",),
        True,
        ("--update-missing",),
        "FAILED",
        1,
        "model changed since the golden",
    ),
    "update-directory": Scenario(
        "directory",
        ("--trt-update-goldens",),
        False,
        ("--update",),
        "FAILED",
        2,
        "is a directory, not a golden file; remove it, then regenerate it with:\n  <REGENERATE>",
    ),
    # --trt-strict-goldens: a golden checked by any entry point counts as used (the CLI has one
    # golden per command, which is always used: its pass)
    "strict-goldens": Scenario("keep", ("--trt-strict-goldens",), False, (), "PASSED", 0, ""),
    # what stands where a golden should be (issue 26): named, with the command that fixes it
    **{
        f"damaged-{how}": Scenario(how, (), False, (), "FAILED", 2, f"{message}\n  <REGENERATE>")
        for how, message in {
            "directory": "is a directory, not a golden file; remove it, then regenerate it with:",
            "fifo": "is a FIFO, not a golden file; remove it, then regenerate it with:",
            "loop": "is a symlink loop, not a golden file; regenerate it with:",
            "dangling": "is a broken symlink, not a golden file; regenerate it with:",
            "devnull": "is a device file, not a golden file; regenerate it with:",
            "devzero": "is a device file, not a golden file; regenerate it with:",
        }.items()
    },
}
#: What can stand where a golden should be, made by `_put_odd`.
ODD = ("directory", "fifo", "loop", "dangling", "devnull", "devzero")


def _put_odd(path, how: str) -> None:
    """A directory, a FIFO, a symlink loop, a dangling symlink or a link to a device file."""
    if how == "directory":
        path.mkdir()
    elif how == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("this OS has no FIFOs")
        os.mkfifo(path)
    elif how == "loop":
        path.symlink_to(path)
    elif how == "dangling":
        path.symlink_to(path.parent / "nowhere")
    else:
        device = f"/dev/{how.removeprefix('dev')}"
        if not os.path.exists(device):
            pytest.skip(f"this OS has no {device}")
        path.symlink_to(device)


def _model(pytester: pytest.Pytester, changed: bool) -> None:
    model = layer_chain((4, 3), perturb_layer=0 if changed else None)
    onnx.save(model, str(pytester.path / "model.onnx"))


def _golden(pytester: pytest.Pytester, test: str) -> str:
    return str(pytester.path / "goldens" / "test_once" / f"{test}.safetensors")


def _prepare(pytester: pytest.Pytester, how: str) -> None:
    if how == "none":
        return
    run(pytester, "--trt-update-goldens").assert_outcomes(passed=2)
    data = (pytester.path / _golden(pytester, FIXTURE)).read_bytes()
    damaged = {"empty": b"", "truncate": data[:-8]}.get(how)
    for test in (MARKER, FIXTURE):
        path = pytester.path / _golden(pytester, test)
        if damaged is not None:  # the same bytes for both tests: the same message
            path.write_bytes(damaged)
        elif how in ODD:
            path.unlink()
            _put_odd(path, how)
    (pytester.path / "reports.jsonl").unlink()


def _reports(pytester: pytest.Pytester) -> dict[str, dict[str, str]]:
    """Each test's verdict as pytest reports it (ERROR: failed in setup) and its message."""
    found: dict[str, dict[str, str]] = {}
    for line in (pytester.path / "reports.jsonl").read_text().splitlines():
        report = json.loads(line)
        verdict = "ERROR" if report["when"] == "setup" else report["outcome"].upper()
        found[report["test"]] = {"verdict": verdict, "message": report["message"]}
    return found


def _written(stdout: str, shown: str) -> str:
    """'updated: <GOLDEN>' from the goldens summary's line naming the golden."""
    for verb in ("created", "updated", "unchanged"):
        if f"  {verb}: {shown}" in stdout.splitlines():
            return f"{verb}: <GOLDEN>"
    return ""


def _normal(text: str, golden: str, shown: str, hint: str) -> str:
    """The message with the parts naming its entry point replaced: the golden's path, the
    command that regenerates it; and the failure's artifacts (pytest writes them) cut."""
    text = text.split("\n\nartifacts: ")[0]
    return text.replace(hint, "<REGENERATE>").replace(golden, "<GOLDEN>").replace(shown, "<GOLDEN>")


def _cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = trtcompare(list(args))
    text = out.getvalue() + err.getvalue().removeprefix("trtcompare: ")
    return code, text.removesuffix("\n")  # print's


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_one_golden_check_three_entry_points(pytester, name, xdist):
    scenario = SCENARIOS[name]
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_once=TESTS)
    _model(pytester, changed=False)
    _prepare(pytester, scenario.prepare)
    cli_golden = str(pytester.path / "cli" / "kept.safetensors")
    if scenario.prepare in ODD:
        (pytester.path / "cli").mkdir()
        _put_odd(pytester.path / "cli" / "kept.safetensors", scenario.prepare)
    elif scenario.prepare != "none":  # the fixture's golden as the run finds it
        (pytester.path / "cli").mkdir()
        shutil.copyfile(_golden(pytester, FIXTURE), cli_golden)
    _model(pytester, changed=scenario.changed)

    result = run(pytester, *scenario.options, *xdist)
    passed = scenario.verdict == "PASSED"
    result.assert_outcomes(passed=2 if passed else 0, failed=0 if passed else 2)
    assert result.ret == (0 if passed else 1)
    assert "INTERNALERROR" not in result.stdout.str() and "Traceback" not in result.stdout.str()
    reports = _reports(pytester)
    messages = {}
    for test in (MARKER, FIXTURE):
        assert reports[test]["verdict"] == scenario.verdict, (test, reports[test])
        shown = f"goldens/test_once/{test}.safetensors"
        hint = f"pytest --trt-update-goldens {shlex.quote(f'test_once.py::{test}')}"
        text = reports[test]["message"] or _written(result.stdout.str(), shown)
        messages[test] = _normal(text, _golden(pytester, test), shown, hint)

    outputs = str(pytester.path / "outputs.safetensors")  # saved by the fixture's test
    code, text = _cli("check", cli_golden, outputs, *scenario.cli)
    assert code == scenario.code, text
    hint = shlex.join(["trtcompare", "check", cli_golden, outputs, "--update"])
    messages["trtcompare check"] = _normal(text, cli_golden, cli_golden, hint)
    if passed and not scenario.cli:  # nothing to say in pytest; the CLI prints its report
        assert messages["trtcompare check"].startswith("1 output within tolerance")
        assert messages[MARKER] == messages[FIXTURE] == ""
        result.stdout.fnmatch_lines(["checked 2, unused 0"])
        return
    assert scenario.kind in messages[FIXTURE], messages[FIXTURE]
    assert messages[MARKER] == messages[FIXTURE] == messages["trtcompare check"], messages
    assert "<GOLDEN>" in messages[FIXTURE]
    if not passed:  # every golden failure names the command that fixes it
        assert "<REGENERATE>" in messages[FIXTURE], messages[FIXTURE]
    if scenario.cli and passed:  # written by the CLI as by the fixture: the same golden
        _assert_same_golden(_golden(pytester, FIXTURE), cli_golden)


def _assert_same_golden(fixture_golden: str, cli_golden: str) -> None:
    ours, theirs = read_golden(fixture_golden), read_golden(cli_golden)
    for group in ("outputs", "inputs"):
        mine, other = getattr(ours, group), getattr(theirs, group)
        assert mine.keys() == other.keys()
        for key in mine:
            np.testing.assert_array_equal(mine[key], other[key])
    for key in ("tolerance", "precision", "runner", "plugin_version"):
        assert ours.meta[key] == theirs.meta[key], key


def test_the_cli_names_what_it_takes(tmp_path, capsys):
    """Exit 2 with argparse's usage error for a bad option; a polygraphy-imported golden
    (its runner a name, not a description) fails as a mismatch, never a traceback."""
    with pytest.raises(SystemExit) as info:
        trtcompare(["check", "a.safetensors", "b.npz", "--precision", "fp64"])
    assert info.value.code == 2
    assert "invalid choice: 'fp64'" in capsys.readouterr().err
    golden, outputs = tmp_path / "g.safetensors", tmp_path / "out.safetensors"
    write_golden(golden, {"y": np.zeros(3)}, {}, {"source": "polygraphy", "runner": "trt-runner"})
    write_golden(outputs, {"y": np.ones(3)}, {}, {"runner": {"model_digest": "ab" * 32}})
    code, text = _cli("check", str(golden), str(outputs))
    assert code == 1 and "1 of 1 outputs out of tolerance: y" in text
    assert not re.search("model changed", text)


@pytest.mark.parametrize("xdist", XDIST)
def test_stored_inputs_that_no_longer_fit_fail_both_pytest_entry_points(pytester, xdist):
    """The marker feeds the golden's stored inputs as golden.inputs() does: other shapes
    under the same id fail with the fixture's message; --trt-update-goldens stores new ones."""
    pytester.makeconftest(CONFTEST)
    _model(pytester, changed=False)
    tests = TESTS.replace('shapes({"x": (2, 4)})', 'shapes({"x": (2, 4)}, ids=["one"])')
    pytester.makepyfile(test_once=tests)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=2)
    pytester.makepyfile(test_once=tests.replace("(2, 4)", "(5, 4)"))
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    for test in ("test_marker[onnxrt-fp32-one]", FIXTURE):
        hint = f"pytest --trt-update-goldens {shlex.quote(f'test_once.py::{test}')}"
        assert (
            f"golden goldens/test_once/{test}.safetensors: its stored input 'x' has shape (2, 4), "
            f"this test asks for (5, 4); refresh it with:\n  {hint}"
        ) in out
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=2)
    run(pytester, *xdist).assert_outcomes(passed=2)
    stored = read_golden(
        pytester.path / "goldens" / "test_once" / "test_marker[onnxrt-fp32-one].safetensors"
    )
    assert stored.inputs["x"].shape == (5, 4)


def test_a_tolerance_with_metric_checks_is_recorded_alike(pytester):
    """The golden's metadata holds the tolerance in one form (`entry_record`): a list when
    metric checks join it (the marker's `dataclasses.asdict` raised on that)."""
    pytester.makeconftest(CONFTEST)
    _model(pytester, changed=False)
    pytester.makepyfile(test_once=TESTS)
    run(pytester, "--trt-update-goldens", "--trt-check", "cosine=0.999").assert_outcomes(passed=2)
    for test in (MARKER, FIXTURE):
        tolerance = read_golden(_golden(pytester, test)).meta["tolerance"]
        assert [entry["check"] for entry in tolerance] == ["elemwise", "cosine"], test


META_TESTS = """
import pytest

@pytest.mark.compare_frameworks(
    model="model.onnx", frameworks=["onnxrt"], golden=True, seed=7, val_range=(0.2, 0.3)
)
@pytest.mark.shapes({"x": (2, 4)})
def test_marker():
    pass

def test_fixture_per_input(golden, runners):
    runner = runners.onnxrt("model.onnx")
    feed = golden.inputs(runner, shapes={"x": (2, 4)}, val_range={"x": (0.2, 0.3)})
    golden.check(runner.infer(feed))

def test_fixture_named(golden, runners):
    runner = runners.onnxrt("model.onnx")
    feed = golden.inputs(runner, name="low", shapes={"x": (2, 4)}, val_range=(-1, 0), seed=3)
    golden.check(runner.infer(feed), name="low")
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_golden_metadata_says_how_its_inputs_were_made(pytester, xdist):
    """A golden's metadata records the seed and value range its synthetic inputs came from,
    for the marker's golden and the fixture's alike; a range given per input as a dict too."""
    onnx.save(layer_chain((4, 3)), str(pytester.path / "model.onnx"))
    pytester.makepyfile(test_meta=META_TESTS)
    run(pytester, "--trt-update-goldens", "--trt-report=r.json", *xdist).assert_outcomes(passed=3)
    folder = pytester.path / "goldens" / "test_meta"
    metas = {path.name: read_golden(path).meta for path in folder.glob("*.safetensors")}
    marker = metas["test_marker[onnxrt-fp32-bs2].safetensors"]
    per_input = metas["test_fixture_per_input.safetensors"]
    named = metas["test_fixture_named.low.safetensors"]
    assert (marker["name"], marker["seed"], marker["val_range"]) == (None, 7, [0.2, 0.3])
    assert (per_input["name"], per_input["seed"]) == (None, 1)
    assert per_input["val_range"] == {"x": [0.2, 0.3]}
    assert (named["name"], named["seed"], named["val_range"]) == ("low", 3, [-1.0, 0.0])
    assert all(meta["shapes"] == {"x": [2, 4]} for meta in metas.values())
    stored = read_golden(folder / "test_fixture_per_input.safetensors").inputs["x"]
    assert stored.min() >= 0.2 and stored.max() <= 0.3
    # the JSON report describes every runner built, those of the golden fixture's tests too
    report = json.loads((pytester.path / "r.json").read_text())
    ((key, described),) = report["runners"].items()
    assert described == marker["runner"] == per_input["runner"]
    assert {(o["target_runner"], o["reference_runner"]) for o in report["outputs"]} == {
        (key, None)  # a golden is no runner: its file is in the record's reference
    }
    run(pytester, *xdist).assert_outcomes(passed=3)
