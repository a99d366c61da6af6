"""Comparison engine on the data users compare: ours vs numpy vs Polygraphy, side by side.

Run: python bench/bench_compare.py [--sizes 16M,64M] [--json bench/results/compare.json]
     [--baseline DIR] [--tuning screen=False ...]

`--baseline DIR` also measures the engine of another checkout (a directory holding a
`pytest_trtcompare` package, e.g. `git worktree add /tmp/before HEAD~3`) as "before",
interleaved with ours, so a change is judged against its past in one run. `--tuning
NAME=VALUE` sets a field of the engine's `TUNING` for our runs (and before's), e.g.
`screen=False` or `window_min=1e18` to see what an accelerator is worth.

Every (size, scenario, method) runs in its own fresh process on the same seeded data: the
best of 3 calls, then one more call traced with tracemalloc (numpy's buffers are traced)
for the peak extra memory above what the process held before the call. Our call includes
building the failure report (str(result)); numpy's includes building its AssertionError.
"""

from __future__ import annotations

import argparse
import ast
import gc
import json
import os
import platform
import subprocess
import sys
import time
import tracemalloc
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

Case = tuple[np.ndarray, np.ndarray, dict[str, Any]]
FP32 = {"atol": 1e-3, "rtol": 1e-3}
REPEATS = 3


def _normal(n: int, seed: int = 0) -> tuple[np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n, dtype=np.float32), rng


