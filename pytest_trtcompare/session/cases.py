"""compare_frameworks without pytest: which items a marked test expands to, and running one.

A case is one (target framework, precision, shape set). The reference framework runs in fp32;
with `golden=True` the stored golden is the reference and every listed framework is a target.
`CaseRunner` keeps runners, feeds and reference outputs for the whole session, so N items on
one model build each runner once and run the reference once per shape set. Every case ends
as one `Outcome` (session/outcome.py), whatever happened.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .. import runners
from ..engine import (
    Anchor,
    ComparisonResult,
    ToleranceTable,
    compare_with_table,
    outputs_checked_by,
)
from ..errors import (
    FP64Unavailable,
    InferenceError,
    InputDataError,
    ModelLoadError,
    RunnerSkip,
    TrtCompareError,
    user_code_raised,
)
from ..goldens import Golden
from ..inputs import Feed
from ..runners import Runner, RunnerCrashed, load_model, median_ms
from ..vocabulary import FP64
from . import stored_runs
from .expand import Case
from .explain import Searches, explained, is_onnx
from .golden_check import GoldenAccess
from .layer_budget import LayerBudget, parse_layer_budget
from .layer_runs import compare_layers
from .layout import counted
from .option_table import comparison_options, resolve
from .outcome import Kind, Outcome, compared
from .runs import RunnerCache, _freeze, make_feeds, numbered
from .settings import ToleranceSettings
from .spec import CompareSpec
from .stored_runs import reported_before, shown, timed

_REFERENCE_CACHE = 8  # reference outputs kept (per model, shape set and inputs)


def _takes_onnx(framework: str) -> bool:
    """Whether the runner runs an ONNX model: the fp64 check's anchor of one is onnx.reference
    on the model's float64 conversion (every other reference runs itself at float64)."""
    return "onnx" in runners.capabilities(framework).takes


def _own_float64() -> list[str]:
    """The runners that run float64 themselves, on a model of their own kind (torch)."""
    return runners.runners_that(lambda runner: runner.float64 and "onnx" not in runner.takes)


def _float64_references() -> str:
    """'torch, or onnxrt / onnxref / trt on an ONNX model': the references the fp64 check
    can run at float64."""
    own = _own_float64()
    onnx = runners.runners_that(lambda runner: "onnx" in runner.takes)
    return f"{', '.join(own)}, or {' / '.join(onnx)} on an ONNX model"


