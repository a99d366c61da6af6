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


@pytest.fixture(scope="session", autouse=True)
def _imports_before_pytester(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Import, in this process, what the zoo's models and torch.onnx.export import lazily.

    pytester's in-process runs drop the modules first imported inside them; some of torch's
    register process-wide state when imported (torch._inductor's cache artifacts), and an
    export after a run that dropped them fails ("Artifact of type=autotune already
    registered"). A forward of each model and one small export here import them for good."""
    import warnings

    import torch

    from pytest_trtcompare import runners
    from pytest_trtcompare.session.runs import make_feeds

    for name in (*models.NAMES, "cond"):  # torch.cond runs through torch._dynamo
        entry = models.build(name)
        runner = runners.create("torch", entry.module)
        runner.infer(make_feeds(runner, shapes=entry.shapes)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            torch.nn.Linear(2, 2),
            (torch.ones(1, 2),),
            str(tmp_path_factory.mktemp("warm") / "l.onnx"),
        )


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
