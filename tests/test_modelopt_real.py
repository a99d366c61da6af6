"""Issue 14 item 9: ModelOpt AutoCast with the real package, where it is installed.

It is not in the `dev` extra: `nvidia-modelopt[onnx]` 0.47 pins onnx 1.21 and installs
onnxruntime-gpu 1.24 beside onnxruntime 1.31 and cupy-cuda12x (docs/BENCHMARKS.md)."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_trtcompare import runners

from .onnx_models import layer_chain

pytest.importorskip(
    "modelopt.onnx.autocast",
    reason="nvidia-modelopt is not installed (its [onnx] extra conflicts with the dev "
    "environment's onnx and onnxruntime: see docs/BENCHMARKS.md)",
)

FEED = {"x": np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32)}


@pytest.mark.parametrize(("precision", "atol"), [("fp16", 1e-2), ("bf16", 6e-2)])
def test_autocast_converts_and_stays_near_fp32(precision, atol):
    model = layer_chain()
    target = runners.create("onnxref", model, precision)
    assert target.describe()["precision_route"].startswith(f"{precision} by ModelOpt AutoCast")
    expected = runners.create("onnxref", model).infer(FEED)["y"]
    got = target.infer(FEED)["y"]
    assert got.dtype == np.float32  # float32 I/O
    np.testing.assert_allclose(got, expected, atol=atol, rtol=0)
