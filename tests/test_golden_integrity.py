"""Goldens that cannot lie (issue 11): every damaged byte is detected and named, through the
store, the CLI and pytest, and --trt-update-goldens regenerates what was damaged."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import struct

import numpy as np
import pytest

from pytest_trtcompare.cli import main as cli
from pytest_trtcompare.goldens.format import OURS
from pytest_trtcompare.goldens.store import GoldenError, read_golden, write_golden

from .golden_bytes import (
    as_format_1,
    as_format_2,
    deep_json,
    join,
    legacy_with_deep_header,
    ours,
    rewrite,
    rewrite_legacy,
    split,
    with_deep_header,
)
from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run

OUTPUTS = {"y": np.arange(12, dtype=np.float32).reshape(3, 4) / 7}
INPUTS = {"x": np.linspace(0, 1, 3, dtype=np.float32)}


@pytest.fixture
def small(tmp_path):
    """A small golden (outputs and inputs) and an intact twin to diff against."""
    path, twin = tmp_path / "g.safetensors", tmp_path / "twin.safetensors"
    write_golden(path, OUTPUTS, INPUTS, {"test": "test_m.py::test_it", "seed": 1})
    write_golden(twin, OUTPUTS, INPUTS, {"test": "test_m.py::test_it", "seed": 1})
    return path, twin, path.read_bytes()


def _cli_exit(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(list(args))
    return code, err.getvalue()


def _assert_detected(path, twin, label, commands=True):
    """The store raises GoldenError naming the file; `show` and `diff` exit 2 with it."""
    with pytest.raises(GoldenError) as info:
        read_golden(path)
    message = str(info.value)
    named = ("corrupt", "truncated", "not a golden")
    assert str(path) in message and any(word in message for word in named), label
    for args in (("show", str(path)), ("diff", str(path), str(twin))) if commands else ():
        code, err = _cli_exit(*args)
        assert code == 2 and str(path) in err and "Traceback" not in err, (label, args, err)


def test_every_single_bit_flip_is_detected(small):
    path, twin, data = small
    assert len(data) * 8 >= 3500  # every byte of a header, two tensors and their checksums
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        path.write_bytes(bytes(flipped))
        # the commands read through the store: their exit is checked once a byte
        _assert_detected(path, twin, f"bit {bit}", commands=bit % 8 == bit // 8 % 8)


def test_every_truncation_and_any_appended_byte_is_detected(small):
    path, twin, data = small
    for size in range(len(data)):
        path.write_bytes(data[:size])
        _assert_detected(path, twin, f"cut at {size}")
    for extra in (b"\0", b"x", b"\0" * 64):
        path.write_bytes(data + extra)
        _assert_detected(path, twin, f"appended {extra!r}")


def _set(key, value, tensor="outputs/y"):
    return lambda document: document[tensor].__setitem__(key, value)


def _rename(old, new):
    def change(document):
        document[new] = document.pop(old)
        sums = document["__metadata__"]
        sums[f"xxh3:{new}"] = sums.pop(f"xxh3:{old}")

    return change


def _metadata(key, value=None):
    """Set (or, with None, remove) one __metadata__ entry."""

    def change(document):
        if value is None:
            document["__metadata__"].pop(key)
        else:
            document["__metadata__"][key] = value

    return change


def _rename_sum(old, new):
    def change(document):
        sums = document["__metadata__"]
        sums[f"xxh3:{new}"] = sums.pop(f"xxh3:{old}")

    return change


HAND_CRAFTED = {
    "tensor entry without dtype": (
        lambda d: d["outputs/y"].pop("dtype"),
        "tensor 'outputs/y' has keys ['data_offsets', 'shape']",
    ),
    "shape that wraps in int64": (_set("shape", [2**62, 4]), "field 'data_offsets' of tensor"),
    "shape of other size": (_set("shape", [4, 4]), "'data_offsets' of tensor 'outputs/y': [0, 48]"),
    "negative dim": (_set("shape", [-3, -4]), "header field 'shape' of tensor 'outputs/y'"),
    "non-integer dim": (_set("shape", [3.0, 4]), "header field 'shape' of tensor 'outputs/y'"),
    "bool dim": (_set("shape", [True, 12]), "header field 'shape' of tensor 'outputs/y'"),
    "rank 65": (_set("shape", [1] * 65), "header field 'shape' of tensor 'outputs/y'"),
    "meta as a list": (ours(lambda o: o.__setitem__("meta", [1, 2])), "header field 'meta'"),
    "inputs group renamed": (
        _rename("inputs/x", "inpuus/x"),
        "tensor 'inpuus/x' is not listed in the golden's outputs or inputs",
    ),
    "tensor renamed": (
        _rename("outputs/y", "outputs/z"),
        "tensor 'outputs/z' is not listed in the golden's outputs or inputs",
    ),
    "tensor removed": (lambda d: d.pop("inputs/x"), "tensor 'inputs/x' is missing"),
    "name listed twice": (
        ours(lambda o: o["outputs"].append("y")),
        "header field 'outputs': 'y' appears twice",
    ),
    "object dtype": (_set("dtype", "|O8"), "'dtype' of tensor 'outputs/y': '|O8' is not a type"),
    "complex dtype": (_set("dtype", "C64"), "'dtype' of tensor 'outputs/y': 'C64' is not a type"),
    "unknown dtype": (_set("dtype", "F128"), "'dtype' of tensor 'outputs/y': 'F128' is not a"),
    "dtype of another size": (_set("dtype", "F64"), "[0, 48] (48 bytes) for shape [3, 4] of F64"),
    "data_offsets as strings": (
        _set("data_offsets", ["0", "48"]),
        "header field 'data_offsets' of tensor 'outputs/y': ['0', '48'] is not [begin, end]",
    ),
    "data_offsets backwards": (_set("data_offsets", [48, 0]), "[48, 0] is not [begin, end]"),
    "overlapping data_offsets": (
        _set("data_offsets", [40, 52], "inputs/x"),
        "'data_offsets' of tensor 'inputs/x': begins at 40, expected 48",
    ),
    "a gap between tensors": (
        _set("data_offsets", [52, 64], "inputs/x"),
        "'data_offsets' of tensor 'inputs/x': begins at 52, expected 48",
    ),
    "out-of-order data_offsets": (
        lambda d: (
            d["outputs/y"].__setitem__("data_offsets", [12, 60]),
            d["inputs/x"].__setitem__("data_offsets", [0, 12]),
        ),
        "checksum of output 'y' does not match",
    ),
    "extra metadata entry": (
        _metadata("note", "hello"),
        "header field '__metadata__': unexpected entry 'note'",
    ),
    "metadata checksum removed": (
        _metadata("xxh3:outputs/y"),
        "tensor 'outputs/y' has no checksum",
    ),
    "metadata checksum renamed": (
        _rename_sum("outputs/y", "outputs/w"),
        "header field '__metadata__': unexpected entry 'xxh3:outputs/w'",
    ),
    "metadata value not a string": (
        _metadata("xxh3:outputs/y", 5),
        "header field '__metadata__': 'xxh3:outputs/y' is not a string",
    ),
    "our entry removed": (_metadata(OURS), "header field '__metadata__': no 'pytest_trtcompare'"),
    "our entry not JSON": (_metadata(OURS, "{"), "header field 'pytest_trtcompare': not JSON"),
    "our entry without inputs": (
        ours(lambda o: o.pop("inputs")),
        "header field 'pytest_trtcompare': keys",
    ),
    "format 4": (ours(lambda o: o.__setitem__("format", 4)), "header field 'format': 4"),
    "stored as U8 of an unknown type": (
        ours(lambda o: o["stored_as_u8"].__setitem__("outputs/y", "float4")),
        "header field 'stored_as_u8': 'outputs/y': 'float4'",
    ),
    "checksum not hex": (
        _metadata("xxh3:outputs/y", "zz" * 8),
        "header field 'xxh3:outputs/y' of tensor 'outputs/y': 'zzzzzzzzzzzzzzzz' is not 16 hex",
    ),
    "checksum of other bytes": (
        _metadata("xxh3:outputs/y", "0" * 16),
        "checksum of output 'y' does not match",
    ),
    "dtype as a list": (
        _set("dtype", ["F32"]),
        "header field 'dtype' of tensor 'outputs/y': ['F32'] is not a type goldens hold",
    ),
    "our entry nested past json's recursion limit": (
        _metadata(OURS, '{"format":3,"meta":' + deep_json() + "}"),
        "header field 'pytest_trtcompare': nests deeper than 32 levels",
    ),
    "meta nested 32 levels": (
        ours(lambda o: o.__setitem__("meta", json.loads(deep_json(32)))),
        "header field 'pytest_trtcompare': nests deeper than 32 levels",
    ),
}


@pytest.mark.parametrize("case", sorted(HAND_CRAFTED))
def test_hand_crafted_headers_are_named_as_corrupt(small, case):
    """Headers a tool could write with a valid checksum: the schema names what is wrong."""
    path, twin, _ = small
    change, message = HAND_CRAFTED[case]
    rewrite(path, change)
    _assert_detected(path, twin, case)
    with pytest.raises(GoldenError, match=re.escape(message)):
        read_golden(path)


def test_a_header_checksum_that_holds_does_not_excuse_other_bytes(small):
    """Valid JSON with a valid checksum, but not the bytes we write: spaces, a key twice, a
    damaged padding, a longer padding."""
    path, twin, data = small
    document, body = split(data)
    canonical_header = join(document, body)[8:]
    header = canonical_header[: canonical_header.rindex(b"}") + 1]
    variants = {
        "spaces": header.replace(b'":', b'": ', 1),
        "a key twice": header[:-1]
        + b',"inputs/x":'
        + json.dumps(document["inputs/x"]).encode()
        + b"}",
        "long padding": header + b" " * 16,
    }
    for label, text in variants.items():
        text += b" " * (-len(text) % 8)
        path.write_bytes(struct.pack("<Q", len(text)) + text + body)
        _assert_detected(path, twin, label)
    path.write_bytes(data[:8] + data[8:].replace(b"} ", b"}x", 1))
    with pytest.raises(GoldenError, match=r"corrupt golden \(the header is not JSON\)"):
        read_golden(path)


def test_headers_nested_past_json_recursion_limit_are_corrupt(small):
    """JSON nested 100,000 levels down, where json.loads raises RecursionError: in the
    safetensors header and in a format-2 header (its checksum holds), named as corrupt."""
    path, twin, data = small
    path.write_bytes(with_deep_header(data))
    _assert_detected(path, twin, "deep header")
    with pytest.raises(GoldenError, match=r"corrupt golden \(the header nests deeper than 32"):
        read_golden(path)
    path.write_bytes(data)
    old = as_format_2(path)
    old.write_bytes(legacy_with_deep_header(old.read_bytes()))
    _assert_detected(old, twin, "deep format-2 header")
    with pytest.raises(GoldenError, match=r"corrupt golden \(the header nests deeper than 32"):
        read_golden(old)


def test_meta_a_reader_would_refuse_is_never_written(tmp_path):
    path = tmp_path / "g.safetensors"
    with pytest.raises(GoldenError, match="a golden's meta nests deeper than 31 levels"):
        write_golden(path, OUTPUTS, meta={"deep": json.loads(deep_json(31))})
    assert not path.exists()
    write_golden(path, OUTPUTS, meta={"deep": json.loads(deep_json(30))})
    assert read_golden(path).meta["deep"] == json.loads(deep_json(30))


def test_a_header_length_beyond_the_file_never_allocates(small):
    path, twin, data = small
    path.write_bytes(struct.pack("<Q", 8 * 10**15) + data[8:])
    _assert_detected(path, twin, "huge length")
    with pytest.raises(
        GoldenError, match=rf"header of {8 * 10**15} bytes in a file of {len(data)}\)"
    ):
        read_golden(path)


def test_a_safetensors_file_of_another_tool_is_not_taken_for_a_golden(tmp_path):
    import safetensors.numpy

    path = tmp_path / "model.safetensors"
    safetensors.numpy.save_file(OUTPUTS, str(path), metadata={"format": "pt"})
    with pytest.raises(GoldenError, match="a safetensors file, not a pytest-trtcompare golden"):
        read_golden(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "an empty file, not a golden"),
        (b"version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 512\n", "git lfs pull"),
        (b"<<<<<<< HEAD\nPYTEST-TRTCOMPARE", "holds git merge-conflict markers, not a golden"),
        (b"PK\x03\x04 a zip file of 32 bytes ......", "not a pytest-trtcompare golden"),
        (
            b"not a golden\nsecond line\n",
            "a text file, not a golden (it starts with 'not a golden\\nsecond line\\n')",
        ),
        (b'{"outputs": [1, 2, 3]}', """a text file, not a golden (it starts with '{"outputs\""""),
        ("vérifié: pas un golden".encode(), "a text file, not a golden (it starts with 'vérifié"),
        (b"TODO\n", "a text file, not a golden (it starts with 'TODO\\n')"),
        (b"{}", "a text file, not a golden (it starts with '{}')"),
        (b"\x10\x00\x00", "truncated golden (3 bytes, cut in its 8 length bytes)"),
        (b"h", "truncated golden (1 bytes, cut in its 8 length bytes)"),  # 0x68: a length's
        (b"i", "a text file, not a golden (it starts with 'i')"),  # 0x69: no length's byte
        (b"PYTEST-TRT", "truncated golden (10 bytes, cut in its magic)"),  # an old .golden
        (b"PYTEST-TRTCOMPARE-GOLDEN-", "truncated golden (25 bytes, cut in its magic)"),
    ],
)
def test_what_real_life_leaves_instead_of_a_golden_is_named(small, content, message):
    path, _, _ = small
    path.write_bytes(content)
    with pytest.raises(GoldenError, match=re.escape(message)):
        read_golden(path)
    assert _cli_exit("show", str(path))[0] == 2


