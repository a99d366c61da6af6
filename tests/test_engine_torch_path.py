"""The torch path (engine/tensors.py) gives the numpy path's verdicts and report.

A CUDA tensor is compared on its device by torch; `TUNING.torch` sends CPU tensors the same
way, so CI runs that code here. Each test compares one pair twice, the tensors taken to the
host and numpy (`TUNING.torch` off, today's CPU default) and by torch (on): the same verdict,
the same figures (sums, whose order differs, within float64 rounding: the means, the
cosine of the statistics and the cosine/l2/snr/psnr/kl metrics) and the same report text.
"""

from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_trtcompare import ComparisonResult, Tolerance, compare_outputs
from pytest_trtcompare.engine import METRICS, scan, tensors
from pytest_trtcompare.engine.tuning import TUNING

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run
from .results import ROUNDED as STATISTICS_ROUNDED
from .results import replaced
from .strategies import output_pairs, tolerances

torch = pytest.importorskip("torch")

#: Figures that numpy's path rounds (engine/screen.py: "means and the cosine similarity of
#: passing chunks are float32 values summed in float64 (display only)"; the margin of a
#: passing output is the screen's float32 ratio) or that are sums, whose float64 rounding
#: depends on the order of summation: |torch - numpy| <= ABS + REL |numpy| for these.
ROUNDED = (*STATISTICS_ROUNDED, "margin")
SUMMED_METRICS = ("cosine", "l2", "snr", "psnr", "kl")
REL, ABS = 1e-6, 1e-9


def as_tensor(values: np.ndarray):
    """The same values as a torch tensor of the same dtype (via float32 for ml_dtypes)."""
    values = np.asarray(values)
    if values.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(values.astype(np.float32)).to(torch.bfloat16)
    if values.dtype == ml_dtypes.float8_e4m3fn:
        return torch.from_numpy(values.astype(np.float32)).to(torch.float8_e4m3fn)
    return torch.from_numpy(np.require(values, requirements="C"))


#: Where the torch path runs: the CPU here, a CUDA device where torch sees one (`-m cuda`).
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device"),
        ],
    ),
]


def both_paths(monkeypatch, actual, expected, tolerance, device="cpu", **fields):
    """compare_outputs on the host (numpy, the tensors on the CPU) and on the torch path
    (the tensors on `device`)."""
    monkeypatch.setattr(TUNING, "torch", False)
    on_numpy = compare_outputs(actual, expected, tolerance, **fields)
    monkeypatch.setattr(TUNING, "torch", True)
    actual, expected = _on(actual, device), _on(expected, device)
    on_torch = compare_outputs(actual, expected, tolerance, **fields)
    return on_numpy, on_torch


def _on(outputs, device: str):
    if isinstance(outputs, dict):
        return {name: _on(value, device) for name, value in outputs.items()}
    return outputs.to(device) if isinstance(outputs, torch.Tensor) else outputs


def _close(x: float | None, y: float | None, allowed: float = ABS) -> bool:
    if x is None or y is None or math.isnan(x) or math.isnan(y) or math.isinf(x):
        return x == y or (x is not None and y is not None and math.isnan(x) and math.isnan(y))
    return abs(x - y) <= allowed + REL * abs(y)


def cosine_rounding(actual: np.ndarray, expected: np.ndarray) -> float:
    """How far two correct computations of the statistics' cosine may differ: it is taken
    from |a|², |e|² and |a-e|² (engine/accumulators.py `cosine_from_sums`), whose rounding
    it magnifies by (|a-e|² + ||a|² - |e|²|) / (2 |a| |e|): huge where the norms differ by
    orders of magnitude."""
    with np.errstate(all="ignore"):
        a, e = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
        finite = np.isfinite(a) & np.isfinite(e)
        a, e = a[finite], e[finite]
        aa, ee, dd = float(a @ a), float(e @ e), float((a - e) @ (a - e))
    if not (aa > 0 and ee > 0 and math.isfinite(aa + ee + dd)):
        return ABS if aa == 0 or ee == 0 else math.inf
    return ABS + 1e-6 * (dd + abs(aa - ee)) / (2 * math.sqrt(aa) * math.sqrt(ee))


