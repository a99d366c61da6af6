"""The torch runner as models written elsewhere use it (issue 22): a feed bound to `forward`
by name, defaults left alone, dtypes from the truth, outputs of any structure flattened to
stable names, and a framework's error as one message."""

from __future__ import annotations

import contextlib
import dataclasses
import re

import numpy as np
import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.errors import (
    FeedError,
    InferenceError,
    InputDataError,
    InvalidOutputError,
    RunnerOptionError,
)
from pytest_trtcompare.inputs import synthetic_feed
from pytest_trtcompare.runners.base import TensorSpec
from pytest_trtcompare.session.runs import make_feeds

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import library_says, run

torch = pytest.importorskip("torch")


class Keywords(torch.nn.Module):
    """forward(x, mask=None, scale=2.0): like a Hugging Face forward, defaults after x."""

    def forward(self, x, mask=None, scale=2.0):
        return x * scale if mask is None else x * mask * scale


class PositionalOnly(torch.nn.Module):
    def forward(self, a, b, /, c=None):
        return a - b + (0 if c is None else c)


class Star(torch.nn.Module):
    def forward(self, *tensors):
        return tensors[0] - tensors[1]


class StarStar(torch.nn.Module):
    def forward(self, x, **extra):
        return x + sum(extra.values())


def ones(*shape):
    return np.ones(shape, np.float32)


# -- binding by name ---------------------------------------------------------------------------
def test_parameters_bind_by_keyword_and_defaults_stay_defaults():
    runner = runners.create("torch", Keywords())
    assert [spec.name for spec in runner.input_specs()] == ["x"]  # the required ones
    assert runner.infer({"x": ones(2)})["output"].tolist() == [2.0, 2.0]
    # given by name, in any order: never shifted into another parameter's slot
    out = runner.infer({"mask": np.array([0.0, 1.0], np.float32), "x": ones(2)})
    assert out["output"].tolist() == [0.0, 2.0]


def test_a_missing_required_parameter_names_it_and_shows_forward():
    runner = runners.create("torch", Keywords())
    with pytest.raises(FeedError) as info:
        runner.infer({"mask": ones(2)})
    assert str(info.value) == (
        "torch-fp32: feed lacks required input(s) ['x'] of forward(x, mask=None, "
        "scale=2.0); it has ['mask']"
    )


def test_an_unknown_feed_name_lists_the_accepted_ones():
    with pytest.raises(FeedError) as info:
        runners.create("torch", Keywords()).infer({"x": ones(2), "maks": ones(2)})
    assert str(info.value) == (
        "torch-fp32: feed has unknown input(s) ['maks']; forward(x, mask=None, scale=2.0) "
        "takes x, mask, scale"
    )


def test_positional_only_parameters_go_by_position():
    runner = runners.create("torch", PositionalOnly())
    out = runner.infer({"b": ones(2), "a": 3 * ones(2)})
    assert out["output"].tolist() == [2.0, 2.0]
    assert runner.describe()["forward"] == "forward(a, b, /, c=None)"


def test_star_args_take_the_feed_in_its_order_and_star_kwargs_its_names():
    star = runners.create(
        "torch", Star(), input_specs={"p": ("float32", (2,)), "q": ("float32", (2,))}
    )
    assert star.infer({"p": 3 * ones(2), "q": ones(2)})["output"].tolist() == [2.0, 2.0]
    kwargs = runners.create("torch", StarStar())
    assert kwargs.infer({"x": ones(2), "bias": ones(2)})["output"].tolist() == [2.0, 2.0]


def test_input_names_are_the_positional_arguments_in_order():
    runner = runners.create("torch", PositionalOnly(), input_names=["first", "second"])
    assert runner.infer({"second": ones(1), "first": 4 * ones(1)})["output"].tolist() == [3.0]
    with pytest.raises(FeedError, match=r"feed lacks \['second'\]; input_names="):
        runner.infer({"first": ones(1)})


# -- dtypes from the truth -----------------------------------------------------------------------
class Embed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.table = torch.nn.Embedding(32, 4)

    def forward(self, input_ids: torch.LongTensor, attention_mask: torch.FloatTensor | None = None):
        hidden = self.table(input_ids)
        return hidden if attention_mask is None else hidden * attention_mask[..., None]


