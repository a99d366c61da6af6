"""Metric checks: cosine, l2, snr, psnr over the whole output, kl and top1 over its last axis.

`expected` is the reference: SNR takes its signal and PSNR its peak from it, as
`torch.ao.ns.fx.utils.compute_sqnr` does and as Polygraphy does from its first runner, so our
verdicts equal Polygraphy's `CosineSimilarityCompareFunc`, `L2CompareFunc`, `SnrCompareFunc`
and `PsnrCompareFunc` with the reference first (tests/test_metrics_parity.py). Sums are taken
in float64 over chunks of `TUNING.chunk_elements` (whole rows for kl and top1): no full-size
temporaries. A NaN metric fails.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidOutputError
from .chunks import dot, namespace_of
from .tensors import chunk_elements
from .tolerance import MINIMUM_METRICS, Tolerance

_FLAT = frozenset({"cosine", "l2", "snr", "psnr"})
_ROWS = frozenset({"kl", "top1"})


@dataclass(frozen=True)
class MetricResult:
    """One metric check of one output: its value against its threshold."""

    check: str
    threshold: float
    value: float
    passed: bool
    margin: float  # error / allowed error, > 1 fails (see `margin`)
    source: str = "default"  # where the threshold came from (tolerance.SOURCES)

    def describe(self) -> str:
        """'cosine 0.99123 < 0.997 (ini; margin 2.92)': the threshold's source, the margin."""
        value, threshold = format_pair(self.value, self.threshold)
        unit = " dB" if self.check in ("snr", "psnr") else ""
        if self.check in MINIMUM_METRICS:
            relation = ">=" if self.passed else "<"
        else:
            relation = "<=" if self.passed else ">"
        if math.isnan(self.value):
            relation = "is NaN, never within"
        return (
            f"{self.check} {value}{unit} {relation} {threshold}{unit} "
            f"({self.source}; margin {_short(self.margin)})"
        )

    def brief(self) -> str:
        """'cosine 0.99123': the value, for the line of a passing output."""
        return f"{self.check} {format_pair(self.value, self.threshold)[0]}"


def format_pair(value: float, threshold: float) -> tuple[str, str]:
    """Both numbers with enough digits to differ when they do (Polygraphy's habit)."""
    for digits in range(5, 18):
        shown, bound = f"{value:.{digits}g}", f"{threshold:.{digits}g}"
        if value == threshold or shown != bound:
            return shown, bound
    return f"{value:.17g}", f"{threshold:.17g}"


def _short(value: float) -> str:
    return f"{value:.3g}" if math.isfinite(value) else str(value)


def verdict(check: str, value: float, threshold: float) -> bool:
    """value >= threshold for the minimum metrics, <= for l2 and kl; NaN fails."""
    if math.isnan(value):
        return False
    return value >= threshold if check in MINIMUM_METRICS else value <= threshold


def margin(check: str, value: float, threshold: float) -> float:
    """Error over allowed error, > 1 exactly when the check fails (up to rounding).

    l2, kl: value / threshold. cosine, top1: (1 - value) / (1 - threshold), the shortfall
    from agreement over the shortfall allowed. snr, psnr: 10^((threshold - value) / 10), the
    noise power over the noise power allowed.
    """
    if math.isnan(value):
        return math.inf
    if check in ("snr", "psnr"):
        exponent = (threshold - value) / 10.0
        return math.inf if exponent > 300 else 10.0**exponent
    if check in ("cosine", "top1"):
        error, allowed = 1.0 - value, 1.0 - threshold
    else:
        error, allowed = value, threshold
    if allowed > 0:
        return max(0.0, error / allowed)
    return 0.0 if error <= 0 else math.inf


def compute_metrics(
    actual: Any, expected: Any, checks: Sequence[Tolerance]
) -> tuple[MetricResult, ...]:
    """The metric checks among `checks`, on two arrays of one shape."""
    wanted = {t.check for t in checks if t.is_metric}
    values: dict[str, float] = {}
    if wanted & _FLAT:
        values.update(_flat_metrics(actual, expected))
    if wanted & _ROWS:
        values.update(_row_metrics(actual, expected))
    found = []
    for tol in checks:
        if tol.check not in values:  # not a metric; fp64: engine/anchored.py
            continue
        assert tol.threshold is not None
        value = values[tol.check]
        found.append(
            MetricResult(
                check=tol.check,
                threshold=tol.threshold,
                value=value,
                passed=verdict(tol.check, value, tol.threshold),
                margin=margin(tol.check, value, tol.threshold),
                source=tol.source("threshold"),
            )
        )
    return tuple(found)