def _borderline(out) -> bool:
    """A verdict that a sum's rounding may decide: the mean statistic or a summed metric
    within rounding of its bound."""
    tol = out.tolerance
    if tol.check == "mean" and (
        _close(out.mean_abs_error, tol.atol) or _close(out.mean_rel_error, tol.rtol)
    ):
        return True
    return any(m.check in SUMMED_METRICS and _close(m.value, m.threshold) for m in out.metrics)


def assert_same(
    on_numpy: ComparisonResult, on_torch: ComparisonResult, cosine: float = ABS
) -> None:
    """Same verdicts, figures and report text (rounded figures within rounding; `cosine`:
    the statistics' cosine within `cosine_rounding`)."""
    assert list(on_torch.outputs) == list(on_numpy.outputs)
    aligned = {}
    for name, expected in on_numpy.outputs.items():
        found = on_torch.outputs[name]
        if found.passed != expected.passed and _borderline(expected):
            return  # a sum at its bound: either verdict is within rounding
        for field in ROUNDED:
            allowed = cosine if field == "cosine_similarity" else ABS
            assert _close(getattr(found, field), getattr(expected, field), allowed), field
        for mine, theirs in zip(found.metrics, expected.metrics, strict=True):
            assert mine.check == theirs.check
            if mine.check in SUMMED_METRICS:
                assert _close(mine.value, theirs.value), (name, mine, theirs)
        changes = {field: getattr(expected, field) for field in ROUNDED}
        changes["metrics"] = expected.metrics
        if expected.tolerance.check == "mean":  # the checked statistic is the means'
            assert _close(found.required_atol, expected.required_atol)
            assert _close(found.required_rtol, expected.required_rtol)
            changes.update(
                required_atol=expected.required_atol, required_rtol=expected.required_rtol
            )
        aligned[name] = replaced(found, **changes)
    aligned_result = dataclasses.replace(on_torch, outputs=aligned)
    assert repr(aligned_result) == repr(on_numpy)  # (NaN figures differ from themselves)
    assert aligned_result.report(1) == on_numpy.report(1)


METRIC_CHECKS = [[], ["cosine"], ["l2"], ["snr"], ["psnr"], ["kl"], ["top1"], ["cosine", "kl"]]


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    pair=output_pairs(),
    tol=tolerances,
    metrics=st.sampled_from(METRIC_CHECKS),
    chunk=st.sampled_from([1, 3, 1 << 22]),
    golden=st.booleans(),
    kept=st.sampled_from([0, 5, 1 << 22]),
)
def test_torch_path_gives_numpys_verdict_and_report(
    monkeypatch, pair, tol, metrics, chunk, golden, kept
):
    """`golden`: the expected side given as numpy (as a golden file reads), copied to the
    tensor's device. `kept`: nonzero errors kept for the order statistics before they are
    read again instead (`TUNING.torch_kept`)."""
    monkeypatch.setattr(TUNING, "torch_chunk_elements", chunk)
    monkeypatch.setattr(TUNING, "torch_kept", kept)
    actual, expected = as_tensor(pair[0]), np.asarray(pair[1]) if golden else as_tensor(pair[1])
    spec = [tol, *(Tolerance(check=check) for check in metrics)]
    try:
        on_numpy, on_torch = both_paths(monkeypatch, actual, expected, spec)
    except Exception as numpy_error:  # a refusal (kl of a 0-d output): the same one
        monkeypatch.setattr(TUNING, "torch", True)
        with pytest.raises(type(numpy_error), match=None) as raised:
            compare_outputs(actual, expected, spec)
        assert str(raised.value) == str(numpy_error)
        return
    assert_same(on_numpy, on_torch, cosine_rounding(*map(np.asarray, pair)))
    if all(str(side.dtype).removeprefix("torch.") in TORCH_DTYPES for side in (actual, expected)):
        # (numpy's and ml_dtypes' names are torch's: float8_e4m3fn, bfloat16)
        monkeypatch.setattr(TUNING, "torch", True)
        assert torch_pairs(monkeypatch, lambda: compare_outputs(actual, expected, spec)) == [True]


