"""Pictures of a failing comparison (needs matplotlib: pip install pytest-trtcompare[plots]).

- heatmap of |actual - expected|: 2-D as is; 1-D as one row; rank >= 3 is reduced with the
  maximum over every axis but the last two (NCHW -> HW: where in the feature map).
- histograms of log10 |abs error| and log10 rel error, with the tolerance drawn.
- per-layer: the largest error ratio (error / allowed) of each tensor in topological order,
  the line at 1 (out of tolerance) and the first divergence marked.
Nothing here runs unless a comparison failed or the user asked for pictures.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np

INSTALL_HINT = "pictures need matplotlib: pip install pytest-trtcompare[plots]"


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)  # files only, never a window
    import matplotlib.pyplot as plt

    return plt


def _save(plt: Any, figure: Any, path: Path) -> Path:
    with warnings.catch_warnings():  # "Tight layout not applied": a picture, not the user's
        warnings.simplefilter("ignore", UserWarning)
        figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def heatmap_view(abs_error: np.ndarray) -> tuple[np.ndarray, str, str]:
    """(2-D image, y label, x label) of an error array of any rank (documented reduction)."""
    if abs_error.ndim == 0:
        return abs_error.reshape(1, 1), "", ""
    if abs_error.ndim == 1:
        return abs_error.reshape(1, -1), "", "index"
    if abs_error.ndim == 2:
        return abs_error, "axis 0", "axis 1"
    leading = tuple(range(abs_error.ndim - 2))
    # fmax skips NaN as nanmax does, without its warning on an all-NaN slice (left NaN)
    if abs_error.size:
        reduced = np.fmax.reduce(abs_error, axis=leading)
    else:
        reduced = abs_error.sum(axis=leading)
    label = f"axis {abs_error.ndim - 2}"
    return reduced, f"{label} (max over axes 0..{abs_error.ndim - 3})", f"axis {abs_error.ndim - 1}"


def heatmap(abs_error: np.ndarray, path: Path, title: str) -> Path:
    plt = _pyplot()
    image, ylabel, xlabel = heatmap_view(np.asarray(abs_error, dtype=np.float64))
    finite = image[np.isfinite(image)]
    top = float(finite.max()) if finite.size else 1.0
    figure, axes = plt.subplots(figsize=(7, 5.5 if image.shape[0] > 1 else 2.5))
    shown = axes.imshow(
        np.nan_to_num(image, nan=top, posinf=top),
        cmap="magma",
        aspect="auto",
        interpolation="nearest",
        vmin=0.0,
        vmax=top if top > 0 else 1.0,
    )
    colorbar = figure.colorbar(shown, ax=axes)
    colorbar.set_label("|actual - expected|")
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    return _save(plt, figure, path)


def histogram(
    abs_error: np.ndarray, rel_error: np.ndarray, atol: float, rtol: float, path: Path, title: str
) -> Path:
    plt = _pyplot()
    figure, panels = plt.subplots(1, 2, figsize=(10, 4))
    for axes, values, tolerance, name in (
        (panels[0], abs_error, atol, "abs"),
        (panels[1], rel_error, rtol, "rel"),
    ):
        finite = np.asarray(values, dtype=np.float64).reshape(-1)
        finite = finite[np.isfinite(finite) & (finite > 0)]
        if finite.size:
            logs = np.log10(finite)
            axes.hist(logs, bins=60, range=log_range(logs), color="#4477aa")
        if tolerance > 0:
            axes.axvline(
                math.log10(tolerance),
                color="#cc3311",
                linestyle="--",
                label=f"{'atol' if name == 'abs' else 'rtol'} = {tolerance:g}",
            )
            axes.legend()
        axes.set_xlabel(f"log10 {name} error (zeros left out)")
        axes.set_ylabel("elements")
        axes.set_yscale("log")
    figure.suptitle(title)
    return _save(plt, figure, path)


#: Log10 errors closer than this (in decades) are one value: every element off by the same
#: amount, up to rounding. numpy cannot cut such a range into 60 bins ("Too many bins for data
#: range"), so the histogram shows them in one decade around their value.
ONE_VALUE_DECADES = 1e-6


def log_range(logs: np.ndarray) -> tuple[float, float]:
    """The histogram's range of log10 errors: theirs, or one decade around a single value."""
    low, high = float(logs.min()), float(logs.max())
    if high - low < ONE_VALUE_DECADES:
        middle = (low + high) / 2
        return middle - 0.5, middle + 0.5
    return low, high


def layer_plot(
    names: list[str], ratios: list[float], first: str | None, path: Path, title: str
) -> Path:
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(max(7.0, 0.35 * len(names) + 2), 4.5))
    shown = [
        r if math.isfinite(r) and r > 0 else (1e6 if not math.isfinite(r) else 1e-12)
        for r in ratios
    ]
    positions = list(range(len(names)))
    axes.plot(positions, shown, marker="o", color="#4477aa")
    axes.axhline(1.0, color="#cc3311", linestyle="--", label="tolerance (error = allowed)")
    if first is not None and first in names:
        index = names.index(first)
        axes.axvline(index, color="#ee7733", linewidth=2, label=f"first divergence: {first}")
        axes.annotate(
            first, (index, shown[index]), textcoords="offset points", xytext=(6, 6), color="#ee7733"
        )
    axes.set_yscale("log")
    axes.set_xticks(positions)
    axes.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    axes.set_xlabel("tensor, in topological order")
    axes.set_ylabel("largest error / allowed error")
    axes.set_title(title)
    axes.legend()
    return _save(plt, figure, path)
