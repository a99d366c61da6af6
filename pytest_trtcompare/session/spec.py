"""Marker arguments validated once into frozen specs, with one message per mistake.

`compare_frameworks(...)`, `precisions(...)` and `shapes(...)` are read here, without pytest:
every argument is checked for type and range, and a mistake raises `MarkerError` naming the
test, the argument, what it got and what it takes. numpy numbers are numbers; booleans must
be booleans.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.tolerance import PRECISIONS, ToleranceTable
from ..errors import MarkerError, RunnerOptionError, ToleranceError, UnknownFrameworkError
from ..runners import check_framework_name, check_runner_options

Shapes = Mapping[str, tuple[int, ...]]


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


ARGUMENTS = tuple(CompareSpec.__dataclass_fields__)


class _Checker:
    """Raises MarkerError in one format: '<test>: @pytest.mark.<marker>(<arg>=...): ...'."""

    def __init__(self, where: str, marker: str) -> None:
        self.where = where
        self.marker = marker

    def fail(self, argument: str | None, got: Any, takes: str) -> MarkerError:
        what = f"@pytest.mark.{self.marker}" + (f"({argument}=...)" if argument else "")
        return MarkerError(f"{self.where}: {what} got {_show(got)}; it takes {takes}")


def _show(value: Any) -> str:
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(value).__name__})"


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _model_path(model: str | os.PathLike[str], base: Path | None) -> str:
    """Relative model paths resolve against the test file's folder (the same from any cwd)."""
    path = Path(model)
    if not path.is_absolute() and base is not None:
        path = base / path
    return str(path)


def _is_model(value: Any) -> bool:
    if isinstance(value, (str, os.PathLike, bytes, bytearray)) or callable(value):
        return True
    return hasattr(value, "SerializeToString") or hasattr(value, "forward")


def _frameworks(value: Any, check: _Checker) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)) or not names:
        raise check.fail("frameworks", value, "a list of framework names, e.g. ['trt', 'onnxrt']")
    for name in names:
        if not isinstance(name, str):
            raise check.fail("frameworks", value, "a list of framework names (str)")
        if "," in name:
            listed = [part.strip() for part in name.split(",")]
            raise check.fail("frameworks", value, f"a list: frameworks={listed!r}")
        try:
            check_framework_name(name)
        except UnknownFrameworkError as exc:
            raise MarkerError(f"{check.where}: @pytest.mark.compare_frameworks: {exc}") from None
    if len(set(names)) != len(names):
        raise check.fail("frameworks", value, "each framework once")
    return tuple(names)


def _val_range(value: Any, check: _Checker) -> Any:
    takes = "(low, high) with low <= high, or a dict of input name or dtype to (low, high)"

    def pair(item: Any) -> tuple[float, float]:
        if (
            not isinstance(item, (list, tuple))
            or len(item) != 2
            or not all(_is_real(v) and np.isfinite(float(v)) for v in item)
            or float(item[0]) > float(item[1])
        ):
            raise check.fail("val_range", value, takes)
        return float(item[0]), float(item[1])

    if value is None:
        return None
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise check.fail("val_range", value, takes)
        return {k: pair(v) for k, v in value.items()}
    return pair(value)


def _outputs(value: Any, check: _Checker) -> str | tuple[str, ...] | None:
    if value is None or value == "all":
        return value  # type: ignore[no-any-return]
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise check.fail("outputs", value, "'all' or a list of output names")


def _tolerance(value: Any, check: _Checker) -> Any:
    try:
        ToleranceTable(value)
    except ToleranceError as exc:
        raise MarkerError(
            f"{check.where}: @pytest.mark.compare_frameworks(tolerance=...): {exc}"
        ) from None
    return value


