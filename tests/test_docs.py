"""The docs say what is true: the README's report example is what the script prints, and
ARCHITECTURE.md cites only files and names that exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pytest_trtcompare"
ARCHITECTURE = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
#: A cited file: `engine/scan.py` (under pytest_trtcompare/), `tests/test_layout.py` or
#: `docs/gen_reference.py`.
CITED_PATH = r"(?<![\w/.])((?:[a-z_]+/)*[a-z_]+\.py)\b"
NAME = r"`([A-Za-z_][\w.]*)(?:\(\))?`"
#: A file followed by the names it defines: engine/figures.py `Worst` and `Required`.
CITATION = re.compile(CITED_PATH + rf"((?:\s*(?:,|and|or)?\s*{NAME})+)")


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


def _cited_file(path: str) -> Path:
    return ROOT / path if path.startswith(("tests/", "docs/")) else PACKAGE / path


def test_architecture_cites_only_files_that_exist():
    cited = set(re.findall(CITED_PATH, ARCHITECTURE))
    assert len(cited) > 40
    missing = sorted(path for path in cited if not _cited_file(path).is_file())
    assert not missing, f"ARCHITECTURE.md cites files that do not exist: {missing}"


def _defines(source: str, name: str) -> bool:
    """A def, a class, an assignment or a field of that name, at any depth."""
    return bool(re.search(rf"^\s*(?:def|class)\s+{name}\b|^\s*{name}\s*[:=]", source, re.M))


@pytest.mark.parametrize(
    "path, names",
    sorted({(m[0], m[1]) for m in CITATION.findall(ARCHITECTURE)}),
    ids=lambda value: value if isinstance(value, str) and value.endswith(".py") else "",
)
def test_architecture_names_are_defined_in_the_file_it_cites(path, names):
    source = _cited_file(path).read_text(encoding="utf-8")
    undefined = [
        name
        for name in re.findall(NAME, names)
        if not all(_defines(source, part) for part in name.split("."))
    ]
    assert not undefined, f"ARCHITECTURE.md: {path} does not define {undefined}"


def test_architecture_names_exist():
    """Every other `name` the text cites is a word of the package's or the tests' source."""
    sources = " ".join(
        p.read_text(encoding="utf-8")
        for folder in (PACKAGE, ROOT / "tests")
        for p in folder.rglob("*.py")
    )
    words = set(re.findall(r"\w+", sources))
    unknown = sorted(
        {name for name in re.findall(NAME, ARCHITECTURE) if name.split(".")[-1] not in words}
    )
    assert not unknown, f"ARCHITECTURE.md cites names found nowhere: {unknown}"
