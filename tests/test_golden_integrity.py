"""Goldens that cannot lie (issue 11): every damaged byte is detected and named, through the
store, the CLI and pytest, and --trt-update-goldens regenerates what was damaged."""

from __future__ import annotations

import contextlib
import io
import os
import random
import re

import numpy as np
import pytest

from pytest_trtcompare.cli import main as cli
from pytest_trtcompare.goldens.format import MAGIC
from pytest_trtcompare.goldens.store import GoldenError, read_golden, write_golden

from .golden_bytes import as_format_1, rewrite
from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run

OUTPUTS = {"y": np.arange(12, dtype=np.float32).reshape(3, 4) / 7}
INPUTS = {"x": np.linspace(0, 1, 3, dtype=np.float32)}


@pytest.fixture
def small(tmp_path):
    """A small golden (outputs and inputs) and an intact twin to diff against."""
    path, twin = tmp_path / "g.golden", tmp_path / "twin.golden"
    write_golden(path, OUTPUTS, INPUTS, {"test": "test_m.py::test_it", "seed": 1})
    write_golden(twin, OUTPUTS, INPUTS, {"test": "test_m.py::test_it", "seed": 1})
    return path, twin, path.read_bytes()


def _cli_exit(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(list(args))
    return code, err.getvalue()


def _assert_detected(path, twin, label):
    """The store raises GoldenError naming the file; `show` and `diff` exit 2 with it."""
    with pytest.raises(GoldenError) as info:
        read_golden(path)
    message = str(info.value)
    named = ("corrupt", "truncated", "not a golden")
    assert str(path) in message and any(word in message for word in named), label
    for args in (("show", str(path)), ("diff", str(path), str(twin))):
        code, err = _cli_exit(*args)
        assert code == 2 and str(path) in err and "Traceback" not in err, (label, args, err)


def test_every_single_bit_flip_is_detected(small):
    path, twin, data = small
    assert len(data) * 8 >= 4000
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(flipped))
        _assert_detected(path, twin, f"bit {bit}")


def test_every_truncation_and_any_appended_byte_is_detected(small):
    path, twin, data = small
    for size in range(len(data)):
        path.write_bytes(data[:size])
        _assert_detected(path, twin, f"cut at {size}")
    for extra in (b"\0", b"x", b"\0" * 64):
        path.write_bytes(data + extra)
        _assert_detected(path, twin, f"appended {extra!r}")


def _set(key, value):
    return lambda document: document["tensors"][0].__setitem__(key, value)


HAND_CRAFTED = {
    "no group key": (lambda d: d["tensors"][0].pop("group"), "tensor 0 has keys"),
    "no name key": (lambda d: d["tensors"][1].pop("name"), "tensor 1 has keys"),
    "shape that wraps in int64": (_set("shape", [2**62, 4]), "header field 'nbytes'"),
    "negative dim": (_set("shape", [-3, -4]), "header field 'shape' of tensor 'y'"),
    "non-integer dim": (_set("shape", [3.0, 4]), "header field 'shape' of tensor 'y'"),
    "bool dim": (_set("shape", [True, 12]), "header field 'shape' of tensor 'y'"),
    "rank 65": (_set("shape", [1] * 65), "header field 'shape' of tensor 'y'"),
    "meta as a list": (lambda d: d.__setitem__("meta", [1, 2]), "header field 'meta'"),
    "inputs group renamed": (
        lambda d: d["tensors"][1].__setitem__("group", "inpuus"),
        "header field 'group' of tensor 1: 'inpuus' is not one of outputs, inputs",
    ),
    "duplicate name": (
        lambda d: d["tensors"].append(dict(d["tensors"][0])),
        "header field 'name' of tensor 'y': outputs 'y' appears twice",
    ),
    "object dtype": (_set("dtype", "|O8"), "header field 'dtype' of tensor 'y'"),
    "big-endian dtype": (_set("dtype", ">f4"), "'>f4' is big-endian; goldens are little-endian"),
    "complex dtype": (_set("dtype", "<c8"), "header field 'dtype' of tensor 'y'"),
    "unknown dtype": (_set("dtype", "float128x"), "header field 'dtype' of tensor 'y'"),
    "nbytes as string": (_set("nbytes", "48"), "header field 'nbytes' of tensor 'y'"),
    "extra header key": (lambda d: d.__setitem__("extra", 1), "header keys"),
    "format 3": (lambda d: d.__setitem__("format", 3), "header field 'format'"),
    "tensors as an object": (lambda d: d.__setitem__("tensors", {}), "header field 'tensors'"),
    "checksum not hex": (_set("xxh3", "zz" * 8), "header field 'xxh3' of tensor 'y'"),
    "checksum of other bytes": (_set("xxh3", "0" * 16), "checksum of output 'y' does not match"),
}


