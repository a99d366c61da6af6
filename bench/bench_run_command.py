"""`trtcompare run` against `polygraphy run`, one model per command, start-up included
(issue 47: no slower than polygraphy run on any model).

The 20 models of bench_peers_suite.py (MLPs, CNNs, attention blocks of 1-4 MB), each
compared the way a Polygraphy user compares across runs and machines: onnxruntime's
outputs against saved ones, on saved inputs (`--load-inputs in.json --load-outputs
out.json`), at fp32 and atol = rtol = 1e-4 (polygraphy run's fp16 ONNX Runtime path,
`--fp-to-fp16`, needs onnxconverter-common, which the dev environment does not hold). The
saved files are made once by `trtcompare run --save-inputs --save-outputs` and read by
both. Then one output of `--elements` float32 values (an Add of two inputs) the same way.

Run: python bench/bench_run_command.py [--rounds 3] [--elements 50000000]
Each command runs `--rounds` times, the two tools interleaved; medians of wall seconds.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).parent))
import bench_peers_suite

BIN = Path(sys.executable).parent
SHAPES = {"mlp": "x:[4,512]", "cnn": "x:[2,32,8,8]", "attention": "x:[2,16,512]"}


def _timed(command: list[str], folder: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit {done.returncode}\n{done.stdout[-2000:]}")
    return seconds


def _big_model(path: Path) -> None:
    spec = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["n"]) for n in ("a", "b", "y")]
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["y"])], "add", spec[:2], spec[2:]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save_model(model, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--elements", type=int, default=50_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "models.py").write_text(textwrap.dedent(bench_peers_suite.MODELS))
        subprocess.run([sys.executable, "-c", "import models; models.write_all('.')"], cwd=folder)
        rows = []
        for index, (model, kind, *_plan) in enumerate(bench_peers_suite_plan(folder)):
            saved = [f"in{index}.json", f"out{index}.json"]
            made = [str(BIN / "trtcompare"), "run", model, "--onnxrt", "--inputs", SHAPES[kind]]
            _timed([*made, "--save-inputs", saved[0], "--save-outputs", saved[1]], folder)
            loaded = ["--load-inputs", saved[0], "--load-outputs", saved[1]]
            bounds = ["--atol", "1e-4", "--rtol", "1e-4"]
            ours = [str(BIN / "trtcompare"), "run", model, "--onnxrt", *loaded, *bounds]
            peer = [str(BIN / "polygraphy"), "run", model, "--onnxrt", *loaded, *bounds]
            rows.append((model, ours, peer))
        if args.elements:
            _big_model(folder / "big.onnx")
            rng = np.random.default_rng(0)
            feed = {n: rng.random(args.elements, dtype=np.float32) for n in ("a", "b")}
            from pytest_trtcompare.goldens import write_polygraphy_inputs, write_polygraphy_outputs

            write_polygraphy_inputs(folder / "big_in.json", [feed])
            write_polygraphy_outputs(folder / "big_out.json", [{"y": feed["a"] + feed["b"]}])
            loaded = ["--load-inputs", "big_in.json", "--load-outputs", "big_out.json"]
            rows.append(
                (
                    f"add, {args.elements:,} elements",
                    [str(BIN / "trtcompare"), "run", "big.onnx", "--onnxrt", *loaded],
                    [str(BIN / "polygraphy"), "run", "big.onnx", "--onnxrt", *loaded],
                )
            )
        print("| model | trtcompare run (s) | polygraphy run (s) | ours / polygraphy |")
        print("|---|---:|---:|---:|")
        ratios = []
        for model, ours, peer in rows:
            times: dict[str, list[float]] = {"ours": [], "peer": []}
            for _ in range(args.rounds):
                times["ours"].append(_timed(ours, folder))
                times["peer"].append(_timed(peer, folder))
            mine, theirs = statistics.median(times["ours"]), statistics.median(times["peer"])
            ratios.append(mine / theirs)
            print(f"| {model} | {mine:.2f} | {theirs:.2f} | {mine / theirs:.2f}x |", flush=True)
        mean = statistics.geometric_mean(ratios)
        print(f"\nworst ratio {max(ratios):.2f}x, geometric mean {mean:.2f}x")


def bench_peers_suite_plan(folder: Path) -> list[tuple[str, str, str, str, str]]:
    sys.path.insert(0, str(folder))
    import models  # the module bench_peers_suite writes

    return list(models.plan())


if __name__ == "__main__":
    main()
