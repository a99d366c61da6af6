"""session/option_table.py declares every option once: the flags and ini keys registered,
the marker arguments and call keywords taken, the `trtcompare` flags and the manual's option
notes (docs/reference/option-notes.md) all come from (or are checked against) it; an option
declared in a test module is a flag, an ini key, a marker argument and a call keyword with
nothing else written."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from pytest_trtcompare.cli import main
from pytest_trtcompare.session.option_table import OPTIONS, Option, resolve
from tests.pytester_helpers import XDIST_SLOW, run

NOTES = (Path(__file__).resolve().parents[1] / "docs" / "reference" / "option-notes.md").read_text()


def _options_reference() -> str:
    """The table of options and ini keys of docs/reference/option-notes.md (the table made
    from OPTIONS, docs/reference/options.md, is checked by tests/test_docs_reference.py)."""
    start = NOTES.index("| option / ini | meaning | state |")
    return NOTES[start : NOTES.index("\n\n", start)]


@pytest.mark.parametrize("declared", OPTIONS, ids=lambda o: o.name)
def test_the_option_notes_name_each_flag_and_ini_key(declared):
    reference = _options_reference()
    for name in (declared.flag, declared.ini):
        if name is not None:
            assert re.search(rf"`{re.escape(name)}[`=\s]", reference), f"the notes lack {name}"


def test_every_flag_and_ini_key_of_the_option_notes_is_declared():
    reference = _options_reference()
    declared = {o.flag for o in OPTIONS} | {o.ini for o in OPTIONS}
    written = set(re.findall(r"`(--trt-[a-z0-9-]+)", reference))
    written |= set(re.findall(r"`(trtcompare_[a-z0-9_]+)`", reference))
    assert written <= declared, sorted(written - declared)


def test_pytest_registers_every_declared_flag_and_ini_key(pytester):
    result = pytester.runpytest("--help")
    text = result.stdout.str()
    for declared in OPTIONS:
        for name in (declared.flag, declared.ini):
            assert name is None or name in text, name


@pytest.mark.parametrize(
    ("given", "flag", "ini", "expected"),
    [
        (None, None, None, "strict"),
        (None, None, "relaxed", "relaxed"),
        (None, "relaxed", "strict", "relaxed"),
        ("strict", "relaxed", "relaxed", "strict"),  # the test's own value first
    ],
)
def test_a_test_value_wins_over_the_flag_over_the_ini_over_the_default(given, flag, ini, expected):
    assert resolve("shape_check", given, {"shape_check": (flag, ini)}) == expected


def test_an_option_that_overrides_puts_its_flag_before_the_test_value():
    assert resolve("layers", "gate", {"layers": ("report", None)}) == "report"
    assert resolve("layers", "gate", {"layers": (None, "report")}) == "gate"
    assert resolve("layers", None, {}) == "gate"


def test_trtcompare_diff_and_check_offer_the_shape_check(capsys):
    for command in ("diff", "check"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--shape-check {strict,relaxed}" in capsys.readouterr().out


def test_trtcompare_diff_compares_with_a_relaxed_shape_check(tmp_path, capsys):
    np = pytest.importorskip("numpy")
    np.savez(tmp_path / "a.npz", y=np.ones((1, 3), np.float32))
    np.savez(tmp_path / "b.npz", y=np.ones((3,), np.float32))
    assert main(["diff", str(tmp_path / "a.npz"), str(tmp_path / "b.npz")]) == 1
    assert "shape" in capsys.readouterr().out
    relaxed = ["diff", str(tmp_path / "a.npz"), str(tmp_path / "b.npz"), "--shape-check=relaxed"]
    assert main(relaxed) == 0
    assert "compared after squeezing actual (1, 3) to (3,)" in capsys.readouterr().out


#: A plugin module that declares one more option, as a project would: all it takes.
_DECLARING_PLUGIN = """
from pytest_trtcompare.session.option_table import Option, declare

declare(
    Option(
        "frobnicate",
        "how hard to frobnicate",
        flag="--trt-frobnicate",
        ini="trtcompare_frobnicate",
        choices=("gently", "hard"),
        default="gently",
        marker=True,
        call=True,
        cli=("diff",),
    )
)
"""

_TESTS = """
import numpy as np
import pytest


@pytest.mark.compare_frameworks(model="m.onnx", frameworks=["onnxrt"], frobnicate="hard")
def test_marker_takes_it(comparison):
    assert comparison.passed


@pytest.mark.compare_frameworks(model="m.onnx", frameworks=["onnxrt"], frobnicate="wildly")
def test_marker_checks_it(comparison):
    pass


def test_call_takes_it(compare):
    compare(np.ones(3), np.ones(3), frobnicate="gently")


def test_call_checks_it(compare):
    compare(np.ones(3), np.ones(3), frobnicate="wildly")
"""


@pytest.fixture
def declaring_project(pytester):
    from tests.onnx_models import where_scaled

    pytester.makepyfile(frob_option=_DECLARING_PLUGIN, test_frob=_TESTS)
    (pytester.path / "m.onnx").write_bytes(where_scaled(2.0, [4]).SerializeToString())
    pytester.syspathinsert()
    yield pytester
    sys.modules.pop("frob_option", None)
    OPTIONS[:] = [o for o in OPTIONS if o.name != "frobnicate"]


@pytest.mark.scenario
@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_an_option_declared_in_a_test_module_is_a_flag_ini_key_marker_argument_and_keyword(
    declaring_project, xdist
):
    result = run(declaring_project, "-p", "frob_option", "-rA", "--trt-frobnicate=hard", *xdist)
    result.assert_outcomes(passed=2, failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_marker_checks_it: @pytest.mark.compare_frameworks(frobnicate=...) got "
            "'wildly' (str); it takes 'gently' or 'hard'",
            "*test_call_checks_it*frobnicate='wildly': takes 'gently' or 'hard'*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


@pytest.mark.scenario
def test_a_declared_options_flag_and_ini_key_are_checked(declaring_project):
    help_text = declaring_project.runpytest("-p", "frob_option", "--help").stdout.str()
    assert "--trt-frobnicate={gently,hard}" in help_text
    assert "trtcompare_frobnicate" in help_text
    bad_flag = declaring_project.runpytest("-p", "frob_option", "--trt-frobnicate=wildly")
    assert bad_flag.ret == pytest.ExitCode.USAGE_ERROR
    bad_flag.stderr.fnmatch_lines(["*--trt-frobnicate*invalid choice: 'wildly'*"])
    bad_ini = declaring_project.runpytest("-p", "frob_option", "-o", "trtcompare_frobnicate=wildly")
    assert bad_ini.ret == pytest.ExitCode.USAGE_ERROR
    bad_ini.stderr.fnmatch_lines(["*ini trtcompare_frobnicate = 'wildly': takes gently or hard*"])


def test_a_declared_option_reaches_trtcompare(capsys):
    OPTIONS.append(Option("frobnicate", "how hard", choices=("gently", "hard"), cli=("diff",)))
    try:
        with pytest.raises(SystemExit):
            main(["diff", "--help"])
    finally:
        OPTIONS.pop()
    assert "--frobnicate {gently,hard}" in capsys.readouterr().out


def test_each_ini_key_says_what_it_is_in_the_help(pytester):
    text = pytester.runpytest("--help").stdout.str()
    assert "default of None" not in text
    assert "per-precision tolerances, one 'PRECISION:" in " ".join(text.split())
