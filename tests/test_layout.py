"""The package's layers, read from its source with `ast` (ARCHITECTURE.md): no import cycle
between modules, pytest only in the glue, frameworks only in runners/, small glue modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_trtcompare"
FRAMEWORKS = {"onnxruntime", "torch", "tensorrt", "cuda", "pycuda", "modelopt"}
#: The pytest glue; cli.py is the console script (it reports, it never runs pytest).
PYTEST_LAYER = ("plugin",)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str) -> set[str]:
    """Every module `name` imports: top level, inside functions and under TYPE_CHECKING."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # `from . import x` imports the submodule x, not the package's own names
            submodules = {f"{module}.{a.name}" for a in node.names} & MODULES.keys()
            found |= submodules
            if len(submodules) < len(node.names):
                found.add(module)
    return found


GRAPH = {name: {m for m in _imports(name) if m in MODULES and m != name} for name in MODULES}


def _cycle() -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(name: str) -> list[str] | None:
        state[name] = 1
        stack.append(name)
        for other in sorted(GRAPH[name]):
            if state.get(other) == 1:
                return [*stack[stack.index(other) :], other]
            if other not in state and (found := visit(other)):
                return found
        stack.pop()
        state[name] = 2
        return None

    for name in sorted(GRAPH):
        if name not in state and (found := visit(name)):
            return found
    return None


def test_no_import_cycle_between_modules():
    assert _cycle() is None, " -> ".join(_cycle() or [])


def test_the_cycle_finder_finds_a_planted_cycle(monkeypatch):
    planted = {**GRAPH, "pytest_trtcompare.engine.report": {"pytest_trtcompare.engine.results"}}
    monkeypatch.setattr(f"{__name__}.GRAPH", planted)
    cycle = _cycle()
    assert cycle is not None and cycle[0] == cycle[-1]
    assert {"pytest_trtcompare.engine.report", "pytest_trtcompare.engine.results"} <= set(cycle)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_pytest_only_in_the_glue(name):
    glue = name.split(".")[1:2] in ([layer] for layer in PYTEST_LAYER)
    if not glue:
        assert "pytest" not in _imports(name), f"{name} imports pytest below the glue"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_frameworks_only_in_runners(name):
    if name.startswith("pytest_trtcompare.runners"):
        return
    imported = {module.split(".")[0] for module in _imports(name)}
    assert not imported & FRAMEWORKS, f"{name} imports {imported & FRAMEWORKS}"


@pytest.mark.parametrize(
    "name", sorted(n for n in MODULES if n.split(".")[1:2] in ([p] for p in PYTEST_LAYER))
)
def test_glue_modules_are_small(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= 300, f"{name}: {lines} lines"
