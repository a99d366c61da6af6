"""Saving and loading a golden of one large float32 output: our safetensors goldens vs our
old format 2 (.golden) vs Polygraphy's JSON.

Run: python bench/bench_goldens.py [--sizes 16M,64M] [--repeats 3] [--dir PATH] [--json FILE]

Each writes one output: the way `polygraphy run --save-outputs` does (a RunResults through
polygraphy.json.save_json / load_json), the way our `golden` fixture does (write_golden /
read_golden, with fsync, every checksum checked on load), and the way it did up to format 2
(the same atomic write of the old byte layout; its reader, still in the package), in the same
folder, side by side in one process. Times are the best of --repeats (3); peak memory of a
save and of a load is measured with tracemalloc in a separate call; file sizes are compared
with the raw array bytes.
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

from pytest_trtcompare.atomic import atomic_write, remove_stale_temps
from pytest_trtcompare.engine import as_output_mapping
from pytest_trtcompare.goldens import legacy, store
from pytest_trtcompare.goldens.store import read_golden, write_golden

MiB = 1024 * 1024
OURS = "pytest-trtcompare (.safetensors)"
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


def _format_2(array: np.ndarray, path: Path) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """Format 2 as 0.2 wrote it, through write_golden's steps (the outputs checked, stale
    temp files removed, the lock, the atomic chunked write), 64-byte padded tensors."""

    def save() -> None:
        outputs = as_output_mapping({"y": array}, "golden")
        arrays = {name: item.array for name, item in outputs.items()}
        entries = store._entries([store.Iteration(arrays, {})])
        head = legacy.encode_header(entries, {})

        def write(handle: Any) -> None:
            handle.write(head)
            store._write_body(handle, entries)
            handle.write(b"\0" * (-array.nbytes % legacy.ALIGN))

        remove_stale_temps(path.parent)
        with store._lock(path):
            atomic_write(path, write)

    return save, functools.partial(read_golden, path)


def run(sizes: list[int], folder: Path) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        array = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
        ours_path, theirs_path = folder / "bench.safetensors", folder / "bench.json"
        old_path = folder / "old.golden"
        peers = {
            OURS: (
                functools.partial(write_golden, ours_path, {"y": array}),
                functools.partial(read_golden, ours_path),
                ours_path,
            ),
            "format 2 (.golden)": (*_format_2(array, old_path), old_path),
            "polygraphy save_json/load_json": (*_polygraphy(array, theirs_path), theirs_path),
        }
        for name, (save, load, path) in peers.items():
            # each save writes a new file, as the first --trt-update-goldens and Polygraphy do
            save_s = _best(save, before=functools.partial(path.unlink, missing_ok=True))
            load_s = _best(load)
            path.unlink()
            save_peak = _peak(save)
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
                    "save_peak_bytes": save_peak,
                }
            )
            print(
                f"{n:>11,} {name:<32} save {save_s:7.3f} s  load {load_s:7.3f} s  "
                f"file {path.stat().st_size / MiB:8.1f} MiB  save peak {save_peak / MiB:7.1f} MiB  "
                f"load peak {peak / MiB:8.1f} MiB",
                flush=True,
            )
            path.unlink()
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| elements | peer | save (s) | load (s) | save ÷ ours | load ÷ ours | file ÷ raw bytes "
        "| save peak (MiB) | load peak (MiB) | load peak − array (MiB) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ours = next(r for r in rows if r["elements"] == row["elements"] and r["peer"] == OURS)
        lines.append(
            f"| {row['elements']:,} | {row['peer']} | {row['save_s']:.3f} | {row['load_s']:.3f} "
            f"| {row['save_s'] / ours['save_s']:.1f}x | {row['load_s'] / ours['load_s']:.1f}x "
            f"| {row['file_bytes'] / row['raw_bytes']:.4f} | {row['save_peak_bytes'] / MiB:.1f} "
            f"| {row['load_peak_bytes'] / MiB:.1f} "
            f"| {(row['load_peak_bytes'] - row['raw_bytes']) / MiB:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    global REPEATS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16M,64M")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--repeats", type=int, default=REPEATS, help="best of how many runs")
    args = parser.parse_args()
    REPEATS = args.repeats
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
