"""A torch twin beside its ONNX export (issue 22, item 1): inputs bound by name first, by
position only where no name can match and the counts agree, never a silent shift; outputs by
name, else by the export's order; each said in describe() and in the failure report."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.errors import FeedError
from pytest_trtcompare.session.twins import as_twin

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run

torch = pytest.importorskip("torch")

MODULES = """
import torch


class Gate(torch.nn.Module):
    '''forward(x, mask): the export's input order.'''

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, mask):
        return {"gated": self.fc(x) * mask, "raw": self.fc(x)}


class GateSwapped(Gate):
    '''The same model with its parameters the other way round, and a default added.'''

    def forward(self, mask, x, scale=1.0):
        return super().forward(x, mask)


class Renamed(Gate):
    '''Names the export does not use: bound by position (and "gated" 1% off).'''

    def forward(self, features, weights):
        out = super().forward(features, weights)
        return {"gated": out["gated"] * 1.01, "raw": out["raw"]}
"""


@pytest.fixture(scope="module")
def gate(tmp_path_factory):
    namespace: dict = {}
    exec(MODULES, namespace)
    path = tmp_path_factory.mktemp("gate") / "gate.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            namespace["Gate"]().eval(),
            (torch.rand(2, 4), torch.rand(2, 4)),
            str(path),
            input_names=["x", "mask"],
            output_names=["gated", "raw"],
            dynamic_shapes=({0: "batch"}, {0: "batch"}),
        )
    return path, namespace


def test_parameters_in_another_order_bind_by_name_with_the_right_values(gate):
    path, namespace = gate
    reference = runners.create("onnxrt", path)
    twin = as_twin(runners.create("torch", namespace["GateSwapped"]()), reference)
    rng = np.random.default_rng(0)
    feed = {"x": rng.random((2, 4), np.float32), "mask": rng.random((2, 4), np.float32)}
    got, want = twin.infer(feed), reference.infer(feed)
    np.testing.assert_allclose(got["gated"], want["gated"], rtol=1e-5, atol=1e-6)
    # what binding by position would have computed: same shapes, other numbers
    x, mask = (torch.from_numpy(feed[name]) for name in ("x", "mask"))
    shifted = namespace["GateSwapped"]()(x, mask)["gated"].detach().numpy()
    assert not np.allclose(shifted, want["gated"], rtol=1e-2)
    assert twin.describe()["twin_names"]["inputs"] == {
        "x": "x (by name)",
        "mask": "mask (by name)",
    }
    assert twin.binding_note == ""


def test_names_that_cannot_match_go_by_position_and_the_report_says_so(gate):
    path, namespace = gate
    reference = runners.create("onnxrt", path)
    twin = as_twin(runners.create("torch", namespace["Renamed"]()), reference)
    twin.infer({"x": np.ones((1, 4), np.float32), "mask": np.ones((1, 4), np.float32)})
    assert twin.binding_note == "inputs by position: x -> features, mask -> weights"


def test_inputs_that_cannot_be_bound_are_an_error_not_a_shift(gate):
    path, _ = gate
    reference = runners.create("onnxrt", path)

    class OneRequired(torch.nn.Module):
        def forward(self, features, weights=None, **kwargs):
            return features

    with pytest.raises(FeedError) as info:
        as_twin(runners.create("torch", OneRequired()), reference)
    assert str(info.value).startswith(
        "torch-fp32: cannot bind the reference's input(s) ['x', 'mask'] to "
        "forward(features, weights=None, **kwargs): no parameter has their names and 1 "
        "unnamed required parameter(s) ['features'] cannot take 2 by position"
    )


@pytest.mark.parametrize("xdist", XDIST)
def test_a_twin_in_a_marked_test_reports_how_it_was_bound(pytester, xdist, gate):
    path, _ = gate
    (pytester.path / "gate.onnx").write_bytes(path.read_bytes())
    pytester.makepyfile(
        gate_modules=MODULES,
        test_twin="""
        import pytest
        from gate_modules import GateSwapped, Renamed

        @pytest.mark.compare_frameworks(model="gate.onnx", frameworks=["onnxrt", "torch"],
                                        models={"torch": GateSwapped().eval()})
        @pytest.mark.shapes({"x": (3, 4), "mask": (3, 4)})
        def test_swapped(comparison):
            assert list(comparison.outputs) == ["gated", "raw"]

        @pytest.mark.compare_frameworks(model="gate.onnx", frameworks=["onnxrt", "torch"],
                                        models={"torch": Renamed().eval()})
        @pytest.mark.shapes({"x": (3, 4), "mask": (3, 4)})
        def test_renamed_fails():
            pass
        """,
    )
    pytester.syspathinsert()
    result = run(pytester, "-rf", "--trt-report=r.json", *xdist)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*torch-fp32 vs onnxrt-fp32 (inputs by position: x -> features, mask -> weights): "
            "1 of 2 outputs out of tolerance*"
        ]
    )
    report = json.loads((pytester.path / "r.json").read_text())
    torch = [d for d in report["runners"].values() if d["runner"] == "torch-fp32"]
    assert len(torch) == 2  # one per twin: the same runner is not described bare as well
    runners = {  # two torch twins: one description each, named by each test's records
        entry["test"].split("[")[0]: report["runners"][entry["target_runner"]]
        for entry in report["outputs"]
    }
    assert runners["test_swapped"]["twin_names"]["inputs"]["mask"] == "mask (by name)"
    assert runners["test_renamed_fails"]["twin_names"]["inputs"]["mask"] == (
        "weights (by position)"
    )


def test_outputs_that_match_neither_way_say_what_to_give(gate):
    path, namespace = gate

    class Three(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = namespace["Gate"]()

        def forward(self, x, mask):
            out = self.inner(x, mask)
            return out["gated"], out["raw"], x

    reference = runners.create("onnxrt", path)
    twin = as_twin(runners.create("torch", Three()), reference)
    twin.infer({"x": np.ones((1, 4), np.float32), "mask": np.ones((1, 4), np.float32)})
    assert twin.binding_note == (
        "outputs neither by name nor by position: the twin returns ['output_0', 'output_1', "
        "'output_2'], the reference ['gated', 'raw']; give the twin output_names=[...] (3 "
        "names) or outputs=[...] (the ones to compare)"
    )


def test_command_line_shapes_that_leave_an_input_out_say_where_to_give_it(pytester, gate):
    path, _ = gate
    (pytester.path / "gate.onnx").write_bytes(path.read_bytes())
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.compare_frameworks(model="gate.onnx", frameworks=["onnxrt", "onnxref"])
        @pytest.mark.shapes({"x": (3, 4), "mask": (3, 4)})
        def test_gate():
            pass
        """
    )
    result = pytester.runpytest("--trt-input-shapes=x:2x4")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "InputDataError: input mask: float32[[]batch, 4[]] has dynamic dimensions: give its "
            "shape in @pytest.mark.shapes or shapes=, e.g. {'mask': (1, 4)} (--trt-input-shapes "
            "replaces the test's shape sets: give every dynamic input there, *"
        ]
    )
