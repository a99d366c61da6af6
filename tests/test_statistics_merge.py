"""Every statistic merges: the statistics of the two halves of a pair, merged, give the
figures of the whole (ARCHITECTURE.md "A statistic"; torchmetrics' merge_state)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_trtcompare import Tolerance, compare_outputs
from pytest_trtcompare.engine import figures as figures_module
from pytest_trtcompare.engine.arrays import dtype_kind
from pytest_trtcompare.engine.quantiles import Quantiles
from pytest_trtcompare.engine.scan import Pair
from pytest_trtcompare.engine.statistic import STATISTICS
from pytest_trtcompare.engine.tuning import TUNING

from .strategies import output_pairs, tolerances
from .test_engine_namespace import sums


def statistics(pair: Pair) -> dict[str, object]:
    """One of each registered statistic, as the scan and the report make them for `pair`."""
    return {statistic.__name__: statistic.for_pair(pair) for statistic in STATISTICS}


def figures(found: dict[str, object]) -> dict[str, object]:
    """Their figures; the rounded ones' sums (summed in another order), after `compute`
    (the cosine's adds the equal chunks' squares to its sums)."""
    shown = {name: s.compute() for name, s in found.items()}
    rounded = [sums(s) for s in found.values() if s.rounded]
    return {name: shown[name] for name, s in found.items() if not s.rounded} | {
        "sums": tuple(x for part in rounded for x in part)
    }


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    pair=output_pairs(),
    tol=tolerances,
    chunk=st.integers(1, 5),
    split=st.floats(0, 1),
    windows=st.booleans(),
)
def test_two_halves_merged_give_the_whole(monkeypatch, pair, tol, chunk, split, windows):
    monkeypatch.setattr(TUNING, "chunk_elements", chunk)
    monkeypatch.setattr(TUNING, "screen_min", 1)  # narrow floats: float32 chunks too
    monkeypatch.setattr(TUNING, "window_min", 1 if windows else 1 << 30)
    monkeypatch.setattr(TUNING, "sample", 16)
    monkeypatch.setattr(figures_module, "WORST_ELEMENTS", 7)  # merges that evict
    actual, expected = (np.asarray(side).reshape(-1) for side in pair)
    kinds = (dtype_kind(actual.dtype), dtype_kind(expected.dtype))
    if tol.check == "indices" or None in kinds:
        return
    made = Pair(actual, expected, kinds, tol)
    whole, first, second = statistics(made), statistics(made), statistics(made)
    starts = list(made.starts())
    half = min(max(1, round(split * len(starts))), len(starts) - 1)  # both halves non-empty
    with np.errstate(all="ignore"):  # as the scan feeds them
        for i, start in enumerate(starts):
            chunk = made.chunk(start)
            for name in whole:
                whole[name].update(chunk)
                (first if i < half else second)[name].update(chunk)
        for name, statistic in first.items():
            statistic.merge(second[name])
        merged, expected_figures = figures(first), figures(whole)
    sums, whole_sums = merged.pop("sums"), expected_figures.pop("sums")
    assert sums == pytest.approx(whole_sums, rel=1e-12, nan_ok=True)  # summed in other order
    assert repr(merged) == repr(expected_figures)


def _large(kind: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    expected = rng.standard_normal(20000).astype(np.float32)
    if kind == "noise":
        return expected + rng.standard_normal(20000).astype(np.float32) * 1e-3, expected
    if kind == "tied":  # errors of few values: the windows' edges hold many
        return expected + rng.integers(0, 4, 20000).astype(np.float32), expected
    actual = expected.copy()
    actual[rng.choice(20000, 300, replace=False)] = np.nan
    return actual, expected


@pytest.mark.parametrize("kind", ["noise", "tied", "NaN"])
@pytest.mark.parametrize("screen", [True, False])
def test_halves_of_a_large_pair_merge_through_the_windows(monkeypatch, kind, screen):
    """Windows narrow enough to matter (a sample of 1,024 of 20,000 errors): each half
    counts below, at and inside the same windows."""
    for name, value in (("chunk_elements", 1000), ("window_min", 1), ("sample", 1024)):
        monkeypatch.setattr(TUNING, name, value)
    monkeypatch.setattr(TUNING, "screen", screen)
    monkeypatch.setattr(figures_module, "WORST_ELEMENTS", 7)
    actual, expected = _large(kind)
    from pytest_trtcompare import Tolerance

    made = Pair(actual, expected, ("float", "float"), Tolerance(atol=1e-3, rtol=1e-3))
    whole, first, second = statistics(made), statistics(made), statistics(made)
    assert made.windows and whole["Quantiles"].windows
    with np.errstate(all="ignore"):
        for start in made.starts():
            chunk = made.chunk(start)
            for name in whole:
                whole[name].update(chunk)
                (first if start < 9000 else second)[name].update(chunk)
        for name, statistic in first.items():
            statistic.merge(second[name])
        merged, expected_figures = figures(first), figures(whole)
    assert merged.pop("sums") == pytest.approx(expected_figures.pop("sums"), rel=1e-12)
    assert repr(merged) == repr(expected_figures)
    # and from the windows, with no second reading (which would hide a miscount)
    for (_, mine), (_, theirs) in zip(
        first["Quantiles"].windows, whole["Quantiles"].windows, strict=True
    ):
        assert not mine.failed and window_state(mine) == window_state(theirs)


def window_state(window) -> tuple:
    kept = np.sort(np.concatenate(window.parts)) if window.parts else np.zeros(0)
    return window.below, window.at_lo, window.at_hi, window.kept, kept.tolist()


@pytest.mark.parametrize("kept", [0, 900, 1 << 22])
def test_halves_of_a_tensor_pair_merge_whether_kept_or_read_again(monkeypatch, kept):
    """The torch path's order statistics: each half keeps its non-zero errors up to
    `TUNING.torch_kept` (900: the halves keep 400 and 800, the whole 1,200) or reads them
    again."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(TUNING, "torch_chunk_elements", 100)
    monkeypatch.setattr(TUNING, "torch_kept", kept)
    rng = np.random.default_rng(3)
    expected = rng.standard_normal(800).astype(np.float32)
    actual = expected + rng.standard_normal(800).astype(np.float32) * 1e-3
    actual[:200] = expected[:200]  # equal chunks: their errors are zeros
    tol = Tolerance(atol=1e-5, rtol=1e-5)
    made = Pair(torch.from_numpy(actual), torch.from_numpy(expected), ("float", "float"), tol)
    whole, first, second = (
        Quantiles(tol.quantile, made.n, None, made.float64_chunks) for _ in "123"
    )
    for i, start in enumerate(made.starts()):
        chunk = made.chunk(start)
        whole.update(chunk)
        (first if i < 4 else second).update(chunk)
    first.merge(second)
    host = Pair(actual, expected, ("float", "float"), tol)
    on_host = Quantiles(tol.quantile, host.n, None, host.float64_chunks)
    for start in host.starts():
        on_host.update(host.chunk(start, exact=True))
    assert first.compute() == whole.compute() == on_host.compute()


@pytest.mark.parametrize("failing", [False, True])
def test_every_statistic_gives_the_results_figures_by_name(failing):
    """Each registered statistic gives exactly its `figures`, each an attribute of the
    output's result, and the result holds what it gave (elements for flat indices)."""
    expected = np.linspace(-1, 1, 5000, dtype=np.float32)
    actual = expected + np.float32(0.1 if failing else 1e-6)
    tol = Tolerance(atol=1e-3, rtol=1e-3, check="median")
    made = Pair(actual, expected, ("float", "float"), tol)
    result = compare_outputs(actual, expected, tol).outputs["output"]
    for kind in STATISTICS:
        statistic = kind.for_pair(made)
        for start in made.starts():
            statistic.update(made.chunk(start))
        figures = statistic.compute()
        assert list(figures) == list(kind.figures), kind
        if kind.when == "reported" and kind is not Quantiles and not failing:
            continue  # a report's figures: in the result of a failing output
        for name, value in figures.items():
            if name in ("worst", "greatest_abs", "greatest_rel"):  # flat indices: elements
                continue
            if name == "margin" or name.startswith("required_"):
                continue  # the median check's; an elementwise check's only
            assert repr(getattr(result, name)) == repr(value), name
