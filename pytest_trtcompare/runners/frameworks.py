"""Which inference frameworks are installed, found without importing them (fast start-up)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass

from .registry import libraries


@dataclass(frozen=True)
class FrameworkStatus:
    name: str
    distribution: str
    version: str | None
    reason: str | None  # why it is unavailable; None when available

    @property
    def available(self) -> bool:
        return self.reason is None


def _version(distributions: tuple[str, ...]) -> str | None:
    for dist in distributions:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def framework_status() -> list[FrameworkStatus]:
    """Installed frameworks and, for the others, why not and how to install them."""
    found = []
    for library in libraries():
        name, distribution = library.name, library.distributions[0]
        if importlib.util.find_spec(name) is None:
            reason = f"not installed ({library.install_hint})"
            found.append(FrameworkStatus(name, distribution, None, reason))
            continue
        version = _version(library.distributions) or "unknown"
        problem = _device_problem() if library.needs_cuda else None
        found.append(FrameworkStatus(name, distribution, version, problem))
    return found


def _device_problem() -> str | None:
    """Why no CUDA device can be used; the probe creates no object of the library."""
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
