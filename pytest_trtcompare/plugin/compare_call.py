"""One `compare(...)` call of the compare fixture: the engine, the record, the verdict.

Imported on the fixture's first call (it needs numpy and the engine); its names are bound
here once, not imported again at every call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from ..engine import ComparisonResult, ToleranceSpec, compare_with_table
from ..errors import TrtCompareError
from ..session.option_table import call_values, comparison_options
from ..session.outcome import Outcome, compared
from .golden_fixture import settle_call
from .state import state_of


def run(
    item: pytest.Item,
    actual: Any,
    expected: Any,
    tolerance: ToleranceSpec,
    precision: str,
    names: Iterable[str] | None,
    keywords: Mapping[str, Any],
) -> ComparisonResult:
    __tracebackhide__ = True
    settings = state_of(item.config).settings
    try:
        given, fields = call_values(keywords)
        table = settings.tolerances.resolve(
            precision, tolerance, shared=True, test=item.nodeid, **fields
        )
        options = comparison_options(given, settings.values)
        result = compare_with_table(actual, expected, table, names=names, **options)
    except TrtCompareError as exc:
        outcome = Outcome.error(exc)
    else:
        outcome = compared([result], source="compare", arrays=(actual, expected))
    settle_call(item, settings, outcome)
    worst = outcome.worst
    assert worst is not None
    return worst
