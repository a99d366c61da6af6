"""docs/troubleshooting.md quotes what the plugin prints: every entry's ```text block is found in
the output of that entry's reproduction here, and every reproduction has its entry.

Each entry (a `###` heading and the first ```text block under it) has a function in
REPRODUCTIONS, keyed by the heading, that makes the message happen: a pytest run on a small
suite (the pytester fixture, in-process) or a `trtcompare` command (its `main(argv)`, in the
suite's folder). Several entries share one pytest run: a scenario runs once per session (on
each xdist worker) and its output is kept for the others.

Both the page's block and the output are normalized the same way before the block is looked
for, and in no other way:
- the suite's folder (pytester's tmp path) reads as /home/me/suite, the page's stand-in;
- pytest's base tmp folder (where failure artifacts go) reads as /tmp/pytest-of-me/pytest-0;
- every run of whitespace reads as one space: messages are wrapped to the terminal's width
  (the page shows them wrapped at 80 columns) and pytest indents them.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from pytest_trtcompare.cli import main as trtcompare
from pytest_trtcompare.goldens import write_golden, write_polygraphy_outputs

PAGE = Path(__file__).resolve().parents[1] / "docs" / "troubleshooting.md"
SUITE = "/home/me/suite"
BASETEMP = "/tmp/pytest-of-me/pytest-0"
HEADING = re.compile(r"^### (.+?)\s*$", re.M)
BLOCK = re.compile(r"^```text\n(.*?)^```", re.M | re.S)


def page_entries(text: str) -> dict[str, str]:
    """Heading -> the first ```text block under it (before the next heading of any level)."""
    entries: dict[str, str] = {}
    starts = list(HEADING.finditer(text))
    for number, start in enumerate(starts):
        end = starts[number + 1].start() if number + 1 < len(starts) else len(text)
        body = text[start.end() : end].split("\n## ")[0]
        block = BLOCK.search(body)
        assert block, f"entry {start.group(1)!r} has no ```text block"
        assert start.group(1) not in entries, f"two entries named {start.group(1)!r}"
        entries[start.group(1)] = block.group(1)
    return entries


def squeezed(text: str) -> str:
    return " ".join(text.split())


# -- the suite the reproductions run on ------------------------------------------------------


def _model(dims: list[int | str], output: str = "y") -> onnx.ModelProto:
    """x float32[dims] -> Tanh -> y (or the output named)."""
    graph = helper.make_graph(
        [helper.make_node("Tanh", ["x"], [output], name="tanh")],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, dims)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


#: Callables for `callable:` frameworks: one a little off, one that crashes, one that hangs.
FUNCTIONS = """
import ctypes
import time

import numpy as np


def off(feed):
    return {"y": np.tanh(feed["x"]) + np.float32(0.01)}


def segfault(feed):
    ctypes.string_at(0)


def hang(feed):
    time.sleep(60)
"""

