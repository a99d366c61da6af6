"""Example 2: a float16 deployment of the MLP against the fp32 model, at the fp16 tolerance.

Shows: real float16 arithmetic (numpy computes every op in float16 here), `precision="fp16"`
picking the fp16 default (atol = rtol = 1e-2), and reading the statistics of a passing result.
"""

from __future__ import annotations

import numpy as np

from .conftest import run
from .models import mlp_numpy


def test_fp16_logits_within_fp16_tolerance(compare, mlp_session, batch, weights):
    fp16 = mlp_numpy(batch, weights, dtype=np.float16)
    fp32 = run(mlp_session, batch)
    result = compare(fp16, fp32, precision="fp16")
    logits = result.outputs["logits"]
    assert logits.actual_dtype == "float16" and logits.max_abs_error > 0  # really float16
    assert logits.margin < 1  # how close to failing: worst error / allowed error
