"""Goldens are safetensors files (issue 27): the libraries users already have open them, as the
docs/tutorials/goldens.md and docs/GOLDEN_FORMAT.md say; what safetensors has no dtype for is
still stored."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
import safetensors.numpy
import xxhash
from safetensors import safe_open

from pytest_trtcompare.goldens.store import GoldenError, read_golden, read_header, write_golden

OUTPUTS = {
    "logits": np.linspace(-3, 3, 40, dtype=np.float32).reshape(4, 10),
    "encoder/layer.0/out": np.arange(6, dtype=np.int64).reshape(2, 3),  # "/" in a name
    "mask": np.array([True, False, True]),
    "half": np.ones((2, 2), np.float16),
    "bf16": np.linspace(0, 1, 5).astype(ml_dtypes.bfloat16),
    "scalar": np.float64(2.5),
    "empty": np.zeros((0, 3), np.float32),
}
INPUTS = {"x": np.linspace(0, 1, 8, dtype=np.float32).reshape(2, 4)}
META = {"test": "test_m.py::test_it", "precision": "fp16", "runner": {"model_digest": "ab" * 32}}


@pytest.fixture
def golden(tmp_path):
    path = tmp_path / "test_it.safetensors"
    write_golden(path, OUTPUTS, INPUTS, META)
    return path


def _expected():
    return {
        **{f"outputs/{name}": np.asarray(value) for name, value in OUTPUTS.items()},
        **{f"inputs/{name}": value for name, value in INPUTS.items()},
    }


def test_safetensors_numpy_opens_a_golden_as_the_readme_shows(golden):
    loaded = safetensors.numpy.load_file(golden)
    expected = _expected()
    assert sorted(loaded) == sorted(expected)
    for key, value in expected.items():
        assert loaded[key].dtype == value.dtype and loaded[key].shape == value.shape, key
        np.testing.assert_array_equal(loaded[key], value)


def test_safetensors_torch_opens_a_golden_as_the_readme_shows(golden):
    torch = pytest.importorskip("torch")
    import safetensors.torch

    loaded = safetensors.torch.load_file(golden)
    assert loaded["outputs/bf16"].dtype == torch.bfloat16
    for key, value in _expected().items():
        tensor = loaded[key]
        assert tuple(tensor.shape) == value.shape, key
        as_float = tensor.float().numpy() if tensor.dtype == torch.bfloat16 else tensor.numpy()
        np.testing.assert_array_equal(as_float, value.astype(as_float.dtype))


def test_safe_open_gives_our_metadata_and_checksums_anyone_can_verify(golden):
    with safe_open(golden, framework="np") as handle:
        metadata = handle.metadata()
        ours = json.loads(metadata["pytest_trtcompare"])
        assert ours["format"] == 3 and ours["meta"] == META
        assert ours["outputs"] == list(OUTPUTS) and ours["inputs"] == ["x"]
        for key in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
            array = handle.get_tensor(key)
            assert xxhash.xxh3_64_hexdigest(array.tobytes()) == metadata[f"xxh3:{key}"], key


def test_tensors_are_aligned_to_their_item_size(golden):
    """Widest first, after a header padded to 8 bytes: zero-copy views for every framework."""
    for tensor in read_header(golden)["tensors"]:
        itemsize = np.dtype(np.asarray(OUTPUTS.get(tensor["name"], 0)).dtype).itemsize
        assert tensor["offset"] % max(itemsize, 1) == 0, tensor


def test_float8_tensors_open_in_torch(tmp_path):
    torch = pytest.importorskip("torch")
    import safetensors.torch

    path = tmp_path / "f8.safetensors"
    values = np.array([0.5, -2, 448], np.float32)
    outputs = {
        "e4m3": values.astype(ml_dtypes.float8_e4m3fn),
        "e5m2": values.astype(ml_dtypes.float8_e5m2),
    }
    write_golden(path, outputs)
    loaded = safetensors.torch.load_file(path)
    assert loaded["outputs/e4m3"].dtype == torch.float8_e4m3fn
    assert loaded["outputs/e5m2"].dtype == torch.float8_e5m2
    np.testing.assert_array_equal(loaded["outputs/e4m3"].float().numpy(), values)
    for name, value in read_golden(path).outputs.items():
        assert value.dtype == outputs[name].dtype and value.tobytes() == outputs[name].tobytes()


def test_fnuz_float8_has_no_safetensors_type_and_is_stored_as_bytes(tmp_path):
    path = tmp_path / "fnuz.safetensors"
    value = np.array([0.5, -2, 3], np.float32).astype(ml_dtypes.float8_e4m3fnuz)
    write_golden(path, {"y": value})
    golden = read_golden(path)
    assert golden.outputs["y"].dtype == value.dtype
    assert golden.outputs["y"].tobytes() == value.tobytes()
    raw = safetensors.numpy.load_file(path)["outputs/y"]  # what other tools see: its bytes
    assert raw.dtype == np.uint8 and raw.tobytes() == value.tobytes()
    with safe_open(path, framework="np") as handle:
        stored = json.loads(handle.metadata()["pytest_trtcompare"])["stored_as_u8"]
    assert stored == {"outputs/y": "float8_e4m3fnuz"}


@pytest.mark.parametrize(
    ("value", "dtype"),
    [(np.ones(2, np.complex64), "complex64"), (np.array(["a", "b"]), "<U1")],
)
def test_dtypes_goldens_cannot_hold_are_refused_naming_the_tensor(tmp_path, value, dtype):
    """(Outputs of these types are refused before, by the comparison's own check.)"""
    path = tmp_path / "c.safetensors"
    with pytest.raises(GoldenError, match=rf"input 'z' has dtype {dtype}; goldens hold bool"):
        write_golden(path, {"y": np.ones(2)}, {"z": value})
    assert not path.exists()


def test_a_golden_of_several_iterations_reads_back_in_order_and_any_reader_opens_it(tmp_path):
    """compare_frameworks(golden=True, iterations=N) stores each iteration (issue 45):
    `outputs.K/<name>`, `inputs.K/<name>`, `iterations` in our metadata; one iteration
    stays byte for byte what it was."""
    path = tmp_path / "g.safetensors"
    later = [({"logits": OUTPUTS["logits"] * k}, {"x": INPUTS["x"] + k}) for k in (1, 2)]
    one = {"logits": OUTPUTS["logits"]}
    assert write_golden(path, one, INPUTS, META, later=later) == "created"
    assert write_golden(path, one, INPUTS, META, later=later) == "unchanged"
    golden = read_golden(path)
    assert len(golden.iterations) == 3
    for k, iteration in enumerate(golden.iterations):
        np.testing.assert_array_equal(iteration.outputs["logits"], OUTPUTS["logits"] * max(k, 1))
        np.testing.assert_array_equal(iteration.inputs["x"], INPUTS["x"] + k)
    loaded = safetensors.numpy.load_file(path)
    assert sorted(loaded) == [
        "inputs.1/x", "inputs.2/x", "inputs/x", "outputs.1/logits", "outputs.2/logits",
        "outputs/logits",
    ]  # fmt: skip
    with safe_open(path, framework="np") as handle:
        ours = json.loads(handle.metadata()["pytest_trtcompare"])
    assert ours["iterations"] == 3 and ours["outputs"] == ["logits"]
    single = tmp_path / "one.safetensors"
    write_golden(single, one, INPUTS, META)
    with safe_open(single, framework="np") as handle:
        assert "iterations" not in json.loads(handle.metadata()["pytest_trtcompare"])
    # a later iteration's bytes are checked like the first's, and named
    data = bytearray(path.read_bytes())
    header = read_header(path)
    (tensor,) = [t for t in header["tensors"] if t["group"] == "outputs.2"]
    data[tensor["offset"]] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(GoldenError, match=r"checksum of output 'logits' of iteration 2 does"):
        read_golden(path)
    # the iterations hold the same tensors, or nothing is written
    with pytest.raises(GoldenError, match=r"iteration 1 has outputs \['other'\], iteration 0"):
        write_golden(tmp_path / "x.safetensors", one, INPUTS, META, later=[({"other": 1}, INPUTS)])
    assert not (tmp_path / "x.safetensors").exists()
