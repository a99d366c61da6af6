"""Metric checks against Polygraphy's CosineSimilarity/L2/Snr/PsnrCompareFunc (the reference as
its first runner), and kl / top1 against a plain float64 formula."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from pytest_trtcompare import Tolerance, compare_outputs
from pytest_trtcompare.engine import metrics as metrics_module
from pytest_trtcompare.engine.tuning import TUNING

# the float32 screen on these tests' small data too (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("screen_small_outputs")


comparator = pytest.importorskip("polygraphy.comparator")

#: our check -> (Polygraphy compare func, its threshold argument, its metric field)
PEERS = {
    "cosine": ("CosineSimilarityCompareFunc", "cosine_similarity_threshold", "cosine_similarity"),
    "l2": ("L2CompareFunc", "l2_threshold", "l2_norm"),
    "snr": ("SnrCompareFunc", "snr_threshold", "snr"),
    "psnr": ("PsnrCompareFunc", "psnr_threshold", "psnr"),
}
NOISE = [0.0, 1e-7, 1e-5, 1e-3, 3e-2, 0.3, 1.0, 10.0]


def polygraphy(check: str, actual: np.ndarray, expected: np.ndarray, threshold: float):
    """(value, passed) of Polygraphy's compare func, `expected` as its first runner."""
    from polygraphy.logger import G_LOGGER

    G_LOGGER.module_severity = G_LOGGER.CRITICAL
    name, argument, field = PEERS[check]
    func = getattr(comparator, name)(**{argument: threshold})
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        result = func(
            comparator.IterationResult({"out": expected}, runner_name="reference"),
            comparator.IterationResult({"out": actual}, runner_name="target"),
        )["out"]
    return float(getattr(result, field)), bool(result)


def ours(check: str, actual: np.ndarray, expected: np.ndarray, threshold: float):
    out = compare_outputs(
        {"out": actual}, {"out": expected}, Tolerance(check=check, threshold=threshold)
    ).outputs["out"]
    metric = out.metric(check)
    assert metric is not None
    assert out.passed == metric.passed
    return metric.value, metric.passed


def pair(seed: int, noise: float, dtype, shape=(3, 7, 50)) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    expected = (rng.standard_normal(shape) * rng.uniform(0.1, 10.0) + rng.uniform(-2, 2)).astype(
        dtype
    )
    actual = (expected.astype(np.float64) + noise * rng.standard_normal(shape)).astype(dtype)
    return actual, expected


