"""Processes the zoo tests start (isolated runners' workers, pytester subprocesses) get the
torchvision import hook of tests/zoo/torchvision_ops.py: PYTHONPATH points here."""

import importlib.util
import sys
from pathlib import Path

_HOOK = Path(__file__).resolve().parents[1] / "torchvision_ops.py"
_spec = importlib.util.spec_from_file_location("_trtcompare_torchvision_ops", _HOOK)
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _module
    _spec.loader.exec_module(_module)
    _module.install()