# -- the old formats (.golden) ------------------------------------------------------------------
def _set_old(key, value):
    return lambda document: document["tensors"][0].__setitem__(key, value)


OLD_HAND_CRAFTED = {
    "no group key": (lambda d: d["tensors"][0].pop("group"), "tensor 0 has keys"),
    "shape that wraps in int64": (_set_old("shape", [2**62, 4]), "header field 'nbytes'"),
    "negative dim": (_set_old("shape", [-3, -4]), "header field 'shape' of tensor 'y'"),
    "meta as a list": (lambda d: d.__setitem__("meta", [1, 2]), "header field 'meta'"),
    "inputs group renamed": (
        lambda d: d["tensors"][1].__setitem__("group", "inpuus"),
        "header field 'group' of tensor 1: 'inpuus' is not one of outputs, inputs",
    ),
    "duplicate name": (
        lambda d: d["tensors"].append(dict(d["tensors"][0])),
        "header field 'name' of tensor 'y': outputs 'y' appears twice",
    ),
    "big-endian dtype": (_set_old("dtype", ">f4"), "'>f4' is big-endian; goldens are little"),
    "unknown dtype": (_set_old("dtype", "float128x"), "header field 'dtype' of tensor 'y'"),
    "extra header key": (lambda d: d.__setitem__("extra", 1), "header keys"),
    "checksum of other bytes": (_set_old("xxh3", "0" * 16), "checksum of output 'y' does not"),
}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("case", sorted(OLD_HAND_CRAFTED))
def test_hand_crafted_headers_in_the_old_formats_are_corrupt_too(small, case, version):
    path, twin, _ = small
    old = as_format_2(path)
    change, message = OLD_HAND_CRAFTED[case]
    if version == 1 and case == "checksum of other bytes":
        return  # format 1 has no checksums
    rewrite_legacy(old, change, version=version)
    _assert_detected(old, twin, case)
    with pytest.raises(GoldenError, match=re.escape(message)):
        read_golden(old)


