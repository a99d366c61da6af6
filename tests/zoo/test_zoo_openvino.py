"""The openvino runner on every architecture of the zoo's three shelves, as a user runs it:
each export against onnxrt and against its torch twin at fp32 (the default tolerance), per
layer against onnxrt where OpenVINO's model keeps several ONNX names on one tensor (folded
constants) or has recurrent and If / Loop subgraphs, and a perturbed export that fails; and
OpenVINO's own fp16 and bf16 kernels on each at those precisions' default tolerances."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from .torchvision_ops import install

install()  # before anything imports torchvision (transformers and timm do)
pytest.importorskip("openvino")
pytest.importorskip("transformers")
pytest.importorskip("timm")
pytest.importorskip("torchvision", exc_type=ImportError)

from ..pytester_helpers import glob_escape, run  # noqa: E402
from . import models  # noqa: E402

NAMES = (*models.NAMES, "resnet18_legacy", *models.MORE, *models.MEET)
#: int8 against the float model it was quantized from (tests/zoo/test_zoo_meet.py)
TOLERANCE = {"qdq_resnet18": {"atol": 0.03, "rtol": 0.1}}
PER_LAYER = ("bert", "resnet18_legacy", "clip", "lstm", "loop")

HEADER = """
import pytest
from tests.zoo.models import build
"""

MODEL = """

@pytest.mark.compare_frameworks(model={path!r}, frameworks=["onnxrt", "openvino"])
@pytest.mark.shapes({shapes!r})
def test_{name}_onnxrt(comparison):
    pass


@pytest.mark.compare_frameworks(
    model={path!r}, frameworks=["torch", "openvino"], reference="torch",
    models={{"torch": build({base!r}).module}}, tolerance={tolerance!r},
)
@pytest.mark.shapes({shapes!r})
def test_{name}_torch(comparison):
    pass
"""

LAYERS = """

@pytest.mark.compare_frameworks(
    model={path!r}, frameworks=["onnxrt", "openvino"], outputs="all"
)
@pytest.mark.shapes({shapes!r})
def test_{name}_layers(comparison):
    pass
"""

PLANTED = """

@pytest.mark.compare_frameworks(
    model={path!r}, models={{"openvino": {planted!r}}}, frameworks=["onnxrt", "openvino"]
)
@pytest.mark.shapes({shapes!r})
def test_planted(comparison):
    pass
"""


def _planted(path, folder):
    """The export with its first 4-d weight scaled by 1.05: what a broken kernel gives."""
    model = onnx.load(str(path))
    weight = next(t for t in model.graph.initializer if len(t.dims) == 4)
    scaled = numpy_helper.to_array(weight) * np.float32(1.05)
    weight.CopyFrom(numpy_helper.from_array(scaled, weight.name))
    planted = folder / "planted.onnx"
    onnx.save(model, str(planted))
    return str(planted)


@pytest.mark.slow  # 17 exports against onnxrt, torch and per layer: 66 s on 2 cores
def test_every_architecture_against_onnxrt_and_its_torch_twin(zoo, zoo_pytester):
    source = HEADER
    for name in NAMES:
        base = name.removesuffix("_legacy")
        marked = {
            "path": str(zoo.onnx(name)),
            "name": name,
            "base": base,
            "shapes": models.build(base).shapes,
            "tolerance": TOLERANCE.get(name, {}),
        }
        source += MODEL.format(**marked)
        if name in PER_LAYER:
            source += LAYERS.format(**marked)
    resnet18 = zoo.onnx("resnet18")
    source += PLANTED.format(
        path=str(resnet18),
        planted=_planted(resnet18, zoo_pytester.path),
        shapes={"x": (2, 3, 32, 32)},
    )
    zoo_pytester.makepyfile(test_openvino_zoo=source)
    result = run(zoo_pytester, "-rfE", "--trt-report=r.json")
    text = result.stdout.str()
    assert "Traceback" not in text and "cannot read model" not in text
    result.assert_outcomes(passed=2 * len(NAMES) + len(PER_LAYER), failed=1)
    result.stdout.fnmatch_lines(
        ["FAILED *test_planted[[]openvino-fp32-bs2[]] - Failed: openvino-fp32 vs onnxrt-fp32: *"]
    )
    report = json.loads((zoo_pytester.path / "r.json").read_text())
    assert {layers["passed"] for layers in report["layers"]} == {True}


#: CLIP multiplies its cosine similarities by exp(logit scale) = 14.3 (tests/zoo/test_zoo_more.py)
LOGITS = {"atol": 0.15, "rtol": 0.15}
REDUCED_TOLERANCE = {"clip": {"logits_per_image": LOGITS, "logits_per_text": LOGITS}}
#: NMS keeps other boxes at fp16 (tests/zoo/test_zoo_more.py); a QDQ model is int8 already
REDUCED = tuple(name for name in NAMES if name not in ("fasterrcnn", "qdq_resnet18"))

REDUCED_MODEL = """

@pytest.mark.compare_frameworks(
    model={path!r}, frameworks=["onnxrt", "openvino"], tolerance={tolerance!r}
)
@pytest.mark.shapes({shapes!r})
def test_{name}(comparison):
    pass
"""


@pytest.mark.slow  # 17 exports, 16 at two precisions: 100 s on 2 cores (the exports half)
def test_every_architecture_at_openvinos_own_fp16_and_bf16(zoo, zoo_pytester):
    """Where the CPU has OpenVINO's FP16 and BF16 capabilities (else every item skips, naming
    the features it lacks). The CPU plugin compiles the QDQ resnet18 at f32 only: skipped with
    OpenVINO's words."""
    import openvino

    capabilities = openvino.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    if not {"FP16", "BF16"} <= set(capabilities):
        pytest.skip(f"this CPU's OpenVINO capabilities are {capabilities}")
    source = HEADER
    for name in (*REDUCED, "qdq_resnet18"):
        source += REDUCED_MODEL.format(
            path=str(zoo.onnx(name)),
            name=name,
            shapes=models.build(name.removesuffix("_legacy")).shapes,
            tolerance=REDUCED_TOLERANCE.get(name, {}),
        )
    zoo_pytester.makepyfile(test_reduced=source)
    result = run(zoo_pytester, "-rfEs", "--trt-precision=fp16,bf16")
    result.assert_outcomes(passed=2 * len(REDUCED), skipped=2)
    path = glob_escape(str(zoo.onnx("qdq_resnet18")))
    result.stdout.fnmatch_lines_random(
        [
            f"SKIPPED *openvino {p}: the CPU plugin cannot compile {path} at inference "
            f"precision {p.replace('fp', 'f')} (it does at f32): *"
            for p in ("fp16", "bf16")
        ]
    )