def test_annotated_dtypes_make_integer_ids_and_float_casts_leave_them():
    runner = runners.create("torch", Embed(), "fp16")
    assert runner.input_specs() == [TensorSpec("input_ids", "int64", None)]
    feed = make_feeds(runner, shapes={"input_ids": (2, 3), "attention_mask": (2, 3)})[0]
    assert feed["input_ids"].dtype == np.int64 and feed["attention_mask"].dtype == np.float32
    out = runner.infer(feed)["output"]
    assert out.dtype == np.float16 and out.shape == (2, 3, 4)


def test_a_float32_guess_that_the_model_refuses_says_how_to_give_dtypes():
    class Untyped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.nn.Embedding(8, 2)

        def forward(self, ids):
            return self.table(ids)

    runner = runners.create("torch", Untyped())
    feed = synthetic_feed(runner.input_specs(), shapes={"ids": (2, 3)})
    with pytest.raises(InferenceError) as info:
        runner.infer(feed)
    text = str(info.value)
    assert text.startswith("torch-fp32 failed running the model on ids: float32[2, 3]: ")
    float_ids = torch.zeros(2, 3)
    assert library_says(lambda: Untyped()(float_ids)) in text  # torch's own words, whatever
    assert "give them: input_specs={'ids': ('int64', (2, 3))}" in text
    given = runners.create("torch", Untyped(), input_specs={"ids": ("int64", (None, None))})
    assert given.infer({"ids": np.zeros((2, 3), np.int64)})["output"].shape == (2, 3, 2)


def test_a_framework_error_is_one_message_with_the_model_line_and_the_cause_kept():
    class Broken(torch.nn.Module):
        def forward(self, x):
            return x.reshape(7, 7)

    runner = runners.create("torch", Broken())
    with pytest.raises(InferenceError) as info:
        runner.infer({"x": ones(2, 3)})
    text = str(info.value)
    said = library_says(lambda: Broken()(torch.ones(2, 3)))
    assert text.startswith(f"torch-fp32 failed running the model on x: float32[2, 3]: {said}")
    assert "(at test_torch_runner.py:" in text and "in forward)" in text
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "x.reshape(7, 7)" in info.value.details  # the library's traceback, for --tb=long
    assert "pytest_trtcompare" not in info.value.details


# -- outputs of any structure --------------------------------------------------------------------
@dataclasses.dataclass
class Plain:
    scores: torch.Tensor
    extra: torch.Tensor | None = None


class Cache:
    """A transformers DynamicCache as pytree does not know it: layers of keys and values."""

    class Layer:
        def __init__(self, keys, values):
            self.keys, self.values = keys, values

    def __init__(self, pairs):
        self.layers = [self.Layer(k, v) for k, v in pairs]


class Structured(torch.nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def forward(self, x):
        k = self.kind
        if k == "tuple":
            return x, x + 1
        if k == "nested":
            return {"logits": x, "hidden_states": (x + 1, x + 2), "loss": None}
        if k == "dataclass":
            return Plain(scores=x)
        if k == "cache":
            return {"logits": x, "cache": Cache([(x + 1, x + 2), (x + 3, x + 4)])}
        if k == "number":
            return {"y": x, "count": 3}
        if k == "string":
            return {"y": x, "label": "cat"}
        return {"y": x, "pair": (x, object())}


@pytest.mark.parametrize(
    ("kind", "names"),
    [
        ("tuple", ["output_0", "output_1"]),
        ("nested", ["logits", "hidden_states.0", "hidden_states.1"]),
        ("dataclass", ["scores"]),
        ("cache", ["logits", "cache.0.key", "cache.0.value", "cache.1.key", "cache.1.value"]),
        ("number", ["y", "count"]),
    ],
)
def test_outputs_flatten_to_stable_names(kind, names):
    out = runners.create("torch", Structured(kind)).infer({"x": ones(2)})
    assert list(out) == names
    assert all(isinstance(value, np.ndarray) for value in out.values())


def test_a_model_output_object_flattens_by_its_fields():
    transformers = pytest.importorskip("transformers")

    class WithOutput(torch.nn.Module):
        def forward(self, x):
            return transformers.modeling_outputs.BaseModelOutputWithPooling(
                last_hidden_state=x, pooler_output=x[0], hidden_states=None
            )

    out = runners.create("torch", WithOutput()).infer({"x": ones(2, 3)})
    assert list(out) == ["last_hidden_state", "pooler_output"]


def test_output_names_rename_the_flattened_outputs_in_order():
    runner = runners.create("torch", Structured("nested"), output_names=["a", "b", "c"])
    assert list(runner.infer({"x": ones(1)})) == ["a", "b", "c"]
    wrong = runners.create("torch", Structured("nested"), output_names=["a"])
    with pytest.raises(FeedError, match=r"output_names=\['a'\], but the model returned 3"):
        wrong.infer({"x": ones(1)})


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("string", "output 'label' is str ('cat'), not a tensor"),
        ("object", "output 'pair.1' is object (<object object at"),
    ],
)
def test_a_non_tensor_output_names_its_path(kind, message):
    with pytest.raises(InvalidOutputError, match=re.escape(message)):
        runners.create("torch", Structured(kind)).infer({"x": ones(1)})


