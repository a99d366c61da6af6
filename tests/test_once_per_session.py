"""What a suite pays once (issue 25): a model file read and hashed once per (path, size,
mtime), parsed once for all its runners, onnxruntime fed the file itself, entry points read
once per process, a plugin import without any framework, and a torch module copied only as
far as it must be, never changed."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.session.runs import RunnerCache

from .onnx_models import layer_chain
from .pytester_helpers import XDIST_SLOW


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "chain.onnx"
    onnx.save_model(layer_chain(), str(path))
    return path


@pytest.fixture
def hashes_of(monkeypatch):
    """How many times sha256 is started on bytes of each length."""
    counts: dict[int, int] = {}
    real = hashlib.sha256

    def counting(data=b"", **kwargs):
        counts[len(data)] = counts.get(len(data), 0) + 1
        return real(data, **kwargs)

    monkeypatch.setattr(hashlib, "sha256", counting)
    return counts


def test_a_model_file_is_hashed_once_and_parsed_once_for_all_its_runners(model_file, hashes_of):
    cache = RunnerCache()
    key = cache.model_key(model_file)
    built = [cache.get(name, model_file) for name in ("onnxrt", "onnxref")]
    again = cache.model_key(str(model_file))
    direct = runners.create("onnxrt", model_file)
    size = model_file.stat().st_size
    assert hashes_of[size] == 1
    assert key == again
    assert built[0].loaded.proto is built[1].loaded.proto is direct.loaded.proto
    cache.close()


def test_a_rewritten_model_file_is_read_again(model_file, hashes_of):
    first = runners.create("onnxrt", model_file)
    onnx.save_model(layer_chain(seed=1), str(model_file))
    later = os.stat(model_file).st_mtime_ns + 1_000_000_000
    os.utime(model_file, ns=(later, later))
    second = runners.create("onnxrt", model_file)
    assert second.loaded.digest != first.loaded.digest
    assert second.loaded.proto is not first.loaded.proto
    feed = {"x": np.ones((1, 16), np.float32)}
    assert not np.array_equal(first.infer(feed)["y"], second.infer(feed)["y"])


def test_new_weights_beside_an_unchanged_graph_are_another_model(tmp_path):
    path = tmp_path / "chain.onnx"
    model = layer_chain()
    onnx.save_model(model, str(path), save_as_external_data=True, location="w.bin")
    first = runners.create("onnxrt", path)
    onnx.save_model(layer_chain(seed=1), str(path), save_as_external_data=True, location="w.bin")
    os.utime(path, ns=(1, 1))  # the graph file looks as before; its weights do not
    os.utime(tmp_path / "w.bin", ns=(10**18, 10**18))
    assert runners.create("onnxrt", path).loaded.digest != first.loaded.digest


def test_onnxruntime_reads_the_file_itself_unless_the_model_was_converted(model_file, monkeypatch):
    import onnxruntime

    sources = []
    real = onnxruntime.InferenceSession

    def recording(source, *args, **kwargs):
        sources.append(type(source))
        return real(source, *args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", recording)
    runners.create("onnxrt", model_file)
    runners.create("onnxrt", model_file, "fp16")
    runners.create("onnxrt", model_file, outputs="all")
    assert sources == [str, bytes, bytes]


def test_entry_points_are_read_once_per_process(monkeypatch):
    calls = []
    real = importlib.metadata.entry_points

    def counting(**kwargs):
        calls.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(importlib.metadata, "entry_points", counting)
    monkeypatch.syspath_prepend(os.getcwd())  # a path not read yet in this process
    for _ in range(50):
        runners.check_framework_name("onnxrt")
        runners.known_runners()
        runners.runner_options("onnxref")
    assert len(calls) == 1


def test_importing_the_plugin_imports_no_framework():
    code = (
        "import sys, pytest_trtcompare.plugin; "
        "print(sorted(m for m in ('onnx', 'onnxruntime', 'torch', 'tensorrt') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


#: What a run that never uses the plugin must not import: numpy and the plugin's working half.
_HEAVY = ("numpy", "pytest_trtcompare.engine", "pytest_trtcompare.session.runs")
_HEAVY += ("pytest_trtcompare.goldens", "pytest_trtcompare.runners.base")
_HEAVY += ("pytest_trtcompare.plugin.session_hooks",)


def test_importing_the_plugin_imports_no_numpy_and_no_engine():
    code = (
        "import sys, pytest_trtcompare.plugin; "
        f"print(sorted(m for m in {_HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


_TELL_HEAVY = f"""
import sys

def pytest_unconfigure(config):
    print("heavy:", sorted(m for m in {_HEAVY!r} if m in sys.modules))