#: Marker, fixture and input mistakes: each test errors at setup (or skips, or fails) on its
#: own, so one run shows them all. The page quotes line numbers of this module (a skip's
#: `test_models.py:79`, a call's `test_models.py:132`): add tests at its end.
SETUP = """
import numpy as np
import pytest

M = "model.onnx"
BOTH = ["onnxrt", "onnxref"]


@pytest.mark.compare_frameworks(model=M, frameworks="onnxrt")
def test_str_frameworks(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=["onnxrtt", "onnxref"])
def test_misspelt_framework(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworx=BOTH)
def test_misspelt_argument(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH, iterations=0)
def test_no_iterations(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH, val_range=(1, 0))
def test_upside_down_range(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH, tolerance="1e-3")
def test_str_tolerance(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH, tolerance={"atl": 1e-3})
def test_misspelt_field(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH, options={"trt": {"workspace": 1}})
def test_options_of_another(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH, options={"onnxref": {"threads": 2}})
def test_unknown_option(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH)
@pytest.mark.shapes((2, 4))
def test_bare_shape(comparison):
    pass


def test_no_marker(comparison):
    pass


@pytest.mark.compare_frameworks(model="missing.onnx", frameworks=BOTH)
def test_missing_model(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=["onnxrt", "trt"])
def test_with_tensorrt(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=["onnxrt", "callable:mypkg.models:run"])
def test_unimportable_callable(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH)
@pytest.mark.precisions("fp16")
def test_fp16_only(comparison):
    pass


@pytest.mark.compare_frameworks(model="dynamic.onnx", frameworks=BOTH)
def test_dynamic(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH)
@pytest.mark.shapes({"input": (2, 4)})
def test_shape_of_another_input(comparison):
    pass


@pytest.mark.compare_frameworks(model="dynamic.onnx", frameworks=BOTH)
@pytest.mark.shapes({"x": (2, 5)})
def test_shape_that_does_not_fit(comparison):
    pass


@pytest.mark.compare_frameworks(
    model=M, frameworks=BOTH, inputs={"input": np.zeros((2, 4), np.float32)}
)
def test_feed_of_another_input(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH, inputs="data/inputs.npz")
def test_missing_inputs_file(comparison):
    pass


@pytest.mark.compare_frameworks(
    model=M, frameworks=BOTH, inputs={"x": np.zeros((2, 4), np.float32)}, iterations=3
)
def test_iterations_with_inputs(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=["onnxrt"], reference="saved/outputs.json")
def test_missing_reference(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=["onnxrt", "callable:functions:off"])
def test_off(comparison):
    pass


def test_negative_atol(compare):
    compare({"y": np.ones(3)}, {"y": np.ones(3)}, atol=-1)


def test_misspelt_output(compare):
    result = compare({"logits": np.ones(3)}, {"logits": np.ones(3)})
    assert result.outputs["logit"].passed


@pytest.mark.compare_frameworks(
    model=M, frameworks=BOTH, golden=True, tolerance={"check": "fp64"}
)
def test_fp64_against_golden(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH, outputs="al")
def test_outputs_al(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH, outputs="all", layers="warn")
def test_layers_warn(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH, outputs=["logits"])
def test_output_of_another_model(comparison):
    pass


@pytest.mark.compare_frameworks(
    model=M,
    frameworks=["onnxrt", "callable:functions:off"],
    options={"callable": {"isolate": True, "timeout": 0}},
)
def test_zero_timeout(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH, seed="1")
def test_str_seed(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH)
@pytest.mark.precisions("fp61")
def test_unknown_precision(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=BOTH, tolerance={"check": "cosinee"})
def test_misspelt_check(comparison):
    pass


@pytest.mark.compare_frameworks(
    model=M, frameworks=BOTH, tolerance={"": {"atol": 1e-3}, "atol": 1e-3}
)
def test_field_beside_outputs(comparison):
    pass


@pytest.mark.compare_frameworks(model=M, frameworks=["onnxrt"], reference="run_0.json")
def test_reference_without_inputs(comparison):
    pass


@pytest.mark.compare_frameworks(
    model="classifier.onnx", frameworks=BOTH, tolerance={"logit": {"atol": 1e-3}}
)
def test_tolerance_of_another_output(comparison):
    pass
"""

#: Runners that crash or hang in their worker process.
CRASHES = """
import pytest


@pytest.mark.compare_frameworks(
    model="model.onnx", frameworks=["onnxrt", "callable:functions:segfault"], isolate=True
)
def test_segfault(comparison):
    pass


@pytest.mark.compare_frameworks(
    model="model.onnx",
    frameworks=["onnxrt", "callable:functions:hang"],
    options={"callable": {"isolate": True, "timeout": 2}},
)
def test_hang(comparison):
    pass
"""

