"""pytest glue for compare_frameworks tests, precision / shape parametrization, the runners
fixture, the accuracy summary and the JSON report. Registered by plugin.py per session.

Items: one per target x precision x shape set, ids like `test_resnet[trt-fp16-bs8]`. The
comparison runs at setup (a runner that cannot run here skips; a broken model errors) and a
mismatch fails the test's call phase with the report, before the body's own checks.
Accuracy records ride on `item.user_properties`, so the xdist controller and JUnit XML get
them from the reports; runner build counts come from workers through `workeroutput`.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.metadata
import json
import os
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from ..engine.compare import ComparisonResult, OutputMismatchError
from ..errors import TrtCompareError
from ..runners import Runner
from ..runners.isolated import RunnerCrashed
from ..session.cases import Case, CaseOutcome, CaseRunner, CompareSpec, expand
from ..session.settings import ToleranceSettings, parse_precisions
from . import summary

CASE_FIXTURE = "trtcompare_case"
WORKER_KEY = "trtcompare_builds"
_OUTCOME = pytest.StashKey[CaseOutcome]()


def record(
    item: pytest.Item,
    result: ComparisonResult,
    source: str,
    target: str | None = None,
    reference: str | None = None,
) -> None:
    """Add a comparison's records to the item (the summary, the JSON report, JUnit)."""
    records = summary.records(result, _display_id(item), source, target, reference)
    item.user_properties.extend(summary.to_properties(records))


_ARTIFACTS = pytest.StashKey[list[Path]]()


def artifacts_root(config: pytest.Config) -> Path:
    """--trtcompare-artifacts, else ini trtcompare_artifacts, else under pytest's basetemp."""
    option = config.getoption("trtcompare_artifacts")
    if option:
        return Path(config.invocation_params.dir / str(option)).resolve()
    ini = config.getini("trtcompare_artifacts")
    if ini:
        return (config.rootpath / str(ini)).resolve()
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is not None:
        return Path(factory.getbasetemp()) / "trtcompare-artifacts"
    return Path(config.rootpath) / ".trtcompare-artifacts"


def failure_artifacts(
    item: pytest.Item, result: ComparisonResult, actual: Any, expected: Any
) -> str:
    """Write a failing comparison's arrays and pictures; the text to add to its report."""
    from .. import artifacts

    folder = artifacts.folder_for(artifacts_root(item.config), item.nodeid)
    try:
        made = artifacts.write(result, actual, expected, folder)
    except Exception as exc:  # pictures must never hide the comparison's own verdict
        return f"\n\n(artifacts could not be written to {folder}: {exc})"
    if made is None:
        return ""
    item.stash.setdefault(_ARTIFACTS, []).extend(made.files)
    return "\n\n" + made.describe()


