"""The engine's accelerators change no figure: bit-equal chunks, the float32 screen and the
one-pass failure report (windows on a sample, float32 candidates refined in float64), each
against the plain float64 path with its radix selection (`TUNING` turns them off) and
tests/reference.py, on hypothesis data and on the benchmark's data catalogue."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_trtcompare import Tolerance, compare_outputs
from pytest_trtcompare.engine import quantiles as quantiles_module
from pytest_trtcompare.engine import scan as scan_module
from pytest_trtcompare.engine import screen
from pytest_trtcompare.engine.chunks import Arithmetic, Equality, ErrorChunk
from pytest_trtcompare.engine.decades import Decades
from pytest_trtcompare.engine.figures import required_tolerances
from pytest_trtcompare.engine.scan import Pair, Report, scan
from pytest_trtcompare.engine.tuning import TUNING

from .reference import _quantile, reference_verdict
from .results import ROUNDED, flat, replaced
from .strategies import output_pairs, tolerances
from .test_engine_screen import edge_pairs

# the float32 screen on these tests' small data too (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("screen_small_outputs")


_SETTINGS = settings(max_examples=250, suppress_health_check=[HealthCheck.function_scoped_fixture])
_NARROW = [np.float16, np.float32, ml_dtypes.bfloat16, np.float64, np.int32]


@pytest.fixture
def tiny(monkeypatch):
    monkeypatch.setattr(TUNING, "chunk_elements", 7)
    monkeypatch.setattr(TUNING, "min_collect", 5)


def _check(monkeypatch, actual, expected, tol, sample, cap=1 << 16):
    with monkeypatch.context() as patch:
        patch.setattr(TUNING, "window_min", 0)
        patch.setattr(TUNING, "sample", sample)
        patch.setattr(TUNING, "window_cap", cap)
        fast = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    with monkeypatch.context() as patch:  # the float64 path with its radix selection
        patch.setattr(TUNING, "window_min", math.inf)
        patch.setattr(TUNING, "equality", False)
        patch.setattr(TUNING, "screen", False)
        plain = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    if fast.passed and screen.applies(actual.dtype, expected.dtype, tol):
        assert fast.margin == pytest.approx(plain.margin, rel=1e-5)  # float32 estimate
        object.__setattr__(fast, "margin", plain.margin)
    assert repr(flat(fast, ROUNDED)) == repr(flat(plain, ROUNDED))
    passed, mismatches, elements = reference_verdict(actual, expected, tol)
    assert (fast.passed, fast.mismatches) == (passed, mismatches)
    compared = [el for el in elements if not math.isnan(el.abs_err)]
    if fast.median_abs_error is not None and compared:
        assert fast.median_abs_error == _quantile([el.abs_err for el in compared], 0.5)
        assert fast.median_rel_error == _quantile([el.rel_err for el in compared], 0.5)
        assert fast.quantile_abs_error == _quantile([el.abs_err for el in compared], tol.quantile)
        assert fast.quantile_rel_error == _quantile([el.rel_err for el in compared], tol.quantile)


@_SETTINGS
@given(
    pair=output_pairs(),
    tol=tolerances,
    sample=st.sampled_from([1, 3, 10, 1 << 17]),
    cap=st.sampled_from([0, 2, 1 << 16]),
)
def test_one_pass_report_of_any_pair(tiny, monkeypatch, pair, tol, sample, cap):
    """Ties, NaN, Inf, ints, bool, fp8/fp16/bf16 against anything; samples that mislead,
    windows that overflow their cap."""
    _check(monkeypatch, *pair, tol, sample, cap)


@_SETTINGS
@given(case=edge_pairs(), sample=st.sampled_from([2, 5, 1 << 17]))
def test_one_pass_report_at_the_tolerance_edge(tiny, monkeypatch, case, sample):
    actual, expected, tol = case
    _check(monkeypatch, actual, expected, tol, sample)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32 - 1),
    dtypes=st.sampled_from([(a, e) for a in _NARROW[:3] for e in _NARROW[:3]]),
    offset=st.sampled_from([0.0, 1e-4, 0.1, 1.0]),
    rule=st.sampled_from(["polygraphy", "allclose"]),
    check=st.sampled_from(["elemwise", "median", "quantile"]),
    ties=st.booleans(),
)
def test_one_pass_report_of_larger_outputs(monkeypatch, seed, dtypes, offset, rule, check, ties):
    """Thousands of elements in real chunks: windows that hold the wanted ranks, decade
    boundaries (an offset of 0.1), many tied errors, exact zeros."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1000, 5000))
    expected = rng.standard_normal(size)
    if ties:
        expected = np.round(expected * 4) / 4
        expected[rng.random(size) < 0.3] = 0.0
    expected = expected.astype(dtypes[1])
    noise = rng.standard_normal(size) * 1e-3 + offset
    actual = (expected.astype(np.float64) + noise).astype(dtypes[0])
    if ties:
        same = rng.random(size) < 0.3
        actual[same] = expected[same].astype(dtypes[0])
    tol = Tolerance(atol=1e-3, rtol=1e-3, rule=rule, check=check, quantile=0.9)
    _check(monkeypatch, actual, expected, tol, 1 << 10)


