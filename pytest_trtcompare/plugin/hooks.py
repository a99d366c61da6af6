"""pytest glue: options, ini keys, markers, the `compare` fixture, the report header.

Thin on purpose: numerics live in compare.py, policy in settings.py.
"""

from __future__ import annotations

import argparse
import importlib.metadata
from collections.abc import Callable, Generator, Iterable
from typing import Any

import pytest

from ..engine.compare import ComparisonResult, OutputMismatchError, compare_outputs
from ..engine.tolerance import CHECKS, PRECISIONS, ToleranceSpec
from ..errors import RunnerSkip, ToleranceError
from ..session.settings import ToleranceSettings, parse_precisions, parse_tolerance_table
from .compare_plugin import failure_artifacts, record

UPDATE_GOLDENS = "--update-goldens"
UPDATE_GOLDENS_FALLBACK = "--trt-update-goldens"
#: Installed plugins known to register --update-goldens themselves.
_UPDATE_GOLDENS_OWNERS = frozenset({"pytest-golden"})

MARKERS = {
    "compare_frameworks": (
        "compare_frameworks(model=..., frameworks=[...], reference=None, golden=False, "
        "tolerance=..., outputs=None, seed=1, val_range=None, iterations=1): run the model in "
        "each framework and compare the outputs (pytest-trtcompare)"
    ),
    "precisions": "precisions(*names): precisions this test runs at, e.g. 'fp16', 'bf16'",
    "shapes": "shapes(*shape_sets): input shape sets, e.g. {'input': (1, 3, 224, 224)}",
}


