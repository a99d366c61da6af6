"""The golden check, written once: missing, damaged, update or compare.

`check_golden` decides every golden situation for the three entry points: the `golden`
fixture (plugin/golden_fixture.py), `compare_frameworks(golden=True)` (cases.py) and
`trtcompare check` (cli/__init__.py). They differ only in their `GoldenAccess`: how a golden's
path is shown, the command that regenerates it, what is added to its metadata and counted.

- old format: a `.golden` (formats 1 and 2) is read where no `.safetensors` golden is; the
  store is told (`old_format`), so the summary names it and how to rewrite it, and a write
  replaces it with the `.safetensors` file.
- damaged (or something else where the golden should be): the outcome GOLDEN_MISSING with the
  store's message and the regenerating command; nothing is compared. Under --trt-update-goldens a
  damaged golden (or a dangling link) is replaced, as if it were missing.
- missing, not updating: GOLDEN_MISSING, nothing written.
- updating (--trt-update-goldens; --trt-update-goldens-missing and the golden is absent): the
  outputs are written, the golden is read back (every byte checked) and the outputs are
  compared with what was read. The outcome is GOLDEN_WRITTEN (the test passes) and carries
  that comparison, so the accuracy summary and the `comparison` fixture show the written
  golden; a write that fails is FAILED and keeps the old golden.
- otherwise the outputs are compared with the golden: PASSED or MISMATCH, the mismatch
  headed by "model changed since the golden was recorded" when the runner's model digest
  differs from the recorded one.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from .. import progress
from ..engine import ComparisonResult, Entry, compare_outputs, entry_record, outputs_checked_by
from ..errors import FeedError, ToleranceError, TrtCompareError, user_code_raised
from ..goldens import (
    FORMAT_VERSION,
    Golden,
    GoldenError,
    GoldenMeta,
    current_path,
    file_in_the_way,
    golden_file_problem,
    model_change_note,
    precision_note,
    read_golden,
    stored_file,
)
from ..inputs import Feed
from ..runners import TensorSpec, check_feed
from ..vocabulary import FP64
from .brief import output_line
from .layout import counted
from .outcome import Kind, Outcome, compared
from .runs import numbered

_log = logging.getLogger(__name__)

Outputs = Mapping[str, Any]
Compare = Callable[[Outputs, Outputs, Mapping[str, Entry]], ComparisonResult]


class GoldenAccess(Protocol):
    """The golden store as one entry point runs it (ItemGoldens in pytest, the CLI's own)."""

    @property
    def update_all(self) -> bool:
        """Write every golden checked (--trt-update-goldens; damaged ones are replaced)."""
        ...

    @property
    def update_missing(self) -> bool:
        """Write only the goldens that do not exist (--trt-update-goldens-missing)."""
        ...

    def show(self, path: Path) -> str:
        """The golden's path as messages print it."""
        ...

    def regenerate_hint(self) -> str:
        """The command that writes this golden."""
        ...

    def write(
        self, path: Path, iterations: Sequence[tuple[Outputs, Feed]], meta: GoldenMeta
    ) -> str:
        """Write one golden of these (outputs, inputs) iterations: "created", "updated" or
        "unchanged" (raises GoldenError or OSError, the old golden kept)."""
        ...

    def compared(self, path: Path) -> None:
        """The golden was used (unused goldens are reported, or fail --trt-strict-goldens)."""
        ...

    def old_format(self, path: Path, version: int) -> None:
        """An old `.golden` (format `version`) was read and is not being rewritten."""
        ...


def updating(store: GoldenAccess, path: Path) -> bool:
    """Whether this check writes the golden instead of comparing with it."""
    if store.update_all:
        return True
    file = stored_file(path)
    return store.update_missing and golden_file_problem(file) is None and not file.exists()


def read_stored(store: GoldenAccess, path: Path) -> Golden | None:
    """The golden of `path` (its .safetensors file, else an old .golden beside it); None when
    there is none, or when it is unreadable and --trt-update-goldens is about to replace it.
    Otherwise an unreadable golden raises GoldenError naming the file and the command that
    regenerates it."""
    path = stored_file(path)
    problem = golden_file_problem(path)
    if problem is None and not path.exists():
        return None
    replaceable = problem is None or path.is_symlink()  # a write replaces a link itself
    try:
        if problem:
            raise GoldenError(problem)
        golden = read_golden(path)
    except GoldenError as exc:
        if store.update_all and replaceable:
            return None  # damaged, or a dangling link: --trt-update-goldens replaces it
        why, blocker = str(exc), file_in_the_way(path)
        for shown in (path, blocker):  # as the other messages show paths
            why = why.replace(str(shown), store.show(shown))
        hint = store.regenerate_hint()  # on a line of its own: copied whole
        if not replaceable:
            remove = "it" if blocker == path else store.show(blocker)
            raise GoldenError(
                f"{why}; remove {remove}, then regenerate it with:\n  {hint}"
            ) from None
        raise GoldenError(f"{why}; regenerate it with:\n  {hint}") from None
    if golden.version < FORMAT_VERSION and not store.update_all:
        store.old_format(path, golden.version)
    return golden


def inputs_problem(
    specs: Sequence[TensorSpec] | None,
    stored: Sequence[Feed],
    shapes: Mapping[str, Any] | None,
    iterations: int = 1,
) -> str | None:
    """Why a golden's stored inputs (one feed per iteration) cannot feed this run (None: they
    can): another number of iterations than the run makes, another shape than `shapes` asks
    for, or a feed that does not fit `specs` (None: a runner that does not check its feeds)."""
    if len(stored) != iterations:
        return f"it holds {counted(len(stored), 'input iteration')}, this test makes {iterations}"
    for feed in stored:
        for input_name, shape in (shapes or {}).items():
            if input_name in feed and tuple(feed[input_name].shape) != tuple(shape):
                return (
                    f"its stored input {input_name!r} has shape {tuple(feed[input_name].shape)}, "
                    f"this test asks for {tuple(shape)}"
                )
        if specs is None:
            continue
        try:
            check_feed(specs, feed, "golden inputs")
        except FeedError as exc:
            return f"its stored inputs no longer fit the model ({exc})"
    return None


def stored_inputs(
    store: GoldenAccess,
    path: Path,
    golden: Golden | None,
    problem: Callable[[list[Feed]], str | None],
) -> list[Feed] | None:
    """The golden's stored inputs, one feed per iteration, when it has some and they fit
    (`problem` says why not); None when it has none, or they do not fit and the golden is
    being rewritten (fresh inputs are stored with it). Inputs that do not fit otherwise raise
    GoldenError saying how to refresh the golden: never silently other numbers."""
    if golden is None or not golden.inputs:
        return None
    feeds = [iteration.inputs for iteration in golden.iterations]
    why = problem(feeds)
    if why is None:
        return feeds
    if updating(store, path):
        return None
    raise GoldenError(
        f"golden {store.show(path)}: {why}; refresh it with:\n  {store.regenerate_hint()}"
    )


def check_golden(
    store: GoldenAccess,
    path: Path,
    outputs: Outputs | Sequence[Outputs] | Callable[[Feed], Outputs],
    tolerance: Mapping[str, Entry],
    *,
    inputs: Feed | Sequence[Feed] | Callable[[], Sequence[Feed]] | None = None,
    fits: Callable[[list[Feed]], str | None] | None = None,
    meta: GoldenMeta | None = None,
    target: Any = None,
    compare: Compare = compare_outputs,
) -> Outcome:
    """The outcome of checking `outputs` against the golden at `path` (see the module doc).

    `outputs` are one iteration's outputs, a list of them (one per iteration), or a function
    of the feed: it is then run on the golden's stored inputs, every iteration of them (when
    they fit: `fits` says why not), or else on `inputs`. `inputs` (a feed, a list of them, or
    a function making the list) is what a written golden stores, an iteration per feed.
    `tolerance` is the resolved table ("" the default). `target` is the runner (described
    after it ran) or its describe(): recorded in the golden and checked for a changed model.
    Errors of the runner propagate; the comparison's and the write's are outcomes. An old
    `.golden` path stands for the `.safetensors` golden that replaces it."""
    __tracebackhide__ = user_code_raised
    fp64 = outputs_checked_by(tolerance, FP64)
    if fp64:  # before "create it with": the golden could never pass this check
        output = f"output {fp64[0]!r}" if fp64[0] else "every output"
        error = ToleranceError(
            f"check='fp64' ({output}) compares against a float64 run of a reference "
            "framework; a golden has none: give a statistic or metric check here, and the "
            "fp64 check in a compare_frameworks test with a reference framework"
        )
        return Outcome.error(error, "golden")
    path = current_path(path)
    try:
        stored = read_stored(store, path)
    except GoldenError as exc:  # damaged, or not a file: nothing to compare with
        return Outcome(Kind.GOLDEN_MISSING, str(exc), source="golden")
    update = updating(store, path)
    if stored is None and not update:
        message = (
            f"golden {store.show(path)} does not exist (nothing was written); "
            f"create it with:\n  {store.regenerate_hint()}"
        )
        return Outcome(Kind.GOLDEN_MISSING, message, source="golden")
    if callable(outputs):
        try:
            kept = stored_inputs(store, path, stored, fits or (lambda _: None))
        except GoldenError as exc:
            return Outcome(Kind.FAILED, str(exc), source="golden")
        feeds = kept if kept is not None else _feeds(inputs)
        produced: list[Outputs] = []
        for index, feed in enumerate(feeds):  # a loop: a comprehension's frame has no hide
            produced.append(numbered(outputs, feed, index, len(feeds)))
    else:
        produced = [outputs] if isinstance(outputs, Mapping) else list(outputs)
        feeds = _feeds(inputs) if inputs is not None else [{} for _ in produced]
    describe = getattr(target, "describe", None)
    runner = describe() if callable(describe) else target
    written = None
    try:
        if update:
            record = (meta or GoldenMeta()).but(tolerance=entry_record(tolerance[""]))
            if runner is not None:
                record = record.but(runner=runner)
            for got in produced:
                unfit = _never_matches_itself(compare(got, got, tolerance), store, path)
                if unfit is not None:
                    return unfit
            done = _write(store, path, list(zip(produced, feeds, strict=True)), record)
            if isinstance(done, Outcome):
                return done
            written, stored = done
        assert stored is not None and stored.path is not None
        store.compared(stored.path)
        if len(stored.iterations) != len(produced):
            message = (
                f"golden {store.show(stored.path)} holds "
                f"{counted(len(stored.iterations), 'iteration')}, this check gives "
                f"{len(produced)}; refresh it with:\n  {store.regenerate_hint()}"
            )
            return Outcome(Kind.FAILED, message, source="golden")
        results = []
        changed = ""
        for got, iteration in zip(produced, stored.iterations, strict=True):
            result = compare(got, iteration.outputs, tolerance)
            if written is None:  # outputs that also fail name the change in the header
                changed = changed or _dtype_changes(result, failing=True)
                if _dtype_changes(result, failing=False):
                    result = _fail_changed_dtypes(result)
            results.append(result)
    except TrtCompareError as exc:
        return Outcome.error(exc, "golden")
    outcome = compared(
        results,
        source="golden",
        target=runner if isinstance(runner, Mapping) else None,
        reference={"runner": f"golden {stored.path.name}"},
        golden=store.show(stored.path),
    )
    worst = next(i for i, result in enumerate(results) if result is outcome.worst)
    outcome = dataclasses.replace(
        outcome,
        arrays=(produced[worst], stored.iterations[worst].outputs),
        message=""
        if results[worst].passed
        else changed
        + model_change_note(stored.meta, runner)
        + precision_note(stored.meta, runner, (meta or GoldenMeta()).precision),
    )
    if written is None:
        if outcome.kind is Kind.MISMATCH:  # what to do when the change is intended
            hint = store.regenerate_hint()
            note = f"if the new outputs are right, update the golden with:\n  {hint}"
            outcome = dataclasses.replace(outcome, note=note)
        return outcome
    # written: the test passes, with the comparison against what was read back
    message = f"{written}: {store.show(path)}"
    return dataclasses.replace(outcome, kind=Kind.GOLDEN_WRITTEN, message=message, arrays=None)


def _never_matches_itself(
    itself: ComparisonResult, store: GoldenAccess, path: Path
) -> Outcome | None:
    """FAILED, nothing written, when the outputs fail against themselves under the test's
    tolerance (NaN without nan_equal=True): such a golden would fail every later run."""
    if itself.passed:
        return None
    why = "; ".join(
        f"{out.name} has NaN at {out.nan_actual} position{'' if out.nan_actual == 1 else 's'}"
        if out.nan_actual and out.invalid is None
        else output_line(out)
        for out in itself.failed_outputs
    )
    message = (
        f"golden {store.show(path)} not written: {why}, and NaN fail every comparison unless "
        "nan_equal=True, so the next check would fail against this golden; pass "
        "nan_equal=True if the NaN are expected, else fix what makes them"
    )
    if not any(out.nan_actual and out.invalid is None for out in itself.failed_outputs):
        message = (
            f"golden {store.show(path)} not written: the outputs fail against themselves under "
            f"the test's tolerance ({why}), so the next check would fail against this golden"
        )
    return Outcome(Kind.FAILED, message, source="golden")


#: dtypes the golden format stores as another: numpy has no float8, a torch float8 output is
#: stored as the float32 that holds its values exactly
_STORED_AS = {"float8_e4m3fn": "float32", "float8_e5m2": "float32"}


def _changed(out: Any) -> bool:
    stored_as = _STORED_AS.get(out.actual_dtype, out.actual_dtype)
    return (
        out.problem is None
        and out.actual_dtype != out.expected_dtype
        and (stored_as != out.expected_dtype)
    )


def _dtype_changes(result: ComparisonResult, failing: bool) -> str:
    """'dtype changed since the golden was recorded: y is int64, the golden has int32' lines
    for the outputs whose dtype changed and that fail (`failing`) or pass on their values."""
    return "".join(
        f"dtype changed since the golden was recorded: {out.name} is {out.actual_dtype}, "
        f"the golden has {out.expected_dtype}\n"
        for out in result.outputs.values()
        if _changed(out) and out.passed != failing
    )


def _fail_changed_dtypes(result: ComparisonResult) -> ComparisonResult:
    """An output whose dtype is not the golden's fails, even when its values match: an int64
    output where int32 was recorded is a change of the model or runner to look at. (One whose
    values fail too keeps its report; the header names the change.)"""
    outputs = {
        name: dataclasses.replace(
            out,
            passed=False,
            problem="dtype changed since the golden was recorded (the values match)",
            failure=f"dtype {out.actual_dtype}, the golden has {out.expected_dtype}",
            margin=math.inf,
        )
        if _changed(out) and out.passed
        else out
        for name, out in result.outputs.items()
    }
    return dataclasses.replace(result, outputs=outputs)


def _feeds(inputs: Feed | Sequence[Feed] | Callable[[], Sequence[Feed]] | None) -> list[Feed]:
    """The feeds of a golden's iterations: a feed is one iteration, None one without inputs."""
    given = inputs() if callable(inputs) else inputs
    if given is None or isinstance(given, Mapping):
        return [dict(given or {})]
    return [dict(feed) for feed in given]


def _write(
    store: GoldenAccess, path: Path, iterations: list[tuple[Outputs, Feed]], meta: GoldenMeta
) -> tuple[str, Golden] | Outcome:
    """Write the golden and read it back, every byte checked: what the outputs are then
    compared with is what was written. A failed write is FAILED (the old golden is kept)."""
    meta = meta.but(plugin_version=importlib.metadata.version("pytest-trtcompare"))
    shown = store.show(path)
    old = stored_file(path)  # the golden there now: this one, or an old .golden beside it
    existed = old.is_file()
    try:
        with progress.step(f"writing golden {shown}") as timing:
            written = store.write(path, iterations, meta)
    except (GoldenError, OSError) as exc:
        kept = "the old golden" + ("" if old == path else f" {store.show(old)}") + " is kept"
        kept = kept if existed else "nothing was written"
        message = f"cannot write golden {path}: {exc} ({kept})"
        return Outcome(Kind.FAILED, message, source="golden")
    _log.info(
        "golden %s %s: outputs %s%s, %d bytes, in %.2f s",
        shown,
        written,
        ", ".join(map(str, iterations[0][0])),
        f" of {len(iterations)} iterations" if len(iterations) > 1 else "",
        path.stat().st_size,
        timing.elapsed,
    )
    try:
        return written, read_golden(path)
    except GoldenError as exc:
        message = f"golden {path} was written but does not read back: {exc}"
        return Outcome(Kind.FAILED, message, source="golden")
