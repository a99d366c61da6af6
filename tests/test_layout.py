"""The package's layers, read from its source with `ast` (ARCHITECTURE.md): each module imports
only its own layer and the layers below; engine/, goldens/ and runners/ only through their
public names; no import cycle between modules; pytest only in the glue, frameworks only in
runners/ (and torch in the engine's torch path), small glue modules; tests use public names
only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_trtcompare"
TESTS = Path(__file__).resolve().parent
FRAMEWORKS = {"onnxruntime", "torch", "tensorrt", "cuda", "pycuda", "modelopt"}
#: The engine's torch path (issue 36): torch tensors compared on their device by torch.
TORCH_PATH = ("pytest_trtcompare.engine.tensors", "pytest_trtcompare.engine.staging")
#: The pytest glue; cli/ is the console script (it reports, it never runs pytest).
PYTEST_LAYER = ("plugin",)

#: The layers, lowest first; a layer is a tuple of groups (a package's folder, a top-level
#: module, "" for pytest_trtcompare/__init__.py). A module imports its own group and the
#: groups of lower layers; the groups of one layer do not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "atomic", "progress", "vocabulary"),  # the base: nothing else
    ("engine",),  # compare: numpy, and torch on a tensor's device (engine/tensors.py)
    ("goldens", "runners"),  # the golden store; one module per framework
    ("inputs",),  # specs -> arrays (runner specs, saved inputs read by goldens/)
    ("session",),  # what one comparison does, without pytest
    ("reports",),  # a run's accuracy records: summary, JSON report, merge of shards
    ("plugin", "cli"),  # the pytest glue; the console script
    ("", "compare", "debug"),  # faces: documented import paths that only re-export
)
#: Imported from outside their folder only by their package's own names (its __init__.py).
LIBRARIES = ("engine", "goldens", "runners")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _source(name: str) -> tuple[str, ast.Module]:
    """The module's package (what its relative imports start from) and its syntax tree."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return package, ast.parse(path.read_text())


