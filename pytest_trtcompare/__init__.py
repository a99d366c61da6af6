"""pytest-trtcompare: accuracy regression testing of deployed ML models inside pytest."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import InvalidOutputError, ToleranceError, ToleranceWarning, TrtCompareError

__version__ = "0.1.0"

#: Names imported on first use, by module: the engine's (numpy), so that importing the plugin
#: (every pytest run where it is installed) imports no numpy; the fixtures' types, for
#: annotations (`def test_x(golden: GoldenFixture)`), and the warning of a deprecated option
#: name (for warning filters), so that the comparison engine alone never imports pytest.
_LAZY = {
    "ComparisonResult": ".engine",
    "ElementError": ".engine",
    "OutputComparison": ".engine",
    "OutputMismatchError": ".engine",
    "Statistic": ".engine",
    "Tolerance": ".engine",
    "assert_outputs_close": ".engine",
    "compare_outputs": ".engine",
    "register_statistic": ".engine",
    "CompareFixture": ".plugin.fixtures",
    "RunnersFixture": ".plugin.fixtures",
    "GoldenFixture": ".plugin.golden_fixture",
    "OptionDeprecationWarning": ".plugin.names",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    from .engine import (
        ComparisonResult,
        ElementError,
        OutputComparison,
        OutputMismatchError,
        Statistic,
        Tolerance,
        assert_outputs_close,
        compare_outputs,
        register_statistic,
    )
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
    "Statistic",
    "Tolerance",
    "ToleranceError",
    "ToleranceWarning",
    "TrtCompareError",
    "__version__",
    "assert_outputs_close",
    "compare_outputs",
    "register_statistic",
]
