"""Example 10: a per-layer comparison of a transformer encoder, node by node.

`outputs="all"` compares every intermediate tensor of the reference (onnxrt, fp32) and the
target (the reference evaluator, which rounds every op to the precision) in topological order.
Run `pytest conftest_examples/test_transformer_layers.py --trt-precision fp16 --trt-atol 1e-3
--trt-rtol 1e-3` to see a per-layer failure report: it names the first node out of tolerance.
"""

from __future__ import annotations

import pytest

from .transformer import transformer_model, transformer_weights

TRANSFORMER = transformer_model(transformer_weights(layers=2))


@pytest.mark.compare_frameworks(model=TRANSFORMER, frameworks=["onnxrt", "onnxref"], outputs="all")
@pytest.mark.shapes({"hidden_in": (2, 16, 32)})
def test_transformer_block_layer_by_layer(comparison):
    """Every layer of two pre-LayerNorm encoder layers; the comparison passes at fp32 and fp16."""
    assert comparison.first_divergence is None
