"""Which inference frameworks are installed, found without importing them (fast start-up)."""

from __future__ import annotations

import importlib.metadata
import importlib.util

from .registry import libraries


def _version(distributions: tuple[str, ...]) -> str | None:
    for dist in distributions:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


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
    """Installed frameworks and, for the others, why not and how to install them."""
    have, missing = [], []
    for library in libraries():
        if importlib.util.find_spec(library.name) is None:
            missing.append(f"{library.name}: not installed ({library.install_hint})")
            continue
        version = _version(library.distributions) or "unknown"
        problem = _device_problem() if library.needs_cuda else None
        if problem is None:
            have.append(f"{library.name} {version}")
        else:
            missing.append(f"{library.name}: {problem}")
    line = f"trtcompare frameworks: {', '.join(have) or 'none'}"
    return f"{line}; unavailable: {'; '.join(missing)}" if missing else line
