"""`reduce_model` and `trtcompare reduce`: the smallest subgraph that still fails at fp16,
fed the reference's own intermediate tensors; JSON, text, -o with its inputs and the command
that reproduces the failure, and misuse (exit 2)."""

from __future__ import annotations

import json
import shlex

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare.cli import main
from pytest_trtcompare.errors import TrtCompareError
from pytest_trtcompare.goldens import load_reference
from pytest_trtcompare.session.reduce import reduce_model

from .onnx_models import make
from .planted_models import WIDTH, planted


def test_the_planted_pair_is_the_reduced_graph():
    result = reduce_model(planted(), "fp16", "onnxref", shapes={"x": (1, WIDTH)})
    assert not result.passed
    assert 1 <= len(result.nodes) <= 5
    assert set(result.nodes) <= {"plant_add", "plant_sub"}
    assert result.node_count == 63 and result.runs <= 12
    onnx.checker.check_model(result.model, full_check=True)
    assert [vi.name for vi in result.model.graph.input] == list(result.inputs[0])
    text = result.describe()
    assert text.startswith(f"reduce (onnxref fp16): {len(result.nodes)} of 63 nodes still fail:")
    assert "out of tolerance" in text


def test_every_feed_is_judged_and_its_inputs_are_the_reference_tensors():
    """Feeds of 0 and 2 pass exactly (3000 and 3002 are fp16 numbers): only the third, a
    uniform draw, fails; the reduced graph's inputs are the reference's tensors per feed."""
    uniform = np.random.default_rng(1).uniform(0, 1, (1, WIDTH)).astype(np.float32)
    feeds = [{"x": np.full((1, WIDTH), v, np.float32)} for v in (0.0, 2.0)] + [{"x": uniform}]
    assert reduce_model(planted(0, 0), inputs=feeds[:2]).passed
    logged: list[str] = []
    result = reduce_model(planted(0, 0), inputs=feeds, log=logged.append)
    assert not result.passed and len(result.inputs) == 3 and len(result.expected) == 3
    fed = result.inputs[2][result.model.graph.input[0].name]
    if result.nodes[0] == "plant_sub":  # fed plant_add's fp32 output
        np.testing.assert_array_equal(fed, uniform + np.float32(3000))
    # runs: the candidates the log numbers, the last one the reduced graph's figures
    assert logged[-1].startswith(f"run {result.runs}: nodes ") and logged[-1].endswith(
        " again, for its figures"
    )


def test_a_passing_model_has_nothing_to_reduce():
    result = reduce_model(planted(4, 4), tolerance={"atol": 10.0, "rtol": 1.0})
    assert result.passed and result.nodes == () and result.runs == 1
    assert result.describe() == "reduce (onnxref fp16): the model passes, nothing to reduce (1 run)"


def if_model() -> onnx.ModelProto:
    """x -> Add(+3000) -> If(cond) whose branches Sub 3000 from the outer-scope tensor ->
    Relu: the If is moved whole, its bodies reading the tensor fed from outside."""

    def branch(tag: str) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("Sub", ["big", "c3000"], [f"{tag}_out"], name=f"{tag}_sub")],
            tag,
            [],
            [helper.make_tensor_value_info(f"{tag}_out", TensorProto.FLOAT, [1, WIDTH])],
        )

    weights = [
        numpy_helper.from_array(np.full(WIDTH, 3000.0, np.float32), "c3000"),
        numpy_helper.from_array(np.array(True), "cond"),
        numpy_helper.from_array(np.full(WIDTH, 0.5, np.float32), "half"),
    ]
    nodes = [
        helper.make_node("Mul", ["x", "half"], ["small"], name="scale"),
        helper.make_node("Add", ["small", "c3000"], ["big"], name="add"),
        helper.make_node(
            "If",
            ["cond"],
            ["back"],
            name="if",
            then_branch=branch("then"),
            else_branch=branch("else"),
        ),
        helper.make_node("Relu", ["back"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "with_if",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])],
        weights,
    )
    return make(graph)