@pytest.mark.parametrize("case", sorted(HAND_CRAFTED))
def test_hand_crafted_headers_are_named_as_corrupt(small, case):
    """Headers a tool could write with a valid checksum: the schema names what is wrong."""
    path, twin, _ = small
    change, message = HAND_CRAFTED[case]
    rewrite(path, change)
    _assert_detected(path, twin, case)
    with pytest.raises(GoldenError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_golden(path)


#: Cases that only a format-2 header can carry (rewrite() sets format 1 and drops checksums).
FORMAT_2_ONLY = {"checksum not hex", "checksum of other bytes", "format 3"}


@pytest.mark.parametrize("case", sorted(set(HAND_CRAFTED) - FORMAT_2_ONLY))
def test_hand_crafted_headers_in_the_old_format_are_corrupt_too(small, case):
    path, twin, _ = small
    rewrite(path, HAND_CRAFTED[case][0], version=1)
    _assert_detected(path, twin, case)


def test_a_header_length_beyond_the_file_never_allocates(small):
    path, twin, data = small
    start = len(MAGIC)
    path.write_bytes(data[:start] + b"8000000000000000" + data[start + 16 :])
    _assert_detected(path, twin, "huge length")
    with pytest.raises(GoldenError, match=r"header of 8000000000000000 bytes in a file of 512"):
        read_golden(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "an empty file, not a golden"),
        (b"version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 512\n", "git lfs pull"),
        (b"<<<<<<< HEAD\nPYTEST-TRTCOMPARE", "holds git merge-conflict markers, not a golden"),
    ],
)
def test_what_real_life_leaves_instead_of_a_golden_is_named(small, content, message):
    path, _, _ = small
    path.write_bytes(content)
    with pytest.raises(GoldenError, match=re.escape(message)):
        read_golden(path)
    assert _cli_exit("show", str(path))[0] == 2


def test_format_1_goldens_still_load(small):
    path, _, _ = small
    as_format_1(path)
    golden = read_golden(path)
    assert golden.version == 1
    np.testing.assert_array_equal(golden.outputs["y"], OUTPUTS["y"])
    np.testing.assert_array_equal(golden.inputs["x"], INPUTS["x"])
    assert write_golden(path, OUTPUTS, INPUTS, golden.meta) == "updated"  # upgraded
    assert path.read_bytes().startswith(MAGIC) and read_golden(path).version == 2


# -- through pytest ---------------------------------------------------------------------------
MANY = 24
MANY_TESTS = "\n".join(
    f"def test_g{i}(golden):\n    golden.check({{'y': np.full((3, 4), {i}, np.float32)}})\n"
    for i in range(MANY)
)
INPUT_TEST = """
from pytest_trtcompare.runners import TensorSpec

def test_with_inputs(golden):
    feed = golden.inputs([TensorSpec("x", "float32", (None, 4))], shapes={"x": (2, 4)})
    golden.check({"y": feed["x"] * 2})
"""


