"""The zoo's second shelf (issue 35): Faster R-CNN (If subgraphs, NMS kept in float32 inside
them), CLIP (ids and pixels in, eight outputs), Whisper (an encoder-decoder on float
features, dynamo export) and LLaMA exported inside a wrapper module (compared with the LLaMA
model itself), each as a user runs it: the torch twin at fp32 / fp16 / bf16, layer by layer,
the reference evaluator on the fp16 / bf16 conversion of the export, and a golden.

A detection model's output count is data-dependent: at fp16 / bf16 (rounded input, weights
and scores) NMS keeps other boxes than at fp32, and the report says so as a shape change
rather than passing or crashing. CLIP multiplies its cosine similarities by exp(logit
scale) = 14.3, so its logits get 14x the embeddings' tolerance."""

from __future__ import annotations

import json

import pytest

from .torchvision_ops import install

install()  # before anything imports torchvision (transformers and timm do)
pytest.importorskip("transformers")
pytest.importorskip("torchvision", exc_type=ImportError)

from ..pytester_helpers import XDIST_SLOW as XDIST  # noqa: E402
from ..pytester_helpers import run  # noqa: E402
from . import models  # noqa: E402

ENTRIES = {name: models.build(name) for name in models.MORE}
LOGITS = {"atol": 0.15, "rtol": 0.15}  # 14.3 x the embeddings' fp16 / bf16 bound
TOLERANCE = {"clip": {"logits_per_image": LOGITS, "logits_per_text": LOGITS}}

SOURCE = """
import pytest
from tests.zoo.models import build

MODEL = {path!r}
TWIN = {{"torch": build({name!r}).module}}
MARKED = dict(model=MODEL, tolerance={tolerance!r})


@pytest.mark.compare_frameworks(frameworks=["onnxrt", "torch"], models=TWIN, **MARKED)
@pytest.mark.shapes({shapes!r})
def test_twin(comparison):
    pass


@pytest.mark.precisions("fp32")
@pytest.mark.compare_frameworks(
    frameworks=["onnxrt", "torch"], models=TWIN, outputs="all", **MARKED
)
@pytest.mark.shapes({shapes!r})
def test_layers(comparison):
    pass


@pytest.mark.compare_frameworks(frameworks=["onnxrt", "onnxref"], **MARKED)
@pytest.mark.shapes({shapes!r})
def test_converted(comparison):
    pass


@pytest.mark.precisions("fp32")
@pytest.mark.compare_frameworks(
    frameworks=["onnxrt", "torch"], models=TWIN, golden=True, **MARKED
)
@pytest.mark.shapes({shapes!r})
def test_golden(comparison):
    pass
"""

#: per model: (torch modules compared with an export tensor, modules without one) per layer
LAYERS = {
    "fasterrcnn": (177, 22),  # each of the RPN head's three calls of conv.0 is its own layer
    "clip": (55, 4),
    "whisper": (56, 1),
    "wrapped_llama": (25, 2),  # through the wrapper's prefix `model`
}


#: Faster R-CNN's run takes 1.5 minutes of a core: run by -m slow (the test command's budget)
EVERY_FEATURE = [
    pytest.param(name, marks=(pytest.mark.slow,) if name == "fasterrcnn" else ())
    for name in models.MORE
]


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize("name", EVERY_FEATURE)
def test_architectures_users_bring_through_every_feature(zoo, zoo_pytester, name, xdist):
    entry = ENTRIES[name]
    source = SOURCE.format(
        path=str(zoo.onnx(name)),
        name=name,
        shapes=entry.shapes,
        tolerance=TOLERANCE.get(name, {}),
    )
    zoo_pytester.makepyfile(**{f"test_{name}": source})
    options = ("-rfE", "--trt-precision=fp32,fp16,bf16", "--trt-report=r.json", *xdist)
    result = run(zoo_pytester, *options, "--trt-update-goldens")
    text = result.stdout.str()
    assert "Traceback" not in text and "cannot load model" not in text
    if name == "fasterrcnn":  # NMS keeps other boxes at fp16 / bf16: named, never a pass
        result.assert_outcomes(passed=5, failed=4)  # the golden: onnxrt's and torch's
        for item in ("test_twin[[]torch-{}-bs1[]]", "test_converted[[]onnxref-{}-bs1[]]"):
            for precision in ("fp16", "bf16"):
                result.stdout.fnmatch_lines([f"FAILED *{item.format(precision)} - Failed: *boxes*"])
        result.stdout.fnmatch_lines(["*onnxref-fp16 vs onnxrt-fp32: boxes: shape (*, 4) differs*"])
    else:
        result.assert_outcomes(passed=9)
    report = json.loads((zoo_pytester.path / "r.json").read_text())
    (layers,) = report["layers"]
    assert layers["passed"] and (layers["compared"], layers["unmatched"]) == LAYERS[name]
    run(zoo_pytester, "-k", "test_golden", *xdist).assert_outcomes(passed=2)
