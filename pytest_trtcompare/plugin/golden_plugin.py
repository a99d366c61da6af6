"""pytest glue for goldens: the `golden` fixture, --update-goldens / --prune-goldens, the summary.

Registered by plugin.py as one object per session (syrupy's style). Under pytest-xdist each
worker sends what it did through `workeroutput`; the controller merges it, decides which
goldens went unused, and prints the summary. A golden counts as unused only in a module whose
selected tests all ran and passed with nothing deselected (so -k, -x, failures and skips
never make a golden look unused).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from pathlib import Path
from typing import Any

import pytest

from ..engine.compare import ComparisonResult, OutputMismatchError, compare_outputs
from ..engine.tolerance import ToleranceSpec
from ..errors import FeedError
from ..goldens.atomic import remove_stale_temps
from ..goldens.store import (
    Golden,
    GoldenError,
    GoldenStats,
    golden_path,
    iter_goldens,
    read_golden,
    read_header,
    write_golden,
)
from ..inputs import synthetic_feed
from ..runners.base import TensorSpec, check_feed
from ..session.settings import ToleranceSettings

WORKER_KEY = "trtcompare_goldens"


class GoldenPlugin:
    def __init__(self, config: pytest.Config, settings: ToleranceSettings) -> None:
        self.config = config
        self.settings = settings
        self.update = bool(config.getoption("trtcompare_update_goldens"))
        self.prune = bool(config.getoption("trtcompare_prune_goldens"))
        option = config.getoption("trtcompare_goldens_dir")
        ini = config.getini("trtcompare_goldens_dir")
        if option:
            self.root: Path | None = (config.invocation_params.dir / option).resolve()
        elif ini:
            self.root = (config.rootpath / str(ini)).resolve()
        else:
            self.root = None
        self.stats = GoldenStats()
        self.modules: dict[str, dict[str, Any]] = {}  # module nodeid -> folder, items, partial
        self.passed: set[str] = set()
        self.unused: list[str] = []
        self.pruned: list[str] = []

    # -- layout ------------------------------------------------------------------------------
    def folder(self, module_path: Path) -> Path:
        if self.root is None:
            return module_path.parent / "goldens" / module_path.stem
        try:
            relative = module_path.resolve().relative_to(self.config.rootpath.resolve())
        except ValueError:
            relative = Path(module_path.name)
        return self.root / relative.with_suffix("")

    @staticmethod
    def test_id(item: pytest.Item) -> str:
        """The item's name within its module: 'test_x[fp16]', 'TestA.test_y'."""
        parts = item.nodeid.split("::")[1:]
        return ".".join(parts) or item.name

    # -- collection and results --------------------------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            module = item.nodeid.split("::")[0]
            state = self.modules.setdefault(
                module, {"folder": str(self.folder(item.path)), "items": [], "partial": False}
            )
            state["items"].append(item.nodeid)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        for item in items:
            module = item.nodeid.split("::")[0]
            self.modules.setdefault(
                module, {"folder": str(self.folder(item.path)), "items": [], "partial": False}
            )["partial"] = True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" and report.passed:
            self.passed.add(report.nodeid)

    @pytest.fixture
    def golden(self, request: pytest.FixtureRequest) -> GoldenFixture:
        """Saved reference outputs of this test: `golden.inputs(runner)`, `golden.check(out)`."""
        return GoldenFixture(self, request.node)

    # -- xdist -------------------------------------------------------------------------------
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[WORKER_KEY] = {"stats": self.stats.to_json(), "modules": self.modules}
            return
        self._find_unused(session)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        data = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if not data:
            return
        self.stats.merge(data["stats"])
        for module, state in data["modules"].items():
            mine = self.modules.setdefault(module, {**state, "items": []})
            mine["items"] = sorted(set(mine["items"]) | set(state["items"]))
            mine["partial"] = mine["partial"] or state["partial"]

    def _find_unused(self, session: pytest.Session) -> None:
        """A golden is unused when its module ran in full and either its own test ran without
        using it, or its test function no longer exists. A test that was not collected in
        this run (another precision or framework selected) never makes a golden unused."""
        for state in self.modules.values():
            remove_stale_temps(Path(state["folder"]))  # left behind by killed runs
        if session.shouldstop or session.shouldfail:
            return
        for state in self.modules.values():
            complete = not state["partial"] and all(i in self.passed for i in state["items"])
            if not complete or not state["items"]:
                continue
            items = set(state["items"])
            functions = {_function_id(nodeid) for nodeid in items}
            for path in iter_goldens(Path(state["folder"])):
                if str(path) in self.stats.used:
                    continue
                try:
                    test = read_header(path).get("meta", {}).get("test")
                except GoldenError:
                    continue  # a broken golden is reported by the test that reads it
                if not isinstance(test, str):
                    continue  # imported goldens name no test: never called unused
                if test in items or _function_id(test) not in functions:
                    self.unused.append(str(path))
        if self.prune:
            for name in self.unused:
                Path(name).unlink(missing_ok=True)
                self.pruned.append(name)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput"):
            return
        stats = self.stats
        if not (stats.created or stats.updated or stats.unchanged or stats.used or self.unused):
            return
        write = terminalreporter.write_line
        terminalreporter.section("goldens")
        counts = (
            f"created {len(stats.created)}, updated {len(stats.updated)}, "
            f"unchanged {len(stats.unchanged)}"
            if self.update
            else f"checked {len(stats.used)}"
        )
        pruned = f" (pruned {len(self.pruned)})" if self.prune else ""
        write(f"{counts}, unused {len(self.unused)}{pruned}")
        for label, paths in (("created", stats.created), ("updated", stats.updated)):
            for path in sorted(paths):
                write(f"  {label}: {self._show(path)}")
        for path in sorted(self.unused):
            verb = "pruned" if path in self.pruned else "unused"
            write(f"  {verb}: {self._show(path)}")
        if self.unused and not self.prune:
            write("  (delete unused goldens with --prune-goldens)")

    def write(
        self, item: pytest.Item, path: Path, outputs: Any, inputs: Any, meta: dict[str, Any]
    ) -> str | None:
        """Write (or find unchanged) one golden; the message to fail the test with when the
        write failed (the old golden is kept)."""
        full_meta = {
            "test": item.nodeid,
            "plugin_version": importlib.metadata.version("pytest-trtcompare"),
            **meta,
        }
        try:
            outcome = write_golden(path, outputs, inputs, full_meta)
        except (GoldenError, OSError) as exc:
            return f"cannot write golden {path}: {exc} (the old golden is kept)"
        self.stats.record(outcome, path)
        self.stats.used.add(str(path))
        return None

    def stored(self, path: Path, nodeid: str) -> Golden | None:
        """The golden at `path`; None when there is none, or when it is unreadable and
        --update-goldens is about to replace it. Otherwise an unreadable golden fails the
        test with the file named and the command that regenerates it."""
        if not path.exists():
            return None
        try:
            return read_golden(path)
        except GoldenError as exc:
            problem = f"{exc}\n(regenerate it with: pytest --update-goldens {nodeid})"
        if self.update:
            return None
        pytest.fail(problem, pytrace=False)

    def missing_message(self, path: Path, nodeid: str) -> str:
        return (
            f"golden {self._show(str(path))} does not exist (nothing was written); "
            f"create it with:\n  pytest --update-goldens {nodeid}"
        )

    def _show(self, path: str) -> str:
        try:
            return str(Path(path).relative_to(self.config.rootpath))
        except ValueError:
            return path


