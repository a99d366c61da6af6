"""A suite of 20 models against what a user would write instead (issue 25).

Run: python bench/bench_peers_suite.py [--rounds 3] [--json bench/results/peers_suite.json]
(with torchvision and transformers importable for the first-use rows:
PYTHONPATH=tests/zoo/site in this repository).

Twenty seeded ONNX models of about 4 MB each (MLP, CNN, attention) are written to a temporary
folder. Every contestant is a whole process (Python start-up and imports count for all):

- suite: pytest with `compare_frameworks` markers, models 0-9 onnxref (target) against
  onnxrt (reference) in fp32, models 10-19 onnxrt fp16 against onnxrt fp32;
  suite -n 2: the same with pytest-xdist on 2 workers;
- polygraphy: one Python process looping `Comparator.run` + `CompareFunc.simple` over the
  same models, runners and tolerances (`OnnxrtRunner(SessionFromOnnx(path))`, a
  `BaseRunner` around `onnx.reference.ReferenceEvaluator`, the fp16 model from the same
  converter, onnxruntime's `float16.convert_float_to_float16(keep_io_types=True)`);
- empty -n 0 / -n 2: twenty empty tests without this plugin, pytest-xdist's own start;
- hand / hand -n 2: the same suite as a user writes it by hand under pytest (sessions,
  inputs and `np.testing.assert_allclose` in a parametrized test), no plugin of ours;
- raw: the same inferences by hand (sessions from the path, the evaluator, the converted
  model), no comparison; "raw, no spinning" builds its sessions as the onnxrt runner does
  (onnxruntime's threads sleep between ops instead of spin-waiting).

After one warm-up run of each, the rounds are interleaved (each round runs every contestant
once); medians are reported, of wall time and of CPU time (user + system of the process and
its children, xdist workers included: the steadier figure on a shared machine).
First use: a torch runner built and run once on resnet18 (torchvision, seeded random
weights, training mode as constructed) and a small Hugging Face BertModel, against the same
first inference by hand (`module.eval()` and a call under `torch.no_grad()`), each in a fresh
process with torch and the model ready before the clock starts.
BLAS and OpenMP are held to one thread in every process. Last, a plain suite (40 trivial
tests) with the plugin installed but unused against `-p no:trtcompare`, and the plugin's
import as `python -X importtime` reports it (`--plain-only` runs just that part).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bytecode import compile_packages

MODELS = """
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def _weights(rng, name, shape, fan_in):
    values = rng.standard_normal(shape) / np.sqrt(fan_in)
    return numpy_helper.from_array(values.astype(np.float32), name)


def mlp(seed):  # 512 -> 1024 -> 512: 1.05 M weights
    rng = np.random.default_rng(seed)
    init = [_weights(rng, "w1", (512, 1024), 512), _weights(rng, "w2", (1024, 512), 1024)]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["y"]),
    ]
    return nodes, init, ("x", ["n", 512]), ("y", ["n", 512])


