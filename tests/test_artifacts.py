"""Failure artifacts: arrays, heatmaps, histograms, the per-layer plot; pytest glue and CLI."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_trtcompare import compare_outputs
from pytest_trtcompare.cli import main
from pytest_trtcompare.session import plots
from pytest_trtcompare.session.artifacts import write

from .pytester_helpers import XDIST_SLOW as XDIST
from .pytester_helpers import run


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


@pytest.mark.filterwarnings("error")
def test_an_all_nan_slice_stays_nan_without_a_warning():
    """NaN errors (an fp16 overflow's inf - inf) over a whole slice: NaN in the picture, no
    RuntimeWarning (which -W error would turn into unwritten artifacts)."""
    errors = np.full((2, 3, 4), np.nan)
    errors[0, 1, 2] = 5.0
    image, _, _ = plots.heatmap_view(errors)
    assert image[1, 2] == 5.0 and np.isnan(image[0, 0])


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


# -- equal errors (issue 26) --------------------------------------------------------------------
def test_errors_all_equal_write_their_arrays_and_pictures(tmp_path):
    """float64 outputs off by the same amount: log10 errors equal up to rounding, which numpy
    cannot cut into 60 bins ("Too many bins for data range")."""
    pytest.importorskip("matplotlib")
    expected = np.random.default_rng(0).standard_normal((8, 8))
    actual = expected + 0.5
    result = compare_outputs({"y": actual}, {"y": expected})
    made = write(result, {"y": actual}, {"y": expected}, tmp_path)
    assert sorted(p.name for p in made.files) == [
        "y.actual.npy",
        "y.expected.npy",
        "y.heatmap.png",
        "y.histogram.png",
    ]
    assert (tmp_path / "y.histogram.png").stat().st_size > 10_000


def test_the_histogram_range_of_one_value_is_a_decade_around_it():
    logs = np.log10(np.abs((np.random.default_rng(1).standard_normal(64) + 0.5) - 0.5 + 0.25))
    assert plots.log_range(logs) == (float(logs.min()), float(logs.max()))
    single = np.full(5, -0.30103) + np.array([0, 1e-16, 0, 2e-16, 0])
    low, high = plots.log_range(single)
    assert low == pytest.approx(-0.80103) and high == pytest.approx(0.19897)


EQUAL_ERRORS = """
import numpy as np

def test_shifted(compare):
    expected = np.random.default_rng(0).standard_normal((8, 8))
    compare({"y": expected + 0.5}, {"y": expected})
"""


def test_a_failure_with_equal_errors_lists_its_artifacts(pytester):
    pytest.importorskip("matplotlib")
    pytester.makepyfile(test_shifted=EQUAL_ERRORS)
    result = pytester.runpytest("--trt-artifacts-dir=arts")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*artifacts: *arts/test_shifted.py__test_shifted*", "*y.histogram.png"]
    )
    assert "could not be written" not in result.stdout.str()


# -- --trt-artifacts=none|failed|all (issue 26) -------------------------------------------------
MIXED = """
import numpy as np
import pytest
from tests.onnx_models import layer_chain

def test_fails(compare):
    compare({"y": np.full((4, 4), 1.5, np.float32)}, {"y": np.ones((4, 4), np.float32)})

def test_passes(compare):
    compare({"y": np.ones((4, 4), np.float32)}, {"y": np.ones((4, 4), np.float32)})

@pytest.mark.compare_frameworks(model=layer_chain(), frameworks=["onnxrt", "onnxref"])
@pytest.mark.shapes({"x": (2, 16)})
def test_frameworks():
    pass
"""

FOLDERS = {
    "none": [],
    "failed": ["test_mixed.py__test_fails"],
    "all": [
        "test_mixed.py__test_fails",
        "test_mixed.py__test_frameworks[onnxref-fp32-bs2]",
        "test_mixed.py__test_passes",
    ],
}


def _names(folders):
    """Folder names without the digest safe_file_stem adds to tell similar ids apart."""
    return sorted(folder.name.split("~")[0] for folder in folders)


def _mixed(pytester):
    root = __import__("pathlib").Path(__file__).parents[1]
    pytester.makeconftest(f"import sys\nsys.path.insert(0, {str(root)!r})\n")
    pytester.makepyfile(test_mixed=MIXED)


@pytest.mark.parametrize("xdist", XDIST)
@pytest.mark.parametrize("mode", ["none", "failed", "all"])
def test_each_mode_writes_what_it_says(pytester, mode, xdist):
    _mixed(pytester)
    result = run(pytester, "--trt-artifacts-dir=arts", f"--trt-artifacts={mode}", *xdist)
    result.assert_outcomes(passed=2, failed=1)
    arts = pytester.path / "arts"
    folders = sorted(arts.iterdir()) if arts.exists() else []
    assert _names(folders) == FOLDERS[mode]
    for folder in folders:
        names = sorted(p.name for p in folder.iterdir())
        assert names[:2] == ["y.actual.npy", "y.expected.npy"]
    text = result.stdout.str()
    if mode == "none":
        assert "artifacts" not in text  # the report says nothing about them
    else:
        result.stdout.fnmatch_lines(
            ["E       artifacts: */arts/test_mixed.py__test_fails*", "E         y.actual.npy"]
        )
        assert text.count("artifacts: ") == 1  # passing tests print nothing


def test_the_ini_sets_the_mode_and_the_option_wins(pytester):
    _mixed(pytester)
    pytester.makeini("[pytest]\ntrtcompare_artifacts_mode = none\n")
    result = pytester.runpytest("--trt-artifacts-dir=arts")
    result.assert_outcomes(passed=2, failed=1)
    assert not (pytester.path / "arts").exists()
    result = pytester.runpytest("--trt-artifacts-dir=arts", "--trt-artifacts=failed")
    assert _names((pytester.path / "arts").iterdir()) == FOLDERS["failed"]


@pytest.mark.parametrize("xdist", XDIST)
def test_a_bad_mode_is_a_usage_error_naming_the_values(pytester, xdist):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = run(pytester, "--trt-artifacts=some", *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.re_match_lines(  # how argparse quotes the choices differs by Python version
        [
            r".*error: argument --trt-artifacts: invalid choice: 'some' "
            r"\(choose from '?none'?, '?failed'?, '?all'?\)"
        ]
    )
    pytester.makeini("[pytest]\ntrtcompare_artifacts_mode = everything\n")
    result = run(pytester, *xdist)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: ini trtcompare_artifacts_mode = 'everything': takes none, failed, all"]
    )