def _function_id(nodeid: str) -> str:
    """'mod.py::TestA::test_x[fp16-bs8]' -> 'mod.py::TestA::test_x'."""
    return nodeid.split("[", 1)[0]


class GoldenFixture:
    """The `golden` fixture of one test item."""

    def __init__(self, plugin: GoldenPlugin, item: pytest.Item) -> None:
        self.plugin = plugin
        self.item = item
        self._inputs: dict[str | None, dict[str, Any]] = {}
        self._meta: dict[str | None, dict[str, Any]] = {}

    def path(self, name: str | None = None) -> Path:
        folder = self.plugin.folder(self.item.path)
        try:
            return golden_path(folder, self.plugin.test_id(self.item), name)
        except GoldenError as exc:
            pytest.fail(str(exc), pytrace=False)

    def inputs(
        self,
        runner_or_specs: Any,
        *,
        name: str | None = None,
        seed: int = 1,
        val_range: Any = None,
        shapes: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The stored inputs when the golden has them and they fit; else fresh synthetic ones,
        which `check` stores with the outputs."""
        specs: list[TensorSpec] = (
            runner_or_specs.input_specs()
            if hasattr(runner_or_specs, "input_specs")
            else list(runner_or_specs)
        )
        path = self.path(name)
        feed = None
        golden = self.plugin.stored(path, self.item.nodeid)
        if golden is not None:
            try:
                check_feed(specs, golden.inputs, "golden inputs")
                feed = golden.inputs
            except FeedError:
                feed = None  # the model's inputs changed: make new ones (stored on update)
        if feed is None:
            feed = synthetic_feed(specs, seed=seed, val_range=val_range, shapes=shapes)
        self._inputs[name] = feed
        describe = getattr(runner_or_specs, "describe", None)
        self._meta[name] = {
            "runner": describe() if callable(describe) else None,
            "seed": seed,
            "shapes": {k: list(v) for k, v in (shapes or {}).items()},
            "val_range": val_range if isinstance(val_range, (list, tuple)) else None,
        }
        return {key: value.copy() for key, value in feed.items()}

    def check(
        self,
        outputs: Any,
        tolerance: ToleranceSpec = None,
        name: str | None = None,
        *,
        precision: str = "fp32",
        **fields: Any,
    ) -> ComparisonResult | None:
        """Compare with the stored golden (or write it under --update-goldens)."""
        __tracebackhide__ = True
        path = self.path(name)
        self.plugin.stats.used.add(str(path))
        table = self.plugin.settings.resolve(precision, tolerance, **fields)
        if self.plugin.update:
            meta = {
                "name": name,
                "precision": precision,
                "tolerance": dataclasses.asdict(table.default),
                **self._meta.get(name, {}),
            }
            problem = self.plugin.write(self.item, path, outputs, self._inputs.get(name, {}), meta)
            if problem:
                pytest.fail(problem, pytrace=False)
            return None
        if not path.exists():
            pytest.fail(self.plugin.missing_message(path, self.item.nodeid), pytrace=False)
        golden = self.plugin.stored(path, self.item.nodeid)
        assert golden is not None  # it exists, and unreadable ones fail outside update mode
        result = compare_outputs(outputs, golden.outputs, {"": table.default, **table.per_output})
        from .compare_plugin import record

        record(self.item, result, "golden", reference=f"golden {path.name}")
        if not result.passed:
            from .compare_plugin import failure_artifacts

            extra = failure_artifacts(self.item, result, outputs, golden.outputs)
            raise OutputMismatchError(
                f"{result.report(self.item.config.option.verbose)}\n\ngolden: {self.plugin._show(str(path))}{extra}",
                result,
            )
        return result