def _from_module(node: ast.ImportFrom, package: str) -> str:
    """The module a `from X import ...` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(name: str) -> set[str]:
    """Every module `name` imports: top level, inside functions and under TYPE_CHECKING."""
    package, tree = _source(name)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _from_module(node, package)
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
    allowed = {"torch"} if name in TORCH_PATH else set()
    assert not imported & FRAMEWORKS - allowed, f"{name} imports {imported & FRAMEWORKS}"


def test_module_names_are_unique_across_folders():
    """A module is found by its name alone (ARCHITECTURE.md says why compare.py is two)."""
    names = [path.name for path in PACKAGE.rglob("*.py") if path.name != "__init__.py"]
    repeated = sorted({name for name in names if names.count(name) > 1})
    assert repeated == ["compare.py"], repeated


#: Where a runner's name may be written outside runners/ (as a string), and why: the
#: library a torch tensor or an onnxruntime SessionOptions comes from (a module, not a runner).
NAMES_OF_LIBRARIES = {"pytest_trtcompare.engine.arrays", "pytest_trtcompare.session.runs"}


def _runner_names() -> set[str]:
    from pytest_trtcompare import runners

    return set(runners.known_runners()) | set(runners.FRAMEWORK_ALIASES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_runners_are_named_only_in_runners(name):
    """What a runner can do is its class's declaration (runners/base.py `Runner`): no module
    outside runners/ lists or tests a framework by name (the documented defaults are
    runners/registry.py's DEFAULT_REFERENCE and the like)."""
    if name.startswith("pytest_trtcompare.runners") or name in NAMES_OF_LIBRARIES:
        return
    names = _runner_names()
    written = {
        node.value
        for node in ast.walk(_source(name)[1])
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    }
    assert not written, f"{name} names runners {sorted(written)}: ask their capabilities"


@pytest.mark.parametrize(
    "name", sorted(n for n in MODULES if n.split(".")[1:2] in ([p] for p in PYTEST_LAYER))
)
def test_glue_modules_are_small(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= 300, f"{name}: {lines} lines"


def _group(name: str) -> str:
    return (name.split(".")[1:2] or [""])[0]


RANK = {group: rank for rank, layer in enumerate(LAYERS) for group in layer}


def test_every_module_has_a_layer():
    assert {_group(name) for name in MODULES} <= RANK.keys()


def _upward(name: str) -> list[str]:
    group = _group(name)
    return sorted(
        other
        for other in GRAPH[name]
        if _group(other) != group and RANK[_group(other)] >= RANK[group]
    )


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_run_down_the_layers(name):
    assert not _upward(name), f"{name} imports its own layer's or a higher layer's {_upward(name)}"


def test_the_layer_rule_finds_a_planted_upward_import(monkeypatch):
    planted = {**GRAPH, "pytest_trtcompare.goldens.interop": {"pytest_trtcompare.inputs"}}
    monkeypatch.setattr(f"{__name__}.GRAPH", planted)
    assert _upward("pytest_trtcompare.goldens.interop") == ["pytest_trtcompare.inputs"]
    planted["pytest_trtcompare.runners.trt"] = {"pytest_trtcompare.goldens"}  # a sibling
    assert _upward("pytest_trtcompare.runners.trt") == ["pytest_trtcompare.goldens"]


def _through_submodules(name: str) -> list[str]:
    group = _group(name)
    return sorted(
        other
        for other in GRAPH[name]
        if _group(other) in LIBRARIES
        and _group(other) != group
        and other != f"pytest_trtcompare.{_group(other)}"
    )


@pytest.mark.parametrize("name", sorted(MODULES))
def test_libraries_are_imported_by_their_public_names(name):
    """`from ..engine import compare_outputs`, never `from ..engine.compare import ...`."""
    assert not _through_submodules(name), (
        f"{name} imports {_through_submodules(name)}: import from the package instead "
        "(add the name to its __init__.py)"
    )


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_name_crosses_a_folder(name):
    package, tree = _source(name)
    crossing = [
        f"{module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (module := _from_module(node, package)).startswith("pytest_trtcompare")
        and _group(module) != _group(name)
        for alias in node.names
        if _private(alias.name) or any(map(_private, module.split(".")))
    ]
    assert not crossing, f"{name} imports private {crossing}"


@pytest.mark.parametrize("package", sorted(n for n in MODULES if MODULES[n].name == "__init__.py"))
def test_no_package_name_hides_a_submodule(package):
    """`from pytest_trtcompare.engine import scan` stays the module, never a re-exported name."""
    submodules = {n.rpartition(".")[2] for n in MODULES if n.rpartition(".")[0] == package}
    bound = set()
    for node in _source(package)[1].body:
        if isinstance(node, ast.ImportFrom) and node.module:  # not `from . import x`
            bound |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Assign):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
    assert not bound & submodules, f"{package} binds {bound & submodules} over its submodules"


def _private_uses(path: Path) -> list[str]:
    """Private names of pytest_trtcompare a test file uses: imported, read as an attribute of
    something it imported from the package, or named in a string (monkeypatch targets)."""
    tree = ast.parse(path.read_text())
    ours: set[str] = set()
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_trtcompare"):
            ours |= {alias.asname or alias.name for alias in node.names}
            uses += [
                f"{node.lineno}: from {node.module} import {alias.name}"
                for alias in node.names
                if _private(alias.name) or any(map(_private, node.module.split(".")))
            ]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pytest_trtcompare"):
                    ours.add(alias.asname or alias.name.split(".")[0])
                    if any(map(_private, alias.name.split("."))):
                        uses.append(f"{node.lineno}: import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in ours:
                uses.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for dotted in re.findall(r"pytest_trtcompare(?:\.\w+)+", node.value):
                if any(map(_private, dotted.split("."))):
                    uses.append(f"{node.lineno}: {dotted!r}")
    return uses


@pytest.mark.parametrize(
    "path", sorted(TESTS.rglob("*.py")), ids=lambda p: str(p.relative_to(TESTS))
)
def test_tests_use_public_names_only(path):
    """No `_name` of pytest_trtcompare in tests: what a test needs is a public name."""
    assert not _private_uses(path), f"{path.name} uses private names: {_private_uses(path)}"


def test_the_private_name_finder_finds_planted_uses(tmp_path):
    planted = tmp_path / "test_planted.py"
    private = "_hidden"  # so that this file's own strings name nothing private
    planted.write_text(
        "from pytest_trtcompare.runners import trt_io\n"
        f"from pytest_trtcompare.engine.tolerance import {private}\n"
        f"trt_io.{private}\n"
        f"monkeypatch.setattr('pytest_trtcompare.goldens.store.{private}', None)\n"
        f"from pytest_trtcompare.engine import accumulators as {private}\n"  # a private alias: fine
    )
    assert [use.split(":")[0] for use in _private_uses(planted)] == ["2", "3", "4"]
