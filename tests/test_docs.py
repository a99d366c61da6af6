"""The README shows real output: the report example must match what the script prints."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_report_example_is_current():
    printed = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "examples" / "fp16_logits_report.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.rstrip("\n")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- report-example:start -->")[1].split("<!-- report-example:end -->")[0]
    assert block.strip() == f"```text\n{printed}\n```"


def test_readme_opens_with_the_two_commands():
    head = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:15]
    assert any("pytest conftest_examples" in line for line in head)
    assert any(line.endswith(".venv/bin/pytest -n auto") for line in head)