def require_rows(
    name: str, values: Any, checks: Sequence[Tolerance], postprocess: str | None
) -> None:
    """kl and top1 of a 0-d output or a last axis of 1 would always pass: an error instead
    (empty outputs pass, as for every check)."""
    if math.prod(values.shape) == 0 or (values.ndim and values.shape[-1] >= 2):
        return
    for check in (t.check for t in checks if t.check in _ROWS):
        after = f" after postprocess={postprocess!r}" if postprocess else ""
        raise InvalidOutputError(
            f"{check} needs a last axis of at least 2 values; output {name!r} has shape "
            f"{tuple(values.shape)}{after}"
        )


def _flat_metrics(actual: Any, expected: Any) -> dict[str, float]:
    """Σa², Σe², Σa·e, Σ(e-a)² and max(e) in float64 chunks -> cosine, l2, snr, psnr.

    `dot` keeps OpenBLAS on the calling thread: whole-chunk dots woke all its threads, and on
    a loaded machine 1M elements took over a second."""
    a, e = actual.reshape(-1), expected.reshape(-1)
    n = a.shape[0]
    aa = ee = ae = dd = 0.0
    peak = -math.inf
    xp = namespace_of(a)
    with np.errstate(invalid="ignore", over="ignore"):
        size = max(1, chunk_elements(a) // 2)  # both sides in float64: half a chunk
        for start in range(0, n, size):
            a64 = xp.astype(a[start : start + size], xp.float64)
            e64 = xp.astype(e[start : start + size], xp.float64)
            aa += dot(a64, a64)
            ee += dot(e64, e64)
            ae += dot(a64, e64)
            diff = e64 - a64
            dd += dot(diff, diff)
            top = float(xp.max(e64))
            peak = math.nan if math.isnan(top) else max(peak, top)  # NaN stays NaN
    if n == 0:  # empty tensors pass
        return {"cosine": 1.0, "l2": 0.0, "snr": math.inf, "psnr": math.inf}
    return {
        "cosine": _cosine(aa, ee, ae),
        "l2": math.sqrt(dd) if dd >= 0 else math.nan,
        "snr": _snr(ee / n, dd / n),
        "psnr": _psnr(peak, dd / n),
    }


def _cosine(aa: float, ee: float, ae: float) -> float:
    """Polygraphy's: 1 when both norms are 0, 0 when one is, NaN stays NaN, clipped to [-1, 1]."""
    norm_a, norm_e = math.sqrt(aa) if aa >= 0 else math.nan, math.sqrt(ee) if ee >= 0 else math.nan
    if norm_a == 0 and norm_e == 0:
        return 1.0
    if norm_a == 0 or norm_e == 0:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        value = float(np.float64(ae) / (np.float64(norm_e) * np.float64(norm_a)))
    return value if math.isnan(value) else max(-1.0, min(1.0, value))


def _snr(signal: float, noise: float) -> float:
    if noise == 0:
        return math.inf  # a perfect match
    if signal == 0:
        return -math.inf  # no signal
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return float(10.0 * np.log10(np.float64(signal) / np.float64(noise)))


def _psnr(peak: float, mse: float) -> float:
    if mse == 0:
        return math.inf
    if peak <= 0:  # Polygraphy: a non-positive peak counts as 1
        peak = 1.0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return float(20.0 * np.log10(np.float64(peak)) - 10.0 * np.log10(np.float64(mse)))


def _row_metrics(actual: Any, expected: Any) -> dict[str, float]:
    """Mean KL(softmax(e) || softmax(a)) and the top-1 agreement over the last axis."""
    width = actual.shape[-1] if actual.ndim else 1
    rows = math.prod(actual.shape) // width if width else 0
    if rows == 0:
        return {"kl": 0.0, "top1": 1.0}
    a, e = actual.reshape(rows, width), expected.reshape(rows, width)
    xp = namespace_of(a)
    step = max(1, chunk_elements(a) // 2 // width)
    kl, agree = 0.0, 0
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for start in range(0, rows, step):
            a64 = xp.astype(a[start : start + step], xp.float64)
            e64 = xp.astype(e[start : start + step], xp.float64)
            log_p, log_q = _log_softmax(e64, xp), _log_softmax(a64, xp)
            p = xp.exp(log_p)
            terms = p * (log_p - log_q)
            terms[p == 0] = 0.0  # 0 log 0 = 0 (masked logits); NaN stays NaN
            kl += float(xp.sum(terms))
            same = xp.argmax(a64, axis=-1) == xp.argmax(e64, axis=-1)
            same &= ~(xp.any(xp.isnan(a64), axis=-1) | xp.any(xp.isnan(e64), axis=-1))
            agree += int(xp.count_nonzero(same))
    kl /= rows
    return {"kl": 0.0 if kl < 0 else kl, "top1": agree / rows}  # KL >= 0 but for rounding


def _log_softmax(x: Any, xp: Any) -> Any:
    shifted = x - xp.max(x, axis=-1, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=-1, keepdims=True))
