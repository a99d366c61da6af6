"""Goldens in a suite: the `golden` fixture against pytest-regressions' `ndarrays_regression`.

Run: python bench/bench_goldens_peers.py --regressions-site DIR [--rounds 3] [--json FILE]

DIR holds pytest-regressions and pytest-datadir, kept out of the project's venv because
pytest loads installed plugins in every run (`pip install --no-deps --target DIR
pytest-regressions==2.11.0 pytest-datadir==1.9.0`; PyYAML, which it needs, is a dev
dependency already).

Twenty tests, one per model, each saving or checking the outputs of a model of about 4 MB
(MLP, CNN and attention shapes: 2 to 4 float32 outputs, 4 KiB to 1.6 MiB each; seeded
data, precomputed into an `.npz` that both suites read the same way). Measured, whole
processes (Python start-up and imports count for both) and pytest's items phase:

- write: ours `--trt-update-goldens` against theirs `--regen-all` (both rewrite every file);
- check: a rerun of each against its own files (everything passes).

Rounds are interleaved (ours, theirs, ours, theirs, ...) and medians reported, as ratios
ours / theirs. The suites run in separate folders on the machine's disk; ours runs with
pytest-regressions absent, theirs with `-p no:trtcompare`.
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

import numpy as np
from bytecode import compile_packages

MODELS = 20

OURS = """
import numpy as np
import pytest

DATA = np.load("outputs.npz")
MODELS = sorted({key.split("/")[0] for key in DATA.files})

@pytest.mark.parametrize("model", MODELS)
def test_model(model, golden):
    outputs = {key.split("/")[1]: DATA[key] for key in DATA.files if key.startswith(model + "/")}
    golden.check(outputs, atol=1e-5, rtol=1e-5)
"""

THEIRS = """
import numpy as np
import pytest

DATA = np.load("outputs.npz")
MODELS = sorted({key.split("/")[0] for key in DATA.files})

@pytest.mark.parametrize("model", MODELS)
def test_model(model, ndarrays_regression):
    outputs = {key.split("/")[1]: DATA[key] for key in DATA.files if key.startswith(model + "/")}
    ndarrays_regression.check(outputs, default_tolerance={"atol": 1e-5, "rtol": 1e-5})
"""

TIMING_CONFTEST = """
import time
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session):
    start = time.perf_counter()
    try:
        return (yield)
    finally:
        print(f"ITEMS_PHASE {time.perf_counter() - start:.4f}")
"""


def model_outputs(seed: int, batch: int) -> dict[str, np.ndarray]:
    """Outputs shaped like those of a ~4 MB MLP, CNN or attention model; batch 0: logits only."""
    rng = np.random.default_rng(seed)
    kind = seed % 3
    if batch == 0:
        shapes = {"logits": (1, (10, 1000, 2)[kind])}
    elif kind == 0:  # MLP: logits and a hidden state
        shapes = {"logits": (batch, 1000), "hidden": (batch, 1024)}
    elif kind == 1:  # CNN: logits, pooled features, a feature map
        shapes = {
            "logits": (batch, 1000),
            "pooled": (batch, 512),
            "features": (batch, 128, 14, 14),
        }
    else:  # attention: last hidden state, pooled, attention probabilities, logits
        shapes = {
            "last_hidden_state": (batch, 128, 256),
            "pooler_output": (batch, 256),
            "attentions": (batch, 4, 128, 128),
            "logits": (batch, 2),
        }
    return {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}


def _run(folder: Path, command: list[str], extra_path: str | None) -> tuple[float, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(folder)}
    if extra_path:
        env["PYTHONPATH"] += os.pathsep + extra_path
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    items = done.stdout.split("ITEMS_PHASE ", 1)[1].split()[0]
    return seconds, float(items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regressions-site", required=True, help="folder with pytest-regressions")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None, help="where the suites run (a disk)")
    parser.add_argument(
        "--batch", type=int, default=8, help="outputs' batch; 0: one small logits tensor per model"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    compile_packages()  # the .pyc an installed package has (bytecode.py)
    pytest_cmd = [sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider"]
    with tempfile.TemporaryDirectory(dir=args.dir) as name:
        root = Path(name)
        arrays = {
            f"m{seed:02d}/{output}": value
            for seed in range(MODELS)
            for output, value in model_outputs(seed, args.batch).items()
        }
        suites = {}
        for label, text in (("ours", OURS), ("theirs", THEIRS)):
            folder = root / label
            folder.mkdir()
            np.savez(folder / "outputs.npz", **arrays)
            (folder / "conftest.py").write_text(textwrap.dedent(TIMING_CONFTEST))
            (folder / "test_models.py").write_text(textwrap.dedent(text))
            suites[label] = folder
        commands = {
            ("ours", "write"): ([*pytest_cmd, "--trt-update-goldens"], None),
            ("ours", "check"): (pytest_cmd, None),
            ("theirs", "write"): (
                [*pytest_cmd, "-p", "no:trtcompare", "--regen-all"],
                args.regressions_site,
            ),
            ("theirs", "check"): ([*pytest_cmd, "-p", "no:trtcompare"], args.regressions_site),
        }
        # A first write of each, so that every timed write replaces existing files.
        for who in ("ours", "theirs"):
            command, extra = commands[(who, "write")]
            _run(suites[who], command, extra)
        times: dict[tuple[str, str], list[tuple[float, float]]] = {key: [] for key in commands}
        for _ in range(args.rounds):
            for phase in ("write", "check"):
                for who in ("ours", "theirs"):
                    command, extra = commands[(who, phase)]
                    times[(who, phase)].append(_run(suites[who], command, extra))
        sizes = {
            who: sum(
                path.stat().st_size
                for path in folder.rglob("*")
                if path.is_file()
                and path.suffix != ".py"
                and path.name != "outputs.npz"
                and "__pycache__" not in path.parts
            )
            for who, folder in suites.items()
        }
    rows = {}
    print(f"{MODELS} tests, {sum(v.nbytes for v in arrays.values()) / 2**20:.2f} MiB of outputs")
    print(
        "| phase | ours process (s) | theirs process (s) | ours ÷ theirs "
        "| ours items (s) | theirs items (s) | ours ÷ theirs |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for phase in ("write", "check"):
        ours_p = statistics.median(t[0] for t in times[("ours", phase)])
        theirs_p = statistics.median(t[0] for t in times[("theirs", phase)])
        ours_i = statistics.median(t[1] for t in times[("ours", phase)])
        theirs_i = statistics.median(t[1] for t in times[("theirs", phase)])
        rows[phase] = {
            "ours_process_s": ours_p,
            "theirs_process_s": theirs_p,
            "ours_items_s": ours_i,
            "theirs_items_s": theirs_i,
        }
        print(
            f"| {phase} | {ours_p:.3f} | {theirs_p:.3f} | {ours_p / theirs_p:.2f}x "
            f"| {ours_i:.3f} | {theirs_i:.3f} | {ours_i / theirs_i:.2f}x |"
        )
    print(
        f"files on disk: ours {sizes['ours'] / 2**20:.2f} MiB, "
        f"theirs {sizes['theirs'] / 2**20:.2f} MiB"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"rows": rows, "bytes_on_disk": sizes}, indent=2))


if __name__ == "__main__":
    main()
