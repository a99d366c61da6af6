"""Passing elemwise comparison of two large float32 outputs: ours vs numpy vs Polygraphy.

Run: python bench/bench_compare.py [--sizes 16M,64M] [--json bench/results/compare.json]

Each peer compares the same arrays in the same process, one after another. Times are the
first call and the best of several calls, without tracing; peak extra memory is measured in
a separate traced call (tracemalloc sees numpy's buffers), relative to what was held before.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import platform
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pytest_trtcompare import assert_outputs_close, compare_outputs

ATOL = RTOL = 1e-3
MiB = 1024 * 1024


def ours(actual: np.ndarray, expected: np.ndarray) -> None:
    assert_outputs_close({"out": actual}, {"out": expected}, atol=ATOL, rtol=RTOL)


def numpy_allclose(actual: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


def polygraphy_simple(actual: np.ndarray, expected: np.ndarray) -> None:
    from polygraphy import comparator
    from polygraphy.logger import G_LOGGER

    G_LOGGER.module_severity = G_LOGGER.CRITICAL
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        simple = getattr(comparator, "SimpleCompareFunc", None) or comparator.CompareFunc.simple
        func = simple(atol=ATOL, rtol=RTOL, check_error_stat="elemwise")
        result = func(
            comparator.IterationResult({"out": actual}, runner_name="actual"),
            comparator.IterationResult({"out": expected}, runner_name="expected"),
        )
    assert bool(result["out"])


PEER_OURS = "pytest-trtcompare"
PEERS: dict[str, Callable[[np.ndarray, np.ndarray], None]] = {
    PEER_OURS: ours,
    "np.testing.assert_allclose": numpy_allclose,
    "polygraphy SimpleCompareFunc": polygraphy_simple,
}
REPEATS = {
    "pytest-trtcompare": 5,
    "np.testing.assert_allclose": 3,
    "polygraphy SimpleCompareFunc": 2,
}


def timed(func: Callable[[], None], repeats: int) -> tuple[float, float]:
    """(first call, best of `repeats` calls) in seconds."""
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return times[0], min(times)


def peak_extra_bytes(func: Callable[[], None]) -> int:
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    func()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak - before


def parse_size(text: str) -> int:
    text = text.strip().upper()
    factor = {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * factor)


def run(sizes: list[int]) -> list[dict[str, float | int | str]]:
    rows: list[dict[str, float | int | str]] = []
    rng = np.random.default_rng(0)
    for n in sizes:
        expected = rng.standard_normal(n, dtype=np.float32)
        actual = expected + rng.standard_normal(n, dtype=np.float32) * np.float32(1e-5)
        for name, func in PEERS.items():
            call = functools.partial(func, actual, expected)
            first, best = timed(call, REPEATS[name])
            peak = peak_extra_bytes(call)
            rows.append(
                {
                    "elements": n,
                    "peer": name,
                    "first_call_s": first,
                    "best_s": best,
                    "peak_extra_bytes": peak,
                    "input_bytes": expected.nbytes,
                }
            )
            print(
                f"{n:>11,} {name:<30} first {first:7.3f} s  best {best:7.3f} s  "
                f"peak extra {peak / MiB:8.1f} MiB",
                flush=True,
            )
    return rows


def markdown(rows: list[dict[str, float | int | str]]) -> str:
    lines = [
        "| elements | peer | first call (s) | best (s) | best ÷ ours | peak extra (MiB) "
        "| peak ÷ one input |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        ours_row = next(
            r for r in rows if r["elements"] == row["elements"] and r["peer"] == PEER_OURS
        )
        ratio = float(row["best_s"]) / float(ours_row["best_s"])
        share = float(row["peak_extra_bytes"]) / float(row["input_bytes"])
        lines.append(
            f"| {int(row['elements']):,} | {row['peer']} | {float(row['first_call_s']):.3f} | "
            f"{float(row['best_s']):.3f} | {ratio:.1f}x | "
            f"{float(row['peak_extra_bytes']) / MiB:.1f} | {share:.3f} |"
        )
    return "\n".join(lines)


def scenarios(n: int) -> str:
    """Ours alone on the other paths: fp16 vs fp32, float64 (exact path), a failing report."""
    rng = np.random.default_rng(1)
    base = rng.standard_normal(n, dtype=np.float32)
    cases = {
        "float16 vs float32, passing": (base.astype(np.float16), base, {}),
        "float64 vs float64, passing (float64 path)": (
            base.astype(np.float64) + 1e-6,
            base.astype(np.float64),
            {},
        ),
        "float32, 0.1% of elements failing (full report)": (_drifted(base, rng), base, {}),
    }
    lines = ["| case | elements | first call (s) | peak extra (MiB) |", "|---|---:|---:|---:|"]
    for label, (actual, expected, _) in cases.items():

        def call(a: np.ndarray = actual, e: np.ndarray = expected) -> None:
            compare_outputs({"out": a}, {"out": e}, atol=ATOL, rtol=RTOL).report()

        first, _ = timed(call, 1)
        peak = peak_extra_bytes(call)
        lines.append(f"| {label} | {n:,} | {first:.3f} | {peak / MiB:.1f} |")
        print(lines[-1], flush=True)
    return "\n".join(lines)


def _drifted(base: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    drifted = base.copy()
    drifted[rng.random(base.shape[0]) < 0.001] += 0.01
    return drifted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16M,64M")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--scenarios", default=None, help="also time ours on other paths at SIZE")
    args = parser.parse_args()
    rows = run([parse_size(s) for s in args.sizes.split(",")])
    print()
    print(markdown(rows))
    print(f"\nmachine: {platform.processor() or platform.machine()}, numpy {np.__version__}")
    if args.scenarios:
        print()
        print(scenarios(parse_size(args.scenarios)))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