def _damage(path, how, rng):
    data = bytearray(path.read_bytes())
    if how == "flip":
        bit = rng.randrange(len(data) * 8)
        data[bit // 8] ^= 1 << (bit % 8)
    elif how == "cut":
        del data[rng.randrange(len(data)) :]
    else:  # a header rewritten with a valid checksum but a broken schema
        rewrite(path, lambda d: d["tensors"][0].__setitem__("shape", [-1]))
        return
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("xdist", XDIST)
def test_damaged_goldens_fail_their_tests_and_update_regenerates_them(pytester, xdist):
    pytester.makepyfile(test_many="import numpy as np\n\n" + MANY_TESTS + INPUT_TEST)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=MANY + 1)
    rng = random.Random(11)
    folder = pytester.path / "goldens" / "test_many"
    goldens = sorted(folder.glob("*.golden"))
    assert len(goldens) == MANY + 1
    for index, path in enumerate(goldens):
        _damage(path, ("flip", "cut", "schema")[index % 3], rng)
    result = run(pytester, "-rf", *xdist)
    result.assert_outcomes(failed=MANY + 1)  # zero passes
    lines = [line for line in result.stdout.lines if line.startswith("FAILED")]
    assert len(lines) == MANY + 1
    assert all("corrupt golden" in line or "truncated golden" in line for line in lines), lines
    result.stdout.fnmatch_lines(
        ["*; regenerate it with:", "  pytest --trt-update-goldens test_many.py::test_g0"]
    )
    assert "Traceback" not in result.stdout.str()
    result = run(pytester, "--trt-update-goldens", *xdist)
    result.assert_outcomes(passed=MANY + 1)
    result.stdout.fnmatch_lines([f"*created 0, updated {MANY + 1}, unchanged 0*"])
    run(pytester, *xdist).assert_outcomes(passed=MANY + 1)


@pytest.mark.parametrize("xdist", XDIST)
def test_old_format_goldens_pass_and_update_upgrades_them(pytester, xdist):
    pytester.makepyfile(test_old="import numpy as np\n\n" + MANY_TESTS.split("\n\n")[0])
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    path = pytester.path / "goldens" / "test_old" / "test_g0.golden"
    as_format_1(path)
    run(pytester, *xdist).assert_outcomes(passed=1)
    run(pytester, "--trt-update-goldens", *xdist).stdout.fnmatch_lines(["*updated 1*"])
    assert path.read_bytes().startswith(MAGIC)


@pytest.mark.parametrize("xdist", XDIST)
def test_stored_inputs_of_other_shapes_fail_and_say_how_to_refresh(pytester, xdist):
    pytester.makepyfile(test_in=INPUT_TEST)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    pytester.makepyfile(test_in=INPUT_TEST.replace('shapes={"x": (2, 4)}', 'shapes={"x": (5, 4)}'))
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*golden goldens/test_in/test_with_inputs.golden: its stored input 'x' has shape "
            "(2, 4), this test asks for (5, 4); refresh it with:",
            "  pytest --trt-update-goldens test_in.py::test_with_inputs",
        ]
    )
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    run(pytester, *xdist).assert_outcomes(passed=1)


