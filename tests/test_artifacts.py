"""Failure artifacts: arrays, heatmaps, histograms, the per-layer plot; pytest glue and CLI."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_trtcompare import compare_outputs
from pytest_trtcompare.cli import main
from pytest_trtcompare.session import plots
from pytest_trtcompare.session.artifacts import write

from .pytester_helpers import XDIST, run


def _drifted_block():
    rng = np.random.default_rng(0)
    expected = rng.standard_normal((64, 64)).astype(np.float32)
    actual = expected + rng.standard_normal((64, 64)).astype(np.float32) * 1e-4
    actual[20:28, 40:52] += 0.05
    return actual, expected


def test_arrays_and_pictures_of_a_drifted_block(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.image

    actual, expected = _drifted_block()
    result = compare_outputs({"fmap": actual}, {"fmap": expected}, atol=1e-3, rtol=1e-3)
    made = write(result, {"fmap": actual}, {"fmap": expected}, tmp_path)
    names = sorted(p.name for p in made.files)
    assert names == [
        "fmap.actual.npy",
        "fmap.expected.npy",
        "fmap.heatmap.png",
        "fmap.histogram.png",
    ]
    np.testing.assert_array_equal(np.load(tmp_path / "fmap.actual.npy"), actual)
    image = matplotlib.image.imread(tmp_path / "fmap.heatmap.png")
    assert image.shape[0] > 300 and image.shape[1] > 400 and image.std() > 0.05
    assert "artifacts: " in made.describe() and "fmap.heatmap.png" in made.describe()


def test_heatmap_reduction_of_higher_ranks():
    errors = np.zeros((2, 3, 8, 8))
    errors[1, 2, 5, 6] = 1.0
    image, ylabel, xlabel = plots.heatmap_view(errors)
    assert image.shape == (8, 8) and image[5, 6] == 1.0 and image.sum() == 1.0
    assert ylabel == "axis 2 (max over axes 0..1)" and xlabel == "axis 3"
    assert plots.heatmap_view(np.ones(5))[0].shape == (1, 5)


def test_without_matplotlib_arrays_are_saved_and_the_hint_given(tmp_path, monkeypatch):
    monkeypatch.setattr(plots, "available", lambda: False)
    actual, expected = _drifted_block()
    result = compare_outputs({"fmap": actual}, {"fmap": expected}, atol=1e-3, rtol=1e-3)
    made = write(result, {"fmap": actual}, {"fmap": expected}, tmp_path)
    assert sorted(p.suffix for p in made.files) == [".npy", ".npy"]
    assert "pip install pytest-trtcompare[plots]" in made.describe()


def test_nothing_is_written_for_a_passing_comparison(tmp_path):
    result = compare_outputs({"y": np.ones(3)}, {"y": np.ones(3)})
    assert write(result, {"y": np.ones(3)}, {"y": np.ones(3)}, tmp_path / "none") is None
    assert not (tmp_path / "none").exists()


def test_cli_diff_writes_the_same_pictures(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    actual, expected = _drifted_block()
    np.savez(tmp_path / "a.npz", fmap=actual)
    np.savez(tmp_path / "b.npz", fmap=expected)
    code = main(
        [
            "diff",
            str(tmp_path / "a.npz"),
            str(tmp_path / "b.npz"),
            "--atol",
            "1e-3",
            "--rtol",
            "1e-3",
            "--plots",
            str(tmp_path / "plots"),
        ]
    )
    assert code == 1
    assert (tmp_path / "plots" / "fmap.heatmap.png").is_file()
    assert f"artifacts: {tmp_path / 'plots'}" in capsys.readouterr().out


FAILING = """
import numpy as np
import pytest

@pytest.mark.parametrize("case", ["a", "b"])
def test_drift(compare, case):
    rng = np.random.default_rng(0)
    expected = rng.standard_normal((64, 64)).astype(np.float32)
    actual = expected.copy()
    actual[20:28, 40:52] += 0.05 if case == "a" else 0.08
    compare({"fmap": actual}, {"fmap": expected}, atol=1e-3, rtol=1e-3)
"""


@pytest.mark.parametrize("xdist", XDIST)
def test_failing_items_name_their_own_artifact_folder(pytester, xdist):
    pytest.importorskip("matplotlib")
    pytester.makepyfile(test_drift=FAILING)
    result = run(pytester, "--trt-artifacts-dir", "arts", *xdist)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*artifacts: *arts/test_drift.py__test_drift*a*", "*fmap.heatmap.png*"]
    )
    folders = sorted(p for p in (pytester.path / "arts").iterdir() if p.is_dir())
    assert len(folders) == 2  # one per item: nothing overwritten, with or without -n
    for folder, drift in zip(folders, (0.05, 0.08), strict=True):
        saved = np.load(folder / "fmap.actual.npy") - np.load(folder / "fmap.expected.npy")
        assert saved.max() == pytest.approx(drift)
        assert (folder / "fmap.histogram.png").is_file()


def test_default_folder_is_under_basetemp(pytester):
    pytester.makepyfile(test_drift=FAILING)
    result = pytester.runpytest("test_drift.py::test_drift[a]")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*artifacts: */trtcompare-artifacts/test_drift.py__test_drift*"])


def test_per_layer_plot_marks_the_first_divergence(pytester):
    pytest.importorskip("matplotlib")
    root = __import__("pathlib").Path(__file__).parents[1]
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(root)!r})\n")
    pytester.makepyfile(
        test_layers="""
        import pytest
        from tests.onnx_models import layer_chain

        @pytest.mark.compare_frameworks(
            model=layer_chain(), frameworks=["onnxrt", "onnxref"], outputs="all",
            models={"onnxref": layer_chain(perturb_layer=2)},  # a broken third layer
            tolerance={"atol": 1e-4, "rtol": 1e-4},
        )
        @pytest.mark.shapes({"x": (2, 16)})
        def test_layers():
            pass
        """
    )
    result = pytester.runpytest("--trt-artifacts-dir", "arts")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*first divergence (topological order): bias2 (Add) -> add2*", "*layers.png*"]
    )
    (layers,) = list((pytester.path / "arts").rglob("layers.png"))
    assert layers.stat().st_size > 10_000


def test_pytest_html_shows_the_pictures(pytester):
    pytest.importorskip("pytest_html")
    pytest.importorskip("matplotlib")
    pytester.makepyfile(test_drift=FAILING)
    result = pytester.runpytest(
        "test_drift.py::test_drift[a]", "--html", "report.html", "--self-contained-html"
    )
    result.assert_outcomes(failed=1)
    html = (pytester.path / "report.html").read_text()
    assert html.count("data:image/png;base64") >= 2
