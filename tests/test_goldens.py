"""The golden file format: round trips, determinism, and refusing bad files clearly."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

from pytest_trtcompare.goldens.store import (
    GoldenError,
    golden_path,
    read_golden,
    read_header,
    safe_file_stem,
    write_golden,
)

from .golden_bytes import as_format_1, rewrite

OUTPUTS = {
    "logits": np.linspace(-3, 3, 40, dtype=np.float32).reshape(4, 10),
    "ids": np.arange(4, dtype=np.int64),
    "mask": np.array([True, False]),
    "half": np.ones((2, 2), np.float16),
    "bf16": np.linspace(0, 1, 5).astype(ml_dtypes.bfloat16),
    "scalar": np.float64(2.5),
    "empty": np.zeros((0, 3), np.float32),
}


def test_round_trip_keeps_values_dtypes_and_shapes(tmp_path):
    path = tmp_path / "g.safetensors"
    assert write_golden(path, OUTPUTS, {"x": np.ones(3)}, {"seed": 1}) == "created"
    golden = read_golden(path)
    assert list(golden.outputs) == list(OUTPUTS)
    for name, value in OUTPUTS.items():
        loaded = golden.outputs[name]
        assert loaded.dtype == np.asarray(value).dtype and loaded.shape == np.shape(value)
        np.testing.assert_array_equal(loaded.astype(np.float64), np.asarray(value, np.float64))
    assert golden.inputs["x"].tolist() == [1.0, 1.0, 1.0] and golden.meta == {"seed": 1}


def test_identical_data_gives_identical_bytes(tmp_path):
    first, second = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    write_golden(first, OUTPUTS, meta={"runner": {"version": "1"}})
    write_golden(
        second, {k: np.copy(v) for k, v in OUTPUTS.items()}, meta={"runner": {"version": "1"}}
    )
    assert first.read_bytes() == second.read_bytes()
    assert write_golden(first, OUTPUTS, meta={"runner": {"version": "1"}}) == "unchanged"
    assert write_golden(first, {**OUTPUTS, "ids": np.arange(4) + 1}) == "updated"


def test_file_size_is_the_raw_bytes_plus_a_small_header(tmp_path):
    path = tmp_path / "big.safetensors"
    array = np.zeros(1 << 20, np.float32)
    write_golden(path, {"y": array})
    assert array.nbytes < path.stat().st_size < array.nbytes + 4096
    assert path.read_bytes()[8:25] == b'{"__metadata__":{'
    # readable with numpy alone: the header says where the bytes are
    header = read_header(path)
    offset = header["tensors"][0]["offset"]
    assert np.array_equal(np.fromfile(path, np.float32, offset=offset), array)


def test_truncated_golden_names_the_file(tmp_path):
    path = tmp_path / "t.safetensors"
    write_golden(path, {"y": np.ones(1000, np.float32)})
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(
        GoldenError,
        match=rf"t\.safetensors: truncated golden \({size - 100} bytes, its header describes",
    ):
        read_golden(path)
    path.write_bytes(path.read_bytes()[:30])
    with pytest.raises(
        GoldenError, match=r"t\.safetensors: truncated or corrupt golden \(header of"
    ):
        read_golden(path)
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(
        GoldenError, match=r"t\.safetensors: truncated golden \(20 bytes, cut in its"
    ):
        read_golden(path)


def test_corrupt_header_and_foreign_files_name_the_file(tmp_path):
    path = tmp_path / "c.safetensors"
    write_golden(path, {"y": np.ones(4)})
    data = bytearray(path.read_bytes())
    start = data.index(b'"xxh3:outputs/y":"') + len(b'"xxh3:outputs/y":"')
    data[start] = ord("0") if data[start] != ord("0") else ord("1")  # still JSON, still hex
    path.write_bytes(bytes(data))
    with pytest.raises(
        GoldenError, match=r"c\.safetensors: corrupt golden \(the header's checksum"
    ):
        read_golden(path)
    data[data.rindex(b"}", 0, 8 + int.from_bytes(data[:8], "little"))] = ord("#")
    path.write_bytes(bytes(data))
    with pytest.raises(GoldenError, match=r"c\.safetensors: corrupt golden \(the header is not"):
        read_golden(path)
    write_golden(path, {"y": np.ones(4)})
    path = as_format_1(path)  # 0.1.0 goldens have no checksum: the schema still catches it
    data = bytearray(path.read_bytes())
    start = data.index(b"{")
    data[start : start + 10] = b"#" * 10
    path.write_bytes(bytes(data))
    with pytest.raises(GoldenError, match=r"c\.golden: corrupt golden \(the header is not JSON"):
        read_golden(path)
    foreign = tmp_path / "f.safetensors"
    np.save(foreign.with_suffix(".npy"), np.ones(2))
    foreign.write_bytes(foreign.with_suffix(".npy").read_bytes())
    with pytest.raises(GoldenError, match=r"f\.safetensors: not a pytest-trtcompare golden"):
        read_golden(foreign)
    flipped = tmp_path / "k.safetensors"
    write_golden(flipped, {"y": np.ones(4)})
    data = bytearray(flipped.read_bytes())
    data[12] ^= 0x01  # inside the key "__metadata__"
    flipped.write_bytes(bytes(data))
    with pytest.raises(GoldenError) as raised:
        read_golden(flipped)
    assert "k.safetensors: not a pytest-trtcompare golden, or a corrupt one (it starts with " in (
        str(raised.value)
    )
    assert """where a golden has '{"__metadata__":{')""" in str(raised.value)


def test_object_arrays_are_refused_both_ways(tmp_path):
    with pytest.raises(Exception, match="object array"):
        write_golden(tmp_path / "o.safetensors", {"y": np.array([object()], dtype=object)})
    path = tmp_path / "p.safetensors"
    write_golden(path, {"y": np.ones(2)})
    rewrite(path, lambda document: document["outputs/y"].update(dtype="|O8"))
    with pytest.raises(GoldenError, match=r"'dtype' of tensor 'outputs/y': '\|O8' is not a type"):
        read_golden(path)


@pytest.mark.parametrize("name", ["../../escape", "a/b", "..", "/etc/passwd", "x\\y", "..."])
def test_names_cannot_leave_the_goldens_folder(tmp_path, name):
    folder = tmp_path / "goldens"
    path = golden_path(folder, "test_x", name)
    assert path.parent == folder
    write_golden(path, {name: np.ones(1)})  # the output name is data, never a path
    assert read_golden(path).outputs[name].tolist() == [1.0]
    assert [p.parent for p in tmp_path.rglob("*.safetensors")] == [folder]


def test_distinct_ids_never_share_a_file():
    ids = ["t[bs=1]", "t[bs-1]", "t[bs_1]", "t[bs 1]", "T[bs_1]", "t[bs/1]", "t[bs\\1]"]
    stems = {safe_file_stem(i) for i in ids}
    assert len(stems) == len(ids)
    assert safe_file_stem("test_a[fp16-bs8]") == "test_a[fp16-bs8]"  # readable when safe


def test_no_temp_files_left_and_old_golden_kept_on_failure(tmp_path, monkeypatch):
    path = tmp_path / "k.safetensors"
    write_golden(path, {"y": np.ones(3)})
    before = path.read_bytes()

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pytest_trtcompare.goldens.store.start_writeback", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_golden(path, {"y": np.zeros(3)})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.safetensors"]


def test_header_is_json_with_the_metadata(tmp_path):
    path = tmp_path / "m.safetensors"
    write_golden(path, {"y": np.ones(2)}, meta={"precision": "fp16", "seed": 3})
    header = read_header(path)
    assert header["meta"] == {"precision": "fp16", "seed": 3}
    assert json.loads(json.dumps(header)) == header


def test_new_goldens_get_normal_permissions_and_keep_changed_ones(tmp_path):
    import os

    path = tmp_path / "perm.safetensors"
    previous = os.umask(0o022)
    try:
        write_golden(path, {"y": np.ones(1)})
    finally:
        os.umask(previous)
    assert path.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600
    path.chmod(0o664)
    write_golden(path, {"y": np.zeros(1)})
    assert path.stat().st_mode & 0o777 == 0o664


def test_numpy_alone_reads_a_golden_as_the_format_page_says(tmp_path):
    path = tmp_path / "n.safetensors"
    write_golden(path, {"y": np.arange(6, dtype=np.float32).reshape(2, 3)}, {"x": np.ones(2)})
    data = path.read_bytes()
    length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + length])
    types = {"F32": np.float32, "F64": np.float64}
    arrays = {
        key: np.frombuffer(
            data[8 + length + t["data_offsets"][0] : 8 + length + t["data_offsets"][1]],
            types[t["dtype"]],
        ).reshape(t["shape"])
        for key, t in header.items()
        if key != "__metadata__"
    }
    np.testing.assert_array_equal(arrays["outputs/y"], np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(arrays["inputs/x"], np.ones(2))
    assert json.loads(header["__metadata__"]["pytest_trtcompare"])["outputs"] == ["y"]


@pytest.mark.parametrize("where", ["the data", "the header's padding"])
def test_unchanged_means_every_byte(tmp_path, where):
    """A damaged byte must be rewritten by an update, never kept as 'unchanged'."""
    path = tmp_path / "p.safetensors"
    outputs = {"y": np.ones(3, np.float32)}
    write_golden(path, outputs)
    data = bytearray(path.read_bytes())
    index = len(data) - 1 if where == "the data" else 8 + int.from_bytes(data[:8], "little") - 1
    assert where == "the data" or data[index] == ord(" ")
    data[index] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(GoldenError, match="corrupt golden"):
        read_golden(path)
    assert write_golden(path, outputs) == "updated"
    read_golden(path)