def test_bit_flips_and_truncations_of_a_format_2_golden_are_detected(small):
    """Its reader is the one of 0.2 (fuzzed there bit by bit): every third bit and size."""
    path, _, _ = small
    old = as_format_2(path)
    data = old.read_bytes()
    for bit in range(0, len(data) * 8, 3):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        old.write_bytes(bytes(flipped))
        with pytest.raises(GoldenError):
            read_golden(old)
    for size in range(0, len(data), 3):
        old.write_bytes(data[:size])
        with pytest.raises(GoldenError):
            read_golden(old)


@pytest.mark.parametrize("version", [1, 2])
def test_old_format_goldens_still_load(small, version):
    path, _, _ = small
    old = as_format_2(path) if version == 2 else as_format_1(path)
    golden = read_golden(old)
    assert golden.version == version
    np.testing.assert_array_equal(golden.outputs["y"], OUTPUTS["y"])
    np.testing.assert_array_equal(golden.inputs["x"], INPUTS["x"])
    assert golden.meta == {"test": "test_m.py::test_it", "seed": 1}
    assert write_golden(old, OUTPUTS, INPUTS, golden.meta) == "updated"  # upgraded, beside it
    assert not old.exists() and read_golden(path).version == 3
    assert split(path.read_bytes())[0]["__metadata__"]["xxh3:outputs/y"]


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
    elif how == "deep":  # JSON nested past json's recursion limit
        data = bytearray(with_deep_header(bytes(data)))
    elif how == "dtype list":  # a valid checksum, a dtype that is no string
        rewrite(path, lambda d: d["outputs/y"].__setitem__("dtype", ["F32"]))
        return
    else:  # a header rewritten with a valid checksum but a broken schema
        rewrite(path, lambda d: d["outputs/y"].__setitem__("shape", [-1]))
        return
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("xdist", XDIST)
def test_damaged_goldens_fail_their_tests_and_update_regenerates_them(pytester, xdist):
    pytester.makepyfile(test_many="import numpy as np\n\n" + MANY_TESTS + INPUT_TEST)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=MANY + 1)
    rng = random.Random(11)
    folder = pytester.path / "goldens" / "test_many"
    goldens = sorted(folder.glob("*.safetensors"))
    assert len(goldens) == MANY + 1
    for index, path in enumerate(goldens):
        _damage(path, ("flip", "cut", "schema", "deep", "dtype list")[index % 5], rng)
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
@pytest.mark.parametrize("version", [1, 2])
def test_old_format_goldens_pass_are_named_and_update_rewrites_them(pytester, xdist, version):
    pytester.makepyfile(test_old="import numpy as np\n\n" + MANY_TESTS.split("\n\n")[0])
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    path = pytester.path / "goldens" / "test_old" / "test_g0.safetensors"
    old = as_format_2(path) if version == 2 else as_format_1(path)
    result = run(pytester, *xdist)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*checked 1, unused 0",
            "  old format: goldens/test_old/test_g0.golden",
            "  (old .golden files; --trt-update-goldens rewrites them as .safetensors)",
        ]
    )
    result = run(pytester, "--trt-update-goldens", *xdist)
    result.stdout.fnmatch_lines(["*created 0, updated 1, unchanged 0*"])
    assert "old format" not in result.stdout.str()
    assert not old.exists() and read_golden(path).version == 3
    run(pytester, *xdist).assert_outcomes(passed=1)


