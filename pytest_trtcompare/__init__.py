"""pytest-trtcompare: accuracy regression testing of deployed ML models inside pytest."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .engine import (
    ComparisonResult,
    ElementError,
    OutputComparison,
    OutputMismatchError,
    Tolerance,
    assert_outputs_close,
    compare_outputs,
)
from .errors import InvalidOutputError, ToleranceError, ToleranceWarning, TrtCompareError

__version__ = "0.1.0"

#: The fixtures' types, for annotations (`def test_x(golden: GoldenFixture)`), and the
#: warning of a deprecated option name (for warning filters); imported on first use so that
#: the comparison engine alone never imports pytest.
_FIXTURE_TYPES = {
    "CompareFixture": "fixtures",
    "RunnersFixture": "fixtures",
    "GoldenFixture": "golden_fixture",
    "OptionDeprecationWarning": "names",
}


def __getattr__(name: str) -> Any:
    if name in _FIXTURE_TYPES:
        module = importlib.import_module(f".plugin.{_FIXTURE_TYPES[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    from .plugin.fixtures import CompareFixture, RunnersFixture
    from .plugin.golden_fixture import GoldenFixture
    from .plugin.names import OptionDeprecationWarning

__all__ = [
    "CompareFixture",
    "ComparisonResult",
    "ElementError",
    "GoldenFixture",
    "InvalidOutputError",
    "OptionDeprecationWarning",
    "OutputComparison",
    "OutputMismatchError",
    "RunnersFixture",
    "Tolerance",
    "ToleranceError",
    "ToleranceWarning",
    "TrtCompareError",
    "__version__",
    "assert_outputs_close",
    "compare_outputs",
]
