"""Example 7: golden outputs — compare today's outputs with the ones saved when they were
known to be right (Polygraphy's `--save-outputs` / `--load-outputs`, per test).

Shows: `golden.inputs(runner)` (the inputs stored with the golden, so every run and machine
uses the same numbers), `golden.check(outputs, precision=...)`, and a second golden of the
same test under `name=`, and the fixtures' types for annotations (`GoldenFixture`,
`RunnersFixture`: the `runners` fixture caches runners for the session). The goldens are
committed in `goldens/test_goldens/`; refresh them after an intended change with
`pytest conftest_examples --trt-update-goldens`.
"""

from __future__ import annotations

from typing import Any

from pytest_trtcompare import GoldenFixture, RunnersFixture
from pytest_trtcompare.runners import create

from .models import mlp_model


def test_mlp_against_its_golden(golden: GoldenFixture, runners: RunnersFixture, weights: Any):
    runner = runners.onnxrt(mlp_model(weights))
    feed = golden.inputs(runner, shapes={"x": (2, 64)})
    golden.check(runner.infer(feed), precision="fp32")


def test_fp16_reference_evaluator_against_its_own_golden(golden: GoldenFixture, weights: Any):
    runner = create("onnxref", mlp_model(weights), "fp16")
    feed = golden.inputs(runner, shapes={"x": (2, 64)}, name="fp16")
    golden.check(runner.infer(feed), name="fp16", precision="fp16")
