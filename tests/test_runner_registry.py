"""Third-party runners register under the entry-point group `pytest_trtcompare.runners`."""

from __future__ import annotations

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
