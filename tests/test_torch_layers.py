"""Torch against its ONNX export, layer by layer, where users' exports differ from the model
they hold (issue 35, items 1, 2 and 8): a wrapper module exported around the twin, a
module called several times whose calls the legacy exporter numbers only in inner names,
a twin that is not the exported module at all, and the modules left out of a passing run."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.errors import LayerMatchError
from pytest_trtcompare.goldens import read_golden
from pytest_trtcompare.session.layer_runs import compare_layers
from pytest_trtcompare.session.module_pairs import TorchLayers

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run

torch = pytest.importorskip("torch")

MODELS = """
import torch


class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin1 = torch.nn.Linear(8, 16)
        self.act = torch.nn.GELU()
        self.drop = torch.nn.Dropout(0.1)  # no counterpart in an eval-mode export
        self.lin2 = torch.nn.Linear(16, 4)

    def forward(self, x):  # a dict, as a Hugging Face model's ModelOutput
        return {"logits": self.lin2(self.drop(self.act(self.lin1(x))))}


class Wrapper(torch.nn.Module):
    '''What users export: the model inside a module that returns its logits.'''

    def __init__(self, inner):
        super().__init__()
        self.model = inner

    def forward(self, x):
        return self.model(x)["logits"]


class Head(torch.nn.Module):
    '''An RPN head: one conv block run on each feature level, as torchvision's.'''

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        block = torch.nn.Sequential(torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.ReLU())
        self.conv = torch.nn.Sequential(block)
        self.out = torch.nn.Conv2d(4, 2, 1)

    def forward(self, a, b, c):
        return tuple(self.out(self.conv(level)) for level in (a, b, c))
"""
NAMESPACE: dict = {}
exec(MODELS, NAMESPACE)
Inner, Wrapper, Head = NAMESPACE["Inner"], NAMESPACE["Wrapper"], NAMESPACE["Head"]
X = np.random.default_rng(0).random((2, 8), dtype=np.float32)


def _export(module, feed, path, dynamo, outputs=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            tuple(torch.from_numpy(v) for v in feed.values()),
            str(path),
            dynamo=dynamo,
            input_names=list(feed),
            output_names=outputs,
            verbose=False,
        )
    return path


def _layers(twin, path, feed):
    reference = runners.create("onnxrt", path, outputs="all")
    target = TorchLayers(
        runners.create("torch", twin, outputs="all"), reference, reference.loaded.proto
    )
    return target, compare_layers(target, reference, feed, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dynamo", [False, True], ids=["legacy", "dynamo"])
def test_the_model_inside_an_exported_wrapper_is_matched_through_its_prefix(tmp_path, dynamo):
    """The export's scopes say `model.lin1`, the twin's module is `lin1`: matched through
    the wrapper's prefix and compared, each layer (a wrong pairing would differ)."""
    inner = Inner().eval()
    path = _export(Wrapper(inner), {"x": X}, tmp_path / "wrapped.onnx", dynamo, ["logits"])
    target, result = _layers(inner, path, {"x": X})
    assert result.passed, result.report()
    assert set(target.module_of.values()) == {"lin1", "act", "lin2"}
    assert target.unmatched_layers == ("drop",)


def test_a_twin_that_is_not_the_exported_module_is_an_error_naming_it(tmp_path):
    """No module of the twin in the export's scopes, even under a prefix: never a pass
    that compared the model outputs alone."""
    path = _export(Wrapper(Inner().eval()), {"x": X}, tmp_path / "wrapped.onnx", False)
    other = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.Tanh(), torch.nn.Linear(6, 4))
    with pytest.raises(LayerMatchError) as raised:
        _layers(other.eval(), path, {"x": X})
    assert str(raised.value) == (
        "outputs='all': no module of the torch twin Sequential (0, 1, 2) is named in the module "
        f"scopes of its export {path} (outer scopes: model, model.act, model.lin1, model.lin2), "
        "so no layer could be compared; give as the twin the module that was exported"
    )


