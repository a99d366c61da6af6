"""What the failure artifacts of one failing output cost: the arrays against the pictures.

Run: python bench/bench_artifacts.py [--sizes 64K,16M] [--dir PATH]

For each size, one float32 output whose elements all fail is compared, then
`session/artifacts.write` writes its artifacts three times: arrays only (`pictures=False`,
what you get without matplotlib), arrays and pictures (the default with matplotlib), and each
picture alone. Times are the best of 3; the peak of traced memory (tracemalloc: numpy's
buffers, not matplotlib's C side) and the bytes written are reported too. This is what
--trt-artifacts=failed adds to each failing output, and what --trt-artifacts=none saves.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pytest_trtcompare import compare_outputs
from pytest_trtcompare.session import artifacts, plots

MiB = 1024 * 1024
REPEATS = 3


def _size(text: str) -> int:
    units = {"K": 1024, "M": MiB}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def _best(call: Callable[[], Any]) -> float:
    times = []
    for _ in range(REPEATS):
        gc.collect()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def _peak(call: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    call()
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    return peak


def _bytes(folder: Path, suffix: str) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.name.endswith(suffix))


def measure(elements: int, root: Path) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    side = int(np.sqrt(elements))
    expected = rng.standard_normal((side, elements // side)).astype(np.float32)
    actual = expected + rng.standard_normal(expected.shape).astype(np.float32) * 0.1
    outputs, reference = {"y": actual}, {"y": expected}
    result = compare_outputs(outputs, reference, atol=1e-3, rtol=1e-3)
    arrays_dir, all_dir = root / f"arrays-{elements}", root / f"all-{elements}"

    def arrays() -> None:
        artifacts.write(result, outputs, reference, arrays_dir, pictures=False)

    def everything() -> None:
        artifacts.write(result, outputs, reference, all_dir)

    abs_error = np.abs(actual.astype(np.float64) - expected)
    rel_error = abs_error / np.abs(expected.astype(np.float64))
    row: dict[str, Any] = {"elements": elements}
    row["arrays_s"] = _best(arrays)
    row["all_s"] = _best(everything)
    row["heatmap_s"] = _best(lambda: plots.heatmap(abs_error, root / "h.png", "y"))
    row["histogram_s"] = _best(
        lambda: plots.histogram(abs_error, rel_error, 1e-3, 1e-3, root / "g.png", "y")
    )
    row["arrays_peak_mib"] = _peak(arrays) / MiB
    row["all_peak_mib"] = _peak(everything) / MiB
    row["npy_mib"] = _bytes(all_dir, ".npy") / MiB
    row["png_kib"] = _bytes(all_dir, ".png") / 1024
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64K,16M", help="elements per output: 64K,16M")
    parser.add_argument("--dir", help="where to write (default: a temporary folder)")
    args = parser.parse_args()
    if not plots.available():
        raise SystemExit("the pictures need matplotlib: pip install pytest-trtcompare[plots]")
    sizes = [_size(s.strip()) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        rows = [measure(n, Path(folder)) for n in sizes]
    header = (
        "| elements | arrays only | arrays + pictures | heatmap | histogram "
        "| peak, arrays | peak, all | .npy written | .png written |"
    )
    print(header)
    print("|---:" * 9 + "|")
    for r in rows:
        print(
            f"| {r['elements']:,} | {r['arrays_s']:.3f} s | {r['all_s']:.2f} s "
            f"| {r['heatmap_s']:.2f} s | {r['histogram_s']:.2f} s "
            f"| {r['arrays_peak_mib']:.0f} MiB | {r['all_peak_mib']:.0f} MiB "
            f"| {r['npy_mib']:.1f} MiB | {r['png_kib']:.0f} KiB |"
        )


if __name__ == "__main__":
    main()
