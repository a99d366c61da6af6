"""Saving and loading a golden of one large float32 output: ours vs Polygraphy's JSON.

Run: python bench/bench_goldens.py [--sizes 16M,64M] [--dir PATH] [--json FILE]

Both write one output the way `polygraphy run --save-outputs` does (a RunResults through
polygraphy.json.save_json / load_json) and the way our `golden` fixture does (write_golden /
read_golden, with fsync), in the same folder, side by side in one process. Times are the best
of 3; peak memory of a load is measured with tracemalloc in a separate call; file sizes are
compared with the raw array bytes.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import tempfile
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pytest_trtcompare.goldens.store import read_golden, write_golden

MiB = 1024 * 1024
REPEATS = 3


def _best(call: Callable[[], Any], before: Callable[[], Any] = lambda: None) -> float:
    times = []
    for _ in range(REPEATS):
        before()
        gc.collect()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def _peak(call: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    result = call()
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    del result
    return peak


def _polygraphy(array: np.ndarray, path: Path) -> tuple[Callable[[], Any], Callable[[], Any]]:
    from polygraphy.comparator import IterationResult, RunResults
    from polygraphy.json import load_json, save_json
    from polygraphy.logger import G_LOGGER

    G_LOGGER.module_severity = G_LOGGER.ERROR
    results = RunResults()
    results.append(("runner", [IterationResult({"y": array}, runner_name="runner")]))

    def save() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            save_json(results, str(path))

    def load() -> Any:
        return load_json(str(path))

    return save, load


def run(sizes: list[int], folder: Path) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        array = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        ours_path, theirs_path = folder / "bench.golden", folder / "bench.json"
        peers = {
            "pytest-trtcompare": (
                functools.partial(write_golden, ours_path, {"y": array}),
                functools.partial(read_golden, ours_path),
                ours_path,
            ),
            "polygraphy save_json/load_json": (*_polygraphy(array, theirs_path), theirs_path),
        }
        for name, (save, load, path) in peers.items():
            # each save writes a new file, as the first --trt-update-goldens and Polygraphy do
            save_s = _best(save, before=functools.partial(path.unlink, missing_ok=True))
            load_s = _best(load)
            peak = _peak(load)
            rows.append(
                {
                    "elements": n,
                    "peer": name,
                    "save_s": save_s,
                    "load_s": load_s,
                    "file_bytes": path.stat().st_size,
                    "raw_bytes": array.nbytes,
                    "load_peak_bytes": peak,
                }
            )
            print(
                f"{n:>11,} {name:<32} save {save_s:7.3f} s  load {load_s:7.3f} s  "
                f"file {path.stat().st_size / MiB:8.1f} MiB  load peak {peak / MiB:8.1f} MiB",
                flush=True,
            )
            path.unlink()
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| elements | peer | save (s) | load (s) | save ÷ ours | load ÷ ours | file ÷ raw bytes "
        "| load peak (MiB) | load peak − array (MiB) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ours = next(
            r for r in rows if r["elements"] == row["elements"] and r["peer"] == "pytest-trtcompare"
        )
        lines.append(
            f"| {row['elements']:,} | {row['peer']} | {row['save_s']:.3f} | {row['load_s']:.3f} "
            f"| {row['save_s'] / ours['save_s']:.1f}x | {row['load_s'] / ours['load_s']:.1f}x "
            f"| {row['file_bytes'] / row['raw_bytes']:.4f} | {row['load_peak_bytes'] / MiB:.1f} "
            f"| {(row['load_peak_bytes'] - row['raw_bytes']) / MiB:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16M,64M")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(float(s.rstrip("M")) * (1 << 20)) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        rows = run(sizes, Path(folder))
    print()
    print(markdown(rows))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