@pytest.mark.parametrize("xdist", XDIST)
def test_an_old_golden_beside_a_new_one_is_unused_and_pruned(pytester, xdist):
    pytester.makepyfile(test_old="import numpy as np\n\n" + MANY_TESTS.split("\n\n")[0])
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    path = pytester.path / "goldens" / "test_old" / "test_g0.safetensors"
    data = path.read_bytes()
    old = as_format_2(path)
    path.write_bytes(data)  # both: the new one wins, the old one is stale
    result = run(pytester, *xdist)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*checked 1, unused 1", "  unused: goldens/test_old/test_g0.golden"]
    )
    run(pytester, "--trt-prune-goldens", *xdist).stdout.fnmatch_lines(
        ["*pruned: goldens/test_old/test_g0.golden"]
    )
    assert not old.exists() and path.read_bytes() == data


@pytest.mark.parametrize("xdist", XDIST)
def test_stored_inputs_of_other_shapes_fail_and_say_how_to_refresh(pytester, xdist):
    pytester.makepyfile(test_in=INPUT_TEST)
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    pytester.makepyfile(test_in=INPUT_TEST.replace('shapes={"x": (2, 4)}', 'shapes={"x": (5, 4)}'))
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*golden goldens/test_in/test_with_inputs.safetensors: its stored input 'x' has shape "
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
    return pytester.path / "goldens" / "test_link" / "test_it.safetensors"


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
@pytest.mark.parametrize("suffix", [".safetensors", ".golden"])
def test_update_replaces_a_dangling_link_with_the_golden(pytester, xdist, what, suffix):
    """A dangling link at the golden's path, or at the old `.golden` path beside it: named,
    and --trt-update-goldens writes the golden and leaves no link behind."""
    path = _golden_test(pytester)
    path.parent.mkdir(parents=True)
    link = path.with_suffix(suffix)
    link.symlink_to(link if what == "a symlink loop" else pytester.path / "nowhere")
    result = run(pytester, *xdist)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"*test_it{suffix}: is {what}, not a golden file; regenerate it with:", "  pytest *"]
    )
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    assert not path.is_symlink() and read_golden(path).outputs["y"].tolist() == [1.0, 1.0, 1.0]
    assert not link.is_symlink()
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
    result.stdout.fnmatch_lines([f"*test_it.safetensors: is {what}, not a golden file*"])
    if what in ("a directory", "a FIFO"):  # --trt-update-goldens cannot replace those: say so
        result.stdout.fnmatch_lines(
            [
                "*not a golden file; remove it, then regenerate it with:",
                "  pytest --trt-update-goldens*",
            ]
        )


