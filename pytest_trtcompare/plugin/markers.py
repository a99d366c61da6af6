"""Markers -> validated specs -> parametrization, and the xdist groups of compare items.

Items: one per target x precision x shape set, ids like `test_resnet[trt-fp16-bs8]`. When a
test expands to nothing (no target supports the selected precisions, --trt-frameworks selects
none of its targets), it becomes one item skipped with that reason: pytest never sees an
empty parameter set, and every other test runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from ..errors import MarkerError
from ..session.expand import Case, expand, shape_set_ids
from ..session.marker_values import precisions_marker, shapes_marker
from ..session.spec import check_saved_shapes, compare_spec
from .fixtures import CASE_FIXTURE
from .settle import fail
from .state import state_of

NOTHING_TO_RUN = "nothing-to-run"
#: test definition's node id -> the message of its bad marker argument
MARKER_ERRORS = pytest.StashKey[dict[str, str]]()


def raise_marker_error(item: pytest.Item) -> None:
    """At setup of a test whose marker has a bad argument: an error with the message alone
    (naming the test, the argument, what it got and what it takes), before its fixtures."""
    __tracebackhide__ = True
    errors = item.config.stash.get(MARKER_ERRORS, {})
    name = getattr(item, "originalname", item.name)
    message = errors.get(f"{item.parent.nodeid}::{name}") if item.parent else None
    if message is not None:
        fail(message)


def _selected_precisions(definition: Any, run_precisions: tuple[str, ...]) -> list[str]:
    marker = definition.get_closest_marker("precisions")
    if marker is None:
        return list(run_precisions)
    wanted = precisions_marker(marker.args, definition.nodeid)
    return [p for p in run_precisions if p in wanted]


def generate_tests(metafunc: pytest.Metafunc) -> None:
    """pytest_generate_tests: validate the markers once, then parametrize."""
    definition = metafunc.definition
    settings = state_of(metafunc.config).settings
    spec = None
    sets: tuple[Any, ...] = ()
    ids: tuple[str, ...] | None = None
    try:
        precisions = _selected_precisions(definition, settings.precisions)
        marker = definition.get_closest_marker("shapes")
        sets, ids = (
            shapes_marker(marker.args, marker.kwargs, definition.nodeid) if marker else ((), None)
        )
        marker = definition.get_closest_marker("compare_frameworks")
        if marker is not None:
            base = Path(str(definition.path)).parent
            spec = compare_spec(marker.args, marker.kwargs, definition.nodeid, base)
            check_saved_shapes(spec, sets, definition.nodeid)
    except MarkerError as exc:
        # this test errors at setup with the message alone; the module's other tests run
        metafunc.config.stash.setdefault(MARKER_ERRORS, {})[definition.nodeid] = str(exc)
        return
    if settings.input_shapes is not None:  # one shape set from the command line
        sets, ids = (settings.input_shapes,), ("cli",)
    if spec is not None:
        spec = dataclasses.replace(
            spec,
            seed=spec.seed if settings.seed is None else settings.seed,
            val_range=spec.val_range if settings.val_range is None else settings.val_range,
        )
        cases, reason = expand(spec, precisions, sets, ids, settings.frameworks)
        if CASE_FIXTURE not in metafunc.fixturenames:
            metafunc.fixturenames.append(CASE_FIXTURE)
        if not cases:
            skip = pytest.mark.skip(reason=f"compare_frameworks: {reason}")
            params = [pytest.param((spec, None), marks=skip, id=NOTHING_TO_RUN)]
            metafunc.parametrize(CASE_FIXTURE, params, indirect=True)
            return
        params = [pytest.param((spec, c), id=c.id) for c in cases]
        metafunc.parametrize(CASE_FIXTURE, params, indirect=True)
        return
    if "trt_precision" in metafunc.fixturenames:
        if not precisions:
            reason = "@pytest.mark.precisions selects none of the run's precisions " + ",".join(
                settings.precisions
            )
            params = [pytest.param(None, marks=pytest.mark.skip(reason=reason), id=NOTHING_TO_RUN)]
            metafunc.parametrize("trt_precision", params)
        else:
            metafunc.parametrize("trt_precision", precisions, ids=precisions)
    if "input_shapes" in metafunc.fixturenames and sets:
        metafunc.parametrize("input_shapes", list(sets), ids=list(ids or shape_set_ids(sets)))


def _model_identity(model: Any) -> str:
    """Which model an item runs, the same in every process and read without hashing a model
    file (each worker collects every item; a group shared by two models costs nothing)."""
    if isinstance(model, (str, os.PathLike)):
        return f"path:{Path(model).resolve()}"
    if isinstance(model, (bytes, bytearray)):
        return f"bytes:{hashlib.sha1(model).hexdigest()}"
    if type(model).__name__ == "ModelProto":
        return f"proto:{model.graph.name}:{model.ByteSize()}"
    return f"object:{type(model).__module__}.{type(model).__qualname__}"


def group_items(config: pytest.Config, items: list[pytest.Item]) -> None:
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
        spec, case = param
        if not isinstance(case, Case) or item.get_closest_marker("xdist_group") is not None:
            continue
        # the same name in every worker process (hash() is salted per process)
        group = hashlib.sha1(_model_identity(spec.model).encode()).hexdigest()[:12]
        item.add_marker(pytest.mark.xdist_group(name=f"trtcompare-{group}"))