def test_outputs_restricts_and_unknown_names_are_named():
    runner = runners.create("torch", Structured("nested"), outputs=["logits"])
    assert list(runner.infer({"x": ones(1)})) == ["logits"]
    wrong = runners.create("torch", Structured("nested"), outputs=["logit"])
    with pytest.raises(FeedError, match=r"outputs=\['logit'\] names \['logit'\]"):
        wrong.infer({"x": ones(1)})


# -- every module's output (outputs="all") -------------------------------------------------------
class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 4)
        self.act = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.act(self.fc(x))
        y += 1  # in place: the recorded act output must not change
        return self.act(y - 2)


def test_all_outputs_are_every_module_call_copied_when_it_returns():
    runner = runners.create("torch", Block(), outputs="all")
    feed = {"x": ones(2, 4)}
    out = runner.infer(feed)
    assert list(out) == ["fc", "act", "act#2", "output"]
    assert [(layer.node, layer.op) for layer in runner.layers[:3]] == [
        ("fc", "Linear"),
        ("act", "ReLU"),
        ("act", "ReLU"),
    ]
    assert runner.layers[-1].model_output
    np.testing.assert_array_equal(out["act"], np.maximum(out["fc"], 0))  # before the +=
    with runner.select_outputs(["act#2"]):
        assert list(runner.infer(feed)) == ["act#2"]
    assert not Block()._forward_hooks and not runner.module.fc._forward_hooks  # hooks removed


def test_a_forward_that_names_no_inputs_asks_for_specs():
    with pytest.raises(InputDataError) as info:
        make_feeds(runners.create("torch", Star()), shapes=None)
    assert str(info.value).startswith(
        "torch-fp32: forward(*tensors) names no inputs, so synthetic data has nothing to make"
    )


def test_torch_against_torch_layer_by_layer_matches_modules_by_name():
    from pytest_trtcompare.session.layer_runs import compare_layers

    module = Block()
    reference = runners.create("torch", module, "fp32", outputs="all")
    target = runners.create("torch", module, "fp16", outputs="all")
    result = compare_layers(target, reference, {"x": ones(2, 4)}, atol=1e-2, rtol=1e-2)
    assert result.passed and list(result.outputs) == ["fc", "act", "act#2", "output"]
    assert result.outputs["fc"].actual_dtype == "float16"
    assert result.layers.label("act#2") == "act (ReLU) -> act#2"
    assert result.layers.label("output") == "output" and result.layers.model_outputs == ("output",)


def test_per_layer_of_a_local_class_refuses_isolation_instead_of_hooking_nothing():
    from pytest_trtcompare.errors import ModelLoadError

    class Local(torch.nn.Module):  # pickle cannot send it: it would cross as an export
        def forward(self, x):
            return x

    with pytest.raises(ModelLoadError, match="outputs='all' cannot run isolated"):
        runners.create("torch", Local(), outputs="all", isolate=True)