#: Tests of the golden fixture.
GOLDENS = """
import numpy as np
from pytest_trtcompare.runners import TensorSpec


def test_detector(golden):
    feed = golden.inputs([TensorSpec("x", "float32", (None, 4))], shapes={"x": (2, 4)})
    golden.check({"y": np.tanh(feed["x"])})


def test_classifier(golden):
    golden.check({"logits": np.linspace(0, 1, 10)})
"""


@dataclass(frozen=True)
class Scenario:
    files: dict[str, str]  # test modules and other text files, by path
    args: tuple[str, ...] = ()
    prepare: Callable[[Path], None] | None = None  # writes other files into the suite's folder


def _saved_outputs(folder: Path) -> None:
    """run_0.json: Polygraphy outputs of model.onnx, without the inputs they were made from."""
    x = np.zeros((2, 4), np.float32)
    write_polygraphy_outputs(folder / "run_0.json", [{"y": np.tanh(x)}])


#: pytest runs, by name: one run serves every entry that names it.
SCENARIOS = {
    "setup": Scenario({"test_models.py": SETUP}, ("-rs",), _saved_outputs),  # -rs: skips' reasons
    "crashes": Scenario({"test_crashes.py": CRASHES}),
    "golden missing": Scenario({"test_goldens.py": GOLDENS}),
}


#: Scenario name -> its normalized output and exit status, for this process.
SEEN: dict[str, tuple[str, int]] = {}


