"""The reference pages made from the code (docs/gen_reference.py) are what it makes now, and
say what the code holds: each option's flag and ini key, each `trtcompare` command, each
fixture."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from pytest_trtcompare.cli import build_parser
from pytest_trtcompare.plugin.names import MARKERS
from pytest_trtcompare.session.option_table import OPTIONS

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
assert _spec is not None and _spec.loader is not None
gen_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_reference)


def _page(name: str) -> str:
    return (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(gen_reference.PAGES))
def test_the_committed_page_is_what_the_generator_makes(name):
    if name == "cli-help.md" and sys.version_info[:2] != (3, 11):
        pytest.skip("argparse lays out --help differently across Pythons; made on 3.11, CI's")
    assert _page(name) == gen_reference.PAGES[name](), (
        f"docs/reference/{name} is out of date: run python docs/gen_reference.py"
    )


@pytest.mark.parametrize("declared", OPTIONS, ids=lambda o: o.name)
def test_the_options_page_has_a_row_per_option(declared):
    rows = [line for line in _page("options.md").splitlines() if line.startswith("| ")]
    row = next(r for r in rows if gen_reference._cell(declared.help) in r)
    for name in (declared.flag, declared.ini):
        assert name is None or f"`{name}`" in row


def test_the_help_page_has_every_command():
    page = _page("cli-help.md")
    commands = gen_reference._subcommands(build_parser())
    assert len(commands) >= 10
    for name in commands:
        assert f"## `trtcompare {name}`" in page
        assert f"usage: trtcompare {name} " in page


def test_the_markers_and_fixtures_pages_name_each_one():
    assert all(f"## `{name}`" in _page("markers.md") for name in MARKERS)
    fixtures = _page("fixtures.md")
    for name in ("compare", "runners", "golden", "comparison", "trt_precision", "input_shapes"):
        assert f"## `{name}`" in fixtures


def test_the_api_page_shows_every_public_name():
    import pytest_trtcompare

    page = _page("api.md")
    shown = set(re.findall(r"^::: pytest_trtcompare\.(\w+)$", page, re.M))
    assert shown == set(pytest_trtcompare.__all__) - {"__version__"}
