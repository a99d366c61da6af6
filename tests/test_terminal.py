"""The terminal (issue 26): failures and the accuracy summary fit an 80-column terminal; -q
shortens the summary to the failing outputs and the totals, -qq leaves it out; --tb=line
prints one line per failure and --tb=no none; --trt-strict-goldens failing the session shows
in pytest's last line. With and without pytest-xdist."""

from __future__ import annotations

import json
import re

import pytest

from pytest_trtcompare.session.layout import abbreviate, fit_text, wrap

from .onnx_models import layer_chain
from .pytester_helpers import XDIST, XDIST_SLOW, run

CONFTEST = """
import onnx
from chain_model import MODEL

def pytest_configure(config):
    onnx.save(MODEL, str(config.rootpath / "chain.onnx"))
"""

TESTS = """
import os
import numpy as np
import pytest

TINY = {"atol": 1e-12, "rtol": 1e-12}
RNG = np.random.default_rng(0)
MAP = RNG.standard_normal((2, 3, 64, 64)).astype(np.float32)
NOISE = 1e-3 * RNG.standard_normal(MAP.shape).astype(np.float32)
NAME = "feature_map_of_the_backbone"
HEAD = "logits_of_the_classifier_head"
PROBS = "probabilities_after_the_softmax_layer"


@pytest.mark.compare_frameworks(
    model="chain.onnx", frameworks=["onnxrt", "onnxref"], outputs="all", tolerance=TINY
)
@pytest.mark.shapes({"x": (2, 16)})
def test_layers():
    pass


@pytest.mark.compare_frameworks(
    model="chain.onnx", frameworks=["onnxrt", "onnxref"], tolerance=TINY
)
@pytest.mark.shapes({"x": (2, 16)})
def test_outputs():
    pass


def test_feature_map(compare):
    compare({NAME: MAP + NOISE}, {NAME: MAP})


def test_never_recorded(golden):
    golden.check({HEAD: np.arange(4.0)})


def test_drifted(golden):
    drift = float(os.environ.get("DRIFT", "0"))
    golden.check({HEAD: np.arange(4.0) + drift})


def test_a_passing_comparison_with_a_long_descriptive_name_for_the_summary(compare):
    compare({"probabilities_after_the_softmax_layer": MAP}, {PROBS: MAP})
"""
FAILED_TESTS = 5


@pytest.fixture
def suite(pytester, monkeypatch):
    """Five failures of every kind (per-layer and model outputs of compare_frameworks, a 4-D
    output of `compare`, a missing and a drifted golden) and a pass, in 80 columns."""
    pytester.makepyfile(
        chain_model="import onnx\nMODEL = onnx.load_from_string("
        f"{layer_chain().SerializeToString()!r})\n"
    )
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_term=TESTS)
    run(pytester, "--trt-update-goldens", "-k", "drifted").assert_outcomes(passed=1, deselected=5)
    monkeypatch.setenv("DRIFT", "0.5")
    monkeypatch.setenv("COLUMNS", "80")
    return pytester


def _too_wide(lines: list[str], width: int = 80) -> list[str]:
    """Lines wider than the terminal, but for pytest's header and its -v lines (test ids), and
    for a line that is one word (a path), or one word after pytest's 'E' marker."""
    return [
        line
        for line in lines
        if len(line) > width
        and len(line.removeprefix("E ").split()) > 1
        and not line.startswith(_PYTEST_HEADER)
        and not re.search(r"\[ *\d+%\]", line)
    ]


_PYTEST_HEADER = ("platform ", "rootdir: ", "plugins: ", "metadata: ", "hypothesis profile")


def _section(lines: list[str], title: str) -> list[str]:
    """The lines of one `=== title ===` section, up to the next separator or the end."""
    heads = [i for i, line in enumerate(lines) if re.fullmatch(rf"=+ {title} =+", line)]
    if not heads:
        return []
    body = lines[heads[0] + 1 :]
    end = next((i for i, line in enumerate(body) if re.fullmatch(r"=+ .* =+", line)), len(body))
    return [line for line in body[:end] if not _LAST_LINE.fullmatch(line)]


_LAST_LINE = re.compile(r"\d+ (passed|failed).* in [\d.]+s( \(.*\))?")  # with -q: no '==='


def _failing_outputs(pytester) -> int:
    """The failing outputs (and failing layers that decide) of the JSON report."""
    document = json.loads((pytester.path / "report.json").read_text())
    return sum(1 for r in document["outputs"] if not r["passed"] and r["gates"])


