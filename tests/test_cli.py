"""The trtcompare console script (issue 2 scope: show and diff of .npz / .npy files)."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
import sys

import numpy as np
import pytest

from pytest_trtcompare import runners
from pytest_trtcompare.cli import main


@pytest.fixture
def saved(tmp_path):
    expected = {"logits": np.linspace(0, 1, 100, dtype=np.float32), "ids": np.arange(5)}
    actual = {name: value.copy() for name, value in expected.items()}
    actual["logits"][42] += 0.5
    np.savez(tmp_path / "expected.npz", **expected)
    np.savez(tmp_path / "actual.npz", **actual)
    return tmp_path


def test_diff_reports_and_exits_1_on_mismatch(saved, capsys):
    assert main(["diff", str(saved / "actual.npz"), str(saved / "expected.npz")]) == 1
    out = capsys.readouterr().out
    assert "1 of 2 outputs out of tolerance: logits" in out
    assert "greatest abs error 0.5 at (42,)" in out
    assert "passed: ids (int64 vs int64, shape (5,))" in out


def test_diff_with_tolerances_exits_0(saved, capsys):
    argv = ["diff", str(saved / "actual.npz"), str(saved / "expected.npz"), "--atol", "0.6"]
    assert main(argv) == 0
    assert main([*argv[:3], "--check-error-stat", "median"]) == 0


def test_show_lists_outputs(saved, capsys):
    assert main(["show", str(saved / "expected.npz")]) == 0
    out = capsys.readouterr().out
    assert "output logits: float32 (100,)  min 0  max 1" in out and "output ids: int64 (5,)" in out


@pytest.mark.parametrize("name", ["outputs.csv", "outputs.pt", "outputs.txt", "model.onnx"])
def test_files_of_other_formats_are_named_with_the_formats_read(tmp_path, capsys, name):
    (tmp_path / name).write_bytes(b"PK\x03\x04 not ours")
    assert main(["show", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert (
        f"{tmp_path / name}: not a format of saved outputs that trtcompare reads "
        "(.safetensors and .golden goldens, " in err
    )
    assert "Polygraphy JSON .json, .npz, .npy, or a folder of ONNX test data)" in err


def test_a_missing_golden_as_outputs_is_called_a_file(tmp_path, capsys):
    assert main(["show", str(tmp_path / "nope.safetensors")]) == 2
    err = capsys.readouterr().err
    assert f"trtcompare: {tmp_path / 'nope.safetensors'} does not exist" in err


def test_bad_files_name_the_file(tmp_path, capsys):
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    assert main(["show", str(tmp_path / "junk.npz")]) == 2
    assert f"{tmp_path / 'junk.npz'}: not readable outputs" in capsys.readouterr().err
    assert main(["show", str(tmp_path / "nope.npz")]) == 2
    assert "nope.npz does not exist" in capsys.readouterr().err
    np.save(tmp_path / "objects.npy", np.array([object()], dtype=object), allow_pickle=True)
    assert main(["show", str(tmp_path / "objects.npy")]) == 2
    assert "objects.npy: not readable outputs" in capsys.readouterr().err


def test_console_script_is_installed():
    result = subprocess.run(
        [sys.executable, "-m", "pytest_trtcompare.cli", "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0 and "diff" in result.stdout and "show" in result.stdout


def test_version_names_the_plugin_and_the_libraries(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    first, second = capsys.readouterr().out.splitlines()
    assert (
        first == f"trtcompare (pytest-trtcompare) {importlib.metadata.version('pytest-trtcompare')}"
    )
    assert second.startswith(f"python {platform.python_version()}, numpy {np.__version__}, ")
    for library in runners.libraries():  # the runners' libraries, as the report header
        assert f", {library.name} " in second
    assert second.endswith(f"pytest {pytest.__version__}")


@pytest.mark.parametrize("command", ["diff a b", "show a", "check g o", "debug-precision m.onnx"])
def test_an_unknown_option_shows_the_commands_usage(capsys, command):
    words = command.split()
    with pytest.raises(SystemExit) as exited:
        main([*words, "--bogus"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: trtcompare {words[0]} ")
    assert err.endswith(f"trtcompare {words[0]}: error: unrecognized arguments: --bogus\n")


def test_diff_takes_the_tolerance_a_golden_stored(saved, capsys):
    actual, expected = str(saved / "actual.npz"), str(saved / "expected.npz")
    golden = str(saved / "expected.safetensors")
    argv = ["check", golden, expected, "--atol", "0.6", "--update"]
    assert main(argv) == 0  # writes the golden with atol=0.6 in its metadata
    capsys.readouterr()
    assert main(["diff", actual, golden]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"tolerance: stored in {golden}\nall 2 outputs within tolerance")
    assert main(["diff", golden, actual]) == 0  # the first argument's, when the second has none
    assert capsys.readouterr().out.startswith(f"tolerance: stored in {golden}\n")
    assert main(["diff", actual, golden, "--atol", "0.1"]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"tolerance: stored in {golden}, overridden by --atol\n")
    assert "elemwise tolerance atol=0.1 (option) rtol=1e-05 (golden)" in out


def test_diff_without_a_stored_tolerance_says_which_it_used(saved, capsys):
    actual, expected = str(saved / "actual.npz"), str(saved / "expected.npz")
    assert main(["diff", actual, expected]) == 1
    assert capsys.readouterr().out.startswith("tolerance: the default\n")
    assert main(["diff", actual, expected, "--atol", "0.6", "--rtol", "0"]) == 0
    assert capsys.readouterr().out.startswith("tolerance: --atol, --rtol given\n")


def test_check_reads_an_old_golden_names_its_format_and_update_rewrites_it(saved, capsys):
    from pytest_trtcompare.goldens.store import read_golden, write_golden

    from .golden_bytes import as_format_2

    expected = dict(np.load(saved / "expected.npz"))
    write_golden(saved / "g.safetensors", expected)
    old = as_format_2(saved / "g.safetensors")
    args = ["check", str(old), str(saved / "expected.npz")]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert f"trtcompare: {old} is a golden of the old format 2; rewrite it as " in err
    assert f"  trtcompare check {old} {saved / 'expected.npz'} --update" in err
    assert main([*args, "--update"]) == 0
    assert f"updated: {saved / 'g.safetensors'}" in capsys.readouterr().out
    assert not old.exists() and read_golden(saved / "g.safetensors").version == 3
    assert main(args) == 0  # the old name finds the new golden
    assert "old format" not in capsys.readouterr().err


def test_show_into_a_pipe_closed_early_says_nothing(tmp_path):
    """`trtcompare show G | head`: the reader closing the pipe is no error of the golden's."""
    from pytest_trtcompare.goldens import write_golden

    path = tmp_path / "big.safetensors"
    write_golden(path, {f"y{i}": np.arange(64, dtype=np.float32) for i in range(2000)})
    script = "from pytest_trtcompare.cli import main; raise SystemExit(main())"
    process = subprocess.Popen(
        [sys.executable, "-c", script, "show", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stdout.readline().startswith(b"output y0")
    process.stdout.close()  # as head does after its lines
    _, stderr = process.communicate(timeout=60)
    assert stderr == b"" and process.returncode == 0


@pytest.mark.parametrize("command", ["check", "import-polygraphy"])
def test_a_golden_is_never_written_over_saved_outputs(tmp_path, capsys, command):
    """`trtcompare check kept.npz new.npz --update` (the golden's place given someone's .npz)
    once turned the .npz into a golden under its old name: the command refuses, untouched."""
    kept = tmp_path / "kept.npz"
    np.savez(kept, y=np.ones(3, np.float32))
    before = kept.read_bytes()
    np.savez(tmp_path / "new.npz", y=np.zeros(3, np.float32))
    args = {
        "check": ["check", str(kept), str(tmp_path / "new.npz"), "--update"],
        "import-polygraphy": ["import-polygraphy", str(tmp_path / "new.npz"), str(kept)],
    }[command]
    assert main(args) == 2
    assert f"{kept}: a golden is a .safetensors file" in capsys.readouterr().err
    assert kept.read_bytes() == before
