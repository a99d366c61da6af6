"""One option namespace (issue 26): every option's --trt-* name, the old names as deprecated
aliases that warn once, framework names as the report header says them, JUnit property
names, and the [tensorrt] extras."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from pytest_trtcompare.plugin.names import ALIASES

from .pytester_helpers import KNOWN_RUNNERS, XDIST, XDIST_SLOW, run
from .toml import loads as toml_loads

#: (deprecated name, its value on the command line, the option's dest, the value it holds)
ALIAS_VALUES = [
    ("--update-goldens", None, "trtcompare_update_goldens", True),
    ("--update-goldens-missing", None, "trtcompare_update_goldens_missing", True),
    ("--strict-goldens", None, "trtcompare_strict_goldens", True),
    ("--prune-goldens", None, "trtcompare_prune_goldens", True),
    ("--goldens-dir", "store", "trtcompare_goldens_dir", "store"),
    ("--frameworks", "onnxrt", "trtcompare_frameworks", "onnxrt"),
    ("--trtcompare-report", "r.json", "trtcompare_report", "r.json"),
    ("--trtcompare-artifacts", "arts", "trtcompare_artifacts", "arts"),
    ("--trtcompare-isolate", None, "trtcompare_isolate", True),
]

OPTION_VALUE = """
def test_value(request):
    assert request.config.getoption({dest!r}) == {value!r}
"""


def _messages(result: pytest.RunResult) -> list[str]:
    """The deprecation warnings in the warnings summary, each once."""
    marker = "OptionDeprecationWarning: "
    return [line.split(marker, 1)[1] for line in result.outlines if marker in line]


def test_every_alias_is_listed():
    assert {old for old, *_ in ALIAS_VALUES} == set(ALIASES)
    assert all(new.startswith("--trt-") for new in ALIASES.values())


#: Under xdist in the test command: a flag and an option with a value (the others: -m slow)
XDIST_ALIASES = ("--update-goldens", "--goldens-dir")


@pytest.mark.parametrize(
    ("old", "given", "dest", "value", "xdist"),
    [
        pytest.param(*alias, xdist.values[0], id=f"{alias[0]}-{xdist.id}", marks=marks)
        for alias in ALIAS_VALUES
        for xdist in XDIST
        for marks in [
            pytest.mark.slow if xdist.id != "no-xdist" and alias[0] not in XDIST_ALIASES else ()
        ]
    ],
)
def test_a_deprecated_name_works_and_warns_once(pytester, xdist, old, given, dest, value):
    pytester.makepyfile(OPTION_VALUE.format(dest=dest, value=value))
    new = ALIASES[old]
    flag = [old] if given is None else [f"{old}={given}"]
    result = run(pytester, *flag, *xdist)
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    assert _messages(result) == [f"{old} is deprecated: write {new} (same meaning)"]


@pytest.mark.parametrize("xdist", XDIST)
def test_the_new_names_warn_nothing(pytester, xdist):
    checks = "".join(
        f"    assert request.config.getoption({dest!r}) == {value!r}\n"
        for _, _, dest, value in ALIAS_VALUES
    )
    pytester.makepyfile(f"def test_values(request):\n{checks}")
    given = [
        ALIASES[old] if value is None else f"{ALIASES[old]}={value}"
        for old, value, *_ in ALIAS_VALUES
    ]
    result = run(pytester, *given, *xdist)
    result.assert_outcomes(passed=1)
    assert _messages(result) == [] and "is deprecated" not in result.stdout.str()


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_old_names_do_what_the_new_ones_do(pytester, xdist):
    """Goldens written into --goldens-dir, the JSON report at --trtcompare-report: one
    warning per old name, however many workers parse the command line."""
    pytester.makepyfile(
        test_m="import numpy as np\n\ndef test_it(golden):\n    golden.check({'y': np.ones(3)})\n"
    )
    old = ["--update-goldens", "--goldens-dir=store", "--trtcompare-report=r.json"]
    result = run(pytester, *old, *xdist)
    result.assert_outcomes(passed=1)
    assert (pytester.path / "store" / "test_m" / "test_it.safetensors").is_file()
    assert (pytester.path / "r.json").is_file()
    assert sorted(_messages(result)) == [
        "--goldens-dir is deprecated: write --trt-goldens-dir (same meaning)",
        "--trtcompare-report is deprecated: write --trt-report (same meaning)",
        "--update-goldens is deprecated: write --trt-update-goldens (same meaning)",
    ]
    new = run(pytester, "--trt-goldens-dir=store", "--trt-report=r2.json", *xdist)
    new.assert_outcomes(passed=1)  # compared with the golden the old names wrote
    assert (pytester.path / "r2.json").is_file() and _messages(new) == []


@pytest.mark.parametrize("xdist", XDIST)
def test_warnings_as_errors_make_an_old_name_a_usage_error_that_says_so(pytester, xdist):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = run(pytester, "-W", "error::DeprecationWarning", "--strict-goldens", *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --strict-goldens is deprecated: write --trt-strict-goldens "
            "(--strict-goldens still works, but the warning filters of this run (-W, "
            "filterwarnings) turn its deprecation warning into an error)"
        ]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    fine = run(pytester, "-W", "error::DeprecationWarning", "--trt-strict-goldens", *xdist)
    fine.assert_outcomes(passed=1)


def test_the_warning_can_be_filtered_by_its_name(pytester):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest(
        "-W", "ignore::pytest_trtcompare.OptionDeprecationWarning", "--prune-goldens"
    )
    result.assert_outcomes(passed=1)
    assert _messages(result) == []


def test_help_lists_each_option_once_with_its_old_name(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(  # Python 3.13's argparse shows the metavar once, at the end
        [
            "*--trt-goldens-dir*, --goldens-dir=DIR",
            "*--trt-frameworks*, --frameworks=NAME?,NAME...?",
            "*--trt-report*, --trtcompare-report=PATH.json",
            "*--trt-shape-check={strict,relaxed}",
            "*--trt-update-goldens, --update-goldens",
        ]
    )
    text = result.stdout.str()
    for old, new in ALIASES.items():
        assert len(re.findall(rf"^  {re.escape(new)}(?![\w-])", text, re.M)) == 1, new
        assert len(re.findall(rf"^  {re.escape(old)}(?![\w-])", text, re.M)) == 0, old


MODEL = """
import pytest
from onnx import TensorProto, helper, save

