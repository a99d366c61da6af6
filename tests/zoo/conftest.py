"""The exported zoo, made once per test session and shared by pytest-xdist's workers, and a
pytester whose test files can build zoo models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from filelock import FileLock

from . import models

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(__file__).resolve().parent / "site"


class Zoo:
    """`zoo.onnx(name)`: the model's export, written on first use (under a lock, so xdist
    workers export each model once)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def onnx(self, name: str) -> Path:
        path = self.folder / f"{name}.onnx"
        with FileLock(str(self.folder / f"{name}.lock")):
            if not path.is_file():
                models.export(name, self.folder)
        return path


@pytest.fixture(scope="session")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> Zoo:
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by the workers of this run
    folder = base / "zoo"
    folder.mkdir(exist_ok=True)
    return Zoo(folder)


@pytest.fixture
def zoo_pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester whose test files can `from tests.zoo.models import build`, in-process and in
    subprocesses (xdist workers, isolated runners' workers: the torchvision hook too)."""
    pytester.syspathinsert(ROOT)
    path = os.pathsep.join([str(ROOT), str(SITE), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path.rstrip(os.pathsep))
    return pytester
