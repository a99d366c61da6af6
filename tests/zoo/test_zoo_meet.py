"""The zoo's third shelf (issue 45): the models where two features met and a verdict went
wrong, each run as a user runs it and with a planted change that must fail.

- timm's MobileNetV3, whose BatchNormAct2d (a BatchNorm subclass with its activation inside)
  both exporters fold into the Conv before it: per layer, the Conv's own output has no
  counterpart (it is listed), the norm's activation is compared, nothing fails falsely.
- An LSTM and a GRU on a dynamic sequence: per layer, the recurrent layer's output is
  compared (its states, unused by the export, are listed).
- resnet18 quantized to int8 (QDQ) against the float model it came from.
- A TorchScript `while` exported as a Loop and a torch.cond exported as an If, whose trip
  count and branch follow the input: goldens of several iterations, every one checked; per
  layer, the Loop's body is named as what cannot be paired."""

from __future__ import annotations

import json

import pytest

from .torchvision_ops import install

install()  # before anything imports torchvision (transformers and timm do)
pytest.importorskip("timm")

from ..pytester_helpers import XDIST_SLOW as XDIST  # noqa: E402
from ..pytester_helpers import run  # noqa: E402
from . import models  # noqa: E402

PER_LAYER = """
import copy
import pytest
import torch
from tests.zoo.models import build

TWIN = build({name!r}).module
PLANTED = copy.deepcopy(TWIN)
with torch.no_grad():
    PLANTED.get_parameter({parameter!r}).mul_(1.05)


@pytest.mark.compare_frameworks(
    model={path!r}, frameworks=["onnxrt", "torch"], models={{"torch": TWIN}}, outputs="all"
)
@pytest.mark.shapes({shapes!r})
def test_layers(comparison):
    pass


@pytest.mark.compare_frameworks(
    model={path!r}, frameworks=["onnxrt", "torch"], models={{"torch": PLANTED}}, outputs="all"
)
@pytest.mark.shapes({shapes!r})
def test_planted(comparison):
    pass
"""
#: the models whose planted twin is run too (the dynamo MobileNetV3 pairs as the legacy
#: one does: its unchanged twin is what a false divergence would fail)
PLANTED = ("mobilenetv3_legacy", "lstm", "gru")

#: per model: the parameter scaled by 1.05 in the planted twin, the layers compared, and the
#: torch outputs listed as without a counterpart
LAYERS = {
    "mobilenetv3": ("bn1.weight", 90, 103),  # Identity modules (drop, aa) among them
    "mobilenetv3_legacy": ("bn1.weight", 91, 102),
    "lstm": ("rnn.weight_ih_l0", 3, 2),
    "gru": ("rnn.weight_ih_l0", 3, 1),
}


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize("name", list(LAYERS))
def test_per_layer_pairs_folded_norms_and_recurrent_layers(zoo, zoo_pytester, name, xdist):
    parameter, compared, unmatched = LAYERS[name]
    planted = parameter.rpartition(".")[0]
    entry = models.build(name)
    source = PER_LAYER.format(
        name=name, path=str(zoo.onnx(name)), shapes=entry.shapes, parameter=parameter
    )
    zoo_pytester.makepyfile(**{f"test_{name}": source})
    selected = () if name in PLANTED else ("-k", "not planted")
    result = run(zoo_pytester, "-rfE", "--trt-report=r.json", *selected, *xdist)
    assert "Traceback" not in result.stdout.str()
    if name in PLANTED:  # the planted change is found where it was made
        result.assert_outcomes(passed=1, failed=1)
        result.stdout.fnmatch_lines(
            [f"first divergence (topological order): * = torch {planted}*, layer * of *"]
        )
    else:
        result.assert_outcomes(passed=1)
    report = json.loads((zoo_pytester.path / "r.json").read_text())
    layers = {entry["test"].split("::")[-1].split("[")[0]: entry for entry in report["layers"]}
    passing = layers["test_layers"]
    assert passing["passed"], passing
    assert (passing["compared"], passing["unmatched"]) == (compared, unmatched)
    if name.startswith("mobilenetv3"):  # the stem's Conv holds the folded norm: not paired
        assert "conv_stem" in passing["unmatched_modules"]
    else:  # the recurrent layer's output is compared; its final states are listed
        assert "rnn:0" not in passing["unmatched_modules"]
        assert {"rnn:1", "rnn:1.0"} & set(passing["unmatched_modules"])


