"""Example 9: real architectures (the `light_*.onnx` graphs the onnx package ships, with
seeded random weights, see zoo.py) against committed goldens, and across frameworks.

Shows: `compare_frameworks(..., golden=True)`: every listed framework is a target and the
reference is the golden saved for that item, inputs included, so a new onnxruntime or a new
machine is compared with exactly the numbers that were saved. The goldens are committed in
`goldens/test_model_zoo/` for fp32 and fp16; after an intended change refresh them with
`pytest conftest_examples/test_model_zoo.py --trt-precision fp32,fp16 --trt-update-goldens`.
"""

from __future__ import annotations

import pytest

from .zoo import light_model

RESNET50, SQUEEZENET, SHUFFLENET = (
    light_model(n) for n in ("resnet50", "squeezenet", "shufflenet")
)


@pytest.mark.compare_frameworks(model=RESNET50, frameworks=["onnxrt"], golden=True)
def test_resnet50_against_golden():
    """ResNet-50 (BatchNorm, residual sums): 1x3x224x224 -> 1000 logits."""


@pytest.mark.compare_frameworks(model=SQUEEZENET, frameworks=["onnxrt"], golden=True)
def test_squeezenet_against_golden():
    """SqueezeNet (fire modules: Concat of 1x1 and 3x3 convolutions)."""


@pytest.mark.compare_frameworks(model=SHUFFLENET, frameworks=["onnxrt"], golden=True)
def test_shufflenet_against_golden(comparison):
    """ShuffleNet (grouped convolutions, channel shuffle); its logits are the largest here."""
    assert comparison.outputs["gpu_0/softmax_1"].cosine_similarity > 0.999


@pytest.mark.compare_frameworks(model=SQUEEZENET, frameworks=["onnxrt", "onnxref"])
def test_squeezenet_reference_evaluator(comparison):
    """The reference evaluator rounds every op to the precision (real fp16 on a CPU)."""
    assert comparison.outputs["softmaxout_1"].shape == (1, 1000, 1, 1)
