"""Example 11: tolerances no one guesses (docs/how-to/tolerances.md).

- `Tolerance(check="fp64")`: the ONNX model on onnx.reference against its torch twin. The
  plugin also runs the twin at float64 and at the item's precision; the item passes when
  onnx.reference is at most twice as far from the float64 run as torch at the same
  precision. No atol to pick: `pytest conftest_examples --trt-precision fp16,bf16` runs it
  at reduced precision (torch items skip where torch is not installed).
- A calibrated tolerance: the CNN test gives no tolerance, so its outputs take theirs from
  `trtcompare-tolerances.toml` in this folder (pyproject.toml's `trtcompare_tolerances_file`),
  written by `pytest conftest_examples -k calibrated --trt-calibrate=5 --trt-precision
  fp32,fp16,bf16` (an entry per item: precisions are part of the test id) and committed.
  The report names the source `calibrated (5 seeds, <date>)`.
"""

from __future__ import annotations

import importlib.util

import pytest

from pytest_trtcompare import Tolerance

from .models import cnn_model, cnn_weights, mlp_model, mlp_weights, torch_mlp

HAVE_TORCH = importlib.util.find_spec("torch") is not None
MLP_WEIGHTS = mlp_weights(0)
MLP, CNN = mlp_model(MLP_WEIGHTS), cnn_model(cnn_weights(0))
TWIN = {"torch": torch_mlp(MLP_WEIGHTS)} if HAVE_TORCH else {}  # else the torch items skip


@pytest.mark.compare_frameworks(
    model=MLP,
    frameworks=["onnxref", "torch"],
    reference="torch",
    models=TWIN,
    options={"torch": {"output_names": ["logits", "probs"]}},
    outputs=["logits"],  # probs at bf16: 2.04x torch's (onnx.reference rounds its Softmax)
    tolerance=Tolerance(check="fp64"),  # threshold=2.0 (the multiplier), atol=1e-5 (the floor)
)
@pytest.mark.shapes({"x": (8, 64)})
def test_mlp_no_worse_than_torch_at_its_precision(comparison):
    fp64 = comparison.outputs["logits"].metric("fp64")
    assert fp64.passed and fp64.value <= 2 * fp64.reference_error + fp64.floor


@pytest.mark.compare_frameworks(model=CNN, frameworks=["onnxrt", "onnxref"], iterations=2)
@pytest.mark.shapes({"x": (4, 3, 32, 32)})
def test_cnn_calibrated(comparison):
    tolerance = comparison.outputs["logits"].tolerance
    assert tolerance.source("atol").startswith("calibrated (5 seeds")
