"""Marker arguments validated once into frozen specs, with one message per mistake.

`compare_frameworks(...)`, `precisions(...)` and `shapes(...)` are read here, without pytest:
every argument is checked for type and range, and a mistake raises `MarkerError` naming the
test, the argument, what it got and what it takes. numpy numbers are numbers; booleans must
be booleans.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import runners
from ..engine import ToleranceTable, outputs_checked_by
from ..errors import MarkerError, RunnerOptionError, ToleranceError
from ..runners import canonical_framework, check_runner_options, framework_of
from ..vocabulary import FP64
from .marker_values import (
    Checker,
    framework_list,
    is_int,
    is_model,
    layer_options,
    mapping_of,
    model_path,
    outputs,
    tolerance,
    val_range,
)
from .option_table import check_value, marker_options


@dataclass(frozen=True)
class CompareSpec:
    """The compare_frameworks marker's arguments, validated."""

    model: Any = None
    frameworks: tuple[str, ...] = ()
    reference: str | None = None
    golden: bool = False
    tolerance: Any = None
    outputs: str | tuple[str, ...] | None = None
    seed: int = 1
    val_range: Any = None
    iterations: int = 1
    inputs: Any = None
    models: Mapping[str, Any] = field(default_factory=dict)  # framework -> its own model
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    isolate: bool | None = None  # run the runners in worker processes (TensorRT: by default)
    reference_path: str | None = None  # saved outputs (Polygraphy JSON, golden, .npz, test data)
    layers: str | None = None  # outputs="all": "gate" or "report" (None: option, ini, "gate")
    layer_dtypes: str | None = None  # outputs="all": "float" (None) or "all"
    #: the marker's values of session/option_table.py's marker options
    given: Mapping[str, Any] = field(default_factory=dict)

    @property
    def reference_framework(self) -> str | None:
        """The framework whose fp32 outputs are `expected` (None: a golden or saved outputs)."""
        if self.golden or self.reference_path is not None:
            return None
        if self.reference is not None:
            return self.reference
        return _default_reference(self.frameworks)

    @property
    def targets(self) -> tuple[str, ...]:
        """Every listed framework but the reference; a framework listed alone is its own
        target (each precision against itself at fp32)."""
        reference = self.reference_framework
        if reference is None or len(self.frameworks) == 1:
            return self.frameworks
        return tuple(f for f in self.frameworks if f != reference)

    def model_for(self, framework: str) -> Any:
        return self.models.get(framework_of(framework), self.model)


# reference_path is derived from `reference` (a saved-outputs file), never given.
def arguments() -> tuple[str, ...]:
    """The marker's arguments: CompareSpec's fields and session/option_table.py's marker
    options (read each time: a plugin may declare one after this module is imported)."""
    fields = (n for n in CompareSpec.__dataclass_fields__ if n not in ("reference_path", "given"))
    return (*fields, *(declared.name for declared in marker_options()))


def _check_framework_keys(
    frameworks: tuple[str, ...],
    models: Mapping[str, Any],
    options: Mapping[str, Mapping[str, Any]],
    check: Checker,
) -> None:
    """models= and options= are keyed by listed frameworks; options are the runner's own."""
    listed = {framework_of(f) for f in frameworks}
    for argument, table in (("models", models), ("options", options)):
        for key in table:
            if key in frameworks and key not in listed:  # 'callable:pkg.mod:fn'
                raise MarkerError(
                    f"{check.where}: @pytest.mark.compare_frameworks({argument}=...) names "
                    f"{key!r}: key it by the runner's name, {framework_of(key)!r} (it applies "
                    f"to every {framework_of(key)} listed)"
                )
            if key not in listed:
                raise MarkerError(
                    f"{check.where}: @pytest.mark.compare_frameworks({argument}=...) names "
                    f"{key!r}, which is not one of frameworks={list(frameworks)}"
                )
    for key, runner_options in options.items():
        try:
            check_runner_options(key, runner_options)
        except RunnerOptionError as exc:
            raise MarkerError(
                f"{check.where}: @pytest.mark.compare_frameworks(options=...): {exc}"
            ) from None


def _by_runner(table: Mapping[str, Any], frameworks: tuple[str, ...]) -> dict[str, Any]:
    """models= and options= keyed by 'tensorrt' are keyed by 'trt' when trt is listed (any
    other key stays as written, for the message that it is not listed)."""
    listed = {framework_of(f) for f in frameworks}

    def runner(key: str) -> str:
        return canonical_framework(key) if canonical_framework(key) in listed else key

    return {runner(key): value for key, value in table.items()}