graph = helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"])], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
     "model.onnx")

@pytest.mark.compare_frameworks(
    model="model.onnx", frameworks=["onnxruntime", "onnxref"], reference="onnxruntime",
    options={"onnxruntime": {"providers": ["CPUExecutionProvider"]}})
def test_relu(comparison):
    assert list(comparison.outputs) == ["y"]
"""


@pytest.mark.parametrize("xdist", XDIST_SLOW)
def test_framework_names_as_the_header_says_them(pytester, xdist):
    """'onnxruntime' is onnxrt in the marker (frameworks, reference, options) and
    --trt-frameworks=tensorrt is trt: this test has no trt target, so it skips saying so."""
    pytester.makepyfile(test_model=MODEL)
    result = run(pytester, "-v", "-rs", *xdist)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*test_relu?onnxref-fp32?*", "*runners built*: onnxref-fp32 x1, onnxrt-fp32 x1"]
    )
    only = run(pytester, "-rs", "--trt-frameworks=tensorrt", *xdist)
    only.assert_outcomes(skipped=1)
    only.stdout.fnmatch_lines(["*--trt-frameworks trt selects none of this test's targets*"])
    same = run(pytester, "-v", "--trt-frameworks=onnxref,pytorch", *xdist)
    same.assert_outcomes(passed=1)


@pytest.mark.parametrize("xdist", XDIST)
def test_a_framework_typo_is_a_usage_error_listing_the_names(pytester, xdist):
    pytester.makepyfile("def test_x():\n    pass\n")
    result = run(pytester, "--trt-frameworks=tensort", *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --trt-frameworks: unknown framework 'tensort'; known frameworks: callable, "
            f"{KNOWN_RUNNERS.removeprefix('callable, ')} (onnxruntime = onnxrt, pytorch = torch, "
            "tensorrt = trt; or 'callable:package.module:function')"
        ]
    )


JUNIT_TESTS = """
import numpy as np

def test_two_calls(compare):
    compare({"y": np.ones(3), "z": np.zeros(2)}, {"y": np.ones(3), "z": np.zeros(2)})
    compare({"y": np.ones(3)}, {"y": np.ones(3) + 0.5}, atol=1, check="max")
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_junit_properties_have_one_name_per_output_and_field(pytester, xdist):
    pytester.makepyfile(test_junit=JUNIT_TESTS)
    result = run(pytester, "--junitxml=j.xml", "--trt-report=r.json", *xdist)
    result.assert_outcomes(passed=1)
    properties = [
        (p.get("name"), p.get("value")) for p in ET.parse(pytester.path / "j.xml").iter("property")
    ]
    names = [name for name, _ in properties]
    assert len(names) == len(set(names))  # no name repeats
    values = dict(properties)
    fields = ("passed", "max_abs", "max_rel", "margin", "check", "atol", "rtol", "record")
    for output in ("y", "z", "y#2"):
        assert {f"trtcompare.{output}.{field}" for field in fields} <= set(names), output
    assert values["trtcompare.y.passed"] == "true" and values["trtcompare.y.max_abs"] == "0.0"
    assert values["trtcompare.y#2.max_abs"] == "0.5" and values["trtcompare.y#2.check"] == "max"
    assert values["trtcompare.y#2.atol"] == "1.0"
    assert "trtcompare" not in names
    summary = [line for line in result.outlines if "test_two_calls :: " in line]
    assert len(summary) == 3  # the records read back from the properties: all three


