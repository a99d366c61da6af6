"""Example 4: different tolerances per output and a statistic check.

Shows: a tolerance table keyed by output name with "" as the default (Polygraphy's
`--atol 1e-5 probs:1e-3`), and `check="quantile"`: the 99th percentile of the error must
stay within tolerance, so a handful of outliers do not fail the test.
"""

from __future__ import annotations

import numpy as np

from pytest_trtcompare import Tolerance

from .conftest import run
from .models import mlp_numpy


def test_probabilities_tighter_than_logits(compare, mlp_session, batch, weights):
    fp16 = mlp_numpy(batch, weights, dtype=np.float16)
    fp32 = run(mlp_session, batch)
    table = {
        "": Tolerance(atol=2e-2, rtol=2e-2),
        "probs": Tolerance(atol=2e-3, rtol=5e-2, check="quantile", quantile=0.99),
    }
    result = compare(fp16, fp32, table)
    assert result.outputs["probs"].tolerance.check == "quantile"
