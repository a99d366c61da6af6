"""Example 1: ONNX Runtime fp32 against a float64 numpy reference at the fp32 tolerance.

Shows: the `compare` fixture, the built-in per-precision tolerance (fp32: 1e-5).
"""

from __future__ import annotations

from .conftest import run
from .models import mlp_numpy


def test_mlp_matches_float64_reference(compare, mlp_session, batch, weights):
    outputs = run(mlp_session, batch)
    result = compare(outputs, mlp_numpy(batch, weights), precision="fp32")
    assert result.outputs["logits"].cosine_similarity > 0.999999
