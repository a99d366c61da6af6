"""bench/bench_device.py (issue 36, item 6) runs on CPU torch at a small size: the script a
CUDA machine runs is kept working, and its plain-torch report agrees with ours."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "bench_device.py"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_device", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_device_benchmark_runs_on_the_cpu(capsys):
    rows = _bench().main(["--device", "cpu", "--sizes", "64K", "--rounds", "1"])
    kinds = ["identical", "noise", "100 outliers", "all failing"]
    assert [row["data"] for row in rows] == [f"64K {kind}" for kind in kinds]
    assert all(row[name] > 0 for row in rows for name in ("ours", "assert_close", "plain report"))
    assert "| 64K 100 outliers |" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["100 outliers", "all failing"])
def test_the_plain_report_counts_what_ours_counts(kind):
    from pytest_trtcompare import compare_outputs

    bench = _bench()
    actual, expected = bench.data(torch, kind, 1 << 16, "cpu")
    plain = bench.plain_report(actual, expected)
    ours = compare_outputs({"y": actual}, {"y": expected}, atol=1e-3, rtol=1e-3).outputs["y"]
    assert plain["failing"] == ours.mismatches and plain["max"] == pytest.approx(ours.max_abs_error)
    assert plain["failing"] == (1 << 16 if kind == "all failing" else 100)