class CaseRunner:
    """Runs cases with session-wide caches of runners, feeds and reference outputs."""

    def __init__(
        self,
        settings: ToleranceSettings,
        engine_cache: str | None = None,
        isolate: bool = False,
        debug_precision: bool = False,
        option_values: Mapping[str, tuple[Any, Any]] | None = None,
        calibrate: int = 0,
        device: tuple[str | None, str | None] = (None, None),
    ) -> None:
        self.settings = settings
        #: where a spec's tolerance came from, as reports credit it (`trtcompare run`: option)
        self.tolerance_source = "marker"
        #: marker argument -> the flag that gives it, where not a marker (`trtcompare run`:
        #: shapes -> --input-shapes, reference -> --load-outputs ...): how messages name it
        self.flags: dict[str, str] = {}
        self.calibrate = calibrate  # --trt-calibrate: draws of synthetic inputs per case
        #: (flag, ini) of the options a test can also set (session/option_table.py `resolve`)
        self.option_values = option_values or {}
        self.isolate = isolate
        self.debug_precision = debug_precision
        self.runners = RunnerCache(*device)  # --trt-device, this xdist worker's id
        self.engine_cache = engine_cache
        self._feeds: dict[Hashable, list[Feed]] = {}
        self._expected: OrderedDict[Hashable, list[dict[str, np.ndarray]]] = OrderedDict()
        self._expected_ms: dict[Hashable, float | None] = {}  # the reference's inference time
        self.saved: dict[Path, Golden] = {}
        self._exports: dict[Hashable, Any] = {}  # model key -> the ONNX model twins follow
        self._twins: dict[int, Any] = {}  # id(reference runner) -> its twin of the export

    def said(self, argument: str, value: str) -> str:
        """How the user gave `argument`: "reference='outputs.json'" in a test, "--load-outputs
        outputs.json" on the command line (`flags`)."""
        flag = self.flags.get(argument)
        return f"{argument}={value!r}" if flag is None else f"{flag} {value}"

    def runner(self, spec: CompareSpec, framework: str, precision: str, case: Case) -> Any:
        options = dict(spec.options.get(runners.framework_of(framework), {}))
        if spec.isolate is not None or self.isolate:
            options.setdefault("isolate", spec.isolate if spec.isolate is not None else True)
        if spec.outputs is not None:
            options.setdefault("outputs", spec.outputs)
        accepted = runners.runner_options(framework) or ()
        if "shapes" in accepted:  # one build for every shape set (a TensorRT profile)
            options.setdefault("shapes", list(case.all_shapes) or None)
        if "engine_cache" in accepted and self.engine_cache:
            options.setdefault("engine_cache", self.engine_cache)
        return self.runners.get(framework, spec.model_for(framework), precision, **options)

    def feeds(self, spec: CompareSpec, runner: Any, case: Case) -> list[Feed]:
        key = (
            self.runners.model_key(spec.model_for(getattr(runner, "inner", runner.framework))),
            tuple(runner.input_specs()),  # runners of one module may be told other specs
            _freeze(case.shapes),
            spec.seed,
            _freeze(spec.val_range),
            spec.iterations,
            _freeze(spec.inputs),
        )
        if key not in self._feeds:
            try:
                self._feeds[key] = make_feeds(
                    runner,
                    inputs=spec.inputs,
                    seed=spec.seed,
                    val_range=spec.val_range,
                    shapes=case.shapes,
                    iterations=spec.iterations,
                )

            except InputDataError as exc:
                if exc.shape_needed is not None and "shapes" in self.flags:
                    raise exc.with_shape_flag(self.flags["shapes"]) from None
                if case.shape_id != "cli":
                    raise
                raise InputDataError(
                    f"{exc} (--trt-input-shapes replaces the test's shape sets: give every "
                    "dynamic input there, e.g. --trt-input-shapes=input_ids:1x8,attention_mask:1x8)"
                ) from None
        count = len(self._feeds[key])
        if spec.inputs is not None and spec.iterations > 1 and count != spec.iterations:
            raise InputDataError(
                f"inputs={shown(spec.inputs)} holds {counted(count, 'feed')} and "
                f"iterations={spec.iterations}: iterations= draws synthetic inputs; with "
                "inputs= every feed it holds is an iteration (leave iterations= out)"
            )
        return self._feeds[key]

    def expected(
        self, spec: CompareSpec, case: Case
    ) -> tuple[Any, list[dict[str, np.ndarray]], float | None]:
        """The fp32 reference runner, its outputs for the case's feeds (cached) and the
        median of its inference times on them (ms)."""
        reference = self.reference(spec, "fp32", case)
        feeds = self.feeds(spec, reference, case)
        outputs, milliseconds = self._outputs(reference, feeds)
        return reference, outputs, milliseconds

    def reference(self, spec: CompareSpec, precision: str, case: Case) -> Any:
        """The reference framework's runner at `precision`. A framework's own model (a torch
        module under models=) beside an ONNX model is fed and named as the export is (a twin
        of it), so "onnxrt fp16 against torch" compares the export's outputs by name."""
        framework = spec.reference_framework
        assert framework is not None
        runner = self.runner(spec, framework, precision, case)
        if runners.framework_of(framework) not in spec.models or not is_onnx(spec.model):
            return runner
        if id(runner) not in self._twins:  # one twin per cached runner: outputs keyed by id
            from .twins import ExportSpecs, as_twin

            self._twins[id(runner)] = as_twin(runner, ExportSpecs(self._export(spec.model)))
        return self._twins[id(runner)]

    def _outputs(
        self, runner: Any, feeds: list[Feed]
    ) -> tuple[list[dict[str, np.ndarray]], float | None]:
        """A reference runner's outputs on `feeds` (the last few kept) and its median time."""
        key = (id(runner), id(feeds))
        if key not in self._expected:
            mark = len(runner.inference_times)
            self._expected[key] = [
                numbered(runner.infer, feed, index, len(feeds)) for index, feed in enumerate(feeds)
            ]
            self._expected_ms[key] = median_ms(runner.inference_times[mark:])
            while len(self._expected) > _REFERENCE_CACHE:
                self._expected_ms.pop(self._expected.popitem(last=False)[0], None)
        self._expected.move_to_end(key)
        return self._expected[key], self._expected_ms.get(key)

    def anchors(
        self, spec: CompareSpec, case: Case, feeds: list[Feed], expected: list[Any]
    ) -> list[Anchor]:
        """The fp64 check's two extra runs on every feed: the reference framework at float64
        (onnxref on a float64 conversion of an ONNX model, the torch runner on a float64
        copy of a module) and at the case's precision (at fp32: `expected` itself)."""
        framework = spec.reference_framework
        assert framework is not None
        model = spec.model_for(framework)
        converted = _takes_onnx(framework) and is_onnx(model)  # run by onnxref at float64
        try:
            if converted:
                anchor = self.runners.get(
                    runners.FLOAT64_ONNX_RUNNER, model, FP64, outputs=spec.outputs
                )
            else:
                anchor = self.reference(spec, FP64, case)
            float64, _ = self._outputs(anchor, feeds)
        except RunnerSkip as exc:  # a user's choice that cannot work: an error, not a skip
            raise FP64Unavailable(
                f"fp64 check: the reference {framework} cannot run float64 ({exc}); the check "
                f"needs a reference that can: {_float64_references()}"
            ) from None
        except (InferenceError, ModelLoadError) as exc:
            if not converted:
                raise
            raise _float64_model_failed(exc) from exc
        if case.precision == "fp32":
            reduced = expected
        else:
            try:
                runner = self.reference(spec, case.precision, case)
            except RunnerSkip as exc:  # it cannot run here, as a target would skip
                raise type(exc)(f"fp64 check: the reference at {case.precision}: {exc}") from None
            reduced, _ = self._outputs(runner, feeds)
        label = f"{framework} {case.precision}"
        return [Anchor(f, r, label) for f, r in zip(float64, reduced, strict=True)]

    def compare(self, spec: CompareSpec) -> Callable[..., ComparisonResult]:
        """compare_outputs with the comparison options (the marker's, else the session's, else
        their defaults); it also takes `anchor=` (the fp64 check's runs)."""
        return functools.partial(_compare, **comparison_options(spec.given, self.option_values))

    def tolerance_table(self, spec: CompareSpec, case: Case) -> ToleranceTable:
        return self.settings.resolve(
            case.precision, spec.tolerance, source=self.tolerance_source, test=case.test or None
        )

    def tolerance(self, spec: CompareSpec, case: Case) -> Any:
        table = self.tolerance_table(spec, case)
        return {"": table.default, **table.per_output}

    def run(self, spec: CompareSpec, case: Case) -> Outcome:
        """Target against the reference framework on every feed."""
        __tracebackhide__ = user_code_raised
        return _guarded(functools.partial(self._run, spec, case))

    def run_golden(
        self, spec: CompareSpec, case: Case, path: Path, goldens: GoldenAccess
    ) -> Outcome:
        """golden=True: the target against the stored golden, or (updating) write it."""
        __tracebackhide__ = user_code_raised
        return _guarded(functools.partial(stored_runs.run_golden, self, spec, case, path, goldens))

    def _run(self, spec: CompareSpec, case: Case) -> Outcome:
        __tracebackhide__ = user_code_raised
        if spec.reference_path is not None:
            return stored_runs.run_saved(self, spec, case, Path(spec.reference_path))
        if self.calibrate > spec.iterations and spec.inputs is None:
            spec = dataclasses.replace(spec, iterations=self.calibrate)
        reference_ms = None
        if spec.outputs == "all":
            reference = self.runner(spec, spec.reference_framework or "", "fp32", case)
            expected: list[
                dict[str, np.ndarray]
            ] = []  # compared a group of layers at a time, nothing kept
        else:
            reference, expected, reference_ms = self.expected(spec, case)
        target = self.runner(spec, case.target, case.precision, case)
        refused = self.fallback_refused(spec, case, target)
        if refused is not None:
            return refused
        if runners.framework_of(case.target) in spec.models:
            target = self._twin(spec, target, reference)
        feeds = self.feeds(spec, reference, case)
        if spec.outputs == "all":
            return self._run_layers(spec, case, target, reference, feeds)
        mark = len(target.inference_times)
        names = None
        if spec.outputs is not None:  # a list: what both expose, in reference order
            available = set(target.output_names())
            names = [name for name in expected[0] if name in available]
        table = self.tolerance_table(spec, case)  # it names the calibrated file, if any
        tolerance = {"": table.default, **table.per_output}
        anchors: list[Any] = [None] * len(feeds)
        if outputs_checked_by(tolerance, FP64):
            anchors = self.anchors(spec, case, feeds, expected)
        results, kept, closest = [], None, None
        for index, (feed, want) in enumerate(zip(feeds, expected, strict=True)):
            got = numbered(target.infer, feed, index, len(feeds))
            result = self.compare(spec)(got, want, table, names=names, anchor=anchors[index])
            if reported_before(result, closest):  # its arrays are the artifacts'
                kept, closest = (got, want), result
            results.append(result)
        times = (median_ms(target.inference_times[mark:]), reference_ms)
        return self._settled(spec, case, results, (target, reference), kept, feeds, times)

    def fallback_refused(self, spec: CompareSpec, case: Case, target: Any) -> Outcome | None:
        """A fp16 / bf16 case whose target computed no node in that type (its describe()'s
        "computed"; TensorRT 11 has built float32 engines from fp16=True) fails, naming what
        ran, unless allow_fp32_fallback / --trt-allow-fp32-fallback allows it."""
        if case.precision not in runners.LOW_DTYPES:
            return None
        description = target.describe()
        computed = runners.Computed.of(description)
        if computed is None or not computed.none_at_precision:
            return None
        given = spec.given.get("allow_fp32_fallback")
        if resolve("allow_fp32_fallback", given, self.option_values):
            return None
        allow = "allow_fp32_fallback=True (or --trt-allow-fp32-fallback)"
        message = runners.no_low_precision(case.target, computed, allow)
        return Outcome(Kind.FAILED, message, source="compare_frameworks", target=description)

    def _twin(self, spec: CompareSpec, target: Any, reference: Any) -> Any:
        """A framework's own model under the reference's names; per layer, a torch model's
        modules matched to the ONNX export's tensors."""
        from .module_pairs import TorchLayers  # these import onnx: not at the plugin's import
        from .twins import as_twin

        names = [
            runners.capabilities(getattr(runner, "inner", runner.framework)).layer_names
            for runner in (target, reference)
        ]
        if spec.outputs == "all" and names[0] == "modules" and names[1] != "modules":
            loaded = getattr(reference, "loaded", None)
            proto = loaded.proto if loaded is not None else self._export(spec.model)
            return TorchLayers(target, reference, proto)
        return as_twin(target, reference)

    def as_export(self, spec: CompareSpec, case: Case, target: Any) -> Any:
        """A twin (a framework's own model beside an ONNX model) fed and named as the export,
        where no reference runner gives the names: against a golden or saved outputs."""
        if runners.framework_of(case.target) not in spec.models or not is_onnx(spec.model):
            return target
        from .twins import ExportSpecs, as_twin

        return as_twin(target, ExportSpecs(self._export(spec.model)))

    def _export(self, model: Any) -> Any:
        """The marker's ONNX model, loaded once per model for the twins that need its graph."""
        key = self.runners.model_key(model)
        if key not in self._exports:
            self._exports[key] = load_model(model).proto
        return self._exports[key]

    def _settled(
        self,
        spec: CompareSpec,
        case: Case,
        results: list[ComparisonResult],
        pair: tuple[Runner, Runner],
        failing: Any,
        feeds: list[Feed],
        times: tuple[float | None, float | None] = (None, None),
    ) -> Outcome:
        """The outcome of a case's comparisons, the worst iteration's arrays kept for
        artifacts; `times`: the target's and the reference's median inference times (ms)."""
        target, reference = pair
        note = getattr(target, "binding_note", "")
        outcome = compared(
            results,
            source="compare_frameworks",
            target=timed(target.describe(), times[0]),
            reference=timed(reference.describe(), times[1]),
            arrays=failing,
            header=f"{target.name} vs {reference.name} ({note}): " if note else "",
        )
        failed = [feed for feed, result in zip(feeds, results, strict=False) if not result.passed]
        asked = Searches(self.debug_precision, self.option_values, self.tolerance(spec, case))
        return explained(asked, spec, case, outcome, feeds, failed[:1] or feeds[:1])

    def _run_layers(
        self, spec: CompareSpec, case: Case, target: Any, reference: Any, feeds: list[Feed]
    ) -> Outcome:
        """outputs="all": the grouped, memory-bounded road of `compare_layers`, per feed."""
        mode = self.layers_mode(spec)
        results, failing = [], None
        marks = [len(runner.inference_times) for runner in (target, reference)]
        for feed in feeds:
            kept: dict[str, tuple[Any, Any]] = {}
            result = compare_layers(
                target,
                reference,
                feed,
                self.tolerance(spec, case),
                budget=self.layer_budget(spec),
                layers=mode,
                layer_dtypes=spec.layer_dtypes or "float",
                keep=kept,
                validate=comparison_options(spec.given, self.option_values)["validate"],
            )
            if failing is None and not result.passed:
                failing = ({k: v[0] for k, v in kept.items()}, {k: v[1] for k, v in kept.items()})
            results.append(result)
        # per layer, each group of layers is one run: the median of those
        times = (
            median_ms(target.inference_times[marks[0] :]),
            median_ms(reference.inference_times[marks[1] :]),
        )
        return self._settled(spec, case, results, (target, reference), failing, feeds, times)

    def layer_budget(self, spec: CompareSpec) -> LayerBudget | None:
        """The marker's layer_budget= > --trt-layer-budget > ini trtcompare_layer_budget >
        the default (layer_budget.py)."""
        value = resolve("layer_budget", spec.given.get("layer_budget"), self.option_values)
        return None if value is None else parse_layer_budget(value)

    def layers_mode(self, spec: CompareSpec) -> str:
        """--trt-layers > the marker's layers= > ini trtcompare_layers > "gate"."""
        return str(resolve("layers", spec.layers, self.option_values))