def test_an_isolated_torch_runner_feeds_the_optional_parameters_shapes_name():
    runner = runners.create("torch", Embed(), isolate=True)
    try:
        feed = make_feeds(runner, shapes={"input_ids": (2, 3), "attention_mask": (2, 3)})[0]
        assert list(feed) == ["input_ids", "attention_mask"]
        assert runner.infer(feed)["output"].shape == (2, 3, 4)
        with pytest.raises(InputDataError, match=r"shapes name input\(s\) \['attention_msk'\]"):
            make_feeds(runner, shapes={"input_ids": (2, 3), "attention_msk": (2, 3)})
    finally:
        runner.close()


@pytest.mark.parametrize(
    ("device", "message"),
    [
        ("gpu", "device='gpu' is not a torch device (Expected one of cpu, cuda"),
        ("cuda:7x", "device='cuda:7x' is not a torch device (Invalid device string"),
        (None, "device=None (NoneType) is not a torch device; give 'cpu', 'cuda' or 'cuda:N'"),
    ],
)
def test_a_bad_device_is_an_option_error_not_a_traceback_or_a_skip(device, message):
    from pytest_trtcompare.errors import RunnerOptionError

    with pytest.raises(RunnerOptionError, match=re.escape(message)):
        runners.create("torch", Keywords(), device=device)


@pytest.mark.parametrize("device", ["mps", "xla", "xpu"])
def test_a_device_this_torch_cannot_use_here_is_a_skip_naming_it(device):
    from pytest_trtcompare.errors import FrameworkUnavailable

    probe = torch.empty(0)
    with contextlib.suppress(Exception):
        probe = torch.empty(0, device=device)
    if probe.device.type == device:
        pytest.skip(f"this torch can use {device}")
    with pytest.raises(FrameworkUnavailable, match=f"cannot use device '{device}' here \\("):
        runners.create("torch", Keywords(), device=device)


def test_the_meta_device_is_an_option_error():
    from pytest_trtcompare.errors import RunnerOptionError

    with pytest.raises(RunnerOptionError, match="device='meta' holds no values to compare"):
        runners.create("torch", Keywords(), device="meta")


