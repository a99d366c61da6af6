"""Polygraphy interop against the real Polygraphy (dev extra): its files load in ours value for
value, ours load in it, and `polygraphy run --load-outputs` accepts what we export."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.cli import main
from pytest_trtcompare.goldens.interop import (
    load_reference,
    read_polygraphy_outputs,
    write_polygraphy_inputs,
    write_polygraphy_outputs,
)
from pytest_trtcompare.goldens.store import read_golden, write_golden

from .onnx_models import layer_chain

comparator = pytest.importorskip("polygraphy.comparator")
polygraphy_json = pytest.importorskip("polygraphy.json")

OUTPUTS = {"y": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), "ids": np.arange(3)}


def _polygraphy_run_results(outputs_per_runner):
    results = comparator.RunResults()
    for runner, iterations in outputs_per_runner.items():
        results.append(
            (runner, [comparator.IterationResult(dict(o), runner_name=runner) for o in iterations])
        )
    return results


def test_polygraphy_outputs_load_value_for_value(tmp_path):
    second = {k: v + 1 for k, v in OUTPUTS.items()}
    results = _polygraphy_run_results({"trt-runner": [OUTPUTS, second], "onnxrt-runner": [second]})
    results.save(str(tmp_path / "outputs.json"))
    loaded = read_polygraphy_outputs(tmp_path / "outputs.json")
    for name, value in OUTPUTS.items():
        assert loaded[name].dtype == value.dtype
        np.testing.assert_array_equal(loaded[name], value)
    again = read_polygraphy_outputs(tmp_path / "outputs.json", "trt-runner", iteration=1)
    np.testing.assert_array_equal(again["y"], second["y"])
    other = read_polygraphy_outputs(tmp_path / "outputs.json", "onnxrt-runner")
    np.testing.assert_array_equal(other["ids"], second["ids"])


def test_polygraphy_per_iteration_directory(tmp_path):
    writer_type = getattr(polygraphy_json, "IterationWriter", None)
    if writer_type is None:
        from polygraphy.json.serde import IterationWriter as writer_type
    folder = tmp_path / "outputs"
    with writer_type(str(folder)) as writer:
        for index in range(3):
            writer.append(_polygraphy_run_results({"r": [{"y": np.full(2, index, np.float32)}]}))
    assert len(list(folder.glob("*.json"))) == 3
    assert read_polygraphy_outputs(folder, "r", iteration=2)["y"].tolist() == [2.0, 2.0]


def test_our_json_loads_in_polygraphy(tmp_path):
    write_polygraphy_outputs(tmp_path / "ours.json", [OUTPUTS])
    results = comparator.RunResults.load(str(tmp_path / "ours.json"))
    (runner, iterations) = results.lst[0]
    assert runner == "pytest-trtcompare"
    for name, value in OUTPUTS.items():
        np.testing.assert_array_equal(iterations[0][name], value)
    write_polygraphy_inputs(tmp_path / "inputs.json", [{"x": np.ones((1, 16), np.float32)}])
    feeds = polygraphy_json.load_json(str(tmp_path / "inputs.json"))
    assert feeds[0]["x"].shape == (1, 16)


def _polygraphy_cli() -> str | None:
    found = shutil.which("polygraphy", path=str(Path(sys.executable).parent))
    return found or shutil.which("polygraphy")


def test_polygraphy_run_accepts_our_exported_golden(tmp_path):
    cli = _polygraphy_cli()
    if cli is None:
        pytest.skip("the polygraphy command is not installed")
    model = layer_chain()
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    fixed.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 2  # Polygraphy needs a shape
    onnx.save(fixed, str(tmp_path / "model.onnx"))
    runner = runners.create("onnxrt", fixed)
    feed = {"x": np.random.default_rng(0).random((2, 16), dtype=np.float32)}
    write_golden(tmp_path / "model.safetensors", runner.infer(feed), feed)
    assert (
        main(
            [
                "export-polygraphy",
                str(tmp_path / "model.safetensors"),
                str(tmp_path / "out.json"),
                "--inputs",
                str(tmp_path / "in.json"),
            ]
        )
        == 0
    )
    command = [
        cli,
        "run",
        str(tmp_path / "model.onnx"),
        "--onnxrt",
        "--load-inputs",
        str(tmp_path / "in.json"),
        "--load-outputs",
        str(tmp_path / "out.json"),
        "--atol",
        "1e-6",
        "--rtol",
        "1e-6",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "PASSED" in done.stdout + done.stderr


def test_import_polygraphy_makes_a_golden(tmp_path, capsys):
    _polygraphy_run_results({"trt-runner": [OUTPUTS]}).save(str(tmp_path / "outputs.json"))
    polygraphy_json.save_json([{"x": np.ones(3)}], str(tmp_path / "inputs.json"))
    code = main(
        [
            "import-polygraphy",
            str(tmp_path / "outputs.json"),
            str(tmp_path / "g.safetensors"),
            "--inputs",
            str(tmp_path / "inputs.json"),
        ]
    )
    assert code == 0 and "created" in capsys.readouterr().out
    golden = read_golden(tmp_path / "g.safetensors")
    np.testing.assert_array_equal(golden.outputs["y"], OUTPUTS["y"])
    assert golden.inputs["x"].tolist() == [1.0, 1.0, 1.0]
    assert golden.meta["runner"] == "trt-runner"


def test_diff_across_formats(tmp_path, capsys):
    _polygraphy_run_results({"trt-runner": [OUTPUTS]}).save(str(tmp_path / "outputs.json"))
    write_golden(tmp_path / "g.safetensors", {**OUTPUTS, "y": OUTPUTS["y"] + 0.5})
    assert main(["diff", str(tmp_path / "g.safetensors"), str(tmp_path / "outputs.json")]) == 1
    assert "greatest abs error 0.5" in capsys.readouterr().out
    assert (
        main(
            [
                "diff",
                str(tmp_path / "g.safetensors"),
                str(tmp_path / "outputs.json"),
                "--atol",
                "0.6",
            ]
        )
        == 0
    )


def test_onnx_test_data_directory_as_a_golden(tmp_path):
    from onnx import numpy_helper

    data_set = tmp_path / "test_data_set_0"
    data_set.mkdir()
    (data_set / "input_0.pb").write_bytes(
        numpy_helper.from_array(np.ones(2), "x").SerializeToString()
    )
    (data_set / "output_0.pb").write_bytes(
        numpy_helper.from_array(np.zeros(2), "y").SerializeToString()
    )
    golden = load_reference(tmp_path)
    assert golden.outputs["y"].tolist() == [0.0, 0.0] and golden.inputs["x"].tolist() == [1.0, 1.0]


def test_cli_help_for_each_command(capsys):
    for command in ("show", "diff", "import-polygraphy", "export-polygraphy"):
        with pytest.raises(SystemExit) as info:
            main([command, "--help"])
        assert info.value.code == 0
        assert f"usage: trtcompare {command}" in capsys.readouterr().out


def test_every_command_reads_old_and_new_goldens_and_plain_safetensors(tmp_path, capsys):
    """show, diff, import-polygraphy and export-polygraphy on a format-2 .golden, its
    .safetensors twin, and safetensors files of another tool, with and without metadata
    (their tensors as outputs)."""
    import safetensors.numpy

    from .golden_bytes import as_format_2

    new = tmp_path / "g.safetensors"
    write_golden(new, OUTPUTS, {"x": np.ones(3)}, {"seed": 1})
    write_golden(tmp_path / "old.safetensors", OUTPUTS, {"x": np.ones(3)}, {"seed": 1})
    old = as_format_2(tmp_path / "old.safetensors")
    plain = tmp_path / "plain.safetensors"
    safetensors.numpy.save_file(dict(OUTPUTS), str(plain), metadata={"tool": "other"})
    bare = tmp_path / "bare.safetensors"  # no __metadata__ at all (issue 35, item 6)
    safetensors.numpy.save_file(dict(OUTPUTS), str(bare))
    for path in (new, old, plain, bare):
        assert main(["show", str(path)]) == 0
        shown = capsys.readouterr().out
        assert "output y: float32 (3, 4)" in shown and "output ids: int64 (3,)" in shown, path
        assert main(["diff", str(path), str(new)]) == 0, path
        exported = tmp_path / f"{path.stem}.json"
        assert main(["export-polygraphy", str(path), str(exported)]) == 0
        np.testing.assert_array_equal(read_polygraphy_outputs(exported)["y"], OUTPUTS["y"])
    assert load_reference(plain).meta == {"source": "safetensors", "tool": "other"}
    assert load_reference(bare).meta == {"source": "safetensors"}
    capsys.readouterr()
    # import-polygraphy given an old name writes the .safetensors beside it, removing the old
    assert main(["import-polygraphy", str(tmp_path / "g.json"), str(old)]) == 0
    assert f"updated: {tmp_path / 'old.safetensors'}" in capsys.readouterr().out
    assert not old.exists()
    np.testing.assert_array_equal(
        read_golden(tmp_path / "old.safetensors").outputs["y"], OUTPUTS["y"]
    )