_STARTS = 10.0 ** np.arange(-45, 39)


@_SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    scale=st.integers(-40, 37),
    near=st.sampled_from([0.0, 1e-8, -1e-8, 6e-8, -6e-8, -1.2e-7, 1e-3]),
)
def test_float32_decades_are_float64s(seed, scale, near):
    """Errors of float32 pairs on and around decade boundaries (10 ** k within float32
    rounding), exact zeros, subnormals: the histogram of their float64 errors."""
    rng = np.random.default_rng(seed)
    actual = (rng.standard_normal(300) * 10.0**scale).astype(np.float32)
    offsets = rng.choice(_STARTS, 300) * rng.choice([-1.0, 1.0], 300) * (1 + near)
    with np.errstate(over="ignore", invalid="ignore"):
        expected = (actual.astype(np.float64) + offsets).astype(np.float32)
        expected[:30] = actual[:30]
        exact = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
        rounded = np.abs(actual - expected)
    finite = np.isfinite(rounded)
    exact, rounded = exact[finite], rounded[finite]
    plain, fast = Decades(), Decades()
    plain.add_values(exact)
    fast.add_float32(rounded, lambda at: exact[at])
    assert fast.histogram() == plain.histogram()


@pytest.mark.parametrize("first_failing_chunk", [0, 5, 15])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_the_report_is_built_in_the_scans_pass(monkeypatch, first_failing_chunk, dtype):
    """Chunks from the first mismatch on are read once (the scan hands its float32 errors
    over); only those before it are read again; every figure equals a pass of its own."""
    size = 1024
    monkeypatch.setattr(TUNING, "chunk_elements", size)
    monkeypatch.setattr(TUNING, "window_min", 0)
    monkeypatch.setattr(TUNING, "sample", 256)
    rng = np.random.default_rng(first_failing_chunk)
    expected = rng.standard_normal(16 * size).astype(dtype)
    actual = (expected.astype(np.float64) + rng.standard_normal(16 * size) * 1e-5).astype(dtype)
    bad = first_failing_chunk * size + rng.choice(size, 3, replace=False)
    actual[bad] += dtype(1.0)
    tol = Tolerance(atol=1e-3, rtol=1e-3)

    added = []
    real_add = scan_module.Report.add

    def add(self, chunk):
        added.append(chunk.start)
        return real_add(self, chunk)

    monkeypatch.setattr(scan_module.Report, "add", add)
    out = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    # the chunks from the first mismatch on, as the scan reads them; then those before
    assert added == [c * size for c in range(first_failing_chunk, 16)] + [
        c * size for c in range(first_failing_chunk)
    ]
    assert out.mismatches == 3 and not out.passed

    pair = Pair(actual, expected, ("float", "float"), tol)
    alone = Report(pair).finish()  # every chunk read by the report alone
    assert [tuple(np.unravel_index(flat, actual.shape)) for flat, _ in alone.pop("worst")] == [
        w.index for w in out.worst
    ]
    assert alone == {name: getattr(out, name) for name in alone}
    assert set(alone) >= {"histogram", "required_atol_at_rtol", "median_abs_error"}