DEVICE_SUITE = """
import pytest
import torch


@pytest.mark.compare_frameworks(
    model=torch.nn.Linear(4, 2), frameworks=["torch"], options={"torch": {"device": "mps"}}
)
@pytest.mark.shapes({"input": (1, 4)})
def test_mps(comparison):
    pass


@pytest.mark.compare_frameworks(
    model=torch.nn.Linear(4, 2), frameworks=["torch"], options={"torch": {"device": "meta"}}
)
@pytest.mark.shapes({"input": (1, 4)})
def test_meta(comparison):
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_a_marker_device_that_cannot_run_skips_and_meta_fails(pytester, xdist):
    """Through the marker's options as through runners.create: an MPS device on a torch
    without it is a skip with the reason; `meta` is the user's mistake (an error at setup,
    as every runner option's)."""
    if torch.backends.mps.is_available():
        pytest.skip("this torch can use MPS")
    pytester.makepyfile(test_devices=DEVICE_SUITE)
    result = run(pytester, "-rsE", *xdist)
    result.assert_outcomes(skipped=1, errors=1)
    result.stdout.fnmatch_lines_random(
        [
            f"SKIPPED*torch {torch.__version__} cannot use device 'mps' here (Could not run*",
            "ERROR *test_meta*device='meta' holds no values to compare; give 'cpu'*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert "pytest_trtcompare/" not in result.stdout.str()


def test_a_device_index_is_a_cuda_device():
    from pytest_trtcompare.errors import FrameworkUnavailable

    if torch.cuda.is_available():
        assert runners.create("torch", Keywords(), device=0).describe()["device"] == "cuda:0"
    else:
        with pytest.raises(FrameworkUnavailable, match="sees no CUDA device for 'cuda:0'"):
            runners.create("torch", Keywords(), device=0)


@pytest.mark.parametrize(
    ("specs", "message"),
    [
        ({"x": "float32"}, "input_specs['x']='float32' is not an input spec: give {name: (dtype,"),
        ({"x": ("float33", (2, 8))}, "input_specs['x']: dtype 'float33': unknown dtype"),
        ({"x": (2, 2.5)}, "input_specs['x']=(2, 2.5) is not an input spec"),
        ("x", "input_specs='x' is not an input spec"),
    ],
)
def test_malformed_input_specs_are_named(specs, message):
    from pytest_trtcompare.errors import RunnerOptionError

    with pytest.raises(RunnerOptionError, match=re.escape(message)):
        runners.create("torch", Keywords(), input_specs=specs)


def test_a_val_range_name_that_is_no_input_nor_dtype_is_an_error():
    runner = runners.create("torch", Embed())
    shapes = {"input_ids": (2, 3)}
    assert make_feeds(runner, shapes=shapes, val_range={"input_ids": (1, 1), "float16": (0, 1)})
    with pytest.raises(InputDataError, match=r"val_range names \['input_id'\], which is neither"):
        make_feeds(runner, shapes=shapes, val_range={"input_id": (1, 1)})


def test_an_index_past_a_table_says_how_far_the_integer_inputs_reach():
    class Small(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.nn.Embedding(2, 3)

        def forward(self, kinds: torch.LongTensor):
            return self.table(kinds)

    runner = runners.create("torch", Small())
    feed = make_feeds(runner, shapes={"kinds": (2, 8)}, seed=3)[0]
    with pytest.raises(InferenceError) as info:
        runner.infer(feed)
    assert "IndexError: index out of range in self" in str(info.value)
    assert (
        f"(an integer input may index past a table's rows: kinds up to {feed['kinds'].max()}; "
        "synthetic integers are drawn from [0, 10] unless the model says its table's size: "
        "bound the input, val_range={'kinds': (0, rows - 1)})"
    ) in str(info.value)


def test_a_non_tensor_output_left_out_by_outputs_is_never_read():
    out = runners.create("torch", Structured("string"), outputs=["y"]).infer({"x": ones(1)})
    assert list(out) == ["y"]


def test_a_forward_signature_is_a_value_immutable_and_picklable():
    import pickle

    signature = runners.create("torch", Keywords()).signature
    copied = pickle.loads(pickle.dumps(signature))  # an isolated runner sends it
    assert copied == signature and hash(copied) == hash(signature)
    assert copied.text == "forward(x, mask=None, scale=2.0)"
    assert [p.name for p in copied.parameters if p.required] == ["x"]
    with pytest.raises(AttributeError):
        signature.text = "changed"  # type: ignore[misc]
    assert signature != runners.create("torch", PositionalOnly()).signature


class Renamed(torch.nn.Module):
    def forward(self, x, mask=None, scale=2.0):
        return x * scale - (0 if mask is None else mask)


def test_input_names_bind_parameters_by_keyword_and_the_others_by_position():
    """A name of forward's goes by keyword; one forward does not name (an export's input
    name) fills the leading positional parameters; a name that would land twice is an error
    naming both routes."""
    runner = runners.create("torch", Renamed(), input_names=["images", "scale"])
    assert runner.infer({"images": ones(2), "scale": 3 * ones(2)})["output"].tolist() == [3, 3]
    runner = runners.create("torch", Renamed(), input_names=["images", "x"])
    with pytest.raises(FeedError) as info:
        runner.infer({"images": ones(1), "x": ones(1)})
    assert str(info.value) == (
        "torch-fp32: input_names=['images', 'x']: ['images'] go by position to ['x'] of "
        "forward(x, mask=None, scale=2.0), which input_names also names (['x']); name the "
        "inputs as forward's parameters, or give only positional names"
    )


class One(torch.nn.Module):
    def forward(self, x):
        return x + 1


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ("images", "torch runner: input_names= takes a list of names, not str 'images'"),
        (["x", 3], "torch runner: input_names= takes a list of names, not list ['x', 3]"),
        (
            ["images", "images"],
            "torch runner: input_names=['images', 'images'] names ['images'] twice",
        ),
        (
            ["images", "extra"],
            "torch runner: input_names=['images', 'extra']: ['images', 'extra'] go by position, "
            "but forward(x) takes 1 input(s) by position",
        ),
    ],
)
def test_input_names_that_cannot_bind_are_refused_when_the_runner_is_made(names, message):
    """A string is not split into letters, and names forward cannot take are refused at
    once, not as a TypeError of forward at the first inference (a new-user trial)."""
    with pytest.raises(RunnerOptionError) as raised:
        runners.create("torch", One(), input_names=names)
    assert str(raised.value) == message
