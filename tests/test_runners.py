"""Runners on real frameworks: onnxruntime, the ONNX reference evaluator, torch, callables."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare import compare_outputs, runners
from pytest_trtcompare.errors import (
    FeedError,
    FrameworkUnavailable,
    ModelLoadError,
    PrecisionUnsupported,
    UnknownFrameworkError,
)
from pytest_trtcompare.inputs import synthetic_feed
from pytest_trtcompare.runners.base import TensorSpec
from pytest_trtcompare.session.runs import RunnerCache, compare_layers, compare_runners, make_feeds

from .onnx_models import chain_weights, layer_chain, make, multi_input
from .pytester_helpers import KNOWN_RUNNERS


@pytest.fixture(scope="module")
def chain():
    return layer_chain()


@pytest.fixture(scope="module")
def feed(chain):
    runner = runners.create("onnxrt", chain)
    return synthetic_feed(runner.input_specs(), shapes={"x": (4, 16)})


def test_onnxrt_runner_specs_outputs_and_describe(chain, feed):
    with runners.create("onnxrt", chain) as runner:
        assert runner.name == "onnxrt-fp32"
        assert runner.input_specs() == [TensorSpec("x", "float32", ("batch", 16))]
        assert runner.output_names() == ["y"]
        out = runner.infer(feed)
        info = runner.describe()
    assert out["y"].shape == (4, 8) and out["y"].dtype == np.float32
    assert info["providers"] == ["CPUExecutionProvider"] and info["device"] == "cpu"
    assert info["version"] and info["model_digest"] and "note" not in info
    assert info["session_options"] == {  # ours: the threads sleep between ops
        "given": False,
        "graph_optimization_level": "ORT_ENABLE_ALL",
        "execution_mode": "ORT_SEQUENTIAL",
        "intra_op_num_threads": 0,
        "inter_op_num_threads": 0,
        "use_deterministic_compute": False,
        "allow_spinning": False,
    }


def test_onnxrt_matches_a_numpy_twin(chain, feed):
    weights = chain_weights(chain)
    h = feed["x"].astype(np.float64)
    for i in range(4):
        h = np.tanh(h @ weights[f"W{i}"] + weights[f"b{i}"])
    out = runners.create("onnxrt", chain).infer(feed)
    assert compare_outputs(out, {"y": h}, atol=1e-5, rtol=1e-5).passed


def test_model_from_path_bytes_and_proto_share_a_digest(chain, tmp_path):
    path = tmp_path / "chain.onnx"
    path.write_bytes(chain.SerializeToString())
    digests = {
        runners.create("onnxrt", source).describe()["model_digest"]
        for source in (chain, chain.SerializeToString(), path, str(path))
    }
    assert len(digests) == 1


GOOD_X = np.zeros((4, 16), np.float32)


@pytest.mark.parametrize(
    ("feed", "message"),
    [
        (
            {"x": GOOD_X, "z": GOOD_X},
            "unknown input(s) ['z']; the model's inputs are ['x: float32[",
        ),
        ({"x": GOOD_X.astype(np.float64)}, "input 'x' is float64, the model expects float32"),
        (
            {"x": GOOD_X[:, :15]},
            "input 'x' has shape (4, 15), the model expects x: float32[batch, 16]",
        ),
        ({"x": GOOD_X[0]}, "input 'x' has shape (16,)"),
    ],
)
def test_bad_feeds_name_the_tensor(chain, feed, message):
    runner = runners.create("onnxrt", chain)
    with pytest.raises(FeedError) as info:
        runner.infer(feed)
    assert message in str(info.value) and "onnxrt-fp32" in str(info.value)


def test_missing_feed_input_is_named():
    with pytest.raises(FeedError, match=r"lacks input\(s\) \['ids', 'mask'\]"):
        runners.create("onnxrt", multi_input()).infer({"x": np.zeros((2, 4), np.float32)})


def test_bad_models_name_the_file(tmp_path, monkeypatch):
    with pytest.raises(ModelLoadError) as missing:
        runners.create("onnxrt", tmp_path / "nope.onnx")
    assert str(missing.value) == f"model file '{tmp_path / 'nope.onnx'}' does not exist"
    monkeypatch.chdir(tmp_path)  # a relative path: where it was looked for
    with pytest.raises(ModelLoadError) as relative:
        runners.create("onnxrt", "nope.onnx")
    assert str(relative.value) == (
        f"model file 'nope.onnx' does not exist (relative to the working directory {tmp_path})"
    )
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07garbage that is not protobuf \xff\xff")
    with pytest.raises(ModelLoadError, match=r"corrupt.onnx' is not a readable ONNX model"):
        runners.create("onnxref", corrupt)
    with pytest.raises(ModelLoadError, match=r"<model bytes> is not a valid ONNX model"):
        runners.create("onnxrt", b"\xff\xff\xff")


def test_unknown_framework_lists_the_known_ones(chain):
    with pytest.raises(UnknownFrameworkError) as info:
        runners.create("tensorflow", chain)
    assert f"known frameworks: {KNOWN_RUNNERS}" in str(info.value)


def test_tensorrt_not_installed_is_unavailable_not_a_crash(chain):
    with pytest.raises(
        FrameworkUnavailable,
        match=r"tensorrt is not installed: pip install pytest-trtcompare\[tensorrt\]",
    ):
        runners.create("trt", chain)


def test_multi_input_int64_and_bool(feed_seed=3):
    model = multi_input()
    reference, target = runners.create("onnxrt", model), runners.create("onnxref", model)
    feeds = make_feeds(reference, seed=feed_seed, iterations=2)
    assert feeds[0]["ids"].dtype == np.int64 and feeds[0]["mask"].dtype == np.bool_
    assert not np.array_equal(feeds[0]["x"], feeds[1]["x"])
    results = compare_runners(target, reference, feeds, atol=1e-6, rtol=1e-6)
    assert len(results) == 2 and all(result.passed for result in results)


# -- precisions -------------------------------------------------------------------------------
def _fp32_reference(model, feed):
    return runners.create("onnxrt", model).infer(feed)


@pytest.mark.parametrize(("precision", "tol"), [("fp16", 1e-2), ("bf16", 5e-2)])
def test_onnxref_low_precision_is_real(chain, feed, precision, tol):
    runner = runners.create("onnxref", chain, precision)
    out = runner.infer(feed)
    reference = _fp32_reference(chain, feed)
    result = compare_outputs(out, reference, atol=tol, rtol=tol)
    assert result.passed
    assert result.outputs["y"].max_abs_error > 1e-4  # rounded op by op, not fp32 in disguise
    assert precision[:2] in runner.describe()["precision_route"]


def test_onnxrt_fp16_says_the_cpu_computes_in_fp32(chain, feed):
    runner = runners.create("onnxrt", chain, "fp16")
    assert "computes most float16 ops in float32" in runner.describe()["note"]
    assert compare_outputs(runner.infer(feed), _fp32_reference(chain, feed), atol=1e-2, rtol=1e-2)


def test_onnxrt_bf16_on_cpu_is_unsupported_with_a_reason(chain):
    with pytest.raises(PrecisionUnsupported) as info:
        runners.create("onnxrt", chain, "bf16")
    # every op type at fault, not only the node onnxruntime's loader stopped at
    assert str(info.value).startswith("onnxruntime CPU has no bfloat16 kernel for Add, MatMul")
    assert "converted by pytest-trtcompare" in str(info.value)


def test_unsupported_precision_of_a_runner(chain):
    with pytest.raises(PrecisionUnsupported, match="onnxref runs fp32, fp16, bf16, not int8"):
        runners.create("onnxref", chain, "int8")


@pytest.mark.parametrize(("precision", "tol"), [("fp16", 1e-2), ("bf16", 5e-2)])
def test_torch_low_precision_is_real(chain, feed, precision, tol):
    torch = pytest.importorskip("torch")
    weights = chain_weights(chain)

    class Chain(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList()
            for i in range(4):
                w = torch.from_numpy(weights[f"W{i}"])
                layer = torch.nn.Linear(w.shape[0], w.shape[1])
                layer.weight.data = w.T.contiguous()
                layer.bias.data = torch.from_numpy(weights[f"b{i}"])
                self.layers.append(layer)

        def forward(self, x):
            for layer in self.layers:
                x = torch.tanh(layer(x))
            return x

    module = Chain()
    runner = runners.create("torch", module, precision, output_names=["y"])
    out = runner.infer(feed)
    assert module.layers[0].weight.dtype == torch.float32  # the user's module is untouched
    result = compare_outputs(out, _fp32_reference(chain, feed), atol=tol, rtol=tol)
    assert result.passed and result.outputs["y"].max_abs_error > 1e-4
    assert result.outputs["y"].actual_dtype == {"fp16": "float16", "bf16": "bfloat16"}[precision]
    assert (
        runners.create("torch", module, "fp32", output_names=["y"]).infer(feed)["y"].dtype
        == np.float32
    )


def test_torch_tf32_needs_cuda(chain):
    torch = pytest.importorskip("torch")
    with pytest.raises(PrecisionUnsupported, match="tf32"):
        runners.create("torch", torch.nn.Identity(), "tf32")


def test_callable_runner_from_function_and_import_string():
    def double(feed, precision):
        return {"y": feed["x"] * 2, "precision": np.array(precision == "fp16")}

    runner = runners.create("callable", double, "fp16")
    out = runner.infer({"x": np.arange(3.0)})
    assert out["y"].tolist() == [0.0, 2.0, 4.0] and bool(out["precision"])
    by_name = runners.create("callable:numpy:asarray")
    assert by_name.describe()["callable"] == "numpy:asarray"
    with pytest.raises(ModelLoadError, match="has no 'nothing'"):
        runners.create("callable:numpy:nothing")


def test_callable_returning_a_non_mapping_is_named():
    runner = runners.create("callable", lambda feed: [1, 2])
    with pytest.raises(FeedError, match="returned list; it must return a mapping"):
        runner.infer({"x": np.zeros(1)})


# -- per layer and caching --------------------------------------------------------------------
@pytest.mark.parametrize("target_framework", ["onnxrt", "onnxref"])
def test_per_layer_comparison_names_the_perturbed_layer(feed, target_framework):
    reference = runners.create("onnxrt", layer_chain(), outputs="all")
    target = runners.create(target_framework, layer_chain(perturb_layer=2), outputs="all")
    assert reference.layer_order[:4] == ["mm0", "add0", "act0", "mm1"]
    result = compare_layers(target, reference, feed, atol=1e-4, rtol=1e-4, group=3)
    assert result.first_divergence == "add2"
    assert list(result.outputs)[:7] == ["mm0", "add0", "act0", "mm1", "add1", "act1", "mm2"]
    assert all(result.outputs[name].passed for name in ["mm0", "add1", "act1", "mm2"])
    assert result.first_divergence_node == "bias2 (Add) -> add2"
    assert "first divergence (topological order): bias2 (Add) -> add2, layer 8" in result.report()


def test_runner_cache_builds_each_runner_once(chain, tmp_path):
    path = tmp_path / "chain.onnx"
    path.write_bytes(chain.SerializeToString())
    cache = RunnerCache()
    first = cache.get("onnxrt", path)
    assert cache.get("onnxrt", str(path)) is first
    assert cache.get("onnxrt", chain) is first  # same bytes, same digest
    assert cache.get("onnxrt", path, "fp16") is not first
    assert cache.builds == {("onnxrt", "fp32"): 1, ("onnxrt", "fp16"): 1}
    cache.close()


def test_an_ir_version_onnxruntime_lacks_is_lowered_when_its_opsets_are_supported():
    model = layer_chain()
    model.ir_version = 99  # issue 14: loaded as the newest IR onnxruntime reads, and said so
    runner = runners.create("onnxrt", model)
    assert "model IR version 99 loaded as IR version" in runner.describe()["ir_version"]


def test_weights_beside_the_model_file_are_part_of_its_digest(tmp_path):
    """torch.onnx.export writes weights to `model.onnx.data`: a re-export with new weights
    leaves `model.onnx` byte for byte the same, and must still be another model."""
    import onnx

    paths = []
    for version, scale in (("v1", 1.0), ("v2", 1.01)):
        model = layer_chain()
        for tensor in model.graph.initializer:
            values = onnx.numpy_helper.to_array(tensor) * scale
            tensor.CopyFrom(onnx.numpy_helper.from_array(values.astype(np.float32), tensor.name))
        folder = tmp_path / version
        folder.mkdir()
        onnx.save_model(
            model,
            str(folder / "m.onnx"),
            save_as_external_data=True,
            location="m.onnx.data",
            size_threshold=0,
        )
        paths.append(folder / "m.onnx")
    assert paths[0].read_bytes() == paths[1].read_bytes()
    cache = RunnerCache()
    first, second = (cache.get("onnxrt", path) for path in paths)
    assert first is not second and cache.builds[("onnxrt", "fp32")] == 2
    assert first.describe()["model_digest"] != second.describe()["model_digest"]
    feed = synthetic_feed(first.input_specs(), shapes={"x": (2, 16)})
    assert not np.allclose(first.infer(feed)["y"], second.infer(feed)["y"])


@pytest.mark.parametrize("name", ["onnxrt", "onnxref"])
@pytest.mark.parametrize("feed", [np.ones((2, 8), np.float32), None, [np.ones((2, 8))]])
def test_infer_of_an_array_says_to_pass_a_dict_of_its_inputs(chain, name, feed):
    runner = runners.create(name, chain)
    got = type(feed).__name__
    with pytest.raises(
        FeedError,
        match=rf"infer\(\) takes a dict of input name to array, got {got}; "
        r"pass \{'x': array\}",
    ):
        runner.infer(feed)
    callable_runner = runners.create("callable", lambda inputs: {"y": inputs["x"]})
    with pytest.raises(FeedError, match=r"got ndarray; pass \{input_name: array\}"):
        callable_runner.infer(np.ones(2))


def test_onnxrt_bf16_skip_reason_leaves_out_constants_it_folds():
    """A Constant node becomes an initializer when onnxruntime loads the model: it never
    needs a kernel, so it is not among the ops the bf16 skip reason blames (issue 35)."""
    graph = helper.make_graph(
        [
            helper.make_node(
                "Constant", [], ["c"], value=numpy_helper.from_array(np.ones(3, np.float32))
            ),
            helper.make_node("Add", ["x", "c"], ["y"]),
        ],
        "constant_add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    with pytest.raises(PrecisionUnsupported) as info:
        runners.create("onnxrt", make(graph), "bf16")
    assert str(info.value).startswith("onnxruntime CPU has no bfloat16 kernel for Add (")


def test_an_output_the_model_lacks_gets_the_closest_name(chain):
    with pytest.raises(ModelLoadError) as raised:
        runners.create("onnxrt", chain, outputs=["yy"])
    assert "has no output(s) ['yy'] (did you mean 'y'?); it has ['y']" in str(raised.value)
