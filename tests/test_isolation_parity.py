"""Issue 14 item 8: every runner that works in-process works isolated, with identical results
in order and value: torch modules of local classes cross as an ExportedProgram, per-layer
runners keep their layer order, a callable without input_specs takes any feed."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_trtcompare import runners

from .onnx_models import layer_chain

torch = pytest.importorskip("torch")


def local_twin():
    """A module whose class is local to a function: pickle cannot send it to a worker."""

    class Twin(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.body = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())

        def forward(self, x):
            logits = self.body(x)
            return logits, torch.softmax(logits, dim=-1)

    return Twin()


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_local_torch_module_runs_isolated_with_identical_outputs(precision):
    module = local_twin()
    options = {"output_names": ["logits", "probs"]}
    inside = runners.create("torch", module, precision, **options)
    outside = runners.create("torch", module, precision, isolate=True, **options)
    assert outside.input_specs() == inside.input_specs()
    assert outside.output_names() == inside.output_names()
    rng = np.random.default_rng(0)
    for batch in (1, 8, 3):  # one exported program serves every batch size
        feed = {"x": rng.standard_normal((batch, 16)).astype(np.float32)}
        got, want = outside.infer(feed), inside.infer(feed)
        assert list(got) == list(want) == ["logits", "probs"]
        for name in want:
            assert got[name].dtype == want[name].dtype
            np.testing.assert_array_equal(got[name], want[name])
    assert outside.describe()["isolated"] is True
    outside.close()


def test_per_layer_runners_keep_their_layer_order():
    inside = runners.create("onnxrt", layer_chain(), outputs="all")
    outside = runners.create("onnxrt", layer_chain(), outputs="all", isolate=True)
    assert outside.layer_order == inside.layer_order and inside.layer_order
    assert outside.layers == inside.layers  # producing node, op type, dtype cross too
    assert (inside.layers[1].node, inside.layers[1].op) == ("bias0", "Add")
    feed = {"x": np.random.default_rng(1).standard_normal((2, 16)).astype(np.float32)}
    chunk = inside.layer_order[1:3]
    with outside.select_outputs(chunk), inside.select_outputs(chunk):
        got, want = outside.infer(feed), inside.infer(feed)
    assert list(got) == list(want) == chunk  # the worker computes only the selection
    for name in chunk:
        np.testing.assert_array_equal(got[name], want[name])
    outside.close()


def test_a_callable_without_input_specs_takes_any_feed_isolated():
    runner = runners.create("callable:tests.crashers:double", isolate=True)
    assert runner.checks_feed is False
    out = runner.infer({"x": np.arange(3, dtype=np.float32), "extra": np.zeros(2)})
    assert out["y"].tolist() == [0.0, 2.0, 4.0]
    runner.close()