def _noisy(expected: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return expected + rng.standard_normal(expected.shape[0], dtype=np.float32) * np.float32(1e-5)


def identical(n: int) -> Case:
    expected, _ = _normal(n)
    return expected.copy(), expected, FP32


def fp16_rounded(n: int) -> Case:
    expected, _ = _normal(n)
    return expected.astype(np.float16), expected, {"atol": 1e-2, "rtol": 1e-2}


def bf16_rounded(n: int) -> Case:
    import ml_dtypes

    expected, _ = _normal(n)
    return expected.astype(ml_dtypes.bfloat16), expected, {"atol": 5e-2, "rtol": 5e-2}


def small_noise(n: int) -> Case:
    expected, rng = _normal(n)
    return _noisy(expected, rng), expected, FP32


def outliers(n: int) -> Case:
    expected, rng = _normal(n)
    actual = _noisy(expected, rng)
    actual[rng.choice(n, 100, replace=False)] += np.float32(1.0)
    return actual, expected, FP32


def all_off(n: int) -> Case:
    expected, rng = _normal(n)
    return _noisy(expected, rng) + np.float32(0.1), expected, FP32


def all_off_tied(n: int) -> Case:
    """Every element off by exactly 1: the errors tie in float32 (the windows of the order
    statistics overflow and the exact selection runs; the worst elements tie)."""
    expected, _ = _normal(n)
    return expected + np.float32(1.0), expected, FP32


def half_nan(n: int) -> Case:
    expected, rng = _normal(n)
    actual = _noisy(expected, rng)
    nan = rng.random(n) < 0.5
    actual[nan] = expected[nan] = np.nan
    return actual, expected, {**FP32, "nan_equal": True}


def _nan_pairs(n: int, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Identical outputs with NaN at the same positions on both sides."""
    expected, rng = _normal(n)
    expected[rng.random(n) < fraction] = np.nan
    return expected.copy(), expected


def half_nan_quantile(n: int) -> Case:
    """A golden check of a deterministic runner whose output is half NaN, judged by its
    p99 error: an order-statistic check builds its report from the first chunk."""
    actual, expected = _nan_pairs(n, 0.5)
    return actual, expected, {**FP32, "nan_equal": True, "check": "quantile"}


def half_nan_one_more(n: int) -> Case:
    """Half NaN pairs plus one NaN where the expected value is not: one NaN error."""
    actual, expected = _nan_pairs(n, 0.5)
    actual[int(np.flatnonzero(~np.isnan(expected))[n // 4])] = np.nan
    return actual, expected, {**FP32, "nan_equal": True}


def half_nan_not_excused(n: int) -> Case:
    """Half NaN pairs without nan_equal: every NaN is an error."""
    actual, expected = _nan_pairs(n, 0.5)
    return actual, expected, FP32


def sparse_nan_quantile(n: int) -> Case:
    """Identical outputs with 0.01% NaN pairs (nearly every chunk holds one), p99 check."""
    actual, expected = _nan_pairs(n, 1e-4)
    return actual, expected, {**FP32, "nan_equal": True, "check": "quantile"}


def target_nan(n: int) -> Case:
    """A target with NaN at 0.1% of positions where the reference has numbers: every chunk
    holds NaN errors (atol = rtol = 1e-5, no nan_equal)."""
    expected, rng = _normal(n)
    actual = expected.copy()
    actual[rng.random(n) < 1e-3] = np.nan
    return actual, expected, {"atol": 1e-5, "rtol": 1e-5}


def int64_identical(n: int) -> Case:
    rng = np.random.default_rng(0)
    expected = rng.integers(-(10**12), 10**12, n, dtype=np.int64)
    return expected.copy(), expected, FP32


def bool_identical(n: int) -> Case:
    expected = np.random.default_rng(0).random(n) < 0.5
    return expected.copy(), expected, FP32


def noise_with_metrics(n: int) -> Case:
    """Elementwise plus `cosine` and `snr` checks (Polygraphy: --compare simple
    cosine_similarity snr; numpy: assert_allclose plus the two formulas in float64)."""
    actual, expected, _ = small_noise(n)
    return actual, expected, {**FP32, "metrics": ("cosine", "snr")}


SCENARIOS: dict[str, Callable[[int], Case]] = {
    "identical outputs": identical,
    "fp16-rounded target, fp16 tolerance": fp16_rounded,
    "bf16-rounded target, bf16 tolerance": bf16_rounded,
    "small noise": small_noise,
    "100 outliers (fails)": outliers,
    "every element off (fails)": all_off,
    "every element off by exactly 1, tied errors (fails)": all_off_tied,
    "half NaN on both sides, nan_equal=True": half_nan,
    "identical, half NaN pairs, nan_equal=True, p99 check": half_nan_quantile,
    "identical, half NaN pairs plus one NaN error (fails)": half_nan_one_more,
    "identical, half NaN pairs, no nan_equal (fails)": half_nan_not_excused,
    "identical, 0.01% NaN pairs, nan_equal=True, p99 check": sparse_nan_quantile,
    "target NaN at 0.1% where the reference has numbers (fails)": target_nan,
    "int64 identical": int64_identical,
    "bool identical": bool_identical,
    "small noise, cosine and snr checks too": noise_with_metrics,
}


def ours(actual: np.ndarray, expected: np.ndarray, tol: dict[str, Any]) -> bool:
    from pytest_trtcompare import Tolerance, compare_outputs

    fields = {k: v for k, v in tol.items() if k != "metrics"}
    checks = [Tolerance(check=check) for check in tol.get("metrics", ())]
    tolerance = [Tolerance(**fields), *checks] if checks else None
    result = compare_outputs(
        {"out": actual}, {"out": expected}, tolerance, **(fields if not checks else {})
    )
    str(result)  # the report, for a failure the full one
    return result.passed


def numpy_allclose(actual: np.ndarray, expected: np.ndarray, tol: dict[str, Any]) -> bool:
    try:
        np.testing.assert_allclose(
            actual,
            expected,
            rtol=tol["rtol"],
            atol=tol["atol"],
            equal_nan=tol.get("nan_equal", False),
        )
    except AssertionError:
        return False
    checks = tol.get("metrics", ())
    if checks:
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        diff = a - e
        cosine = float(a @ e / (np.linalg.norm(a) * np.linalg.norm(e)))
        snr = 10 * np.log10(float(e @ e) / float(diff @ diff))
        return bool(cosine >= 0.997 and snr >= 20)
    return True


def polygraphy_simple(actual: np.ndarray, expected: np.ndarray, tol: dict[str, Any]) -> bool:
    from polygraphy import comparator
    from polygraphy.logger import G_LOGGER

    G_LOGGER.module_severity = G_LOGGER.CRITICAL
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        simple = getattr(comparator, "SimpleCompareFunc", None) or comparator.CompareFunc.simple
        check = tol.get("check", "elemwise")
        quantile = {"error_quantile": tol.get("quantile", 0.99)} if check == "quantile" else {}
        func = simple(atol=tol["atol"], rtol=tol["rtol"], check_error_stat=check, **quantile)
        first = comparator.IterationResult({"out": expected}, runner_name="expected")
        second = comparator.IterationResult({"out": actual}, runner_name="actual")
        passed = bool(func(second, first)["out"])
        for check in tol.get("metrics", ()):
            name = {"cosine": "CosineSimilarityCompareFunc", "snr": "SnrCompareFunc"}[check]
            passed &= bool(getattr(comparator, name)()(first, second)["out"])
    return passed


METHODS: dict[str, Callable[[np.ndarray, np.ndarray, dict[str, Any]], bool]] = {
    "ours": ours,
    "assert_allclose": numpy_allclose,
    "Polygraphy": polygraphy_simple,
}


def measure_one(
    size: int, scenario: str, method: str, repeats: int = REPEATS, tuning: str = ""
) -> dict[str, Any]:
    """Runs in the child process: best of `repeats` untraced calls, then one traced call."""
    if method == "ours" and tuning:
        from pytest_trtcompare.engine import TUNING

        for setting in tuning.split(","):
            name, value = setting.split("=", 1)
            setattr(TUNING, name, ast.literal_eval(value))
    actual, expected, tol = SCENARIOS[scenario](size)
    func = METHODS[method]
    times, passed = [], None
    try:
        for _ in range(repeats):
            gc.collect()
            start = time.perf_counter()
            passed = func(actual, expected, tol)
            times.append(time.perf_counter() - start)
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        func(actual, expected, tol)
        peak = tracemalloc.get_traced_memory()[1] - before
        tracemalloc.stop()
    except Exception as exc:  # a peer that cannot compare this data (Polygraphy and bf16)
        return {"error": f"{type(exc).__name__}: {str(exc)[:80]}"}
    return {"best_s": min(times), "passed": passed, "peak": peak, "input": expected.nbytes}


def parse_size(text: str) -> int:
    text = text.strip().upper()
    factor = {"K": 1 << 10, "M": 1 << 20}.get(text[-1], 1)
    return int(float(text.rstrip("KM")) * factor)


def run_child(
    size: int,
    scenario: str,
    method: str,
    baseline: Path | None = None,
    repeats: int = REPEATS,
    tuning: str = "",
) -> dict[str, Any]:
    env = None
    if method == "before":
        assert baseline is not None
        env = {**os.environ, "PYTHONPATH": str(baseline)}
        method = "ours"
    one = json.dumps([size, scenario, method, repeats, tuning])
    command = [sys.executable, __file__, "--one", one]
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1][:80] if done.stderr else "crashed"}
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def _cell(row: dict[str, Any], ours_row: dict[str, Any], failing: bool) -> str:
    if row.get("error") == "skipped":
        return "(not run)"
    if "error" in row:
        return "(error)"
    verdict = "" if row["passed"] == (not failing) else " (fails)"
    ratio = ""
    if row is not ours_row and "error" not in ours_row:
        ratio = f" ({row['best_s'] / ours_row['best_s']:.1f}x)"
    seconds = row["best_s"]  # small outputs' in ms: 3 decimals of a second read 0.000
    shown = f"{seconds:.3f} s" if seconds >= 0.01 else f"{seconds * 1e3:.2f} ms"
    return f"{shown}{ratio}{verdict}"


def markdown(
    rows: dict[tuple[int, str, str], dict[str, Any]], sizes: list[int], methods: list[str]
) -> str:
    header = " | ".join("ours before" if m == "before" else m for m in methods)
    lines = [
        f"| elements | scenario | {header} | ours extra memory |",
        "|---:|---|" + "---:|" * len(methods) + "---:|",
    ]
    for size in sizes:
        for scenario in SCENARIOS:
            if all(rows[size, scenario, m].get("error") == "skipped" for m in methods):
                continue  # not asked for (--scenarios)
            failing = "(fails)" in scenario
            mine = rows[size, scenario, "ours"]
            cells = [_cell(rows[size, scenario, m], mine, failing) for m in methods]
            memory = "n/a" if "error" in mine else f"{mine['peak'] / mine['input']:.3f}x input"
            lines.append(f"| {size:,} | {scenario} | {' | '.join(cells)} | {memory} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16M,64M")
    parser.add_argument("--scenarios", default=None, help="comma-separated subset, by prefix")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--baseline", type=Path, default=None, help="measure DIR's engine too")
    parser.add_argument("--repeats", type=int, default=REPEATS, help="best of this many calls")
    parser.add_argument(
        "--tuning", default="", help="NAME=VALUE[,...]: engine TUNING fields for our runs"
    )
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(*json.loads(args.one))))
        return
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    wanted = args.scenarios.split(",") if args.scenarios else None
    scenarios = [s for s in SCENARIOS if wanted is None or any(s.startswith(w) for w in wanted)]
    methods = args.methods.split(",")
    columns = list(METHODS)
    if args.baseline is not None:
        columns.insert(1, "before")
        methods.append("before")
    rows: dict[tuple[int, str, str], dict[str, Any]] = {}
    for size in sizes:
        for scenario in SCENARIOS:
            for method in columns:
                skip = scenario not in scenarios or method not in methods
                row = (
                    {"error": "skipped"}
                    if skip
                    else run_child(size, scenario, method, args.baseline, args.repeats, args.tuning)
                )
                rows[size, scenario, method] = row
                if not skip:
                    print(f"{size:>11,} {scenario:<42} {method:<16} {row}", flush=True)
    print()
    print(markdown(rows, sizes, columns))
    print(f"\nmachine: {platform.processor() or platform.machine()}, numpy {np.__version__}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        listed = [
            {"elements": size, "scenario": scenario, "method": method, **row}
            for (size, scenario, method), row in rows.items()
        ]
        args.json.write_text(json.dumps(listed, indent=2))


if __name__ == "__main__":
    main()