def _close(a: float, b: float, rel: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


@pytest.mark.parametrize("check", sorted(PEERS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_verdicts_equal_polygraphy_across_noise_levels(check, dtype):
    """Polygraphy sums float32 outputs in float32, we in float64: values agree to float32
    rounding, and so do verdicts for every threshold not within that rounding of the value."""
    rounding = 1e-12 if dtype == np.float64 else 1e-4
    compared = 0
    for seed in range(4):
        for noise in NOISE:
            actual, expected = pair(seed, noise, dtype)
            value, _ = polygraphy(check, actual, expected, 0.0)
            mine, _ = ours(check, actual, expected, Tolerance(check=check).threshold or 0.0)
            assert _close(mine, value, rounding), (seed, noise, mine, value)
            candidates = [Tolerance(check=check).threshold]
            if math.isfinite(value):
                candidates += [value * f + d for f in (0.5, 0.99, 1.01, 2) for d in (-1e-3, 1e-3)]
            for threshold in candidates:
                threshold = float(
                    np.clip(threshold, *(-1, 1) if check == "cosine" else (-1e9, 1e9))
                )
                if check == "l2":
                    threshold = abs(threshold)
                if math.isfinite(value) and _close(threshold, value, 10 * rounding):
                    continue  # within the rounding of two summation orders
                assert (
                    ours(check, actual, expected, threshold)[1]
                    == (polygraphy(check, actual, expected, threshold)[1])
                ), (seed, noise, threshold, value)
                compared += 1
    assert compared > 100


@pytest.mark.parametrize("check", sorted(PEERS))
@pytest.mark.parametrize(
    "case",
    ["identical", "both_zero", "expected_zero", "actual_zero", "nan", "inf", "negative_peak"],
)
def test_edge_cases_equal_polygraphy(check, case):
    expected = np.linspace(-1.0, 2.0, 12)
    actual = expected + 0.01
    if case == "identical":
        actual = expected.copy()
    elif case == "both_zero":
        actual, expected = np.zeros(12), np.zeros(12)
    elif case == "expected_zero":
        expected = np.zeros(12)
    elif case == "actual_zero":
        actual = np.zeros(12)
    elif case == "nan":
        actual[3] = np.nan
    elif case == "inf":
        actual[3] = expected[3] = np.inf
    elif case == "negative_peak":
        expected = -np.abs(expected) - 1
        actual = expected + 0.5
    threshold = Tolerance(check=check).threshold
    assert threshold is not None
    value, passed = polygraphy(check, actual, expected, threshold)
    mine, mine_passed = ours(check, actual, expected, threshold)
    assert _close(mine, value, 1e-12), (mine, value)
    assert mine_passed == passed


def test_empty_outputs_pass_every_metric():
    empty = np.zeros((0, 4), np.float32)
    tols = [Tolerance(check=c) for c in ("cosine", "l2", "snr", "psnr", "kl", "top1")]
    assert compare_outputs({"x": empty}, {"x": empty}, tols).passed


# -- kl and top1: a plain float64 formula, row by row


def plain_kl(actual: np.ndarray, expected: np.ndarray) -> float:
    total, rows = 0.0, 0
    for a_row, e_row in zip(
        actual.reshape(-1, actual.shape[-1]).astype(np.float64),
        expected.reshape(-1, expected.shape[-1]).astype(np.float64),
        strict=True,
    ):
        p = np.exp(e_row - e_row.max()) / np.exp(e_row - e_row.max()).sum()
        q = np.exp(a_row - a_row.max()) / np.exp(a_row - a_row.max()).sum()
        total += sum(pi * math.log(pi / qi) for pi, qi in zip(p, q, strict=True) if pi > 0)
        rows += 1
    return total / rows


def plain_top1(actual: np.ndarray, expected: np.ndarray) -> float:
    a = actual.reshape(-1, actual.shape[-1]).astype(np.float64)
    e = expected.reshape(-1, expected.shape[-1]).astype(np.float64)
    agree = [
        int(np.argmax(ar) == np.argmax(er) and not np.isnan(ar).any() and not np.isnan(er).any())
        for ar, er in zip(a, e, strict=True)
    ]
    return sum(agree) / len(agree)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
@pytest.mark.parametrize("shape", [(40, 10), (2, 3, 1000), (7,), (65537,), (3, 30000)])
def test_kl_and_top1_equal_a_plain_float64_formula(dtype, shape):
    for seed, noise in enumerate([0.0, 1e-3, 0.1, 1.0, 5.0]):
        actual, expected = pair(seed, noise, dtype, shape)
        kl, top1 = plain_kl(actual, expected), plain_top1(actual, expected)
        out = compare_outputs(
            {"y": actual}, {"y": expected}, [Tolerance(check="kl"), Tolerance(check="top1")]
        ).outputs["y"]
        kl_result, top1_result = out.metric("kl"), out.metric("top1")
        assert kl_result is not None and top1_result is not None
        # float64 sums of many near-cancelling terms: numpy 2.2 and 2.4 differ by 4e-9 (rel)
        # on a KL of 5e-7 over 65537 float16 logits, their vectorized log and sum
        assert kl_result.value == pytest.approx(kl, rel=1e-7, abs=1e-15)
        assert top1_result.value == top1
        for threshold in (kl * 0.9, kl * 1.1, 1e-3):
            got = compare_outputs(
                {"y": actual}, {"y": expected}, check="kl", threshold=threshold
            ).passed
            if not _close(threshold, kl, 1e-7):
                assert got == (kl <= threshold)
        for threshold in (top1, max(0.0, top1 - 0.01), min(1.0, top1 + 0.01)):
            got = compare_outputs(
                {"y": actual}, {"y": expected}, check="top1", threshold=threshold
            ).passed
            assert got == (top1 >= threshold)


def test_kl_with_masked_logits_and_nan():
    expected = np.array([[0.0, 1.0, -np.inf], [2.0, 0.0, 1.0]])
    actual = np.array([[0.1, 0.9, -np.inf], [2.0, 0.0, 1.0]])
    values = metrics_module.compute_metrics(actual, expected, [Tolerance(check="kl")])
    assert values[0].value == pytest.approx(plain_kl(actual, expected))
    actual[1, 1] = np.nan
    nan = compare_outputs({"y": actual}, {"y": expected}, check="kl", threshold=1.0)
    assert not nan.passed and math.isnan(nan.outputs["y"].metrics[0].value)
    top1 = compare_outputs({"y": actual}, {"y": expected}, check="top1", threshold=0.5)
    assert top1.outputs["y"].metrics[0].value == 0.5 and top1.passed


def test_rows_are_chunked_without_full_size_temporaries(monkeypatch):
    """Small chunks give the same figures as one chunk (the chunking is real)."""
    actual, expected = pair(3, 0.1, np.float32, (64, 33))
    checks = [Tolerance(check=c) for c in ("cosine", "l2", "snr", "psnr", "kl", "top1")]
    whole = metrics_module.compute_metrics(actual, expected, checks)
    monkeypatch.setattr(TUNING, "chunk_elements", 100)
    chunked = metrics_module.compute_metrics(actual, expected, checks)
    for one, other in zip(whole, chunked, strict=True):
        assert one.value == pytest.approx(other.value, rel=1e-12)