def compare_spec(
    args: Sequence[Any], kwargs: Mapping[str, Any], where: str, base: Path | None = None
) -> CompareSpec:
    """The compare_frameworks marker as a CompareSpec; `base` resolves relative model paths."""
    check = Checker(where, "compare_frameworks")
    if args:
        raise check.fail(None, tuple(args), "keyword arguments only: model=..., frameworks=[...]")
    known = arguments()
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        raise MarkerError(
            f"{where}: @pytest.mark.compare_frameworks got unknown argument(s) "
            f"{', '.join(unknown)}; it takes {', '.join(sorted(known))}"
        )
    frameworks = framework_list(kwargs.get("frameworks"), check)
    golden = kwargs.get("golden", False)
    if not isinstance(golden, (bool, np.bool_)):
        raise check.fail("golden", golden, "True or False")
    isolate = kwargs.get("isolate")
    if isolate is not None and not isinstance(isolate, (bool, np.bool_)):
        raise check.fail("isolate", isolate, "True, False or None")
    reference = kwargs.get("reference")
    if isinstance(reference, str) and canonical_framework(reference) in frameworks:
        reference = canonical_framework(reference)  # reference='tensorrt' is 'trt'
    reference_path = None
    if reference is not None and reference not in frameworks:
        if not isinstance(reference, (str, os.PathLike)) or not _looks_saved(reference, base):
            raise check.fail(
                "reference",
                reference,
                f"one of frameworks={list(frameworks)}, or saved outputs (Polygraphy JSON, "
                "a golden, .npz, .npy or an ONNX test-data folder)",
            )
        if golden:
            raise check.fail("reference", reference, "no saved outputs together with golden=True")
        reference_path, reference = model_path(reference, base), None
    model = kwargs.get("model")
    models = _by_runner(
        mapping_of(kwargs.get("models"), "models", check, "a dict of framework to model"),
        frameworks,
    )
    for name, value in [("model", model), *((f"models[{k!r}]", v) for k, v in models.items())]:
        if value is not None and not is_model(value):
            raise check.fail(
                name,
                value,
                "a model: a path, an onnx.ModelProto, serialized bytes, a torch module or "
                "a callable",
            )
    if model is None and not all(f in models or f.startswith("callable:") for f in frameworks):
        raise check.fail("model", None, "the model to run (a path, ModelProto, bytes, module)")
    seed = kwargs.get("seed", 1)
    if not is_int(seed) or seed < 0:
        raise check.fail("seed", seed, "an int >= 0")
    iterations = kwargs.get("iterations", 1)
    if not is_int(iterations) or iterations < 1:
        raise check.fail("iterations", iterations, "an int >= 1")
    options = _by_runner(
        mapping_of(
            kwargs.get("options"), "options", check, "a dict of framework to its options dict"
        ),
        frameworks,
    )
    if not all(isinstance(v, Mapping) for v in options.values()):
        raise check.fail("options", options, "a dict of framework to its options dict")
    _check_framework_keys(frameworks, models, options, check)
    layer_args = layer_options(kwargs, check)
    if kwargs.get("outputs") == "all" and not golden and reference_path is None:
        _check_layer_pairs(frameworks, reference, check)
    inputs = kwargs.get("inputs")
    if isinstance(inputs, (str, os.PathLike)):
        inputs = model_path(inputs, base)
    _check_fp64(kwargs, frameworks, golden, reference_path, check)
    return CompareSpec(
        model=model_path(model, base) if isinstance(model, (str, os.PathLike)) else model,
        frameworks=frameworks,
        reference=reference,
        golden=bool(golden),
        tolerance=tolerance(kwargs.get("tolerance"), check),
        outputs=outputs(kwargs.get("outputs"), check),
        seed=int(seed),
        val_range=val_range(kwargs.get("val_range"), check),
        iterations=int(iterations),
        inputs=inputs,
        models={
            k: model_path(v, base) if isinstance(v, (str, os.PathLike)) else v
            for k, v in models.items()
        },
        options={k: dict(v) for k, v in options.items()},
        isolate=None if isolate is None else bool(isolate),
        reference_path=reference_path,
        given=_given(kwargs, check, per_layer=kwargs.get("outputs") == "all"),
        **layer_args,
    )


def _given(kwargs: Mapping[str, Any], check: Checker, *, per_layer: bool) -> dict[str, Any]:
    """The marker's values of the table's marker options, each checked against its choices
    (layer_budget= against what it takes, with outputs="all")."""
    found = {}
    for declared in marker_options():
        value = kwargs.get(declared.name)
        if value is None:
            continue
        takes = check_value(declared, value)
        if takes is not None:
            raise check.fail(declared.name, value, takes)
        if declared.name == "layer_budget" and not per_layer:
            raise check.fail(
                declared.name, value, "a per-layer comparison: add outputs='all' to the marker"
            )
        found[declared.name] = value
    return found