def _extras() -> dict[str, list[str]]:
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    extras: dict[str, list[str]] = toml_loads(pyproject.read_text())["project"][
        "optional-dependencies"
    ]
    return {name: value for name, value in extras.items() if name.startswith("tensorrt")}


@pytest.mark.parametrize("extra", sorted(_extras()))
def test_a_tensorrt_extra_pins_one_major_and_cuda_bindings_of_its_cuda(extra):
    """tensorrt-cuNN of one TensorRT major, with cuda-bindings of CUDA NN (the resolver would
    otherwise pair any TensorRT major with any bindings)."""
    requirements = {Requirement(text).name: Requirement(text) for text in _extras()[extra]}
    (wheel,) = [name for name in requirements if name.startswith("tensorrt-cu")]
    cuda = int(wheel.removeprefix("tensorrt-cu"))
    trt = requirements[wheel].specifier
    majors = {v.major for v in map(Version, ["9.9", "10.13", "10.99", "11.0", "11.4"]) if v in trt}
    assert majors == {10}, trt
    bindings = requirements["cuda-bindings"].specifier
    assert Version(f"{cuda}.0") in bindings and Version(f"{cuda}.9.10") in bindings
    assert Version(f"{cuda - 1}.9") not in bindings and Version(f"{cuda + 1}.0") not in bindings


def test_the_tensorrt_extras():
    extras = _extras()
    assert extras["tensorrt"] == extras["tensorrt-cu12"]
    assert set(extras) == {"tensorrt", "tensorrt-cu12", "tensorrt-cu13"}


# --update-goldens owned by another plugin or conftest (issue 27) ----------------------------
OTHER_PLUGIN = (
    "def pytest_addoption(parser):\n"
    "    parser.addoption('--update-goldens', action='store_true', dest='mine')\n"
)
WHO_GOT_IT = (
    "def test_x(request):\n"
    "    print('mine', request.config.getoption('mine', None),\n"
    "          'ours', request.config.getoption('trtcompare_update_goldens'))\n"
)


@pytest.mark.parametrize(
    "order", [["-p", "trtcompare", "-p", "other"], ["-p", "other", "-p", "trtcompare"]]
)
def test_a_plugin_loaded_after_ours_owns_update_goldens(pytester, monkeypatch, order):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # -p decides the order
    pytester.makepyfile(other=OTHER_PLUGIN, test_m=WHO_GOT_IT)
    pytester.syspathinsert()
    result = pytester.runpytest(*order, "-s", "--update-goldens")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*mine True ours False"])
    result = pytester.runpytest(*order, "-s", "--trt-update-goldens")
    result.stdout.fnmatch_lines(["*mine False ours True"])


LATE_CLASH = (
    "--update-goldens: */sub/conftest.py registers its own --update-goldens, but pytest read "
    "the command line before it loaded that conftest (it is below the rootdir and its folder "
    "was not named on the command line), so --update-goldens went to pytest-trtcompare (its "
    "deprecated alias of --trt-update-goldens). Register the option in the rootdir's "
    "conftest.py (pytest-trtcompare then leaves --update-goldens to it), or run pytest with "
    "that folder, or write --trt-update-goldens to update pytest-trtcompare's goldens"
)


@pytest.mark.parametrize("xdist", XDIST)
def test_a_conftest_loaded_during_collection_that_owns_update_goldens(pytester, xdist):
    """A conftest below the rootdir registers its options after pytest read the command line:
    it loads (no crash of pytest's parser), and --update-goldens given is a clear error."""
    sub = pytester.mkdir("sub")
    (sub / "conftest.py").write_text(OTHER_PLUGIN)
    (sub / "test_m.py").write_text(WHO_GOT_IT)
    result = run(pytester, "--update-goldens", *xdist)
    if xdist:  # a worker cannot end the session: each test errors with the message
        result.assert_outcomes(errors=1)
        assert LATE_CLASH.replace("*/", f"{pytester.path}/") in result.stdout.str()
    else:
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: {LATE_CLASH}"])
    for args in ([], ["--trt-update-goldens"]):
        run(pytester, *args, *xdist).assert_outcomes(passed=1)
    result = run(pytester, "sub", "-s", "--update-goldens")  # now an initial conftest: its own
    result.stdout.fnmatch_lines(["*mine True ours False*"])
    assert "INTERNALERROR" not in result.stdout.str()