def _display_id(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[-1] if "::" in item.nodeid else item.nodeid


class RunnersFixture:
    """The `runners` fixture: runners built once per session, keyed by model and options."""

    def __init__(self, case_runner: CaseRunner) -> None:
        self._cache = case_runner.runners

    def create(
        self, name: str, model: Any = None, precision: str = "fp32", **options: Any
    ) -> Runner:
        return self._cache.get(name, model, precision, **options)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda model=None, precision="fp32", **options: self.create(
            name, model, precision, **options
        )

    @property
    def builds(self) -> dict[str, dict[str, int]]:
        """{"onnxrt-fp32": {"builds": 3, "models": 3}, ...}: equal counts = once per model."""
        return {
            f"{name}-{precision}": {
                "builds": n,
                "models": len(self._cache.models[(name, precision)]),
            }
            for (name, precision), n in self._cache.builds.items()
        }


class ComparePlugin:
    def __init__(
        self, config: pytest.Config, settings: ToleranceSettings, precisions: tuple[str, ...]
    ) -> None:
        self.config = config
        self.precisions = precisions
        only = config.getoption("trtcompare_frameworks")
        self.only = tuple(f.strip() for f in only.split(",")) if only else None
        engine_cache = config.getoption("trt_engine_cache")
        if engine_cache:
            engine_cache = str((config.invocation_params.dir / engine_cache).resolve())
        elif getattr(config, "cache", None) is not None:
            engine_cache = str(config.cache.mkdir("trtcompare-engines"))
        self.cases = CaseRunner(
            settings, engine_cache, isolate=bool(config.getoption("trtcompare_isolate"))
        )
        self.records: list[summary.Record] = []
        self.descriptions: dict[str, Any] = {}
        self.builds: dict[str, dict[str, dict[str, int]]] = {}

    # -- parametrization ---------------------------------------------------------------------
    def _test_precisions(self, definition: Any) -> list[str]:
        marker = definition.get_closest_marker("precisions")
        if marker is None:
            return list(self.precisions)
        try:
            wanted = parse_precisions(",".join(marker.args))
        except ValueError as exc:
            pytest.fail(f"{definition.nodeid}: @pytest.mark.precisions: {exc}", pytrace=False)
        return [p for p in self.precisions if p in wanted]

    @staticmethod
    def _shape_sets(definition: Any) -> tuple[list[dict[str, Any]], list[str] | None]:
        marker = definition.get_closest_marker("shapes")
        if marker is None:
            return [], None
        sets = [dict(s) for s in marker.args]
        ids = marker.kwargs.get("ids")
        return sets, (list(ids) if ids else None)

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        definition = metafunc.definition
        marker = definition.get_closest_marker("compare_frameworks")
        precisions = self._test_precisions(definition)
        sets, shape_ids = self._shape_sets(definition)
        if marker is not None:
            try:
                spec = CompareSpec.from_marker(marker.kwargs, definition.nodeid)
            except TrtCompareError as exc:
                problem = str(exc)
            else:
                problem = ""
            if problem:  # a collection error naming the test, without a traceback
                pytest.fail(problem, pytrace=False)
            cases = expand(spec, precisions, sets, shape_ids, self.only)
            if CASE_FIXTURE not in metafunc.fixturenames:
                metafunc.fixturenames.append(CASE_FIXTURE)
            metafunc.parametrize(
                CASE_FIXTURE, [(spec, c) for c in cases], ids=[c.id for c in cases], indirect=True
            )
            return
        if "trt_precision" in metafunc.fixturenames:
            metafunc.parametrize("trt_precision", precisions, ids=precisions)
        if "input_shapes" in metafunc.fixturenames and sets:
            from ..session.cases import shape_set_ids

            metafunc.parametrize("input_shapes", sets, ids=shape_ids or shape_set_ids(sets))

    @pytest.hookimpl(tryfirst=True)  # before xdist reads xdist_group to form the groups
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Items of one model share an xdist_group: --dist loadgroup keeps its runners on one
        worker, so each is built once."""
        for item in items:
            callspec = getattr(item, "callspec", None)
            param = callspec.params.get(CASE_FIXTURE) if callspec else None
            if param is None:
                continue
            # pytest prunes the fixture closure after parametrization: make sure the case runs
            # even when the test body asks for no fixture at all
            if CASE_FIXTURE not in item.fixturenames:  # type: ignore[attr-defined]
                item.fixturenames.append(CASE_FIXTURE)  # type: ignore[attr-defined]
            if item.get_closest_marker("xdist_group") is not None:
                continue
            spec, _ = param
            # the same name in every worker process (hash() is salted per process)
            key = repr(self.cases.runners.model_key(spec.model)).encode()
            group = hashlib.sha1(key).hexdigest()[:12]
            item.add_marker(pytest.mark.xdist_group(name=f"trtcompare-{group}"))

    # -- fixtures ----------------------------------------------------------------------------
    @pytest.fixture
    def trtcompare_case(self, request: pytest.FixtureRequest) -> CaseOutcome:
        """Runs this item's comparison (or golden write) and keeps the outcome on the item."""
        spec, case = request.param
        try:
            outcome = (
                self._golden_case(request, spec, case)
                if spec.golden
                else self.cases.run(spec, case)
            )
        except RunnerCrashed as exc:  # this item fails; the session goes on
            crashed = CaseOutcome([], {}, None, [], problem=str(exc))
            request.node.stash[_OUTCOME] = crashed
            return crashed
        request.node.stash[_OUTCOME] = outcome
        if outcome.results:
            record(
                request.node,
                outcome.worst,
                "compare_frameworks",
                outcome.target.get("runner"),
                (outcome.reference or {}).get("runner", "golden"),
            )
        for info in (outcome.target, outcome.reference):
            if info:
                self.descriptions[str(info.get("runner"))] = info
        return outcome

    def _golden_case(
        self, request: pytest.FixtureRequest, spec: CompareSpec, case: Case
    ) -> CaseOutcome:
        from .golden_plugin import GoldenFixture, GoldenPlugin

        goldens = self.config.pluginmanager.get_plugin("trtcompare-goldens")
        assert isinstance(goldens, GoldenPlugin)
        path = GoldenFixture(goldens, request.node).path()
        stored = goldens.stored(path, request.node.nodeid)
        feeds = [stored.inputs] if stored is not None and stored.inputs else None
        target, feeds, outputs = self.cases.target_outputs(spec, case, feeds)
        tolerance = self.cases.tolerance(spec, case.precision)
        if goldens.update:
            meta = {
                "precision": case.precision,
                "tolerance": dataclasses.asdict(tolerance[""]),
                "runner": target.describe(),
                "seed": spec.seed,
                "shapes": {k: list(v) for k, v in (case.shapes or {}).items()},
            }
            problem = goldens.write(request.node, path, outputs[0], feeds[0], meta)
            return CaseOutcome([], target.describe(), None, feeds, problem)
        goldens.stats.used.add(str(path))
        if stored is None:
            problem = goldens.missing_message(path, request.node.nodeid)
            return CaseOutcome([], target.describe(), None, feeds, problem)
        from ..engine.compare import compare_outputs

        result = compare_outputs(outputs[0], stored.outputs, tolerance)
        failing = None if result.passed else (outputs[0], stored.outputs)
        reference = {"runner": f"golden {path.name}"}
        return CaseOutcome([result], target.describe(), reference, feeds, failing_arrays=failing)

    @pytest.fixture
    def comparison(self, request: pytest.FixtureRequest) -> ComparisonResult:
        """The result of this item's compare_frameworks comparison (the worst iteration)."""
        if request.node.get_closest_marker("compare_frameworks") is None:
            pytest.fail(
                "the comparison fixture needs @pytest.mark.compare_frameworks(...)", pytrace=False
            )
        outcome: CaseOutcome = request.getfixturevalue(CASE_FIXTURE)
        if not outcome.results:
            pytest.skip("--update-goldens wrote the golden; nothing was compared")
        return outcome.worst

    @pytest.fixture
    def trt_precision(self) -> str:
        """The precision this item runs at (parametrized from --trt-precision)."""
        return self.precisions[0]

    @pytest.fixture
    def input_shapes(self) -> Mapping[str, Sequence[int]] | None:
        """This item's shape set from @pytest.mark.shapes (None without the marker)."""
        return None

    @pytest.fixture
    def runners(self) -> RunnersFixture:
        """`runners.onnxrt(model, precision=...)`, `runners.create(name, model, ...)`."""
        return RunnersFixture(self.cases)

    # -- verdict -----------------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        __tracebackhide__ = True
        outcome = item.stash.get(_OUTCOME, None)
        if outcome is not None and outcome.problem:
            pytest.fail(outcome.problem, pytrace=False)
        if outcome is None or not outcome.results:
            return
        failing = [r for r in outcome.results if not r.passed]
        if failing:
            which = (
                f"iteration {outcome.results.index(failing[0])} of {len(outcome.results)}: "
                if len(outcome.results) > 1
                else ""
            )
            header = (
                f"{outcome.target.get('runner')} vs "
                f"{(outcome.reference or {}).get('runner')}: {which}"
            )
            extra = ""
            if outcome.failing_arrays is not None:
                extra = failure_artifacts(item, failing[0], *outcome.failing_arrays)
            raise OutputMismatchError(
                header + failing[0].report(item.config.option.verbose) + extra, failing[0]
            )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """pytest-html, when installed, shows the pictures of a failing test in its row."""
        report = yield
        files = item.stash.get(_ARTIFACTS, None)
        if report.when == "call" and files:
            try:
                from pytest_html import extras
            except ImportError:
                return report
            pictures = [
                extras.png(base64.b64encode(path.read_bytes()).decode(), name=path.name)
                for path in files
                if path.suffix == ".png" and path.is_file()
            ]
            report.extras = [*getattr(report, "extras", []), *pictures]  # type: ignore[attr-defined]
        return report

    # -- summary -----------------------------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.failed):
            self.records.extend(summary.from_properties(report.user_properties))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(self.config, "workeroutput", None)
        builds = RunnersFixture(self.cases).builds
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        if workeroutput is not None:
            # plain JSON types only: execnet refuses e.g. torch's TorchVersion (a str subclass)
            # and would drop the whole workeroutput
            payload = {"builds": builds, "descriptions": self.descriptions}
            workeroutput[WORKER_KEY] = json.loads(json.dumps(payload, default=str))
            return
        if builds:
            self.builds[worker] = builds
        self.cases.runners.close()

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        data = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if data:
            if data["builds"]:
                self.builds[str(node.gateway.id)] = data["builds"]
            self.descriptions.update(data["descriptions"])

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput") or not self.records:
            return
        verbose = self.config.option.verbose > 0
        terminalreporter.section("accuracy summary")
        for line in summary.format_summary(self.records, None if verbose else 20):
            terminalreporter.write_line(line)
        if self.builds:
            for worker, builds in sorted(self.builds.items()):
                counts = ", ".join(
                    f"{name} x{n['builds']}"
                    + (f" ({n['models']} models)" if n["models"] > 1 else "")
                    for name, n in sorted(builds.items())
                )
                terminalreporter.write_line(f"runners built ({worker}): {counts}")
        path = self.config.getoption("trtcompare_report")
        if path:
            target = Path(self.config.invocation_params.dir) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            version = importlib.metadata.version("pytest-trtcompare")
            target.write_text(
                summary.report_json(self.records, self.descriptions, self.builds, version)
            )
            terminalreporter.write_line(f"accuracy report: {target}")