@pytest.mark.parametrize("xdist", XDIST)
def test_a_file_where_the_goldens_folder_should_be_is_the_thing_to_remove(pytester, xdist):
    """goldens/test_link is a file: the message names it as what to remove (not the golden
    path under it, which cannot exist), and --trt-update-goldens cannot write through it."""
    path = _golden_test(pytester)
    path.parent.parent.mkdir()
    path.parent.write_text("not a folder")
    for options in ([], ["--trt-update-goldens"]):
        result = run(pytester, "-rf", *options, *xdist)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            [
                "*goldens/test_link/test_it.safetensors: goldens/test_link is a file, where a "
                "folder of goldens should be; remove goldens/test_link, then regenerate it with:",
                "  pytest --trt-update-goldens test_link.py::test_it",
            ]
        )
    assert path.parent.read_text() == "not a folder"


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize("given", ["--trt-goldens-dir=store.txt", "--trt-goldens-dir=store.txt/g"])
def test_a_goldens_dir_that_is_a_file_is_a_usage_error(pytester, xdist, given):
    _golden_test(pytester)
    (pytester.path / "store.txt").write_text("a file")
    result = run(pytester, given, *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"ERROR: {given}: {pytester.path / 'store.txt'} is a file, not a folder"]
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    pytester.makeini("[pytest]\ntrtcompare_goldens_dir = store.txt\n")
    result = run(pytester, *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini trtcompare_goldens_dir: * is a file, not a folder"])


@pytest.mark.parametrize("xdist", XDIST)
def test_update_goldens_missing_writes_only_absent_ones(pytester, xdist):
    pytester.makepyfile(
        test_two="import numpy as np\n\ndef test_old(golden):\n"
        "    golden.check({'y': np.ones(3)})\n"
    )
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=1)
    old = pytester.path / "goldens" / "test_two" / "test_old.safetensors"
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
    assert (old.parent / "test_new.safetensors").is_file()


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
        ["*unused: goldens/test_s/test_b.safetensors", "*unused goldens fail the session*"]
    )
    result = run(pytester, *how, "--trt-prune-goldens", *xdist)
    assert result.ret == 0