"""


def test_a_suite_that_never_uses_the_plugin_imports_none_of_it(pytester):
    """Installed but unused: options, ini keys and markers registered, nothing else imported;
    the first test that asks for a fixture of ours brings the rest."""
    pytester.makeconftest(_TELL_HEAVY)
    pytester.makepyfile(test_plain="def test_a():\n    assert 1\n")
    plain = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    plain.assert_outcomes(passed=1)
    plain.stdout.fnmatch_lines(["trtcompare frameworks: *", "heavy: []"])  # the header stays
    pytester.makepyfile(test_uses="def test_b(compare):\n    compare([1.0], [1.0])\n")
    used = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    used.assert_outcomes(passed=2)
    used.stdout.fnmatch_lines([f"heavy: {sorted(_HEAVY)!r}"])


@pytest.mark.parametrize("workers", XDIST_SLOW)
def test_a_precision_option_alone_puts_nothing_to_work_before_first_use(pytester, workers):
    """argparse checks --trt-precision in full: set alone, it imports no engine (an xdist
    controller starts its workers without numpy); a bad value is still a usage error."""
    pytester.makeconftest(_TELL_HEAVY)
    pytester.makepyfile(test_plain="def test_a():\n    assert 1\n")
    plain = pytester.runpytest_subprocess(
        "-s", "-p", "no:cacheprovider", "--trt-precision=fp16", *workers
    )
    plain.assert_outcomes(passed=1)
    plain.stdout.fnmatch_lines(["heavy: []"])
    bad = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--trt-precision=fp17", *workers)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--trt-precision: unknown precision fp17; valid precisions: fp32,*"])


torch = pytest.importorskip("torch")


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.norm = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return self.norm(self.conv(x))


def _snapshot(module):
    return {name: (t, t.clone()) for name, t in module.state_dict(keep_vars=True).items()}


def _untouched(module, snapshot) -> bool:
    now = module.state_dict(keep_vars=True)
    return module.training and all(
        now[name] is tensor and torch.equal(tensor, values) and tensor.dtype == values.dtype
        for name, (tensor, values) in snapshot.items()
    )


class _Recording(_Block):
    """Records the mode each call ran in; raises when asked to."""

    def __init__(self) -> None:
        super().__init__()
        self.modes: list[bool] = []

    def forward(self, x):
        self.modes.append(self.norm.training)
        if x.shape[0] == 3:
            raise RuntimeError("three is too many")
        return super().forward(x)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_module_in_training_mode_is_run_in_eval_and_left_as_it_was(precision):
    torch.manual_seed(0)
    module = _Recording()  # training mode: batch norm would update its running statistics
    snapshot = _snapshot(module)
    runner = runners.create("torch", module, precision)
    (out,) = runner.infer({"x": np.ones((2, 3, 8, 8), np.float32)}).values()
    assert out.dtype == {"fp32": np.float32, "fp16": np.float16}[precision]
    with pytest.raises(Exception, match="three is too many"):
        runner.infer({"x": np.ones((3, 3, 8, 8), np.float32)})
    assert _untouched(module, snapshot)  # modes, tensors, dtypes: after a failing call too
    if precision == "fp32":  # nothing to cast: the module itself, switched for each call
        assert runner.module is module and module.modes == [False, False]
    else:  # cast: a copy with tensors of its own, in eval mode for good
        assert module.modes == [] and runner.module.modes == [False, False]
        assert not {id(t) for t in runner.module.parameters()} & {
            id(t) for t in module.parameters()
        }


def test_a_module_in_mixed_modes_gets_each_submodule_mode_back():
    module = _Recording()
    module.norm.eval()  # the user froze the batch norm, the rest trains
    runners.create("torch", module).infer({"x": np.ones((2, 3, 8, 8), np.float32)})
    assert module.modes == [False]
    assert [m.training for m in module.modules()] == [
        m is not module.norm for m in module.modules()
    ]


def test_a_module_ready_as_it_is_is_used_as_it_is():
    module = _Block().eval()
    assert runners.create("torch", module).module is module


def test_collecting_groups_items_by_model_without_reading_the_model(pytester, hashes_of):
    onnx.save_model(layer_chain(), str(pytester.path / "chain.onnx"))
    pytester.makeconftest(
        """
        def pytest_collection_finish(session):
            for item in session.items:
                print("GROUP", [m.kwargs["name"] for m in item.iter_markers("xdist_group")])
        """
    )
    pytester.makepyfile(
        test_model="""
        import pytest

        @pytest.mark.compare_frameworks(model="chain.onnx", frameworks=["onnxrt", "onnxref"])
        @pytest.mark.shapes({"x": (1, 16)}, {"x": (2, 16)})
        def test_chain():
            pass
        """
    )
    result = pytester.runpytest_inprocess("--collect-only", "-s", "-p", "no:cacheprovider")
    groups = [line for line in result.stdout.lines if line.startswith("GROUP")]
    assert len(groups) == 2 and len(set(groups)) == 1 and "['trtcompare-" in groups[0]
    assert hashes_of.get((pytester.path / "chain.onnx").stat().st_size, 0) == 0