@pytest.mark.parametrize("check", ["elemwise", "quantile"])
@pytest.mark.parametrize(
    ("special", "nan_equal", "inf_equal"),
    [
        ("nan", False, True),  # every NaN pair a NaN error
        ("nan", True, True),  # NaN pairs excused
        ("inf", True, True),  # Inf pairs excused
        ("inf", True, False),  # Inf pairs compared: not equal chunks
        ("both", False, True),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64])
def test_identical_outputs_with_nan_and_inf_as_the_plain_path(
    monkeypatch, check, special, nan_equal, inf_equal, dtype
):
    """Bit-for-bit equal chunks holding NaN or Inf pairs (counted, excused or NaN errors)
    against the float64 path that computes every chunk; a tail that differs mixes them with
    chunks of errors, and the first chunks hold no NaN."""
    size = 1024
    monkeypatch.setattr(TUNING, "chunk_elements", size)
    rng = np.random.default_rng(3)
    n = 12 * size + 77
    expected = rng.standard_normal(n).astype(dtype)
    where = np.flatnonzero(rng.random(n) < 0.2)
    where = where[where >= 3 * size]
    if special in ("nan", "both"):
        expected[where[::2]] = np.nan
    if special in ("inf", "both"):
        expected[where[1::2]] = -np.inf
    actual = expected.copy()
    actual[-100:] = (actual[-100:].astype(np.float64) * 1.5).astype(dtype)
    tol = Tolerance(atol=1e-3, rtol=1e-3, check=check, nan_equal=nan_equal, inf_equal=inf_equal)
    _check(monkeypatch, actual, expected, tol, sample=512)
    report = str(compare_outputs({"o": actual}, {"o": expected}, tol))
    with monkeypatch.context() as patch:
        patch.setattr(TUNING, "equality", False)
        assert str(compare_outputs({"o": actual}, {"o": expected}, tol)) == report


def test_chunks_the_scan_found_equal_are_not_compared_again(monkeypatch):
    """The report re-reads the chunks before its first mismatch (and every chunk for the
    radix selection of a small output); those the scan found bit-for-bit equal it takes as
    equal (NaN errors counted) without comparing bits again."""
    size = 1024
    monkeypatch.setattr(TUNING, "chunk_elements", size)
    rng = np.random.default_rng(5)
    expected = rng.standard_normal(16 * size).astype(np.float32)
    expected[rng.random(expected.shape[0]) < 0.1] = np.nan
    expected[: 7 * size][np.isnan(expected[: 7 * size])] = 0.0  # NaN errors after chunk 6
    actual = expected.copy()
    actual[5 * size + 3] += np.float32(1.0)
    tol = Tolerance(atol=1e-3, rtol=1e-3)
    compared = []
    real_equal = Equality.equal

    def equal(self, a, e, start):
        compared.append(start)
        return real_equal(self, a, e, start)

    with monkeypatch.context() as patch:
        patch.setattr(Equality, "equal", equal)
        out = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    equal_chunks = [start for start in compared if start != 5 * size]
    assert sorted(equal_chunks) == [c * size for c in range(16) if c != 5]  # once each
    assert out.nan_errors == int(np.isnan(expected).sum())
    assert out.mismatches == out.nan_errors + 1
    first_nan = int(np.flatnonzero(np.isnan(expected))[0])
    assert out.worst[0].index == (first_nan,)
    _assert_as_the_plain_float64_path(monkeypatch, out, actual, expected, tol)


