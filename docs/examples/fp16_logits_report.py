"""The failure report of a (8, 1000) float16 output against float32 (README, SPEC §2).

A classifier head with float16 weights and output (numpy accumulates a float16 matmul in
float32, then rounds to float16) against the exact result in float32, at atol = rtol = 1e-3.
Run: python docs/examples/fp16_logits_report.py
"""

from __future__ import annotations

import numpy as np

from pytest_trtcompare import OutputMismatchError, assert_outputs_close


def main() -> None:
    rng = np.random.default_rng(0)
    # Dyadic values: the float64 matmul is exact whatever the BLAS summation order, so this
    # report is the same on every machine. The float16 weights lose their 12th bit.
    features = rng.integers(-64, 64, size=(8, 256)) / 8
    weights = rng.integers(-4096, 4096, size=(256, 1000)) / 2**17
    expected = {"logits": (features @ weights).astype(np.float32)}
    actual = {"logits": features.astype(np.float16) @ weights.astype(np.float16)}
    try:
        assert_outputs_close(actual, expected, atol=1e-3, rtol=1e-3)
    except OutputMismatchError as error:
        print(error)


if __name__ == "__main__":
    main()