TORCH_DTYPES = {"bool", "uint8", "int8", "int16", "int32", "int64", "float8_e4m3fn"} | {
    f"{kind}{bits}" for kind, bits in (("float", 16), ("bfloat", 16), ("float", 32), ("float", 64))
}


def torch_pairs(monkeypatch, run) -> list[bool]:
    """Whether each output pair `run` compares takes the torch path (engine/scan.py Pair)."""
    found = []
    made = scan.Pair.__init__

    def noted(self, *args, **kwargs):
        made(self, *args, **kwargs)
        found.append(self.torch)

    with monkeypatch.context() as patch:
        patch.setattr(scan.Pair, "__init__", noted)
        run()
    return found


# -- the data catalogue, many chunks, every check ---------------------------------------------

N = 3000


def _catalogue() -> dict[str, tuple[np.ndarray, np.ndarray, dict]]:
    rng = np.random.default_rng(7)
    e = rng.standard_normal(N).astype(np.float32)
    noise = (e + rng.standard_normal(N).astype(np.float32) * 1e-3).astype(np.float32)
    outliers = noise.copy()
    outliers[rng.choice(N, 100, replace=False)] += 5
    nan_a = noise.copy()
    nan_a[rng.choice(N, 40, replace=False)] = np.nan
    nan_both = e.copy()
    nan_both[::7] = np.nan
    inf = noise.copy()
    inf[::11] = np.inf
    inf[5::13] = -np.inf
    inf_e = e.copy()
    inf_e[::11] = np.inf
    big = np.iinfo(np.int64)
    ints_e = rng.integers(-5, 5, N).astype(np.int64)
    ints_e[:4] = [big.min, big.max, big.min, 0]
    ints_a = ints_e.copy()
    ints_a[:4] = [big.max, big.min, big.min + 1, big.max]
    ints_a[100::50] += 1
    bools = rng.random(N) < 0.5
    fp8 = e.astype(ml_dtypes.float8_e4m3fn)
    return {
        "identical": (e, e.copy(), {}),
        "fp16-rounded": (e.astype(np.float16), e, {}),
        "bf16-rounded": (e.astype(ml_dtypes.bfloat16), e, {}),
        "noise": (noise, e, {}),
        "outliers": (outliers, e, {}),
        "all failing": (e + 10, e, {}),
        "NaN in actual": (nan_a, e, {}),
        "NaN in expected": (e, nan_a, {}),
        "NaN pairs, nan_equal": (nan_both, nan_both.copy(), {"nan_equal": True}),
        "NaN pairs": (nan_both, nan_both.copy(), {}),
        "±Inf": (inf, inf_e, {}),
        "±Inf, inf_equal off": (inf, inf_e, {"inf_equal": False}),
        "int64 extremes": (ints_a, ints_e, {}),
        "bool": (bools, ~bools, {}),
        "fp8": (fp8, e, {}),
        "empty": (e[:0], e[:0], {}),
        "0-d": (noise[:1].reshape(()), e[:1].reshape(()), {}),
    }


