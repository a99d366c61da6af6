"""The options and ini keys this plugin adds. Their names and deprecated aliases: names.py;
the guard against a path option written with a space: split_paths.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ..session import option_table
from ..session.option_table import Option, ini_defaults
from . import names


def _argparse_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """A declared parser as argparse takes one: its ValueError is the option's error."""

    def parsed(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parsed


def _flag_attributes(declared: Option) -> dict[str, Any]:
    attrs: dict[str, Any] = {"dest": declared.attribute, "help": declared.help}
    if declared.ini is not None and declared.ini not in declared.help:
        attrs["help"] += f" (ini: {declared.ini})"
    if declared.metavar:
        attrs["metavar"] = declared.metavar
    if declared.parse is not None:
        attrs["type"] = _argparse_type(declared.parse)
    elif declared.choices is not None:
        attrs["choices"] = declared.choices
    if declared.kind in ("int", "float"):
        attrs["type"] = {"int": int, "float": float}[declared.kind]
    if declared.kind == "append":
        attrs["action"] = "append"
    if declared.renamed:  # the deprecated alias noted in the help and on use
        attrs["help"] += names.deprecated_note(declared.flag or "")
        attrs["action"] = names.NamedOption  # stores the value; a flag's True (names.flag)
        return names.flag(**attrs) if declared.kind == "flag" else attrs
    if declared.kind == "flag":
        attrs["action"] = "store_true"
    return attrs


def add_options(parser: pytest.Parser) -> None:
    """Every flag and ini key of session/option_table.py `OPTIONS`."""
    group = parser.getgroup("trtcompare", "accuracy comparison (pytest-trtcompare)")
    for declared in option_table.OPTIONS:
        if declared.flag == names.UPDATE_GOLDENS:  # its alias is claimed late: names.py
            names.add_update_goldens(group, alias=False)
        elif declared.flag is not None:
            group.addoption(*names.names(declared.flag), **_flag_attributes(declared))
    defaults = ini_defaults()
    for declared in option_table.OPTIONS:
        if declared.ini is not None:
            default = defaults[declared.ini]  # a copy of a list: addinivalue_line appends
            parser.addini(
                declared.ini,
                declared.ini_help,
                type=declared.ini_type,  # type: ignore[arg-type]
                default=list(default) if isinstance(default, list) else default,
            )


def default_goldens_folder(module_path: Path) -> Path:
    """Where a test module's goldens live without --trt-goldens-dir (and its ini key):
    `<module dir>/goldens/<module name>`."""
    return module_path.parent / "goldens" / module_path.stem
