"""What ran, on models no one here wrote (issue 48): the fp16 conversion of Hugging Face's
BERT and torchvision's resnet18, exported with torch.onnx.export, counted node by node
(runners/computed.py), and their torch modules' parameters at bf16."""

from __future__ import annotations

import onnx
import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.runners import computed

from .torchvision_ops import install

install()
pytest.importorskip("transformers")
pytest.importorskip("torchvision", exc_type=ImportError)

from . import models  # noqa: E402


@pytest.mark.parametrize("name", ["bert", "resnet18"])
def test_the_fp16_conversion_of_a_zoo_model_computes_its_nodes_in_float16(zoo, name):
    path = zoo.onnx(name)
    fp32 = runners.Computed.of(runners.create("onnxref", path).describe())
    runner = runners.create("onnxrt", path, "fp16")
    found = runners.Computed.of(runner.describe())
    assert fp32 is not None and found is not None
    model = onnx.load(str(path))
    counted = [n for n in model.graph.node if n.op_type not in computed.PLUMBING]
    assert fp32.counts == {"float32": fp32.total} and 0 < fp32.total <= len(counted)
    # the conversion adds Casts (not counted) and keeps the converter's blocked ops in fp32
    assert found.at_precision > 0.9 * found.total and not found.none_at_precision
    assert found.total == fp32.total
    assert found.text().startswith(f"fp16: {found.at_precision} of {found.total} nodes in float16")
    assert found.note.startswith("onnxruntime CPU computes")  # its CPU lacks most fp16 kernels


def test_a_zoo_torch_module_at_bf16_holds_bf16_parameters():
    entry = models.build("bert")
    found = runners.Computed.of(runners.create("torch", entry.module, "bf16").describe())
    assert found is not None
    parameters = sum(1 for p in entry.module.parameters() if p.is_floating_point())
    assert found.counts == {"bfloat16": parameters}
    assert all(
        p.dtype.is_floating_point and str(p.dtype) == "torch.float32"
        for p in entry.module.parameters()
    )  # the user's module is not changed