CATALOGUE = _catalogue()
CHECKS = [
    {"check": "elemwise"},
    {"check": "max"},
    {"check": "mean"},
    {"check": "median"},
    {"check": "quantile", "quantile": 0.9},
    {"check": "elemwise", "rule": "allclose"},
    {"check": "cosine"},
    {"check": "l2", "threshold": 1.0},
    {"check": "snr", "threshold": 30.0},
    {"check": "psnr", "threshold": 40.0},
    {"check": "kl", "threshold": 1e-3},
    {"check": "top1"},
    {"check": "indices", "postprocess": "top-5"},
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("check", CHECKS, ids=lambda c: "-".join(map(str, c.values())))
@pytest.mark.parametrize("scenario", list(CATALOGUE))
def test_catalogue_gives_the_same_verdict_and_report(monkeypatch, scenario, check, device):
    actual, expected, options = CATALOGUE[scenario]
    shape = (30, 100) if actual.size == N else actual.shape
    if check["check"] in ("kl", "top1") and actual.ndim == 0:
        pytest.skip("kl and top1 refuse a 0-d output (tested in test_metrics_usability)")
    # torch_kept: dense errors read again for the order statistics, sparse ones kept
    for name, value in (
        ("chunk_elements", 512),
        ("torch_chunk_elements", 700),
        ("torch_kept", 999),
    ):
        monkeypatch.setattr(TUNING, name, value)
    monkeypatch.setattr(TUNING, "screen_min", 16)  # numpy's float32 screen takes these
    a, e = as_tensor(actual).reshape(shape), as_tensor(expected).reshape(shape)
    base = {"atol": 1e-3, "rtol": 1e-3, **options}
    spec = [base, check] if check["check"] in METRICS else [{**base, **check}]
    assert_same(*both_paths(monkeypatch, a, e, spec, device))


@pytest.mark.parametrize(
    "view",
    [
        lambda t: t[:, ::2],
        lambda t: t.T,
        lambda t: t[5:, 3:-3],
        lambda t: t.expand(4, -1, -1)[:, 1:],
    ],
    ids=["strided", "transposed", "offset slice", "expanded"],
)
@pytest.mark.parametrize("scenario", ["noise", "outliers", "NaN in actual", "int64 extremes"])
@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_views(monkeypatch, scenario, view, device):
    actual, expected, options = CATALOGUE[scenario]
    a = view(as_tensor(actual).reshape(30, 100))
    e = view(as_tensor(expected).reshape(30, 100))
    monkeypatch.setattr(TUNING, "torch_chunk_elements", 999)
    on_device = view(as_tensor(actual).reshape(30, 100).to(device))  # a view there
    expected_there = view(as_tensor(expected).reshape(30, 100).to(device))
    on_numpy, _ = both_paths(monkeypatch, a, e, None, atol=1e-3, rtol=1e-3, **options)
    on_torch = compare_outputs(on_device, expected_there, None, atol=1e-3, rtol=1e-3, **options)
    assert_same(on_numpy, on_torch)


@pytest.mark.parametrize("device", DEVICES)
def test_a_numpy_golden_against_a_tensor_is_compared_where_the_tensor_is(monkeypatch, device):
    """The expected side given as numpy (a golden, bfloat16 through ml_dtypes) is copied to
    the tensor's device; the result is the host comparison's."""
    computed = []
    compute = tensors.TorchArithmetic.compute

    def counted(self, a, e, start, ratio=True):
        computed.append((a.device.type, e.device.type, e.dtype))
        return compute(self, a, e, start, ratio)

    monkeypatch.setattr(tensors.TorchArithmetic, "compute", counted)
    actual, expected, _ = CATALOGUE["outliers"]
    golden = {"y": expected.astype(ml_dtypes.bfloat16)}
    outputs = {"y": as_tensor(actual).to(torch.bfloat16)}
    on_numpy, on_torch = both_paths(
        monkeypatch, outputs, golden, None, device, atol=1e-2, rtol=1e-2
    )
    assert_same(on_numpy, on_torch)
    assert not on_torch.passed
    assert computed and all(found == (device, device, torch.float32) for found in computed)


def test_cpu_tensors_take_numpy_unless_the_switch_is_on(monkeypatch):
    """By default a CPU tensor is compared by numpy over its memory (faster on a CPU)."""
    calls = []
    monkeypatch.setattr(tensors.TorchArithmetic, "compute", lambda *a, **k: calls.append(a))
    actual, expected, _ = CATALOGUE["noise"]
    monkeypatch.setattr(TUNING, "torch", False)
    assert compare_outputs(as_tensor(actual), as_tensor(expected), atol=1e-2).passed
    assert calls == []


def test_dtypes_torch_does_not_compute_are_compared_on_the_host(monkeypatch):
    """uint16/32/64 tensors (torch has few ops for them) go to numpy, with the same result."""
    values = np.array([0, 1, 2**32 - 1, 7], dtype=np.uint32)
    other = np.array([0, 2, 0, 7], dtype=np.uint32)
    on_numpy, on_torch = both_paths(
        monkeypatch, torch.from_numpy(values), torch.from_numpy(other), None, atol=0, rtol=0
    )
    assert_same(on_numpy, on_torch)
    assert on_torch.outputs["output"].mismatches == 2


# -- the plugin's fixtures on tensors -----------------------------------------------------------

SUITE = """
import torch
import pytest
from pytest_trtcompare.engine import tensors

torch.manual_seed(0)
EXPECTED = torch.randn(64, 10)


@pytest.fixture(autouse=True)
def counted(monkeypatch):
    calls = []
    compute = tensors.TorchArithmetic.compute
    monkeypatch.setattr(
        tensors.TorchArithmetic, "compute", lambda *a, **k: calls.append(1) or compute(*a, **k)
    )
    yield
    assert calls, "the torch path did not run"


def test_compare_passes(compare):
    compare({"logits": EXPECTED + 1e-6}, {"logits": EXPECTED}, atol=1e-4)


def test_golden(golden):
    golden.check({"logits": (EXPECTED * 2).to(torch.bfloat16)}, atol=1e-2, rtol=1e-2)


def test_compare_fails(compare):
    actual = EXPECTED.clone()
    actual[3, 4] += 1.0
    compare({"logits": actual}, {"logits": EXPECTED}, atol=1e-3, rtol=1e-3)
"""


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize("engine_path", ["torch", "numpy"])
def test_fixtures_compare_tensors_on_the_torch_path(pytester, xdist, engine_path):
    """compare and golden.check take tensors through the torch path (TUNING.torch set in
    conftest, as a CUDA tensor takes it): a golden written from a bfloat16 tensor, checked
    against it, and a failure; without the switch, numpy compares them."""
    _scenario(pytester, xdist, engine_path)


def _scenario(pytester, xdist: list[str], engine_path: str) -> list[str]:
    switch = engine_path == "torch"
    pytester.makeconftest(
        f"from pytest_trtcompare.engine.tuning import TUNING\nTUNING.torch = {switch}"
    )
    suite = (
        SUITE if engine_path == "torch" else SUITE.replace('assert calls, "', 'assert not calls, "')
    )
    pytester.makepyfile(test_tensors=suite)
    first = run(pytester, "--trt-update-goldens", *xdist)
    first.assert_outcomes(passed=2, failed=1)
    again = run(pytester, *xdist)
    again.assert_outcomes(passed=2, failed=1)
    again.stdout.fnmatch_lines(
        [
            "*logits (float32 vs float32, shape (64, 10)): 1 / 640 elements (0.156%) exceeds*",
            "*greatest abs error 1 at (3, 4)*",
        ]
    )
    return again.stdout.lines


def test_the_torch_paths_failure_report_is_the_numpy_paths(pytester):
    torch_lines = _report_lines(_scenario(pytester, [], "torch"))
    numpy_lines = _report_lines(_scenario(pytester, [], "numpy"))
    assert torch_lines == numpy_lines and any("worst elements" in line for line in torch_lines)


def _report_lines(lines: list[str]) -> list[str]:
    """The failure report's lines (from its summary line to the artifacts' folder)."""
    start = next(i for i, line in enumerate(lines) if "outputs out of tolerance" in line)
    end = next(i for i in range(start, len(lines)) if "artifacts:" in lines[i])
    return lines[start:end]