def _compare(
    actual: Any,
    expected: Any,
    tolerance: Any,
    *,
    names: Any = None,
    anchor: Anchor | None = None,
    **options: Any,
) -> ComparisonResult:
    table = tolerance if isinstance(tolerance, ToleranceTable) else ToleranceTable(tolerance)
    return compare_with_table(actual, expected, table, names=names, anchor=anchor, **options)


def _float64_model_failed(exc: InferenceError | ModelLoadError) -> TrtCompareError:
    """The fp64 check's run of the ONNX model converted to float64 failed: said as the
    check's, with the references that need no such model."""
    own = _own_float64()
    error = type(exc)(
        f"fp64 check: the float64 run of the reference's model failed: {str(exc).rstrip('.')}; "
        f"a reference that runs float64 itself needs no float64 ONNX model: {' or '.join(own)} "
        "(e.g. reference='torch', models={'torch': module})"
    )
    if isinstance(error, InferenceError) and isinstance(exc, InferenceError):
        error.details = exc.details  # the library's traceback, for --tb=long
    return error


def _guarded(run: Any) -> Outcome:
    """What cannot run here skips, a crash fails, our own errors become the message alone;
    errors raised by user code (a callable runner, a torch module) propagate as they are."""
    __tracebackhide__ = user_code_raised
    source = "compare_frameworks"
    try:
        outcome: Outcome = run()
    except RunnerSkip as exc:
        return Outcome(Kind.SKIPPED, str(exc), source=source)
    except RunnerCrashed as exc:
        return Outcome(Kind.CRASHED, str(exc), source=source)
    except TrtCompareError as exc:
        return Outcome.error(exc, source)
    return outcome
