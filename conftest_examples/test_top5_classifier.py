"""Example 3: compare what a classifier decides, not its raw scores (Polygraphy's
`--postprocess top-5 --compare indices`).

Shows: `postprocess="top-5"` with `check="indices"` and `index_tolerance`: two classes may
swap neighbouring places in the top 5, nothing more.
"""

from __future__ import annotations

import numpy as np

from pytest_trtcompare import Tolerance

from .conftest import run
from .models import mlp_numpy


def test_top5_classes_agree_between_fp16_and_fp32(compare, mlp_session, batch, weights):
    fp16 = mlp_numpy(batch, weights, dtype=np.float16)
    fp32 = run(mlp_session, batch)
    ranking = Tolerance(check="indices", postprocess="top-5", index_tolerance=1)
    compare(fp16, fp32, ranking, names=["probs"])