class Lab:
    """Runs an entry's reproduction in the suite's folder (pytester's) and gives the output
    normalized as the module doc says."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.ret = -1  # the exit status of the last run: pytest's, or trtcompare's
        pytester.syspathinsert()  # `callable:functions:off` imports functions.py from here
        onnx.save(_model([2, 4]), pytester.path / "model.onnx")
        onnx.save(_model(["batch", 4]), pytester.path / "dynamic.onnx")
        onnx.save(_model([2, 4], output="logits"), pytester.path / "classifier.onnx")
        pytester.makepyfile(functions=FUNCTIONS)

    def normalized(self, text: str) -> str:
        text = text.replace(str(self.pytester.path), SUITE)
        text = re.sub(r"/\S*/pytest-of-[^/\s]+/pytest-\d+", BASETEMP, text)
        return squeezed(text)

    def scenario(self, name: str) -> str:
        if name not in SEEN:
            scenario = SCENARIOS[name]
            if scenario.prepare is not None:
                scenario.prepare(self.pytester.path)
            SEEN[name] = (self.pytest(*scenario.args, files=scenario.files), self.ret)
        text, self.ret = SEEN[name]
        return text

    def pytest(self, *args: str, files: dict[str, str] | None = None) -> str:
        for path, text in (files or {}).items():
            target = self.pytester.path / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(text), encoding="utf-8")
        result = self.pytester.runpytest(*args)
        self.ret = int(result.ret)
        return self.normalized("\n".join(result.outlines + result.errlines))

    def options(self, *args: str, ini: str = "") -> str:
        """A run of a passing test under these options (and ini lines)."""
        if ini:
            self.pytester.makeini("[pytest]\n" + ini)
        test = """
            import pytest

            @pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt", "onnxref"])
            def test_tiny(comparison):
                pass
        """
        return self.pytest(*args, files={"test_tiny.py": test})

    def cli(self, *argv: str) -> str:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                self.ret = trtcompare(list(argv))
            except SystemExit as exc:  # argparse's usage errors
                self.ret = int(exc.code or 0)
        return self.normalized(out.getvalue() + err.getvalue())

    def report(self, name: str = "shard1.json") -> None:
        """A --trt-report of a passing run of the suite `detectors`, for the merge entries."""
        self.options(f"--trt-report={name}", ini="trtcompare_suite = detectors\n")
        assert self.ret == 0


def needs_no_tensorrt() -> None:
    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("TensorRT is installed here: the entry shows a machine without it")


def _tensorrt_missing_skip(lab: Lab) -> str:
    needs_no_tensorrt()
    return lab.scenario("setup")


def _run_skipped(lab: Lab) -> str:
    needs_no_tensorrt()
    return lab.cli("run", "model.onnx", "--onnxrt", "--trt")


def _golden_other_shapes(lab: Lab) -> str:
    lab.pytest("--trt-update-goldens", files={"test_goldens.py": GOLDENS})
    changed = GOLDENS.replace('shapes={"x": (2, 4)}', 'shapes={"x": (8, 4)}')
    return lab.pytest(files={"test_goldens.py": changed})


def _golden_damaged(lab: Lab) -> str:
    lab.pytest("--trt-update-goldens", files={"test_goldens.py": GOLDENS})
    path = lab.pytester.path / "goldens" / "test_goldens" / "test_classifier.safetensors"
    path.write_bytes(b"<<<<<<< HEAD\n" + path.read_bytes())
    return lab.pytest(files={"test_goldens.py": GOLDENS})


def _golden_unused(lab: Lab) -> str:
    lab.pytest("--trt-update-goldens", files={"test_goldens.py": GOLDENS})
    removed = GOLDENS.split("\n\n\ndef test_classifier")[0]
    assert removed != GOLDENS
    return lab.pytest("--trt-strict-goldens", files={"test_goldens.py": removed})


def _merge(*argv: str) -> Callable[[Lab], str]:
    def reproduce(lab: Lab) -> str:
        lab.report()
        return lab.cli("merge", "shard1.json", *argv)

    return reproduce


def _merge_other_suite(lab: Lab) -> str:
    lab.report()
    path = lab.pytester.path / "shard1.json"
    text = path.read_text(encoding="utf-8")
    other = text.replace('"suite": "detectors"', '"suite": "suite@2"')
    assert other != text
    (lab.pytester.path / "shard2.json").write_text(other, encoding="utf-8")
    return lab.cli("merge", "shard1.json", "shard2.json")


def _merge_not_a_report(lab: Lab) -> str:
    (lab.pytester.path / "results.json").write_text('{"tests": []}', encoding="utf-8")
    return lab.cli("merge", "results.json")


def _setup(lab: Lab) -> str:
    return lab.scenario("setup")


def _tolerance_of_another_output(lab: Lab) -> str:
    """The warning's entry says the test passes, its output under the default tolerance."""
    printed = lab.scenario("setup")
    passed = r"ok test_tolerance_of_another_output\[onnxref-fp32\] :: logits abs \S+ rel \S+"
    assert re.search(rf"{passed} elemwise atol=1e-05 rtol=1e-05 \(default\)", printed)
    return printed


def _search_mixed(lab: Lab) -> str:
    lab.cli("debug-precision", "model.onnx", "-o", "mixed.onnx")
    return lab.cli("reduce", "mixed.onnx")


def _check_other_iterations(lab: Lab) -> str:
    """A golden of 2 iterations, checked against outputs of 1."""
    x = np.zeros((2, 4), np.float32)
    first, second = {"x": x}, {"x": x + 1}
    path = lab.pytester.path / "golden.safetensors"
    write_golden(path, {"y": np.tanh(x)}, first, {}, later=[({"y": np.tanh(x + 1)}, second)])
    np.savez(lab.pytester.path / "outputs.npz", y=np.tanh(x))
    return lab.cli("check", "golden.safetensors", "outputs.npz")


