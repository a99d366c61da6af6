"""Which items a compare_frameworks test expands to: one per target x precision it supports x
shape set, with ids like `trt-fp16-bs8`, or the reason there are none."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..engine import PRECISIONS
from ..runners import framework_of
from .spec import CompareSpec


def supported_precisions(framework: str) -> tuple[str, ...]:
    """The precisions the framework's runner class declares (all of them for an unknown
    runner: creating it will skip with the known names)."""
    from .. import runners

    declared = runners.capabilities(framework)
    return PRECISIONS if declared is runners.Runner else declared.precisions


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
    test: str = ""  # the pytest node id, once an item runs it (its calibrated tolerances)

    @property
    def id(self) -> str:
        parts = [self.target.rpartition(":")[2], self.precision]  # callable:mod:fn -> fn
        return "-".join(parts + ([self.shape_id] if self.shape_id else []))


def expand(
    spec: CompareSpec,
    precisions: Sequence[str],
    shape_sets: Sequence[Mapping[str, Sequence[int]]],
    shape_ids: Sequence[str] | None = None,
    only: Sequence[str] | None = None,
) -> tuple[list[Case], str]:
    """One case per target x precision it supports x shape set, in that order; when there
    are none, the reason (which targets, which precisions they support)."""
    sets = [{k: tuple(int(d) for d in v) for k, v in s.items()} for s in shape_sets]
    ids = list(shape_ids) if shape_ids else shape_set_ids(sets)
    targets = [t for t in spec.targets if not only or framework_of(t) in only or t in only]
    if not precisions:
        return [], "no precision selected (@pytest.mark.precisions and --trt-precision share none)"
    if not targets:
        return [], (
            f"--trt-frameworks {','.join(only or ())} selects none of this test's targets "
            f"({', '.join(spec.targets)})"
        )
    cases = []
    for target in targets:
        for precision in precisions:
            if precision not in supported_precisions(target):
                continue
            variants: list[tuple[Any, str | None]] = list(zip(sets, ids, strict=True))
            for shapes, shape_id in variants or [(None, None)]:
                cases.append(Case(target, precision, shapes, shape_id, tuple(sets)))
    if cases:
        return cases, ""
    supported = "; ".join(
        f"{t}: {', '.join(supported_precisions(t.split(':')[0]))}" for t in targets
    )
    return [], f"no target runs at {', '.join(precisions)} (targets support {supported})"
