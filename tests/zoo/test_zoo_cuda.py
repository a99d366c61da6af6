"""The zoo with torch on a CUDA device against onnxrt (issue 22, item 10): every model at
fp32 (TF32 off), tf32, fp16 and bf16, in-process and isolated, and per layer. Skips where
torch sees no CUDA device. With TRTCOMPARE_ZOO_REPORT=<folder> each run's accuracy report
(JSON) is copied there; docs/ZOO_CUDA.md records a run."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from .torchvision_ops import install

install()
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("timm")

from ..pytester_helpers import run  # noqa: E402
from . import models  # noqa: E402
from .test_zoo import HEADER, marked, twin  # noqa: E402

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason=f"torch {torch.__version__} sees no CUDA device"
)

CUDA_TWIN = '{"torch": {"device": "cuda"}}'


def _keep(pytester: pytest.Pytester, name: str) -> dict:
    report = json.loads((pytester.path / "r.json").read_text())
    folder = os.environ.get("TRTCOMPARE_ZOO_REPORT")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy(pytester.path / "r.json", Path(folder) / f"{name}.json")
    return report


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
def test_cuda_twins_at_every_precision(zoo, zoo_pytester, isolate):
    source = HEADER.format(zoo=str(zoo.folder))
    for name in models.NAMES:
        zoo.onnx(name)
        source += marked(
            name, "", frameworks='["onnxrt", "torch"]', models=twin(name), options=CUDA_TWIN
        )
    zoo_pytester.makepyfile(test_cuda=source)
    args = ["-rA", "--trt-precision=fp32,tf32,fp16,bf16", "--trt-report=r.json"]
    result = run(zoo_pytester, *args, *(["--trt-isolate"] if isolate else []))
    result.assert_outcomes(passed=len(models.NAMES) * 4)
    report = _keep(zoo_pytester, f"twins-{'isolated' if isolate else 'in-process'}")
    bf16 = [d for d in report["runners"].values() if d["runner"] == "torch-bf16"]
    assert bf16  # one per distinct description (a model's twin may describe alike)
    for described in bf16:
        assert described["device"].startswith("cuda")
        assert described.get("isolated", False) is isolate


def test_cuda_twins_layer_by_layer(zoo, zoo_pytester):
    source = HEADER.format(zoo=str(zoo.folder))
    for name in models.NAMES:
        zoo.onnx(name)
        source += marked(
            name,
            "",
            frameworks='["onnxrt", "torch"]',
            models=twin(name),
            options=CUDA_TWIN,
            outputs='"all"',
            layers='"report"',
        )
    zoo_pytester.makepyfile(test_cuda_layers=source)
    result = run(zoo_pytester, "-rA", "--trt-precision=fp32,fp16", "--trt-report=r.json")
    result.assert_outcomes(passed=len(models.NAMES) * 2)
    _keep(zoo_pytester, "layers")
