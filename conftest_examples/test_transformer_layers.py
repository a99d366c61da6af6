"""Example 10: a per-layer comparison of a transformer encoder, node by node.

`outputs="all"` compares every intermediate tensor of the reference (onnxrt, fp32) and the
target (the reference evaluator, which rounds every op to the precision) in topological order.
`layers="report"` lets the model output decide: at fp16 one attention MatMul of layer 1 drifts
past the fp16 tolerance while the output stays within it, so the item passes and warns with
the first divergence. `pytest conftest_examples/test_transformer_layers.py --trt-precision
fp16 --trt-layers=gate` fails on that layer instead and shows the per-layer report.
"""

from __future__ import annotations

import pytest

from .transformer import transformer_model, transformer_weights

TRANSFORMER = transformer_model(transformer_weights(layers=2))


@pytest.mark.compare_frameworks(
    model=TRANSFORMER,
    frameworks=["onnxrt", "onnxref"],
    outputs="all",
    layers="report",
    tolerance={"hidden": {"check": "cosine", "threshold": 0.999}},
)
@pytest.mark.shapes({"hidden_in": (2, 16, 32)})
def test_transformer_block_layer_by_layer(comparison):
    """Every layer of two pre-LayerNorm encoder layers; the model output decides."""
    assert comparison.outputs["hidden"].passed
    assert comparison.layers is not None and comparison.layers.left_out == 56