def test_each_call_of_a_module_named_only_in_inner_names_is_its_own_layer(tmp_path):
    """The legacy exporter suffixes the innermost name that repeats
    (`/conv/conv.0/conv.0.1_2/Relu`), never `conv.0` itself: the third call of `conv.0` is
    the third level's tensor, not the first call's (a false divergence, here a shape)."""
    rng = np.random.default_rng(2)
    feed = {
        n: rng.random((1, 4, s, s), dtype=np.float32) for n, s in (("a", 8), ("b", 4), ("c", 2))
    }
    path = _export(Head().eval(), feed, tmp_path / "head.onnx", False)
    target, result = _layers(Head().eval(), path, feed)
    assert result.passed, result.report()
    matched = set(target.module_of.values())
    assert {"conv.0.1", "conv.0.1#2", "conv.0.1#3", "out#3"} <= matched
    for call, size in (("", 8), ("#2", 4), ("#3", 2)):
        tensor = next(t for t, m in target.module_of.items() if m == f"conv.0.1{call}")
        assert result.outputs[tensor].shape == (1, 4, size, size)


TEST = """
import pytest
import torch
from models import Inner

OTHER = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))

@pytest.mark.compare_frameworks(model="wrapped.onnx", frameworks=["onnxrt", "torch"],
                                models={"torch": Inner()}, outputs="all")
@pytest.mark.shapes({"x": (2, 8)})
def test_inner_against_the_wrapper_export(comparison):
    pass

@pytest.mark.compare_frameworks(model="wrapped.onnx", frameworks=["onnxrt", "torch"],
                                models={"torch": OTHER}, outputs="all")
@pytest.mark.shapes({"x": (2, 8)})
def test_another_model_as_the_twin(comparison):
    pass

@pytest.mark.compare_frameworks(model="wrapped.onnx", frameworks=["onnxrt", "torch"],
                                models={"torch": Inner()}, options={"torch": {"input_names": "x"}})
@pytest.mark.shapes({"x": (2, 8)})
def test_input_names_as_a_string(comparison):
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_wrapper_exports_compare_layers_and_passing_runs_name_what_they_left_out(pytester, xdist):
    pytester.makepyfile(models=MODELS, test_wrapped=TEST)
    _export(Wrapper(Inner().eval()), {"x": X}, pytester.path / "wrapped.onnx", False)
    result = run(pytester, "-rA", "--trt-report=r.json", *xdist)
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "test_inner_against_the_wrapper_export[[]torch-fp32-bs2[]]: 3 layers "
            "compared; torch module outputs with no ONNX counterpart (not compared): drop",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "ERROR test_wrapped.py::test_another_model_as_the_twin[[]torch-fp32-bs2[]] - "
            "Failed: LayerMatchError: outputs='all': no module of the torch twin Sequential*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "ERROR test_wrapped.py::test_input_names_as_a_string[[]torch-fp32-bs2[]] - Failed: "
            "RunnerOptionError: torch runner: input_names= takes a list of names, not str 'x'",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    (layers,) = json.loads((pytester.path / "r.json").read_text())["layers"]
    assert (layers["compared"], layers["unmatched"], layers["unmatched_modules"]) == (
        3,
        1,
        ["drop"],
    )


GOLDEN = """
import pytest
from models import Inner

@pytest.mark.compare_frameworks(model="wrapped.onnx", frameworks=["onnxrt", "torch"],
                                models={"torch": Inner()}, outputs="all", golden=True)
@pytest.mark.shapes({"x": (2, 8)})
def test_layers_golden(comparison):
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_a_per_layer_golden_of_the_model_inside_a_wrapper_keeps_its_modules(pytester, xdist):
    """golden=True with outputs="all" and the twin inside the exported wrapper: the golden
    holds every module's output under its module name (and the model output under the
    export's name), not the model output alone (a new-user trial found them set aside)."""
    pytester.makepyfile(models=MODELS, test_golden=GOLDEN)
    _export(Wrapper(Inner().eval()), {"x": X}, pytester.path / "wrapped.onnx", False, ["logits"])
    run(pytester, "--trt-update-goldens", *xdist).assert_outcomes(passed=2)
    path = (
        pytester.path / "goldens" / "test_golden" / "test_layers_golden[torch-fp32-bs2].safetensors"
    )
    stored = read_golden(path).outputs
    assert sorted(stored) == ["act", "drop", "lin1", "lin2", "logits"]
    run(pytester, *xdist).assert_outcomes(passed=2)
