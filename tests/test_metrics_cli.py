"""`trtcompare debug-precision --check NAME=VALUE`: metric checks from the shell."""

from __future__ import annotations

import json

import onnx
import pytest

from pytest_trtcompare.cli import main
from pytest_trtcompare.cli.debug_precision import parse_check
from pytest_trtcompare.compare import Tolerance

from .planted_models import planted


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "planted.onnx"
    onnx.save_model(planted(8, 8), str(path))
    return path


@pytest.mark.parametrize(
    ("text", "tolerance"),
    [
        ("cosine=0.999", Tolerance(check="cosine", threshold=0.999)),
        ("cosine>=0.999", Tolerance(check="cosine", threshold=0.999)),
        ("l2<=1e-3", Tolerance(check="l2", threshold=1e-3)),
        ("snr=25", Tolerance(check="snr", threshold=25)),
        ("kl", Tolerance(check="kl")),
        ("check=mean atol=1e-3", Tolerance(check="mean", atol=1e-3)),
    ],
)
def test_parse_check(text, tolerance):
    assert parse_check(text) == tolerance


@pytest.mark.parametrize("check", ["cosine=0.99999", "snr=40", "top1=1"])
def test_a_metric_check_alone_finds_the_planted_nodes(model_file, capsys, check):
    argv = ["debug-precision", str(model_file), "--shapes", "x:1x64", "--json", "--check", check]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["keep_fp32"] == ["plant_add", "plant_sub"] and report["passed"] is True


def test_metric_and_elementwise_checks_together(model_file, capsys):
    argv = ["debug-precision", str(model_file), "--atol", "1e-2", "--rtol", "1e-2"]
    assert main([*argv, "--check", "cosine>=0.99999", "--check", "l2<=1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["keep_fp32"] == ["plant_add", "plant_sub"]


@pytest.mark.parametrize(
    ("check", "message"),
    [
        ("cosine=1.5", "--check: 'cosine=1.5': threshold of check='cosine' must be in [-1, 1]"),
        ("l2=-1", "threshold of check='l2' must be finite and >= 0, got -1.0"),
        ("l2>=1", "--check: l2 is a maximum: write l2<=1 instead of 'l2>=1'"),
        ("snr=loud", "threshold 'loud' is not a number"),
        ("cosinus=0.9", "--check 'cosinus=0.9': 'cosinus' is not a check (cosine, l2, snr"),
    ],
)
def test_bad_metric_checks_exit_2_with_one_line(model_file, capsys, check, message):
    assert main(["debug-precision", str(model_file), "--check", check]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