#: Entry heading -> the function that makes its message happen.
REPRODUCTIONS: dict[str, Callable[[Lab], str]] = {
    # marker and fixture arguments
    "frameworks given as a string": _setup,
    "A framework name nobody registered": _setup,
    "An argument the marker does not take": _setup,
    "A number out of range": _setup,
    "A value range upside down": _setup,
    "A tolerance given as a string": _setup,
    "A misspelt tolerance field": _setup,
    "options= for a framework the test does not list": _setup,
    "A runner option the runner does not take": _setup,
    "A bare shape in @pytest.mark.shapes": _setup,
    "The comparison fixture without the marker": _setup,
    "A marker argument of the wrong type": _setup,
    "An unknown precision in @pytest.mark.precisions": _setup,
    "A check name that is not one": _setup,
    "A tolerance field beside output names": _setup,
    # command-line options and ini keys
    "An unknown precision": lambda lab: lab.options("--trt-precision", "fp17"),
    "A negative tolerance on the command line": lambda lab: lab.options("--trt-atol=-1"),
    "An unknown name in --trt-frameworks": lambda lab: lab.options("--trt-frameworks=tensorrtt"),
    "--trt-report names a folder": lambda lab: lab.options("--trt-report=."),
    "A misspelt metric in --trt-check": lambda lab: lab.options("--trt-check", "cosin>=0.999"),
    "A bad line in trtcompare_tolerances": lambda lab: lab.options(
        ini="trtcompare_tolerances =\n    fp16: atl=1e-2 rtol=1e-2\n"
    ),
    "An unknown precision in trtcompare_precisions": lambda lab: lab.options(
        ini="trtcompare_precisions = fp32, fp61\n"
    ),
    "--trt-input-shapes that cannot be read": lambda lab: lab.options("--trt-input-shapes=x:2x4x"),
    "A deprecated flag under -W error": lambda lab: lab.options(
        "--update-goldens", "-W", "error::DeprecationWarning"
    ),
    # goldens and saved outputs
    "The golden does not exist": lambda lab: lab.scenario("golden missing"),
    "Stored inputs of other shapes": _golden_other_shapes,
    "A damaged golden": _golden_damaged,
    "Unused goldens under --trt-strict-goldens": _golden_unused,
    "The reference file does not exist": _setup,
    "A reference that holds no inputs": _setup,
    # frameworks and runners
    "A framework that is not installed": _tensorrt_missing_skip,
    "The model file does not exist": _setup,
    "A callable framework that cannot be imported": _setup,
    "A test with nothing to run": _setup,
    # inputs and shapes
    "An input with dynamic dimensions": _setup,
    "Shapes for an input the model does not have": _setup,
    "A shape that does not fit the model": _setup,
    "A feed for an input the model does not have": _setup,
    "An inputs file that does not exist": _setup,
    "iterations= beside inputs=": _setup,
    # tolerances
    "Outputs out of tolerance": _setup,
    "A negative tolerance in a call": _setup,
    "An output name the result does not have": _setup,
    "A tolerance for an output the model does not have": _tolerance_of_another_output,
    # the fp64 check, calibration, drift
    "The fp64 check against a golden": _setup,
    "A tolerance file that does not exist": lambda lab: lab.options(
        "--trt-tolerances-file=ci/tolerances.toml"
    ),
    "--trt-drift without a baseline": lambda lab: lab.options("--trt-drift=fail"),
    "A baseline report that cannot be read": lambda lab: lab.options(
        "--trt-baseline=reports/main.json"
    ),
    # isolation, crashes and timeouts
    "A runner crashed": lambda lab: lab.scenario("crashes"),
    "A runner timed out": lambda lab: lab.scenario("crashes"),
    "A timeout that is not seconds above 0": _setup,
    # per-layer comparison
    "outputs= misspelt": _setup,
    "layers= that is neither gate nor report": _setup,
    "An output the model does not have": _setup,
    # pytest-xdist and shards
    "--strict without --goldens-dir": _merge("--strict"),
    "Reports of different suites": _merge_other_suite,
    "A --goldens-dir that holds no goldens of the reports": _merge("--goldens-dir", "tests"),
    "A file that is not a --trt-report": _merge_not_a_report,
    # the trtcompare commands
    "run: no framework to run": lambda lab: lab.cli("run", "model.onnx"),
    "run: a polygraphy flag it does not offer": lambda lab: lab.cli(
        "run", "model.onnx", "--onnxrt", "--int8"
    ),
    "run: a model that does not exist": lambda lab: lab.cli("run", "resnet.onnx", "--onnxrt"),
    "run: a target that cannot run here": _run_skipped,
    "run: an output the model does not have": lambda lab: lab.cli(
        "run", "model.onnx", "--onnxrt", "--onnxref", "--onnx-outputs", "logits"
    ),
    "run: a value out of range": lambda lab: lab.cli(
        "run", "model.onnx", "--onnxrt", "--onnxref", "--atol", "-1"
    ),
    "run: a value that is not a number": lambda lab: lab.cli(
        "run", "model.onnx", "--onnxrt", "--atol", "abc"
    ),
    "show, diff: a file that does not exist": lambda lab: lab.cli(
        "diff", "outputs.npz", "goldens/test_m/test_x.safetensors"
    ),
    "check: a golden path that is no golden": lambda lab: lab.cli(
        "check", "outputs.npz", "golden.safetensors"
    ),
    "check: a golden of another number of iterations": _check_other_iterations,
    "reduce, debug-precision: a mixed-precision model": _search_mixed,
    "reduce, debug-precision: a runner that converts no ONNX model": lambda lab: lab.cli(
        "reduce", "model.onnx", "--runner", "torch"
    ),
}