def test_chunks_with_nan_errors_are_made_once(monkeypatch):
    """NaN errors in every chunk (no nan_equal): the screen leaves them out, and the chunk
    the scan made serves the report, so each chunk is made once; every figure equals a
    pass of its own and the plain float64 path's."""
    size = 1024
    monkeypatch.setattr(TUNING, "chunk_elements", size)
    monkeypatch.setattr(TUNING, "window_min", 0)
    monkeypatch.setattr(TUNING, "sample", 256)
    rng = np.random.default_rng(7)
    expected = rng.standard_normal(16 * size).astype(np.float32)
    expected[rng.random(expected.shape[0]) < 0.3] = np.nan
    actual = expected + np.float32(1e-2) * (rng.random(expected.shape[0]) < 0.01)
    tol = Tolerance(atol=1e-3, rtol=1e-3)

    made = []
    real_chunk = scan_module.Pair.chunk

    def chunk(self, start, *args, **kwargs):
        made.append(start)
        return real_chunk(self, start, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(scan_module.Pair, "chunk", chunk)
        out = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    assert made == list(range(0, 16 * size, size))
    assert out.nan_errors == int(np.isnan(expected).sum()) and not out.passed
    pair = Pair(actual, expected, ("float", "float"), tol)
    alone = Report(pair).finish()
    assert [tuple(np.unravel_index(flat, actual.shape)) for flat, _ in alone.pop("worst")] == [
        w.index for w in out.worst
    ]
    assert alone == {name: getattr(out, name) for name in alone}
    _assert_as_the_plain_float64_path(monkeypatch, out, actual, expected, tol)


def _assert_as_the_plain_float64_path(monkeypatch, fast, actual, expected, tol):
    """A failing output's figures equal those of the float64 path without windows."""
    with monkeypatch.context() as patch:
        patch.setattr(TUNING, "window_min", math.inf)
        patch.setattr(TUNING, "screen", False)
        plain = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    assert repr(flat(fast, ROUNDED)) == repr(flat(plain, ROUNDED))
    assert not fast.passed


@pytest.mark.parametrize(
    "case",
    ["off by exactly 1", "ones against zeros", "two tied values", "fp16 ties"],
)
def test_tied_errors_need_no_exact_selection(monkeypatch, case):
    """Errors that tie in float32 (and in float64) at the wanted ranks: the windows count
    the elements at their edges instead of keeping them, so the radix selection's extra
    passes never run, and every figure equals the plain float64 path's."""
    n = (1 << 18) + 123
    rng = np.random.default_rng(7)
    expected = rng.standard_normal(n).astype(np.float32)
    if case == "off by exactly 1":
        actual = expected + np.float32(1)
    elif case == "ones against zeros":
        actual, expected = np.ones(n, np.float32), np.zeros(n, np.float32)
    elif case == "two tied values":
        actual = expected + np.where(rng.random(n) < 0.5, np.float32(0.5), np.float32(2))
    else:
        expected = expected.astype(np.float16)
        actual = (expected + np.float16(0.25)).astype(np.float16)
    tol = Tolerance(atol=1e-5, rtol=1e-5, check="median")

    def no_selection(*args, **kwargs):
        raise AssertionError("the exact radix selection ran")

    with monkeypatch.context() as patch:
        patch.setattr(quantiles_module, "RankSelect", no_selection)
        fast = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    _assert_as_the_plain_float64_path(monkeypatch, fast, actual, expected, tol)


@pytest.mark.parametrize(
    ("case", "rule"),
    [
        ("off by exactly 1", "polygraphy"),
        ("off by exactly 1", "allclose"),
        ("ones against zeros", "polygraphy"),
        ("tied, with NaN pairs", "polygraphy"),
        ("tied, rising", "allclose"),
    ],
)
def test_whole_float64_chunks_serve_the_scan_too(monkeypatch, case, rule):
    """A chunk the report computes whole in float64 (tied errors) gives the scan its exact
    maxima and cosine sums, and the chunks after it take one exact float64 pass for the scan
    and the report: the scan's verdict, counts and maxima are those of a scan without a
    report, and every report figure the plain float64 path's."""
    n = 6 * TUNING.chunk_elements + 321
    rng = np.random.default_rng(3)
    expected = rng.standard_normal(n).astype(np.float32)
    actual = expected + np.float32(1)
    nan_equal = False
    if case == "ones against zeros":
        actual, expected = np.ones(n, np.float32), np.zeros(n, np.float32)
    elif case == "tied, with NaN pairs":
        nan = rng.random(n) < 0.01
        actual[nan] = expected[nan] = np.nan
        nan_equal = True
    elif case == "tied, rising":
        actual = expected + np.repeat(np.arange(1, 8, dtype=np.float32), n // 7 + 1)[:n]
    tol = Tolerance(atol=1e-3, rtol=1e-3, rule=rule, nan_equal=nan_equal)
    whole_chunks = []
    real_add = scan_module.Report.add

    def add(self, chunk):
        real_add(self, chunk)
        whole_chunks.append(not chunk.equal and (chunk.exact or chunk.whole is not None))

    with monkeypatch.context() as patch:
        patch.setattr(scan_module.Report, "add", add)
        pair = Pair(actual, expected, ("float", "float"), tol)
        with_report = scan(pair, Report(pair))
    assert sum(whole_chunks) >= 3  # the case takes the whole-chunk path
    alone = scan(Pair(actual, expected, ("float", "float"), tol))
    # Whole chunks take the exact float64 path: its means, cosine and margin are float64 sums
    # and maxima, a few float32 ulps from the screen's (display only); the rest is identical.
    for field, value in alone.items():
        if field in (*ROUNDED, "margin"):
            assert with_report[field] == pytest.approx(value, rel=1e-6), field
        else:
            assert with_report[field] == value, field

    fast = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    _assert_as_the_plain_float64_path(monkeypatch, fast, actual, expected, tol)


def _required_by_definition(chunk, tol):
    """The "would pass with" maxima, written out with boolean indexing."""
    d, r, eabs = chunk.abs_err, chunk.rel_err, chunk.expected_abs

    def top(values):
        return float(values.max()) if values.shape[0] else 0.0

    if tol.rule == "polygraphy":
        return max(top(d[r > tol.rtol]), 0.0), max(top(r[d > tol.atol]), 0.0)
    with np.errstate(all="ignore"):
        need_atol = d - tol.rtol * eabs
        need_atol = need_atol[~np.isnan(need_atol)]
        atol_need = math.inf if np.isinf(d).any() else max(top(need_atol), 0.0)
        rtol_need = max(top((d[d > tol.atol] - tol.atol) / eabs[d > tol.atol]), 0.0)
    return atol_need, math.inf if math.isnan(rtol_need) else rtol_need


@_SETTINGS
@given(pair=output_pairs(dtypes=[np.float32, np.float64, np.float16]), tol=tolerances)
def test_would_pass_with_takes_the_maxima_over_its_masks(pair, tol):
    """`required_tolerances` reads the largest value when it lies inside its mask; against
    the maxima written out with boolean indexing, on data with NaN, Inf and zeros."""
    actual, expected = (x.reshape(-1) for x in pair)
    chunk = Arithmetic("float", "float", tol, max(1, actual.shape[0])).compute(actual, expected, 0)
    got = required_tolerances(chunk, tol)
    want = _required_by_definition(chunk, tol)
    assert repr(got) == repr(want)


@pytest.mark.parametrize("nan_share", [0.5, 1e-4])
def test_zero_errors_and_nan_pairs_tie_without_a_whole_chunk(monkeypatch, nan_share):
    """Mostly exact outputs with NaN pairs (nan_equal) and a mismatch in the first chunk, so
    the report reads every chunk: the worst elements are the few nonzero errors and then
    the first exact zeros, never a NaN pair, and no chunk is computed whole in float64."""
    n = 5 * TUNING.chunk_elements  # no short last chunk, where a few candidates are dense
    rng = np.random.default_rng(11)
    expected = rng.standard_normal(n).astype(np.float32)
    expected[rng.random(n) < nan_share] = np.nan
    expected[:40] = np.nan  # the first elements: NaN pairs must not take the zeros' places
    actual = expected.copy()
    finite = np.flatnonzero(~np.isnan(expected))
    off = np.append(rng.choice(finite[finite > 100], 6, replace=False), finite[0])
    actual[off] += np.float32(0.5)  # one in the first chunk: the report starts there
    tol = Tolerance(atol=1e-3, rtol=1e-3, nan_equal=True)

    real_whole_chunk = ErrorChunk.whole_chunk

    def no_whole_chunk(self):
        assert self.exact or self.whole is not None, "a float32 chunk was computed whole"
        return real_whole_chunk(self)

    with monkeypatch.context() as patch:
        patch.setattr(ErrorChunk, "whole_chunk", no_whole_chunk)
        fast = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    flat = [np.ravel_multi_index(w.index, actual.shape) for w in fast.worst]
    assert sorted(flat[:7]) == sorted(off.tolist())
    assert not np.isnan(expected[flat]).any()
    _assert_as_the_plain_float64_path(monkeypatch, fast, actual, expected, tol)


def _benchmark_catalogue():
    """bench/bench_compare.py's scenarios: the data the engine is measured on."""
    path = Path(__file__).parents[1] / "bench" / "bench_compare.py"
    spec = importlib.util.spec_from_file_location("bench_compare", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SCENARIOS


_CATALOGUE = _benchmark_catalogue()


@pytest.mark.parametrize("scenario", list(_CATALOGUE))
def test_the_benchmark_catalogue_gets_the_plain_paths_figures(monkeypatch, scenario):
    """Every benchmark scenario, small and in many chunks, with every accelerator (bit
    equality, the float32 screen, windows on a sample) against the plain float64 path with
    its radix selection: the same verdict and figures, the report included."""
    monkeypatch.setattr(TUNING, "chunk_elements", 1024)
    monkeypatch.setattr(TUNING, "min_collect", 64)
    actual, expected, fields = _CATALOGUE[scenario](20_000)
    checks = [Tolerance(check=check) for check in fields.get("metrics", ())]
    base = Tolerance(**{k: v for k, v in fields.items() if k != "metrics"})
    tolerance = [base, *checks] if checks else base
    with monkeypatch.context() as patch:
        patch.setattr(TUNING, "window_min", 0)
        patch.setattr(TUNING, "sample", 2048)
        fast = compare_outputs({"o": actual}, {"o": expected}, tolerance)
    with monkeypatch.context() as patch:
        for name, value in (("window_min", math.inf), ("screen", False), ("equality", False)):
            patch.setattr(TUNING, name, value)
        plain = compare_outputs({"o": actual}, {"o": expected}, tolerance)
    quick, slow = fast.outputs["o"], plain.outputs["o"]
    assert quick.passed is ("(fails)" not in scenario)
    if screen.applies(actual.dtype, expected.dtype, base):  # float32 sums: display figures
        for name in (*ROUNDED, "margin"):
            assert getattr(quick, name) == pytest.approx(getattr(slow, name), rel=1e-5)
        quick = replaced(quick, **{name: getattr(slow, name) for name in (*ROUNDED, "margin")})
    assert repr(flat(quick)) == repr(flat(slow))
    passed, mismatches, _ = reference_verdict(actual, expected, base)
    if base.check == "elemwise":
        verdict = quick.base_passed if checks else quick.passed
        assert (verdict, quick.mismatches) == (passed, mismatches)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("torch", "false", "TUNING.torch takes True or False, not 'false'"),
        ("torch", 1, "TUNING.torch takes True or False, not 1"),
        ("torch_kept", "abc", "TUNING.torch_kept takes a number of at least 0, not 'abc'"),
        ("staging_bytes", -1, "TUNING.staging_bytes takes a number of at least 0, not -1"),
        ("torhc", True, "TUNING has no 'torhc'; it has chunk_elements, screen, "),
    ],
)
def test_tuning_takes_its_fields_and_their_types_only(name, value, message):
    """A string "false" would switch the torch path on: the switch refuses it, by name."""
    before = TUNING.torch, TUNING.torch_kept, TUNING.staging_bytes
    with pytest.raises((TypeError, AttributeError), match=re.escape(message)):
        setattr(TUNING, name, value)
    assert (TUNING.torch, TUNING.torch_kept, TUNING.staging_bytes) == before