def _precision_list(text: str) -> tuple[str, ...]:
    try:
        return parse_precisions(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _registered_option_names(parser: pytest.Parser) -> set[str]:
    groups = [*getattr(parser, "_groups", []), getattr(parser, "_anonymous", None)]
    return {name for g in groups if g is not None for opt in g.options for name in opt.names()}


def _update_goldens_owned_elsewhere(parser: pytest.Parser) -> bool:
    if UPDATE_GOLDENS in _registered_option_names(parser):
        return True
    for entry_point in importlib.metadata.entry_points(group="pytest11"):
        dist = getattr(entry_point, "dist", None)
        if dist is not None and dist.name in _UPDATE_GOLDENS_OWNERS:
            return True
    return False


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trtcompare", "accuracy comparison (pytest-trtcompare)")
    group.addoption(
        "--trt-precision",
        dest="trt_precision",
        type=_precision_list,
        default=None,
        metavar="P[,P...]",
        help=f"precisions to run compare tests at, from {', '.join(PRECISIONS)} "
        "(ini: trtcompare_precisions; default fp32)",
    )
    update_flag = UPDATE_GOLDENS
    if _update_goldens_owned_elsewhere(parser):
        update_flag = UPDATE_GOLDENS_FALLBACK  # another plugin owns --update-goldens
    group.addoption(
        update_flag,
        dest="trtcompare_update_goldens",
        action="store_true",
        help="write or refresh the golden outputs of the tests that run",
    )
    group.addoption(
        "--prune-goldens",
        dest="trtcompare_prune_goldens",
        action="store_true",
        help="delete goldens of tests that ran in full but no longer use them",
    )
    group.addoption(
        "--goldens-dir",
        dest="trtcompare_goldens_dir",
        metavar="DIR",
        help="where goldens live (ini: trtcompare_goldens_dir; default: beside each test module)",
    )
    group.addoption(
        "--frameworks",
        dest="trtcompare_frameworks",
        metavar="NAME[,NAME...]",
        help="only run compare tests of these frameworks",
    )
    group.addoption(
        "--trt-atol",
        dest="trt_atol",
        type=float,
        metavar="ATOL",
        help="absolute tolerance for every comparison (overrides markers and ini)",
    )
    group.addoption(
        "--trt-rtol",
        dest="trt_rtol",
        type=float,
        metavar="RTOL",
        help="relative tolerance for every comparison (overrides markers and ini)",
    )
    group.addoption(
        "--trt-check-error-stat",
        dest="trt_check_error_stat",
        choices=[c for c in CHECKS if c != "indices"],
        help="error statistic checked by every comparison",
    )
    group.addoption(
        "--trtcompare-report",
        dest="trtcompare_report",
        metavar="PATH.json",
        help="write the accuracy summary as JSON",
    )
    group.addoption(
        "--trtcompare-artifacts",
        dest="trtcompare_artifacts",
        metavar="DIR",
        help="write arrays and plots of failing outputs here",
    )
    group.addoption(
        "--trt-engine-cache",
        dest="trt_engine_cache",
        metavar="DIR",
        help="where built TensorRT engines are cached",
    )
    group.addoption(
        "--trtcompare-isolate",
        dest="trtcompare_isolate",
        action="store_true",
        help="run every compare_frameworks runner in a worker process, so a crash fails one "
        "test, not the session (TensorRT always is, unless isolate=False)",
    )
    parser.addini("trtcompare_precisions", "default for --trt-precision", default="fp32")
    parser.addini(
        "trtcompare_tolerances",
        "per-precision tolerances, one 'PRECISION: atol=.. rtol=.. [check=..]' per line",
        type="linelist",
        default=[],
    )
    parser.addini("trtcompare_goldens_dir", "where goldens live", default="")
    parser.addini("trtcompare_artifacts", "where failure artifacts go", default="")


def _tolerance_settings(config: pytest.Config) -> ToleranceSettings:
    try:
        table = parse_tolerance_table(config.getini("trtcompare_tolerances"))
        command_line = {
            name: value
            for name, value in (
                ("atol", config.getoption("trt_atol")),
                ("rtol", config.getoption("trt_rtol")),
                ("check", config.getoption("trt_check_error_stat")),
            )
            if value is not None
        }
        settings = ToleranceSettings(ini_table=table, command_line=command_line)
        settings.resolve("fp32")  # validates the command-line values (negative atol ...)
    except ToleranceError as exc:
        raise pytest.UsageError(str(exc)) from None
    return settings


def _precisions(config: pytest.Config) -> tuple[str, ...]:
    given = config.getoption("trt_precision")
    if given is not None:
        return tuple(given)
    try:
        return parse_precisions(str(config.getini("trtcompare_precisions")))
    except ValueError as exc:
        raise pytest.UsageError(f"ini trtcompare_precisions: {exc}") from None


_SETTINGS_KEY = pytest.StashKey[ToleranceSettings]()
_PRECISIONS_KEY = pytest.StashKey[tuple[str, ...]]()


def pytest_configure(config: pytest.Config) -> None:
    for text in MARKERS.values():
        config.addinivalue_line("markers", text)
    config.stash[_SETTINGS_KEY] = _tolerance_settings(config)
    config.stash[_PRECISIONS_KEY] = _precisions(config)
    from .compare_plugin import ComparePlugin
    from .golden_plugin import GoldenPlugin

    settings = config.stash[_SETTINGS_KEY]
    config.pluginmanager.register(GoldenPlugin(config, settings), "trtcompare-goldens")
    config.pluginmanager.register(
        ComparePlugin(config, settings, config.stash[_PRECISIONS_KEY]), "trtcompare-compare"
    )


def pytest_report_header(config: pytest.Config) -> list[str]:
    from ..runners.frameworks import header_line

    return [header_line()]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A runner that cannot run here (framework, GPU or precision missing) skips its test."""
    report = yield
    excinfo = call.excinfo
    if excinfo is not None and isinstance(excinfo.value, RunnerSkip) and not report.skipped:
        path, line, _ = item.reportinfo()
        report.outcome = "skipped"
        report.longrepr = (str(path), (line or 0) + 1, f"Skipped: {excinfo.value}")
    return report


CompareFixture = Callable[..., ComparisonResult]


@pytest.fixture
def compare(request: pytest.FixtureRequest) -> CompareFixture:
    """Assertion helper: `compare(actual, expected, tolerance=None, precision="fp32", **fields)`.

    Tolerance precedence: --trt-atol/--trt-rtol/--trt-check-error-stat > this call's
    tolerance and fields > ini trtcompare_tolerances for `precision` > built-in default.
    """
    settings = request.config.stash[_SETTINGS_KEY]

    def _compare(
        actual: Any,
        expected: Any,
        tolerance: ToleranceSpec = None,
        *,
        precision: str = "fp32",
        names: Iterable[str] | None = None,
        **fields: Any,
    ) -> ComparisonResult:
        __tracebackhide__ = True
        table = settings.resolve(precision, tolerance, **fields)
        result = compare_outputs(
            actual, expected, {"": table.default, **table.per_output}, names=names
        )
        record(request.node, result, "compare")
        if not result.passed:
            extra = failure_artifacts(request.node, result, actual, expected)
            raise OutputMismatchError(result.report(request.config.option.verbose) + extra, result)
        return result

    return _compare
