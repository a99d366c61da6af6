"""Goldens inside pytest: where they live, what a session did with them, the `golden` fixture.

Under pytest-xdist each worker sends its stats through `workeroutput`; the controller merges
them, decides which goldens went unused (reports/golden_use.py: only in modules whose tests
all ran and passed, so -k, -x, `mod.py::test_x`, a shard, failures and skips never make a
golden look unused), and prints the summary. The JSON report carries what the run did with
each module, for `trtcompare merge --goldens-dir` to judge over all the shards of a suite.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from ..atomic import remove_stale_temps
from ..goldens import GoldenMeta, GoldenStats, golden_path, write_golden
from ..reports.golden_use import ModuleRun, merged, unused_goldens
from .argv import default_goldens_folder
from .options import Settings
from .settle import quoted_nodeid

WORKER_KEY = "trtcompare_goldens"
_log = logging.getLogger(__name__)


def narrowed_modules(config: pytest.Config) -> frozenset[Path] | None:
    """Modules the command line names with '::' (`mod.py::test_x`, `mod.py::TestA`): pytest
    collects only those tests of them, deselecting nothing, so their other tests' goldens
    must not look unused (nor be pruned). None: every module (`--lf` leaves the tests that
    passed last time out of the collection, deselecting nothing)."""
    if config.getoption("lf", False):
        return None
    found = set()
    for arg in config.args:
        path, separator, _ = str(arg).partition("::")
        if separator:
            found.add((Path(config.invocation_params.dir) / path).resolve())
    return frozenset(found)


class GoldenSession:
    """The session's goldens: layout, stats, unused and pruned files, the summary."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.stats = GoldenStats()
        self.modules: dict[str, ModuleRun] = {}  # by module node id ('tests/test_m.py')
        self.passed: set[str] = set()
        self.unused: list[str] = []
        self.not_judged: list[str] = []  # modules whose goldens this run cannot judge
        self.pruned: list[str] = []

    def folder(self, module_path: Path) -> Path:
        root = self.settings.goldens_root
        if root is None:
            return default_goldens_folder(module_path)
        try:
            relative = module_path.resolve().relative_to(self.settings.rootpath.resolve())
        except ValueError:
            relative = Path(module_path.name)
        return root / relative.with_suffix("")

    def show(self, path: Path | str) -> str:
        try:
            return str(Path(path).relative_to(self.settings.rootpath))
        except ValueError:
            return str(path)

    def for_item(self, item: pytest.Item) -> ItemGoldens:
        return ItemGoldens(self, item)

    # -- collection and results --------------------------------------------------------------
    def collected(
        self,
        items: list[pytest.Item],
        deselected: bool = False,
        narrowed: frozenset[Path] | None = frozenset(),
    ) -> None:
        """Items selected, or `deselected`; a module in `narrowed` (every one: None) ran in
        part."""
        in_narrowed: dict[str, bool] = {}  # by module: resolving a path is a few syscalls
        for item in items:
            name = item.nodeid.split("::")[0]
            module = self.modules.get(name)
            if module is None:  # the folder once per module, not per item
                module = self.modules[name] = ModuleRun(self.folder(item.path))
            if not deselected and narrowed is None:
                in_narrowed[name] = True
            elif not deselected and narrowed and name not in in_narrowed:
                in_narrowed[name] = Path(item.path).resolve() in narrowed
            module.narrowed |= in_narrowed.get(name, False)
            (module.deselected if deselected else module.selected).add(item.nodeid)

    def worker_payload(self) -> dict[str, Any]:
        modules = {name: m.to_json(str(m.folder)) for name, m in self.modules.items()}
        return {"stats": self.stats.to_json(), "modules": modules}

    def merge_worker(self, data: dict[str, Any]) -> None:
        self.stats.merge(data["stats"])
        workers = {name: ModuleRun.from_json(m, Path()) for name, m in data["modules"].items()}
        self.modules = merged([self.modules, workers])

    def report_section(self) -> dict[str, Any]:
        """The goldens part of the JSON report: what this run did with each module's tests
        and which goldens it used, paths relative to the rootdir, for `trtcompare merge` to
        judge unused goldens over the shards of a suite."""
        modules = {name: m.to_json(self._relative(m.folder)) for name, m in self.modules.items()}
        used = sorted(self._relative(Path(path)) for path in self.stats.used)
        return {"modules": modules, "passed": sorted(self.passed), "used": used}

    def _relative(self, path: Path) -> str:
        try:
            return path.relative_to(self.settings.rootpath).as_posix()
        except ValueError:
            return str(path)

    @property
    def shard(self) -> bool:
        """Whether this run deselected tests (a shard plugin, -k, -m): their modules'
        goldens are judged over all the runs of the suite, not here."""
        return any(m.deselected - m.selected for m in self.modules.values())

    def find_unused(self, session: pytest.Session) -> None:
        """The goldens no test used, in the modules this run can judge (reports/golden_use.py):
        a test not collected in this run (another precision or framework selected) never
        makes a golden unused."""
        for module in self.modules.values():
            remove_stale_temps(module.folder)  # left behind by killed runs
        if session.shouldstop or session.shouldfail:
            return
        self.unused, self.not_judged = unused_goldens(self.modules, self.passed, self.stats.used)
        if self.settings.prune_goldens:
            for name in self.unused:
                Path(name).unlink(missing_ok=True)
                self.pruned.append(name)
                _log.info("pruned unused golden %s", self.show(name))
        elif self.fails_session and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    FAILING_LINE = "  unused goldens fail the session (--trt-strict-goldens): exit status 1"

    @property
    def fails_session(self) -> bool:
        """Unused goldens under --strict-goldens (not pruned): the session fails."""
        settings = self.settings
        return bool(self.unused) and settings.strict_goldens and not settings.prune_goldens

    def count_failing(self, stats: dict[str, list[Any]]) -> None:
        """Unused goldens that fail the session join pytest's last line ('1 passed, 1 unused
        golden (--trt-strict-goldens)'), which turns yellow instead of green."""
        if not self.fails_session:
            return
        noun = "unused golden" if len(self.unused) == 1 else "unused goldens"
        stats.setdefault(f"{noun} (--trt-strict-goldens)", []).extend(
            pytest.TestReport(
                self.show(path), (self.show(path), None, noun), {}, "failed", None, "call"
            )
            for path in self.unused
        )

    @property
    def noteworthy(self) -> bool:
        """Something to do or done (written, unused, pruned): shown under -q and -qq too."""
        stats = self.stats
        judging = self.settings.strict_goldens or self.settings.prune_goldens
        return bool(stats.created or stats.updated or self.unused or stats.old_format) or bool(
            judging and self.not_judged
        )

    def judging_lines(self) -> list[str]:
        """With --trt-strict-goldens or --trt-prune-goldens: the modules this run could not
        judge, and where a shard's are judged."""
        if not (self.settings.strict_goldens or self.settings.prune_goldens) or not self.not_judged:
            return []
        names = sorted(self.not_judged)
        shown = ", ".join(names[:8]) + (f" (+{len(names) - 8} more)" if len(names) > 8 else "")
        lines = [
            f"  not judged ({len(names)}: a test of theirs failed, skipped, xfailed, was "
            f"deselected or not collected): {shown}"
        ]
        if self.shard:
            lines.append(
                "  (the goldens of tests this run deselected, as a shard does, are judged over "
                "all shards: trtcompare merge REPORT.json... --goldens-dir DIR --strict)"
            )
        return lines

    def summary_lines(self) -> list[str]:
        stats = self.stats
        if not (stats.created or stats.updated or stats.unchanged or stats.used or self.unused):
            return self.judging_lines()
        if self.settings.update_goldens:
            counts = (
                f"created {len(stats.created)}, updated {len(stats.updated)}, "
                f"unchanged {len(stats.unchanged)}"
            )
        elif self.settings.update_goldens_missing:
            counts = f"created {len(stats.created)}, checked {len(stats.used) - len(stats.created)}"
        else:
            counts = f"checked {len(stats.used)}"
        pruned = f" (pruned {len(self.pruned)})" if self.settings.prune_goldens else ""
        lines = [f"{counts}, unused {len(self.unused)}{pruned}"]
        for label, paths in (("created", stats.created), ("updated", stats.updated)):
            lines += [f"  {label}: {self.show(path)}" for path in sorted(paths)]
        for path in sorted(self.unused):
            verb = "pruned" if path in self.pruned else "unused"
            lines.append(f"  {verb}: {self.show(path)}")
        old = sorted(set(stats.old_format) - set(stats.updated))
        lines += [f"  old format: {self.show(path)}" for path in old]
        if old:
            lines.append(
                f"  (old .golden files; {self.settings.update_flag} rewrites them as .safetensors)"
            )
        if self.unused and not self.settings.prune_goldens:
            if self.settings.strict_goldens:
                lines.append(self.FAILING_LINE)
            lines.append("  (delete unused goldens with --trt-prune-goldens)")
        return lines + self.judging_lines()