QDQ = """
import copy
import pytest
import torch
from tests.zoo.models import build

FLOAT = build("qdq_resnet18").module
PLANTED = copy.deepcopy(FLOAT)
with torch.no_grad():
    PLANTED.layer3[0].conv1.weight.mul_(1.3)
INT8 = dict(atol=0.03, rtol=0.1)  # int8 against float: 0.009 at most on logits of 0.3


@pytest.mark.compare_frameworks(
    model={path!r}, frameworks=["onnxrt", "torch"], reference="torch",
    models={{"torch": FLOAT}}, tolerance=INT8, iterations=3,
)
@pytest.mark.shapes({{"x": (2, 3, 32, 32)}})
def test_int8_against_float(comparison):
    assert comparison.outputs["logits"].cosine_similarity > 0.999


@pytest.mark.compare_frameworks(
    model={path!r}, frameworks=["onnxrt", "torch"], reference="torch",
    models={{"torch": PLANTED}}, tolerance=INT8, iterations=3,
)
@pytest.mark.shapes({{"x": (2, 3, 32, 32)}})
def test_planted(comparison):
    pass


@pytest.mark.compare_frameworks(  # per layer: the int8 model's tensors are the reference;
    model={path!r}, frameworks=["onnxrt", "torch"], models={{"torch": FLOAT}},  # 0.053 at most
    tolerance=dict(atol=0.1, rtol=0.1), outputs="all",
)
@pytest.mark.shapes({{"x": (2, 3, 32, 32)}})
def test_layers(comparison):
    pass
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_a_qdq_int8_model_against_its_float_twin(zoo, zoo_pytester, xdist):
    zoo_pytester.makepyfile(test_qdq=QDQ.format(path=str(zoo.onnx("qdq_resnet18"))))
    result = run(zoo_pytester, "-rfE", "--trt-report=r.json", *xdist)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_qdq.py::test_planted[[]onnxrt-fp32-bs2[]] - *"])
    report = json.loads((zoo_pytester.path / "r.json").read_text())
    (layers,) = report["layers"]
    # the tensors the quantizer fused past their module (a Conv's output under its Relu's
    # name) are left unpaired: every pairing made compares what the twin's module computed
    assert layers["passed"] and (layers["compared"], layers["unmatched"]) == (32, 29), layers


LOOPED = """
import os
import pytest
from tests.zoo.models import build

MODEL = os.environ.get("MODEL", {path!r})


@pytest.mark.compare_frameworks(
    model=MODEL, frameworks=["onnxrt"], golden=True, iterations=6, val_range=(-0.5, 1.5)
)
@pytest.mark.shapes({{"x": (2, 8)}})
def test_golden(comparison):
    pass


@pytest.mark.compare_frameworks(
    model=MODEL, frameworks=["onnxrt", "torch"], models={{"torch": build({name!r}).module}},
    iterations=6, val_range=(-0.5, 1.5),
)
@pytest.mark.shapes({{"x": (2, 8)}})
def test_twin(comparison):
    pass


@pytest.mark.compare_frameworks(
    model=MODEL, frameworks=["onnxrt", "torch"], models={{"torch": build({name!r}).module}},
    outputs="all",
)
@pytest.mark.shapes({{"x": (2, 8)}})
def test_layers(comparison):
    pass
