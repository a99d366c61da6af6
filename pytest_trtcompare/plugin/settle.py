"""The one road from a comparison's Outcome to a test result: records, artifacts, verdict.

Every entry point ends here: compare_frameworks items, the `compare` fixture, `golden.check`,
and an OutputMismatchError raised by `assert_outputs_close` in a test body.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shlex
import warnings
from pathlib import Path
from typing import Any, NoReturn

import pytest

from ..engine import ComparisonResult, OutputMismatchError, listed, num
from ..errors import LayerDivergenceWarning
from ..reports import properties, summary, timings
from ..session.brief import joined, outcome_line
from ..session.outcome import Kind, Outcome, ran_text, runner_key, runner_name
from .options import Settings
from .terminal import mark

_log = logging.getLogger(__name__)
ARTIFACT_FILES = pytest.StashKey[list[Path]]()
LIBRARY_TRACEBACK = pytest.StashKey[str]()
LIBRARY_TRACEBACK_HEADING = (
    "the library's traceback (--tb=long / -vv; frames of pytest-trtcompare left out)"
)


def display_id(item: pytest.Item) -> str:
    """'test_x[fp16]' or 'TestA::test_y': the node id within its file."""
    return item.nodeid.split("::", 1)[-1] if "::" in item.nodeid else item.nodeid


def quoted_nodeid(item: pytest.Item) -> str:
    """The item's node id as a command run where pytest was started takes it (pytest's ids
    are relative to the rootdir), quoted for a shell (brackets in ids would be globbed)."""
    path, separator, rest = item.nodeid.partition("::")
    start = Path(item.config.invocation_params.dir)
    if start != item.config.rootpath:
        path = Path(os.path.relpath(item.config.rootpath / path, start)).as_posix()
    return shlex.quote(path + separator + rest)


def record(item: pytest.Item, outcome: Outcome, verbosity: int = 0) -> None:
    """The accuracy records of an outcome, on the item (summary, JSON report, JUnit); of a
    per-layer comparison, the layers its report lists and one summary of all of them."""
    worst = outcome.worst
    if worst is None:
        return
    records = summary.records(
        worst,
        display_id(item),
        outcome.source,
        runner_name(outcome.target or None),
        runner_name(outcome.reference),
        verbosity,
        (_milliseconds(outcome.target), _milliseconds(outcome.reference)),
        item.nodeid,
        (runner_key(outcome.target or None), runner_key(outcome.reference)),
        ran_text(outcome.target),
    )
    if len(outcome.results) > 1:
        records = [dataclasses.replace(r, iterations=len(outcome.results)) for r in records]
    taken = [key for key, _ in item.user_properties]
    item.user_properties.extend(properties.to_properties(records, taken))
    item.user_properties.extend(timings.timing_properties(records[:1]))
    if worst.layers is not None:
        layers = _layer_summary(worst, display_id(item), item.nodeid, verbosity)
        item.user_properties.append(
            (properties.LAYERS_PROPERTY, json.dumps(layers, sort_keys=True))
        )
        if outcome.kind is Kind.PASSED and worst.first_divergence is not None:
            margin = num(worst.outputs[worst.first_divergence].margin, 3)
            warnings.warn_explicit(  # at the test, not in the plugin
                f"{display_id(item)}: first divergence {worst.first_divergence_node} "
                f"({margin}x its tolerance); the model outputs pass and decide the verdict "
                "(layers='report')",
                LayerDivergenceWarning,
                filename=str(item.path),
                lineno=(item.location[1] or 0) + 1,
            )


def _layer_summary(
    result: ComparisonResult, test: str, nodeid: str, verbosity: int = 0
) -> dict[str, Any]:
    """What a per-layer comparison compared, listed and left out, and its first divergence."""
    view = result.layers
    assert view is not None
    listing = listed(result, verbosity)
    return {
        "test": test,
        "nodeid": nodeid,
        "layers": view.mode,
        "compared": len(result.outputs),
        "failing": sum(not out.passed for out in result.outputs.values()),
        "listed": len(listing.names),
        "not_listed": listing.not_shown,
        "left_out": view.left_out,
        "unmatched": len(view.unmatched),  # torch modules with no ONNX counterpart
        "unmatched_modules": list(view.unmatched),
        "first_divergence": result.first_divergence,
        "first_divergence_node": result.first_divergence_node,
        "passed": result.passed,
    }


def _milliseconds(description: Any) -> float | None:
    value = (description or {}).get("inference_ms")
    return None if value is None else float(value)


def artifacts_root(item: pytest.Item, settings: Settings) -> Path:
    if settings.artifacts_root is not None:
        return settings.artifacts_root
    factory = getattr(item.config, "_tmp_path_factory", None)
    if factory is not None:
        return Path(factory.getbasetemp()) / "trtcompare-artifacts"
    return settings.rootpath / ".trtcompare-artifacts"


def failure_artifacts(
    item: pytest.Item, settings: Settings, result: ComparisonResult, arrays: Any
) -> str:
    """Write a comparison's arrays and pictures as --trt-artifacts asks (failing outputs;
    every output with `all`; nothing with `none`); the text to add to its report."""
    if arrays is None or settings.artifacts_mode == "none":
        return ""
    from ..session import artifacts

    folder = artifacts.folder_for(artifacts_root(item, settings), item.nodeid)
    every = settings.artifacts_mode == "all"
    try:
        made = artifacts.write(result, arrays[0], arrays[1], folder, every_output=every)
    except Exception as exc:  # pictures must never hide the comparison's own verdict
        _log.info("artifacts of %s could not be written to %s: %s", item.nodeid, folder, exc)
        return f"\n\n(artifacts could not be written to {folder}: {exc})"
    if made is None:
        return ""
    item.stash.setdefault(ARTIFACT_FILES, []).extend(made.files)
    _log.info("artifacts of %s: %d files in %s", item.nodeid, len(made.files), folder)
    return "\n\n" + made.describe()


def reduced_files(item: pytest.Item, settings: Settings, reduced: Any) -> str:
    """--trt-reduce: the reduced model and its inputs in the item's artifacts folder (whatever
    --trt-artifacts says: they are what the option was asked for); the text naming them and
    the command that reproduces the failure."""
    from ..session import artifacts
    from ..session.reduce import saved_files

    folder = artifacts.folder_for(artifacts_root(item, settings), item.nodeid)
    output = folder / "reduced.onnx"
    try:
        command = reduced.save(output)
    except OSError as exc:
        return f"\n\n(the reduced model could not be written to {folder}: {exc})"
    written = list(saved_files(output))
    item.stash.setdefault(ARTIFACT_FILES, []).extend(written)
    described = {**reduced.to_json(), "files": [str(p) for p in written], "command": command}
    item.user_properties.append((properties.REDUCED_PROPERTY, json.dumps(described)))
    names = ", ".join(path.name for path in written)
    kept = (
        ""
        if settings.artifacts_root is not None
        else "\n(pytest keeps its last 3 sessions' temporary folders: --trt-artifacts-dir "
        "DIR keeps these)"
    )
    return f"\n\nreduced graph in {folder}:\n  {names}\nreproduce with:\n  {command}{kept}"


def mismatch_text(item: pytest.Item, settings: Settings, outcome: Outcome) -> str:
    worst = outcome.worst
    assert worst is not None
    text = outcome.report_text(settings.verbosity)
    if outcome.reduced is not None:
        text += reduced_files(item, settings, outcome.reduced)
    return text + failure_artifacts(item, settings, worst, outcome.arrays)


def settle(item: pytest.Item, settings: Settings, outcome: Outcome, in_body: bool = True) -> None:
    """Record the outcome, then pass (return), skip, or fail the test with its message.

    A mismatch inside a test body raises OutputMismatchError (the user's line shows in the
    traceback); outside one (a compare_frameworks verdict) it fails with the report alone."""
    __tracebackhide__ = True
    record(item, outcome, settings.verbosity)
    if outcome.kind in (Kind.PASSED, Kind.GOLDEN_WRITTEN):
        worst = outcome.worst
        if settings.artifacts_mode == "all" and worst is not None:
            failure_artifacts(item, settings, worst, outcome.arrays)  # files only: it passed
        return
    if outcome.kind is Kind.SKIPPED:
        pytest.skip(outcome.message)
    if outcome.kind is Kind.MISMATCH:
        worst = outcome.worst
        assert worst is not None
        text = mismatch_text(item, settings, outcome)
        if not in_body:
            fail(text, outcome_line(outcome))
        error = OutputMismatchError(text, worst, outcome.arrays)
        error.settled = True
        mark(error, outcome_line(outcome))
        raise error
    if outcome.details:
        item.stash[LIBRARY_TRACEBACK] = outcome.details
    fail(outcome.message, outcome_line(outcome))


def add_library_traceback(report: pytest.TestReport, settings: Settings, details: str) -> None:
    """A framework's own traceback, with --tb=long or -vv, as a section of the failed report
    under the one-line message (not in it: pytest repeats a message whole in the short
    summary on CI and with -vv)."""
    if details and settings.library_tracebacks:
        report.sections.append((LIBRARY_TRACEBACK_HEADING, details))


def fail(message: str, one_line: str | None = None) -> NoReturn:
    """Fail with the message alone: no traceback through the plugin, and no chained error
    when called while handling one (pytest would print that too). `one_line` is what
    --tb=line and --tb=no print of it (by default the message's lines joined)."""
    __tracebackhide__ = True
    try:
        pytest.fail(message, pytrace=False)
    except pytest.fail.Exception as failure:
        mark(failure, one_line or joined(message))
        raise failure from None


def enrich_bare_mismatch(item: pytest.Item, settings: Settings, error: OutputMismatchError) -> None:
    """An OutputMismatchError from assert_outputs_close in a test body: record it, write its
    artifacts, and render its report at the run's verbosity (its traceback stays: it is the
    user's code)."""
    if getattr(error, "settled", False):
        return
    error.settled = True
    outcome = Outcome(Kind.MISMATCH, results=(error.result,), source="assert_outputs_close")
    record(item, outcome)
    mark(error, outcome_line(outcome))
    text = str(error)
    if text == error.result.report():
        text = error.result.report(settings.verbosity)
    text += failure_artifacts(item, settings, error.result, error.arrays)
    error.args = (text,)