#: The exit status of some reproductions, as the page's introduction states them.
EXIT_STATUS = {
    "frameworks given as a string": 1,
    "A framework that is not installed": 1,
    "An unknown precision": 4,
    "A negative tolerance on the command line": 4,
    "A bad line in trtcompare_tolerances": 4,
    "A deprecated flag under -W error": 4,
    "--trt-drift without a baseline": 4,
    "Unused goldens under --trt-strict-goldens": 1,
    "--strict without --goldens-dir": 2,
    "Reports of different suites": 2,
    "run: no framework to run": 2,
    "run: a polygraphy flag it does not offer": 2,
    "run: a model that does not exist": 2,
    "run: a target that cannot run here": 2,
    "check: a golden path that is no golden": 2,
    "run: a value that is not a number": 2,
    "check: a golden of another number of iterations": 2,
    "reduce, debug-precision: a mixed-precision model": 2,
    "reduce, debug-precision: a runner that converts no ONNX model": 2,
}


def test_every_entry_has_a_reproduction_and_every_reproduction_an_entry() -> None:
    on_page = set(page_entries(PAGE.read_text(encoding="utf-8")))
    assert len(on_page) >= 30
    assert sorted(on_page - set(REPRODUCTIONS)) == [], "entries without a reproduction"
    assert sorted(set(REPRODUCTIONS) - on_page) == [], "reproductions without an entry"
    assert set(EXIT_STATUS) <= set(REPRODUCTIONS)


def test_page_entries_read_headings_and_their_first_text_block() -> None:
    text = "# T\n\n## G\n\n### One\n\n```text\na\n  b\n```\n\nx\n\n```text\nc\n```\n\n### Two\n"
    with pytest.raises(AssertionError, match="'Two' has no"):
        page_entries(text)
    assert page_entries(text.replace("### Two\n", "")) == {"One": "a\n  b\n"}


@pytest.mark.parametrize("heading", list(REPRODUCTIONS))
def test_the_page_quotes_what_the_plugin_prints(heading: str, pytester: pytest.Pytester) -> None:
    expected = page_entries(PAGE.read_text(encoding="utf-8")).get(heading)
    if expected is None:
        pytest.fail(f"docs/troubleshooting.md has no entry {heading!r}")
    lab = Lab(pytester)
    printed = REPRODUCTIONS[heading](lab)
    assert squeezed(expected) in printed, f"\nthe page:\n{expected}\nprinted:\n{printed}"
    if heading in EXIT_STATUS:
        assert lab.ret == EXIT_STATUS[heading]