"""


def _planted(path, folder):
    """The export with the then-branch's scale (cond) or the loop's bias (loop) changed."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    graphs = [model.graph]
    graphs += [a.g for node in model.graph.node for a in node.attribute if a.HasField("g")]
    for graph in graphs:
        for tensor in graph.initializer:
            values = numpy_helper.to_array(tensor)
            if values.dtype == np.float32 and (values.size == 8 or values.shape == ()):
                tensor.CopyFrom(numpy_helper.from_array(values * np.float32(1.1), tensor.name))
                planted = folder / "planted.onnx"
                onnx.save(model, planted)
                return planted
    raise AssertionError(f"{path}: no initializer to plant a change in")


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize("name", ["loop", "cond"])
def test_loop_and_if_goldens_of_several_iterations(zoo, zoo_pytester, name, xdist, monkeypatch):
    from pytest_trtcompare.goldens import read_golden

    path = zoo.onnx(name)
    zoo_pytester.makepyfile(test_looped=LOOPED.format(path=str(path), name=name))
    written = run(zoo_pytester, "-rfE", "--trt-update-goldens", "-k", "not layers", *xdist)
    written.assert_outcomes(passed=2)
    (golden,) = (zoo_pytester.path / "goldens" / "test_looped").glob("*.safetensors")
    iterations = read_golden(golden).iterations
    means = [float(it.inputs["x"].mean()) for it in iterations]
    assert len(iterations) == 6 and min(means) < 0.5 < max(means), means  # both paths taken
    run(zoo_pytester, "-k", "golden", *xdist).assert_outcomes(passed=1)
    monkeypatch.setenv("MODEL", str(_planted(path, zoo_pytester.path)))
    changed = run(zoo_pytester, "-rfE", "-k", "golden", *xdist)
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(["*model changed since the golden was recorded*"])
    monkeypatch.delenv("MODEL")
    layers = run(zoo_pytester, "-rfE", "-k", "layers", *xdist)
    if name == "loop":  # the Linear runs inside the Loop's body: said, not a wrong pairing
        layers.assert_outcomes(errors=1)
        layers.stdout.fnmatch_lines(
            [
                "*LayerMatchError: outputs='all': the modules of the torch twin Loop that the "
                "export records (lin (in /Loop)) run inside a subgraph (a Loop or If body)*"
            ]
        )
    else:
        layers.assert_outcomes(passed=1)


SCRIPTED = """
import pytest
import torch
from tests.zoo.models import build

SCRIPTED = torch.jit.script(build("loop").module)


@pytest.mark.compare_frameworks(
    model={path!r}, frameworks=["onnxrt", "torch"], models={{"torch": SCRIPTED}}, outputs="all"
)
@pytest.mark.shapes({{"x": (2, 8)}})
def test_layers(comparison):
    pass
"""


def test_a_torchscript_twin_per_layer_is_named_as_unhookable(zoo, zoo_pytester):
    zoo_pytester.makepyfile(test_scripted=SCRIPTED.format(path=str(zoo.onnx("loop"))))
    result = run(zoo_pytester, "-rfE", "-W", "ignore::DeprecationWarning")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ModelLoadError: torch runner: outputs='all' reads each submodule's output through "
            "forward hooks, which torch does not run on a TorchScript module*"
        ]
    )


RECURRENT_FP16 = """
import pytest
from tests.zoo.models import build


@pytest.mark.compare_frameworks(model={path!r}, frameworks=["onnxrt"])
@pytest.mark.shapes({{"x": (2, 7, 6)}})
def test_onnxrt(comparison):
    pass


@pytest.mark.compare_frameworks(
    model={path!r}, frameworks=["onnxrt", "onnxref"], tolerance={{"atol": 0.05, "rtol": 0.05}}
)
@pytest.mark.shapes({{"x": (2, 7, 6)}})
def test_onnxref(comparison):
    pass
"""


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_an_fp16_recurrent_session_that_would_crash_is_skipped_not_run(zoo, zoo_pytester, name):
    """onnxruntime 1.32's CPU provider ends the process building a float16 LSTM or GRU
    session (exit 139: no summary, no report); the runner builds it in a child process
    first and skips, naming why. The reference evaluator runs it."""
    path = zoo.onnx(name)
    zoo_pytester.makepyfile(test_fp16=RECURRENT_FP16.format(path=str(path)))
    result = run(zoo_pytester, "-rs", "--trt-precision=fp16")
    assert result.ret == 0
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            f"SKIPPED * onnxruntime CPU has no float16 kernel for {name.upper()}, and building "
            "such a session ends the process (SIGSEGV in a child process that tried; *"
        ]
    )
