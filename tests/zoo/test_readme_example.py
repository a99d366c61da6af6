"""The Hugging Face tutorial's example (docs/tutorials/hugging-face.md), pasted as a user would:
export with its script, then run its tests at every precision."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import ROOT
from .torchvision_ops import install

install()
pytest.importorskip("transformers")


def _block(name: str) -> str:
    page = (ROOT / "docs" / "tutorials" / "hugging-face.md").read_text(encoding="utf-8")
    block = page.split(f"<!-- hf-example:{name} -->")[1].split("<!-- hf-example:end -->")[0]
    return block.strip().removeprefix("```python").removesuffix("```")


def test_the_readme_example_runs_as_pasted(zoo_pytester):
    (zoo_pytester.path / "export_bert.py").write_text(_block("export"))
    (zoo_pytester.path / "test_bert.py").write_text(_block("test"))
    subprocess.run(
        [sys.executable, "export_bert.py"], cwd=zoo_pytester.path, check=True, timeout=300
    )
    result = zoo_pytester.runpytest("-v", "--trt-precision=fp32,fp16,bf16")
    result.assert_outcomes(passed=9)
    result.stdout.fnmatch_lines(["*test_bert_layer_by_layer[[]torch-bf16-bs2[]] PASSED*"])
    gated = zoo_pytester.runpytest("--trt-precision=fp16", "--trt-layers=gate", "-k", "layer")
    gated.assert_outcomes(passed=1)  # every layer of the fp16 model within 1e-2
