"""Per-test fixed cost of the `compare` fixture on tiny arrays, against plain numpy tests.

Run: python bench/bench_pertest.py [--rounds 5] [--tests 200] [--json bench/results/pertest.json]

Four test files of `--tests` tests each, every test comparing two float32 arrays of 16
elements: `np.testing.assert_allclose` (the peer), `assert_outputs_close` (our engine in a
test body, no fixture), and the `compare` fixture (the engine, the accuracy record, the
summary). The peer runs twice: with our plugin loaded, as a suite that uses it would, and
with `-p no:trtcompare`, as a suite without it. Each file runs as one pytest process, in
three report settings: none, `--junitxml`, and `--junitxml` plus `--trt-report` (what CI
turns on). Per item: the items phase (pytest's run loop, timed by a conftest hook) divided
by the number of tests, in wall time and in the pytest process's CPU time (steadier on a
loaded machine); whole processes are timed too. The runs interleave (one of each per
round, in turn) and every figure is the median over the rounds; ratios are against the peer
with the plugin loaded, in the same report setting. `--baseline DIR` also runs our two kinds
with the package found in DIR (the code before a change, `git worktree add DIR COMMIT`).

`--interleaved N`: the steady state, robust on a machine whose speed drifts. One pytest
process holds N tests of each kind, run in turn (assert_allclose, assert_allclose through a
bare fixture of the suite's own, assert_outputs_close, the `compare` fixture,
assert_allclose, ...); the bare fixture is the floor of any fixture (pytest's setup and
teardown of it). A conftest hook times each test's whole protocol
(setup, call, teardown and their reports). The first 100 tests of each kind are left out
(what the first call imports), and each kind's median is taken in that process, so the
ratios compare tests that ran milliseconds apart. One such process per report setting and
package per round; the table gives the median of the rounds' ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bytecode import compile_packages

TIMING_CONFTEST = """
import time
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    start, cpu = time.perf_counter(), time.process_time()
    try:
        return (yield)
    finally:
        print(f"ITEMS_PHASE {time.perf_counter() - start:.6f} {time.process_time() - cpu:.6f}")
"""

HEAD = """
import numpy as np
import pytest

ACTUAL = np.linspace(-1, 1, 16, dtype=np.float32)
EXPECTED = ACTUAL + np.float32(1e-6)
"""

BODIES = {
    "numpy": """
@pytest.mark.parametrize("i", range({tests}))
def test_allclose(i):
    np.testing.assert_allclose(ACTUAL, EXPECTED, rtol=1e-5, atol=1e-5)
""",
    "assert_outputs_close": """
from pytest_trtcompare import assert_outputs_close

@pytest.mark.parametrize("i", range({tests}))
def test_engine(i):
    assert_outputs_close(ACTUAL, EXPECTED, atol=1e-5, rtol=1e-5)
""",
    "compare": """
@pytest.mark.parametrize("i", range({tests}))
def test_fixture(i, compare):
    compare(ACTUAL, EXPECTED, atol=1e-5, rtol=1e-5)
""",
}

INTERLEAVING_CONFTEST = """
import statistics
import time
import pytest

_TIMES = {}
_ORDER = ("test_allclose", "test_bare_fixture", "test_engine", "test_fixture")

def pytest_collection_modifyitems(items):
    kinds = [[i for i in items if i.originalname == name] for name in _ORDER]
    items[:] = [item for turn in zip(*kinds) for item in turn]

@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        _TIMES.setdefault(item.originalname, []).append(time.perf_counter() - start)

def pytest_unconfigure(config):
    medians = {k: statistics.median(v[100:]) for k, v in _TIMES.items()}
    print("INTERLEAVED " + " ".join(f"{k}={medians.get(k, 0):.9f}" for k in _ORDER))
"""

#: The interleaved run's fourth kind: assert_allclose called through a pytest fixture of the
#: suite's own, what any fixture costs (pytest's setup, teardown and their reports).
BARE_FIXTURE = """
@pytest.fixture
def allclose():
    return np.testing.assert_allclose

@pytest.mark.parametrize("i", range({tests}))
def test_bare_fixture(i, allclose):
    allclose(ACTUAL, EXPECTED, rtol=1e-5, atol=1e-5)
