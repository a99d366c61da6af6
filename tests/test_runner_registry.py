"""Third-party runners register under the entry-point group `pytest_trtcompare.runners`."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pytest

from pytest_trtcompare import runners


@pytest.fixture
def third_party_runner(tmp_path, monkeypatch):
    """An installed-looking distribution 'acme-runner' whose entry point names AcmeRunner."""
    package = tmp_path / "acme_runner.py"
    package.write_text(
        textwrap.dedent(
            """
            import numpy as np
            from pytest_trtcompare.runners.base import Runner, TensorSpec

            class AcmeRunner(Runner):
                framework = "acme"
                precisions = ("fp32", "fp16")

                def __init__(self, model, precision="fp32", *, scale=1.0):
                    super().__init__(precision)
                    self.scale = scale

                def input_specs(self):
                    return [TensorSpec("x", "float32", (None,))]

                def output_names(self):
                    return ["y"]

                def _infer(self, feed):
                    return {"y": feed["x"] * self.scale}
            """
        )
    )
    dist = tmp_path / "acme_runner-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-runner\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[pytest_trtcompare.runners]\nacme = acme_runner:AcmeRunner\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))


def test_entry_point_runner_is_created_and_listed(third_party_runner):
    assert runners.known_runners()["acme"] == "acme_runner:AcmeRunner"
    runner = runners.create("acme", None, "fp16", scale=2.0)
    assert runner.name == "acme-fp16"
    assert runner.infer({"x": np.array([1.0, 2.0], np.float32)})["y"].tolist() == [2.0, 4.0]


def test_entry_point_runner_gets_the_same_checks(third_party_runner):
    from pytest_trtcompare.errors import FeedError, PrecisionUnsupported

    with pytest.raises(PrecisionUnsupported, match="acme runs fp32, fp16, not bf16"):
        runners.create("acme", None, "bf16")
    with pytest.raises(FeedError, match="input 'x' is float64, the model expects float32"):
        runners.create("acme", None).infer({"x": np.zeros(2)})


def test_the_registry_serves_what_each_built_in_runner_declares():
    declared = {name: runners.capabilities(name) for name in ("onnxrt", "onnxref", "torch", "trt")}
    assert {name: cls.takes for name, cls in declared.items()} == {
        "onnxrt": ("onnx",),
        "onnxref": ("onnx",),
        "torch": ("torch",),
        "trt": ("onnx",),
    }
    assert [name for name, cls in declared.items() if cls.isolated] == ["trt"]
    assert [name for name, cls in declared.items() if "cuda" in cls.devices] == ["torch", "trt"]
    assert [name for name, cls in declared.items() if cls.float64] == ["onnxref", "torch"]
    assert runners.capabilities("tensorrt") is declared["trt"]  # the library's name
    assert runners.capabilities("callable:pkg.mod:fn").takes == ("callable",)
    assert runners.capabilities("no-such-runner") is runners.Runner  # creating it says why


def test_a_name_and_variant_is_cut_in_one_place():
    assert runners.framework_of("callable:pkg.mod:fn") == "callable"
    assert runners.framework_of("tensorrt") == "trt"
    assert runners.framework_of("onnxrt") == "onnxrt"


def test_a_third_party_runner_declares_what_it_can_do(third_party_runner, tmp_path, monkeypatch):
    """An isolated-by-default runner is built in a worker without being asked; one with ONNX
    layer names pairs per layer with onnxrt (session/spec.py reads the declarations)."""
    source = tmp_path / "acme_runner.py"
    source.write_text(
        source.read_text().replace(
            'precisions = ("fp32", "fp16")',
            'precisions = ("fp32", "fp16")\n    isolated = True\n    layer_names = "onnx"',
        )
    )
    monkeypatch.delitem(sys.modules, "acme_runner", raising=False)  # an earlier test's
    acme = runners.capabilities("acme")
    assert acme.isolated and acme.layer_names == "onnx"
    runner = runners.create("acme", None, scale=3.0)
    try:
        assert type(runner).__name__ == "IsolatedRunner"
        assert runner.infer({"x": np.array([1.0], np.float32)})["y"].tolist() == [3.0]
    finally:
        runner.close()
    from pytest_trtcompare.session.spec import layer_pairs

    assert layer_pairs().startswith("onnxrt, onnxref, openvino, acme and trt with each other")


def test_options_keyed_by_a_name_and_variant_say_to_key_them_by_the_runner():
    from pytest_trtcompare.errors import MarkerError
    from pytest_trtcompare.session.spec import compare_spec

    with pytest.raises(MarkerError) as raised:
        compare_spec(
            (),
            {
                "frameworks": ["callable:mod:keep", "callable:mod:drop"],
                "options": {"callable:mod:keep": {"output_names": ["y"]}},
            },
            "test_x.py::test_x",
        )
    assert str(raised.value) == (
        "test_x.py::test_x: @pytest.mark.compare_frameworks(options=...) names "
        "'callable:mod:keep': key it by the runner's name, 'callable' (it applies to every "
        "callable listed)"
    )
