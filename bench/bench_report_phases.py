"""Where a failing comparison's time goes, phase by phase (issue 12's "slowest <= 4x").

    python bench/bench_report_phases.py --size 16M

For each scenario of `bench_compare.py` named below, the best of `--repeats` calls of
`bench_compare.ours`, and the time that call spent in each phase of the engine, by timing
wrappers around the makers of chunks and the `update` of each statistic (so the names below
follow the code; a renamed method raises here rather than reporting 0). Phases nest: a
statistic's time holds the float64 refinements it asks for (`float64 chunk`). The
figures are for deciding what a faster kernel would have to replace, not a target in
themselves: `bench_compare.py` is the benchmark.
"""

from __future__ import annotations

import argparse
import collections
import functools
import time
from collections.abc import Callable
from typing import Any

from bench_compare import SCENARIOS, ours, parse_size

from pytest_trtcompare.engine import accumulators, chunks, decades, figures, quantiles, scan, screen

DEFAULT_SCENARIOS = (
    "small noise",
    "100 outliers (fails)",
    "every element off (fails)",
    "every element off by exactly 1, tied errors (fails)",
)
#: phase name -> (class or module, function)
PHASES: dict[str, tuple[Any, str]] = {
    "bit-equal chunks": (chunks.Equality, "equal"),
    "float32 chunk (screen)": (screen.Screen, "chunk"),
    "float64 chunk (or refinement)": (chunks.Arithmetic, "compute"),
    "verdict and counts": (accumulators.Verdict, "update"),
    "maxima": (accumulators.Extremes, "update"),
    "maxima's last look": (accumulators.Extremes, "compute"),
    "means": (accumulators.Means, "update"),
    "cosine sums": (accumulators.Cosine, "update"),
    "report begin (sample, windows)": (scan.Report, "begin"),
    "worst elements": (figures.Worst, "update"),
    "histogram": (decades.Decades, "update"),
    "median and quantile": (quantiles.Quantiles, "update"),
    "median and quantile selection": (quantiles.Quantiles, "compute"),
    "would pass with": (figures.Required, "update"),
    "report finish": (scan.Report, "finish"),
}

spent: collections.Counter[str] = collections.Counter()


def _timed(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - start

    return wrapper


def install() -> None:
    for name, (owner, attribute) in PHASES.items():
        setattr(owner, attribute, _timed(name, getattr(owner, attribute)))


def measure(scenario: str, size: int, repeats: int) -> tuple[float, dict[str, float]]:
    actual, expected, tol = SCENARIOS[scenario](size)
    best, phases = float("inf"), {}
    for _ in range(repeats):
        spent.clear()
        start = time.perf_counter()
        ours(actual, expected, tol)
        elapsed = time.perf_counter() - start
        if elapsed < best:
            best, phases = elapsed, dict(spent)
    return best, phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="16M")
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--scenarios", nargs="*", default=list(DEFAULT_SCENARIOS))
    args = parser.parse_args()
    install()
    size = parse_size(args.size)
    baseline = None
    for scenario in args.scenarios:
        total, phases = measure(scenario, size, args.repeats)
        baseline = baseline or total
        print(f"{scenario}: {total * 1e3:.1f} ms ({total / baseline:.1f}x the first)")
        for name in PHASES:
            if phases.get(name):
                print(f"  {name:34s} {phases[name] * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
