"""Which goldens no test used: judged for one run at its end (plugin/goldens.py), or for the
shards of one suite from their JSON reports (`trtcompare merge --goldens-dir`).

A module's goldens are judged only where every test of it is known and ran and passed: a
test deselected (by -k, -m or a shard plugin such as pytest-split) counts only once a run
ran it; a module whose tests the command line named one by one (`mod.py::test_x`) tells
nothing about its other tests. Then a golden is unused when its own test ran without using
it, or its test function no longer exists; a golden that names no test (imported) never is.
Tests are told by their id within their module (`TestA::test_x[fp16]`), which a golden's
recorded node id keeps whatever the rootdir it was written under.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..goldens import GoldenError, iter_goldens, read_header


@dataclass
class ModuleRun:
    """What a run did with one test module."""

    folder: Path  # the module's goldens folder
    selected: set[str] = field(default_factory=set)  # node ids collected and run
    deselected: set[str] = field(default_factory=set)  # node ids collected, not run
    narrowed: bool = False  # the command line named some of its tests (mod.py::test_x)

    def to_json(self, folder: str) -> dict[str, Any]:
        return {
            "folder": folder,
            "selected": sorted(self.selected),
            "deselected": sorted(self.deselected),
            "narrowed": self.narrowed,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], root: Path) -> ModuleRun:
        return cls(
            root / data["folder"],
            set(data["selected"]),
            set(data["deselected"]),
            bool(data["narrowed"]),
        )


def merged(runs: Iterable[Mapping[str, ModuleRun]]) -> dict[str, ModuleRun]:
    """The runs of several shards as one: tests run anywhere, deselected anywhere; narrowed
    only where every run narrowed it."""
    modules: dict[str, ModuleRun] = {}
    for run in runs:
        for name, module in run.items():
            mine = modules.setdefault(name, ModuleRun(module.folder, narrowed=module.narrowed))
            mine.selected |= module.selected
            mine.deselected |= module.deselected
            mine.narrowed = mine.narrowed and module.narrowed
    return modules


def unused_goldens(
    modules: Mapping[str, ModuleRun], passed: set[str], used: set[str]
) -> tuple[list[str], list[str]]:
    """(the unused goldens of the judged modules, the modules not judged), paths as str."""
    unused, not_judged = [], []
    for name, module in modules.items():
        # its goldens are judged where every test of it is known, run and passed
        known = module.deselected <= module.selected <= passed
        if module.narrowed or not module.selected or not known:
            not_judged.append(name)
            continue
        ran = {_in_module(nodeid) for nodeid in module.selected}
        functions = {_function_id(test) for test in ran}
        for path in iter_goldens(module.folder):
            if str(path) in used:
                continue
            try:
                test = read_header(path).get("meta", {}).get("test")
            except GoldenError:
                continue  # a broken golden is reported by the test that reads it
            if not isinstance(test, str):
                continue  # imported goldens name no test: never called unused
            test = _in_module(test)
            if test in ran or _function_id(test) not in functions:
                unused.append(str(path))
    return unused, not_judged


def _in_module(nodeid: str) -> str:
    """'tests/mod.py::TestA::test_x[fp16]' -> 'TestA::test_x[fp16]': a test within its
    module's goldens folder, the same whatever the rootdir (its node id's path is not)."""
    return nodeid.split("::", 1)[-1]


def _function_id(test: str) -> str:
    """'TestA::test_x[fp16-bs8]' -> 'TestA::test_x'."""
    return test.split("[", 1)[0]
