"""What choosing tolerances costs (issue 37, item 5), on the 20-model suite of
bench_peers_suite.py (10 onnxref fp32 and 10 onnxrt fp16 targets against onnxrt fp32).

Run: python bench/bench_tolerances.py [--rounds 12] [--seeds 5]

Contestants, each a whole pytest process (this plugin only, BLAS and OpenMP on one thread),
the rounds interleaved (each round starting one contestant later) after one warm-up run of
each; medians of wall and CPU time:

- plain: the suite as it is;
- baseline: the same with `--trt-baseline=base.json` (a report of the plain suite);
- calibrate: the same with `--trt-calibrate=N` (N input draws per case, the file written);
- N draws: the suite with `iterations=N` in every marker (the same inferences, no file);
- fp64: every marker's tolerance also has `{"check": "fp64"}`;
- extra runs by hand: the plain suite whose test bodies make the fp64 check's two extra
  reference runs with the `runners` fixture (onnxref at fp64, and the reference framework
  at the target's precision where that is not fp32), no check: the cost of those runs.

Goals: calibrate <= N x plain + 10%; fp64 <= extra runs by hand + 10%; baseline <= plain + 2%.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

import bench_peers_suite as peers
from bytecode import compile_packages

TOLERANCE = 'tolerance={"atol": TOLERANCE[precision], "rtol": TOLERANCE[precision]},'
FP64 = (
    'tolerance=[{"atol": TOLERANCE[precision], "rtol": TOLERANCE[precision]}, {"check": "fp64"}],'
)
EXTRA_RUNS = """

def _extra_runs(runners, name, kind, target, precision, reference):
    from pytest_trtcompare.session import make_feeds

    anchor = runners.create("onnxref", name, "fp64")
    feed = make_feeds(anchor, shapes={"x": BATCH[kind]})[0]
    anchor.infer(feed)
    if precision != "fp32":
        runners.create(reference, name, precision).infer(feed)


for _row in plan():
    def _test(comparison, runners, _row=_row):
        _extra_runs(runners, *_row)
    for _mark in _case(*_row):
        _test = _mark(_test)
    globals()[f"test_{_row[0].removesuffix('.onnx')}"] = _test
"""


def suites(seeds: int) -> dict[str, str]:
    plain = textwrap.dedent(peers.SUITE)
    assert TOLERANCE in plain
    return {
        "test_plain.py": plain,
        "test_draws.py": plain.replace(TOLERANCE, TOLERANCE + f" iterations={seeds},"),
        "test_fp64.py": plain.replace(TOLERANCE, FP64),
        "test_hand.py": plain + textwrap.dedent(EXTRA_RUNS),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    compile_packages()
    python = sys.executable
    alone = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    base = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    base += ["-p", "pytest_trtcompare.plugin", "--trt-precision", "fp32,fp16"]
    contestants = {
        "plain": [*base, "test_plain.py"],
        "baseline": [*base, "test_plain.py", "--trt-baseline=base.json"],
        "calibrate": [
            *base,
            "test_plain.py",
            f"--trt-calibrate={args.seeds}",
            "--trt-tolerances-file=calibrated.toml",
        ],
        f"{args.seeds} draws": [*base, "test_draws.py"],
        "fp64": [*base, "test_fp64.py"],
        "extra runs by hand": [*base, "test_hand.py"],
    }
    times: dict[str, list[float]] = {name: [] for name in contestants}
    cpus: dict[str, list[float]] = {name: [] for name in contestants}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "models.py").write_text(textwrap.dedent(peers.MODELS))
        for file, text in suites(args.seeds).items():
            (folder / file).write_text(text)
        peers._run(folder, [python, "-c", "import models; models.write_all('.')"])
        peers._run(folder, [*base, "test_plain.py", "--trt-report=base.json"], **alone)
        for command in contestants.values():  # warm-up: bytecode, page cache
            peers._run(folder, command, **alone)
        names = list(contestants)
        for round_ in range(args.rounds):
            # each round in another order: no contestant always follows the same one
            shift = round_ % len(names)
            for contestant in names[shift:] + names[:shift]:
                command = contestants[contestant]
                seconds, cpu, _ = peers._run(folder, command, **alone)
                times[contestant].append(seconds)
                cpus[contestant].append(cpu)
    wall = {name: statistics.median(values) for name, values in times.items()}
    cpu = {name: statistics.median(values) for name, values in cpus.items()}
    print("| contestant | median wall s | median CPU s |\n|---|---:|---:|")
    for contestant in contestants:
        print(f"| {contestant} | {wall[contestant]:.2f} | {cpu[contestant]:.2f} |")
    n = args.seeds
    rows = {
        f"calibrate / ({n} x plain)": (wall["calibrate"] / (n * wall["plain"]), 1.10),
        f"calibrate / {n} draws": (wall["calibrate"] / wall[f"{n} draws"], None),
        "fp64 / extra runs by hand": (wall["fp64"] / wall["extra runs by hand"], 1.10),
        "CPU: fp64 / extra runs by hand": (cpu["fp64"] / cpu["extra runs by hand"], 1.10),
        "fp64 / plain": (wall["fp64"] / wall["plain"], None),
        "baseline / plain": (wall["baseline"] / wall["plain"], 1.02),
        "CPU: baseline / plain": (cpu["baseline"] / cpu["plain"], 1.02),
    }
    print("\n| ratio | value | goal |\n|---|---:|---:|")
    for label, (ratio, goal) in rows.items():
        print(f"| {label} | {ratio:.3f}x | {f'<= {goal:.2f}x' if goal else ''} |")


if __name__ == "__main__":
    main()
