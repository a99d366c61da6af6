"""Example 6: runners — the same model in several frameworks and precisions, fed identical
seeded inputs.

Shows: `runners.create(name, model, precision)`, synthetic inputs from the model's specs
(`make_feeds`, seeded, one shape for the dynamic batch), real float16 numerics on CPU with the
ONNX reference evaluator, bfloat16 with PyTorch, and a per-layer comparison
(`outputs="all"`) that would name the first layer out of tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.session.runs import compare_layers, make_feeds

from .models import mlp_model


@pytest.fixture(scope="module")
def model(weights):
    return mlp_model(weights)


def test_onnxref_fp16_against_onnxrt_fp32(compare, model):
    reference = runners.create("onnxrt", model)  # the reference always runs in fp32
    target = runners.create("onnxref", model, "fp16")  # every op rounded to float16
    (feed,) = make_feeds(reference, shapes={"x": (4, 64)}, seed=1)
    result = compare(target.infer(feed), reference.infer(feed), precision="fp16")
    assert result.outputs["logits"].max_abs_error > 0  # really computed in float16
    assert "fp16" in target.describe()["precision_route"]


def test_torch_bf16_against_onnxrt_fp32(compare, model, weights):
    torch = pytest.importorskip("torch")
    layers = []
    for i in range(0, len(weights), 2):
        linear = torch.nn.Linear(*weights[i].shape)
        linear.weight.data = torch.from_numpy(np.array(weights[i].T))
        linear.bias.data = torch.from_numpy(np.array(weights[i + 1]))
        layers += [linear, torch.nn.ReLU()]
    twin = torch.nn.Sequential(*layers[:-1])  # no ReLU after the last layer: the logits
    reference = runners.create("onnxrt", model)
    (feed,) = make_feeds(reference, shapes={"x": (4, 64)})
    target = runners.create("torch", twin, "bf16", input_names=["x"], output_names=["logits"])
    compare(target.infer(feed), reference.infer(feed), precision="bf16", names=["logits"])


def test_every_layer_within_fp16_tolerance(model):
    reference = runners.create("onnxrt", model, outputs="all")
    target = runners.create("onnxref", model, "fp16", outputs="all")
    (feed,) = make_feeds(reference, shapes={"x": (4, 64)})
    result = compare_layers(target, reference, feed, atol=1e-2, rtol=1e-2)
    assert result.passed, result.report()
    assert result.first_divergence is None
    assert list(result.outputs)[:3] == ["mm0", "add0", "relu0"]  # topological order