@pytest.mark.parametrize("xdist", XDIST)
def test_failures_and_the_summary_fit_80_columns(suite, xdist):
    result = run(suite, *xdist)
    result.assert_outcomes(failed=FAILED_TESTS, passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    lines = result.stdout.lines
    assert not _too_wide(lines), "\n".join(_too_wide(lines))
    out = result.stdout.str()
    for expected in (
        "worst elements:",  # the tables moved under their label
        "first divergence (topological order):",
        "  pytest --trt-update-goldens test_term.py::test_never_recorded",
        "if the new outputs are right, update the golden with:",
    ):
        assert expected in out, expected
    assert "All traceback entries are hidden" not in out
    summary = _section(lines, "accuracy summary")
    assert summary[0].startswith("margin") and len(summary) > 6


def test_a_wide_terminal_keeps_the_report_as_it_is(suite, monkeypatch):
    monkeypatch.setenv("COLUMNS", "240")
    result = run(suite)
    result.assert_outcomes(failed=FAILED_TESTS, passed=1)
    assert any(re.match(r"E +worst elements: +index +actual", line) for line in result.stdout.lines)
    header = _section(result.stdout.lines, "accuracy summary")[0]
    assert re.fullmatch(r"margin +test :: output +worst error +tolerance", header)


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_quiet_summary_is_the_failing_outputs_and_the_totals(suite, xdist):
    result = run(suite, "-q", "--trt-report=report.json", *xdist)
    result.assert_outcomes(failed=FAILED_TESTS, passed=1)
    summary = _section(result.stdout.lines, "accuracy summary")
    failing = _failing_outputs(suite)
    assert len(summary) == failing + 1, summary
    assert all(" FAIL " in line for line in summary[:-1]), summary
    assert re.fullmatch(rf"\d+ outputs: {failing} failing, \d+ within tolerance", summary[-1])
    assert not _too_wide(result.stdout.lines)
    assert "runners built" not in result.stdout.str()


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_very_quiet_prints_no_accuracy_summary(suite, xdist):
    result = run(suite, "-qq", "--trt-report=report.json", *xdist)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "accuracy summary" not in result.stdout.str()
    assert (suite.path / "report.json").is_file()  # written all the same


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_verbose_summary_lists_every_output(suite, xdist):
    result = run(suite, "-v", "--trt-report=report.json", *xdist)
    result.assert_outcomes(failed=FAILED_TESTS, passed=1)
    document = json.loads((suite.path / "report.json").read_text())
    summary = _section(result.stdout.lines, "accuracy summary")
    listed = "\n".join(summary)
    for r in document["outputs"]:  # the test id may be shortened in its middle, not its start
        assert r["test"][:20] in listed and f":: {r['node'] or r['output']}" in listed, r
    assert "more (all of them with -v)" not in listed
    assert not _too_wide(result.stdout.lines)


@pytest.mark.parametrize("xdist", XDIST)
def test_tb_line_prints_one_line_per_failure(suite, xdist):
    result = run(suite, "--tb=line", *xdist)
    result.assert_outcomes(failed=FAILED_TESTS, passed=1)
    # xdist heads each failure with the worker's line ('[gw0] linux -- Python ...')
    failures = [
        line for line in _section(result.stdout.lines, "FAILURES") if not line.startswith("[gw")
    ]
    assert len(failures) == FAILED_TESTS, failures
    assert all(re.match(r"\S+\.py:\d+: ", line) for line in failures), failures
    by_test = dict(zip(_failed_ids(result), failures, strict=True))
    missing = by_test["test_never_recorded"]
    assert missing.endswith(
        "create it with: pytest --trt-update-goldens test_term.py::test_never_recorded"
    )
    feature_map = by_test["test_feature_map"]
    assert re.search(
        r"test_term\.py:\d+: OutputMismatchError: feature_map_of_the_backbone: \d+ / 24576 "
        r"elements exceed elemwise tolerance atol=1e-05 \(default\) rtol=1e-05 \(default\), "
        r"worst [\d.]+x the allowed error \(abs [\d.e-]+\)$",
        feature_map,
    ), feature_map
    outputs = by_test["test_outputs[onnxref-fp32-bs2]"]
    assert re.search(r"test_term\.py:\d+: onnxref-fp32 vs onnxrt-fp32: y: ", outputs), outputs
    layers = by_test["test_layers[onnxref-fp32-bs2]"]
    assert re.search(
        r": onnxref-fp32 vs onnxrt-fp32: \d+ of 12 layers fail, first \w+ \(\w+\) -> \w+: "
        r"\d+ / \d+ elements exceed",
        layers,
    ), layers


def _failed_ids(result: pytest.RunResult) -> list[str]:
    """The failed tests' names, in the order of the short summary (that of the failures)."""
    return [
        line.split("::", 1)[1].split(" - ")[0]
        for line in result.stdout.lines
        if line.startswith("FAILED ")
    ]


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_tb_no_prints_no_failure_and_one_summary_line_each(suite, xdist):
    result = run(suite, "--tb=no", *xdist)
    result.assert_outcomes(failed=FAILED_TESTS, passed=1)
    assert not _section(result.stdout.lines, "FAILURES")
    failed = [line for line in result.stdout.lines if line.startswith("FAILED ")]
    assert len(failed) == FAILED_TESTS
    assert not _too_wide(result.stdout.lines)


ALL_PASS = """
import numpy as np

def test_a_passing_comparison_with_a_long_descriptive_name_for_the_summary(compare):
    x = np.linspace(0, 1, 50)
    compare({"probabilities_after_the_softmax_layer": x, "logits": x}, {
        "probabilities_after_the_softmax_layer": x + 1e-7, "logits": x})
"""


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize(("verbosity", "lines"), [([], 8), (["-q"], 1), (["-qq"], 0)])
def test_an_all_pass_run_prints_a_short_summary(pytester, monkeypatch, xdist, verbosity, lines):
    """The table of passing outputs by default (too wide for one line a row: two header
    lines, then each row in three: the test, ':: output', the errors), only the totals with
    -q, nothing with -qq."""
    monkeypatch.setenv("COLUMNS", "80")
    pytester.makepyfile(test_pass=ALL_PASS)
    result = run(pytester, *verbosity, *xdist)
    assert result.ret == 0  # (-qq prints no last line for assert_outcomes to read)
    summary = _section(result.stdout.lines, "accuracy summary")
    rows = [line for line in summary if line.strip()]
    assert len(rows) == lines, summary
    if verbosity == ["-q"]:
        assert rows == ["2 outputs: 0 failing, 2 within tolerance"]
    assert not _too_wide(result.stdout.lines)


STRICT = """
import numpy as np

def test_a(golden):
    golden.check({'y': np.ones(3)})
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_strict_goldens_failing_the_session_shows_in_the_last_line(pytester, xdist):
    pytester.makepyfile(test_s=STRICT + STRICT.replace("test_a", "test_b"))
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=2)
    pytester.makepyfile(test_s=STRICT)
    result = run(pytester, "--trt-strict-goldens", *xdist)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "  unused goldens fail the session (--trt-strict-goldens): exit status 1",
            "=*= 1 passed, 1 unused golden (--trt-strict-goldens) in * =*=",
        ]
    )
    result = run(pytester, "-qq", "--trt-strict-goldens", *xdist)  # the reason, even with -qq
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*unused goldens fail the session (--trt-strict-goldens)*"])
    result = run(pytester, *xdist)  # reported only
    assert result.ret == 0 and "unused golden (" not in result.stdout.lines[-1]


# -- the layout, alone ------------------------------------------------------------------------
REPORT = """\
y (float32 vs float32, shape (2, 3, 64, 64)): 9 / 24576 elements (0.0366%) exceed
  greatest abs error 0.004102 at (1, 2, 63, 61): actual -1.20401525 expected -1.19991326 \
(rel 0.003419)
  worst elements:  index                 actual       expected    abs err    rel err  ÷ allowed
                   (1, 2, 63, 61)   -1.20401525    -1.19991326   0.004102   0.003419       1.4x
                   (0, 0, 0, 1)     0.482666016     0.48381704   0.001151   0.002379      1.15x
                   (more with -v)
  error histogram (log10 |abs err|):
                   0          8   0.1% █
        [1e-3, 1e-2)        145   1.8% ████████████████████████████████  ← atol
golden g.safetensors does not exist (nothing was written); create it with:
  pytest --trt-update-goldens 'tests/a/rather/long/path/to/the/test_module.py::test_id[fp16-bs8]'"""


def test_fit_text_keeps_every_word_and_the_columns():
    fitted = fit_text(REPORT, 72)
    lines = fitted.split("\n")
    command = "  pytest --trt-update-goldens 'tests/a/rather/long/path/to/the/test_module.py::"
    assert [line for line in lines if len(line) > 72] == [line for line in lines if command in line]
    assert fitted.split() == REPORT.split()  # layout only: every word, in its order
    assert "at (1, 2, 63, 61):" in fitted  # an index never breaks
    table = lines[lines.index("  worst elements:") + 1 : lines.index("  worst elements:") + 5]
    assert table[0].startswith("    index ") and table[3] == "    (more with -v)"
    ends = {len(row) for row in table[:3]}  # right-aligned columns end together
    assert len(ends) == 1, table
    assert fit_text(REPORT, 200) == REPORT


def test_wrap_and_abbreviate():
    assert wrap("  a b c", 80) == ["  a b c"]
    assert wrap("  alpha beta gamma delta", 14) == ["  alpha beta", "    gamma", "    delta"]
    assert wrap("/a/very/long/path/that/cannot/break", 10) == [
        "/a/very/long/path/that/cannot/break"
    ]
    assert abbreviate("test_model[fp16-bs8] :: logits", 16) == "test_mod… logits"
    assert len(abbreviate("x" * 100, 20)) == 20 and abbreviate("short", 20) == "short"


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_tb_line_points_at_the_call_of_an_error_of_ours_in_a_body(pytester, xdist):
    """--tb=line prints the line of the test that called us for our errors in a body, as a
    mismatch's line does, not the test's `def` line."""
    pytester.makepyfile(
        test_calls="""
        from pytest_trtcompare.plugin import CompareFixture


        def test_tolerance(compare):
            values = [1.0]
            compare(values, values, atol=-1)


        def test_constructed():
            values = [1.0]
            CompareFixture()(values, values)
        """
    )
    result = run(pytester, "--tb=line", *xdist)
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert "test_calls.py:6: ToleranceError: atol must be finite and >= 0, got -1.0" in text
    assert "test_calls.py:11: TrtCompareError: compare: this CompareFixture belongs to" in text
