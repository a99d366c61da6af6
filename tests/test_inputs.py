"""Synthetic inputs and loaders (npz, Polygraphy JSON, ONNX test data, scripts, generators)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from pytest_trtcompare.errors import InputDataError
from pytest_trtcompare.inputs import load_feeds, synthetic_feed, synthetic_feeds
from pytest_trtcompare.runners.base import TensorSpec

SPECS = [
    TensorSpec("x", "float32", ("batch", 4)),
    TensorSpec("ids", "int64", (2, 3)),
    TensorSpec("mask", "bool", (2, 4)),
]


def test_synthetic_data_is_seeded_and_platform_independent():
    feed = synthetic_feed(SPECS, shapes={"x": (1, 4)})
    again = synthetic_feed(SPECS, shapes={"x": (1, 4)})
    for name in feed:
        np.testing.assert_array_equal(feed[name], again[name])
    # PCG64 seeded by (seed, iteration, crc32(name)): these numbers are the same everywhere
    assert feed["x"].tolist() == [
        [0.9202003479003906, 0.9151966571807861, 0.8194673657417297, 0.14342504739761353]
    ]
    assert feed["ids"].tolist() == [[4, 2, 1], [3, 8, 8]]
    assert feed["x"].dtype == np.float32 and feed["ids"].dtype == np.int64
    assert feed["ids"].min() >= 0 and feed["ids"].max() <= 10
    assert feed["mask"].dtype == np.bool_


def test_inputs_are_independent_of_each_other():
    alone = synthetic_feed([SPECS[1]])
    together = synthetic_feed(SPECS, shapes={"x": (3, 4)})
    np.testing.assert_array_equal(alone["ids"], together["ids"])


def test_seed_and_iterations_change_the_data():
    first, second = synthetic_feeds(SPECS[1:], 2)
    assert not np.array_equal(first["ids"], second["ids"])
    other_seed = synthetic_feed(SPECS[1:], seed=2)
    assert not np.array_equal(first["ids"], other_seed["ids"])


def test_value_ranges_per_name_and_dtype():
    feed = synthetic_feed(
        SPECS, shapes={"x": (50, 4)}, val_range={"x": (-3, -2), "int64": (100, 105)}
    )
    assert feed["x"].min() >= -3 and feed["x"].max() <= -2
    assert feed["ids"].min() >= 100 and feed["ids"].max() <= 105
    uniform = synthetic_feed(SPECS[:1], shapes={"x": (50, 4)}, val_range=(5, 6))
    assert uniform["x"].min() >= 5


def test_bfloat16_inputs():
    feed = synthetic_feed([TensorSpec("h", "bfloat16", (3,))])
    assert str(feed["h"].dtype) == "bfloat16"


def test_dynamic_dims_need_a_shape_never_a_silent_one():
    with pytest.raises(
        InputDataError, match=r"input x: float32\[batch, 4\] has dynamic dimensions"
    ):
        synthetic_feed(SPECS)
    with pytest.raises(InputDataError, match=r"shape \(2, 5\) given for input 'x' does not fit"):
        synthetic_feed(SPECS, shapes={"x": (2, 5)})
    with pytest.raises(InputDataError, match=r"shapes name input\(s\) \['y'\] that the model"):
        synthetic_feed(SPECS, shapes={"x": (1, 4), "y": (1,)})


def test_npz_loader(tmp_path):
    np.savez(tmp_path / "feed.npz", x=np.ones((1, 4), np.float32))
    (feed,) = load_feeds(tmp_path / "feed.npz")
    assert feed["x"].shape == (1, 4)
    np.save(tmp_path / "objects.npy", np.array([object()]), allow_pickle=True)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"PK not really")
    with pytest.raises(InputDataError, match=r"bad\.npz: not a readable \.npz"):
        load_feeds(bad)


def test_polygraphy_inputs_json_file_and_iteration_directory(tmp_path):
    polygraphy_json = pytest.importorskip("polygraphy.json")
    feeds = [{"x": np.full((1, 4), i, np.float32)} for i in range(3)]
    polygraphy_json.save_json(feeds, str(tmp_path / "inputs.json"))
    loaded = load_feeds(tmp_path / "inputs.json")
    assert [float(f["x"][0, 0]) for f in loaded] == [0.0, 1.0, 2.0]
    writer_type = getattr(polygraphy_json, "IterationWriter", None)
    if writer_type is None:
        from polygraphy.json.serde import IterationWriter as writer_type
    with writer_type(str(tmp_path / "per_iteration")) as writer:
        for feed in feeds:
            writer.append(feed)
    again = load_feeds(tmp_path / "per_iteration")
    assert [float(f["x"][0, 0]) for f in again] == [0.0, 1.0, 2.0]


def test_onnx_test_data_directories(tmp_path):
    for index in range(2):
        data_set = tmp_path / f"test_data_set_{index}"
        data_set.mkdir()
        tensor = numpy_helper.from_array(np.full((2,), index, np.float32))  # unnamed
        (data_set / "input_0.pb").write_bytes(tensor.SerializeToString())
    feeds = load_feeds(tmp_path, names=["x"])
    assert [f["x"].tolist() for f in feeds] == [[0.0, 0.0], [1.0, 1.0]]
    with pytest.raises(InputDataError, match="the tensor has no name"):
        load_feeds(tmp_path)


def test_data_loader_script_and_generator(tmp_path):
    script = tmp_path / "loader.py"
    script.write_text(
        "import numpy as np\n"
        "def load_data():\n"
        "    for i in range(2):\n"
        "        yield {'x': np.full((1, 4), i, np.float32)}\n"
        "def custom():\n"
        "    return [{'x': np.zeros(2)}]\n"
    )
    assert len(load_feeds(str(script))) == 2
    assert load_feeds(f"{script}:custom")[0]["x"].shape == (2,)
    assert len(load_feeds(lambda: ({"x": np.zeros(1)} for _ in range(3)))) == 3
    with pytest.raises(InputDataError, match="has no function 'missing'"):
        load_feeds(f"{script}:missing")
    with pytest.raises(InputDataError, match="item 0 is int, not a feed dict"):
        load_feeds([1, 2])


def test_missing_input_file_is_named(tmp_path):
    with pytest.raises(InputDataError, match=r"input data '.*absent\.npz' does not exist"):
        load_feeds(tmp_path / "absent.npz")
