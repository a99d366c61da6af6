"""compare_frameworks without pytest: which items a marked test expands to, and running one.

A case is one (target framework, precision, shape set). The reference framework runs in fp32;
with `golden=True` the stored golden is the reference and every listed framework is a target.
`CaseRunner` keeps runners, feeds and reference outputs for the whole session, so N items on
one model build each runner once and run the reference once per shape set.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..engine.compare import ComparisonResult, compare_outputs
from ..engine.tolerance import PRECISIONS
from ..errors import ToleranceError
from ..inputs import Feed
from .runs import RunnerCache, _freeze, make_feeds
from .settings import ToleranceSettings

_REFERENCE_CACHE = 8  # reference outputs kept (per model, shape set and inputs)


@dataclass(frozen=True)
class CompareSpec:
    """The compare_frameworks marker's arguments, validated."""

    model: Any = None
    frameworks: tuple[str, ...] = ()
    reference: str | None = None
    golden: bool = False
    tolerance: Any = None
    outputs: Any = None
    seed: int = 1
    val_range: Any = None
    iterations: int = 1
    inputs: Any = None
    models: Mapping[str, Any] = field(default_factory=dict)  # framework -> its own model
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    isolate: bool | None = None  # run the runners in worker processes (TensorRT: by default)

    @classmethod
    def from_marker(cls, kwargs: Mapping[str, Any], where: str) -> CompareSpec:
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ToleranceError(
                f"{where}: compare_frameworks got unknown argument(s) {unknown}; "
                f"it takes {', '.join(sorted(known))}"
            )
        frameworks = kwargs.get("frameworks") or ()
        if isinstance(frameworks, str):
            frameworks = (frameworks,)
        spec = cls(**{**kwargs, "frameworks": tuple(frameworks)})
        if not spec.frameworks:
            raise ToleranceError(f"{where}: compare_frameworks needs frameworks=[...]")
        if spec.reference is not None and spec.reference not in spec.frameworks:
            raise ToleranceError(
                f"{where}: reference={spec.reference!r} is not in "
                f"frameworks={list(spec.frameworks)}"
            )
        if not spec.golden and len(spec.frameworks) < 2:
            raise ToleranceError(
                f"{where}: compare_frameworks needs two frameworks (or golden=True)"
            )
        return spec

    @property
    def reference_framework(self) -> str | None:
        if self.golden:
            return None
        if self.reference is not None:
            return self.reference
        return "onnxrt" if "onnxrt" in self.frameworks else self.frameworks[0]

    @property
    def targets(self) -> tuple[str, ...]:
        reference = self.reference_framework
        return tuple(f for f in self.frameworks if f != reference)

    def model_for(self, framework: str) -> Any:
        return self.models.get(framework.split(":")[0], self.model)


def supported_precisions(framework: str) -> tuple[str, ...]:
    """The precisions the framework's runner class declares (all of them for an unknown
    runner: creating it will skip with the known names)."""
    from .. import runners
    from ..errors import UnknownFrameworkError

    try:
        factory = runners.runner_factory(framework)
    except UnknownFrameworkError:
        return PRECISIONS
    declared = getattr(factory, "precisions", None)
    return tuple(declared) if declared else PRECISIONS


def shape_set_ids(shape_sets: Sequence[Mapping[str, Sequence[int]]]) -> list[str]:
    """'bs8' when the sets differ by the first dim of their first input, else 's0', 's1' ..."""
    batches = []
    for shapes in shape_sets:
        first = next(iter(shapes.values()), ())
        batches.append(f"bs{first[0]}" if len(first) else None)
    if None not in batches and len(set(batches)) == len(batches):
        return [str(b) for b in batches]
    return [f"s{i}" for i in range(len(shape_sets))]


@dataclass(frozen=True)
class Case:
    target: str
    precision: str
    shapes: Mapping[str, tuple[int, ...]] | None
    shape_id: str | None
    all_shapes: tuple[Mapping[str, tuple[int, ...]], ...] = ()

    @property
    def id(self) -> str:
        parts = [self.target.split(":")[-1] if ":" in self.target else self.target, self.precision]
        return "-".join(parts + ([self.shape_id] if self.shape_id else []))


def expand(
    spec: CompareSpec,
    precisions: Sequence[str],
    shape_sets: Sequence[Mapping[str, Sequence[int]]],
    shape_ids: Sequence[str] | None = None,
    only: Sequence[str] | None = None,
) -> list[Case]:
    """One case per target x precision it supports x shape set, in that order."""
    sets = [{k: tuple(int(d) for d in v) for k, v in s.items()} for s in shape_sets]
    ids = list(shape_ids) if shape_ids else shape_set_ids(sets)
    targets = [t for t in spec.targets if not only or t.split(":")[0] in only or t in only]
    cases = []
    for target in targets:
        for precision in precisions:
            if precision not in supported_precisions(target.split(":")[0]):
                continue
            variants: list[tuple[Any, str | None]] = list(zip(sets, ids, strict=True))
            for shapes, shape_id in variants or [(None, None)]:
                cases.append(Case(target, precision, shapes, shape_id, tuple(sets)))
    return cases


