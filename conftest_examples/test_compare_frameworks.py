"""Example 8: `@pytest.mark.compare_frameworks` — the workflow the plugin exists for.

Each marked test expands to one item per target framework x precision x shape set, with ids
like `test_mlp[torch-fp16-bs8]`. The reference framework (onnxrt when listed) runs in fp32.
Run at other precisions with `pytest conftest_examples --trt-precision fp16` (or
`fp32,fp16,bf16`); tolerances follow the precision (fp16: 1e-2, bf16: 5e-2) unless the marker,
the ini table or the command line says otherwise. Torch twins are used where torch is
installed; without it those items skip with the install hint. The TensorRT test skips
without a GPU and TensorRT.
"""

from __future__ import annotations

import importlib.util

import pytest

from .models import (
    attention_model,
    attention_weights,
    cnn_model,
    cnn_weights,
    mlp_model,
    mlp_weights,
    multi_input_model,
    torch_attention,
    torch_cnn,
    torch_mlp,
)

HAVE_TORCH = importlib.util.find_spec("torch") is not None
MLP_WEIGHTS, CNN_WEIGHTS, ATTENTION_WEIGHTS = mlp_weights(0), cnn_weights(0), attention_weights()
MLP, CNN, ATTENTION = (
    mlp_model(MLP_WEIGHTS),
    cnn_model(CNN_WEIGHTS),
    attention_model(ATTENTION_WEIGHTS),
)


def twin(factory, weights):
    """{"torch": module} where torch is installed (else the torch items skip)."""
    return {"torch": factory(weights)} if HAVE_TORCH else {}


@pytest.mark.compare_frameworks(
    model=MLP,
    frameworks=["onnxrt", "onnxref", "torch"],
    models=twin(torch_mlp, MLP_WEIGHTS),
    options={"torch": {"output_names": ["logits", "probs"]}},
)
@pytest.mark.shapes({"x": (1, 64)}, {"x": (8, 64)})
def test_mlp(comparison):
    """Two targets (the reference evaluator and a torch twin) x two batch sizes."""
    assert comparison.outputs["logits"].cosine_similarity > 0.999


@pytest.mark.compare_frameworks(
    model=CNN,
    frameworks=["onnxrt", "onnxref", "torch"],
    models=twin(torch_cnn, CNN_WEIGHTS),
    options={"torch": {"output_names": ["logits"]}},
)
@pytest.mark.shapes({"x": (1, 3, 32, 32)}, {"x": (4, 3, 32, 32)})
def test_small_cnn():
    """No fixture needed: the plugin compares; the test body may add checks."""


@pytest.mark.compare_frameworks(
    model=ATTENTION,
    frameworks=["onnxrt", "onnxref", "torch"],
    models=twin(torch_attention, ATTENTION_WEIGHTS),
    options={"torch": {"output_names": ["y"]}},
)
@pytest.mark.shapes({"x": (1, 8, 16)}, {"x": (2, 32, 16)}, ids=["seq8", "seq32"])
def test_attention_dynamic_sequence_length(comparison):
    """A model with two dynamic dims; shape sets with explicit ids."""
    assert comparison.outputs["y"].count in (8 * 16, 2 * 32 * 16)


@pytest.mark.compare_frameworks(
    model=multi_input_model(),
    frameworks=["onnxrt", "onnxref"],
    val_range={"token_ids": (0, 19)},  # valid rows of the embedding table
    seed=3,
    iterations=2,
)
@pytest.mark.shapes({"features": (4, 4), "token_ids": (4, 3), "mask": (4, 4)})
def test_multi_input_int64_and_bool(comparison):
    """float, int64 and bool inputs; value ranges per input; two seeded iterations."""
    assert comparison.outputs["out"].passed


@pytest.mark.compare_frameworks(model=MLP, frameworks=["onnxrt", "onnxref"], outputs="all")
@pytest.mark.shapes({"x": (2, 64)})
def test_mlp_layer_by_layer(comparison):
    """outputs="all": every intermediate tensor, in topological order."""
    assert list(comparison.outputs)[:3] == ["mm0", "add0", "relu0"]
    assert comparison.first_divergence is None


@pytest.mark.compare_frameworks(model=MLP, frameworks=["trt", "onnxrt"])
@pytest.mark.shapes({"x": (1, 64)}, {"x": (8, 64)})
def test_mlp_on_tensorrt(comparison):
    """One engine per precision whose optimization profile spans both shape sets."""
    assert comparison.outputs["logits"].passed