def cnn(seed):  # 3 convolutions 32 -> 128 -> 192 -> 256 on 8x8: 1.03 M weights
    rng = np.random.default_rng(seed)
    shapes = [(128, 32, 3, 3), (192, 128, 3, 3), (256, 192, 3, 3)]
    init = [_weights(rng, f"w{i}", s, s[1] * 9) for i, s in enumerate(shapes)]
    nodes, last = [], "x"
    for i in range(3):
        nodes.append(helper.make_node("Conv", [last, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        last = f"r{i}"
    nodes.append(helper.make_node("GlobalAveragePool", [last], ["y"]))
    return nodes, init, ("x", ["n", 32, 8, 8]), ("y", ["n", 256, 1, 1])


def attention(seed):  # one self-attention block, 512 wide, 8 heads: 1.05 M weights
    rng = np.random.default_rng(seed)
    init = [_weights(rng, w, (512, 512), 512) for w in ("wq", "wk", "wv", "wo")]
    init += [
        numpy_helper.from_array(np.array([0, 0, 8, 64], np.int64), "heads"),
        numpy_helper.from_array(np.array([0, 0, 512], np.int64), "merged"),
        numpy_helper.from_array(np.array(0.125, np.float32), "scale"),
    ]
    node = helper.make_node
    nodes = [node("MatMul", ["x", f"w{p}"], [p]) for p in "qkv"]
    for p in "qkv":
        nodes.append(node("Reshape", [p, "heads"], [f"{p}4"]))
        nodes.append(node("Transpose", [f"{p}4"], [f"{p}t"], perm=[0, 2, 1, 3]))
    nodes += [
        node("Transpose", ["kt"], ["ktt"], perm=[0, 1, 3, 2]),
        node("MatMul", ["qt", "ktt"], ["s"]),
        node("Mul", ["s", "scale"], ["ss"]),
        node("Softmax", ["ss"], ["p"], axis=-1),
        node("MatMul", ["p", "vt"], ["o"]),
        node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        node("Reshape", ["ot", "merged"], ["om"]),
        node("MatMul", ["om", "wo"], ["a"]),
        node("Add", ["a", "x"], ["y"]),
    ]
    return nodes, init, ("x", ["n", 16, 512]), ("y", ["n", 16, 512])


def build(kind, seed):
    nodes, init, (x, x_shape), (y, y_shape) = globals()[kind](seed)
    graph = helper.make_graph(
        nodes, f"{kind}{seed}", [helper.make_tensor_value_info(x, F, x_shape)],
        [helper.make_tensor_value_info(y, F, y_shape)], init,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


KINDS = ("mlp", "cnn", "attention")
BATCH = {"mlp": (4, 512), "cnn": (2, 32, 8, 8), "attention": (2, 16, 512)}


def plan():
    # (file, kind, target, target precision, reference): 0-9 onnxref vs onnxrt fp32,
    # 10-19 onnxrt fp16 vs onnxrt fp32
    rows = []
    for i in range(20):
        kind = KINDS[i % 3]
        target, precision = ("onnxref", "fp32") if i < 10 else ("onnxrt", "fp16")
        rows.append((f"m{i:02d}_{kind}.onnx", kind, target, precision, "onnxrt"))
    return rows


def write_all(folder):
    for i, (name, kind, *_rest) in enumerate(plan()):
        onnx.save_model(build(kind, i), f"{folder}/{name}")
"""

SUITE = """
import pytest
from models import BATCH, plan

TOLERANCE = {"fp32": 1e-4, "fp16": 2e-2}


def _case(name, kind, target, precision, reference):
    marks = [
        pytest.mark.compare_frameworks(
            model=name, frameworks=[target] if target == reference else [target, reference],
            reference=reference,
            tolerance={"atol": TOLERANCE[precision], "rtol": TOLERANCE[precision]},
        ),
        pytest.mark.precisions(precision),
        pytest.mark.shapes({"x": BATCH[kind]}),
    ]
    return marks


for _row in plan():
    def _test():
        pass
    for _mark in _case(*_row):
        _test = _mark(_test)
    globals()[f"test_{_row[0].removesuffix('.onnx')}"] = _test
"""

POLYGRAPHY = """
import time

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
from onnxruntime.transformers.float16 import convert_float_to_float16
from polygraphy.backend.base import BaseRunner
from polygraphy.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
from polygraphy.comparator import Comparator, CompareFunc, DataLoader
from models import BATCH, plan

TOLERANCE = {"fp32": 1e-4, "fp16": 2e-2}


class ReferenceRunner(BaseRunner):
    # what a Polygraphy user writes for onnx.reference (Polygraphy has no such runner)
    def __init__(self, path):
        super().__init__(name="onnxref")
        self.path = path

    def activate_impl(self):
        self.model = onnx.load(self.path)
        self.evaluator = ReferenceEvaluator(self.model)

    def get_input_metadata_impl(self):
        from polygraphy.common import TensorMetadata
        meta = TensorMetadata()
        for vi in self.model.graph.input:
            dims = [d.dim_value or d.dim_param for d in vi.type.tensor_type.shape.dim]
            meta.add(vi.name, np.float32, dims)
        return meta

    def infer_impl(self, feed_dict):
        names = [o.name for o in self.model.graph.output]
        start = time.perf_counter()
        values = self.evaluator.run(names, feed_dict)
        outputs = {n: np.ascontiguousarray(v) for n, v in zip(names, values)}
        self.inference_time = time.perf_counter() - start
        return outputs

    def deactivate_impl(self):
        del self.evaluator, self.model


failed = 0
for name, kind, target, precision, reference in plan():
    if target == "onnxref":
        runners = [ReferenceRunner(name), OnnxrtRunner(SessionFromOnnx(name), name="onnxrt")]
    else:
        fp16 = convert_float_to_float16(onnx.load(name), keep_io_types=True)
        runners = [
            OnnxrtRunner(SessionFromOnnx(fp16.SerializeToString()), name="onnxrt-fp16"),
            OnnxrtRunner(SessionFromOnnx(name), name="onnxrt"),
        ]
    loader = DataLoader(input_metadata={"x": (np.float32, BATCH[kind])}, seed=1)
    results = Comparator.run(runners, data_loader=loader)
    tol = TOLERANCE[precision]
    ok = Comparator.compare_accuracy(results, compare_func=CompareFunc.simple(atol=tol, rtol=tol))
    failed += not bool(ok)
print("FAILED", failed)
"""

RAW = """
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx.reference import ReferenceEvaluator
from onnxruntime.transformers.float16 import convert_float_to_float16
from models import BATCH, plan

def options():
    # RAW_NO_SPIN=1: sessions built as the onnxrt runner builds them (threads do not spin)
    options = ort.SessionOptions()
    if os.environ.get("RAW_NO_SPIN"):
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return options


rng = np.random.default_rng(1)
cpu = ["CPUExecutionProvider"]
for name, kind, target, precision, reference in plan():
    x = rng.standard_normal(BATCH[kind]).astype(np.float32)
    expected = ort.InferenceSession(name, options(), providers=cpu).run(None, {"x": x})
    if target == "onnxref":
        actual = ReferenceEvaluator(onnx.load(name)).run(None, {"x": x})
    else:
        fp16 = convert_float_to_float16(onnx.load(name), keep_io_types=True)
        session = ort.InferenceSession(fp16.SerializeToString(), options(), providers=cpu)
        actual = session.run(None, {"x": x})
print("RAN", len(plan()))
"""

HAND = """
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx.reference import ReferenceEvaluator
from onnxruntime.transformers.float16 import convert_float_to_float16
from models import BATCH, plan

TOLERANCE = {"fp32": 1e-4, "fp16": 2e-2}
CPU = ["CPUExecutionProvider"]


@pytest.mark.parametrize(("name", "kind", "target", "precision", "reference"), plan())
def test_model(name, kind, target, precision, reference):
    # what a user writes by hand under pytest: sessions, inputs, assert_allclose
    x = np.random.default_rng(1).standard_normal(BATCH[kind]).astype(np.float32)
    expected = ort.InferenceSession(name, providers=CPU).run(None, {"x": x})
    if target == "onnxref":
        actual = ReferenceEvaluator(onnx.load(name)).run(None, {"x": x})
    else:
        fp16 = convert_float_to_float16(onnx.load(name), keep_io_types=True)
        actual = ort.InferenceSession(fp16.SerializeToString(), providers=CPU).run(None, {"x": x})
    tol = TOLERANCE[precision]
    for got, want in zip(actual, expected):
        np.testing.assert_allclose(got, want, atol=tol, rtol=tol)
"""

FIRST_USE = """
import sys, time
import numpy as np
import torch

torch.manual_seed(0)
which, how = sys.argv[1], sys.argv[2]
if which == "resnet18":
    import torchvision
    model = torchvision.models.resnet18()  # training mode, as constructed
    feed = {"x": np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)}
else:
    from transformers import BertConfig, BertModel
    config = BertConfig(vocab_size=1000, hidden_size=128, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=256)
    model = BertModel(config)  # from_pretrained would call eval(); a fresh one trains
    ids = np.random.default_rng(0).integers(0, 1000, (2, 32), dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
if how == "ours":
    from pytest_trtcompare import runners
    # what a pytest session at work has loaded before its first runner (the plugin's working
    # half imports the engine and the runner base); the torch runner's own module is timed
    import pytest_trtcompare.engine
    import pytest_trtcompare.runners.base
    specs = None if which == "resnet18" else {
        "input_ids": ("int64", (2, 32)), "attention_mask": ("int64", (2, 32))}
    start = time.perf_counter()
    runner = runners.create("torch", model, input_specs=specs)
    runner.infer(feed)
else:
    start = time.perf_counter()
    model.eval()
    with torch.no_grad():
        model(**{k: torch.from_numpy(v) for k, v in feed.items()})
print("FIRST_USE", time.perf_counter() - start)
"""


def _env(folder: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]),
        **extra,
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode
    return env


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # xdist workers included
    return usage.ru_utime + usage.ru_stime


def _run(folder: Path, command: list[str], **env: str) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (the process and its children) and stdout."""
    start, cpu = time.perf_counter(), _cpu_of_children()
    done = subprocess.run(
        command, cwd=folder, env=_env(folder, **env), capture_output=True, text=True
    )
    seconds, cpu = time.perf_counter() - start, _cpu_of_children() - cpu
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return seconds, cpu, done.stdout


def _marked(output: str, marker: str) -> float:
    return float(next(line for line in output.splitlines() if line.startswith(marker)).split()[1])


EMPTY_TESTS = """
import pytest


@pytest.mark.parametrize("i", range(20))
def test_empty(i):
    pass
"""

PLAIN_TEST = """
def test_a():
    assert 1


def test_b():
    assert [1, 2] == [1, 2]
"""


def _import_seconds(folder: Path, code: str) -> float:
    """`python -X importtime`'s cumulative time of the last module `code` imports."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        cwd=folder,
        env=_env(folder),
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stderr.strip().splitlines()[-1].split("|")[1]) / 1e6


def plain_suite(folder: Path, rounds: int) -> dict[str, float]:
    """A plain suite (40 tests, no marker, no fixture of ours) with the plugin installed and
    with `-p no:trtcompare`, and the plugin's import."""
    plain = folder / "plain"
    plain.mkdir()
    for i in range(20):
        (plain / f"test_plain{i}.py").write_text(PLAIN_TEST)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "plain"]
    runs: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
    imports: dict[str, list[float]] = {"alone": [], "after pytest": []}
    for _ in range(rounds):
        runs["with"].append(_run(folder, command)[:2])
        runs["without"].append(_run(folder, [*command, "-p", "no:trtcompare"])[:2])
        imports["alone"].append(_import_seconds(folder, "import pytest_trtcompare.plugin"))
        imports["after pytest"].append(
            _import_seconds(folder, "import pytest; import pytest_trtcompare.plugin")
        )
    wall = {k: statistics.median(w for w, _ in v) for k, v in runs.items()}
    cpu = {k: statistics.median(c for _, c in v) for k, v in runs.items()}
    return {
        "plain suite with the plugin, wall s": wall["with"],
        "plain suite -p no:trtcompare, wall s": wall["without"],
        "plugin installed but unused, wall s more": wall["with"] - wall["without"],
        "plugin installed but unused, CPU s more": cpu["with"] - cpu["without"],
        "import pytest_trtcompare.plugin (importtime), s": statistics.median(imports["alone"]),
        "the same after import pytest, s": statistics.median(imports["after pytest"]),
    }


def first_use_round(folder: Path, first: dict[str, list[float]]) -> None:
    """One fresh process for each (model, how): the in-process seconds it printed."""
    for model in ("resnet18", "bert"):
        for how in ("hand", "ours"):
            _, _, output = _run(folder, [sys.executable, "first_use.py", model, how])
            first.setdefault(f"{model} {how}", []).append(_marked(output, "FIRST_USE"))


def first_use_only(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "first_use.py").write_text(textwrap.dedent(FIRST_USE))
        first_use_round(folder, {})  # warm-up: bytecode, page cache
        first: dict[str, list[float]] = {}
        for _ in range(rounds):
            first_use_round(folder, first)
    for model in ("resnet18", "bert"):
        ours, hand = (statistics.median(first[f"{model} {how}"]) for how in ("ours", "hand"))
        print(
            f"| {model} | {ours * 1e3:.1f} ms | {hand * 1e3:.1f} ms | {ours / hand:.2f}x |"
            f" {rounds} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--no-first-use", action="store_true")
    parser.add_argument("--plain-only", action="store_true", help="only the plain suite")
    parser.add_argument("--first-use-only", action="store_true", help="only the first use")
    args = parser.parse_args()
    compile_packages()  # the .pyc an installed package has (bytecode.py)
    if args.first_use_only:
        print("| model | ours | by hand | ours / by hand | processes |\n|---|---:|---:|---:|---:|")
        first_use_only(args.rounds)
        return
    if args.plain_only:
        with tempfile.TemporaryDirectory() as name:
            for label, value in plain_suite(Path(name), args.rounds).items():
                print(f"| {label} | {value:.3f} |")
        return
    python = sys.executable
    pytest_cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_suite.py"]
    # the suite with this plugin and pytest-xdist only, and with every pytest plugin
    # installed here (this venv adds hypothesis, anyio, pytest-html, pytest-metadata)
    alone = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    ours = [*pytest_cmd, "--trt-precision", "fp32,fp16", "-p", "pytest_trtcompare.plugin"]
    empty = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_empty.py"]
    hand = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]  # no plugin of ours
    contestants: dict[str, tuple[list[str], dict[str, str]]] = {
        "suite": (ours, alone),
        "suite -n 2": ([*ours, "-p", "xdist.plugin", "-n", "2"], alone),
        "suite, all plugins": ([*pytest_cmd, "--trt-precision", "fp32,fp16"], {}),
        "suite -n 2, all plugins": ([*pytest_cmd, "--trt-precision", "fp32,fp16", "-n", "2"], {}),
        "hand": ([*hand, "test_hand.py"], alone),
        "hand -n 2": ([*hand, "test_hand.py", "-p", "xdist.plugin", "-n", "2"], alone),
        "polygraphy": ([python, "polygraphy_loop.py"], {}),
        "raw": ([python, "raw_loop.py"], {}),
        "raw, no spinning": ([python, "raw_loop.py"], {"RAW_NO_SPIN": "1"}),
        # xdist's own start: 20 empty tests, no plugin of ours
        "empty -n 0": ([*empty, "-p", "no:trtcompare"], alone),
        "empty -n 2": ([*empty, "-p", "no:trtcompare", "-p", "xdist.plugin", "-n", "2"], alone),
    }
    times: dict[str, list[float]] = {name: [] for name in contestants}
    cpus: dict[str, list[float]] = {name: [] for name in contestants}
    first: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        (folder / "models.py").write_text(textwrap.dedent(MODELS))
        (folder / "test_suite.py").write_text(textwrap.dedent(SUITE))
        (folder / "polygraphy_loop.py").write_text(textwrap.dedent(POLYGRAPHY))
        (folder / "raw_loop.py").write_text(textwrap.dedent(RAW))
        (folder / "test_hand.py").write_text(textwrap.dedent(HAND))
        (folder / "first_use.py").write_text(textwrap.dedent(FIRST_USE))
        (folder / "test_empty.py").write_text(EMPTY_TESTS)
        _run(folder, [python, "-c", "import models; models.write_all('.')"])
        sizes = [p.stat().st_size for p in folder.glob("m*.onnx")]
        print(f"{len(sizes)} models, {min(sizes) / 1e6:.1f}-{max(sizes) / 1e6:.1f} MB")
        for command, env in contestants.values():  # warm-up: bytecode, page cache
            _run(folder, command, **env)
        for _ in range(args.rounds):
            for contestant, (command, env) in contestants.items():
                seconds, cpu, output = _run(folder, command, **env)
                times[contestant].append(seconds)
                cpus[contestant].append(cpu)
                if contestant == "polygraphy" and "FAILED 0" not in output:
                    print(f"note: polygraphy comparisons failing: {output.strip()}")
            if not args.no_first_use:
                first_use_round(folder, first)
        plain = plain_suite(folder, args.rounds)
    median = {name: statistics.median(values) for name, values in times.items()}
    cpu = {name: statistics.median(values) for name, values in cpus.items()}
    rows = {
        "suite / hand-written pytest suite": median["suite"] / median["hand"],
        "CPU: suite / hand-written pytest suite": cpu["suite"] / cpu["hand"],
        "hand -n 2 / hand -n 0": median["hand -n 2"] / median["hand"],
        "CPU: suite / polygraphy": cpu["suite"] / cpu["polygraphy"],
        "CPU: suite / raw": cpu["suite"] / cpu["raw"],
        "CPU: polygraphy / raw": cpu["polygraphy"] / cpu["raw"],
        "suite / polygraphy": median["suite"] / median["polygraphy"],
        "suite / raw": median["suite"] / median["raw"],
        "suite / raw, no spinning": median["suite"] / median["raw, no spinning"],
        "CPU: suite / raw, no spinning": cpu["suite"] / cpu["raw, no spinning"],
        "polygraphy / raw": median["polygraphy"] / median["raw"],
        "suite -n 2 / suite -n 0": median["suite -n 2"] / median["suite"],
        "CPU: suite -n 2 / suite -n 0": cpu["suite -n 2"] / cpu["suite"],
        "20 empty tests -n 2 / -n 0 (xdist's start)": median["empty -n 2"] / median["empty -n 0"],
        "all plugins: suite / polygraphy": median["suite, all plugins"] / median["polygraphy"],
        "all plugins: suite -n 2 / -n 0": (
            median["suite -n 2, all plugins"] / median["suite, all plugins"]
        ),
    }
    firsts = {name: statistics.median(values) for name, values in first.items()}
    for model in ("resnet18", "bert"):
        if f"{model} ours" in firsts:
            rows[f"{model} first use: ours / by hand"] = (
                firsts[f"{model} ours"] / firsts[f"{model} hand"]
            )
    print("| contestant | median wall s | median CPU s |\n|---|---:|---:|")
    for contestant, seconds in median.items():
        print(f"| {contestant} | {seconds:.2f} | {cpu[contestant]:.2f} |")
    for contestant, seconds in firsts.items():
        print(f"| {contestant} (in-process) | {seconds * 1e3:.1f} ms | |")
    print("\n| ratio | value |\n|---|---:|")
    for label, ratio in rows.items():
        print(f"| {label} | {ratio:.2f}x |")
    print("\n| plain suite, plugin unused | value |\n|---|---:|")
    for label, value in plain.items():
        print(f"| {label} | {value:.3f} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"times": times, "cpu": cpus, "first_use": first, "ratios": rows, "plain": plain}
        args.json.write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
