"""Options and ini keys of the JSON report beyond its path, registered with the plugin at
every pytest run (so this module imports nothing heavy)."""

from __future__ import annotations

from typing import Any

import pytest

#: The ini keys, and their defaults (a run that sets one puts the plugin to work).
INI_DEFAULTS: dict[str, Any] = {"trtcompare_suite": ""}


def add_options(group: Any, parser: pytest.Parser) -> None:
    parser.addini(
        "trtcompare_suite",
        "the suite's name in --trt-report files, which `trtcompare merge` checks (default: "
        "the rootdir's folder name)",
        default=INI_DEFAULTS["trtcompare_suite"],
    )


def suite_name(config: pytest.Config) -> str:
    """ini trtcompare_suite, else the rootdir's folder name: the same on every machine and
    shard of one suite (a checkout folder that differs, as Jenkins' `suite@2`, needs the ini)."""
    return str(config.getini("trtcompare_suite")).strip() or config.rootpath.name
