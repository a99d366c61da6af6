"""Writes tests/goldens/test_model/test_resnet[onnxrt-fp32].safetensors, the golden that
docs/GOLDEN_FORMAT.md reads: a golden fixture's test of the tutorials' one-layer model, run
once with --trt-update-goldens (the model stands in for a ResNet; the path is the point)."""

import runpy
import subprocess
import sys
from pathlib import Path

TEST = """
import pytest


@pytest.mark.parametrize("runner", ["onnxrt-fp32"])
def test_resnet(golden, runners, runner):
    onnxrt = runners.onnxrt("model.onnx")
    golden.check(onnxrt.infer(golden.inputs(onnxrt, shapes={"x": (1, 4)})))
"""

runpy.run_path(str(Path(__file__).with_name("make_model.py")))
Path("tests").mkdir(exist_ok=True)
Path("tests/test_model.py").write_text(TEST, encoding="utf-8")
command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
subprocess.run([*command, "--trt-update-goldens"], check=True)