@dataclass
class CaseOutcome:
    """What one item did: per-iteration results (None when it wrote a golden)."""

    results: list[ComparisonResult]
    target: dict[str, Any]
    reference: dict[str, Any] | None
    feeds: list[Feed]
    problem: str | None = None  # why the item fails without a comparison (missing golden)
    failing_arrays: tuple[Any, Any] | None = None  # (actual, expected) of the first failure

    @property
    def worst(self) -> ComparisonResult:
        failing = [r for r in self.results if not r.passed]
        return failing[0] if failing else max(self.results, key=lambda r: r.margin)


class CaseRunner:
    """Runs cases with session-wide caches of runners, feeds and reference outputs."""

    def __init__(
        self, settings: ToleranceSettings, engine_cache: str | None = None, isolate: bool = False
    ) -> None:
        self.settings = settings
        self.isolate = isolate
        self.runners = RunnerCache()
        self.engine_cache = engine_cache
        self._feeds: dict[Hashable, list[Feed]] = {}
        self._expected: OrderedDict[Hashable, list[dict[str, np.ndarray]]] = OrderedDict()

    def runner(self, spec: CompareSpec, framework: str, precision: str, case: Case) -> Any:
        options = dict(spec.options.get(framework.split(":")[0], {}))
        if spec.isolate is not None or self.isolate:
            options.setdefault("isolate", spec.isolate if spec.isolate is not None else True)
        if spec.outputs is not None:
            options.setdefault("outputs", spec.outputs)
        if framework == "trt":
            options.setdefault("shapes", list(case.all_shapes) or None)  # one profile, all sets
            if self.engine_cache:
                options.setdefault("engine_cache", self.engine_cache)
        return self.runners.get(framework, spec.model_for(framework), precision, **options)

    def feeds(self, spec: CompareSpec, runner: Any, case: Case) -> list[Feed]:
        key = (
            self.runners.model_key(spec.model_for(runner.framework)),
            _freeze(case.shapes),
            spec.seed,
            _freeze(spec.val_range),
            spec.iterations,
            _freeze(spec.inputs),
        )
        if key not in self._feeds:
            self._feeds[key] = make_feeds(
                runner,
                inputs=spec.inputs,
                seed=spec.seed,
                val_range=spec.val_range,
                shapes=case.shapes,
                iterations=spec.iterations,
            )
        return self._feeds[key]

    def expected(self, spec: CompareSpec, case: Case) -> tuple[Any, list[dict[str, np.ndarray]]]:
        """The fp32 reference runner and its outputs for the case's feeds (cached)."""
        framework = spec.reference_framework
        assert framework is not None
        reference = self.runner(spec, framework, "fp32", case)
        feeds = self.feeds(spec, reference, case)
        key = (id(reference), id(feeds))
        if key not in self._expected:
            self._expected[key] = [reference.infer(feed) for feed in feeds]
            while len(self._expected) > _REFERENCE_CACHE:
                self._expected.popitem(last=False)
        self._expected.move_to_end(key)
        return reference, self._expected[key]

    def tolerance(self, spec: CompareSpec, precision: str) -> Any:
        table = self.settings.resolve(precision, spec.tolerance)
        return {"": table.default, **table.per_output}

    def run(self, spec: CompareSpec, case: Case) -> CaseOutcome:
        """Target against the reference framework on every feed."""
        reference, expected = self.expected(spec, case)
        target = self.runner(spec, case.target, case.precision, case)
        feeds = self.feeds(spec, reference, case)
        tolerance = self.tolerance(spec, case.precision)
        names = None
        if spec.outputs is not None:  # "all" or a list: what both expose, in reference order
            order = getattr(reference, "layer_order", None) or list(expected[0])
            available = set(target.output_names())
            names = [name for name in order if name in available]
        results, failing = [], None
        for feed, want in zip(feeds, expected, strict=True):
            got = target.infer(feed)
            result = compare_outputs(got, want, tolerance, names=names)
            if spec.outputs == "all":
                result = dataclasses.replace(result, per_layer=True)
            if failing is None and not result.passed:
                failing = (got, want)  # kept for the failure artifacts
            results.append(result)
        return CaseOutcome(
            results, target.describe(), reference.describe(), feeds, failing_arrays=failing
        )

    def target_outputs(
        self, spec: CompareSpec, case: Case, feeds: list[Feed] | None = None
    ) -> tuple[Any, list[Feed], list[dict[str, np.ndarray]]]:
        """For golden=True: the target's outputs on the given (stored) or synthetic feeds."""
        target = self.runner(spec, case.target, case.precision, case)
        feeds = feeds if feeds is not None else self.feeds(spec, target, case)
        return target, feeds, [target.infer(feed) for feed in feeds]
