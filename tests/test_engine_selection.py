"""The report's bounded-memory pieces against plain numpy: exact selection, worst elements,
decades, and the bit-equality fast path (which must change no figure of a comparison)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytest_trtcompare import Tolerance, compare_outputs
from pytest_trtcompare.engine import screen
from pytest_trtcompare.engine.accumulators import Cosine, Means
from pytest_trtcompare.engine.arrays import dtype_kind
from pytest_trtcompare.engine.chunks import Arithmetic, Equality, zero_unless
from pytest_trtcompare.engine.decades import Decades
from pytest_trtcompare.engine.figures import NAN_SHOWN, Worst
from pytest_trtcompare.engine.quantiles import RankSelect, quantile_of, quantile_ranks
from pytest_trtcompare.engine.tuning import TUNING

from .reference import _quantile, reference_verdict
from .results import flat, replaced
from .strategies import ALL_DTYPES, arrays_of, output_pairs, shapes, tolerances

# the float32 screen on these tests' small data too (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("screen_small_outputs")


_SETTINGS = settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])

_errors = hnp.arrays(
    np.float64,
    st.integers(0, 300),
    elements=st.one_of(
        st.sampled_from([0.0, 1.0, 0.1, 1e-3, 5e-324, 2.2e-308, math.inf, 1e300]),
        st.floats(min_value=0, allow_nan=False),
    ),
)


@pytest.fixture
def tiny(monkeypatch):
    """Chunks of 7 elements and selection buckets collected only below 5 values, so every
    round of the selection (histograms of 16 more bits, ties) runs on small data."""
    monkeypatch.setattr(TUNING, "chunk_elements", 7)
    monkeypatch.setattr(TUNING, "min_collect", 5)


def _select(values: np.ndarray, qs: list[float], limit: int) -> RankSelect:
    ranks = {r for q in qs for r in quantile_ranks(values.shape[0], q)[:2]}
    select = RankSelect(ranks, values.shape[0], limit)
    while not select.done:
        for start in range(0, values.shape[0], 5):
            part = values[start : start + 5]
            if part.shape[0] and not part.any():
                select.add_zeros(part.shape[0])
            else:
                select.add(part)
        select.finish_round()
    return select


@_SETTINGS
@given(values=_errors, q=st.sampled_from([0.0, 0.01, 0.5, 0.9, 0.99, 1.0]))
def test_selection_is_exact(tiny, values, q):
    if not values.shape[0]:
        return
    select = _select(values, [0.5, q], limit=0)
    ordered = np.sort(values)
    for rank, value in select.values.items():
        assert value == ordered[rank]
    assert quantile_of(select.values, values.shape[0], q) == _quantile(values.tolist(), q)


def test_few_values_are_selected_in_one_pass():
    """At most 65,536 values (a histogram's bins; TUNING.min_collect is more): kept as they
    come (copies: the engine reuses its chunks' buffers), with no round of histograms; then
    one partition."""
    values = np.random.default_rng(0).random(1000)
    ordered = np.sort(values)
    select = RankSelect({0, 499, 999}, 1000, 0)
    for start in range(0, 1000, 100):
        select.add(values[start : start + 100])
    values[:] = 0.0  # the buffer reused
    select.finish_round()
    assert select.done
    assert select.values == {0: ordered[0], 499: ordered[499], 999: ordered[999]}


def test_selection_of_many_ties_and_wide_ranges(monkeypatch):
    monkeypatch.setattr(TUNING, "min_collect", 3)
    cases = [np.full(50, 0.1), np.zeros(40), np.r_[np.full(30, 1e-300), np.full(30, 7.0)]]
    cases.append(np.r_[np.nextafter(1.0, 2.0) * np.ones(20), np.ones(21), [math.inf] * 3])
    for values in cases:
        select = _select(values, [0.5, 0.99], limit=0)
        assert quantile_of(select.values, values.shape[0], 0.5) == _quantile(values.tolist(), 0.5)
        assert quantile_of(select.values, values.shape[0], 0.99) == _quantile(values.tolist(), 0.99)


@_SETTINGS
@given(values=_errors)
def test_decades_are_floor_log10(values):
    extra = 10.0 ** np.arange(-300, 300, 37)
    values = np.concatenate([values, extra, np.nextafter(extra, 0), np.nextafter(extra, 2e300)])
    decades = Decades()
    for start in range(0, values.shape[0], 11):
        decades.add_values(values[start : start + 11])
    nonzero = values[values > 0]
    found, counts = np.unique(np.floor(np.log10(np.minimum(nonzero, 1e300))), return_counts=True)
    expected = [(None, int((values == 0).sum()))] if (values == 0).any() else []
    expected += [(int(d), int(c)) for d, c in zip(found, counts, strict=True)]
    assert decades.histogram() == tuple(expected)


@_SETTINGS
@given(
    pair=output_pairs(),
    tol=tolerances,
    size=st.integers(1, 30),
    chunk=st.integers(1, 9),
    first=st.integers(0, 40),
)
def test_worst_elements_are_a_plain_sort(pair, tol, size, chunk, first):
    """Whatever the order chunks arrive in: the report built in the scan's pass adds the
    chunks from the first mismatch on, then those before it."""
    actual, expected = pair
    a, e = actual.reshape(-1), expected.reshape(-1)
    a_kind, e_kind = dtype_kind(a.dtype), dtype_kind(e.dtype)
    worst = Worst(size)
    computer = Arithmetic(a_kind, e_kind, tol, chunk)
    starts = list(range(0, a.shape[0], chunk))
    first = first % len(starts) if starts else 0
    for start in starts[first:] + starts[:first]:
        worst.update(computer.compute(a[start : start + chunk], e[start : start + chunk], start))
    # reference: the first NaN errors (at most NAN_SHOWN), then every other element's
    # ratio, largest first (a tie: the larger error first, then the lower index), 0/0 never
    whole = Arithmetic(a_kind, e_kind, tol, max(1, a.shape[0]))
    ratios, errors = np.full(a.shape[0], np.nan), np.zeros(a.shape[0])
    nan: list[tuple[int, float]] = []
    if a.shape[0]:
        one = whole.compute(a, e, 0)
        positions = np.arange(a.shape[0]) if one.positions is None else one.positions
        ratios[positions], errors[positions] = one.ratio, one.abs_err
        if one.nan_error_positions is not None:
            nan = [(int(i), math.inf) for i in one.nan_error_positions[:NAN_SHOWN]]
    listed = [(r, errors[i], i) for i, r in enumerate(ratios.tolist()) if r > 0]
    listed.sort(key=lambda item: (-item[0], -item[1], item[2]))
    assert list(worst.compute()["worst"]) == (nan + [(i, r) for r, _, i in listed])[:size]


@given(dtype=st.sampled_from(ALL_DTYPES), shape=shapes, data=st.data())
def test_equal_chunks_means_bitwise_equal(dtype, shape, data):
    values = data.draw(arrays_of(dtype, shape)).reshape(-1)
    other = values.copy()
    checker = Equality(
        values.dtype, other.dtype, Tolerance(inf_equal=False), max(1, values.shape[0])
    )
    if not checker.enabled:
        assert values.dtype.name.startswith("float8")
        return
    no_inf = values.dtype.kind in "biu" or not bool(np.isinf(values.astype(np.float64)).any())
    assert (checker.equal(values, other, 0) is not None) is no_inf  # NaN pairs: NaN errors
    if values.shape[0] and values.dtype.kind != "b":
        other[-1:] = values[:1] + np.ones(1, dtype=values.dtype)  # -0.0 vs 0.0 differ too
        if other.view(np.uint8).tobytes() != values.view(np.uint8).tobytes():
            assert checker.equal(values, other, 0) is None


@given(
    dtype=st.sampled_from(ALL_DTYPES),
    shape=shapes,
    data=st.data(),
    nan_equal=st.booleans(),
    inf_equal=st.booleans(),
)
def test_equal_chunks_excuse_nan_and_inf_pairs_as_the_options_say(
    dtype, shape, data, nan_equal, inf_equal
):
    """Bit-for-bit equal chunks holding Inf are equal where inf_equal excuses the pairs
    (their errors are 0); NaN pairs are errors of 0 with nan_equal, NaN errors without.
    The counts are the float64 path's."""
    values = data.draw(arrays_of(dtype, shape)).reshape(-1)
    tol = Tolerance(nan_equal=nan_equal, inf_equal=inf_equal)
    checker = Equality(values.dtype, values.dtype, tol, max(1, values.shape[0]))
    if not checker.enabled:
        return
    wide = values.astype(np.float64) if values.dtype.kind not in "biu" else np.zeros(0)
    nan, inf = int(np.isnan(wide).sum()), int(np.isinf(wide).sum())
    excused = not inf or inf_equal
    equal = checker.equal(values, values.copy(), 0)
    assert (equal is not None) is excused
    if equal is not None:
        assert (equal.nan_actual, equal.inf_actual) == (nan, inf)
        assert equal.nan_errors == (0 if nan_equal else nan)
        kind = dtype_kind(values.dtype)
        computed = Arithmetic(kind, kind, tol, max(1, values.shape[0])).compute(values, values, 0)
        assert computed.nan_errors == equal.nan_errors
        assert computed.abs_err.shape[0] == equal.compared
        assert not computed.abs_err.any()


@given(
    values=hnp.arrays(
        st.sampled_from([np.float32, np.float64]),
        st.integers(0, 300),
        elements=st.floats(allow_nan=True, allow_infinity=True, width=32),
    ),
    data=st.data(),
)
def test_zero_unless_is_a_masked_zero(values, data):
    keep = data.draw(hnp.arrays(np.bool_, values.shape))
    wanted = np.where(keep, values, 0.0).astype(values.dtype)
    got = zero_unless(values.copy(), keep)
    assert got.tobytes() == wanted.tobytes()  # +0.0 where dropped; NaN bits kept


def _fields(out):
    return flat(out, Cosine.figures)  # its sums in another order: equal chunks' apart


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=output_pairs(), tol=tolerances, same=st.booleans(), split=st.integers(0, 40))
def test_fast_paths_change_no_figure(tiny, monkeypatch, pair, tol, same, split):
    """Equal chunks, NaN pairs in float32 and the selection against the plain float64 path."""
    actual, expected = pair
    if same:  # identical outputs, but for a tail: equal and unequal chunks mix
        actual = expected.copy()
        flat = actual.reshape(-1)
        if flat.shape[0] > split and flat.dtype.kind == "f":
            flat[split:] = flat[split:] * 1.5
    fast = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    with monkeypatch.context() as patch:
        patch.setattr(TUNING, "equality", False)
        patch.setattr(TUNING, "screen", False)
        plain = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    if screen.applies(actual.dtype, expected.dtype, tol):
        for name in (*Means.figures, "margin"):  # float32 sums: display
            assert getattr(fast, name) == pytest.approx(getattr(plain, name), rel=1e-4, abs=1e-30)
            fast = replaced(fast, **{name: getattr(plain, name)})
    assert _fields(fast) == _fields(plain) or _nan_equal(_fields(fast), _fields(plain))
    passed, mismatches, elements = reference_verdict(actual, expected, tol)
    assert (fast.passed, fast.mismatches) == (passed, mismatches)
    compared = [el for el in elements if not math.isnan(el.abs_err)]
    if fast.median_abs_error is not None and compared:
        assert fast.median_abs_error == _quantile([el.abs_err for el in compared], 0.5)
        assert fast.quantile_rel_error == _quantile([el.rel_err for el in compared], tol.quantile)


def _nan_equal(left: dict, right: dict) -> bool:
    """Equal, counting NaN as equal to NaN (the element tuples may hold NaN)."""
    return repr(left) == repr(right)


_INT64 = np.iinfo(np.int64)


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        (np.array([_INT64.max, 0, 5, _INT64.min], np.int64), np.array([_INT64.min, 0, 1, 0])),
        (np.array([2**64 - 1, 0, 7], np.uint64), np.array([0, 2**64 - 1, 7], np.uint64)),
        (np.array([2**64 - 1, 3], np.uint64), np.array([-1, _INT64.min], np.int64)),
        (np.array([True, False, True, True]), np.array([False, False, True, False])),
        (np.array(3.0), np.array(1.0)),
        (np.array([np.nan, 1.0, np.inf, 2.0]), np.array([np.nan, 2.0, 1.0, 2.0])),
    ],
)
@pytest.mark.parametrize("check", ["median", "quantile"])
def test_order_statistics_of_extremes(tiny, actual, expected, check):
    tol = Tolerance(atol=0, rtol=0, check=check, quantile=0.75, nan_equal=True)
    out = compare_outputs({"o": actual}, {"o": expected}, tol).outputs["o"]
    _, _, elements = reference_verdict(actual, expected, tol)
    abs_errors = [el.abs_err for el in elements if not math.isnan(el.abs_err)]
    rel_errors = [el.rel_err for el in elements if not math.isnan(el.abs_err)]
    assert out.median_abs_error == _quantile(abs_errors, 0.5)
    assert out.median_rel_error == _quantile(rel_errors, 0.5)
    assert out.quantile_abs_error == _quantile(abs_errors, 0.75)
    assert out.quantile_rel_error == _quantile(rel_errors, 0.75)


def test_empty_output_has_zero_order_statistics():
    out = compare_outputs({"o": np.zeros((0, 3))}, {"o": np.zeros((0, 3))}, check="median")
    assert out.outputs["o"].median_abs_error == 0.0 and out.outputs["o"].passed


def test_at_zero_tolerance_the_worst_elements_are_the_largest_errors():
    """atol = rtol = 0 makes every ratio inf: the larger error comes first, not the lower
    index (a new-user trial saw (0,) ... (9,) and not the worst element)."""
    from pytest_trtcompare import compare_outputs

    actual = np.ones(5000, np.float32)
    expected = actual.copy()
    actual[:20] += 1e-6
    actual[4321] += 0.5
    actual[77] += 0.1
    out = compare_outputs({"y": actual}, {"y": expected}, atol=0, rtol=0).outputs["y"]
    assert [element.index for element in out.worst[:3]] == [(4321,), (77,), (0,)]
