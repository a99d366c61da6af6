from __future__ import annotations

import importlib
import importlib.util
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    deadline=None,
    max_examples=int(os.environ.get("HYPOTHESIS_MAX_EXAMPLES", "200")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile("default")

# pytester's in-process runs (runpytest) drop the modules first imported inside them when they
# end, and native extensions cannot load twice in one process (onnx aborts it; onnxruntime and
# torch raise). The plugin imports these lazily, so load them once here, in the outer process.
for _name in ("onnx", "onnxruntime", "torch"):
    if importlib.util.find_spec(_name) is not None:
        importlib.import_module(_name)


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytester runs print to an 80-column terminal, where pytest drops the message of a long
    node id from the short summary; the scenario tests read those messages."""
    monkeypatch.setenv("COLUMNS", "240")