def test_an_if_node_is_kept_whole():
    result = reduce_model(if_model())
    assert not result.passed and "if" in result.nodes and len(result.nodes) <= 2
    onnx.checker.check_model(result.model, full_check=True)
    kept = next(node for node in result.model.graph.node if node.name == "if")
    assert {a.name for a in kept.attribute} == {"then_branch", "else_branch"}


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "planted.onnx"
    onnx.save_model(planted(8, 8), str(path))
    return path


def test_json_and_the_written_model_reproduce_the_failure(model_file, tmp_path, capsys):
    out = tmp_path / "sub" / "reduced.onnx"
    argv = ["reduce", str(model_file), "--atol", "1e-2", "--rtol", "1e-3", "--shapes", "x:1x64"]
    assert main([*argv, "-o", str(out), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] is False and 1 <= len(report["nodes"]) <= 5
    assert set(report["nodes"]) <= {"plant_add", "plant_sub"}
    assert report["op_types"] == [
        {"plant_add": "Add", "plant_sub": "Sub"}[n] for n in report["nodes"]
    ]
    assert isinstance(report["runs"], int) and report["node_count"] == 19
    written = onnx.load(str(out))
    assert [node.name for node in written.graph.node] == report["nodes"]
    golden = load_reference(tmp_path / "sub" / "reduced.inputs.safetensors")
    assert golden.inputs is not None and set(golden.inputs) == {
        vi.name for vi in written.graph.input
    }
    command = shlex.split(report["command"])
    assert command[:3] == ["trtcompare", "run", str(out)]
    assert command[3:] == [
        "--onnxref",
        "--fp16",
        "--load-inputs",
        str(tmp_path / "sub" / "reduced.inputs.json"),
        "--atol",
        "0.01",
        "--rtol",
        "0.001",
    ]
    assert main(command[1:]) == 1  # the command fails as the reduced graph did
    capsys.readouterr()


def test_text_output_names_the_nodes_and_the_command(model_file, tmp_path, capsys):
    out = tmp_path / "reduced.onnx"
    assert main(["reduce", str(model_file), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert "reduce (onnxref fp16): " in captured.out and " of 19 nodes still fail: " in captured.out
    assert "reproduce with:\n  trtcompare run " in captured.out
    assert "run 1: nodes 0..18 of 19: fail" in captured.err
    assert " again, for its figures\n" in captured.err


def test_a_passing_model_exits_0_and_writes_nothing(model_file, tmp_path, capsys):
    out = tmp_path / "reduced.onnx"
    assert main(["reduce", str(model_file), "--atol", "10", "-o", str(out)]) == 0
    assert "the model passes, nothing to reduce" in capsys.readouterr().out
    assert not out.exists()


def test_misuse_exits_2_with_one_line(tmp_path, model_file, capsys):
    assert main(["reduce", str(tmp_path / "missing.onnx")]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("trtcompare: model file")
    with pytest.raises(SystemExit) as exit_info:
        main(["reduce", str(model_file), "--atol", "x"])
    assert exit_info.value.code == 2
    assert "argument --atol: invalid float value: 'x'" in capsys.readouterr().err
    assert main(["reduce", str(model_file), "--check", "cosin=0.9"]) == 2
    assert "--check 'cosin=0.9'" in capsys.readouterr().err
    assert main(["reduce", str(model_file), "--runner", "onnxrtt"]) == 2
    assert capsys.readouterr().err.startswith("trtcompare: unknown framework 'onnxrtt'")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_text("not a model")
    assert main(["reduce", str(garbage)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"trtcompare: model file '{garbage}' is not a readable ONNX model")
    assert len(err.strip().splitlines()) == 1


def dynamic_model() -> onnx.ModelProto:
    """x [N, 64] -> Add(c) -> Sub(c) -> Relu, c = 3000 from a Constant node."""
    nodes = [
        helper.make_node(
            "Constant", [], ["c"], name="const", value=numpy_helper.from_array(np.float32(3000))
        ),
        helper.make_node("Add", ["x", "c"], ["big"], name="add"),
        helper.make_node("Sub", ["big", "c"], ["back"], name="sub"),
        helper.make_node("Relu", ["back"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "dynamic",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", WIDTH])],
    )
    return make(graph)


def test_dynamic_shapes_and_a_constant_folded_in():
    rng = np.random.default_rng(2)
    feeds = [{"x": rng.uniform(0, 1, (n, WIDTH)).astype(np.float32)} for n in (1, 3)]
    result = reduce_model(dynamic_model(), inputs=feeds)
    assert not result.passed and set(result.nodes) <= {"add", "sub"}
    graph = result.model.graph
    assert "c" not in {vi.name for vi in graph.input}
    assert "c" in {t.name for t in graph.initializer}
    (fed,) = graph.input
    assert fed.type.tensor_type.shape.dim[0].dim_param  # the batch differs between feeds
    assert fed.type.tensor_type.shape.dim[1].dim_value == WIDTH
    assert [feed[fed.name].shape[0] for feed in result.inputs] == [1, 3]


def mask_model() -> onnx.ModelProto:
    """A mask of float32's min (Where of a constant condition) added to x, a Softmax, then
    the planted pair: the mask's -3.4e38 is -65504 at fp16 (the conversion clamps it) and
    the Softmax is fed -65504 for it, so neither is taken for the fault."""
    cond = np.zeros((1, WIDTH), bool)
    cond[0, :48] = True
    weights = [
        numpy_helper.from_array(cond, "cond"),
        numpy_helper.from_array(np.zeros(1, np.float32), "zero"),
        numpy_helper.from_array(np.array([np.finfo(np.float32).min], np.float32), "low"),
        numpy_helper.from_array(np.full(WIDTH, 3000.0, np.float32), "c3000"),
    ]
    nodes = [
        helper.make_node("Where", ["cond", "zero", "low"], ["mask"], name="mask"),
        helper.make_node("Add", ["x", "mask"], ["masked"], name="apply"),
        helper.make_node("Softmax", ["masked"], ["p"], name="softmax", axis=-1),
        helper.make_node("Add", ["p", "c3000"], ["big"], name="plant_add"),
        helper.make_node("Sub", ["big", "c3000"], ["y"], name="plant_sub"),
    ]
    graph = helper.make_graph(
        nodes,
        "masked",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])],
        weights,
    )
    return make(graph)


def test_a_mask_past_the_range_is_not_the_fault():
    result = reduce_model(mask_model(), tolerance={"atol": 1e-4, "rtol": 1e-2})
    assert not result.passed and set(result.nodes) <= {"plant_add", "plant_sub"}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # onnx.reference's fp16 inf
def test_a_tensor_past_the_range_is_fed_to_no_candidate():
    """x*1024 -> *64 (up to 65536, past fp16's range) -> /65536: a candidate that starts
    after the overflow is not fed the value it cannot hold; the reduced graph holds the
    node that overflows."""
    weights = [
        numpy_helper.from_array(np.float32(1024), "k1"),
        numpy_helper.from_array(np.float32(64), "k2"),
        numpy_helper.from_array(np.float32(1 / 65536), "k3"),
    ]
    nodes = [
        helper.make_node("Mul", ["x", "k1"], ["a"], name="scale"),
        helper.make_node("Mul", ["a", "k2"], ["b"], name="overflow"),
        helper.make_node("Mul", ["b", "k3"], ["y"], name="rescale"),
    ]
    graph = helper.make_graph(
        nodes,
        "overflow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])],
        weights,
    )
    feed = {"x": np.linspace(0.5, 1.5, WIDTH, dtype=np.float32).reshape(1, WIDTH)}
    result = reduce_model(make(graph), inputs=feed)
    assert not result.passed and result.nodes == ("overflow", "rescale")


def _refusing(monkeypatch, refuses):
    """runners.create, but an fp16 model for which `refuses(node count)` holds cannot be built
    (as a runtime without a kernel for some op): no real runner here refuses a slice of a
    model it runs whole, so the refusal is planted."""
    from pytest_trtcompare import runners
    from pytest_trtcompare.errors import InferenceError

    create = runners.create

    def refusing(name, model, precision="fp32", **options):
        if precision == "fp16" and refuses(len(model.graph.node)):
            raise InferenceError(f"no float16 kernel for {len(model.graph.node)} nodes")
        return create(name, model, precision, **options)

    monkeypatch.setattr(runners, "create", refusing)


def test_a_model_the_target_cannot_run_is_an_error_not_a_pass(monkeypatch, capsys, tmp_path):
    _refusing(monkeypatch, lambda count: True)
    with pytest.raises(TrtCompareError) as raised:
        reduce_model(planted(4, 4))
    assert str(raised.value).startswith(
        "reduce: onnxref cannot run model <ModelProto> at fp16: no float16 kernel for 11 nodes"
    )
    path = tmp_path / "m.onnx"
    onnx.save_model(planted(4, 4), str(path))
    assert main(["reduce", str(path)]) == 2
    progress, error = capsys.readouterr().err.strip().splitlines()
    assert progress == "run 1: nodes 0..10 of 11: could not run (no float16 kernel for 11 nodes)"
    assert error.startswith(f"trtcompare: reduce: onnxref cannot run model {path} at fp16: ")


def test_candidates_that_cannot_run_are_left_out_and_counted(monkeypatch):
    _refusing(monkeypatch, lambda count: 1 < count < 11)
    result = reduce_model(planted(4, 4))
    assert not result.passed and result.unrunnable >= 2
    assert (
        f"; {result.unrunnable} candidates could not run and were left out)"
        in (result.describe().splitlines()[0])
    )
    assert result.to_json()["unrunnable"] == result.unrunnable


def test_draws_and_saved_inputs_from_the_shell(model_file, tmp_path, capsys):
    """--iterations N judges on N seeded draws (all written); --load-inputs feeds a saved
    file, here the original model's inputs saved by `trtcompare run --save-inputs`."""
    out = tmp_path / "reduced.onnx"
    assert main(["reduce", str(model_file), "--iters", "3", "-o", str(out), "--json"]) == 1
    capsys.readouterr()
    assert len(load_reference(tmp_path / "reduced.inputs.safetensors").iterations) == 3
    saved = tmp_path / "inputs.json"
    run = ["run", str(model_file), "--onnxref", "--iterations", "2", "--save-inputs", str(saved)]
    assert main(run) == 0
    capsys.readouterr()
    assert main(["reduce", str(model_file), "--load-inputs", str(saved), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["nodes"] == ["plant_sub"]
    assert main(["reduce", str(model_file), "--load-inputs", str(tmp_path / "no.json")]) == 2
    assert capsys.readouterr().err == (
        f"trtcompare: input data '{tmp_path / 'no.json'}' does not exist\n"
    )


def test_the_shell_refuses_a_mixed_model_a_runner_of_no_converted_onnx_and_a_missing_shape(
    model_file, tmp_path, capsys
):
    mixed = tmp_path / "mixed.onnx"
    assert main(["debug-precision", str(model_file), "-o", str(mixed), "--json"]) == 0
    capsys.readouterr()
    for command in ("reduce", "debug-precision"):
        assert main([command, str(mixed)]) == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"trtcompare: model {mixed} is a mixed-precision model (fp16, 2 nodes kept in fp32, "
            "written by debug-precision): reduce and debug-precision take the fp32 model it was "
            "made from"
        )
    assert main(["reduce", str(model_file), "--runner", "torch"]) == 2
    assert capsys.readouterr().err == (
        "trtcompare: --runner torch: it does not run an ONNX model converted to fp16, which "
        "the search varies; take one of onnxrt, onnxref, trt\n"
    )
    dynamic = tmp_path / "dynamic.onnx"
    onnx.save_model(dynamic_model(), str(dynamic))
    assert main(["reduce", str(dynamic)]) == 2
    err = capsys.readouterr().err
    assert "give its shape with --shapes x:[1,64]" in err and "mark.shapes" not in err


def test_saved_inputs_leave_no_room_for_draw_flags(model_file, tmp_path, capsys):
    saved = tmp_path / "inputs.json"
    assert main(["run", str(model_file), "--onnxref", "--save-inputs", str(saved)]) == 0
    capsys.readouterr()
    for command in ("reduce", "debug-precision"):
        argv = [command, str(model_file), "--load-inputs", str(saved), "--iters", "3"]
        assert main([*argv, "--seed", "2"]) == 2
        assert capsys.readouterr().err == (
            f"trtcompare: --load-inputs {saved} gives the feeds: --iterations / --seed apply "
            "to synthetic draws only; leave them out\n"
        )
