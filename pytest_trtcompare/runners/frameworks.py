"""Which inference frameworks are installed, found without importing them (fast start-up)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass


@dataclass(frozen=True)
class FrameworkStatus:
    name: str
    distribution: str
    version: str | None
    reason: str | None  # why it is unavailable; None when available

    @property
    def available(self) -> bool:
        return self.reason is None


# (framework name, module to find, distributions that provide it, extra to install)
_KNOWN = (
    ("onnxruntime", "onnxruntime", ("onnxruntime", "onnxruntime-gpu"), None),
    ("onnx", "onnx", ("onnx",), None),
    ("torch", "torch", ("torch",), "torch"),
    ("tensorrt", "tensorrt", ("tensorrt", "tensorrt-cu12", "tensorrt-cu13"), "tensorrt"),
)


def _version(distributions: tuple[str, ...]) -> str | None:
    for dist in distributions:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def install_hint(extra: str | None, module: str) -> str:
    return f"pip install pytest-trtcompare[{extra}]" if extra else f"pip install {module}"


def framework_status() -> list[FrameworkStatus]:
    """Installed frameworks and, for the others, why not and how to install them."""
    found = []
    for name, module, dists, extra in _KNOWN:
        if importlib.util.find_spec(module) is None:
            reason = f"not installed ({install_hint(extra, module)})"
            found.append(FrameworkStatus(name, dists[0], None, reason))
            continue
        version = _version(dists) or "unknown"
        found.append(FrameworkStatus(name, dists[0], version, _device_problem(name)))
    return found


def _device_problem(name: str) -> str | None:
    """TensorRT needs a CUDA device; the probe creates no TensorRT object."""
    if name != "tensorrt":
        return None
    from ..errors import FrameworkUnavailable
    from .cuda import load_cuda_api

    try:
        load_cuda_api()
    except FrameworkUnavailable as exc:
        return str(exc)
    return None


def header_line() -> str:
    statuses = framework_status()
    have = ", ".join(f"{s.name} {s.version}" for s in statuses if s.available)
    missing = "; ".join(f"{s.name}: {s.reason}" for s in statuses if not s.available)
    line = f"trtcompare frameworks: {have or 'none'}"
    return f"{line}; unavailable: {missing}" if missing else line
