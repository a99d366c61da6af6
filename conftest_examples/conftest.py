"""Fixtures shared by the example accuracy suite."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from .models import mlp_model, mlp_weights


@pytest.fixture(scope="session")
def weights() -> list[np.ndarray]:
    return mlp_weights(seed=0)


@pytest.fixture(scope="session")
def mlp_session(weights) -> ort.InferenceSession:
    """ONNX Runtime on CPU, built once for the whole session."""
    model = mlp_model(weights)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.fixture
def batch() -> np.ndarray:
    """A seeded input batch: the same numbers on every machine."""
    return np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)


def run(session: ort.InferenceSession, x: np.ndarray) -> dict[str, np.ndarray]:
    names = [out.name for out in session.get_outputs()]
    return dict(zip(names, session.run(names, {"x": x}), strict=True))
