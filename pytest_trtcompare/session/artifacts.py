"""Files that show a comparison: the arrays and, with matplotlib, pictures.

For each failing output (every compared one with `every_output`: --trt-artifacts=all):
`<output>.actual.npy`, `<output>.expected.npy`, and with matplotlib `<output>.heatmap.png`
(|error| where it lives) and `<output>.histogram.png` (log abs / rel errors with the
tolerance). For a per-layer comparison, `layers.png` (error ratio per tensor, the first
divergence marked). One folder per test id, so items never overwrite each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..engine import ComparisonResult, as_output_mapping
from ..goldens import safe_file_stem
from . import plots


@dataclass
class Artifacts:
    folder: Path
    files: list[Path] = field(default_factory=list)
    note: str | None = None  # e.g. how to get pictures

    def describe(self) -> str:
        lines = [f"artifacts: {self.folder}"]
        lines += [f"  {path.name}" for path in self.files]
        if self.note:
            lines.append(f"  ({self.note})")
        return "\n".join(lines)


def _errors(actual: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = actual.astype(np.float64)
    e = expected.astype(np.float64)
    with np.errstate(all="ignore"):
        abs_error = np.abs(a - e)
        rel_error = abs_error / np.where(e == 0, 2.220446049250313e-16, np.abs(e))
    return abs_error, rel_error


def write(
    result: ComparisonResult,
    actual: Mapping[str, Any],
    expected: Mapping[str, Any],
    folder: Path,
    pictures: bool = True,
    every_output: bool = False,
) -> Artifacts | None:
    """Write the artifacts of the failing outputs of `result` (of all its compared outputs
    with `every_output`; per layer, of its first divergence and failing model outputs, as
    a per-layer golden or saved reference gives every layer's arrays); None when there is
    nothing to write."""
    chosen = result.outputs.values() if every_output else result.failed_outputs
    failing = [out for out in chosen if out.problem is None]
    if result.per_layer and result.layers is not None and not every_output:
        # per layer, whatever arrays were kept: the first divergence and the model outputs
        shown = {result.first_divergence, *result.layers.model_outputs}
        failing = [out for out in failing if out.name in shown]
    if not failing and not (result.per_layer and result.first_divergence):
        return None
    folder.mkdir(parents=True, exist_ok=True)
    made = Artifacts(folder)
    draw = pictures and plots.available()
    if pictures and not draw:
        made.note = plots.INSTALL_HINT
    actual_arrays = as_output_mapping(actual, "actual")
    expected_arrays = as_output_mapping(expected, "expected")
    for out in failing:
        if out.name not in actual_arrays or out.name not in expected_arrays:
            continue
        a, e = actual_arrays[out.name].array, expected_arrays[out.name].array
        stem = safe_file_stem(out.name)
        for label, array in (("actual", a), ("expected", e)):
            path = folder / f"{stem}.{label}.npy"
            np.save(path, np.asarray(array), allow_pickle=False)
            made.files.append(path)
        if draw:
            abs_error, rel_error = _errors(a, e)
            title = f"{out.name}: {out.mismatches} / {out.count} out of tolerance"
            if abs_error.size:
                made.files.append(plots.heatmap(abs_error, folder / f"{stem}.heatmap.png", title))
                made.files.append(
                    plots.histogram(
                        abs_error,
                        rel_error,
                        out.tolerance.atol,
                        out.tolerance.rtol,
                        folder / f"{stem}.histogram.png",
                        title,
                    )
                )
    if draw and result.per_layer:
        names = list(result.outputs)
        ratios = [result.outputs[n].margin for n in names]
        made.files.append(
            plots.layer_plot(
                names, ratios, result.first_divergence, folder / "layers.png", "error per layer"
            )
        )
    return made


def folder_for(root: Path, test_id: str) -> Path:
    """One folder per test id (sanitized the way golden names are: ids never collide)."""
    return root / safe_file_stem(test_id)