MODEL_CONFTEST = """
import os
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

def pytest_configure(config):
    scale = float(os.environ.get("MODEL_SCALE", "1"))
    w = numpy_helper.from_array(np.full((4, 2), scale, np.float32), "W")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(config.rootpath / "model.onnx"))
"""
MODEL_TESTS = """
import pytest

@pytest.mark.compare_frameworks(model="model.onnx", frameworks=["onnxrt"], golden=True)
def test_marker():
    pass

def test_fixture(golden, runners):
    runner = runners.onnxrt("model.onnx")
    golden.check(runner.infer(golden.inputs(runner)))
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_a_changed_model_is_named_when_its_golden_fails(pytester, xdist, monkeypatch):
    pytester.makeconftest(MODEL_CONFTEST)
    pytester.makepyfile(test_model=MODEL_TESTS)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=2)
    monkeypatch.setenv("MODEL_SCALE", "1.5")
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=2)
    summary = [line for line in result.stdout.lines if line.startswith("FAILED")]
    assert len(summary) == 2, result.stdout.str()
    for line in summary:  # the first line of each failure, marker and fixture alike
        assert re.search(
            r"model changed since the golden was recorded \(sha256 \w{8}… → \w{8}…\)", line
        )


def _golden_test(pytester):
    pytester.makepyfile(
        test_link="import numpy as np\n\ndef test_it(golden):\n"
        "    golden.check({'y': np.ones(3, np.float32)})\n"
    )
    return pytester.path / "goldens" / "test_link" / "test_it.golden"


@pytest.mark.parametrize("xdist", XDIST)
def test_a_symlinked_golden_is_read_through_and_replaced_on_update(pytester, xdist):
    path = _golden_test(pytester)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    store = pytester.mkdir("dvc-cache") / "abc123"
    store.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(store)
    run(pytester, *xdist).assert_outcomes(passed=1)
    run(pytester, "--trt-update-goldens", *xdist).stdout.fnmatch_lines(["*unchanged 1*"])
    pytester.makepyfile(
        test_link="import numpy as np\n\ndef test_it(golden):\n"
        "    golden.check({'y': np.zeros(3, np.float32)})\n"
    )
    run(pytester, "--trt-update-goldens", *xdist).stdout.fnmatch_lines(["*updated 1*"])
    assert not path.is_symlink() and path.is_file()
    np.testing.assert_array_equal(read_golden(store).outputs["y"], np.ones(3))  # target kept


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize("what", ["a symlink loop", "a broken symlink"])
def test_update_replaces_a_dangling_link_with_the_golden(pytester, xdist, what):
    path = _golden_test(pytester)
    path.parent.mkdir(parents=True)
    path.symlink_to(path if what == "a symlink loop" else pytester.path / "nowhere")
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"*test_it.golden: is {what}, not a golden file; regenerate it with:", "  pytest *"]
    )
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    assert not path.is_symlink() and read_golden(path).outputs["y"].tolist() == [1.0, 1.0, 1.0]
    run(pytester, *xdist).assert_outcomes(passed=1)


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize("what", ["a directory", "a FIFO", "a symlink loop", "a broken symlink"])
def test_something_else_where_a_golden_should_be_is_named(pytester, xdist, what):
    path = _golden_test(pytester)
    path.parent.mkdir(parents=True)
    if what == "a directory":
        path.mkdir()
    elif what == "a FIFO":
        os.mkfifo(path)
    elif what == "a symlink loop":
        path.symlink_to(path)
    else:
        path.symlink_to(pytester.path / "nowhere")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *xdist, timeout=120)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*test_it.golden: is {what}, not a golden file*"])
    if what in ("a directory", "a FIFO"):  # --trt-update-goldens cannot replace those: say so
        result.stdout.fnmatch_lines(
            [
                "*not a golden file; remove it, then regenerate it with:",
                "  pytest --trt-update-goldens*",
            ]
        )


@pytest.mark.parametrize("xdist", XDIST)
def test_update_goldens_missing_writes_only_absent_ones(pytester, xdist):
    pytester.makepyfile(
        test_two="import numpy as np\n\ndef test_old(golden):\n"
        "    golden.check({'y': np.ones(3)})\n"
    )
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    old = pytester.path / "goldens" / "test_two" / "test_old.golden"
    before = old.read_bytes()
    pytester.makepyfile(
        test_two="import numpy as np\n\ndef test_old(golden):\n"
        "    golden.check({'y': np.zeros(3)})\n\n"
        "def test_new(golden):\n    golden.check({'y': np.ones(2)})\n"
    )
    result = run(pytester, "--trt-update-goldens-missing", *xdist)
    result.assert_outcomes(passed=1, failed=1)  # the stale golden still fails
    result.stdout.fnmatch_lines(["*created 1, checked 1*"])
    assert old.read_bytes() == before
    assert (old.parent / "test_new.golden").is_file()


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize(
    "how", [["--trt-strict-goldens"], ["-o", "trtcompare_strict_goldens=true"]]
)
def test_strict_goldens_fail_the_session_on_unused_goldens(pytester, xdist, how):
    pytester.makepyfile(
        test_s="import numpy as np\n\ndef test_a(golden):\n    golden.check({'y': np.ones(3)})\n\n"
        "def test_b(golden):\n    golden.check({'y': np.ones(3)})\n"
    )
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=2)
    pytester.makepyfile(
        test_s="import numpy as np\n\ndef test_a(golden):\n    golden.check({'y': np.ones(3)})\n"
    )
    assert run(pytester, *xdist).ret == 0  # reported only
    result = run(pytester, *how, *xdist)
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*unused: goldens/test_s/test_b.golden", "*unused goldens fail the session*"]
    )
    result = run(pytester, *how, "--trt-prune-goldens", *xdist)
    assert result.ret == 0
