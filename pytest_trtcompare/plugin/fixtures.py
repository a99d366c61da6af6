"""The fixtures: `compare`, `runners`, `golden`, `comparison`, `trt_precision`, `input_shapes`.

Their types (`CompareFixture`, `RunnersFixture`, `GoldenFixture`) are public, for annotations.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from ..errors import TrtCompareError, user_code_raised

# The plugin imports this module at every pytest run: what a fixture needs (numpy, the
# engine, the session) is imported when it first runs.
if TYPE_CHECKING:
    from ..engine import ComparisonResult, ToleranceSpec
    from ..runners import Runner
    from ..session.outcome import Outcome
    from ..session.runs import RunnerCache
    from .golden_fixture import GoldenFixture

CASE_FIXTURE = "trtcompare_case"
OUTCOME = pytest.StashKey["Outcome"]()


class CompareFixture:
    """`compare(actual, expected, tolerance=None, precision="fp32", names=None, **keywords)`.

    Keywords: tolerance fields (atol=, rtol=, ...) and the comparison options of
    session/option_table.py. Tolerance precedence: --trt-atol/--trt-rtol/
    --trt-check-error-stat > this call's tolerance and fields > ini trtcompare_tolerances for
    `precision` > built-in default. An option: this call's > its flag > its ini key > default.
    """

    def __init__(self, item: pytest.Item | None = None) -> None:
        self._item = item  # the test that asked for the fixture
        self._ended = False  # its test was torn down

    def _end(self) -> None:
        self._ended = True

    def __repr__(self) -> str:  # what a failure's traceback shows of the argument
        return "<compare fixture>"

    def __call__(
        self,
        actual: Any,
        expected: Any,
        tolerance: ToleranceSpec = None,
        *,
        precision: str = "fp32",
        names: Iterable[str] | None = None,
        **keywords: Any,
    ) -> ComparisonResult:
        __tracebackhide__ = True
        if self._item is None:
            raise TrtCompareError(
                "compare: this CompareFixture belongs to no test; ask for the `compare` "
                "fixture instead of constructing one"
            )
        if self._ended:
            raise TrtCompareError(
                f"compare: this fixture belongs to {self._item.nodeid}, which has ended; ask "
                "for `compare` in the test that calls it instead of keeping one from another test"
            )
        run = _compare_call()
        return run(self._item, actual, expected, tolerance, precision, names, keywords)


@functools.cache
def _compare_call() -> Callable[..., ComparisonResult]:
    """compare_call.run, imported on the first call (its module needs numpy and the engine)."""
    from .compare_call import run

    return run


class RunnersFixture:
    """Runners built once per session, keyed by model digest, framework, precision and
    options: `runners.onnxrt(model, precision="fp16")` (an attribute per runner's name),
    `runners.create(name, model, ...)`."""

    def __init__(self, cache: RunnerCache) -> None:
        self._cache = cache

    def __repr__(self) -> str:
        return "<runners fixture>"

    def create(
        self, name: str, model: Any = None, precision: str = "fp32", **options: Any
    ) -> Runner:
        return self._cache.get(name, model, precision, **options)

    def __getattr__(self, name: str) -> Callable[..., Runner]:
        """`runners.onnxrt(model, precision, **options)`, and so for every runner's name
        (`runners.callable(function)`: a function, or 'package.module:function')."""
        __tracebackhide__ = True
        if name.startswith("_"):
            raise AttributeError(name)
        from ..runners import check_framework_name

        try:
            check_framework_name(name)
        except TrtCompareError as exc:
            raise AttributeError(f"runners.{name}: {exc}") from None
        return functools.partial(self.create, name)

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


@pytest.fixture
def compare(request: pytest.FixtureRequest) -> Iterator[CompareFixture]:
    """Assertion helper with the run's tolerance settings: `compare(actual, expected, ...)`.
    It records on the test that asked for it, until that test's teardown."""
    fixture = CompareFixture(request.node)
    yield fixture
    fixture._end()


@pytest.fixture
def runners(request: pytest.FixtureRequest) -> RunnersFixture:
    """`runners.onnxrt(model, precision=...)`, `runners.create(name, model, ...)`."""
    from .state import state_of

    return RunnersFixture(state_of(request.config).cases.runners)


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> GoldenFixture:
    """Saved reference outputs of this test: `golden.inputs(runner)`, `golden.check(out)`."""
    from .golden_fixture import GOLDEN_FIXTURE, GoldenFixture
    from .state import state_of

    state = state_of(request.config)
    fixture = GoldenFixture(state.goldens.for_item(request.node), state.settings)
    request.node.stash[GOLDEN_FIXTURE] = fixture
    return fixture


@pytest.fixture
def trtcompare_case(request: pytest.FixtureRequest) -> Outcome:
    """Runs this item's compare_frameworks comparison (or golden write). What cannot run here
    skips and a user mistake errors, now; the verdict comes in the call phase."""
    __tracebackhide__ = user_code_raised
    from ..session.outcome import Kind, Outcome
    from .settle import settle
    from .state import state_of

    spec, case = request.param
    case = dataclasses.replace(case, test=request.node.nodeid)  # its calibrated tolerances
    state = state_of(request.config)
    if spec.golden:
        goldens = state.goldens.for_item(request.node)
        try:
            path = goldens.path()
        except TrtCompareError as exc:
            outcome = Outcome(Kind.ERROR, str(exc), source="compare_frameworks")
        else:
            outcome = state.cases.run_golden(spec, case, path, goldens)
    else:
        outcome = state.cases.run(spec, case)
    state.reporter.note(outcome)
    request.node.stash[OUTCOME] = outcome
    if state.reporter.calibration is not None and outcome.results:
        from .calibration_run import observed_property

        request.node.user_properties.append(observed_property(outcome.results))
    if outcome.kind in (Kind.SKIPPED, Kind.ERROR):
        settle(request.node, state.settings, outcome)
    return outcome


@pytest.fixture
def comparison(request: pytest.FixtureRequest) -> ComparisonResult:
    """The result of this item's compare_frameworks comparison (the worst iteration). Under
    --trt-update-goldens with golden=True: the target against the golden it just wrote."""
    __tracebackhide__ = user_code_raised
    from ..engine import ComparisonResult

    if request.node.get_closest_marker("compare_frameworks") is None:
        pytest.fail(
            "the comparison fixture needs @pytest.mark.compare_frameworks(...)", pytrace=False
        )
    outcome: Outcome = request.getfixturevalue(CASE_FIXTURE)
    # without a result (a crash, a missing golden) the call phase fails before the body runs
    return outcome.worst or ComparisonResult(outputs={})


@pytest.fixture
def trt_precision(request: pytest.FixtureRequest) -> str:
    """The precision this item runs at (parametrized from --trt-precision)."""
    from .state import state_of

    return state_of(request.config).settings.precisions[0]


@pytest.fixture
def input_shapes() -> Mapping[str, Sequence[int]] | None:
    """This item's shape set from @pytest.mark.shapes (None without the marker)."""
    return None
