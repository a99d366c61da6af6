"""Per layer under a memory budget (issue 48, part 2): --trt-layer-budget, ini
trtcompare_layer_budget and the layer_budget= marker argument group the layers of an
outputs="all" comparison so that both sides' tensors of a group fit the budget; a tensor
larger than it is compared alone, with a note; the first divergence and the figures are those
of an unlimited budget. onnxruntime marks only a group's tensors in that group's session."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_trtcompare import runners
from pytest_trtcompare.runners.onnx_graph import inferred_bytes
from pytest_trtcompare.session import layer_budget, layer_runs
from pytest_trtcompare.session.layer_budget import LayerBudget, parse_layer_budget, plan_groups

from .onnx_models import layer_chain
from .pytester_helpers import XDIST, XDIST_SLOW, run
from .test_layers import CONFTEST, TEST, block_model


# -- what it takes -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("2GB", LayerBudget(nbytes=2 * 10**9)),
        ("512MiB", LayerBudget(nbytes=512 * 2**20)),
        ("1.5gib", LayerBudget(nbytes=3 * 2**29)),
        ("1048576", LayerBudget(nbytes=1048576)),
        ("64KB", LayerBudget(nbytes=64000)),
        ("0.25", LayerBudget(fraction=0.25)),
        ("1.0", LayerBudget(fraction=1.0)),
        (4096, LayerBudget(nbytes=4096)),  # a marker's int: bytes
        (0.5, LayerBudget(fraction=0.5)),  # a marker's float: a fraction
    ],
)
def test_a_budget_is_bytes_or_a_fraction_of_the_free_memory(given, expected):
    assert parse_layer_budget(given) == expected


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("2 GB", "'2 GB' is not a budget; write the size without a space (2GB)"),
        ("lots", "'lots' is not a budget: it takes a size such as 2GB"),
        ("-1GB", "'-1GB' is not a budget; a budget is more than 0"),
        ("0", "'0': a budget is more than 0 bytes"),
        ("1.5", "'1.5': a fraction of the free memory is in (0, 1]"),
        (2.0, "2.0: a fraction of the free memory is in (0, 1]"),
        ("2XB", "'2XB': unknown unit 'xb'"),
        (True, "got True (bool); it takes a size"),
        ([1], "got [1] (list); it takes a size"),
    ],
)
def test_what_is_not_a_budget_says_why(given, says):
    with pytest.raises(ValueError) as caught:
        parse_layer_budget(given)
    assert says in str(caught.value)


def test_the_default_is_a_stated_fraction_of_the_least_free_memory(monkeypatch):
    assert layer_budget.DEFAULT_FRACTION == 0.25
    free = layer_budget.host_free_bytes()
    assert free is not None and free > 0  # /proc/meminfo here
    monkeypatch.setattr(layer_budget, "host_free_bytes", lambda: 8000)
    assert layer_budget.budget_bytes(None) == 2000
    assert layer_budget.budget_bytes(LayerBudget(fraction=0.5)) == 4000
    assert layer_budget.budget_bytes(LayerBudget(nbytes=123)) == 123

    class OnDevice:
        def free_device_bytes(self):
            return 4000

    assert layer_budget.budget_bytes(None, [OnDevice()]) == 1000  # the device has less


def test_groups_stay_within_the_budget_and_a_larger_tensor_goes_alone():
    sizes = {"a": 40, "b": 40, "c": 30, "big": 500, "d": 10, "e": 90}
    groups, over = plan_groups(["a", "b", "c", "big", "d", "unknown", "e"], sizes, 100)
    assert groups == [["a", "b"], ["c"], ["big"], ["d"], ["unknown"], ["e"]]
    assert over == ["big"]
    assert plan_groups(list(sizes), sizes, 10**9) == ([list(sizes)], [])


def test_shape_inference_sizes_each_layer_at_the_feed_shapes():
    model = layer_chain()  # x[batch, 16] -> 32 -> 32 -> 32 -> 8
    sizes = inferred_bytes(model, {"x": (5, 16)})
    assert sizes["mm0"] == sizes["act2"] == 5 * 32 * 4 and sizes["y"] == 5 * 8 * 4
    fp16 = runners.create("onnxrt", model, "fp16", outputs="all")
    assert fp16.layer_bytes({"x": (5, 16)})["add1"] == 5 * 32 * 2


def test_a_torch_runner_on_cuda_counts_that_device_free_memory(monkeypatch):
    torch = pytest.importorskip("torch")
    runner = runners.create("torch", torch.nn.Linear(4, 2), input_specs={"input": (3, 4)})
    assert runner.free_device_bytes() is None  # on the CPU: the host's memory
    monkeypatch.setattr(runner, "device", torch.device("cuda", 0))
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (1000, 4000))
    assert runner.free_device_bytes() == 1000
    assert layer_budget.budget_bytes(None, [runner]) == 250


def test_a_torch_module_sizes_its_layers_from_its_first_run():
    torch = pytest.importorskip("torch")
    module = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    runner = runners.create(
        "torch", module, outputs="all", input_specs={"input": ("float32", (3, 4))}
    )
    from pytest_trtcompare.runners import torch_layers

    copied: list[object] = []
    real = torch_layers.to_numpy
    torch_layers.to_numpy = lambda value: copied.append(value) or real(value)
    try:
        runner.discover_layers({"input": np.ones((3, 4), np.float32)})
    finally:
        torch_layers.to_numpy = real
    assert copied == []  # the run that finds the layers keeps none of their values
    sizes = runner.layer_bytes({"input": (3, 4)})
    assert sizes["0"] == sizes["1"] == 3 * 8 * 4 and sizes["2"] == 3 * 2 * 4


# -- onnxruntime: a group's session marks only its tensors ---------------------------------------
def test_a_group_session_marks_only_the_group():
    runner = runners.create("onnxrt", layer_chain(), outputs="all")
    everything = [out.name for out in runner.session.get_outputs()]
    assert len(everything) == 12
    with runner.select_outputs(["mm1", "act1"]):
        session = runner._run.__self__
        assert [out.name for out in session.get_outputs()] == ["mm1", "act1"]
        got = runner.infer({"x": np.ones((2, 16), np.float32)})
    assert list(got) == ["mm1", "act1"]
    assert runner._run.__self__ is runner.session  # the session of every layer again
    level = runner.describe()["session_options"]["graph_optimization_level"]
    assert level == "ORT_DISABLE_ALL"  # marks change no fusion


def conv_model() -> onnx.ModelProto:
    """Conv, Relu, BatchNormalization x4 at 1x16x32x32 (64 KiB a tensor in fp32): the CPU's
    NCHWc layout transform, which a graph optimization level applies, moves its figures."""
    rng = np.random.default_rng(0)
    weights, nodes, current = [], [], "x"
    for i in range(4):
        weights += [
            numpy_helper.from_array(
                (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype("f"), f"w{i}"
            ),
            numpy_helper.from_array((rng.standard_normal(16) * 0.1).astype("f"), f"b{i}"),
        ]
        nodes += [
            helper.make_node("Conv", [current, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1] * 4),
            helper.make_node("Relu", [f"c{i}"], [f"r{i}"]),
            helper.make_node("BatchNormalization", [f"r{i}", "s", "bb", "m", "v"], [f"n{i}"]),
        ]
        current = f"n{i}"
    for name, value in (("s", 1.1), ("v", 1.1), ("bb", 0.1), ("m", 0.1)):
        weights.append(numpy_helper.from_array(np.full(16, value, np.float32), name))
    shape = [1, 16, 32, 32]
    graph = helper.make_graph(
        nodes,
        "convs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(current, TensorProto.FLOAT, shape)],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _figures(result):
    return {
        name: (out.passed, float(out.max_abs_error), float(out.max_rel_error))
        for name, out in result.outputs.items()
    }


@pytest.mark.parametrize(
    ("model", "shape", "budget"),
    [
        (layer_chain(perturb_layer=1), (64, 16), 64 * 32 * 6 * 2),  # 2 tensors a group
        (conv_model(), (1, 16, 32, 32), 16 * 32 * 32 * 8),  # 1 a group
    ],
    ids=["matmul-chain", "convs"],
)
@pytest.mark.parametrize("target", ["onnxrt", "onnxref"])
def test_a_tiny_budget_gives_what_an_unlimited_one_gives(model, shape, budget, target):
    fp16 = runners.create(target, model, "fp16", outputs="all")
    fp32 = runners.create("onnxrt", model, outputs="all")
    feed = {"x": np.random.default_rng(3).standard_normal(shape).astype(np.float32)}
    fetched: list[int] = []
    real = fp32.select_outputs

    def counted(names):
        fetched.append(len(names))
        return real(names)

    fp32.select_outputs = counted
    tiny = layer_runs.compare_layers(fp16, fp32, feed, atol=1e-3, rtol=1e-3, budget=budget)
    assert len(fetched) > 1 and max(fetched) < len(tiny.outputs)
    fetched.clear()
    unlimited = layer_runs.compare_layers(fp16, fp32, feed, atol=1e-3, rtol=1e-3, budget=10**15)
    assert fetched == [len(unlimited.outputs)]  # one group: every compared layer
    assert not tiny.passed and tiny.first_divergence_node == unlimited.first_divergence_node
    assert _figures(tiny) == _figures(unlimited)
    assert tiny.report() == unlimited.report()
    assert tiny.layers.over_budget == ()


def test_a_tensor_over_the_budget_is_compared_alone_with_a_note():
    model = layer_chain(perturb_layer=1)
    fp16 = runners.create("onnxref", model, "fp16", outputs="all")
    fp32 = runners.create("onnxrt", model, outputs="all")
    feed = {"x": np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32)}
    small = layer_runs.compare_layers(fp16, fp32, feed, atol=1e-3, rtol=1e-3, budget=200)
    unlimited = layer_runs.compare_layers(fp16, fp32, feed, atol=1e-3, rtol=1e-3)
    assert _figures(small) == _figures(unlimited)
    # 4x32: 512 B in float32 + 256 B in float16; 4x8: 128 + 64 B fit, the float32 output y not
    over = tuple(f"{k}{i}" for i in range(3) for k in ("mm", "add", "act"))
    assert small.layers.over_budget == (*over, "y")
    assert small.layers.budget == "200 B"
    assert (
        "note: 10 tensor(s) larger than the layer budget of 200 B on both sides together, each "
        "fetched and compared alone: matmul0 (MatMul) -> mm0, bias0 (Add) -> add0, "
        "tanh0 (Tanh) -> act0, matmul1 (MatMul) -> mm1, bias1 (Add) -> add1 (+5 more) "
        "(--trt-layer-budget)"
    ) in small.report()


# -- the flag, the ini key and the marker argument ------------------------------------------------
@pytest.fixture
def suite(pytester):
    pytester.makepyfile(
        tests_layers_model="import onnx\nMODEL = onnx.load_from_string("
        f"{block_model().SerializeToString()!r})\n"
    )
    pytester.makeconftest(CONFTEST)
    pytester.syspathinsert()

    def write(extra: str = "") -> None:
        pytester.makepyfile(test_block=TEST.format(extra=extra))

    return write


#: block_model's float tensors are 2x3: 24 B in float32 and 12 B in float16, 36 B both.
NOTE = (
    "note: 4 tensor(s) larger than the layer budget of 30 B on both sides together, each "
    "fetched and compared alone: /block/scale/Mul (Mul), /block/Add (Add), /block/act/Tanh "
    "(Tanh) -> t, /block/Reshape (Reshape) -> y (--trt-layer-budget)"
)
FIRST = "first divergence (topological order): /block/scale/Mul (Mul), layer 1 of 4"


@pytest.mark.parametrize("xdist", XDIST)
def test_the_flag_sets_the_budget(pytester, suite, xdist):
    suite()
    result = run(pytester, "--trt-precision=fp16", "--trt-layer-budget=30B", *xdist)
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert FIRST in text and NOTE in text
    plenty = run(pytester, "--trt-precision=fp16", "--trt-layer-budget=0.5", *xdist)
    plenty.assert_outcomes(failed=1)
    assert FIRST in plenty.stdout.str() and "layer budget" not in plenty.stdout.str()


@pytest.mark.parametrize("xdist", XDIST)
def test_the_ini_key_and_the_marker_argument_set_it_the_marker_first(pytester, suite, xdist):
    suite()
    pytester.makeini("[pytest]\ntrtcompare_layer_budget = 30B\n")
    result = run(pytester, "--trt-precision=fp16", *xdist)
    result.assert_outcomes(failed=1)
    assert NOTE in result.stdout.str()
    suite(', layer_budget="1KiB"')  # the test's own value before the flag and the ini
    result = run(pytester, "--trt-precision=fp16", "--trt-layer-budget=30B", *xdist)
    result.assert_outcomes(failed=1)
    assert FIRST in result.stdout.str() and "layer budget" not in result.stdout.str()
    suite(", layer_budget=30")  # an int: bytes
    result = run(pytester, "--trt-precision=fp16", *xdist)
    result.assert_outcomes(failed=1)
    assert NOTE in result.stdout.str()


@pytest.mark.parametrize("xdist", XDIST_SLOW)  # -n 2 of each mistake: -m slow
@pytest.mark.parametrize(
    ("flag", "says"),
    [
        ("2 GB", "'2 GB' is not a budget; write the size without a space (2GB): it takes"),
        ("lots", "'lots' is not a budget: it takes a size such as 2GB, 512MiB or 1048576"),
        ("-1", "'-1' is not a budget; a budget is more than 0: it takes"),
    ],
)
def test_a_bad_flag_value_is_a_usage_error_naming_the_flag(pytester, suite, xdist, flag, says):
    suite()
    result = run(pytester, f"--trt-layer-budget={flag}", *xdist)
    assert result.ret == 4
    result.stderr.fnmatch_lines([f"*argument --trt-layer-budget: {says}*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize("xdist", XDIST)
def test_a_bad_ini_value_is_a_usage_error_naming_the_key(pytester, suite, xdist):
    suite()
    pytester.makeini("[pytest]\ntrtcompare_layer_budget = lots\n")
    result = run(pytester, *xdist)
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["*ini trtcompare_layer_budget = 'lots': 'lots' is not a budget: it takes a size*"]
    )
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize("xdist", XDIST_SLOW)  # -n 2 of each mistake: -m slow
@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (', layer_budget="2 GB"', "(layer_budget=...) got '2 GB' (str); it takes a size such as"),
        (", layer_budget=-5", "(layer_budget=...) got -5 (int); it takes a size such as"),
        (", layer_budget=True", "(layer_budget=...) got True (bool); it takes a size such as"),
    ],
)
def test_a_bad_marker_argument_names_it(pytester, suite, xdist, extra, says):
    suite(extra)
    result = run(pytester, *xdist)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [f"*test_block.py::test_block: @pytest.mark.compare_frameworks{says}*"]
    )
    assert "INTERNALERROR" not in result.stdout.str() and "Traceback" not in result.stdout.str()


def test_the_marker_argument_needs_outputs_all(pytester):
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compare_frameworks(model="m.onnx", frameworks=["onnxrt"], layer_budget="1GB")
        def test_x():
            pass
        """
    )
    result = run(pytester)
    result.stdout.fnmatch_lines(
        ["*(layer_budget=...) got '1GB' (str); it takes a per-layer comparison: add outputs='all'*"]
    )
