"""The `golden` fixture's type: saved reference outputs of one test."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from ..engine import ComparisonResult, ToleranceSpec, compare_outputs
from ..errors import TrtCompareError
from ..goldens import UNSET, Golden, GoldenMeta
from ..inputs import specs_of, synthetic_feed, val_range_record
from ..runners import TensorSpec
from ..session.golden_check import check_golden, inputs_problem, read_stored, stored_inputs
from ..session.option_table import call_values, comparison_options
from ..session.outcome import Kind, Outcome
from .goldens import ItemGoldens
from .options import Settings
from .settle import fail, settle
from .terminal import OUR_ERROR

#: the test's golden fixture, for the check after its body (unchecked_inputs)
GOLDEN_FIXTURE = pytest.StashKey["GoldenFixture"]()


def settle_call(item: pytest.Item, settings: Settings, outcome: Outcome) -> None:
    """settle() for a call in a test body (golden.check, compare): an error of that call (a
    ToleranceError ...) is marked, so that its report names the user's line."""
    __tracebackhide__ = True
    try:
        settle(item, settings, outcome)
    except pytest.fail.Exception as failure:
        if outcome.kind is Kind.ERROR:
            setattr(failure, OUR_ERROR, True)
        raise


def unchecked_inputs(item: pytest.Item) -> None:
    """After a test body that returned: fail when it took `golden.inputs()` without a
    `golden.check()` of the same name, which compares and stores nothing."""
    __tracebackhide__ = True
    fixture = item.stash.get(GOLDEN_FIXTURE, None)
    names = [] if fixture is None else fixture.unchecked()
    if names:
        calls = ", ".join(
            "golden.inputs(...)" if n is None else f"golden.inputs(..., name={n!r})" for n in names
        )
        which = "golden.check(outputs)" if names == [None] else "golden.check(outputs, name=...)"
        fail(
            f"{calls} without a {which} after it: nothing was compared or stored; check the "
            "outputs made from those inputs with golden.check (or make inputs without a "
            "golden: pytest_trtcompare.session.make_feeds)"
        )


class GoldenFixture:
    """`golden.inputs(runner)` gives the stored inputs (or fresh synthetic ones that will be
    stored); `golden.check(outputs)` compares with the stored golden, or writes it under
    --trt-update-goldens."""

    def __init__(self, goldens: ItemGoldens, settings: Settings) -> None:
        self._goldens = goldens
        self._settings = settings
        self._inputs: dict[str | None, dict[str, Any]] = {}
        self._meta: dict[str | None, GoldenMeta] = {}
        self._checked: set[str | None] = set()

    def unchecked(self) -> list[str | None]:
        """The names given to inputs() that no check() used (None: the unnamed golden)."""
        return [name for name in self._inputs if name not in self._checked]

    def __repr__(self) -> str:  # what a failure's traceback shows of the argument
        return "<golden fixture>"

    def path(self, name: str | None = None) -> Path:
        """Where this test's golden (or its golden `name`) lives."""
        try:
            return self._goldens.path(name)
        except TrtCompareError as exc:
            fail(str(exc))

    def _stored(self, path: Path) -> Golden | None:
        try:
            return read_stored(self._goldens, path)
        except TrtCompareError as exc:
            fail(str(exc))

    def inputs(
        self,
        runner_or_specs: Any,
        *,
        name: str | None = None,
        seed: int | None = None,
        val_range: Any = None,
        shapes: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The stored inputs when the golden has them and they fit; else fresh synthetic ones,
        which `check` stores with the outputs. `seed` defaults to --trt-seed, else 1;
        `val_range` to --trt-val-range."""
        seed = seed if seed is not None else (self._settings.seed or 1)
        if val_range is None:
            val_range = self._settings.val_range
        specs: list[TensorSpec] = specs_of(runner_or_specs, shapes)
        path = self.path(name)
        try:
            kept = stored_inputs(
                self._goldens,
                path,
                self._stored(path),
                lambda stored: inputs_problem(specs, stored, shapes),
            )
        except TrtCompareError as exc:
            fail(str(exc))
        feed = kept[0] if kept else None
        if feed is None:
            try:
                feed = synthetic_feed(specs, seed=seed, val_range=val_range, shapes=shapes)
            except TrtCompareError as exc:
                fail(f"{type(exc).__name__}: {exc}")
        self._inputs[name] = feed
        describe = getattr(runner_or_specs, "describe", None)
        self._meta[name] = GoldenMeta(
            runner=describe() if callable(describe) else None,
            seed=seed,
            shapes={k: list(v) for k, v in (shapes or {}).items()},
            val_range=val_range_record(val_range),
        )
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
        """Compare with the stored golden (or write it under --trt-update-goldens); the
        result, or None when a golden was written. Keywords: tolerance fields and the
        comparison options, as the compare fixture's."""
        __tracebackhide__ = True
        if name in self._checked:  # a second check would overwrite the first's golden
            which = "golden.check()" if name is None else f"golden.check(name={name!r})"
            fail(
                f"{which} was already called in this test: each check of a test has its own "
                "golden, so give each one a name= (golden.check(outputs, name='step2'))"
            )
        self._checked.add(name)
        outcome = self._outcome(outputs, tolerance, name, precision, fields)
        settle_call(self._goldens.item, self._settings, outcome)
        return None if outcome.kind is Kind.GOLDEN_WRITTEN else outcome.worst

    def _outcome(
        self,
        outputs: Any,
        tolerance: ToleranceSpec,
        name: str | None,
        precision: str,
        keywords: dict[str, Any],
    ) -> Outcome:
        path = self.path(name)
        try:  # this call's errors, before any golden is written
            given, fields = call_values(keywords)
            table = self._settings.tolerances.resolve(
                precision, tolerance, test=self._goldens.item.nodeid, **fields
            )
        except TrtCompareError as exc:
            return Outcome.error(exc, "golden")
        meta = self._meta.get(name, GoldenMeta())
        return check_golden(
            self._goldens,
            path,
            outputs,
            {"": table.default, **table.per_output},
            inputs=self._inputs.get(name),
            meta=meta.but(name=name, precision=precision),
            target=None if meta.runner is UNSET else meta.runner,
            compare=functools.partial(
                compare_outputs, **comparison_options(given, self._settings.values)
            ),
        )
