"""Every text and record a catalogue of comparisons makes, dumped for a diff between two
checkouts (the statistics of one kind promised them byte-identical).

Run: PYTHONPATH=/tmp/before python bench/statistics_differential.py > before.txt
     PYTHONPATH=$PWD python bench/statistics_differential.py > after.txt
     diff before.txt after.txt

Per comparison of the catalogue (identical, noise, NaN, Inf, ints, all failing, ties, each
check, metric checks, the fp64 check, indices, top-K, shapes, structures, torch tensors),
with and without a registered statistic: the report at verbosity 0 and 1, every documented
figure as an attribute, the records' JUnit properties, the JSON report, the records read
back from their JSON and the accuracy summary.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from pytest_trtcompare import Statistic, Tolerance, compare_outputs, register_statistic
from pytest_trtcompare.engine import Anchor, ToleranceTable, compare_with_table
from pytest_trtcompare.reports import properties, summary
from pytest_trtcompare.reports.document import report_json

#: The documented figures of an output's result (docs/explanation/comparisons.md, SPEC)
FIGURES = [
    "count",
    "mismatches",
    "max_abs_error",
    "max_rel_error",
    "greatest_abs",
    "greatest_rel",
    "mean_abs_error",
    "mean_rel_error",
    "median_abs_error",
    "median_rel_error",
    "quantile_abs_error",
    "quantile_rel_error",
    "nan_errors",
    "nan_actual",
    "nan_expected",
    "inf_actual",
    "inf_expected",
    "nan_positions_match",
    "cosine_similarity",
    "required_atol",
    "required_rtol",
    "required_atol_at_rtol",
    "required_rtol_at_atol",
    "margin",
    "worst",
    "histogram",
    "passed",
    "failure",
    "problem",
    "base_passed",
    "gated",
    "indices",
    "postprocessed",
    "metrics",
    "mismatch_share",
    "shape_note",
]

Case = Callable[[], Any]


def _normal(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def catalogue() -> Iterator[tuple[str, Case]]:
    e = _normal(5000)
    rng = np.random.default_rng(1)
    noise = (e + rng.standard_normal(5000).astype(np.float32) * 1e-5).astype(np.float32)
    big = _normal(300_000, 2)
    big_noise = big + np.random.default_rng(3).standard_normal(300_000).astype(np.float32) * 1e-4
    fp32 = {"atol": 1e-4, "rtol": 1e-4}

    def nan_pairs() -> tuple[np.ndarray, np.ndarray]:
        a, x = e.copy(), e.copy()
        a[::7] = x[::7] = np.nan
        return a, x

    def outliers(values: np.ndarray) -> np.ndarray:
        a = values.copy()
        a[:: max(1, values.shape[0] // 100)] += 0.5
        return a

    yield "identical", lambda: compare_outputs({"y": e.copy()}, {"y": e}, **fp32)
    yield "noise passes", lambda: compare_outputs({"y": noise}, {"y": e}, **fp32)
    yield "noise fails", lambda: compare_outputs({"y": noise}, {"y": e}, atol=1e-7, rtol=1e-7)
    yield "large noise", lambda: compare_outputs({"y": big_noise}, {"y": big}, **fp32)
    yield "large outliers", lambda: compare_outputs({"y": outliers(big)}, {"y": big}, **fp32)
    yield "outliers", lambda: compare_outputs({"y": outliers(e)}, {"y": e}, **fp32)
    yield "all failing", lambda: compare_outputs({"y": e + 1}, {"y": e}, **fp32)
    yield "ties", lambda: compare_outputs({"y": np.round(e) + 1}, {"y": np.round(e)}, **fp32)
    yield (
        "NaN pairs, nan_equal",
        lambda: compare_outputs(*({"y": s} for s in nan_pairs()), nan_equal=True, **fp32),
    )
    yield "NaN pairs, no nan_equal", lambda: compare_outputs(*({"y": s} for s in nan_pairs()))

    def nan_in_actual() -> Any:
        a = e.copy()
        a[[3, 17, 400]] = np.nan
        return compare_outputs({"y": a}, {"y": e}, **fp32)

    yield "NaN in actual", nan_in_actual

    def all_nan() -> Any:
        return compare_outputs({"y": np.full(8, np.nan)}, {"y": np.ones(8)})

    yield "every element NaN", all_nan

    def inf() -> Any:
        a, x = e.copy(), e.copy()
        a[5], x[9] = np.inf, -np.inf
        a[11] = x[11] = np.inf
        return compare_outputs({"y": a}, {"y": x}, **fp32)

    yield "Inf", inf
    yield "Inf, inf_equal", lambda: _inf_equal(e)
    ints = np.arange(1000, dtype=np.int64)
    yield "ints equal", lambda: compare_outputs({"i": ints}, {"i": ints.copy()})
    yield "ints off", lambda: compare_outputs({"i": ints + (ints % 9 == 0)}, {"i": ints})
    yield "bool", lambda: compare_outputs({"b": ints % 3 == 0}, {"b": ints % 5 == 0})
    yield (
        "fp16 vs fp32",
        lambda: compare_outputs({"y": e.astype(np.float16)}, {"y": e}, atol=1e-3, rtol=1e-3),
    )
    for check in ("max", "mean", "median", "quantile"):
        yield (
            f"{check} check passes",
            lambda check=check: compare_outputs({"y": noise}, {"y": e}, check=check, **fp32),
        )
        yield (
            f"{check} check fails",
            lambda check=check: compare_outputs(
                {"y": outliers(e)}, {"y": e}, check=check, quantile=0.9, atol=1e-6, rtol=1e-6
            ),
        )
    yield "metric checks", lambda: _metrics(noise, e)
    yield "metric checks alone fail", lambda: _metrics(outliers(e), e, alone=True)
    yield "metric and elementwise fail", lambda: _metrics(outliers(e), e)
    yield "fp64 check", lambda: _fp64(e, noise, passes=True)
    yield "fp64 check fails", lambda: _fp64(e, outliers(e), passes=False)
    rows = np.argsort(_normal(40, 4).reshape(4, 10), axis=1)
    yield (
        "indices",
        lambda: compare_outputs({"k": rows[:, ::-1].copy()}, {"k": rows}, check="indices"),
    )
    logits = _normal(40, 5).reshape(4, 10)
    yield (
        "top-K",
        lambda: compare_outputs(
            {"l": logits + 0.3 * _normal(40, 6).reshape(4, 10)},
            {"l": logits},
            postprocess="top-3",
            check="indices",
        ),
    )
    yield "shape", lambda: compare_outputs({"y": np.zeros((2, 3))}, {"y": np.zeros((2, 4))})
    yield (
        "relaxed shape",
        lambda: compare_outputs(
            {"y": e[:12].reshape(1, 3, 4) + 1}, {"y": e[:12].reshape(3, 4)}, shape_check="relaxed"
        ),
    )
    yield (
        "missing outputs",
        lambda: compare_outputs({"a": e[:4], "b": e[:4]}, {"a": e[:4] + 1, "c": e[:4]}),
    )
    yield (
        "structures",
        lambda: compare_outputs(
            {"s": [e[:3], e[3:6]], "o": None}, {"s": [e[:3], e[3:6] + 1], "o": e[:2]}
        ),
    )
    yield (
        "several outputs",
        lambda: compare_outputs(
            {"a": noise, "b": outliers(e), "c": e}, {"a": e, "b": e, "c": e}, **fp32
        ),
    )
    yield "torch", lambda: _torch(noise, e)
    yield "torch fails", lambda: _torch(outliers(e), e)


def _inf_equal(e: np.ndarray) -> Any:
    a, x = e.copy(), e.copy()
    a[[2, 4]] = x[[2, 4]] = np.inf
    a[6] = 1.0
    return compare_outputs({"y": a}, {"y": x}, inf_equal=True, atol=1e-4, rtol=1e-4)


def _metrics(actual: np.ndarray, expected: np.ndarray, alone: bool = False) -> Any:
    checks = [
        Tolerance(check="cosine", threshold=0.9999),
        Tolerance(check="snr", threshold=60.0),
    ]
    tolerance: Any = checks if alone else [Tolerance(atol=1e-4, rtol=1e-4), *checks]
    return compare_outputs({"y": actual}, {"y": expected}, tolerance)


def _fp64(expected: np.ndarray, actual: np.ndarray, passes: bool) -> Any:
    float64 = expected.astype(np.float64) + 1e-7
    reduced = expected + np.float32(1e-5 if passes else 1e-8)
    anchor = Anchor({"y": float64}, {"y": reduced}, "torch fp32")
    table = ToleranceTable(Tolerance(check="fp64", threshold=2.0, atol=1e-6))
    return compare_with_table({"y": actual}, {"y": expected}, table, anchor=anchor)


def _torch(actual: np.ndarray, expected: np.ndarray) -> Any:
    import torch

    a, x = torch.from_numpy(actual.copy()), torch.from_numpy(expected.copy())
    return compare_outputs({"t": a}, {"t": x}, atol=1e-4, rtol=1e-4)


class RmsError(Statistic):
    figures = ("rms_error", "largest")

    def __init__(self, tolerance: Any) -> None:
        super().__init__(tolerance)
        self.squares, self.count, self.largest = 0.0, 0, 0.0

    def update(self, chunk: Any) -> None:
        errors = chunk.whole_chunk().abs_err
        self.squares += float(chunk.xp.sum(errors * errors))
        self.count += chunk.compared
        if errors.shape[0]:
            self.largest = max(self.largest, float(chunk.xp.max(errors)))

    def merge(self, other: Any) -> None:
        self.squares += other.squares
        self.count += other.count

    def compute(self) -> dict[str, float]:
        rms = math.sqrt(self.squares / self.count) if self.count else 0.0
        return {"rms_error": rms, "largest": self.largest if self.count else math.inf}


def dump(name: str, result: Any) -> list[str]:
    lines = [f"=== {name}", result.report(), "--- verbosity 1", result.report(verbosity=1)]
    for output, out in result.outputs.items():
        for figure in (*FIGURES, *(("rms_error", "largest") if REGISTERED else ())):
            try:
                value = getattr(out, figure)
            except AttributeError as exc:
                value = f"AttributeError: {exc}"
            lines.append(f"{output}.{figure} = {value!r}")
    records = summary.records(
        result,
        f"test_{name}",
        "compare",
        "onnxrt-fp16",
        "torch-fp32",
        times=(1.5, None),
        nodeid=f"t.py::test_{name}",
        runners=("onnxrt-fp16@1", None),
    )
    props = properties.to_properties(records)
    lines += [f"{key} = {value!r}" for key, value in props]
    read = summary.from_properties(props)
    lines.append(report_json(read, {}, {}, "0", written="now"))
    lines += summary.format_summary(read, verbosity=1, width=100)
    lines += summary.format_summary(read, verbosity=-1, width=100)
    return lines


REGISTERED = False


def main() -> None:
    global REGISTERED
    for registered in (False, True):
        if registered:
            register_statistic(RmsError)
            REGISTERED = True
        for name, case in catalogue():
            print("\n".join(dump(f"{name}{' +rms' if registered else ''}", case())))


if __name__ == "__main__":
    main()