def _mapping_of(value: Any, argument: str, check: _Checker, takes: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise check.fail(argument, value, takes)
    return dict(value)


def _check_framework_keys(
    frameworks: tuple[str, ...],
    models: Mapping[str, Any],
    options: Mapping[str, Mapping[str, Any]],
    check: _Checker,
) -> None:
    """models= and options= are keyed by listed frameworks; options are the runner's own."""
    listed = {f.split(":")[0] for f in frameworks}
    for argument, table in (("models", models), ("options", options)):
        for key in table:
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


def compare_spec(
    args: Sequence[Any], kwargs: Mapping[str, Any], where: str, base: Path | None = None
) -> CompareSpec:
    """The compare_frameworks marker as a CompareSpec; `base` resolves relative model paths."""
    check = _Checker(where, "compare_frameworks")
    if args:
        raise check.fail(None, tuple(args), "keyword arguments only: model=..., frameworks=[...]")
    unknown = sorted(set(kwargs) - set(ARGUMENTS))
    if unknown:
        raise MarkerError(
            f"{where}: @pytest.mark.compare_frameworks got unknown argument(s) "
            f"{', '.join(unknown)}; it takes {', '.join(sorted(ARGUMENTS))}"
        )
    frameworks = _frameworks(kwargs.get("frameworks"), check)
    golden = kwargs.get("golden", False)
    if not isinstance(golden, (bool, np.bool_)):
        raise check.fail("golden", golden, "True or False")
    isolate = kwargs.get("isolate")
    if isolate is not None and not isinstance(isolate, (bool, np.bool_)):
        raise check.fail("isolate", isolate, "True, False or None")
    reference = kwargs.get("reference")
    if reference is not None and reference not in frameworks:
        raise check.fail("reference", reference, f"one of frameworks={list(frameworks)}")
    if not golden and len(frameworks) < 2:
        raise MarkerError(
            f"{where}: @pytest.mark.compare_frameworks needs two frameworks (one is the "
            f"reference) or golden=True; got frameworks={list(frameworks)}"
        )
    model = kwargs.get("model")
    models = _mapping_of(kwargs.get("models"), "models", check, "a dict of framework to model")
    for name, value in [("model", model), *((f"models[{k!r}]", v) for k, v in models.items())]:
        if value is not None and not _is_model(value):
            raise check.fail(
                name,
                value,
                "a model: a path, an onnx.ModelProto, serialized bytes, a torch module or "
                "a callable",
            )
    if model is None and not all(f in models or f.startswith("callable:") for f in frameworks):
        raise check.fail("model", None, "the model to run (a path, ModelProto, bytes, module)")
    seed = kwargs.get("seed", 1)
    if not _is_int(seed) or seed < 0:
        raise check.fail("seed", seed, "an int >= 0")
    iterations = kwargs.get("iterations", 1)
    if not _is_int(iterations) or iterations < 1:
        raise check.fail("iterations", iterations, "an int >= 1")
    options = _mapping_of(
        kwargs.get("options"), "options", check, "a dict of framework to its options dict"
    )
    if not all(isinstance(v, Mapping) for v in options.values()):
        raise check.fail("options", options, "a dict of framework to its options dict")
    _check_framework_keys(frameworks, models, options, check)
    inputs = kwargs.get("inputs")
    if isinstance(inputs, (str, os.PathLike)):
        inputs = _model_path(inputs, base)
    return CompareSpec(
        model=_model_path(model, base) if isinstance(model, (str, os.PathLike)) else model,
        frameworks=frameworks,
        reference=reference,
        golden=bool(golden),
        tolerance=_tolerance(kwargs.get("tolerance"), check),
        outputs=_outputs(kwargs.get("outputs"), check),
        seed=int(seed),
        val_range=_val_range(kwargs.get("val_range"), check),
        iterations=int(iterations),
        inputs=inputs,
        models={
            k: _model_path(v, base) if isinstance(v, (str, os.PathLike)) else v
            for k, v in models.items()
        },
        options={k: dict(v) for k, v in options.items()},
        isolate=None if isolate is None else bool(isolate),
    )


def precisions_marker(args: Sequence[Any], where: str) -> tuple[str, ...]:
    """@pytest.mark.precisions('fp16', 'bf16') -> ('fp16', 'bf16')."""
    check = _Checker(where, "precisions")
    if not args:
        raise check.fail(None, (), f"one or more of {', '.join(PRECISIONS)}")
    names = []
    for value in args:
        if not isinstance(value, str) or value.strip().lower() not in PRECISIONS:
            raise check.fail(None, value, f"precision names from {', '.join(PRECISIONS)}")
        names.append(value.strip().lower())
    return tuple(dict.fromkeys(names))


def shapes_marker(
    args: Sequence[Any], kwargs: Mapping[str, Any], where: str
) -> tuple[tuple[Shapes, ...], tuple[str, ...] | None]:
    """@pytest.mark.shapes({"x": (1, 3)}, {"x": (8, 3)}, ids=[...]) -> shape sets and ids."""
    check = _Checker(where, "shapes")
    takes = "shape sets: dicts of input name to a shape of ints >= 0, e.g. {'x': (1, 3, 224, 224)}"
    unknown = sorted(set(kwargs) - {"ids"})
    if unknown:
        raise MarkerError(f"{where}: @pytest.mark.shapes got unknown argument(s) {unknown}")
    if not args:
        raise check.fail(None, (), takes)
    sets = []
    for value in args:
        if not isinstance(value, Mapping) or not value:
            raise check.fail(None, value, takes)
        shapes = {}
        for name, shape in value.items():
            if (
                not isinstance(name, str)
                or not isinstance(shape, (list, tuple))
                or not all(_is_int(d) and d >= 0 for d in shape)
            ):
                raise check.fail(None, value, takes)
            shapes[name] = tuple(int(d) for d in shape)
        sets.append(shapes)
    ids = kwargs.get("ids")
    if ids is not None:
        if (
            not isinstance(ids, (list, tuple))
            or len(ids) != len(sets)
            or not all(isinstance(i, str) and i for i in ids)
            or len(set(ids)) != len(ids)
        ):
            raise check.fail("ids", ids, f"{len(sets)} distinct non-empty strings, one per set")
        ids = tuple(ids)
    return tuple(sets), ids