def _check_fp64(
    kwargs: Mapping[str, Any],
    frameworks: tuple[str, ...],
    golden: Any,
    reference_path: str | None,
    check: Checker,
) -> None:
    """The fp64 check needs a reference framework other than the target to run at float64
    and at the target's precision: not a golden, saved outputs, per layer, or a framework
    listed alone (it would be compared with itself: a ratio of 1 whatever it computes)."""
    value = kwargs.get("tolerance")
    try:
        table = ToleranceTable(value)
    except ToleranceError:  # said by the tolerance argument's own check
        return
    if not outputs_checked_by({"": table.default, **table.per_output}, FP64):
        return
    why = None
    if golden:
        why = "golden=True (a golden is no framework to run)"
    elif reference_path is not None:
        why = "reference= saved outputs (they are no framework to run)"
    elif kwargs.get("outputs") == "all":
        why = 'outputs="all" (it compares model outputs, not each layer)'
    elif len(frameworks) == 1:
        why = (
            f"frameworks={list(frameworks)} alone (the target would be its own reference: a "
            "ratio of 1 whatever it computes); list the reference too, e.g. "
            f'frameworks=["{frameworks[0]}", "torch"], reference="torch"'
        )
    if why is not None:
        raise MarkerError(
            f"{check.where}: @pytest.mark.compare_frameworks(tolerance=...): check='fp64' runs "
            f"the reference framework at float64 and at the target's precision; not with {why}"
        )


def _default_reference(frameworks: tuple[str, ...]) -> str:
    """The documented default reference: runners.DEFAULT_REFERENCE when listed, else the
    first framework."""
    default = runners.DEFAULT_REFERENCE
    return default if default in frameworks else frameworks[0]


def _layers_pair(target: str | None, reference: str | None) -> bool:
    """Whether per layer can match the layers of runners named so (`layer_names`): ONNX
    tensor names with each other, a torch module's by the export's module scopes against
    every tensor of the graph, or by module names against another module."""
    onnx = ("onnx", "engine")
    if target in onnx and reference in onnx:
        return True
    return target == "modules" and reference in ("modules", "onnx")


def layer_pairs() -> str:
    """The pairs per layer can match, for the message of one it cannot."""
    named: dict[str, list[str]] = {}
    for name in runners.known_runners():
        kind = runners.capabilities(name).layer_names
        if kind is not None:
            named.setdefault(kind, []).append(name)
    by_name = [*named.get("onnx", ()), *named.get("engine", ())]
    modules = " / ".join(named.get("modules", []))
    return (
        f"{_listed(by_name, ' and ')} with each other (ONNX tensor names), a {modules} target "
        f"against a reference {_listed(named.get('onnx', []), ' or ')} (the module scopes "
        f"torch.onnx.export records), {modules} against {modules} (module names)"
    )


def _listed(names: list[str], last: str) -> str:
    """'a, b and c'."""
    return last.join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def _check_layer_pairs(frameworks: tuple[str, ...], reference: str | None, check: Checker) -> None:
    """outputs="all" needs each target's layers to be matched with the reference's."""
    chosen = reference or _default_reference(frameworks)
    targets = [f for f in frameworks if f != chosen] or [chosen]
    reference_names = runners.capabilities(chosen).layer_names
    for target in targets:
        if _layers_pair(runners.capabilities(target).layer_names, reference_names):
            continue
        raise MarkerError(
            f"{check.where}: @pytest.mark.compare_frameworks(outputs='all') cannot match the "
            f"layers of {target} with those of {chosen}; per-layer comparison pairs "
            f"{layer_pairs()}"
        )


def check_saved_shapes(spec: CompareSpec, sets: tuple[Any, ...], where: str) -> None:
    """Saved outputs (reference= a file) were made from one set of inputs, whose shapes are
    the item's: several shape sets would compare the same inputs under other names."""
    if spec.reference_path is None or len(sets) < 2:
        return
    raise MarkerError(
        f"{where}: @pytest.mark.shapes gives {len(sets)} shape sets, and "
        f"reference={Path(spec.reference_path).name!r} compares on the inputs saved with its "
        "outputs, one set of shapes: give one shape set at most (the saved inputs' shapes)"
    )


_SAVED_SUFFIXES = (".json", ".safetensors", ".golden", ".npz", ".npy")


def _looks_saved(reference: str | os.PathLike[str], base: Path | None) -> bool:
    """A saved-outputs path rather than a framework name: a known suffix, a folder, a slash."""
    path = Path(reference)
    return (
        path.suffix in _SAVED_SUFFIXES
        or len(path.parts) > 1
        or Path(model_path(path, base)).is_dir()
    )
