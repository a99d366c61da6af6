"""The fp64 check on models no one here wrote (issue 37, item 1): torchvision's resnet18 and
Hugging Face's GPT-2, exported with torch.onnx.export, the ONNX target against its torch
module at fp16 (onnxrt) and bf16 (onnxref), on 20 input draws each. The model as exported
passes; the same export with one layer's weights perturbed (10% relative noise on the first
Conv / MatMul weight) fails, on every draw.

Measured (20 draws, multiplier 2): the exports are at most 1.7x as far from the float64 run as
torch at the same precision; the perturbed ones at least 4x."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from .torchvision_ops import install

install()
pytest.importorskip("transformers")
pytest.importorskip("torchvision", exc_type=ImportError)

from ..pytester_helpers import XDIST_SLOW as XDIST  # noqa: E402
from ..pytester_helpers import run  # noqa: E402
from . import models  # noqa: E402

#: (model, target, precision): onnxrt's CPU kernels have no bf16, onnx.reference's fp16 Conv
#: is slow; each pairing is a real reduced-precision run.
CASES = [
    ("resnet18", "onnxrt", "fp16"),
    ("resnet18", "onnxref", "bf16"),
    ("gpt2", "onnxrt", "fp16"),
    ("gpt2", "onnxref", "bf16"),
]
DRAWS = 20


def perturbed(path: Path, scale: float = 0.1) -> tuple[Path, str]:
    """A copy of the export whose first Conv / Gemm / MatMul weight has `scale` relative
    Gaussian noise (seeded): one broken layer. Returns the path and the weight's name."""
    model = onnx.load(str(path))
    initializers = {init.name: init for init in model.graph.initializer}
    weight = next(
        initializers[node.input[1]]
        for node in model.graph.node
        if node.op_type in ("Conv", "Gemm", "MatMul")
        and len(node.input) > 1
        and node.input[1] in initializers
    )
    values = numpy_helper.to_array(weight)
    noise = np.random.default_rng(0).standard_normal(values.shape).astype(values.dtype)
    weight.CopyFrom(numpy_helper.from_array(values * (1 + scale * noise), weight.name))
    out = path.with_name(f"{path.stem}_perturbed.onnx")
    onnx.save(model, str(out))
    return out, weight.name


def source(zoo_folder: Path) -> str:
    text = (
        "import pytest\nfrom pytest_trtcompare import Tolerance\n"
        "from tests.zoo.models import build\n"
    )
    for name, target, precision in CASES:
        entry = models.build(name)
        val_range = {"attention_mask": (1, 1)} if "attention_mask" in entry.shapes else None
        for variant in ("exported", "perturbed"):
            file = f"{name}.onnx" if variant == "exported" else f"{name}_perturbed.onnx"
            text += f"""
@pytest.mark.compare_frameworks(
    model={str(zoo_folder / file)!r},
    frameworks=["{target}", "torch"],
    reference="torch",
    models={{"torch": build("{name}").module}},
    tolerance=Tolerance(check="fp64"),
    iterations={DRAWS},
    val_range={val_range!r},
)
@pytest.mark.precisions("{precision}")
@pytest.mark.shapes({entry.shapes!r})
def test_{name}_{target}_{precision}_{variant}(comparison):
    pass
"""
    return text


@pytest.mark.slow  # a minute and more of a core: run by -m slow (the test command's budget)
@pytest.mark.parametrize("xdist", XDIST)
def test_fp64_check_passes_the_export_and_fails_one_perturbed_layer(zoo, zoo_pytester, xdist):
    for name in {name for name, _, _ in CASES}:
        perturbed(zoo.onnx(name))
    zoo_pytester.makepyfile(test_fp64=source(zoo.folder))
    result = run(zoo_pytester, "-rA", "--trt-precision=fp16,bf16", *xdist)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed") == len(CASES) and outcomes.get("failed") == len(CASES), (
        result.stdout.str()
    )
    for name, target, precision in CASES:
        test = f"test_{name}_{target}_{precision}"
        result.stdout.fnmatch_lines([f"PASSED *{test}_exported*"])
        result.stdout.fnmatch_lines([f"FAILED *{test}_perturbed*"])
    # the report: both errors, the ratio, and the elementwise figures as for any check
    result.stdout.fnmatch_lines(
        [
            "*FAILED fp64: rmse against float64 * > 2 x * (torch fp16's) + 1e-05 = * (ratio *",
            "*greatest abs error * at *",
        ]
    )
    result.stdout.fnmatch_lines(["*(torch bf16's)*"])
