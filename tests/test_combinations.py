"""Every pair of the modes a compare_frameworks item combines, tested by construction (issue 45).

The modes are MODES below, each a switch of the scenario (a marker argument, an option, a
phase of runs). REFUSED lists the pairs the plugin refuses at collection, each with the words
of its message that name both. `pairwise_rows` builds rows of modes greedily and
deterministically (a row starts from the first pair not yet covered, then takes, mode by
mode, the switch that covers the most pairs not yet covered, off where on covers no more,
never completing a refused pair) until every two modes have been seen in all four on/off
combinations: 11 rows for the 11 modes (4 of them with `-n 2`), each pair that works run
together at least once (all pairs, not all products).

Each row runs a suite of two tests as a user does, in phases: the goldens written, a
calibration, a baseline report (the report of the run before), the unchanged model, then the
target's model with a planted change. What the user sees is asserted: the unchanged model
passes, every item reported with every iteration compared (the record's `iterations`), drift
found none; the planted change fails exactly the items whose target runs the changed model
(in the merged report of the shards too) and fails the drift gate. Each refused pair runs
alone and errors at setup, before anything runs, with a message naming both.

Time: about 2 minutes of one core (70 s on 2 cores with -n 2) for the 11 rows and 5
refusals (each row's runs in sequence, 2 to 8 pytest runs per row; the rows with `-n 2`
most of it), in the test command; CI's supported ends leave the rows out (the pairs are
this suite's to check, the pytest and Python versions of each scenario the ends').
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable

import numpy as np
import onnx
import pytest

from pytest_trtcompare.goldens import write_polygraphy_inputs, write_polygraphy_outputs

from .onnx_models import where_scaled
from .pytester_helpers import run

MODES = (
    "golden",  # golden=True: the goldens written first, then the reference
    "iterations",  # iterations=3
    "isolate",  # isolate=True: the runners in worker processes
    "xdist-n2",  # -n 2 on every run (the ids' word the supported ends' -k leaves out)
    "fp64",  # tolerance=Tolerance(check="fp64")
    "calibrate",  # --trt-calibrate=4 first, the tolerance file read after
    "drift",  # a baseline report, then --trt-baseline --trt-drift=fail
    "per_layer",  # outputs="all"
    "shapes",  # two shape sets
    "reference_file",  # reference= Polygraphy JSON (with inputs= its inputs)
    "shards",  # pytest-split --splits 2, each shard's report merged by trtcompare merge
)

#: pairs refused at collection: the words of the message that name both
REFUSED = {
    frozenset({"fp64", "golden"}): ["check='fp64'", "not with golden=True"],
    frozenset({"fp64", "reference_file"}): ["check='fp64'", "not with reference= saved outputs"],
    frozenset({"fp64", "per_layer"}): ["check='fp64'", 'outputs="all"'],
    frozenset({"golden", "reference_file"}): ["reference=...", "golden=True"],
    frozenset({"shapes", "reference_file"}): ["@pytest.mark.shapes gives 2 shape sets", "ref.json"],
}
ITERATIONS = 3
CALIBRATE = 4


def pairwise_rows(modes: tuple[str, ...], refused: Iterable[frozenset[str]]) -> list[frozenset]:
    """Rows (the modes switched on) that hold every pair of values of every two modes, none
    holding a refused pair."""
    refused = set(refused)
    wanted = {
        ((a, x), (b, y))
        for a, b in itertools.combinations(modes, 2)
        for x in (False, True)
        for y in (False, True)
        if not (x and y and frozenset({a, b}) in refused)
    }
    rows: list[frozenset] = []
    while wanted:
        (first, x), (second, y) = min(wanted)  # a total order: the same rows in every process
        values = {first: x, second: y}
        for mode in modes:
            if mode in values:
                continue
            scores = {}
            for value in (True, False):
                if value and any(frozenset({mode, m}) in refused for m, v in values.items() if v):
                    continue
                scores[value] = sum(
                    ((m, values[m]), (mode, value)) in wanted
                    or ((mode, value), (m, values[m])) in wanted
                    for m in values
                )
            values[mode] = max(scores, key=lambda value: (scores[value], not value))
        covered = {((a, values[a]), (b, values[b])) for a, b in itertools.combinations(modes, 2)}
        wanted -= covered
        rows.append(frozenset(m for m, v in values.items() if v))
    return rows


ROWS = pairwise_rows(MODES, REFUSED)


def test_the_rows_cover_every_pair_and_no_refused_one():
    for a, b in itertools.combinations(MODES, 2):
        for x, y in itertools.product((False, True), repeat=2):
            if x and y and frozenset({a, b}) in REFUSED:
                assert not any({a, b} <= row for row in ROWS)
                continue
            assert any(((a in row) == x) and ((b in row) == y) for row in ROWS), (a, x, b, y)
    assert len(ROWS) <= 12


def _model(a: float) -> onnx.ModelProto:
    """y = where(x < 0.4, x * a, x) over a dynamic batch of 4 features."""
    return where_scaled(a, ["n", 4])


def _saved(path, feeds, per_layer: bool) -> None:
    """ref.json as `polygraphy run --save-outputs` writes it (with --onnx-outputs mark all
    per layer) for the model with a = 2."""
    outputs = []
    for feed in feeds:
        x = feed["x"]
        tensors = {"c": x < 0.4, "m": x * np.float32(2), "y": np.where(x < 0.4, x * 2, x)}
        outputs.append(tensors if per_layer else {"y": tensors["y"]})
    write_polygraphy_outputs(path / "ref.json", outputs)


def _suite(row: frozenset) -> str:
    arguments = ['model="m.onnx"', 'frameworks=["onnxrt", "onnxref"]']
    arguments.append('models={"onnxref": "t.onnx"}')  # the target's model, where changes go
    if "golden" in row:
        arguments.append("golden=True")
    if "iterations" in row:
        arguments.append(f"iterations={ITERATIONS}")
    if "isolate" in row:
        arguments.append("isolate=True")
    if "fp64" in row:
        arguments.append('tolerance=Tolerance(check="fp64")')
    if "per_layer" in row:
        arguments.append('outputs="all"')
    if "reference_file" in row:
        arguments.append('reference="ref.json", inputs="inputs.json"')
    sets = '{"x": (1, 4)}, {"x": (3, 4)}' if "shapes" in row else '{"x": (2, 4)}'
    tests = []
    for name, seed in (("test_a", 1), ("test_b", 7)):
        tests.append(
            f"@pytest.mark.compare_frameworks({', '.join(arguments)}, seed={seed})\n"
            f"@pytest.mark.shapes({sets})\n"
            f"def {name}(comparison):\n    pass\n"
        )
    return "import pytest\nfrom pytest_trtcompare import Tolerance\n\n\n" + "\n\n".join(tests)


def _records(pytester, name: str) -> list[dict]:
    return json.loads((pytester.path / name).read_text())["outputs"]


def _run(pytester, row, *args):
    xdist = ("-n", "2") if "xdist-n2" in row else ()
    return run(pytester, "-rfEs", *args, *xdist)


def _items(row: frozenset) -> tuple[int, int]:
    """(the suite's items, those whose target runs t.onnx, where a change is planted)."""
    sets = 2 if "shapes" in row else 1
    targets = 2 if {"golden", "reference_file"} & row else 1  # else onnxref against onnxrt
    return 2 * targets * sets, 2 * sets


def _checked(pytester, row, *args, report: str):
    """One run of the suite, as both shards and their merge under `shards`: the outcome
    counts (summed), the worst exit status, the (merged) report's records, the runs."""
    if "shards" not in row:
        result = _run(pytester, row, f"--trt-report={report}", *args)
        return result.parseoutcomes(), result.ret, _records(pytester, report), [result]
    from pytest_trtcompare.cli import main

    results = [
        _run(
            pytester,
            row,
            "--splits",
            "2",
            "--group",
            group,
            f"--trt-report={group}-{report}",
            *args,
        )
        for group in ("1", "2")
    ]
    shards = [str(pytester.path / f"{group}-{report}") for group in ("1", "2")]
    assert main(["merge", *shards, "-o", str(pytester.path / report), "-q"]) == 0
    counts: dict[str, int] = {}
    for result in results:
        for key, value in result.parseoutcomes().items():
            if key != "deselected":  # each shard deselects the other's items
                counts[key] = counts.get(key, 0) + value
    return counts, max(result.ret for result in results), _records(pytester, report), results


def _prepared(pytester, row: frozenset) -> None:
    onnx.save(_model(2.0), pytester.path / "m.onnx")
    onnx.save(_model(2.0), pytester.path / "t.onnx")
    if "reference_file" in row:
        rng = np.random.default_rng(3)
        count = ITERATIONS if "iterations" in row else 1
        feeds = [{"x": rng.random((2, 4), dtype=np.float32)} for _ in range(count)]
        write_polygraphy_inputs(pytester.path / "inputs.json", feeds)
        _saved(pytester.path, feeds, "per_layer" in row)
    pytester.makepyfile(test_suite=_suite(row))


def _name(row: frozenset) -> str:
    return "+".join(mode for mode in MODES if mode in row) or "none"


@pytest.mark.parametrize("row", ROWS, ids=_name)
def test_every_pair_of_modes_works_together(pytester, row):
    _prepared(pytester, row)
    items, changed = _items(row)
    baseline = ("--trt-report=base.json",) if "drift" in row else ()  # the last good run's
    if "golden" in row:
        written = _run(pytester, row, "--trt-update-goldens", *baseline)
        assert written.ret == 0, written.stdout.str()
        written.assert_outcomes(passed=items)
    if "calibrate" in row:
        calibrated = _run(pytester, row, f"--trt-calibrate={CALIBRATE}", *baseline)
        assert calibrated.ret == 0, calibrated.stdout.str()
        calibrated.stdout.fnmatch_lines(["*= calibration =*"])
        written = "nothing calibrated" if "fp64" in row else "written trtcompare-tolerances.toml"
        calibrated.stdout.fnmatch_lines([f"*{written}*"])
    gate = ()
    if "drift" in row:
        if not {"golden", "calibrate"} & row:
            assert _run(pytester, row, *baseline).ret == 0
        gate = ("--trt-baseline=base.json", "--trt-drift=fail")

    counts, status, records, results = _checked(pytester, row, *gate, report="unchanged.json")
    assert (status, counts) == (0, {"passed": items}), results[0].stdout.str()
    assert len({record["nodeid"] for record in records}) == items  # every item reported
    iterations = ITERATIONS if "iterations" in row else 1
    assert {record["iterations"] for record in records} == {iterations}
    if "drift" in row:
        for result in results:
            result.stdout.fnmatch_lines(["against base.json: 0 of * outputs drifted*"])

    onnx.save(_model(2.2), pytester.path / "t.onnx")  # the planted change
    counts, status, records, results = _checked(pytester, row, *gate, report="planted.json")
    text = "".join(result.stdout.str() for result in results)
    assert status == 1, text
    assert counts.get("failed") == changed and counts.get("passed", 0) == items - changed, counts
    failing = {record["nodeid"] for record in records if not record["passed"]}
    assert failing and all("onnxref" in nodeid for nodeid in failing), failing
    if "drift" in row:
        assert "drift fails the session (--trt-drift=fail): exit status 1" in text


@pytest.mark.parametrize("pair", sorted(REFUSED, key=sorted), ids=_name)
def test_a_refused_pair_errors_at_setup_naming_both(pytester, pair):
    _prepared(pytester, pair)
    result = _run(pytester, pair)
    result.assert_outcomes(errors=2)  # each test of the suite, before anything ran
    text = result.stdout.str()
    assert "INTERNALERROR" not in text and "Traceback" not in text
    for words in REFUSED[pair]:
        assert words in text, (words, text)
