"""`trtcompare debug-precision`: JSON output, the written model, and bad arguments (exit 2)."""

from __future__ import annotations

import json

import onnx
import pytest

from pytest_trtcompare.cli import main

from .planted_models import check_written, constant_model, planted


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "planted.onnx"
    onnx.save_model(planted(8, 8), str(path))
    return path


def test_json_output_and_the_written_model(model_file, tmp_path, capsys):
    out = tmp_path / "mixed.onnx"
    argv = ["debug-precision", str(model_file), "--atol", "1e-2", "--rtol", "1e-2"]
    assert main([*argv, "--shapes", "x:1x64", "-o", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["keep_fp32"] == ["plant_add", "plant_sub"] and report["passed"] is True
    assert isinstance(report["runs"], int) and 1 < report["runs"] <= 12
    written = onnx.load(str(out))
    check_written(written)
    assert {"plant_add", "plant_sub"} <= {node.name for node in written.graph.node}


def test_text_output_lists_the_nodes_and_the_runs(model_file, capsys):
    argv = ["debug-precision", str(model_file), "--precision", "bf16"]
    assert main([*argv, "--check", "check=max atol=0.05 rtol=0"]) == 0
    captured = capsys.readouterr()
    assert "keep these 2 nodes in fp32: plant_add (Add), plant_sub (Sub)" in captured.out
    assert "run 1: 0 node(s) in fp32: fail" in captured.err


def test_the_probable_causes_come_first_in_text_and_json(model_file, capsys):
    argv = ["debug-precision", str(model_file), "--atol", "1e-2", "--rtol", "1e-2"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "probable cause: plant_add (Add) adds operands up to 3e+03 to others that keep fewer "
        "than 5 of float16's 11 bits in 100% of its elements, which a cancellation downstream "
        "needs",
        "probable cause: plant_sub (Sub) cancels operands up to 3e+03 to a result that keeps "
        "fewer than 5 of float16's 11 bits in 100% of its elements: their rounding is most of it",
        "precision debugging (onnxref fp16, 19 candidate nodes): keep these 2 nodes in fp32: "
        "plant_add (Add), plant_sub (Sub) (4 runs; the mixed model passes)",
    ]
    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == 4 and report["scan_runs"] == 1
    assert [
        {k: c[k] for k in ("node", "op_type", "tensor", "kind")} for c in report["probable_causes"]
    ] == [
        {"node": "plant_add", "op_type": "Add", "tensor": "plant_add_out", "kind": "swamping"},
        {"node": "plant_sub", "op_type": "Sub", "tensor": "plant_sub_out", "kind": "cancellation"},
    ]
    assert report["probable_causes"][1]["text"] == lines[1]
    assert report["probable_causes"][1]["magnitude"] == pytest.approx(3000, rel=1e-2)


def test_no_range_scan_searches_by_bisection_alone(model_file, capsys):
    argv = ["debug-precision", str(model_file), "--json", "--no-range-scan"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["keep_fp32"] == ["plant_add", "plant_sub"] and report["runs"] > 4
    assert "probable_causes" not in report and "scan_runs" not in report


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--no-range-scan=yes", "--no-range-scan: ignored explicit argument 'yes'"),
        ("--no-range-scna", "unrecognized arguments: --no-range-scna"),
    ],
)
def test_a_misspelt_or_valued_no_range_scan_is_a_usage_error(model_file, capsys, flag, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["debug-precision", str(model_file), flag])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_top_1_check_alone(model_file, capsys):
    argv = ["debug-precision", str(model_file), "--json", "--check", "postprocess=top-1"]
    assert main(argv) == 0  # the planted pair changes the argmax; keeping it fixes it
    assert json.loads(capsys.readouterr().out)["keep_fp32"] == ["plant_add", "plant_sub"]


def test_no_passing_set_exits_1(tmp_path, capsys):
    path = tmp_path / "constant.onnx"
    onnx.save_model(constant_model(), str(path))
    assert main(["debug-precision", str(path), "--atol", "0", "--rtol", "0", "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == {
        "keep_fp32": ["add"],
        "passed": False,
        "runs": 2,
        "probable_causes": [],  # nothing leaves fp16's range: the Constant's rounding fails
        "scan_runs": 1,
    }


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--check", "nosuch=0.5"], "--check 'nosuch=0.5': 'nosuch' is not a check"),
        (["--check", "atol=abc"], "atol='abc'"),
        (["--atol", "-1"], "--atol/--rtol: atol must be finite and >= 0"),
        (["--shapes", "x1x64"], "--shapes x1x64: cannot read 'x1x64': give NAME:1x3x224x224"),
        (["--shapes", "x:1x3"], "shape (1, 3) given for input 'x' does not fit"),
        (["--shapes", "y:1x64"], "shapes name input(s) ['y'] that the model does not have"),
        (["--runner", "nope"], "unknown framework 'nope'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(model_file, capsys, extra, message):
    assert main(["debug-precision", str(model_file), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_missing_model_and_a_bad_precision_exit_2(tmp_path, capsys):
    assert main(["debug-precision", str(tmp_path / "nope.onnx")]) == 2
    assert "nope.onnx' does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["debug-precision", str(tmp_path / "nope.onnx"), "--precision", "int8"])
    assert exit_info.value.code == 2


def test_shapes_as_run_takes_them_and_a_dynamic_input_is_named_with_the_flag(tmp_path, capsys):
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", 4])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Tanh", ["x"], ["y"])], "g", [x], [y])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "dyn.onnx")
    argv = ["debug-precision", str(tmp_path / "dyn.onnx"), "--precision", "fp16"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "trtcompare: input x: float32[n, 4] has dynamic dimensions: give its shape with "
        "--shapes x:[1,4]\n"
    )
    assert main([*argv, "--input-shapes", "x:[2,4]"]) == 0
    assert main([*argv, "--shapes", "x:2x4"]) == 0