class ItemGoldens:
    """The golden store as one test item sees it (session/golden_check.py's GoldenAccess)."""

    def __init__(self, session: GoldenSession, item: pytest.Item) -> None:
        self.session = session
        self.item = item

    @property
    def update_all(self) -> bool:
        return self.session.settings.update_goldens

    @property
    def update_missing(self) -> bool:
        return self.session.settings.update_goldens_missing

    def path(self, name: str | None = None) -> Path:
        parts = self.item.nodeid.split("::")[1:]
        test_id = ".".join(parts) or self.item.name
        return golden_path(self.session.folder(self.item.path), test_id, name)

    def regenerate_hint(self) -> str:
        settings = self.session.settings
        words = ["pytest", settings.update_flag, *settings.repeat_options, quoted_nodeid(self.item)]
        return " ".join(words)

    def compared(self, path: Path) -> None:
        self.session.stats.used.add(str(path))

    def old_format(self, path: Path, version: int) -> None:
        self.session.stats.old_format.add(str(path))

    def write(self, path: Path, iterations: Any, meta: GoldenMeta) -> str:
        """Write (or find unchanged) one golden, recording the test's id with it."""
        (outputs, inputs), *later = iterations
        outcome = write_golden(path, outputs, inputs, meta.but(test=self.item.nodeid), later=later)
        self.session.stats.record(outcome, path)
        self.session.stats.used.add(str(path))
        return outcome

    def show(self, path: Path) -> str:
        return self.session.show(path)
