"""What a user sees from pytest runs and `trtcompare` commands, dumped for a diff between two
checkouts of the package (issue 46 promised nothing else moves).

Run: python bench/run_differential.py /tmp/before > before.txt
     python bench/run_differential.py $PWD > after.txt
     diff before.txt after.txt

PACKAGE_ROOT is the folder holding the `pytest_trtcompare` package to run (it goes first on
PYTHONPATH); the examples and scenarios are this checkout's, the same for both. The
catalogue: the example suite at fp32 and at fp16,bf16 (with a JSON report and JUnit XML),
a scenario file of planted failures and user mistakes (a failing compare, a changed golden,
a missing golden, a typo in a marker argument, a wrong type, a bad tolerance, a runner that
cannot run here, the fp64 check, several iterations, per layer), usage errors of flags and
ini keys, then every `trtcompare` command on the reports and goldens those runs made, and
their misuse. Durations, timings and temporary paths are replaced by placeholders.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

SCENARIOS = """
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def _model(scale):
    w = numpy_helper.from_array(np.full((4, 4), scale, np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Tanh", ["h"], ["y"])]
    graph = helper.make_graph(
        nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])], [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


MODEL = _model(0.5)


@pytest.mark.compare_frameworks(model=MODEL, frameworks=["onnxrt", "onnxref"], iterations=3)
@pytest.mark.shapes({"x": (2, 4)})
def test_passes_three_iterations(comparison):
    assert comparison.passed


@pytest.mark.compare_frameworks(model=MODEL, frameworks=["onnxrt", "onnxref"], golden=True)
@pytest.mark.shapes({"x": (2, 4)})
def test_golden_missing():
    pass


@pytest.mark.compare_frameworks(model=MODEL, frameworks=["onnxrt", "onnxref"], outputs="all")
@pytest.mark.shapes({"x": (2, 4)})
def test_per_layer():
    pass


@pytest.mark.compare_frameworks(
    model=MODEL, frameworks=["onnxrt", "onnxref"], tolerance={"check": "fp64"}
)
@pytest.mark.shapes({"x": (2, 4)})
def test_fp64_check():
    pass


@pytest.mark.compare_frameworks(model=MODEL, frameworks=["onnxrt", "onnxref"], shape_chek="strict")
def test_marker_typo():
    pass


@pytest.mark.compare_frameworks(model=MODEL, frameworks=["onnxrt", "onnxref"], iterations="2")
def test_marker_wrong_type():
    pass


@pytest.mark.compare_frameworks(model=MODEL, frameworks=["onnxrt", "tensorflow"])
def test_unknown_framework():
    pass


@pytest.mark.compare_frameworks(model=MODEL, frameworks=["trt", "onnxrt"])
@pytest.mark.shapes({"x": (2, 4)})
def test_cannot_run_here():
    pass


@pytest.mark.compare_frameworks(model="missing.onnx", frameworks=["onnxrt", "onnxref"])
@pytest.mark.shapes({"x": (2, 4)})
def test_missing_model():
    pass


def test_compare_fails(compare):
    rng = np.random.default_rng(0)
    expected = {"logits": rng.standard_normal((16, 10)).astype(np.float32), "ids": np.arange(5)}
    actual = {"logits": expected["logits"] + 0.01 * rng.standard_normal((16, 10)).astype(
        np.float32), "ids": np.arange(5)}
    actual["logits"][3, 4] = np.nan
    compare(actual, expected, atol=1e-3, rtol=1e-3)


def test_compare_bad_tolerance(compare):
    compare({"y": np.zeros(3)}, {"y": np.zeros(3)}, atol=-1)


def test_compare_shape_check(compare):
    compare({"y": np.zeros((1, 3))}, {"y": np.zeros(3)}, shape_check="squeeze")


def test_compare_missing_output(compare):
    compare({"y": np.zeros(3)}, {"y": np.zeros(3), "z": np.ones(2)})


def test_golden_changes(golden):
    golden.check({"y": np.linspace(0, 1, 8, dtype=np.float32) * CHANGE})


def test_golden_statistics(golden):
    golden.check({"y": np.linspace(0, 1, 8, dtype=np.float32) * CHANGE}, check="mean")
"""

#: (arguments, what it is) of each pytest run of the scenario file
SCENARIO_RUNS = [
    (["--trt-update-goldens"], "goldens written"),
    ([], "checked against them"),
    (["-v", "--trt-report=s.json", "--junitxml=s.xml"], "verbose, with reports"),
    (["-q", "--trt-layers=report"], "quiet, layers reported"),
    (["-n", "2", "-p", "xdist"], "two workers"),
    (["--trt-atol=-1"], "bad flag value"),
    (["--trt-precision=fp8"], "bad precision"),
    (["--trt-frameworks="], "empty frameworks"),
    (["-o", "trtcompare_layers=bogus"], "bad ini value"),
    (["--trt-shape-check=bogus"], "bad choice"),
    (["--trt-strict-goldens", "--trt-prune-goldens"], "goldens strict and pruned"),
]


def scrub(text: str, work: Path) -> str:
    text = text.replace(str(work), "<work>").replace(str(HERE), "<repo>")
    text = re.sub(r"/tmp/[\w/.-]+", "<tmp>", text)
    text = re.sub(r"\b\d+(\.\d+)?s\b", "<s>", text)  # pytest's 'in 3.21s'
    text = re.sub(r"\(\d+:\d\d:\d\d\)", "", text)
    text = re.sub(r"\b\d+(\.\d+)? ?ms\b", "<ms>", text)
    text = re.sub(
        r"^(platform|rootdir|plugins|cachedir|configfile|created|\[gw\d\]).*$",
        r"\1 <...>",
        text,
        flags=re.M,
    )
    text = re.sub(r"gw\d", "gwN", text)
    text = re.sub(r" =+$", " ==", text, flags=re.M)  # a summary line's width follows its time
    text = re.sub(r"^metadata: .*$", "metadata <...>", text, flags=re.M)  # pytest-metadata's
    # wrapped where the times' digits end: unwrapped
    text = re.sub(
        r"^(inference time, median per test:.*)((?:\n  .*)*)",
        lambda m: m.group(1) + m.group(2).replace("\n ", ""),
        text,
        flags=re.M,
    )
    text = re.sub(r"^[.EsFx]+ +\[100%\]$", "<progress>", text, flags=re.M)  # xdist's order
    return text


def json_scrubbed(path: Path) -> str:
    timing = re.compile(
        r"(_ms|duration|time|seconds|created|timestamp|date|host|python|version|suite|written)"
    )

    def walk(value: object) -> object:
        if isinstance(value, dict):
            return {k: "<t>" if timing.search(str(k)) else walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return json.dumps(walk(json.loads(path.read_text())), indent=1, sort_keys=True)


def run(args: list[str], cwd: Path, package: Path, title: str, work: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(package), "COLUMNS": "100", "PYTHONHASHSEED": "0"}
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    print(scrub(f"===== {title}: {' '.join(args[2:])} (exit {done.returncode})", work))
    out = scrub(done.stdout, work)
    if "-n" in args:  # the workers' order varies: the lines, sorted
        out = "\n".join(sorted(out.splitlines()))
    print(out)
    if done.stderr.strip():
        print("----- stderr")
        print(scrub(done.stderr, work))


def main() -> None:
    package = Path(sys.argv[1]).resolve()
    python = sys.executable
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        shutil.copytree(HERE / "conftest_examples", work / "conftest_examples")
        (work / "pytest.ini").write_text(
            "[pytest]\naddopts = -p no:cacheprovider -rA --tb=short\n"
            "trtcompare_tolerances_file = conftest_examples/trtcompare-tolerances.toml\n"
        )
        pytest_ = [python, "-m", "pytest"]
        for extra in ([], ["--trt-precision", "fp16,bf16"]):
            run(
                [*pytest_, "conftest_examples", f"--trt-report=ex{len(extra)}.json", *extra],
                work,
                package,
                "examples",
                work,
            )
        scenarios = work / "scenarios"
        scenarios.mkdir()
        for change in ("1.0", "1.01"):
            (scenarios / "test_scenarios.py").write_text(f"CHANGE = {change}\n" + SCENARIOS)
            for extra, title in SCENARIO_RUNS:
                if change == "1.0" and title != "goldens written":
                    continue
                run(
                    [*pytest_, "scenarios", *extra],
                    work,
                    package,
                    f"scenarios x{change} {title}",
                    work,
                )
        for report in ("ex0.json", "ex2.json", "s.json"):
            if (work / report).exists():
                print(f"===== {report}")
                print(scrub(json_scrubbed(work / report), work))
        goldens = sorted((work / "scenarios").rglob("*.safetensors"))
        cli = [python, "-m", "pytest_trtcompare.cli"]
        names = [str(g) for g in goldens[:2]]
        commands = [
            ["--help"],
            ["diff", "--help"],
            ["check", "--help"],
            ["show", *names[:1]],
            ["show", "--meta", *names[:1]],
            ["diff", *names],
            ["diff", "-v", *names],
            ["diff", "--check-error-stat", "mean", *names],
            ["check", *names],
            ["check", names[0], names[0]],
            ["diff", names[0], "missing.safetensors"],
            ["diff", "--atol", "-1", *names],
            ["show", "ex0.json"],
            ["export-polygraphy", names[1], "out.json", "--inputs", "in.json"],
            ["import-polygraphy", "out.json", "back.safetensors", "--inputs", "in.json"],
            ["diff", names[1], "back.safetensors"],
            ["merge", "ex0.json", "s.json", "-o", "m.json"],
            ["drift", "ex0.json", "ex2.json"],
            ["drift", "-v", "s.json", "s.json"],
            ["tolerances", "ex0.json", "-o", "t.toml"],
            ["tolerances", "ex2.json", "-v"],
            ["merge", "nothing.json"],
            ["bogus"],
            ["diff", names[0]],
        ]
        for command in commands:
            run(cli + command, work, package, "trtcompare", work)
        for written in ("m.json", "t.toml"):
            if (work / written).exists():
                print(f"===== {written}")
                text = (work / written).read_text()
                print(
                    scrub(
                        json_scrubbed(work / written) if written.endswith(".json") else text, work
                    )
                )


if __name__ == "__main__":
    main()