"""

#: (label, test file, extra pytest arguments, the package's folder: None for this one)
KINDS: list[tuple[str, str, list[str], str | None]] = [
    ("np.testing.assert_allclose", "numpy", [], None),
    ("same, -p no:trtcompare", "numpy", ["-p", "no:trtcompare"], None),
    ("assert_outputs_close", "assert_outputs_close", [], None),
    ("compare fixture", "compare", [], None),
]
REPORTS = {
    "no report": [],
    "--junitxml": ["--junitxml", "{folder}/junit.xml"],
    "--junitxml --trt-report": [
        "--junitxml",
        "{folder}/junit.xml",
        "--trt-report",
        "{folder}/report.json",
    ],
}


def _run(
    folder: Path, command: list[str], package: str | None = None
) -> tuple[float, float, float]:
    """(whole process wall s, items phase wall s, items phase CPU s of the pytest process)"""
    start = time.perf_counter()
    line = _output_line(folder, command, package, "ITEMS_PHASE")
    seconds = time.perf_counter() - start
    return seconds, float(line.split()[-2]), float(line.split()[-1])


def _interleaved(
    args: argparse.Namespace, reports: list[str], base: list[str]
) -> list[dict[str, object]]:
    """Per-test medians of the four kinds run in turn in one process (see the docstring)."""
    packages: list[tuple[str, str | None]] = [("this", None)]
    if args.baseline:
        packages.append(("before", str(args.baseline.resolve())))
    ratios: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "conftest.py").write_text(textwrap.dedent(INTERLEAVING_CONFTEST))
        text = textwrap.dedent(HEAD) + "".join(
            textwrap.dedent(body).replace("{tests}", str(args.interleaved))
            for body in [*BODIES.values(), BARE_FIXTURE]
        )
        (folder / "test_interleaved.py").write_text(text)
        for _ in range(args.rounds):
            for report in reports:
                flags = [flag.replace("{folder}", name) for flag in REPORTS[report]]
                for label, package in packages:
                    command = [*base, "test_interleaved.py", *flags]
                    line = _output_line(folder, command, package, "INTERLEAVED")
                    peer, bare, engine, fixture = (float(f.split("=")[1]) for f in line.split()[1:])
                    ratios.setdefault((report, label), []).append((peer, engine, fixture, bare))
    rows: list[dict[str, object]] = []
    print(f"\nInterleaved, {args.interleaved} tests of each kind, medians of {args.rounds} rounds:")
    print(
        "| reports | package | assert_allclose (µs) | bare fixture "
        "| assert_outputs_close | compare fixture |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for (report, label), runs in ratios.items():
        peer = statistics.median(r[0] for r in runs)
        engine = statistics.median(r[1] / r[0] for r in runs)
        fixture = statistics.median(r[2] / r[0] for r in runs)
        fixture_us = statistics.median(r[2] for r in runs)
        bare = statistics.median(r[3] / r[0] for r in runs)
        print(
            f"| {report} | {label} | {peer * 1e6:.0f} | {bare:.2f}x | {engine:.2f}x "
            f"| {fixture:.2f}x ({fixture_us * 1e6:.0f} µs) |"
        )
        rows.append(
            {
                "interleaved": args.interleaved,
                "reports": report,
                "package": label,
                "assert_allclose_us": peer * 1e6,
                "bare_fixture_ratio": bare,
                "assert_outputs_close_ratio": engine,
                "compare_fixture_ratio": fixture,
                "compare_fixture_us": fixture_us * 1e6,
            }
        )
    return rows


def _output_line(folder: Path, command: list[str], package: str | None, marker: str) -> str:
    inherited = [os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []
    paths = [str(folder), *([package] if package else inherited)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return next(line for line in done.stdout.splitlines() if marker in line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tests", type=int, default=200)
    parser.add_argument("--reports", default=",".join(REPORTS), help="which report settings")
    parser.add_argument("--baseline", type=Path, default=None, help="the code before, to compare")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--interleaved",
        type=int,
        default=0,
        metavar="N",
        help="only the steady state: N tests of each kind in turn in one process",
    )
    args = parser.parse_args()
    compile_packages(args.baseline)  # the .pyc an installed package has (bytecode.py)
    kinds = list(KINDS)
    if args.baseline:
        before = str(args.baseline.resolve())
        kinds += [(f"{label} (before)", kind, [], before) for label, kind, *_ in KINDS[2:]]
    reports = [name for name in REPORTS if name in args.reports.split(",")]
    base = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"]
    base += ["-p", "no:randomly", "-p", "no:xdist"]
    if args.interleaved:
        rows = _interleaved(args, reports, base)
        if args.json:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(rows, indent=2))
        return
    times: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "conftest.py").write_text(textwrap.dedent(TIMING_CONFTEST))
        for kind, body in BODIES.items():
            text = textwrap.dedent(HEAD) + textwrap.dedent(body).replace("{tests}", str(args.tests))
            (folder / f"test_{kind}.py").write_text(text)
        for _ in range(args.rounds):
            for report in reports:
                flags = [flag.replace("{folder}", name) for flag in REPORTS[report]]
                for label, kind, extra, package in kinds:
                    if extra and "--trt-report" in flags:
                        continue  # the option is ours
                    command = [*base, *extra, f"test_{kind}.py", *flags]
                    times.setdefault((report, label), []).append(_run(folder, command, package))
    rows = []
    print(
        "| reports | tests | per item (µs) | ratio | per item, CPU (µs) | ratio "
        "| whole process (s) | ratio |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for report in reports:
        peer = times[(report, KINDS[0][0])]
        peer_item = statistics.median(t[1] for t in peer) / args.tests
        peer_whole = statistics.median(t[0] for t in peer)
        peer_cpu = statistics.median(t[2] for t in peer) / args.tests
        for label, *_ in kinds:
            runs = times.get((report, label))
            if runs is None:
                continue
            item = statistics.median(t[1] for t in runs) / args.tests
            whole = statistics.median(t[0] for t in runs)
            cpu = statistics.median(t[2] for t in runs) / args.tests
            rows.append(
                {
                    "reports": report,
                    "tests": label,
                    "per_item_us": item * 1e6,
                    "per_item_ratio": item / peer_item,
                    "per_item_cpu_us": cpu * 1e6,
                    "per_item_cpu_ratio": cpu / peer_cpu,
                    "process_s": whole,
                    "process_ratio": whole / peer_whole,
                }
            )
            print(
                f"| {report} | {label} | {item * 1e6:.0f} | {item / peer_item:.2f}x "
                f"| {cpu * 1e6:.0f} | {cpu / peer_cpu:.2f}x "
                f"| {whole:.2f} | {whole / peer_whole:.2f}x |"
            )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
